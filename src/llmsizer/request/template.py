"""The commented request template (``llmsizer request new``), written from the field table so it always lists
every field the reader accepts: fields with a good example are filled in, the others are commented out with
their meaning. Tests check the template validates and mentions every field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .fields import JOB_FIELDS, TOP, Field

HEADER = """\
# llmsizer request: the resources for training / fine-tuning and for serving, each job described separately so
# each can be checked against resources. Validate: llmsizer request check FILE; plan: llmsizer plan FILE.
# Units are written as you would say them: "2 TB", "80GiB", "500k tokens", "8k" (= 8192 tokens), "3 days",
# "$20k". GB = 10^9 bytes, GiB = 2^30 bytes. Lines starting with '#' are optional fields you may fill in.
"""

# examples that differ between the template's training and inference jobs (or are job-specific)
OVERRIDES: dict[tuple[str, str], Any] = {
    ("training", "name"): "support-finetune",
    ("inference", "name"): "support-chat",
    ("training", "kind"): "training",
    ("inference", "kind"): "inference",
    ("training", "resources.device"): None,  # the instance brings its device and price
    ("training", "resources.instance"): "aws-p5.4xlarge",
    ("inference", "resources.device"): None,
    ("inference", "resources.instance"): "azure-standard_nc24ads_a100_v4",
    ("inference", "resources.storage"): "200 GB",
    ("inference", "resources.pool"): "serving-cluster",
    ("inference", "budget.total"): "$40k",
}

_PLAIN = re.compile(r"[A-Za-z0-9$][A-Za-z0-9 ._/@+%$-]*")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "none", "y", "n", "~"}


def yaml_scalar(v: Any) -> str:
    """A YAML scalar for ``v``: plain when unambiguous, else double-quoted (JSON strings are valid YAML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return f"{v:g}" if isinstance(v, float) else str(v)
    s = str(v)
    looks_number = re.fullmatch(r"[-+]?[0-9._]+(e[-+]?[0-9]+)?", s, re.IGNORECASE) is not None
    if _PLAIN.fullmatch(s) and s.lower() not in _RESERVED and not looks_number and not s.endswith(" ") \
            and ": " not in s and " #" not in s:
        return s
    return json.dumps(s, ensure_ascii=False)


def _value(f: Field, v: Any) -> str:
    if f.type == "dist" and isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {yaml_scalar(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_scalar(x) for x in v) + "]"
    return yaml_scalar(v)


SHORT_HINT = {
    "size": "e.g. 2 TB, 80GiB", "count": "e.g. 40k", "tokens": "e.g. 500k tokens", "context": "e.g. 4096, 8k",
    "duration": "e.g. 3 days, 12h", "interval": "e.g. 2h or 500 steps", "money": "USD", "money_h": "USD/h",
    "money_month": "USD/month", "bandwidth": "e.g. 10 Gb/s, 500 MB/s", "network": "e.g. efa-p5, 400 Gb/s",
    "rate": "e.g. 5/s, 300/min",
    "share": "e.g. 0.4 or 40%", "date": "YYYY-MM-DD", "deadline": "a date or a duration from the start",
    "str_list": "a list", "dist": "{typical: .., peak: ..}", "ratios": "e.g. [3, 1]",
}


def _comment(f: Field) -> str:
    hint = SHORT_HINT.get(f.type, "")
    if f.type == "enum":
        hint = " | ".join(f.choices)
    return f"{f.doc} ({hint})" if hint and hint not in f.doc else f.doc


def _emit(fields: tuple[Field, ...], indent: str, kind: str | None, path: str, out: list[str]) -> None:
    for f in fields:
        if f.type == "jobs":
            continue
        key = f"{path}.{f.name}" if path else f.name
        overridden = (kind or "", key) in OVERRIDES
        example = OVERRIDES[(kind or "", key)] if overridden else f.example
        lead = indent
        if f.type == "section":
            shown = f.template and any(c.template for c in f.fields)
            if shown:
                out.append(f"{lead}{f.name}:  # {f.doc}")
                _emit(f.fields, indent + "  ", kind, key, out)
            else:
                out.append(f"{lead}# {f.name}:  # {f.doc}")
                for c in f.fields:
                    out.append(f"{indent}#   {c.name}:  # {_comment(c)}")
            continue
        if (f.template or overridden) and example is not None:
            out.append(f"{lead}{f.name}: {_value(f, example)}  # {_comment(f)}")
        else:
            out.append(f"{indent}# {f.name}:  # {_comment(f)}")


def template() -> str:
    """A commented request with one training and one inference job (every field shown)."""
    out = [HEADER.rstrip("\n")]
    _emit(TOP, "", None, "", out)
    out.append("jobs:  # the training and inference jobs, each described separately")
    for kind in ("training", "inference"):
        out.append(f"  # ---- a{'n' if kind == 'inference' else ''} {kind} job "
                   + "-" * (90 - len(kind)))
        fields = tuple(f for f in JOB_FIELDS if kind in f.kinds)
        start = len(out)
        _emit(fields, "    ", kind, "", out)
        out[start] = "  - " + out[start][4:]  # the job's first key opens the list item
    return "\n".join(out) + "\n"

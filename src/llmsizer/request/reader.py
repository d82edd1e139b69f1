"""Read a request file (YAML, or JSON, which is YAML too) into a :class:`~llmsizer.request.spec.Request`.

The file is *composed* into PyYAML's node tree rather than loaded, so every key and value keeps its line
(``node.start_mark.line``). Each value is validated against the field table (``fields.py``); every problem
becomes one line naming the file, the line, the job, the field and what to write instead::

    support.yaml:23: job 'chat' (inference): traffic.concurrency.peak: cannot read 'lots' as a number; ...
    support.yaml:31: job 'chat' (inference): unknown key 'maintenance_window' in service; did you mean
        'maintenance_windows'?

All problems are collected before raising :class:`RequestError` (its ``errors`` list holds the lines).
PyYAML is imported here, lazily: ``import llmsizer`` does not pay for it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import FieldError, InputError, LlmsizerError
from ..inputs import check_model_name, foreign_tag, not_true_or_false, read_small_text, text_arg, yaml_problem
from ..inputs import short as _short
from ..numbers import (
    AMOUNT,
    COUNT,
    MAX_GPUS,
    POSITIVE,
    SPLIT_SHARE,
    TOKENS,
    Range,
    check_number,
    exactly_whole,
    not_a_boolean,
)
from ..specs.training import TrainingWorkload, layout_devices, tensor_split_refusal, uneven_machines
from ..specs.workload import (
    ENGINE_SETTINGS,
    ENGINES,
    InferenceWorkload,
    implied_engine,
    normalize_engine,
    parse_engine_version,
)
from ..suggest import did_you_mean
from . import quantities as Q
from .fields import INFER_PRECISIONS, JOB_FIELDS, TOP, Field, job_fields
from .spec import (
    UNQUANTIZED,
    Access,
    Adapters,
    Budget,
    Checkpoints,
    Dataset,
    Deadline,
    Dist,
    EngineSettings,
    Handover,
    InferenceJob,
    Interval,
    Latency,
    Logs,
    Media,
    ModelRef,
    Operations,
    Peft,
    Pricing,
    Request,
    Resources,
    Service,
    TopBudget,
    Traffic,
    TrainingJob,
    TrainingSettings,
)
from .windows import FORMS, parse_window


def _weight_format_hint(f: Field, text: str) -> str:
    """An inference job's ``precision`` given a weight format's name (awq-int4, q4_k_m): where that goes, the
    ``quantization:`` key (probe20 D6); '' for any other field or value."""
    if f.name != "precision" or f.choices != INFER_PRECISIONS:  # (a training job's settings.precision: a recipe)
        return ""
    from ..formulas.weight_formats import normalize_format
    try:
        normalize_format(text)
    except InputError:
        return ""
    return f"; a weight format goes in `quantization:` (e.g. quantization: {text.strip().lower()})"


class RequestError(InputError):
    """A request file is invalid. ``errors`` holds one line per problem (file:line: job: field: message)."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


# section name -> class, per scope
JOB_SECTIONS: dict[str, type] = {
    "model": ModelRef, "resources": Resources, "budget": Budget, "pricing": Pricing, "peft": Peft,
    "settings": TrainingSettings, "dataset": Dataset, "checkpoints": Checkpoints, "handover": Handover,
    "adapters": Adapters, "engine_settings": EngineSettings, "media": Media, "traffic": Traffic, "latency": Latency, "service": Service, "access": Access,
    "operations": Operations, "operations.logs": Logs,
}
TOP_SECTIONS: dict[str, type] = {"budget": TopBudget, "pricing": Pricing}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

# The largest request a person or a generator writes is far smaller: the examples are ~3 KB, a 200-job request
# ~60 KB. Past 1 MiB the file is a mistake (or hostile), and reading it would cost seconds and hundreds of MB.
MAX_REQUEST_BYTES = 2**20
# A request describes one team's workloads: the examples hold 1 to 3 jobs. 1,000 jobs plan in a few seconds;
# ten times as many took minutes, so more is refused rather than left running.
MAX_JOBS = 1000
_PLAIN_COUNT_WORDS = ("examples", "documents", "docs", "users", "requests", "sequences", "params", "parameters",
                      "devices", "steps")


def _closest(word: str, options: Sequence[str]) -> str:
    """The one closest name, as every "did you mean" words it (suggest.py)."""
    return did_you_mean(word, options, n=1)


class _Reader:
    def __init__(self, source: str, base_dir: Path, hardware_files: Sequence[str | Path], check_names: bool) -> None:
        try:
            import yaml  # lazily: only request files need PyYAML
        except ImportError:  # pragma: no cover - PyYAML is a core dependency
            raise InputError("reading request files needs PyYAML (pip install pyyaml)") from None

        self.yaml = yaml
        self.source = source
        self.base_dir = base_dir
        self.hardware_files = tuple(hardware_files)
        self.check_names = check_names
        self.errors: list[tuple[int, str]] = []
        self.failed: set[str] = set()  # line keys of values that already have an error
        self.lines: dict[str, int] = {}
        self.loader: Any = None

    # ------------------------------------------------------------------ errors
    def err(self, node: Any, where: str, path: str, msg: str, lkey: str = "") -> None:
        line = node.start_mark.line + 1 if hasattr(node, "start_mark") else int(node or 0)
        if lkey:
            self.failed.add(lkey)
        if len(path) > 200:  # a key of any length is possible; the line names its start
            path = path[:197] + "..."
        field = f"{path}: " if path else ""
        text = f"{self.source}:{line}: {where}{field}{msg}"
        self.errors.append((line, text.replace("\r", "\\r").replace("\n", "\\n")))  # one line per problem

    # ------------------------------------------------------------------ nodes
    def is_map(self, node: Any) -> bool:
        return isinstance(node, self.yaml.MappingNode)

    def is_seq(self, node: Any) -> bool:
        return isinstance(node, self.yaml.SequenceNode)

    def is_scalar(self, node: Any) -> bool:
        return isinstance(node, self.yaml.ScalarNode)

    def is_null(self, node: Any) -> bool:
        return self.is_scalar(node) and node.tag == "tag:yaml.org,2002:null"

    def construct(self, node: Any) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except Exception as e:  # noqa: BLE001 - "!!int abc", "!!int ''": the safe constructors raise anything
            kind = str(node.tag).rsplit(":", 1)[-1]
            if kind == "timestamp" and isinstance(e, ValueError):  # datetime's own reason: 'month must be in 1..12'
                raise InputError(f"cannot read {_short(node.value)} as a date ({str(e)[:80]}); write "
                                 "YYYY-MM-DD") from None
            raise InputError(f"cannot read {_short(node.value)} as {kind} ({type(e).__name__})") from None

    def pairs(self, node: Any, where: str, path: str) -> list[tuple[str, Any, Any]]:
        """(key, key node, value node) of a mapping; duplicate and non-text keys are errors."""
        out: list[tuple[str, Any, Any]] = []
        seen: dict[str, int] = {}
        for knode, vnode in node.value:
            if not self.is_scalar(knode):
                self.err(knode, where, path, "keys must be plain names")
                continue
            key = str(knode.value)
            if key in seen:
                self.err(knode, where, f"{path}.{key}" if path else key,
                         f"given twice (first on line {seen[key]})")
                continue
            seen[key] = knode.start_mark.line + 1
            out.append((key, knode, vnode))
        return out

    # ------------------------------------------------------------------ values
    def value(self, f: Field, node: Any, where: str, path: str, lkey: str, scope: str) -> Any:
        """Convert one node for field ``f``; on a problem record an error and return None."""
        self.lines[lkey] = node.start_mark.line + 1
        if self.is_null(node):
            return None
        t = f.type
        try:
            if t == "section":
                if not self.is_map(node):
                    raise InputError(f"must be a mapping of keys ({', '.join(c.name for c in f.fields)})")
                return self.section(f, node, where, path, lkey, scope)
            if t == "dist":
                return self.dist(f, node, where, path, lkey)
            if t in ("str_list", "targets") and self.is_seq(node):
                items = []
                for item in node.value:
                    if not self.is_scalar(item) or self.is_null(item) or not str(item.value).strip():
                        raise InputError("list items must be non-empty text")
                    items.append(str(item.value).strip())
                if not items:
                    raise InputError("the list is empty")
                return self.targets(items) if t == "targets" else tuple(items)
            if t == "ratios" and self.is_seq(node):
                return self.ratios([item for item in node.value])
            if not self.is_scalar(node):
                raise InputError(f"must be a single value ({f.doc}), not a "
                                 f"{'list' if self.is_seq(node) else 'mapping'}")
            return self.scalar(f, node)
        except InputError as e:
            self.err(node, where, path, str(e), lkey)
            return None

    def scalar(self, f: Field, node: Any) -> Any:
        v = self.scalar_value(f, node)
        rng = self.range(f)
        if rng is None or v is None:
            return v
        if isinstance(v, Interval):
            if v.steps is not None:
                check_number(v.steps, "", COUNT)
            return v
        return check_number(v, "", rng)  # the one validation layer (issue #15); the caller adds file:line: field

    @staticmethod
    def range(f: Field) -> Range | None:
        """The allowed range of a numeric field: the CLI flag's range it shares, its own bounds, else a documented
        default."""
        if f.bounds is not None:
            return f.bounds
        if f.type == "int":
            return Range(f.minimum if f.minimum is not None else 0,
                         f.maximum if f.maximum is not None else COUNT.high, True,
                         "the request format's bound" if f.maximum is not None else COUNT.why)
        if f.type == "number":
            return Range(f.minimum if f.minimum is not None else 0,
                         f.maximum if f.maximum is not None else POSITIVE.high, False,
                         "the request format's bound" if f.maximum is not None else POSITIVE.why)
        return None  # sizes, counts, tokens, durations, money...: checked by their parsers (quantities.py)

    def scalar_value(self, f: Field, node: Any) -> Any:
        t = f.type
        raw = str(node.value)
        text = raw.strip()
        plain = node.tag == "tag:yaml.org,2002:str"
        if t == "str":
            if not text:
                raise InputError("must not be empty")
            return text
        if t == "str_list":
            if not text:
                raise InputError("must not be empty")
            return (text,)
        if t == "targets":
            return self.targets(text)
        if t == "name":
            if not _NAME.fullmatch(text):
                raise InputError(f"{text!r} is not a valid name; use letters, digits, '-', '_' and '.'")
            return text
        if t == "enum":
            low = normalize_engine(text) if f.choices == ENGINES else text.lower()  # 'llama.cpp' -> 'llamacpp'
            if low in f.choices:
                return low
            raise InputError(f"unknown value {_short(text)}; choose one of: {', '.join(f.choices)}"
                             f"{_weight_format_hint(f, text) or _closest(low, f.choices)}")
        if t == "bool":
            v = self.construct(node)
            if not isinstance(v, bool):
                raise InputError(not_true_or_false(v))
            return v
        v = self.construct(node)
        if t in ("int", "number") and isinstance(v, bool):  # the one wording of a boolean for a number (numbers.py)
            raise InputError(not_a_boolean(v, self.range(f) or AMOUNT))
        if t == "int":
            # a count written as text ('1e30', '40k') is read in the field's own range, so its message is the field's
            n = Q.parse_plain_count(v, _PLAIN_COUNT_WORDS, self.range(f) or AMOUNT) if isinstance(v, str) else v
            if not isinstance(n, (int, float)):
                raise InputError(f"must be a whole number, got {_short(text)}")
            if isinstance(n, float) and n.is_integer() and math.isfinite(n) and not exactly_whole(text):
                # 4.00000000000000001 reads as the float 4.0: whole only to the float's precision
                raise InputError(f"must be a whole number, got {_short(text)}")
            return n
        if t == "number":
            if not isinstance(v, (int, float)):  # text: the CLI's and Python's one reader (units.parse_count:
                # '1.5k' = 1500, a word is numbers.unreadable's message), in the field's own range
                v = Q.parse_plain_count(text, (), self.range(f) or POSITIVE)
            return v
        if t == "size":
            return Q.parse_size(v if not plain else text)
        if t == "count":
            return Q.parse_plain_count(v if not plain else text, _PLAIN_COUNT_WORDS, f.bounds or AMOUNT)
        if t == "tokens":
            return Q.parse_token_count(v if not plain else text)
        if t == "context":
            return Q.parse_context(v if not plain else text, f.bounds or TOKENS)
        if t == "duration":
            return Q.parse_duration(v if not plain else text)
        if t == "interval":
            secs, steps = Q.parse_interval(v if not plain else text)
            return Interval(secs, steps)
        if t == "money":
            return Q.parse_money(v if not plain else text, rates="a rate goes in per_hour or per_month")
        if t == "money_h":
            return Q.parse_money(v if not plain else text, "h")
        if t == "money_month":
            return Q.parse_money(v if not plain else text, "month")
        if t == "bandwidth":
            return Q.parse_bandwidth(v if not plain else text)
        if t == "network":  # fit --network's reader, checked here; its per-port count is the plan's (plan/hardware.py)
            Q.parse_network(v if not plain else text, 1, self.hardware_files)
            return text.strip()
        if t == "rate":
            return Q.parse_rate(v if not plain else text)
        if t == "share":
            return Q.parse_share(v if not plain else text, f.bounds)
        if t == "date":
            return Q.parse_date(v)
        if t == "deadline":
            d, secs = Q.parse_date_or_duration(v)
            return Deadline(d, secs)
        if t == "ratios":
            return self.ratios(text.split(",") if plain else [node])
        if t == "image_size":
            from ..units import parse_image_size
            return parse_image_size(text, what="")
        if t == "weights":
            if text.lower() in ("none", "no", "false", "off"):
                return UNQUANTIZED  # unquantized, pinned; an absent key stays None (the plan may search)
            from ..formulas.weight_formats import format_alias, normalize_format
            fmt = normalize_format(text)  # an unknown name refused here, naming the key
            # an alias kept as written: the plan names what it resolves to (plan/inference.py pinned_weights)
            return text.strip() if format_alias(text) else fmt
        raise InputError(f"field type {t} is not readable here")  # pragma: no cover - table error

    def ratios(self, items: list[Any]) -> tuple[float, ...]:
        """llama.cpp -ts proportions from YAML nodes or text pieces: each a number in SPLIT_SHARE (the CLI's
        --tensor-split range), at most MAX_GPUS of them, not all zero."""
        out: list[float] = []
        for item in items:
            raw = item.strip() if isinstance(item, str) else (self.construct(item) if self.is_scalar(item) else None)
            if isinstance(raw, bool) or raw is None or raw == "":
                raise InputError("must be numbers, one share per GPU ([3, 1] or '3,1')")
            try:
                x = float(raw)
            except (TypeError, ValueError):
                raise InputError(f"must be numbers, one share per GPU ([3, 1] or '3,1'); got {_short(str(raw))}") \
                    from None
            out.append(float(check_number(x, "", SPLIT_SHARE)))
        if not out or len(out) > MAX_GPUS:
            raise InputError(f"must give 1 to {MAX_GPUS} shares (llama.cpp's tensor_split limit)")
        if not sum(out) > 0:
            raise InputError("the shares must not all be 0")
        return tuple(out)

    def targets(self, value: str | list[str]) -> tuple[str, ...]:
        try:
            from ..specs.training import normalize_targets
        except ImportError:  # pragma: no cover - the training spec is another module
            return tuple(value.split(",")) if isinstance(value, str) else tuple(value)
        return normalize_targets(value)

    def dist(self, f: Field, node: Any, where: str, path: str, lkey: str) -> Dist | None:
        item = Field("value", f.item, f.doc, bounds=f.bounds)  # each of typical and peak in the field's range
        if self.is_scalar(node):
            self.lines[lkey + ".typical"] = node.start_mark.line + 1
            v = self.value(item, node, where, path, lkey + ".typical", "job")
            return Dist(typical=v)
        if not self.is_map(node):
            raise InputError("must be a value or {typical: ..., peak: ...}")
        out: dict[str, Any] = {}
        for key, knode, vnode in self.pairs(node, where, path):
            if key not in ("typical", "peak"):
                self.err(knode, where, f"{path}.{key}", f"unknown key in {f.name}; use typical and peak"
                         + _closest(key, ("typical", "peak")), f"{lkey}.{key}")
                continue
            out[key] = self.value(item, vnode, where, f"{path}.{key}", f"{lkey}.{key}", "job")
        return Dist(**out)

    def section(self, f: Field, node: Any, where: str, path: str, lkey: str, scope: str,
                allowed: Sequence[Field] | None = None) -> Any:
        fields = tuple(allowed if allowed is not None else f.fields)
        names = [c.name for c in fields]
        out: dict[str, Any] = {}
        for key, knode, vnode in self.pairs(node, where, path):
            child = next((c for c in fields if c.name == key), None)
            cpath = f"{path}.{key}" if path else key
            if child is None:
                self.err(knode, where, cpath, self.unknown_key_message(key, f, names, scope, where),
                         f"{lkey}.{key}" if lkey else key)
                continue
            ckey = f"{lkey}.{key}" if lkey else key
            out[key] = self.value(child, vnode, where, cpath, ckey, scope)
            self.lines[ckey] = knode.start_mark.line + 1  # the key's line (a block value starts below it)
        for c in fields:
            if c.required and c.name not in out and c.name != "jobs":
                self.err(node, where, f"{path}.{c.name}" if path else c.name, f"is required ({c.doc})",
                         f"{lkey}.{c.name}" if lkey else c.name)
        cls = (TOP_SECTIONS if scope == "top" else JOB_SECTIONS).get(path, None) if path else None
        if cls is None:
            return out
        return cls(**{k: v for k, v in out.items() if v is not None})

    def unknown_key_message(self, key: str, f: Field, names: list[str], scope: str, where: str) -> str:
        section = f"in {f.name}" if f.name else "here"
        if scope == "job" and not f.name:
            other = next((x for x in JOB_FIELDS if x.name == key), None)
            if other is not None:
                return (f"'{key}' applies to {' and '.join(other.kinds)} jobs, not to this one")
        return f"unknown key {_short(key)} {section}{_closest(key, names)} (allowed: {', '.join(names)})"

    # ------------------------------------------------------------------ jobs
    def job(self, index: int, node: Any) -> Any:
        lkey = f"jobs[{index}]"
        self.lines[lkey] = node.start_mark.line + 1
        if not self.is_map(node):
            self.err(node, f"job #{index + 1}: ", "", "must be a mapping with name, kind, model, ...")
            return None
        raw: dict[str, Any] = {}
        for kn, vn in node.value:  # the first of duplicated keys counts, as in pairs()
            if self.is_scalar(kn):
                raw.setdefault(str(kn.value), vn)
        name_node = raw.get("name")
        name = str(name_node.value) if name_node is not None and self.is_scalar(name_node) else f"#{index + 1}"
        if len(name) > 60:  # an invalid name is reported on its own line; the others quote its start
            name = name[:57] + "..."
        kind_node = raw.get("kind")
        kind = str(kind_node.value).strip().lower() if kind_node is not None and self.is_scalar(kind_node) else None
        if kind not in ("training", "inference"):
            kind = None
        where = f"job '{name}'" + (f" ({kind})" if kind else "") + ": "
        fields = job_fields(kind)
        if kind is None:  # an unknown kind is one error: a field required of one kind only is not asked for too
            fields = tuple(dataclasses.replace(f, required=False) if len(f.kinds) < 2 else f for f in fields)
        root = Field("", "section", "job", fields=fields)
        values = self.section(root, node, where, "", lkey, "job")
        if kind is None:
            return None
        values["line"] = node.start_mark.line + 1
        cls = TrainingJob if kind == "training" else InferenceJob
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        except TypeError:  # a required value failed to convert; its error is recorded
            return None

    # ------------------------------------------------------------------ whole file
    def read(self, text: str) -> Request | None:
        yaml = self.yaml
        if len(text) > MAX_REQUEST_BYTES:
            self.errors.append((0, f"{self.source}: {len(text):,} characters is too large for a request "
                                   f"(at most {MAX_REQUEST_BYTES:,}: the largest real requests are ~100 KB)"))
            return None
        try:
            # libyaml's parser when PyYAML has it (same nodes, tags and marks, several times faster on large
            # requests); a file it rejects is parsed again by the pure-Python one, whose messages are the
            # documented ones
            fast = getattr(yaml, "CSafeLoader", None)
            try:
                self.loader = (fast or yaml.SafeLoader)(text)
                root = self.loader.get_single_node()
            except yaml.YAMLError:
                if fast is None:
                    raise
                self.loader = yaml.SafeLoader(text)
                root = self.loader.get_single_node()
        except (yaml.YAMLError, RecursionError) as e:
            self.errors.append(yaml_problem(self.source, e, "a request is at most a few levels deep"))
            return None
        if root is None:
            self.errors.append((1, f"{self.source}:1: the file is empty; start from `llmsizer request new`"))
            return None
        bad_tag = foreign_tag(yaml, root)
        if bad_tag is not None:
            self.err(bad_tag[0], "", "", f"YAML tag {bad_tag[1]} is not allowed in a request; write plain values "
                     "(no '!' tags)")
            return None
        if not self.is_map(root):
            self.err(root, "", "", "the top level must be a mapping with title, jobs, ... "
                     "(start from `llmsizer request new`)")
            return None
        jobs_node = None
        values: dict[str, Any] = {}
        for key, knode, vnode in self.pairs(root, "", ""):
            f = next((c for c in TOP if c.name == key), None)
            if f is None:
                job_key = next((x for x in JOB_FIELDS if x.name == key), None)
                hint = " (it belongs inside a job under jobs:)" if job_key else ""
                self.err(knode, "", key, f"unknown top-level key{hint}{_closest(key, [c.name for c in TOP])} "
                         f"(allowed: {', '.join(c.name for c in TOP)})")
                continue
            if key == "jobs":
                jobs_node = vnode
                self.lines["jobs"] = vnode.start_mark.line + 1
                continue
            values[key] = self.value(f, vnode, "", key, key, "top")
        jobs: list[tuple[int, Any]] = []
        if jobs_node is None:
            self.err(root, "", "jobs", "is required: a list of training and inference jobs")
        elif not self.is_seq(jobs_node) or not jobs_node.value:
            self.err(jobs_node, "", "jobs", "must be a non-empty list of jobs (each starting with '- name: ...')")
        elif len(jobs_node.value) > MAX_JOBS:
            self.err(jobs_node, "", "jobs", f"{len(jobs_node.value):,} jobs is too many for one request (at most "
                     f"{MAX_JOBS:,}); split it into several requests")
        else:
            built = [(i, self.job(i, n)) for i, n in enumerate(jobs_node.value)]
            jobs = [(i, j) for i, j in built if j is not None]
        resolved = self.cross_checks(jobs, values.get("start"))
        if self.errors:
            return None
        return Request(jobs=tuple(resolved), **{k: v for k, v in values.items() if v is not None},
                       source=self.source, base_dir=str(self.base_dir), lines=dict(self.lines))

    # ------------------------------------------------------------------ checks across fields
    def jerr(self, idx: int, job: Any, path: str, msg: str) -> None:
        key = f"jobs[{idx}]" + (f".{path}" if path else "")
        if any(f == key or f.startswith(key + ".") or key.startswith(f + ".") for f in self.failed):
            return  # this field (or the section holding it) already has its own error
        line = self.lines.get(key)
        parts = path.split(".")
        while line is None and parts:
            parts = parts[:-1]
            line = self.lines.get(".".join([f"jobs[{idx}]", *parts]))
        self.err(line or job.line, f"job '{job.name}' ({job.kind}): ", path, msg, key)

    def cross_checks(self, jobs: list[tuple[int, Any]], start: _dt.date | None) -> list[Any]:
        """Checks that need several fields or other jobs; returns the jobs with references resolved."""
        from dataclasses import replace

        names: dict[str, Any] = {}
        for i, j in jobs:
            if j.name in names:
                self.jerr(i, j, "name", f"another job is also named {j.name!r}; job names must be unique")
            names.setdefault(j.name, j)
        out = []
        for i, j in jobs:
            m = j.model
            if isinstance(j, InferenceJob) and m.from_job is not None:
                src = names.get(m.from_job)
                if src is None or not isinstance(src, TrainingJob):
                    trains = [x.name for _, x in jobs if isinstance(x, TrainingJob)]
                    self.jerr(i, j, "model.from_job", f"no training job named {m.from_job!r} in this request"
                              + (f" (training jobs: {', '.join(trains)})" if trains else ""))
                elif m.name is None:
                    j = replace(j, model=replace(m, name=src.model.name))
                    m = j.model
            if m.name is None and m.from_job is None:
                self.jerr(i, j, "model.name", "is required (a catalog name, Hugging Face id or config.json path)"
                          + (" or model.from_job" if isinstance(j, InferenceJob) else ""))
            elif m.name is not None and self.check_names:
                try:
                    resolved = self.model_ref(check_model_name(m.name, "model"))
                    from ..models import load_model
                    load_model(resolved)
                except LlmsizerError as e:
                    self.jerr(i, j, "model.name", str(e))
                except OSError as e:  # a path the operating system refuses (a component over 255 bytes...)
                    self.jerr(i, j, "model.name", f"cannot read {_short(m.name, 40)} ({e.strerror or e})")
                else:
                    if resolved != m.name:
                        j = replace(j, model=replace(m, name=resolved))
            if isinstance(j, TrainingJob):
                self.training_checks(i, j)
            else:
                self.inference_checks(i, j)
            self.resource_checks(i, j)
            begin = j.start or start
            if j.deadline is not None and j.deadline.date is not None and begin is not None \
                    and j.deadline.date <= begin:
                self.jerr(i, j, "deadline", f"{j.deadline.date} is not after the start {begin}")
            self.reach_checks(i, j, begin)
            out.append(j)
        return out

    def reach_checks(self, i: int, j: Any, begin: _dt.date | None) -> None:
        """A deadline given as a duration, and a service's duration, end by quantities.py LATEST_DATE from the
        job's start (its own, else the request's; none given: the command's today, far before it)."""
        if begin is None:
            return
        service = getattr(j, "service", None)
        for path, seconds, what in (("deadline", j.deadline.seconds if j.deadline is not None else None,
                                     "the deadline"),
                                    ("service.duration", getattr(service, "duration", None), "the service")):
            if seconds:
                try:
                    Q.check_reach(begin, float(seconds), what)
                except InputError as e:
                    self.jerr(i, j, path, str(e))

    def model_ref(self, name: str) -> str:
        from ..models import local_paths_allowed
        if not local_paths_allowed():  # the web API: a name is never looked up on the server's disk
            return name
        p = Path(name).expanduser()
        if not p.is_absolute() and (self.base_dir / p).exists():
            return str(self.base_dir / p)
        return name

    def training_checks(self, i: int, j: TrainingJob) -> None:
        if j.resources.fit_target is not None:
            self.jerr(i, j, "resources.fit_target", "applies to inference jobs served by llama.cpp, not to training "
                      "(use resources.headroom)")
        peft_given = any(v is not None for v in vars(j.peft).values())
        # a method refused above reads as the default 'full' here: its own error stands alone (probe21 C1)
        if j.method == "full" and peft_given and f"jobs[{i}].method" not in self.failed:
            self.jerr(i, j, "peft", "parameter-efficient settings are given but method is 'full'; set method "
                      "to lora, dora or qlora, or remove peft")
        ck = j.checkpoints
        if ck.resume and ck.keep == 0:  # keep 0: each checkpoint deleted once written (formulas/storage.py eq. 6)
            self.jerr(i, j, "checkpoints.keep", "0 keeps no checkpoint to resume from, but checkpoints.resume is "
                      "true; keep at least 1 (or set resume: false)")
        s = j.settings
        if s.zero and s.fsdp:
            self.jerr(i, j, "settings.fsdp", "give settings.zero or settings.fsdp, not both")
            return
        fields = j.workload_fields()
        fields["gpus"] = self.device_count(j.resources) or layout_devices(fields)  # unknown: check the rest
        try:
            TrainingWorkload(**fields)
        except InputError as e:
            self.jerr(i, j, "settings", str(e))

    def device_count(self, r: Resources) -> int | None:
        """Devices the resources name: count, or an instance's devices x nodes (None when not stated)."""
        if r.count:
            return r.count
        if r.instance is not None and self.check_names:
            from ..catalog.hardware import Instance, load_catalog
            try:
                hw = load_catalog(self.hardware_files).find(r.instance)
            except LlmsizerError:
                return None  # reported by resource_checks
            if isinstance(hw, Instance):
                return hw.device_count * (r.nodes or 1)
        return r.nodes

    def inference_checks(self, i: int, j: InferenceJob) -> None:
        t = j.traffic
        for name in ("concurrency", "context", "output", "requests_per_second"):
            d: Dist = getattr(t, name)
            if d.typical is not None and d.peak is not None and d.peak < d.typical:
                self.jerr(i, j, f"traffic.{name}.peak", f"peak {d.peak:g} is below typical {d.typical:g}")
        for level in ("typical", "peak"):
            out, ctx = getattr(t.output, level), getattr(t.context, level)
            if out is not None and ctx is not None and out >= ctx:
                self.jerr(i, j, f"traffic.output.{level}", f"{out:g} output tokens do not fit in a context of "
                          f"{ctx:g} (context = prompt + output)")
        if t.concurrency.worst is None and t.requests_per_second.worst is None:
            self.jerr(i, j, "traffic.concurrency", "is required: how many requests are served at once "
                      "({typical: 8, peak: 32}), or give traffic.requests_per_second (requests arriving per second)")
        sv = j.service
        if sv.duration is not None and sv.ongoing:
            self.jerr(i, j, "service.ongoing", "give service.duration or ongoing: true, not both")
        for key in ("maintenance_windows", "interruptible"):  # read once, here: plan, check and capacity alike
            for w in getattr(sv, key) or ():
                if parse_window(w) is None:
                    self.jerr(i, j, f"service.{key}", f"{w!r} is not a window llmsizer can read ({FORMS}); give "
                              "one of those forms (an unreadable window cannot be checked against the provider's "
                              "maintenance)")
                    break
        if j.kv_cache_dtype is not None:
            try:
                from ..formulas.kv_cache import kv_dtype_name
                kv_dtype_name(j.kv_cache_dtype)
            except InputError as e:
                self.jerr(i, j, "kv_cache_dtype", str(e))
        # the engine named, else the one the settings imply (settings of two engines: said once, here)
        engine, settled = self.job_engine(i, j)
        if j.engine_version is not None and settled:  # the workload field's own checks (specs/workload.py), with the line
            try:
                parse_engine_version(j.engine_version)
                if engine is not None and engine not in ENGINE_SETTINGS["engine_version"]:  # (no engine: the
                    # devices' default, kept where it reads it, else refused at plan time, as on the CLI)
                    raise InputError(f"applies to engine {' or '.join(ENGINE_SETTINGS['engine_version'])}, not "
                                     f"{engine or 'the default engine'}; set engine: vllm or sglang")
            except InputError as e:
                self.jerr(i, j, "engine_version", str(e).removeprefix("engine_version "))
        if settled:
            self.engine_settings_checks(i, j, engine)
        if j.tensor_parallel is not None and not j.resources.given:  # (the rest of its rule is fit's, at plan time)
            self.jerr(i, j, "tensor_parallel", "pins the layout of the devices named in resources; give "
                      "resources.device or resources.instance (without them the plan searches hardware, each "
                      "option on fit's own layout)")
        if j.pipeline_parallel is not None and not j.resources.given:  # (the rest of its rule is fit's, at plan time)
            self.jerr(i, j, "pipeline_parallel", "lays out the devices named in resources in stages; give "
                      "resources.device or resources.instance (without them the plan searches hardware, each option "
                      "on fit's own layout)")
        for name in ("data_parallel", "expert_parallel"):  # (the rest of their rule is fit's, at plan time)
            if getattr(j, name) is not None and not j.resources.given:
                self.jerr(i, j, name, "lays out the devices named in resources; give resources.device or "
                          "resources.instance (without them the plan searches hardware, each option on fit's own "
                          "layout)")
        if j.resources.headroom is not None and j.engine is not None:  # the workload's own rule (SGLang keeps none)
            try:
                InferenceWorkload(engine=j.engine, headroom=j.resources.headroom)
            except InputError as e:
                self.jerr(i, j, "resources.headroom", str(e).removeprefix("headroom "))
        if j.resources.fit_target is not None and settled:  # the workload's own rules (llama.cpp's margin; not with a headroom)
            try:
                if engine is None:
                    raise InputError("applies to engine llamacpp, not the default engine; set engine: llamacpp")
                InferenceWorkload(engine=engine, headroom=j.resources.headroom, fit_target=j.resources.fit_target)
            except InputError as e:
                self.jerr(i, j, "resources.fit_target", str(e).removeprefix("fit_target "))
        if (j.adapters.mode is not None or j.adapters.count is not None) and j.model.from_job is None \
                and j.adapters.rank is None:
            self.jerr(i, j, "adapters.rank", "is required when the adapters do not come from a training job of "
                      "this request (model.from_job)")
        if j.adapters.fully_sharded and j.engine is not None and j.engine != "vllm":  # vllm/config/lora.py line 36
            self.jerr(i, j, "adapters.fully_sharded", f"is vLLM's --fully-sharded-loras; engine {j.engine} has no "
                      "such option (SGLang 0.5.23 srt/lora/mem_pool.py lines 111-152 splits A and B one way only)")

    def job_engine(self, i: int, j: InferenceJob) -> tuple[str | None, bool]:
        """(the job's engine, or the one its engine_settings, engine_version and resources.fit_target imply when it
        names none (specs/workload.py ``implied_engine``, as the plan takes them: plan/inference.py
        ``on_implied_engine``); whether its settings are settled): settings no one engine reads together are refused
        once, at the first one's line (False: each setting is not refused again)."""
        if j.engine is not None:
            return j.engine, True
        try:
            implied = implied_engine({**j.engine_settings.fields(), "engine_version": j.engine_version,
                                      "fit_target": j.resources.fit_target})
        except FieldError as e:
            key = e.field if e.field in ("engine_version",) else ("resources.fit_target" if e.field == "fit_target"
                                                                   else f"engine_settings.{e.field}")
            self.jerr(i, j, key, str(e).removeprefix(f"{e.field} "))
            return None, False
        return (implied[0] if implied is not None else None), True

    def engine_settings_checks(self, i: int, j: InferenceJob, engine: str | None) -> None:
        """Each engine setting applies to the engine it belongs to (InferenceWorkload refuses the others the same
        way on the CLI): ``engine``, the job's or the one its settings imply (``job_engine``); None (settings
        several engines read, ``max_num_seqs``): the devices' default, known at plan time, which keeps them where it
        reads them and refuses them otherwise, the CLI's rule (plan/inference.py ``on_default_engine``); -ts gives
        one share per GPU of the job."""
        for name in j.engine_settings.fields():
            owners = " or ".join(ENGINE_SETTINGS[name])  # the workload's one table of which engine reads what
            if engine is not None and engine not in ENGINE_SETTINGS[name]:
                self.jerr(i, j, f"engine_settings.{name}", f"applies to engine {owners}, not "
                          f"{engine if engine else 'the default engine'}; set engine: {owners}")
        ts = j.engine_settings.tensor_split
        n = self.device_count(j.resources)
        if ts is not None and n is not None:  # fit's one rule (specs/training.py tensor_split_refusal)
            try:
                why = tensor_split_refusal(len(ts), n, self.machine_size(j.resources, n))
            except FieldError as e:  # a count that is not whole machines of the default 8
                self.jerr(i, j, "resources.count", str(e))
                return
            if why is not None:
                self.jerr(i, j, "engine_settings.tensor_split", why)

    def machine_size(self, r: Resources, n: int) -> int:
        """The devices of one machine fit lays ``n`` devices out on (estimate/fit.py ``serving_machine_size``, as
        plan/hardware.py tells it): count / resources.nodes, else an instance's devices, else the default 8."""
        if r.nodes:
            return max(1, n // r.nodes)
        if r.instance is not None and r.count is None and self.check_names:
            return n  # one instance named, no count: its devices
        if r.instance is not None and self.check_names:
            from ..catalog.hardware import Instance, load_catalog
            try:
                hw = load_catalog(self.hardware_files).find(r.instance)
            except LlmsizerError:
                return n
            if isinstance(hw, Instance) and hw.device_count:
                return hw.device_count
        return TrainingWorkload.gpus_per_node

    def resource_checks(self, i: int, j: Any) -> None:
        r: Resources = j.resources
        uneven = uneven_machines(r.count, nodes=r.nodes) if r.count is not None and r.nodes is not None else None
        if uneven:  # the one rule fit's --gpus-per-node takes too (specs/training.py uneven_machines)
            self.jerr(i, j, "resources.count", uneven)
        if not self.check_names or (not r.given and r.interconnect is None):
            return
        from ..catalog.hardware import Instance, load_catalog
        try:
            cat = load_catalog(self.hardware_files)
        except LlmsizerError as e:
            self.jerr(i, j, "resources", str(e))
            return
        inst = None
        if r.instance is not None:
            try:
                hw = cat.find(r.instance)
            except LlmsizerError as e:
                self.jerr(i, j, "resources.instance", str(e))
                hw = None
            if hw is not None and not isinstance(hw, Instance):
                self.jerr(i, j, "resources.instance", f"{r.instance!r} is a device, not an instance; write it "
                          "under resources.device")
            elif hw is not None:
                inst = hw
        if r.device is not None:
            try:
                named = cat.find(r.device)
            except LlmsizerError as e:
                self.jerr(i, j, "resources.device", str(e))
            else:
                dev = named.device if isinstance(named, Instance) else named
                if isinstance(named, Instance) and inst is None:  # the plan would size one bare device, unpriced
                    self.jerr(i, j, "resources.device", f"{r.device!r} is an instance ({named.device_count} x "
                              f"{named.device.id}), not a device; write it under resources.instance")
                elif inst is not None and inst.device.id != dev.id:
                    self.jerr(i, j, "resources.device", f"{r.instance} holds {inst.device.id}, not {dev.id}")
        if inst is not None and r.count is not None and r.nodes is None and r.count % inst.device_count:
            self.jerr(i, j, "resources.count", f"{r.count} devices are not whole {inst.id} instances "
                      f"({inst.device_count} devices each); give nodes instead of count, or a count that is a multiple "
                      f"of {inst.device_count} (count / {inst.device_count} instances)")
        elif inst is not None and r.count is not None and r.nodes is not None \
                and r.count != inst.device_count * r.nodes:
            self.jerr(i, j, "resources.count", f"{r.count} devices do not match {r.nodes} x {inst.id} "
                      f"({inst.device_count} devices each); give nodes instead of count")
        if r.interconnect is not None and cat.interconnect(r.interconnect) is None:
            names = sorted(cat.interconnects)
            self.jerr(i, j, "resources.interconnect", f"unknown interconnect {r.interconnect!r}"
                      f"{_closest(r.interconnect, names)} (known: {', '.join(names)})")


def parse_request(text: str, *, source: str = "<request>", base_dir: str | Path = ".",
                  hardware_files: Sequence[str | Path] = (), check_names: bool = True) -> Request:
    """Validate request ``text``; raise :class:`RequestError` listing every problem (file:line: job: field)."""
    r = _Reader(source, Path(base_dir), hardware_files, check_names)
    req = r.read(text)
    if r.errors or req is None:
        errors = [m for _, m in sorted(r.errors, key=lambda e: e[0])]
        raise RequestError(errors or [f"{source}: invalid request"])
    return req


STDIN = "-"  # the request path that means "read standard input"
STDIN_SOURCE = "<stdin>"  # how error messages name standard input


def load_request(path: str | Path, *, hardware_files: Sequence[str | Path] = (), check_names: bool = True) -> Request:
    """Read and validate a request file (YAML or JSON); ``"-"`` reads standard input (errors name
    ``<stdin>:LINE``; relative model paths count from the current folder). A ``path`` that is not text or a path
    (a dict, None) is refused naming ``path`` (inputs.text_arg, the API's entry check)."""
    path = text_arg(path, "path", "a request file's path (text or a Path), or '-' for standard input")
    if path == STDIN:
        try:
            text = sys.stdin.read(MAX_REQUEST_BYTES + 1)
        except UnicodeDecodeError:
            raise InputError(f"request from {STDIN_SOURCE}: not UTF-8 text") from None
        except OSError as e:
            raise InputError(f"request from {STDIN_SOURCE}: cannot read ({e.strerror})") from None
        return parse_request(text, source=STDIN_SOURCE, base_dir=Path.cwd(), hardware_files=hardware_files,
                             check_names=check_names)
    p = Path(path)
    text = read_small_text(p, "request file", MAX_REQUEST_BYTES)

    return parse_request(text, source=str(p), base_dir=p.parent, hardware_files=hardware_files,
                         check_names=check_names)


"""`fit --auto --json`'s "margin" became a list (one entry per GPU) with the one llama.cpp margin rule (dc1227b3),
with no alias for the old single number (issues #12/#16). web/API.md lists the auto-fit answer's keys and says what
"margin" is now; docs/nomenclature.md names the change. Checked against the answer the CLI writes, so a key added,
renamed or retyped without its docs line fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_capture import run

ROOT = Path(__file__).resolve().parents[2]
ARGS = ("fit", "llama-3.1-70b", "--auto", "--device", "rtx-3090", "--count", "2", "--fit-target", "512MiB", "--json")


def _documented_keys() -> list[str]:
    text = (ROOT / "src/llmsizer/web/API.md").read_text()
    body = text[text.index('`{"schema_version", "kind": "llamacpp-fit"'):]
    body = body[:body.index("}`")]
    body = re.sub(r"\([^()]*\)", "", body)  # the explanations in parentheses
    return re.findall(r'"([a-z_]+)"', body.replace('"kind": "llamacpp-fit"', '"kind"'))


def test_api_md_lists_the_autofit_keys() -> None:
    code, out, _ = run(*ARGS)
    assert code == 0
    assert _documented_keys() == list(json.loads(out))


def test_margin_is_one_entry_per_gpu_and_documented_as_such() -> None:
    data = json.loads(run(*ARGS)[1])
    assert data["margin"] == [512 * 2**20] * 2 and len(data["margin"]) == len(data["free"])
    api = (ROOT / "src/llmsizer/web/API.md").read_text()
    assert '"margin" (a list: the bytes kept free on each GPU' in api
    nomenclature = (ROOT / "docs/nomenclature.md").read_text()
    assert re.search(r"^\| `margin` \| `fit --auto --json`.*one number for every GPU", nomenclature, re.M)

"""The newest vLLM / SGLang release llmsizer has data for has one home (estimate/engines.py CURRENT_VERSION): the
newest engine_version of the validation rows, read here from the data files themselves. A newer release is accepted
with the newest rule and a warning that names it (CLI and Python); a known release gets no such warning. Before,
``--engine-version 99.0`` was taken silently, and labels said 0.19 (the default), >= 0.21 (the CUDA graph line) while
rows ran 0.23."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer import estimate_inference, fit
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.engines import CURRENT_VERSION, parse_version, step_host
from llmsizer.estimate.speed import estimate_speed
from llmsizer.models import load_model

VALIDATION = Path(__file__).resolve().parents[1] / "validation"


def newest_in_rows(engine: str) -> tuple[int, int]:
    found = []
    for path in VALIDATION.glob("*.csv"):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row.get("engine") == engine and row.get("engine_version"):
                    found.append(parse_version(row["engine_version"]))
    assert found, engine
    return max(found)


@pytest.mark.parametrize("engine", sorted(CURRENT_VERSION))
def test_the_newest_release_is_the_newest_validation_row(engine: str) -> None:
    assert parse_version(CURRENT_VERSION[engine]) == newest_in_rows(engine)




FIT = ["fit", "qwen3-0.6b", "--device", "h100-sxm", "--context", "640", "--output-tokens", "128"]


@pytest.mark.parametrize("engine, name", [("vllm", "vLLM"), ("sglang", "SGLang")])
def test_a_newer_release_is_warned_and_answered_with_the_newest_rule_on_the_cli(engine: str, name: str) -> None:
    code, out, _ = run(*FIT, "--engine", engine, "--engine-version", "99.0", "--json")
    assert code == 0
    data = json.loads(out)
    note = (f"{name} 99.0 is newer than the newest release llmsizer has data for ({name} {CURRENT_VERSION[engine]}): "
            f"the rules of {CURRENT_VERSION[engine]} are applied")
    assert note in data["warnings"]
    code2, out2, _ = run(*FIT, "--engine", engine, "--engine-version", CURRENT_VERSION[engine], "--json")
    known = json.loads(out2)
    assert code2 == 0 and not any("newer than the newest" in w for w in known["warnings"])
    assert data["speed"]["tokens_per_second_per_user"] == known["speed"]["tokens_per_second_per_user"]
    code3, text, _ = run(*FIT, "--engine", engine, "--engine-version", "99.0")
    assert code3 == 0 and f"warning: {note}" in text


def test_a_newer_release_is_warned_in_python() -> None:
    r = fit("qwen3-0.6b", "h100-sxm", engine="vllm", engine_version="99.0")
    assert any(w.startswith("vLLM 99.0 is newer than the newest release") for w in r.warnings)
    est = estimate_inference("qwen3-0.6b", engine="vllm", engine_version="99.0", device="h100-sxm")
    assert any(w.startswith("vLLM 99.0 is newer than the newest release") for w in est.warnings)
    sp = estimate_speed(load_model("qwen3-0.6b"), builtin_catalog().devices["h100-sxm"], engine="vllm",
                        engine_version="99.0")
    assert any(w.startswith("vLLM 99.0 is newer") for w in sp.warnings)
    assert step_host("vllm", "99.0") == step_host("vllm", None)


@pytest.mark.parametrize("version", ["0.19.0", "0.21.0", "0.23.0", "0.8.5", "0.11.0"])
def test_the_validation_rows_releases_are_known(version: str) -> None:
    r = fit("qwen3-0.6b", "h100-sxm", engine="vllm", engine_version=version)
    assert not any("newer than the newest" in w for w in r.warnings)

"""A fit states one headroom: the one its verdict applied (found by the session-16 probe).

- vLLM: `fit --engine vllm --json` said "headroom": 0.1 at the top and 0.09999999999999998 (1 - 0.9 in binary
  floating point) in the estimate's verdict; with --gpu-memory-utilization 0.8 the top still said 0.1 and a
  "headroom=0.1 (default)" assumption, though vLLM's pool is 0.8 of the memory (the verdict's headroom 0.2).
- SGLang: the top said 0.1, the verdict 1 - mem_fraction_static (0.17 on an H100: SGLang's own default, eq. 1 of
  estimate/inference/sglang.py), and no headroom was applied.
Expected values are the engines' own settings: 1 - the stated utilization, SGLang's mem_fraction_static read from
the answer's own assumption."""

from __future__ import annotations

from typing import Any

import pytest

from cli_capture import run_json


def _headrooms(x: Any) -> list[float]:
    if isinstance(x, dict):
        return [v for k, v in x.items() if k == "headroom" and isinstance(v, float)] + [
            h for v in x.values() for h in _headrooms(v)]
    if isinstance(x, list):
        return [h for v in x for h in _headrooms(v)]
    return []


@pytest.mark.parametrize("flags, expected, assumed", [
    (["--engine", "vllm"], 0.1, True),
    (["--engine", "vllm", "--headroom", "0.15"], 0.15, True),
    (["--engine", "vllm", "--gpu-memory-utilization", "0.8"], 0.2, False),
    (["--engine", "transformers", "--headroom", "0.3"], 0.3, True),
])
def test_every_headroom_of_a_fit_is_the_one_applied(flags: list[str], expected: float, assumed: bool) -> None:
    code, out = run_json("fit", "llama-3.1-8b", "--device", "h100-sxm", *flags)
    assert code == 0
    assert set(_headrooms(out)) == {expected}, _headrooms(out)
    assert any(a["name"] == "headroom" for a in out["assumptions"]) is assumed


def test_sglang_states_its_own_pool_share() -> None:
    code, out = run_json("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "sglang")
    mfs = next(a["value"] for a in out["memory"]["assumptions"] if a["name"] == "mem_fraction_static")
    assert set(_headrooms(out)) == {round(1 - float(mfs), 9)}
    assert not any(a["name"] == "headroom" for a in out["assumptions"])

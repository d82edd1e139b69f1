"""SGLang refuses an uneven split of the routed experts (E % ep != 0: SGLang 0.5.23 srt/layers/moe/
fused_moe_triton/layer.py:414, topk.py:571); the CLI says so in one line naming its own flags, exit 2 (review42
defect 1), and fit's search keeps Qwen3-30B-A3B (128 experts, config.json ``num_experts``) on 6 x L4 at a layout
SGLang loads."""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run


def test_a_given_uneven_split_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fit", "qwen3-30b-a3b", "--device", "l4", "--count", "6", "--engine", "sglang",
                          "--tp", "1", "--dp", "6", "--enable-expert-parallel"], capsys)
    assert code == 2 and not out
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "128 experts over 6" in line and "--dp" in line and "--enable-expert-parallel" in line


def test_the_search_takes_a_loadable_layout(capsys: pytest.CaptureFixture[str]) -> None:
    _, a = answer(["fit", "qwen3-30b-a3b", "--device", "l4", "--count", "6", "--engine", "sglang"], capsys)
    ep = a.get("expert_parallel") and a["tensor_parallel"] * a.get("data_parallel", 1)
    assert not ep or 128 % ep == 0
    assert "--ep-size 6" not in a.get("engine_flags", "")

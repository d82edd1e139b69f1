"""Serving expert parallelism (formulas/serving_expert_parallel.py) against vLLM 0.19.1's own rule, read from the
PyPI wheel (sha256 71a87f46...): fused_moe/config.py FusedMoEParallelConfig.make :1004-1131 (its docstring's table of
devices: TP 2 DP 2 EP on -> TP {1} EP {4}; EP off -> TP {4} EP {1}), fused_moe/layer.py determine_expert_map :107-109
(E // ep each, the first E % ep ranks one more)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmsizer import estimate_inference
from llmsizer.errors import InputError
from llmsizer.formulas.serving_expert_parallel import local_experts, moe_split, sequences_per_rank
from llmsizer.formulas.tensor_parallel import quant_block_refusal
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.models import load_model


@pytest.mark.parametrize(("tp", "dp", "ep_on", "want"), [
    (2, 1, False, (2, 1)),  # "TP = 2, DP = 1 and EP = False": TP {2}, EP {1}
    (1, 2, False, (2, 1)),  # "TP = 1, DP = 2 and EP = False": TP {2} (flattened), EP {1}
    (2, 2, False, (4, 1)),  # "TP = 2, DP = 2 and EP = False": TP {4}, EP {1}
    (2, 1, True, (1, 2)),   # "TP = 2, DP = 1 and EP = True": TP {1}, EP {2}
    (1, 2, True, (1, 2)),   # "TP = 1, DP = 2 and EP = True": TP {1}, EP {2}
    (2, 2, True, (1, 4)),   # "TP = 2, DP = 2 and EP = True": TP {1}, EP {4}
    (1, 1, True, (1, 1)),   # use_ep needs dp x tp > 1 (:1084-1087)
])
def test_moe_split_is_vllm_table(tp: int, dp: int, ep_on: bool, want: tuple[int, int]) -> None:
    assert moe_split(tp, dp, ep_on) == want


@pytest.mark.parametrize(("experts", "ep"), [(256, 8), (128, 6), (60, 8), (384, 16), (8, 3)])
def test_local_experts_fullest_rank(experts: int, ep: int) -> None:
    # determine_expert_map: base = E // ep, remainder = E % ep, rank r holds base + (r < remainder)
    held = [experts // ep + (1 if r < experts % ep else 0) for r in range(ep)]
    assert sum(held) == experts
    assert local_experts(experts, ep) == max(held)


def test_sequences_per_rank() -> None:
    assert [sequences_per_rank(c, 8) for c in (1, 8, 9, 64)] == [1, 1, 2, 8]


def test_fp8_block_refusal_follows_the_expert_split() -> None:
    # MiniMax-M2.7: I = 1536 FP8 blocks of 128; TP 8 splits it to 192 (refused, fp8.py:637-649), EP keeps it whole
    spec = load_model("minimax-m2.7")
    assert quant_block_refusal(spec, 8, "vllm", "fp8-block") is not None
    assert quant_block_refusal(spec, 1, "vllm", "fp8-block", expert_tp=1) is None
    assert quant_block_refusal(spec, 1, "vllm", "fp8-block", expert_tp=8) is not None  # DP 8 without EP: flattened


def test_dp8_ep8_minimax_holds_an_eighth_of_the_experts() -> None:
    spec = load_model("minimax-m2.7")
    one = estimate_inference(spec, engine="vllm", concurrency=64)
    ep = estimate_inference(spec, engine="vllm", concurrency=64, data_parallel=8, expert_parallel=True)
    w_one, w_ep = one.details["weights_bytes"], ep.details["weights_bytes"]
    # the experts are 256 whole ones, 32 per device; the rest (attention, embeddings, router) on every device
    assert spec.moe is not None and local_experts(spec.moe.num_experts, 8) == 32
    experts = weight_bytes(spec, "fp8-block").by_component["experts"]  # the 256 experts' FP8 blocks and scales
    assert 0.9 * w_one < experts < w_one
    assert abs((w_one - w_ep) - (experts - experts * 32 / 256)) <= 64  # only the experts shrink, to 32 of 256
    assert ep.details["concurrency"] == 8  # 64 sequences over 8 ranks (eq. EP3)


def test_ep_refusals() -> None:
    with pytest.raises(InputError, match="no routed experts"):
        estimate_inference("llama-3.1-8b", engine="vllm", expert_parallel=True)
    with pytest.raises(InputError, match="not llamacpp"):
        estimate_inference("qwen3-30b-a3b", engine="llamacpp", data_parallel=2, expert_parallel=True)
    with pytest.raises(InputError, match="not transformers"):
        estimate_inference("qwen3-30b-a3b", engine="transformers", expert_parallel=True)


def test_fit_cli_dp_not_dividing_exit_2() -> None:
    out = subprocess.run([sys.executable, "-m", "llmsizer", "fit", "qwen3-30b-a3b", "--device", "H100", "--count",
                          "8", "--engine", "vllm", "--dp", "3", "--enable-expert-parallel"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "does not divide the 8 devices" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1

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


# --- speed (epdp2): one data-parallel rank timed at its own sequences, the ranks' token exchange added (eq. EP4) ---

def _rank_speed(dp: int, conc: int, link: float | None, ep_on: bool = True, latency: float | None = 0.0) -> object:
    from llmsizer.estimate.speed import estimate_speed
    return estimate_speed(load_model("minimax-m2.7"), "h100-sxm", 1, tensor_parallel=1, weights_format="fp8-block",
                          concurrency=conc, engine="vllm", link_bandwidth=link, data_parallel=dp,
                          expert_parallel=ep_on, allreduce_latency=latency)


def test_rank_step_adds_the_exchange_of_its_moe_layers() -> None:
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.device import nvlink_link_bandwidth
    from llmsizer.formulas.expert_parallel_time import all_to_all_seconds
    spec = load_model("minimax-m2.7")
    plain = _rank_speed(8, 8, None)  # no link known: the exchange is not counted (and said)
    timed = _rank_speed(8, 8, 450e9)
    assert any("token exchange" in w and "not counted" in w for w in plain.warnings)  # type: ignore[attr-defined]
    link = nvlink_link_bandwidth(builtin_catalog().devices["h100-sxm"], 450e9)[0]
    layers = sum(1 for m in spec.moe_layers if m)
    assert spec.moe is not None and layers == spec.num_layers == 62
    h, e, a = spec.hidden_size, spec.moe.num_experts, 2  # bf16 activations and router logits
    # vLLM AgRsAll2AllManager: all-gather of 8 tokens' (h + E) values, reduce-scatter of their h, over 8 ranks
    per = sum(all_to_all_seconds(7 * 8 * a * width, 8, 8, link, link) for width in (h + e, h))
    assert per == pytest.approx(2 * 7 * 8 * a * (h + e / 2) / 7 / link * 7)  # each peer's share over the link
    assert timed.decode.seconds - plain.decode.seconds == pytest.approx(layers * per, rel=1e-9)  # type: ignore[attr-defined]
    single = sum(all_to_all_seconds(7 * 1 * a * width, 8, 8, link, link) for width in (h + e, h))
    assert timed.decode_single.seconds - plain.decode_single.seconds == pytest.approx(layers * single, rel=1e-9)  # type: ignore[attr-defined]


def test_each_moe_layer_exchange_is_two_collective_launches() -> None:
    """vllm 0.19.1 AgRsAll2AllManager (distributed/device_communicators/all2all.py :150-243): the dispatch is one
    ``all_gatherv`` of [hidden states, router logits] (cuda_communicator.py :352-398, the two gathers inside one
    pynccl group_start / group_end), the combine one ``reduce_scatterv`` (:264-292): 2 NCCL collectives per MoE layer,
    62 of them in MiniMax-M2.7 (config.json num_hidden_layers, every layer MoE). Each pays one latency, as the
    tensor-parallel all-reduce does (review42 D2: it paid none); a stated latency of 10 us adds 2 x 62 x 10 us a step,
    and at its default the exchange takes NCCL's (pynccl runs no custom kernel)."""
    from llmsizer.catalog.models import entries
    from llmsizer.estimate.efficiency import CUSTOM_ALLREDUCE_LATENCY, NCCL_ALLREDUCE_LATENCY
    layers = entries()["minimax-m2.7"].config["num_hidden_layers"]
    key = "expert_exchange_seconds_per_decode_step"
    none, ten = _rank_speed(8, 8, 450e9, latency=0.0), _rank_speed(8, 8, 450e9, latency=10e-6)
    assert ten.details[key] - none.details[key] == pytest.approx(2 * layers * 10e-6, rel=1e-9)  # type: ignore[attr-defined]
    default = _rank_speed(8, 8, 450e9, latency=None)
    step = default.details[key] - none.details[key]  # type: ignore[attr-defined]
    assert step == pytest.approx(2 * layers * NCCL_ALLREDUCE_LATENCY.expected, rel=1e-9)
    assert step > 2 * layers * CUSTOM_ALLREDUCE_LATENCY.expected


@pytest.mark.parametrize("dp", [8, 6])
def test_expert_parallel_reads_its_share_of_the_experts(dp: int) -> None:
    from llmsizer.estimate.speed import estimate_speed
    from llmsizer.formulas.speed import moe_expert_fraction
    spec = load_model("minimax-m2.7")
    assert spec.moe is not None
    k, e = spec.moe.experts_per_token, spec.moe.num_experts
    whole = estimate_speed(spec, "h100-sxm", 1, weights_format="fp8-block", concurrency=8 * dp, engine="vllm")
    rank = _rank_speed(dp, 8, None)
    full = weight_bytes(spec, "fp8-block").by_component["experts"]
    # the same 8 x dp routings: the rank's device reads ceil(E / ep) / E of the experts the whole model's step reads
    dense_read = full * moe_expert_fraction(k, e, 8 * dp)
    w_whole = whole.details["weight_bytes_per_decode_step"]
    w_rank = rank.details["weight_bytes_per_decode_step"]  # type: ignore[attr-defined]
    assert w_whole - w_rank == pytest.approx((1 - -(-e // dp) / e) * dense_read, rel=1e-6)


def test_fit_total_is_every_rank_at_its_share() -> None:
    from llmsizer import fit
    r = fit("minimax-m2.7", "H100", 8, engine="vllm", tensor_parallel=1, concurrency=64,
            data_parallel=8, expert_parallel=True)
    assert r.replicas == 1 and r.data_parallel == 8
    assert r.speed is not None and r.speed.concurrency == 8  # ceil(64 / 8): one rank's sequences (eq. EP3)
    assert r.tokens_per_second_total == pytest.approx(8 * r.speed.tokens_per_second)
    # on 16 devices: two replicas of 8 ranks each, 4 sequences a rank
    r2 = fit("minimax-m2.7", "H100", 16, engine="vllm", tensor_parallel=1, concurrency=64,
             data_parallel=8, expert_parallel=True)
    assert r2.replicas == 2 and r2.speed is not None and r2.speed.concurrency == 4
    assert r2.tokens_per_second_total == pytest.approx(16 * r2.speed.tokens_per_second)

"""SGLang's own attention-DP / expert-parallel split (formulas/serving_expert_parallel.py eqs. EP1s, EP4s) against
SGLang 0.5.23's code (PyPI wheel, sha256 00b3cd5b...), the tensors those rules split built by transformers from the
catalog entry's config.json on the meta device (shapes only).

Each device of ``--tp-size N --attn-dp-size D --ep-size N`` (T = N / D) holds, by module (the file + line of the
module that builds it):
- attention projections split T ways (models/deepseek_v2.py :2084-2161; Qwen3-30B-A3B loads models/qwen3_moe.py
  ``Qwen3MoeAttention`` :478-541, ``parallel_group="attn_tp"`` :532/:541), MLA's kv_a_proj_with_mqa whole (deepseek_v2.py :2095 ``ReplicatedLinear``);
- the input embedding split T ways (layers/vocab_parallel_embedding.py :166-185: the attention-TP group under DP
  attention);
- the lm_head, the dense MLPs and the shared experts split N ways (deepseek_v2.py :3291-3296 ``use_attn_tp_group=
  enable_dp_lm_head``, off by default; :2665-2673 ``parallel_group="tp"`` unless moe_dense_tp_size == 1; :871-896
  "tp" unless an all-to-all backend replicates them; the default moe_a2a_backend is "none");
- E / N whole routed experts (layers/moe/fused_moe_triton/layer.py :414-416);
- the router (MoEGate, deepseek_v2.py :509-517: the model dtype) and the norms whole.
"""

from __future__ import annotations

import functools
import math

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import entries
from oracle_utils import build

pytestmark = pytest.mark.slow


@functools.cache
def _params(name: str) -> tuple[tuple[str, int], ...]:
    model = build(entries()[name].config)
    out = tuple((n, p.numel()) for n, p in model.named_parameters())
    del model
    return out


def _sglang_device_bytes(name: str, tp: int, dp: int, experts: int, act_bytes: int = 2) -> float:
    """One device's bf16 bytes by SGLang's module rules above (the fullest device: ceil(E / N) experts)."""
    n = tp * dp
    total = 0.0
    for pname, numel in _params(name):
        if ".mlp.experts." in pname:
            share = math.ceil(experts / n) / experts
        elif "kv_a_proj_with_mqa" in pname or "q_a_proj" in pname or pname.endswith(("norm.weight", "mlp.gate.weight",
                                                                                      "e_score_correction_bias")):
            share = 1.0
        elif ".self_attn." in pname or "embed_tokens" in pname:
            share = 1 / tp
        elif pname.startswith("lm_head") or ".mlp." in pname:  # dense MLP and shared experts
            share = 1 / n
        else:
            raise AssertionError(f"unplaced parameter {pname}")
        total += numel * act_bytes * share
    return total


@pytest.mark.parametrize(("name", "tp", "dp"), [
    ("deepseek-v2-lite", 1, 8), ("deepseek-v2-lite", 2, 4), ("deepseek-v2-lite", 4, 2),
    ("qwen3-30b-a3b", 1, 8), ("qwen3-30b-a3b", 2, 4), ("qwen3-30b-a3b", 4, 2),
])
def test_sglang_device_weights_follow_its_module_groups(name: str, tp: int, dp: int) -> None:
    spec = entries()[name].spec()
    assert spec.moe is not None
    est = estimate_inference(spec, engine="sglang", weights="bf16", tensor_parallel=tp, data_parallel=dp,
                             expert_parallel=True, concurrency=8 * dp, device="h100-sxm")
    want = _sglang_device_bytes(name, tp, dp, spec.moe.num_experts)
    assert est.details["weights_bytes"] == pytest.approx(want, rel=2e-5)


def test_vllm_keeps_dense_and_shared_on_the_rank() -> None:
    # the same layout on vLLM: its MLPs, shared experts and lm_head over T (eqs. EP1-EP2), so more bytes a device than
    # SGLang's by (1/T - 1/N) of those modules' bytes
    name, tp, dp = "deepseek-v2-lite", 2, 4
    spec = entries()[name].spec()
    kw = dict(weights="bf16", tensor_parallel=tp, data_parallel=dp, expert_parallel=True, concurrency=32,
              device="h100-sxm")
    vl = estimate_inference(spec, engine="vllm", **kw).details["weights_bytes"]
    sg = estimate_inference(spec, engine="sglang", **kw).details["weights_bytes"]
    moved = sum(numel for p, numel in _params(name)
                if p.startswith("lm_head") or (".mlp." in p and ".mlp.experts." not in p
                                               and not p.endswith("mlp.gate.weight")))
    assert vl - sg == pytest.approx(moved * 2 * (1 / tp - 1 / (tp * dp)), rel=1e-4)


# --- speed: the rank's reads and SGLang's exchange (eq. EP4s) ---

def _speed(engine: str, tp: int, dp: int, link: float | None, name: str = "deepseek-v3",
           latency: float | None = None) -> object:
    from llmsizer.estimate.speed import estimate_speed
    from llmsizer.models import load_model
    return estimate_speed(load_model(name), "h100-sxm", 1, tensor_parallel=tp, weights_format="fp8-block",
                          concurrency=8, engine=engine, link_bandwidth=link, data_parallel=dp, expert_parallel=True,
                          allreduce_latency=latency)


def test_sglang_step_reads_the_whole_groups_share_of_ffn_and_head() -> None:
    # TP 1 x DP 8: vLLM's device reads all of the dense MLPs, shared experts and lm_head, SGLang's 1 / 8 of them
    # (deepseek_v2.py :2665-2673, :871-896, :3291-3296); the attention and the routed experts read alike
    from llmsizer.formulas.weight_formats import weight_bytes
    from llmsizer.models import load_model
    spec = load_model("deepseek-v3")
    comps = weight_bytes(spec, "fp8-block").by_component
    moved = comps["mlp"] + comps["shared_experts"] + comps["lm_head"]
    vl, sg = _speed("vllm", 1, 8, None), _speed("sglang", 1, 8, None)
    read = "weight_bytes_per_decode_step"
    assert vl.details[read] - sg.details[read] == pytest.approx(moved * 7 / 8, rel=1e-3)  # type: ignore[attr-defined]


def test_sglang_exchange_launches_two_collectives_a_layer_and_two_for_the_head() -> None:
    """The number of collectives SGLang 0.5.23 runs a decode step under attention DP (``--moe-a2a-backend none``),
    read from its code: every decoder layer, dense or MoE, gathers the ranks' hidden states before its FFN and
    scatters them after (layers/dp_attention.py :987-1043 ``_dp_gather``, :1120-1160 ``dp_reduce_scatter_tensor``;
    layer_boundary/ops.py :249-258, :318-331), and the lm_head gathers the hidden states once and all-gathers the
    logits once (layers/logits_processor.py :1216-1241, :1023-1037): 2 L + 2 for DeepSeek-V3's L = 61
    (config.json num_hidden_layers; its 3 dense layers included). Each pays one latency as the tensor-parallel
    all-reduce does (review42 D2/D6: the exchange paid none, and the test that pinned it rewrote the formula): a
    stated latency of 10 us adds (2 L + 2) x 10 us. At its default, the 8 ranks' 8 tokens (8 x 8 x 7168 x 2 B =
    0.9 MB, within the custom all-reduce's buffer) take SGLang's SUM_LEN mode, an all-reduce by the custom kernel
    (dp_attention.py :194-195, :222-243) for each hidden-state collective, and NCCL for the logits' all-gather."""
    from llmsizer.estimate.efficiency import CUSTOM_ALLREDUCE_LATENCY, NCCL_ALLREDUCE_LATENCY
    layers = entries()["deepseek-v3"].config["num_hidden_layers"]
    key = "expert_exchange_seconds_per_decode_step"
    none = _speed("sglang", 1, 8, 450e9, latency=0.0)
    ten = _speed("sglang", 1, 8, 450e9, latency=10e-6)
    assert ten.details[key] - none.details[key] == pytest.approx((2 * layers + 2) * 10e-6, rel=1e-9)  # type: ignore[attr-defined]
    default = _speed("sglang", 1, 8, 450e9)
    assert default.details[key] - none.details[key] == pytest.approx(  # type: ignore[attr-defined]
        (2 * layers + 1) * CUSTOM_ALLREDUCE_LATENCY.expected + NCCL_ALLREDUCE_LATENCY.expected, rel=1e-9)
    plain = _speed("sglang", 1, 8, None)
    assert any("token exchange" in w and "not counted" in w for w in plain.warnings)  # type: ignore[attr-defined]


def test_sglang_attention_tp_all_reduces_one_a_layer() -> None:
    # under attention DP the FFN's sum is in the reduce-scatter over all N devices: only attention's output is summed
    # over the rank's attention-TP group (its reduce-scatter + all-gather, dp_attention.py :735-757, :1145-1161)
    from llmsizer.models import load_model
    layers = load_model("deepseek-v3").num_layers
    vl, sg = _speed("vllm", 2, 4, 450e9), _speed("sglang", 2, 4, 450e9)
    ar = {x.name: str(x.value) for x in vl.assumptions}["tp_allreduce"]  # type: ignore[attr-defined]
    ar_sg = {x.name: str(x.value) for x in sg.assumptions}["tp_allreduce"]  # type: ignore[attr-defined]
    assert ar.startswith(f"{2 * layers + 1} x") and ar_sg.startswith(f"{layers + 1} x")


def test_sglang_dp_refuses_a_shared_expert_of_partial_fp8_blocks() -> None:
    # SGLang 0.5.23 Fp8LinearMethod.validate_block_quant_shapes (srt/layers/quantization/fp8.py:570-610) checks every
    # partition of a merged column-parallel layer against block_n: the shared experts' gate_up split over the whole TP
    # group of N = D x T (deepseek_v2.py :871-896) must hold whole 128-row blocks. GLM-4.5 (config.json
    # moe_intermediate_size 1536 x n_shared_experts 1): 1536 / 8 = 192 -> refused at N = 8, 384 at N = 4 loads;
    # DeepSeek-V3 (2048 x 1, dense 18432): 256 and 2304 at N = 8 load.
    from llmsizer.errors import InputError
    cfg = entries()["glm-4.5"].config
    shared = cfg["moe_intermediate_size"] * cfg["n_shared_experts"]
    assert (shared // 8) % 128 and not (shared // 4) % 128
    for tp, dp in ((1, 8), (2, 4)):
        with pytest.raises(InputError, match="all 8 devices of its TP group"):
            estimate_inference("glm-4.5", engine="sglang", weights="fp8-block", tensor_parallel=tp, data_parallel=dp,
                               expert_parallel=True, device="h100-sxm")
    estimate_inference("glm-4.5", engine="sglang", weights="fp8-block", tensor_parallel=1, data_parallel=4,
                       expert_parallel=True, device="h100-sxm")
    estimate_inference("deepseek-v3", engine="sglang", tensor_parallel=1, data_parallel=8, expert_parallel=True,
                       device="h100-sxm")
    # vLLM keeps them over T = 1: no such split, loads
    estimate_inference("glm-4.5", engine="vllm", weights="fp8-block", tensor_parallel=1, data_parallel=8,
                       expert_parallel=True, device="h100-sxm")

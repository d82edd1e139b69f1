"""SGLang's own attention-DP / expert-parallel split (formulas/serving_expert_parallel.py eqs. EP1s, EP4s) against
SGLang 0.5.23's code (PyPI wheel, sha256 00b3cd5b...), the tensors those rules split built by transformers from the
catalog entry's config.json on the meta device (shapes only).

Each device of ``--tp-size N --attn-dp-size D --ep-size N`` (T = N / D) holds, by module (the file + line of the
module that builds it):
- attention projections split T ways (models/deepseek_v2.py :2084-2161, models/qwen2_moe.py :940-949
  ``parallel_group="attn_tp"``), MLA's kv_a_proj_with_mqa whole (deepseek_v2.py :2095 ``ReplicatedLinear``);
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

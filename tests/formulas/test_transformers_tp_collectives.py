"""The collectives transformers' tensor-parallel plan runs in a forward, and their time in the speed estimate.

Independent truth, two ways, neither reading llmsizer's table:
- run: tiny models of seven families built from their real transformers 5.24 classes on the CPU, the plan applied
  by transformers' own ``apply_tensor_parallelism`` on a fake 2-rank process group (torch's in-process "fake"
  backend: the collectives are issued, nothing is exchanged), and a prefill and a batched decode step run under a
  dispatch mode that records every c10d all-reduce and all-gather and its message (an all-gather's input is one
  rank's shard: the message gathered is tp times it);
- plan: every catalog model type's plan as transformers expands it for the full-size config on the meta device,
  each module entry's style read as the collective it runs in an inference forward (rowwise, rowwise_split_input,
  rowwise_rep, embedding_rowwise, moe_tp_experts, all_reduce: an all-reduce of the module's output;
  colwise_gather_output, colwise_rep, embedding_colwise: an all-gather of it; transformers 5.24
  distributed/tensor_parallel.py:288-297, :347-355, :394-401, :572-577, :199-214), per decoder layer.
The timing is checked against formulas/speed.py eqs. (6) and (6g) written out by hand with the plan's hand count.
"""

from __future__ import annotations

import collections
import re
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
transformers = pytest.importorskip("transformers")

from test_transformers_tp_plan import _one_per_type  # noqa: E402

from llmsizer.catalog.hardware import builtin_catalog  # noqa: E402
from llmsizer.catalog.models import entries, find  # noqa: E402
from llmsizer.estimate import efficiency as E  # noqa: E402
from llmsizer.estimate.speed import estimate_speed  # noqa: E402
from llmsizer.formulas.tensor_parallel import (  # noqa: E402
    transformers_plan_collectives,
    transformers_tensor_parallel_refusal,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import build  # noqa: E402

WORLD = 8
TP = 2


def _mesh(tp: int):  # type: ignore[no-untyped-def]
    from torch.distributed.device_mesh import DeviceMesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    return DeviceMesh("cpu", list(range(tp)))


def _apply_plan(model: Any, tp: int) -> dict[str, str]:
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    plan = model._expand_parallel_plan(dict(model.tp_plan))
    known = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_modules()}
    plan = {k: v for k, v in plan.items() if k in known}
    apply_tensor_parallelism(model, _mesh(tp), plan)
    return plan


def _recorder(tp: int):  # type: ignore[no-untyped-def]
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        """Every c10d all-reduce / all-gather dispatched, as (kind, elements of the whole message)."""

        def __init__(self) -> None:
            super().__init__()
            self.ops: list[tuple[str, int]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if func.namespace in ("c10d", "_c10d_functional", "c10d_functional"):
                name = func.__name__
                t = args[0][0] if isinstance(args[0], (list, tuple)) else args[0]
                if "allreduce" in name or "all_reduce" in name:
                    self.ops.append(("all_reduce", t.numel()))
                elif "gather" in name:
                    self.ops.append(("all_gather", tp * t.numel()))
            return func(*args, **(kwargs or {}))

    return Record()


BASE: dict[str, Any] = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=256, head_dim=16, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, tie_word_embeddings=False)
# two layers each; where a family has two kinds of layer, one of each (gpt-oss sliding + full, DeepSeek-V3 a dense
# first layer + an MoE one with a shared expert, Qwen3-Next a Gated DeltaNet layer + a full-attention one)
TINY: dict[str, dict[str, Any]] = {
    "llama": {},
    "phi3": {},
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                    layer_types=["sliding_attention", "full_attention"]),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
    # q/k/v colwise_gather_output (three gathers a layer), o_proj rowwise_split_input
    "minimax_m2": dict(num_local_experts=4, num_experts_per_tok=2, head_dim=16, rotary_dim=8, use_routing_bias=True),
    "deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=1,
                        n_shared_experts=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
                        v_head_dim=16, n_group=1, topk_group=1, head_dim=8),
    "qwen3_next": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=32, layer_types=["linear_attention", "full_attention"],
                       linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                       linear_value_head_dim=16),
}


def _ours(cfg: dict[str, Any], tokens: int, head_tokens: int) -> collections.Counter[tuple[str, int]]:
    spec = spec_from_config(cfg, name="tiny-" + cfg["model_type"])
    return collections.Counter((c.kind, (head_tokens if c.head else tokens) * c.width)
                               for c in transformers_plan_collectives(spec))


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_collectives_of_a_real_forward(model_type: str) -> None:
    """A prefill of 5 tokens (generate's ``logits_to_keep`` = 1: the lm_head on the last one) and a decode step of 2
    sequences: the all-reduces and all-gathers the real forward issues, message by message, are the plan's list."""
    cfg = {**BASE, "model_type": model_type, **TINY[model_type]}
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg)).eval()
    _apply_plan(model, TP)
    prompt = 5
    with torch.no_grad():
        rec = _recorder(TP)
        with rec:
            model(input_ids=torch.randint(3, 256, (1, prompt)), logits_to_keep=1)
        assert collections.Counter(rec.ops) == _ours(cfg, prompt, 1)
        out = model(input_ids=torch.randint(3, 256, (2, prompt)), use_cache=True, logits_to_keep=1)
        rec = _recorder(TP)
        with rec:
            model(input_ids=torch.randint(3, 256, (2, 1)), past_key_values=out.past_key_values, logits_to_keep=1)
        assert collections.Counter(rec.ops) == _ours(cfg, 2, 2)
        assert rec.ops  # else the comparison could not fail


_REDUCING = {"rowwise", "rowwise_split_input", "rowwise_rep", "embedding_rowwise", "moe_tp_experts", "all_reduce"}
_GATHERING = {"colwise_gather_output", "colwise_rep", "embedding_colwise"}
_VISION = re.compile(r"vision|visual|multi_modal_projector|patch_embed")


MODELS = _one_per_type()  # one catalog model per model_type, as test_transformers_tp_plan reads them


def _plan_collectives(model_name: str) -> collections.Counter[tuple[int, str, int]]:
    """(decoder layer or -1, kind, elements per token) of each module entry of the expanded plan whose style runs a
    forward collective; the language model only."""
    model = build(entries()[model_name].config)
    hidden = model.config.get_text_config().hidden_size
    modules = dict(model.named_modules())
    out: collections.Counter[tuple[int, str, int]] = collections.Counter()
    for name, style in model._expand_parallel_plan(dict(model.tp_plan)).items():
        if name not in modules or _VISION.search(name) or style not in _REDUCING | _GATHERING:
            continue
        m = modules[name]
        width = (m.out_features if isinstance(m, torch.nn.Linear) else m.embedding_dim
                 if isinstance(m, torch.nn.Embedding) else hidden)  # an experts module returns [tokens, hidden]
        layer = re.search(r"layers\.(\d+)\.", name)
        out[(int(layer.group(1)) if layer else -1, "all_reduce" if style in _REDUCING else "all_gather", width)] += 1
    return out


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_each_catalog_plan_per_layer(model_type: str) -> None:
    """Per decoder layer, the count and message width of the collectives each catalog model type's real plan
    implies (no plan: none, and transformers refuses it; tests/formulas/test_transformers_tp_plan.py)."""
    name = MODELS[model_type]
    want = _plan_collectives(name)
    got = collections.Counter((c.layer, c.kind, c.width) for c in transformers_plan_collectives(find(name).spec()))
    if not want:  # no plan: refused before any speed is timed
        assert transformers_tensor_parallel_refusal(find(name).spec()) is not None
        return
    assert got == want


def _speed(name: str, tp: int, conc: int, mesh: bool, **kw: Any) -> Any:
    return estimate_speed(find(name).spec(), builtin_catalog().devices["h100-sxm"], tp, tensor_parallel=tp,
                          concurrency=conc, link_bandwidth=450e9, nvlink_mesh=mesh, engine="transformers",
                          weights_format="bf16", prompt_tokens=1000, output_tokens=200, **kw)


def _closed_form(reduces: int, hidden: int, vocab: int, tokens: int, head: int, n: int, bw: float,
                 alpha: float) -> float:
    """Eqs. (6) and (6g) by hand: ``reduces`` ring all-reduces of tokens x hidden bf16 values and the lm_head's
    ring all-gather of head x vocab, each with one latency."""
    return (reduces * (alpha + 2 * (n - 1) / n * tokens * hidden * 2 / bw)
            + alpha + (n - 1) / n * head * vocab * 2 / bw)


@pytest.mark.parametrize(("tp", "mesh"), [(2, True), (4, True), (4, False)])
def test_llama_step_times_its_plan(tp: int, mesh: bool) -> None:
    """Llama-3.1-8B (32 layers, hidden 4096, vocab 128256): its plan splits o_proj and down_proj rowwise and the
    embedding vocab-parallel, 2 x 32 + 1 = 65 all-reduces, and gathers the lm_head's logits; NCCL's latency over
    NVLink or over PCIe behind one switch (torch.distributed: no custom kernel)."""
    sp = _speed("llama-3.1-8b", tp, 3, mesh)
    bw = sp.details["allreduce_bandwidth"]
    alpha = (E.NCCL_ALLREDUCE_LATENCY if mesh else E.NCCL_ALLREDUCE_LATENCY_PCIE).expected
    assert sp.prefill.comm_seconds == pytest.approx(_closed_form(65, 4096, 128256, 1000, 1, tp, bw, alpha), rel=1e-12)
    assert sp.decode.comm_seconds == pytest.approx(_closed_form(65, 4096, 128256, 3, 3, tp, bw, alpha), rel=1e-12)
    assert sp.details["tp_plan_collectives"] == {"all_reduce": 65, "all_gather": 1}
    assert next(a for a in sp.assumptions if a.name == "tp_allreduce").value.startswith("65 all-reduces")


def test_gpt_oss_plan_has_no_layer_collectives() -> None:
    """gpt-oss' plan splits only the embedding and the lm_head: one all-reduce and one all-gather per forward at TP 2,
    not two all-reduces per layer; a given latency replaces NCCL's."""
    sp = _speed("gpt-oss-20b", 2, 1, True)
    bw = sp.details["allreduce_bandwidth"]
    alpha = E.NCCL_ALLREDUCE_LATENCY.expected
    assert sp.prefill.comm_seconds == pytest.approx(_closed_form(1, 2880, 201088, 1000, 1, 2, bw, alpha), rel=1e-12)
    assert sp.decode.comm_seconds == pytest.approx(_closed_form(1, 2880, 201088, 1, 1, 2, bw, alpha), rel=1e-12)
    given = _speed("gpt-oss-20b", 2, 1, True, allreduce_latency=5e-6)
    assert given.decode.comm_seconds == pytest.approx(_closed_form(1, 2880, 201088, 1, 1, 2, bw, 5e-6), rel=1e-12)

"""TransformerEngine's float8 weight cache across micro-batches under Megatron-Core (formulas/float8_training.py
eq. T2, ``te_weight_casts_per_step``; estimate/training/setup.py ``te_first_microbatch_cache``).

TE does not run on a CPU, so the truth is the cited control flow itself, replayed by hand for a tiny model:
- Megatron-Core (NVIDIA/Megatron-LM @d98e8a64): every TE linear starts with ``is_first_microbatch = True``
  (megatron/core/extensions/transformer_engine.py line 1160), passes it to TE's forward and sets it False after
  (lines 1337-1345); ``MegatronModule.set_is_first_microbatch`` (transformer/module.py lines 114-132) sets it True
  again, which ``forward_step`` calls for a model chunk's first micro-batch only (pipeline_parallel/schedules.py
  lines 496-497; ``i == 0`` line 826; interleaved: ``is_first_microbatch_for_model_chunk`` lines 1271-1275);
- TE (NVIDIA/TransformerEngine @d0067d0d): ``cache_name`` is None when ``is_first_microbatch`` is None
  (pytorch/module/linear.py lines 1958-1960), ``update_ws = is_first_microbatch is None or is_first_microbatch``
  (line 479), and ``quantize_weight`` (module/base.py lines 861-887) quantizes into a missing workspace or, on a hit,
  only when ``update_ws``; the new workspace is stored (linear.py lines 2068-2071);
- llm-foundry's blocks call the te modules without the argument (llmfoundry/models/layers/ffn.py @63d37d79).
The element counts of the estimate-level checks come from Llama-3.1-8B's config.json numbers written out here.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.float8_training import te_weight_casts_per_step, te_weight_copy_bytes
from llmsizer.readers.hf_config import spec_from_config

# meta-llama/Llama-3.1-8B config.json
H, HEADS, KV, HEAD_DIM, FFN, LAYERS, V = 4096, 32, 8, 128, 14336, 32, 128256
LLAMA_8B = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, num_attention_heads=HEADS,
                num_key_value_heads=KV, intermediate_size=FFN, num_hidden_layers=LAYERS, vocab_size=V,
                max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
                torch_dtype="bfloat16", hidden_act="silu", rope_theta=500000.0)
Q, KVW = HEADS * HEAD_DIM, KV * HEAD_DIM
# te.Linear weights of one layer: q, k, v, o, gate, up, down
WEIGHTS = H * Q + 2 * H * KVW + Q * H + 3 * H * FFN
# the linears' input widths: q, k, v, gate, up read the hidden state, o the attention output, down the SwiGLU
INPUTS = 5 * H + Q + FFN
SEQ = 4096
MEGATRON = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=SEQ,
                float8=True, float8_recipe="transformer-engine", fp8_param_gather=False)  # bf16 weights (eq. T3 apart)


class _TeLinear:
    """The flag and workspace logic of a Megatron TELinear over TE's te.Linear, as the module doc cites it."""

    def __init__(self, megatron: bool) -> None:
        self.megatron = megatron
        self.is_first_microbatch = True
        self.workspaces: dict[str, object] = {}
        self.casts = 0

    def forward(self) -> None:
        first = self.is_first_microbatch if self.megatron else None  # llm-foundry passes nothing
        cache_name = None if first is None else "weight"
        workspace = self.workspaces.get(cache_name) if cache_name is not None else None
        update_ws = first is None or first
        if workspace is None or update_ws:
            self.casts += 1  # quantize_weight: a cache miss or an update
            workspace = object() if workspace is None else workspace
        if cache_name is not None:
            self.workspaces[cache_name] = workspace
        if self.megatron:
            self.is_first_microbatch = False


def _casts_per_step(megatron: bool, layers: int, linears: int, micro_batches: int, chunks: int = 1,
                    recompute: bool = False, steps: int = 3) -> float:
    """Weight casts of one optimizer step (the mean over ``steps``), replaying the schedules' calls."""
    mods = [[_TeLinear(megatron) for _ in range(layers * linears // chunks)] for _ in range(chunks)]
    for _ in range(steps):
        for m in range(micro_batches):
            for chunk in mods:  # interleaved: each chunk's own micro-batch counter
                if m == 0:  # set_is_first_microbatch at the chunk's first micro-batch of the step
                    for mod in chunk:
                        mod.is_first_microbatch = True
                for mod in chunk:
                    mod.forward()
                if recompute:  # the backward's recomputed forward
                    for mod in chunk:
                        mod.forward()
    return sum(mod.casts for chunk in mods for mod in chunk) / steps


@pytest.mark.parametrize("k", [1, 4, 16])
@pytest.mark.parametrize("chunks", [1, 2])
def test_casts_per_step_follow_the_replayed_control_flow(k: int, chunks: int) -> None:
    layers, linears = 4, 7
    for megatron in (True, False):
        got = _casts_per_step(megatron, layers, linears, k, chunks)
        assert got == layers * linears * te_weight_casts_per_step(k, megatron)
    # Megatron: once per layer and linear a step; llm-foundry: once per micro-batch
    assert _casts_per_step(True, layers, linears, k, chunks) == layers * linears
    assert _casts_per_step(False, layers, linears, k, chunks) == layers * linears * k
    # a recompute reads the workspace under Megatron (the flag is False by then), casts again elsewhere
    assert _casts_per_step(True, layers, linears, k, chunks, recompute=True) == layers * linears
    assert _casts_per_step(False, layers, linears, k, chunks, recompute=True) == 2 * layers * linears * k


def test_rejects_no_micro_batch() -> None:
    with pytest.raises(InputError, match="micro-batches"):
        te_weight_casts_per_step(0, True)


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA_8B, name="llama-3.1-8b-hand")


def _cast_per_token(spec, **kw: Any) -> float:
    dev = builtin_catalog().devices["h100-sxm"]
    r = training_duration_for(spec, dev, 8, 1e6, dict(MEGATRON, **kw))
    return next(a.value for a in r.assumptions if a.name == "float8_cast_bytes_per_token")


@pytest.mark.parametrize("recipe,per_weight", [("transformer-engine", 2 + 2), ("transformer-engine-current", 2 + 2 + 2)])
def test_megatron_pays_the_weight_casts_once_per_step(spec, recipe: str, per_weight: int) -> None:
    # eq. F3's weight term (c + 2 per element: read bf16, write the float8 copy and its transpose), F3c's + c (the
    # amax read), for every layer's seven weights: once per micro-batch of SEQ tokens at k = 1, 1/k of it at k
    k = 8
    one = _cast_per_token(spec, float8_recipe=recipe, grad_accumulation=1)
    many = _cast_per_token(spec, float8_recipe=recipe, grad_accumulation=k)
    assert one - many == pytest.approx(LAYERS * per_weight * WEIGHTS * (1 - 1 / k) / SEQ, abs=2)
    # llm-foundry's path (no megatron precision): every micro-batch casts every weight
    plain = dict(precision="bf16", optimizer="adamw", zero=0)
    assert _cast_per_token(spec, float8_recipe=recipe, grad_accumulation=k, **plain) == _cast_per_token(
        spec, float8_recipe=recipe, grad_accumulation=1, **plain)


def test_megatron_recompute_casts_no_weight(spec) -> None:
    # full recomputation runs each layer's forward again: its input casts again (F3: (c + 2) t i), its weights not
    k = 4
    none = _cast_per_token(spec, grad_accumulation=k, grad_checkpointing="none")
    full = _cast_per_token(spec, grad_accumulation=k, grad_checkpointing="full")
    assert full - none == pytest.approx(LAYERS * (2 + 2) * INPUTS, abs=2)


def _item(est, name: str) -> int:
    return next((i.bytes for i in est.items if i.name == name), 0)


@pytest.mark.parametrize("ckpt", ["none", "full"])
@pytest.mark.parametrize("k", [1, 4])
def test_megatron_keeps_every_layers_workspace(spec, ckpt: str, k: int) -> None:
    # _fp8_workspaces holds each layer's copy from the first step on (rowwise + transpose on Hopper, eq. T1),
    # checkpointed or not, whatever the micro-batches
    est = estimate_training(spec, **dict(MEGATRON, grad_checkpointing=ckpt, grad_accumulation=k), gpus=8)
    assert _item(est, "fp8_weight_copies") == LAYERS * te_weight_copy_bytes(WEIGHTS, 90) == LAYERS * 2 * WEIGHTS
    line = next(a.value for a in est.assumptions if a.name == "bytes_per_param")
    assert "_fp8_workspaces, eq. T2" in line
    # llm-foundry's path under full recomputation: at most the recomputed layer's copy (test_te_fp8_weights.py)
    plain = estimate_training(spec, method="full", precision="bf16", float8=True, float8_recipe="transformer-engine",
                              grad_checkpointing="full", grad_accumulation=k, seq_len=SEQ)
    assert _item(plain, "fp8_weight_copies") in (0, 2 * WEIGHTS)


def test_pipeline_stage_holds_one_copy_per_layer_not_per_micro_batch_in_flight(spec) -> None:
    # 1F1B keeps up to pp micro-batches' activations in flight on the first stage; the workspace is the module's,
    # one per layer whatever runs (a copy per forward, saved for its backward, would be one per micro-batch in flight)
    est = estimate_training(spec, **dict(MEGATRON, grad_checkpointing="none", grad_accumulation=8), gpus=8, pp=4)
    assert _item(est, "fp8_weight_copies") == LAYERS // 4 * 2 * WEIGHTS

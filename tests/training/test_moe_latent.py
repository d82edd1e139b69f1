"""Nemotron-H's MoE latent (``moe_latent_size``) in the training formulas, against a real CPU step (#16).

A tiny NemotronH (one attention layer, one MoE layer whose routed experts run in a 64-wide latent of a 256-wide
model; transformers 5 ``modeling_nemotron_h.py``: ``fc1_latent_proj`` H -> L, the experts [E, I, L] / [E, L, I],
``fc2_latent_proj`` L -> H) runs one pure-bf16 forward + backward on the CPU:

- saved activations: every tensor autograd saves while ``NemotronHMoE`` runs its forward (the default
  ``grouped_mm`` experts), counted once per storage, parameters excluded, against
  ``training_activations.moe_saved_terms``; the same model without the latent (experts read the 256-wide hidden
  state) is the control. Tolerance 3%: what the terms leave out are the int64 index tensors of the sort and gather
  (perm, inverse perm, sorted expert ids: 8 B per routed copy each), of which ``S x 16 B`` is counted.
- FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` over forward + backward, with ``experts_implementation="eager"``
  (one ``F.linear`` per expert: the same GEMMs as ``grouped_mm``, whose CPU kernel the counter does not count). The
  MoE block's count must equal 3 x (llmsizer's forward FLOPs of the router, the routed experts at the latent width,
  the two latent projections and the shared expert) exactly, and the whole step 6 FLOPs per active matmul weight
  and token from llmsizer's exact parameter count (the CPU SDPA kernel is not counted either).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llmsizer.formulas.params import count_params  # noqa: E402
from llmsizer.formulas.selective_checkpointing import layer_matmul_shapes, moe_expert_flops  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, moe_saved_terms  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import saved_storage_hooks  # noqa: E402

TOKENS = 64
NEMOTRON_H = dict(model_type="nemotron_h", vocab_size=512, hidden_size=256, num_hidden_layers=2,
                  hybrid_override_pattern="*E", num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16, n_groups=1, n_routed_experts=8,
                  num_experts_per_tok=2, moe_intermediate_size=128, moe_shared_expert_intermediate_size=192,
                  n_group=1, topk_group=1, intermediate_size=384, max_position_embeddings=1024,
                  tie_word_embeddings=False)
LATENT = 64
MOE_LAYER = 1
TOLERANCE = 0.03


def _config(latent: int | None) -> dict[str, Any]:
    return {**NEMOTRON_H, "moe_latent_size": latent}


def _model(latent: int | None, experts: str) -> Any:
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**_config(latent))
    conf._attn_implementation = "sdpa"
    conf._experts_implementation = experts
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
    model.train()
    return model


def _step(model: Any) -> None:
    ids = torch.randint(0, NEMOTRON_H["vocab_size"], (1, TOKENS))
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()


def _moe_saved_bytes(latent: int | None) -> int:
    """Bytes of the distinct non-parameter storages autograd saves during the MoE block's forward."""
    model = _model(latent, "grouped_mm")
    saved, hooks = saved_storage_hooks(model)
    mixer = model.model.layers[MOE_LAYER].mixer
    assert type(mixer).__name__ == "NemotronHMoE"
    mixer.register_forward_pre_hook(lambda *a: hooks.__enter__())
    mixer.register_forward_hook(lambda *a: hooks.__exit__(None, None, None))
    _step(model)
    return sum(saved.values())


def _predicted(latent: int | None) -> int:
    spec = spec_from_config(_config(latent), name="tiny-nemotron-h")
    st = ActivationSetup(batch=1, seq=TOKENS, residual=2, compute=2, expert=2)
    return sum(t.bytes for t in moe_saved_terms(spec, st))


@pytest.mark.parametrize("latent", [LATENT, None])
def test_moe_block_saved_activations(latent: int | None) -> None:
    meas, pred = _moe_saved_bytes(latent), _predicted(latent)
    err = (pred - meas) / meas
    print(f"\nNemotronHMoE latent {latent}: saved {meas} B measured, {pred} B predicted ({err:+.2%})")
    assert abs(err) <= TOLERANCE
    if latent:  # sizing the experts at the hidden width (the latent ignored) would fail
        spec = spec_from_config(_config(latent), name="tiny-nemotron-h")
        assert spec.moe is not None
        wide = dataclasses.replace(spec, moe=dataclasses.replace(spec.moe, latent_size=0))
        st = ActivationSetup(batch=1, seq=TOKENS, residual=2, compute=2, expert=2)
        ignored = sum(t.bytes for t in moe_saved_terms(wide, st))
        assert abs(ignored - meas) / meas > TOLERANCE


def test_moe_block_and_step_flops() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(LATENT, "eager")
    with FlopCounterMode(display=False) as counter:
        _step(model)
    by_module = {k.split(".", 1)[-1]: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    block = by_module[f"model.layers.{MOE_LAYER}.mixer"]
    spec = spec_from_config(_config(LATENT), name="tiny-nemotron-h")
    st = ActivationSetup(batch=1, seq=1)
    moe_linears = [(n, i, o) for n, i, o, _ in layer_matmul_shapes(spec, MOE_LAYER, st) if n.startswith(("latent",
                                                                                                        "shared"))]
    assert [n for n, _, _ in moe_linears] == ["latent in", "latent out", "shared up", "shared down"]
    forward = moe_expert_flops(spec, MOE_LAYER, st) + 2 * sum(i * o for _, i, o in moe_linears)
    print(f"\nNemotronHMoE FLOPs (forward + backward, {TOKENS} tokens): counted {block:,}, predicted "
          f"{3 * forward * TOKENS:,}; whole step counted {counter.get_total_flops():,}")
    assert block == 3 * forward * TOKENS
    pc = count_params(spec)
    matmul_weights = pc.active - pc.by_component["embedding"] - pc.by_component["norm"]
    assert counter.get_total_flops() == 6 * matmul_weights * TOKENS

"""Training FLOPs of a hybrid follow its per-layer schedule, against a real CPU step of a tiny NemotronH.

Nemotron-H layers are attention-only ("*"), Mamba-only ("M"), MoE-only ("E") or MLP-only ("-")
(transformers ``modeling_nemotron_h.py``, ``hybrid_override_pattern``). The attention-core term 12 L d s of eq. (1)
and the 4 c d s of eq. (2') (formulas/training_time.py) counted every layer, and the recomputed matmuls of a
checkpointed layer (formulas/selective_checkpointing.py ``full_recompute_flops``) listed q/k/v/o and an MLP in
every layer: on the "*E-" model below the recompute was 2.6 x the real one and the attention term 3 x.

Measured with ``torch.utils.flop_counter.FlopCounterMode`` over one pure-bf16 forward + backward with eager
attention (its QK^T and AV are bmm calls the counter counts; the CPU SDPA kernel is not counted) and eager experts
(one ``F.linear`` per expert), without and with transformers' non-reentrant gradient checkpointing of every decoder
layer. Exact equality: the FLOPs are integer GEMM counts.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llmsizer.estimate.duration import _matmul_setup, flops_per_token  # noqa: E402
from llmsizer.formulas.params import count_params  # noqa: E402
from llmsizer.formulas.selective_checkpointing import layer_matmul_shapes  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

TOKENS = 64
BASE = dict(model_type="nemotron_h", vocab_size=512, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
            head_dim=64, mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16, n_groups=1, n_routed_experts=8,
            num_experts_per_tok=2, moe_intermediate_size=128, moe_shared_expert_intermediate_size=192, n_group=1,
            topk_group=1, intermediate_size=384, max_position_embeddings=1024, tie_word_embeddings=False,
            moe_latent_size=64)


def _config(pattern: str) -> dict[str, Any]:
    return {**BASE, "hybrid_override_pattern": pattern, "num_hidden_layers": len(pattern)}


def _counted(pattern: str, checkpointing: bool) -> Any:
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**_config(pattern))
    conf._attn_implementation = "eager"
    conf._experts_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, BASE["vocab_size"], (1, TOKENS))
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    return model, counter


def test_attention_and_recompute_terms_follow_the_layer_schedule() -> None:
    pattern = "*E-"  # attention-only, MoE-only, MLP-only: every FLOP of the step is a GEMM the counter sees
    spec = spec_from_config(_config(pattern), name="tiny-nemotron-h")
    assert spec.attention_layers == 1
    _, plain = _counted(pattern, False)
    _, ckpt = _counted(pattern, True)
    pc = count_params(spec)
    matmul_weights = pc.active - pc.by_component["embedding"] - pc.by_component["norm"]
    f0 = flops_per_token(spec, "full", TOKENS, "none")
    f1 = flops_per_token(spec, "full", TOKENS, "full")
    # eq. (1)'s attention term: what the step counts beyond 6 FLOPs per matmul weight and token
    attention = plain.get_total_flops() - 6 * matmul_weights * TOKENS
    assert attention == 12 * 1 * 256 * TOKENS * TOKENS  # one attention layer, d = 4 x 64
    assert round((f0.per_token - 6 * pc.active) * TOKENS) == attention
    # eq. (2'): what the checkpointed step runs again
    recomputed = ckpt.get_total_flops() - plain.get_total_flops()
    print(f"\n{pattern}: recomputed {recomputed:,} FLOPs counted, {(f1.per_token - f0.per_token) * TOKENS:,.0f} "
          "predicted")
    assert round((f1.per_token - f0.per_token) * TOKENS) == recomputed


def test_a_mamba_layer_lists_its_own_projections_and_recomputes_in_proj_only() -> None:
    pattern = "M*"
    spec = spec_from_config(_config(pattern), name="tiny-nemotron-h")
    model, plain = _counted(pattern, False)
    mixer = model.model.layers[0].mixer
    assert type(mixer).__name__ == "NemotronHMamba2Mixer"
    st = _matmul_setup(spec, "full", 16, ())
    shapes = layer_matmul_shapes(spec, 0, st)
    lin_in, lin_out = mixer.in_proj, mixer.out_proj
    assert [(n, i, o) for n, i, o, _ in shapes] == [("ssm_in", lin_in.in_features, lin_in.out_features),
                                                     ("ssm_out", lin_out.in_features, lin_out.out_features)]

    def module(counter: Any, name: str) -> int:
        return sum(v for k, c in counter.get_flop_counts().items() if k.endswith(f"layers.0.mixer.{name}")
                   for v in c.values())

    assert module(plain, "in_proj") == 6 * lin_in.in_features * lin_in.out_features * TOKENS
    # checkpointed: the non-reentrant checkpoint runs in_proj again and stops before out_proj, the layer's last
    # matmul, as full_recompute_flops takes it (forward calls counted by hooks; the FLOP counter files the whole
    # recomputation under out_proj, whose backward triggers it)
    model, ckpt = _counted(pattern, True)
    calls = {"in_proj": 0, "out_proj": 0}
    mixer = model.model.layers[0].mixer
    for name in calls:
        getattr(mixer, name).register_forward_hook(lambda *a, n=name: calls.__setitem__(n, calls[n] + 1))
    ids = torch.randint(0, BASE["vocab_size"], (1, TOKENS))
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    assert calls == {"in_proj": 2, "out_proj": 1}
    assert module(ckpt, "in_proj") - module(plain, "in_proj") == 2 * lin_in.in_features * lin_in.out_features * TOKENS
    recomputed = sum(2 * i * o for _, i, o, _ in shapes[:-1]) * TOKENS
    from llmsizer.formulas.selective_checkpointing import full_recompute_flops
    assert full_recompute_flops(spec, 0, st) * TOKENS == recomputed

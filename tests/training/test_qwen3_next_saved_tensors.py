"""Qwen3-Next training activations (formulas/training_activations.py ``gated_deltanet_saved_terms``, eq. DN2; the
gated attention's eq. DN4; the shared-expert gate's eq. DN5; Qwen3NextRMSNorm's eq. N3) against what autograd saves.

Independent truth: the distinct non-parameter storages autograd saves (``torch.autograd.graph.saved_tensors_hooks``,
as tests/training/test_gemma3n_saved_tensors.py) while each decoder layer of a small Qwen3-Next runs its training
forward: hidden 256, 4 layers (3 Gated DeltaNet with 4 key heads of 32 and 8 value heads of 48, conv kernel 4; 1
gated attention with 4 query / 2 K/V heads of 64, partial rotary), an MoE block of 8 experts (top 2, intermediate 64)
with a gated shared expert of 96 on every layer; pure bf16 on the CPU (transformers 5.24 runs the torch fallback
``torch_chunk_gated_delta_rule`` and ``causal_conv1d_fn`` there: recurrent_kernel "torch"), SDPA, every weight
trained. A layer's count takes each storage once, at the first layer that saves it (the rotary cos/sin, a shared
term, lands on the attention layer: 16 KiB of its 7.7 MiB).

Measured (torch 2.13 CPU): B=2, T=256: Gated DeltaNet layer 22,121,312 B saved, 22,108,928 counted (0.9994);
attention layer 8,097,312 / 8,068,608 (0.9965). B=1, T=200 (the rule pads to 256): 9,871,536 / 9,984,912 (1.011)
and 3,170,992 / 3,153,360 (0.994). PEFT LoRA (r 8 on q, k, v, o and the fused experts; the Gated DeltaNet linears
frozen), B=2, T=256: 20,433,728 / 20,437,760 (1.0002) and 6,721,056 / 6,708,736 (0.998). Before these terms a Gated
DeltaNet layer was counted as an attention layer (6,098,944 B full, 0.28 of what it saves) and the attention layer
missed its output gate and fp32 norm outputs (0.75); all three cases failed.
Not covered: fp32 (several ``.float()`` casts become no-ops and the count reads 6% low there) and
flash-linear-attention's kernel (eq. DN3, a GPU path, counted from its ``save_for_backward``).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.lora import adapted_roles
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

pytestmark = pytest.mark.slow

CONFIG: dict[str, Any] = dict(
    model_type="qwen3_next", vocab_size=512, hidden_size=256, num_hidden_layers=4, intermediate_size=384,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, linear_num_key_heads=4, linear_num_value_heads=8,
    linear_key_head_dim=32, linear_value_head_dim=48, linear_conv_kernel_dim=4, full_attention_interval=4,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=96,
    decoder_sparse_step=1, max_position_embeddings=4096, tie_word_embeddings=False, partial_rotary_factor=0.25)
GDN_LAYER, ATTENTION_LAYER = 1, 3  # (under LoRA layer 0 keeps nothing before its first adapter: its input
# needs no gradient)
RANK = 8


def _saved_by_layer(batch: int, tokens: int, lora: bool = False, autocast: bool = False) -> dict[int, int]:
    torch.manual_seed(0)
    model = build(CONFIG, device="cpu", dtype=torch.float32 if autocast else torch.bfloat16, attn="sdpa")
    layers = model.model.layers
    if lora:  # PEFT moves gate/up/down onto the fused experts (target_parameters); bf16 adapters: no fp32 casts
        peft = pytest.importorskip("peft")
        conf = peft.LoraConfig(r=RANK, lora_alpha=16, lora_dropout=0.0, target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
        model = peft.get_peft_model(model, conf, autocast_adapter_dtype=False)
    model.train()
    by_layer = saved_storages_by_layer(model, layers)
    assert type(layers[GDN_LAYER].linear_attn).__name__ == "Qwen3NextGatedDeltaNet"
    assert type(layers[ATTENTION_LAYER].self_attn).__name__ == "Qwen3NextAttention"
    ids = random_ids(CONFIG["vocab_size"], batch, tokens)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        model(input_ids=ids, labels=ids, use_cache=False)
    return by_layer


@pytest.mark.parametrize(("batch", "tokens", "lora"), [(2, 256, False), (1, 200, False), (2, 256, True)])
def test_qwen3_next_layer_saved_tensors(batch: int, tokens: int, lora: bool, capsys: Any) -> None:
    measured = _saved_by_layer(batch, tokens, lora)
    spec = spec_from_config(CONFIG, name="tiny-qwen3-next")
    adapted = adapted_roles(spec, ("q", "k", "v", "o", "gate", "up", "down")) if lora else frozenset()
    st = ActivationSetup(batch=batch, seq=tokens, residual=2, compute=2, expert=2, full=not lora, adapted=adapted,
                         rank=RANK if lora else 0, attention="sdpa", recurrent_kernel="torch")
    for layer in (GDN_LAYER, ATTENTION_LAYER):
        predicted = sum(t.bytes for t in layer_saved_terms(spec, layer, st))
        with capsys.disabled():
            print(f"\n[qwen3-next layer {layer}, B={batch} T={tokens}{' LoRA' if lora else ''}] saved {measured[layer]:,} B, counted "
                  f"{predicted:,} B (ratio {predicted / measured[layer]:.4f})")
        assert predicted == pytest.approx(measured[layer], rel=0.02)


def test_qwen3_next_layers_under_autocast(capsys: Any) -> None:
    """fp32 weights under bf16 autocast (the estimate's bf16-mixed): each linear reading an fp32 tensor casts its own
    copy (in_proj_qkvz and in_proj_ba; q, k and v; the router, the shared expert's gate and up and its
    shared_expert_gate), the linears' and the conv's weights are cast (the autocast weight copies, counted here from
    the real layer's 2-D and conv weights), the delta rule still runs in fp32. Measured: Gated DeltaNet layer 25.40 to
    25.50 MB saved (the storage-id count varies by 98,304 B from run to run), 25,612,544 counted (1.004-1.008);
    attention layer 11,673,632 B, 11,624,448 counted (0.996). Before the shared_expert_gate's own input copy: 0.973."""
    measured = _saved_by_layer(2, 256, autocast=True)
    spec = spec_from_config(CONFIG, name="tiny-qwen3-next")
    model = build(CONFIG)  # meta device: the layers' weight shapes
    st = ActivationSetup(batch=2, seq=256, residual=4, compute=2, expert=4, autocast=True, weight_copy=2, full=True,
                         attention="sdpa", recurrent_kernel="torch")
    for layer in (GDN_LAYER, ATTENTION_LAYER):
        cast = sum(p.numel() for n, p in model.model.layers[layer].named_parameters()
                   if p.ndim >= 2 and not n.startswith("mlp.experts") and n != "mlp.gate.weight")
        predicted = sum(t.bytes for t in layer_saved_terms(spec, layer, st, cast))
        with capsys.disabled():
            print(f"\n[qwen3-next layer {layer}, autocast] saved {measured[layer]:,} B, counted {predicted:,} B "
                  f"(ratio {predicted / measured[layer]:.4f})")
        assert predicted == pytest.approx(measured[layer], rel=0.02)

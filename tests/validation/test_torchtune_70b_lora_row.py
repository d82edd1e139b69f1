"""PM0027 (torchtune README @ 0217d44c2: 8 x A100, LoRA, Llama2-70B, 'Batch Size = 4, Seq Length = 4096', 26.4 GB):
its settings and why it is printed, not asserted.

The truth here is torchtune's own source at 0217d44c2, with the arithmetic done by hand below:
- the LoRA is llama2/70B_lora.yaml lines 15-18: ``lora_attn_modules: ['q_proj', 'v_proj', 'k_proj']``,
  ``apply_lora_to_mlp: False``, ``lora_rank: 16`` (the only 70B LoRA config of that commit);
- recipes/lora_finetune_distributed.py lines 332-340 wraps with FSDP1 ``ShardingStrategy.FULL_SHARD``,
  ``mixed_precision=None``: every FlatParameter, the frozen base's included, is sharded over the 8 ranks in bf16;
- lines 356-359 checkpoint every ``TransformerDecoderLayer`` (non-reentrant), which keeps the layer's input,
  [batch, seq, hidden] in bf16, for each of the 80 layers through the backward.
Shard + kept layer inputs alone exceed the published number at the published shape, so the cell is not the step's
peak at 4 x 4096 tokens and the row stays out of the summary (``asserted`` False).
"""

from __future__ import annotations

from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model
from llmsizer.validation_cases import TRAINING_ROWS, public_rows, training_measured_bytes

# Llama-2-70b-hf config.json: hidden 8192, 80 layers, 64 heads of 128, 8 KV heads, MLP 28672, vocab 32000, untied
H, LAYERS, KV, FF, VOCAB = 8192, 80, 8 * 128, 28672, 32000
RANK, WORLD, BF16 = 16, 8, 2


def _estimate():  # type: ignore[no-untyped-def]
    model, fields, *_ = TRAINING_ROWS["PM0027"]
    return estimate_training(load_model(model), **fields)


def test_pm0027_lora_is_the_configs_q_k_v_rank_16() -> None:
    # LoRA A (in x r) + B (r x out) on q (8192 -> 8192), k and v (8192 -> 1024) of every layer: 44.56M params,
    # each matrix its own FULL_SHARD unit (torchtune/utils/_distributed.py @ 0217d44c2 lines 229-240,
    # lora_wrap_fsdp), so a rank holds 1/8 of them (every matrix divides by 8: no FSDP padding)
    per_layer = RANK * (H + H) + 2 * RANK * (H + KV)
    est = _estimate()
    assert est.item("adapter_weights").bytes == LAYERS * per_layer * BF16 // WORLD


def test_pm0027_published_cell_is_below_shard_plus_checkpointed_inputs() -> None:
    _, fields, _, asserted, _ = TRAINING_ROWS["PM0027"]
    per_layer = 2 * H * H + 2 * H * KV + 3 * H * FF + 2 * H  # q, o; k, v; gate, up, down; two RMSNorms
    params = LAYERS * per_layer + 2 * VOCAB * H + H  # + embedding, output, final norm
    shard = params * BF16 / WORLD
    kept_inputs = LAYERS * fields["micro_batch"] * fields["seq_len"] * H * BF16
    measured = training_measured_bytes(public_rows()["PM0027"])
    est = _estimate()
    assert abs(est.item("weights").bytes - shard) / shard < 1e-6
    assert est.item("activations").bytes >= kept_inputs
    assert shard + kept_inputs > measured * 1.4  # 36 GiB against 24.6 GiB: not this shape's step peak
    assert asserted is False

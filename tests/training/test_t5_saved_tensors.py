"""One T5 / mT5 block's saved tensors in training (formulas/encoder_decoder_activations.py eq. E4) against what
autograd really saves.

Independent truth: the distinct non-parameter storages autograd saves (``oracle_utils.saved_storage_hooks``, as
tests/training/test_parallel_block_saved_tensors.py) during the training forward (labels given) of small
T5ForConditionalGeneration models (transformers 5.24, torch 2.13 CPU, fp32, eager attention, every weight
trained). A block's bytes are the difference between two models that differ by one encoder (or one decoder) block:
everything outside the blocks (position bias, embedding dropout, final norms, lm_head, loss) cancels. Source and
target lengths differ so that a swapped length fails.
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.encoder_decoder_activations import t5_block_saved_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storage_hooks, torch

pytestmark = pytest.mark.slow

_SMALL = {"model_type": "t5", "vocab_size": 300, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_heads": 6,
          "decoder_start_token_id": 0, "pad_token_id": 0, "tie_word_embeddings": False}
CONFIGS = {
    "t5-v1_1-dropout": {**_SMALL, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.1},
    "t5-v1_1-no-dropout": {**_SMALL, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.0},
    "t5-relu-dropout": {**_SMALL, "feed_forward_proj": "relu", "dropout_rate": 0.1},
    "t5-relu-no-dropout": {**_SMALL, "feed_forward_proj": "relu", "dropout_rate": 0.0},
}
BATCH = 2


def _saved(cfg: dict, enc: int, dec: int, source: int, target: int) -> int:
    cfg = {**cfg, "num_layers": enc, "num_decoder_layers": dec}
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="eager")
    model.train()
    saved, hooks = saved_storage_hooks(model)
    with hooks:
        model(input_ids=random_ids(cfg["vocab_size"], BATCH, source),
              labels=random_ids(cfg["vocab_size"], BATCH, target, seed=1), use_cache=False)
    return sum(saved.values())


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("source", "target"), [(24, 10), (12, 20)])
def test_block_terms_equal_what_autograd_saves(name, source, target):
    cfg = CONFIGS[name]
    base = _saved(cfg, 1, 1, source, target)
    enc_measured = _saved(cfg, 2, 1, source, target) - base
    dec_measured = _saved(cfg, 1, 2, source, target) - base
    spec = spec_from_config({**cfg, "num_layers": 1, "num_decoder_layers": 1}, name=name)
    assert t5_block_saved_bytes(spec, 0, BATCH, source, target, 4, 4) == enc_measured  # CPU masks: fp32
    assert t5_block_saved_bytes(spec, 1, BATCH, source, target, 4, 4) == dec_measured


def _model_cfg(name: str, tie: bool) -> dict:
    return {**CONFIGS[name], "num_layers": 2, "num_decoder_layers": 3, "tie_word_embeddings": tie}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize(("source", "target"), [(24, 10), (12, 20)])
def test_whole_model_saved_bytes_equal_what_autograd_saves(name, tie, source, target):
    """Every saved storage of the training forward (blocks, embeddings, position-bias buckets, final norms, dropout
    masks, loss) against the training estimate's context (eqs. E4 + E5): a CPU step, so fp32 dropout masks."""
    from llmsizer import estimate_training
    from llmsizer.estimate.training.compose import training_context
    from llmsizer.formulas.training_activations import head_activations, layer_saved_terms
    from llmsizer.specs import TrainingWorkload

    cfg = _model_cfg(name, tie)
    measured = _saved(cfg, cfg["num_layers"], cfg["num_decoder_layers"], source, target)
    spec = spec_from_config(cfg, name=name)
    w = TrainingWorkload(method="full", precision="fp32", attention="eager", device="cpu", micro_batch=BATCH,
                         seq_len=source, target_len=target)
    act = training_context(spec, w).act
    layers = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, act))
    outside = sum(t.bytes for t in head_activations(spec, act, lm_head_trained=True).saved)
    assert layers + outside == measured
    assert estimate_training(spec, w).details["saved_activations_bytes"] == layers


def test_target_len_swapped_fails():
    """The source and target lengths are not interchangeable (the check above can fail)."""
    from llmsizer.estimate.training.compose import training_context
    from llmsizer.formulas.training_activations import head_activations
    from llmsizer.specs import TrainingWorkload

    spec = spec_from_config(_model_cfg("t5-v1_1-dropout", False), name="x")
    act = [training_context(spec, TrainingWorkload(method="full", precision="fp32", attention="eager", device="cpu",
                                                   micro_batch=BATCH, seq_len=s, target_len=t)).act
           for s, t in ((24, 10), (10, 24))]
    assert sum(t.bytes for t in head_activations(spec, act[0], True).saved) != sum(
        t.bytes for t in head_activations(spec, act[1], True).saved)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("source", "target"), [(24, 10), (12, 20)])
def test_lora_q_v_whole_model_saved_bytes_equal_what_autograd_saves(name, source, target):
    """PEFT LoRA on T5's default targets q and v (r 8, lora_dropout 0.1; PEFT 0.21.2 adapts the self- and the
    cross-attention's q and v): every saved storage but the parameters against eq. (E6) through the estimate's
    context, and the trainable parameters against the estimate's adapter count."""
    peft = pytest.importorskip("peft")
    from llmsizer.estimate.training.compose import training_context
    from llmsizer.formulas.training_activations import head_activations, layer_saved_terms
    from llmsizer.specs import TrainingWorkload

    cfg = _model_cfg(name, False)
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="eager")
    model = peft.get_peft_model(model, peft.LoraConfig(task_type="SEQ_2_SEQ_LM", r=8, lora_alpha=32, lora_dropout=0.1))
    model.train()
    saved, hooks = saved_storage_hooks(model)
    with hooks:
        model(input_ids=random_ids(cfg["vocab_size"], BATCH, source),
              labels=random_ids(cfg["vocab_size"], BATCH, target, seed=1), use_cache=False)
    spec = spec_from_config(cfg, name=name)
    w = TrainingWorkload(method="lora", rank=8, alpha=32, targets=("q", "v"), lora_dropout="per-module",
                         precision="fp32", attention="eager", device="cpu", micro_batch=BATCH, seq_len=source,
                         target_len=target)
    ctx = training_context(spec, w)
    layers = sum(t.bytes for i in range(spec.num_layers) for t in layer_saved_terms(spec, i, ctx.act))
    outside = sum(t.bytes for t in head_activations(spec, ctx.act, lm_head_trained=False).saved)
    assert layers + outside == sum(saved.values())
    # the estimate composes the same per-block terms: each stack's first block (eq. E6, g = 0) apart from the others
    # (before, the first block's terms stood for every block of its stack)
    from llmsizer.estimate.training import estimate_training

    assert estimate_training(spec, w).details["saved_activations_bytes"] == layers
    assert ctx.lora is not None
    assert ctx.lora.total == sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_weights_gradients_and_adamw_states_equal_a_real_step(method):
    """One real AdamW step of a tiny T5 (CPU, fp32; PEFT LoRA r 8 on q, v): the weights, adapters, gradients and the
    optimizer's states it holds (exp_avg, exp_avg_sq, the fp32 step scalar) against the estimate's model states."""
    from llmsizer import estimate_training

    cfg = _model_cfg("t5-v1_1-dropout", False)
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32, attn="eager")
    fields = dict(precision="fp32", attention="eager", device="cpu", micro_batch=BATCH, seq_len=24, target_len=10,
                  optimizer="adamw")
    if method == "lora":
        peft = pytest.importorskip("peft")
        model = peft.get_peft_model(model, peft.LoraConfig(task_type="SEQ_2_SEQ_LM", r=8, lora_alpha=32,
                                                           lora_dropout=0.1))
        fields.update(method="lora", rank=8, alpha=32, targets=("q", "v"), lora_dropout="per-module")
    model.train()
    trained = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=1e-3)
    model(input_ids=random_ids(cfg["vocab_size"], BATCH, 24),
          labels=random_ids(cfg["vocab_size"], BATCH, 10, seed=1), use_cache=False).loss.backward()
    grads = sum(p.grad.nbytes for p in trained)
    opt.step()
    states = sum(t.nbytes for s in opt.state.values() for t in s.values())  # exp_avg, exp_avg_sq, step
    frozen = sum(p.nbytes for p in model.parameters() if not p.requires_grad)
    est = estimate_training(spec_from_config(cfg, name="t5"), **fields)
    ms = est.details["model_states"]
    if method == "lora":
        assert (ms["weights"], ms["adapter_weights"]) == (frozen, sum(p.nbytes for p in trained))
    else:
        assert ms["weights"] == sum(p.nbytes for p in trained) and frozen == 0
    assert (ms["gradients"], ms["optimizer_states"]) == (grads, states)

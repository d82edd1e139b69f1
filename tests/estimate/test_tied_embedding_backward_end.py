"""Where the estimate adds a trained tied embedding's extra gradients at the backward end (formulas/
training_activations.py eq. T1; the byte counts are tested against a live trace in
tests/formulas/test_tied_embedding_grad.py, the whole estimate against the measured CPU row
validation/measured/cpu-amd-epyc-2vcpu-2026-12-02.jsonl line 3).

Qwen2.5-0.5B ties its embeddings (config.json ``tie_word_embeddings: true``; V = 151936, h = 896). Fully trained in
fp32 with SGD + momentum, the backward end holds three fp32 V x h tensors where the gradients count one: 2 V h 4 B
above them, less the embedding's incoming [t, h] gradient already counted as the backward transient. Frozen
(LoRA) or sharded (FSDP) the term is absent.
"""

from __future__ import annotations

from llmsizer.estimate.training.compose import estimate_training, training_context
from llmsizer.estimate.training.states import stage_states
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload

V, H, SEQ = 151936, 896, 256
BASE = dict(micro_batch=1, seq_len=SEQ, optimizer="sgd-momentum", precision="fp32", grad_checkpointing="full")


def _items(**kw: object) -> dict[str, int]:
    return {i.name: i.bytes for i in estimate_training("qwen2.5-0.5b", **{**BASE, **kw}).items}


def test_full_fine_tune_holds_two_more_embedding_gradients() -> None:
    items = _items(method="full")
    assert items["tied_embedding_gradients"] == 2 * V * H * 4 - SEQ * H * 4


def _backward_end(**kw: object) -> dict[str, int]:
    ctx = training_context(load_model("qwen2.5-0.5b"), TrainingWorkload(**{**BASE, **kw}))  # type: ignore[arg-type]
    tl = stage_timeline(ctx, stage_states(ctx, 0))
    return next(p.parts for p in tl.phases if p.name == "backward end")


def test_the_term_only_for_a_trained_unsharded_tied_embedding() -> None:
    assert _backward_end(method="full")["tied_embedding_gradients"] == 2 * V * H * 4 - SEQ * H * 4
    assert "tied_embedding_gradients" not in _backward_end(method="lora")  # frozen embedding
    assert "tied_embedding_gradients" not in _backward_end(method="full", fsdp="full", gpus=2)  # sharded: not modeled


def test_untied_embedding_new_gradient_beside_a_kept_grad() -> None:
    """An untied model (Llama-3.1-8B: config.json ``tie_word_embeddings: false``, V = 128256, h = 4096): with
    gradients kept across micro-batches the embedding's new [V, h] gradient sits beside its .grad at the backward
    end (eq. A1; bytes against a live trace in tests/formulas/test_tied_embedding_grad.py); with one micro-batch
    the new gradient becomes the .grad (stolen): nothing extra."""
    v, h = 128256, 4096
    ctx = training_context(load_model("llama-3.1-8b"), TrainingWorkload(  # type: ignore[arg-type]
        **{**BASE, "method": "full", "grad_accumulation": 2}))
    parts = next(p.parts for p in stage_timeline(ctx, stage_states(ctx, 0)).phases if p.name == "backward end")
    assert parts["embedding_gradient_accumulation"] == v * h * 4
    assert "tied_embedding_gradients" not in parts
    ctx1 = training_context(load_model("llama-3.1-8b"), TrainingWorkload(**{**BASE, "method": "full"}))  # type: ignore[arg-type]
    end1 = next(p.parts for p in stage_timeline(ctx1, stage_states(ctx1, 0)).phases if p.name == "backward end")
    assert "embedding_gradient_accumulation" not in end1
    lora = training_context(load_model("llama-3.1-8b"), TrainingWorkload(  # type: ignore[arg-type]
        **{**BASE, "method": "lora", "grad_accumulation": 2}))
    end_l = next(p.parts for p in stage_timeline(lora, stage_states(lora, 0)).phases if p.name == "backward end")
    assert "embedding_gradient_accumulation" not in end_l  # frozen embedding


def test_layer_backward_holds_the_new_mlp_gradient_beside_a_kept_grad() -> None:
    """Llama-3.1-8B (h = 4096, I = 14336, config.json), fp32, 256 tokens: with kept .grads a layer's backward
    transient is at least the down projection's new [h, I] gradient (eq. A2: I h 4 B + the [t, I] input gradient +
    2 residual gradients; bytes against a live MLP trace in tests/formulas/test_tied_embedding_grad.py); with one
    micro-batch the plain transient (no [h, I] term) stays."""
    h, i = 4096, 14336

    def transient(**kw: object) -> int:
        ctx = training_context(load_model("llama-3.1-8b"), TrainingWorkload(  # type: ignore[arg-type]
            **{**BASE, "method": "full", **kw}))
        tl = stage_timeline(ctx, stage_states(ctx, 0))
        return next(p.parts["backward_transient"] for p in tl.phases if p.name.startswith("backward layer"))

    assert transient(grad_accumulation=2) == i * h * 4 + SEQ * i * 4 + 2 * SEQ * h * 4
    assert transient() < i * h * 4  # the activation gradients alone: 3 t I 4 B + 2 t h 4 B

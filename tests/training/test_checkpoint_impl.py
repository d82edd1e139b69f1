"""checkpoint_impl='reentrant' (formulas/training_activations.py ``reentrant_recompute_bytes``) against the CPU
allocator's bytes (tests/training/measure_step.py ``AllocatorBytes``) over a real CPU step of a tiny transformers
Llama (bf16, random weights), once with each implementation of torch.utils.checkpoint
(``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": ...})``).

The backward's peak above the parameters is measured for both; the reentrant run holds the recomputed layer's
output (and the 5 kB CPU RNG states of the layers already done) on top of the non-reentrant run's tensors, and the
estimate must add exactly that output to each checkpointed layer's backward, and nothing to the forward.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, S = 2, 512
CONFIG = dict(model_type="llama", vocab_size=128, hidden_size=256, intermediate_size=1024, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048, tie_word_embeddings=False)


def _peaks(reentrant: bool) -> tuple[int, int]:
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**CONFIG)
    conf._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    ids = torch.randint(0, CONFIG["vocab_size"], (B, S))
    with AllocatorBytes() as alloc:  # the parameters and ids exist before: the bytes above them
        alloc.mark()
        out = model(input_ids=ids, labels=ids)
        alloc.mark()
        out.loss.backward()
    return alloc.peak(0, 1) - alloc.level(0), alloc.peak(1) - alloc.level(0)


def test_reentrant_recompute_holds_the_layer_output() -> None:
    (f_non, b_non), (f_re, b_re) = _peaks(False), _peaks(True)
    spec = spec_from_config(CONFIG, name="tiny-llama")
    fields = dict(precision="bf16", micro_batch=B, seq_len=S, grad_checkpointing="full", optimizer="sgd")
    non = estimate_training(spec, **fields)
    re = estimate_training(spec, **fields, checkpoint_impl="reentrant")
    added = {name: re.details["phases"][name] - total for name, total in non.details["phases"].items()}
    output = B * S * CONFIG["hidden_size"] * 2  # bf16 residual stream
    assert f_re == f_non and added["forward end"] == 0
    # the measured difference: one hidden state, and the CPU RNG states of layers whose backward has run, which
    # the reentrant CheckpointFunction keeps as long as the graph (ctx.fwd_cpu_state, torch/utils/checkpoint.py
    # line 247 @ torch 2.13.0) while the non-reentrant frame's copy (line 1632) goes with the layer's saved tensors
    rng = torch.get_rng_state().numel()  # 5,056 B, not in the estimate
    extra = b_re - b_non - output
    print(f"\nbackward peak: reentrant - non-reentrant = {b_re - b_non:,} B = output {output:,} B + {extra // rng} RNG "
          f"states + {extra % rng} B")
    assert extra % rng == 0 and 0 <= extra <= (CONFIG["num_hidden_layers"] - 1) * rng
    assert added["backward layer 0"] == added["backward layer 2"] == output


def test_reentrant_needs_full_checkpointing() -> None:
    with pytest.raises(InputError, match="reentrant"):
        estimate_training("llama-3.1-8b", grad_checkpointing="selective-op", checkpoint_impl="reentrant")


def test_torch_1_13_checkpoint_needs_full_checkpointing() -> None:
    """'non-reentrant-no-early-stop' is torch 1.13's checkpoint around whole layers: refused with a selective policy
    or without checkpointing (one-line bad input), its memory the non-reentrant one's (the recomputed output is
    dropped where it is made)."""
    spec = spec_from_config(CONFIG, name="tiny-llama")
    fields = dict(precision="bf16", micro_batch=B, seq_len=S, optimizer="sgd")
    for ckpt in ("none", "selective-op"):
        with pytest.raises(InputError, match="non-reentrant-no-early-stop"):
            estimate_training(spec, **fields, grad_checkpointing=ckpt, checkpoint_impl="non-reentrant-no-early-stop")
    old = estimate_training(spec, **fields, grad_checkpointing="full", checkpoint_impl="non-reentrant-no-early-stop")
    new = estimate_training(spec, **fields, grad_checkpointing="full")
    assert old.details["phases"] == new.details["phases"]

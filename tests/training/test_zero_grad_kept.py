"""``zero_grad='zeros'`` (specs/training.py ``ZERO_GRADS``: a loop whose ``optimizer.zero_grad`` passes
``set_to_none=False``, accelerate <= 0.27's AcceleratedOptimizer default) against the CPU allocator's bytes
(tests/training/measure_step.py ``AllocatorBytes``) over a real two-step fp32 full fine-tune of a tiny Llama with
torch's AdamW: the loop of the PEFT example scripts (peft @ 0032f32a
examples/conditional_generation/peft_lora_seq2seq_accelerate_ds_zero3_offload.py lines 196-201: forward, backward,
``optimizer.step()``, ``optimizer.zero_grad()``). What the second step's forward starts beside, above the same loop
with ``set_to_none=True``, is what the estimate's forward moments add: every trained parameter's gradient.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

B, S = 2, 64
CONFIG = dict(model_type="llama", vocab_size=2000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False)


def _between_steps(set_to_none: bool) -> int:
    """Live bytes when the second step's forward starts, above those before the first step."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**CONFIG)
    conf._attn_implementation = "sdpa"
    with AllocatorBytes() as alloc:
        model = transformers.AutoModelForCausalLM.from_config(conf)
        opt = torch.optim.AdamW(model.parameters(), foreach=False)
        ids = torch.randint(0, CONFIG["vocab_size"], (B, S))
        for p in model.parameters():  # AdamW's states made before the marks, as after any first step
            opt.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        alloc.mark()  # mark 0: before the first step
        for _ in range(2):
            alloc.mark()  # marks 1, 2: a step's forward starts
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=set_to_none)
    return alloc.level(2) - alloc.level(0)


def test_kept_gradients_are_what_the_forward_starts_beside() -> None:
    kept = _between_steps(False) - _between_steps(True)
    spec = spec_from_config(CONFIG, name="tiny-llama")
    fields = dict(precision="fp32", micro_batch=B, seq_len=S)
    zeros = estimate_training(spec, **fields, zero_grad="zeros")
    freed = estimate_training(spec, **fields)
    grads = zeros.details["phases"]["forward end"] - freed.details["phases"]["forward end"]
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**CONFIG))
    assert kept == sum(p.numel() * 4 for p in model.parameters())  # the real .grad tensors, fp32
    assert grads == pytest.approx(kept, rel=0.005)
    assert next(a for a in zeros.assumptions if a.name == "zero_grad").value == "zeros"
    assert next(a for a in freed.assumptions if a.name == "zero_grad").default


def test_kept_gradients_are_refused_where_deepspeed_owns_them() -> None:
    with pytest.raises(InputError, match="zero_grad"):
        estimate_training("qwen2.5-0.5b", zero=3, gpus=2, zero_grad="zeros")

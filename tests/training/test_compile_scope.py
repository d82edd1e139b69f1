"""``compile_scope``: what torch.compile covers (specs/training.py), through the estimate, the CLI and bad input.

The compiled loss's saved tensors are measured on inductor in tests/formulas/test_compiled_loss.py; here: the scope
'layers' (torchtitan @9dec370, loss eager) keeps the eager loss head exactly, 'layers+loss' (torchtune) keeps the
loss's input logits instead of the fp32 log-softmax (eq. C1: chunked, the bf16 logits t V 2), and the CLI refuses a
scope without --compile in one line with exit 2.
"""

from __future__ import annotations

import pytest
from tests.cli.cli_run import run

from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

RUN = dict(method="lora", rank=8, targets="q,v", precision="bf16", micro_batch=2, seq_len=2048, loss_chunks=8,
           grad_checkpointing="full")


def _head(**kw: object) -> int:
    est = estimate_training(load_model("llama-3.2-3b"), **RUN, **kw)  # type: ignore[arg-type]
    return int(est.details["peak_parts"].get("head_activations", 0))


def test_scope_layers_keeps_the_eager_loss_head() -> None:
    assert _head(compile=True, compile_scope="layers") == _head()


def test_compiled_loss_keeps_the_bf16_logits_not_the_fp32_log_softmax() -> None:
    t, v = 2 * 2048, 128256
    assert _head() - _head(compile=True) == t * v * (4 - 2) + t * (8 - 16)


def test_scope_needs_compile() -> None:
    with pytest.raises(InputError, match="compile_scope 'layers'"):
        estimate_training(load_model("llama-3.2-3b"), **RUN, compile_scope="layers")  # type: ignore[arg-type]


def test_cli_scope_without_compile_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["train", "llama-3.2-3b", "--compile-scope", "layers"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "compile_scope" in err

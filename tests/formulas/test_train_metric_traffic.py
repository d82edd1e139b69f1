"""Eq. (E12) of formulas/elementwise_traffic.py: the memory-bound bytes of one training-metric pass, an eager
no-grad ``torch.nn.CrossEntropyLoss(reduction='sum')`` over the logits, as Composer's LanguageCrossEntropy and
LanguagePerplexity run it after each micro-batch's backward (composer v0.16.4 metrics/nlp.py lines 100, 119-121,
188; trainer/trainer.py lines 2166-2175, 2472-2475).

The truth is torch's own dispatch of that call on real bf16 logits on the CPU (torch 2.13): every aten kernel it
runs with the shapes and dtypes of what it reads and writes. CPU autocast dispatches it as CUDA's bf16 autocast
does (the fp32 ``_to_copy``, then ``_log_softmax`` in fp32: log_softmax's fp32_set_opt_dtype policy, and aten's
``log_softmax(input, dim, dtype)`` fuses the upcast only for fp16 on CUDA). ``nll_loss_forward`` is counted as the
one log-probability per token it gathers (aten's kernel reads ``input[i][target[i]]``), not the [t, V] tensor it
is handed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.duration import elementwise_bytes_per_token  # noqa: E402
from llmsizer.estimate.framework import with_framework  # noqa: E402
from llmsizer.formulas.elementwise_traffic import metric_pass_bytes  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs.training import TrainingWorkload  # noqa: E402
from llmsizer.validation_cases import mpt_attn_impl, mpt_config, mpt_fields, mpt_row, public_rows  # noqa: E402

GATHERS = ("aten.nll_loss_forward.default",)  # reads one entry per row of its [t, V] input


class _Bytes(TorchDispatchMode):
    """Bytes every dispatched kernel reads and writes, and the [t, V] tensors it allocates."""

    def __init__(self, tokens: int) -> None:
        super().__init__()
        self.tokens, self.moved, self.allocated, self.kernels = tokens, 0, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if func.is_view:  # the metric's ``logits.view(...)``: an alias, no kernel, no bytes
            return out
        ins = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        outs = [a for a in tree_leaves(out) if isinstance(a, torch.Tensor)]
        for a in ins:
            gathered = str(func) in GATHERS and a.dim() == 2
            self.moved += (self.tokens if gathered else a.numel()) * a.element_size()
        for a in outs:
            self.moved += a.numel() * a.element_size()
            self.allocated += a.numel() * a.element_size() if a.dim() == 2 else 0
        self.kernels.append(str(func))
        return out


def _measure(tokens: int, vocab: int, autocast: bool) -> _Bytes:
    logits = torch.randn(tokens, vocab).bfloat16()
    target = torch.randint(0, vocab, (tokens,))
    target[::7] = -100  # llm-foundry's shifted labels end each row with the ignore index
    metric_loss = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")  # composer metrics/nlp.py line 100
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), _Bytes(tokens) as m:
        metric_loss(logits.view(tokens, -1), target.view(-1))
    return m


@pytest.mark.parametrize("autocast", [True, False])
def test_one_metric_pass_moves_eq_e12s_bytes(autocast: bool) -> None:
    """Per logit: 2 + 4 (the fp32 copy) + 4 + 4 (fp32 log-softmax) = 14 B under autocast, 2 + 2 without; the
    rest (targets, the gathered entries, the scalar sums) is per token. Two vocabularies separate the two parts."""
    t = 48
    small, large = _measure(t, 1000, autocast), _measure(t, 3000, autocast)
    per_logit = (large.moved - small.moved) / (t * 2000)
    assert per_logit == metric_pass_bytes(1, 2.0, autocast)
    assert per_logit == (14.0 if autocast else 4.0)
    # no backward and no saved tensor: the only [t, V] allocations are the copy and the log-probabilities
    assert (large.allocated - small.allocated) / (t * 2000) == (8.0 if autocast else 2.0)
    assert "aten._to_copy.default" in large.kernels if autocast else "aten._to_copy.default" not in large.kernels


def test_fp16_and_fp32_logits() -> None:
    """fp16 under CUDA autocast: the fused half_to_float log-softmax reads 2 and writes 4 B per logit (not
    measurable on the CPU, whose log_softmax has no fused path); fp32 logits: no copy, the log-softmax's 8 B."""
    assert metric_pass_bytes(10, 2.0, True, fp16=True) == 60.0
    assert metric_pass_bytes(10, 4.0, True) == metric_pass_bytes(10, 4.0, False) == 80.0


def _row(rid: str) -> tuple[object, dict[str, object]]:
    r = public_rows()[rid]
    m = mpt_row(r["quote"])
    return spec_from_config(mpt_config(m.model, m.seq_len), name=f"MPT-{m.model}"), \
        mpt_fields(m, mpt_attn_impl(m, r["source_location"]))


@pytest.mark.parametrize(("rid", "per_logit"), [("PM0890", 28.0), ("PM0870", 8.0)])
def test_llmfoundry_rows_count_two_metric_passes(rid: str, per_logit: float) -> None:
    """An A100 bf16 row (PM0890, amp_bf16: torch.autocast) adds 2 x 14 B per logit to its memory-bound traffic; an
    H100 FP8 row (PM0870, amp_fp8: transformer-engine's fp8_autocast only, composer core/precision.py lines 69-81)
    2 x 4 B, the log-softmax in bf16."""
    spec, fields = _row(rid)
    assert fields["framework"] == "llm-foundry" and "train_metric_passes" not in fields  # the profile's default
    spec, w = with_framework(spec, TrainingWorkload(**fields))  # type: ignore[arg-type]
    assert w.train_metric_passes == 2
    with_metrics = elementwise_bytes_per_token(spec, w)
    without = elementwise_bytes_per_token(spec, with_framework(spec, TrainingWorkload(**dict(fields, train_metric_passes=0)))[1])  # type: ignore[arg-type]
    assert with_metrics - without == per_logit * spec.vocab_size  # type: ignore[attr-defined]


def test_the_passes_are_a_named_assumption() -> None:
    from llmsizer.estimate.training.compose import estimate_training

    spec, fields = _row("PM0890")
    got = {a.name: a.value for a in estimate_training(spec, **fields).assumptions}  # type: ignore[arg-type]
    assert got["train_metric_passes"] == 2
    plain = {a.name for a in estimate_training(spec, **dict(fields, train_metric_passes=0)).assumptions}  # type: ignore[arg-type]
    assert "train_metric_passes" not in plain
    for bad in (-1, "2", None, True, 2.5):  # one line naming the field, never a TypeError from a comparison
        with pytest.raises(InputError, match="train_metric_passes must be a whole number"):
            TrainingWorkload(train_metric_passes=bad)  # type: ignore[arg-type]

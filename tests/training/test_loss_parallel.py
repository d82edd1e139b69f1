"""loss='ce-loss-parallel' (formulas/training_activations.py ``head_activations``, eqs. LP1/LP2) against the real
``torch.distributed.tensor.parallel.loss_parallel`` on two gloo ranks.

``loss_parallel_step.py`` runs torchtitan's head and loss lines (a ``ColwiseParallel`` lm_head whose output stays a
vocabulary-sharded DTensor, ``cross_entropy(pred.flatten(0, 1).float(), labels)``, ``del pred``, ``loss.backward()``)
and, as the control, the same lines on a plain linear over the rank's share of the vocabulary, and measures every
allocation from the CPU allocator's profiler events. The [tokens, vocab / tp] terms are compared exactly: the
difference of two vocabulary sizes cancels everything per token (int64 labels and their masked copies, the bool
mask, the fp32 per-token max and sum, whose release can race with gloo's worker thread), so the bytes it holds per
local logit must be the formula's whole number (14 / 16 bf16 with loss_parallel, 10 / 12 without); the whole peak
may exceed the formula only by those per-token scratch tensors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from ranks import run_ranks  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.loss_allocations import eager_loss_events  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup, head_activations  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
RANKS, B, S, H = 2, 2, 128, 64
VOCABS = (2048, 4096)
DTYPES = {"bfloat16": 2, "float32": 4}
SCRATCH_PER_TOKEN = 48  # bytes: int64 target copies, the bool mask, fp32 max / sum-exp statistics (measured: 12 / 33)


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return run_ranks(HERE / "loss_parallel_step.py",
                     dict(batch=B, seq=S, hidden=H, vocabs=list(VOCABS), dtypes=list(DTYPES)), RANKS)


def predicted(vocab: int, c: int, parallel: bool) -> dict[str, int]:
    """The loss's bytes at its forward and backward moments: the kept log-softmax (its int64 labels exist before
    the trace) + the logits and upcast (forward) or the loss gradients (backward), one rank's shard."""
    spec = spec_from_config({"model_type": "llama", "vocab_size": vocab, "hidden_size": H, "intermediate_size": 128,
                             "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4},
                            name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=c, compute=c, tp=RANKS)
    head = head_activations(spec, st, lm_head_trained=False, loss_parallel=parallel)
    kept = next(t.bytes for t in head.saved if t.name.startswith("loss log-softmax")) - B * S * 8
    return {"forward": kept + head.logits_forward, "backward": kept + head.loss_backward}


def lm_head_input(vocab: int, c: int, sp: bool, parallel: bool) -> int:
    spec = spec_from_config({"model_type": "llama", "vocab_size": vocab, "hidden_size": H, "intermediate_size": 128,
                             "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4},
                            name="tiny-llama")
    st = ActivationSetup(batch=B, seq=S, residual=c, compute=c, tp=RANKS, sp=sp)
    head = head_activations(spec, st, lm_head_trained=True, loss_parallel=parallel)
    return next(t.bytes for t in head.saved if t.name == "lm_head input")


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_sequence_parallel_lm_head_keeps_the_gathered_input(measured: dict[str, Any], dtype: str) -> None:
    """With the input sequence-sharded (torchtitan's sequence parallelism), DTensor gathers it before the matmul and
    the matmul keeps the gathered [t, h]: what autograd saves is exactly llmsizer's lm_head input (not Megatron's t/tp
    shard), and the trace holds it on top of the whole-input run (whose input existed before the trace) at both
    moments. The functional all-gather's own output (t h c, copied into the gathered tensor by a cat) is freed once
    its work is waited on, which on gloo's worker thread may fall after the loss: up to one more t h c."""
    c = DTYPES[dtype]
    kept = lm_head_input(VOCABS[0], c, sp=True, parallel=True)
    assert kept == B * S * H * c and lm_head_input(VOCABS[0], c, sp=True, parallel=False) == kept // RANKS
    for v in VOCABS:
        sp, whole = measured[f"parallel-sp {dtype} {v}"], measured[f"parallel {dtype} {v}"]
        print(f"\n{dtype} vocab {v}: sequence-sharded input {sp} B, whole input {whole} B; llmsizer lm_head input "
              f"{kept} B")
        assert sp["saved_input"] == whole["saved_input"] == kept
        for moment in ("forward", "backward"):  # in units of t h c, rounded over gloo's per-token scratch
            assert round((sp[moment] - whole[moment]) / kept) in (1, 2)


@pytest.mark.parametrize("parallel", [True, False], ids=["loss_parallel", "plain"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_loss_tensors_match_the_real_loss(measured: dict[str, Any], parallel: bool, dtype: str) -> None:
    path = "parallel" if parallel else "plain"
    lo, hi = (measured[f"{path} {dtype} {v}"] for v in VOCABS)
    p_lo, p_hi = (predicted(v, DTYPES[dtype], parallel) for v in VOCABS)
    tokens = B * S
    for moment in ("forward", "backward"):
        print(f"\n{path} {dtype} {moment}: measured {lo[moment]} / {hi[moment]} B, llmsizer {p_lo[moment]} / "
              f"{p_hi[moment]} B (vocab {VOCABS[0]} / {VOCABS[1]}, {RANKS} ranks, {tokens} tokens)")
        # bytes per local logit [t, V/tp]: the formula's are whole numbers; the measured ones differ from them only
        # by per-token scratch (int64 / fp32 [t] buffers whose release races with gloo's worker thread)
        logits = tokens * (VOCABS[1] - VOCABS[0]) // RANKS
        per_logit, rest = divmod(p_hi[moment] - p_lo[moment], logits)
        measured_per_logit = (hi[moment] - lo[moment]) / logits
        print(f"  bytes per local logit: measured {measured_per_logit:.4f}, llmsizer {per_logit}")
        assert rest == 0 and round(measured_per_logit) == per_logit
        assert abs(measured_per_logit - per_logit) * logits <= SCRATCH_PER_TOKEN * tokens
        for m, p in ((lo, p_lo), (hi, p_hi)):
            assert 0 <= m[moment] - p[moment] <= SCRATCH_PER_TOKEN * tokens


@pytest.mark.parametrize("path", ["parallel", "parallel-sp", "plain"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_loss_allocation_sequence_is_torchs(measured: dict[str, Any], path: str, dtype: str) -> None:
    """Eq. (L1p) of formulas/loss_allocations.py (loss_parallel's [t, V/tp] allocations and frees, in order, whose
    replay gives the allocator's hole) against the real loss_parallel's allocation events at both vocabularies, with
    the lm_head's input whole or sequence-sharded; the control (a plain linear over V/tp, aten's fused kernels)
    against eq. (L1)."""
    for v in VOCABS:
        got = [tuple(e) for e in measured[f"{path} {dtype} {v}"]["loss_events"]]
        want = eager_loss_events(B * S, v // RANKS, DTYPES[dtype], loss_parallel=path != "plain")
        print(f"\n{path} {dtype} {v}: measured {got}")
        assert got == want


def test_loss_parallel_holds_one_fp32_shard_more_in_each_moment() -> None:
    """LP1/LP2 against F.cross_entropy's fused kernels: the decomposed log-softmax's ``shifted`` in the forward,
    exp(x) + its sum against the two fused gradients in the backward (the measured control above pins the latter)."""
    for c in DTYPES.values():
        par, plain = predicted(VOCABS[1], c, True), predicted(VOCABS[1], c, False)
        for moment in ("forward", "backward"):
            assert par[moment] - plain[moment] == B * S * VOCABS[1] // RANKS * 4


LLAMA = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 1024, "intermediate_size": 2048,
         "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8}


def test_the_estimate_applies_it_only_when_the_workload_says_so() -> None:
    spec = spec_from_config(LLAMA, name="llama-vocab")
    fields: dict[str, Any] = dict(precision="fsdp-bf16-mixed", fsdp="full", gpus=4, tp=2, micro_batch=2,
                                  seq_len=1024, grad_checkpointing="full")
    par = estimate_training(spec, loss="ce-loss-parallel", **fields)
    plain = estimate_training(spec, **fields)
    shard = 2 * 1024 * 128256 // 2 * 4  # one fp32 [tokens, vocab / tp] tensor
    for phase in ("forward end", "loss backward"):
        assert par.details["phases"][phase] - plain.details["phases"][phase] == shard
    assert "loss_parallel" in par.item("logits_and_loss").formula
    assert any(a.name == "loss" and a.value == "ce-loss-parallel" for a in par.assumptions)


@pytest.mark.parametrize(("fields", "word"), [
    (dict(tp=1), "tp > 1"),
    (dict(tp=2, gpus=2, loss_chunks=8), "loss_chunks 8"),
    (dict(tp=2, gpus=2, compile=True), "compile_scope 'layers'"),
])
def test_it_needs_the_setting_it_describes(fields: dict[str, Any], word: str) -> None:
    spec = spec_from_config(LLAMA, name="llama-vocab")
    with pytest.raises(InputError, match=word):
        estimate_training(spec, loss="ce-loss-parallel", **fields)

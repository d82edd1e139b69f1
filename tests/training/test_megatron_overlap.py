"""Megatron's ``--overlap-grad-reduce`` / ``--overlap-param-gather`` (formulas/training_time.py eq. (7g)).

Truth: NVIDIA/Megatron-LM @d98e8a64.

- The bucket rule: the buffer's parameters in backward order (``params[::-1]``), a bucket closed as soon as it holds
  at least ``bucket_size`` elements, the rest the last bucket (core/distributed/param_and_grad_buffer.py lines
  954-1002; the distributed optimizer's layout the same, optimizer/distrib_optimizer.py lines 552-580);
  ``bucket_size`` = max(40 M, 1 M x dp x cp) by default (training/training.py lines 2179-2194).
- Each bucket's collective starts once its gradients are ready in the last micro-batch (param_and_grad_buffer.py
  ``register_grad_ready`` lines 863-885), the collectives running one after the other: here replayed as an event
  simulation (a bucket starts at the later of its ready time and the previous bucket's end), not the closed max of
  eq. (7g).
- The parameters are the real Llama 3.1 8B's (transformers' LlamaForCausalLM on the meta device), in their own
  order (embedding, the decoder layers, the final norm, lm_head), so the replay closes buckets at real parameter
  boundaries; eq. (7g) closes them at exact multiples inside the decoder layers, which may differ by less than one
  bucket.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import FieldError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.training_time import (
    bucketed_seconds,
    megatron_bucket_elements,
    megatron_buckets,
    overlapped_collective_seconds,
)
from llmsizer.specs.training import TrainingWorkload

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "src/llmsizer/catalog/data/models"
RUN = dict(method="full", micro_batch=1, seq_len=4096, grad_checkpointing="full", grad_accumulation=4, gpus=8,
           precision="megatron-bf16", zero=1)
B = 40_000_000  # max(40 M, 1 M x 8)


@pytest.fixture(scope="module")
def params() -> list[int]:
    """Llama 3.1 8B's parameter sizes in the model's order."""
    from oracle_utils import build

    cfg = json.loads((MODELS / "llama-3.1-8b.json").read_text())["config"]
    return [p.numel() for p in build(cfg).parameters()]


def _replay(sizes: list[int], bucket: int) -> list[tuple[int, float]]:
    """Megatron's bucket rule on ``sizes`` (forward order): (elements, ready share) of each bucket in the order
    reduced; the ready share is the decoder layers' elements whose gradients the backward has produced when the
    bucket's last parameter has its gradient (the embedding, first in forward order, is ready at 1; lm_head and the
    final norm, last, at 0)."""
    emb, layers = sizes[0], sum(sizes[1:-2])
    out: list[tuple[int, float]] = []
    cur = done = 0
    for i, n in enumerate(reversed(sizes)):
        cur += n
        if 2 <= i < len(sizes) - 1:
            done += n
        if cur >= bucket:
            out.append((cur, done / layers))
            cur = 0
    if cur:
        out.append((cur, 1.0))
    assert sizes[0] == emb
    return out


def _simulate(seconds: list[float], ready: list[float], compute: float) -> float:
    """The collectives one after the other, each from the later of its ready time and the previous one's end."""
    end = 0.0
    for c, r in zip(seconds, ready, strict=True):
        end = max(end, r * compute) + c
    return max(0.0, end - compute)


def test_default_bucket_size() -> None:
    assert megatron_bucket_elements(8) == 40_000_000 and megatron_bucket_elements(16) == 40_000_000
    assert megatron_bucket_elements(64) == 64_000_000  # 1 M x 64 (Megatron-Bridge's PM1364: dp 64)


def test_eq_7g_is_the_event_replay() -> None:
    """The closed form max_j (r_j T + sum_{i >= j} c_i) - T equals the event simulation on random buckets."""
    rng = random.Random(7)
    for _ in range(500):
        k = rng.randint(1, 12)
        c = [rng.uniform(0.0, 3.0) for _ in range(k)]
        r = sorted(rng.uniform(0.0, 1.0) for _ in range(k))
        r[-1] = rng.choice([r[-1], 1.0])
        t = rng.uniform(0.0, 20.0)
        assert overlapped_collective_seconds(c, r, t) == pytest.approx(_simulate(c, r, t), abs=1e-12)


def test_runs_read_at_their_ends_are_every_bucket() -> None:
    """``bucketed_seconds`` reads each run of equal buckets at its two ends; eq. (7g) over every bucket one by one
    (``expanded``) gives the same, on buffers of random layouts and spans."""
    rng = random.Random(11)
    for _ in range(300):
        size = rng.choice([None, rng.uniform(1, 2e3)])
        first, last = rng.choice([0, rng.uniform(0, 3e3)]), rng.choice([0, rng.uniform(0, 3e3)]) + 1.0
        b = megatron_buckets(rng.uniform(0, 1e4), size, first, last, rng.randint(1, 6), rng.choice([1.0, 4.0, 8.0]))
        shares, ready = b.expanded()
        assert sum(shares) == pytest.approx(1.0)
        c, t = rng.uniform(0, 5), rng.uniform(0, 10)
        want = overlapped_collective_seconds([c * x for x in shares], ready, t * b.span)
        assert bucketed_seconds(c, b, t) == pytest.approx(want, abs=1e-9)


def test_hand_case() -> None:
    """100 layer elements, bucket 40, an embedding of 30: buckets 40 | 40 | 20 + 30, ready at 0.4, 0.8, 1; 13 s of
    collectives (4, 4, 5): behind 20 s of backward only the last bucket's 5 s shows; behind 10 s, bucket 1 ends at 8,
    bucket 2 at 12, bucket 3 at 17: 7 s."""
    b = megatron_buckets(100.0, 40.0, last=30.0)
    shares, ready = b.expanded()
    assert [x * 130 for x in shares] == pytest.approx([40, 40, 50]) and ready == pytest.approx([0.4, 0.8, 1.0])
    assert bucketed_seconds(13.0, b, 20.0) == pytest.approx(5.0)
    assert bucketed_seconds(13.0, b, 10.0) == pytest.approx(7.0)


def test_buckets_of_llama_8b_match_the_replay(params: list[int]) -> None:
    """On the real parameter list: lm_head (525 M >= 40 M) a bucket of its own, then buckets of at least 40 M (the
    replay's close at parameter boundaries: 130 buckets of 40-59 M, eq. (7g)'s at exactly 40 M: 176), the last one the
    embedding (525 M) with what layer 0 leaves (eq. (7g): 19.6 M; the replay: a 41.9 M bucket of layer 0's attention
    ready with it); eq. (7g)'s exposure equals the replay's within one bucket's collective time, across a short and
    a long backward (0.0679 vs 0.0706 of the buffer's time when only the tail shows)."""
    emb, out = params[0], params[-1]
    total = sum(params)
    layers = total - emb - out
    ours = megatron_buckets(layers, B, first=out, last=emb)
    real = _replay(params, B)
    assert real[0] == (out, 0.0)
    last_hand = emb + layers - (layers // B) * B  # the rule at element granularity, by hand
    assert ours.expanded()[0][-1] * total == pytest.approx(last_hand, rel=1e-12)
    assert abs(last_hand - real[-1][0]) < B
    c = 1.0  # seconds for the whole buffer
    real_s = [n / total * c for n, _ in real]
    for t in (0.05, 0.5, 1.0, 2.0, 10.0):
        assert bucketed_seconds(c, ours, t) == pytest.approx(
            _simulate(real_s, [r for _, r in real], t), abs=c * B / total)


def _duration(**kw: object):
    fields = {**RUN, **kw}
    return training_duration_for(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"],
                                 int(fields["gpus"]), 1e9, fields)  # type: ignore[call-overload]


def test_data_parallel_step_hides_all_but_the_embedding_bucket(params: list[int]) -> None:
    """8 x H100, distributed optimizer: per step a reduce-scatter of 7/8 N x 4 B and an all-gather of 7/8 N x 2 B.
    The backward of the last micro-batch (hundreds of ms) outlasts the reduce-scatter (tens), so only the last bucket,
    the embedding's (``last_hand``), stays; with overlap_param_gather the all-gather hides behind the first forward
    but for the bucket gathered first, the same embedding's bucket."""
    n = sum(params)
    emb, out = params[0], params[-1]
    layers = n - emb - out
    last = emb + layers - (layers // B) * B
    off = _duration()
    bus = off.step.bus_bandwidth
    c_rs, c_ag = 7 / 8 * n * 4 / bus, 7 / 8 * n * 2 / bus
    k = RUN["grad_accumulation"]
    assert off.step.exposed_comm_seconds * k == pytest.approx(c_rs + c_ag, rel=1e-9)
    on = _duration(overlap_grad_reduce=True)
    assert on.step.comm_bytes_per_step == off.step.comm_bytes_per_step
    assert on.step.exposed_comm_seconds * k == pytest.approx(c_rs * last / n + c_ag, rel=1e-9)
    both = _duration(overlap_grad_reduce=True, overlap_param_gather=True)
    assert both.step.exposed_comm_seconds * k == pytest.approx((c_rs + c_ag) * last / n, rel=1e-9)
    assert both.tokens_per_second > on.tokens_per_second > off.tokens_per_second
    notes = {a.name: (a.value, a.default) for a in both.assumptions}
    assert notes["overlap_grad_reduce"] == (True, False) and notes["overlap_param_gather"] == (True, False)
    assert {a.name: a.value for a in off.assumptions}["overlap_param_gather"] is False


def test_pipeline_keeps_the_gather_and_hides_part_of_the_reduce() -> None:
    """Llama 3.1 70B, tp 4 pp 8 (interleaved, 5 chunks), dp 2 (PM1360's layout): with overlap the exposed data-parallel
    time is below the traffic, and at least the all-gather, which is not hidden under pipeline parallelism."""
    spec = find("llama-3.1-70b-instruct").spec()
    run = dict(method="full", precision="megatron-bf16", zero=1, micro_batch=1, seq_len=8192, gpus=64, tp=4, pp=8,
               virtual_stages=5, sequence_parallel=True, grad_accumulation=128, network="8x400 Gb/s")
    dev = builtin_catalog().devices["h100-sxm"]
    off = training_duration_for(spec, dev, 64, 1e9, run).step.model_parallel  # type: ignore[arg-type]
    on = training_duration_for(spec, dev, 64, 1e9, {**run, "overlap_grad_reduce": True,  # type: ignore[arg-type]
                                                    "overlap_param_gather": True}).step.model_parallel
    assert off is not None and on is not None
    assert off.dp_exposed_seconds == pytest.approx(off.dp_seconds)
    assert on.dp_seconds == pytest.approx(off.dp_seconds)
    gather = on.dp_seconds * 2 / (4 + 2)  # bf16 parameters gathered, fp32 gradients reduce-scattered
    assert gather <= on.dp_exposed_seconds < on.dp_seconds


@pytest.mark.parametrize("fields, field", [
    (dict(precision="bf16-mixed", gpus=8, overlap_grad_reduce=True), "overlap_grad_reduce"),
    (dict(precision="deepspeed-bf16", zero=1, gpus=8, overlap_param_gather=True), "overlap_param_gather"),
    (dict(precision="megatron-bf16", fsdp="full", gpus=8, overlap_grad_reduce=True), "overlap_grad_reduce"),
    (dict(precision="megatron-bf16", zero=0, gpus=8, overlap_grad_reduce=True, overlap_param_gather=True),
     "overlap_param_gather"),
    (dict(precision="megatron-bf16", zero=1, gpus=8, overlap_param_gather=True), "overlap_param_gather"),
])
def test_refused_outside_megatron_ddp(fields: dict[str, object], field: str) -> None:
    with pytest.raises(FieldError) as e:
        TrainingWorkload(**fields)  # type: ignore[arg-type]
    assert e.value.field == field and "\n" not in str(e.value)


def test_cli_refuses_in_one_line() -> None:
    r = subprocess.run([sys.executable, "-m", "llmsizer", "train", "llama-3.1-8b", "--precision", "bf16-mixed",
                        "--gpus", "8", "--overlap-grad-reduce"], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--overlap-grad-reduce is a Megatron-Core DDP option" in r.stderr


def test_cli_and_python_give_one_answer() -> None:
    r = subprocess.run([sys.executable, "-m", "llmsizer", "train", "llama-3.1-8b", "--precision", "megatron-bf16",
                        "--zero", "1", "--gpus", "8", "--batch", "1", "--seq", "4096", "--grad-accumulation", "4",
                        "--grad-checkpointing", "full", "--device", "h100-sxm", "--tokens", "1B",
                        "--overlap-grad-reduce", "--overlap-param-gather", "--json"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
                       check=False)
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)["duration"]
    py = _duration(overlap_grad_reduce=True, overlap_param_gather=True)
    assert cli["seconds"] == pytest.approx(py.seconds, rel=1e-12)
    assert cli["seconds"] < _duration().seconds

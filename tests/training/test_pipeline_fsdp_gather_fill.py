"""What the pipeline fill waits for when FSDP2 stages gather their parameters (formulas/model_parallel_time.py eqs.
(P7), (P7')) against real steps of torch's schedules (``pp_fsdp_gather_step.py``: 4 gloo ranks, PP 2 x FSDP 2, one
``fully_shard`` unit a stage, reshard_after_forward False as torchtitan under PP; each all-gather made to take
a run's delay on a serial link, each stage forward a run's forward seconds).

Under Schedule1F1B and ScheduleGPipe a stage gathers only in its first forward, once its input has arrived, so the
fill waits for every stage's gathers in turn; under ScheduleInterleaved1F1B every rank issues all its stages'
gathers at the step's start, and the fill waits only for what the chunk forwards before each chunk's first use do not
hide. The checks are orderings and counts, and one generous comparison of the fill's length with the estimate's
(the closest of the candidate structures, within a wide ratio)."""

from __future__ import annotations

from statistics import median
from typing import Any

import pytest

pytest.importorskip("torch")

from ranks import run_step  # noqa: E402

from llmsizer.formulas.model_parallel_time import model_parallel_step, pipeline_fill_gather_seconds  # noqa: E402
from llmsizer.formulas.training_time import DataParallelComm  # noqa: E402

# each run: [schedule, a stage forward's seconds, an all-gather's seconds]; the interleaved run with the short
# forward waits for more than its first chunk's gathers, less than all its rank's: its second chunk's are not over
# when micro-batch 0 comes round to it (eq. (P7')'s second term: 2 x 0.6 - 2 x 0.15 = 1.5 delays)
RUNS: dict[str, list[Any]] = {"1F1B": ["1F1B", 0.2, 0.3], "GPipe": ["GPipe", 0.2, 0.3],
                              "Interleaved1F1B": ["Interleaved1F1B", 0.2, 0.3],
                              "Interleaved1F1B short forward": ["Interleaved1F1B", 0.15, 0.6]}
CASE: dict[str, Any] = dict(pp=2, virtual=2, microbatches=2, width=32, blocks=2, batch=4, seq=4, runs=RUNS)
SINGLE = ("1F1B", "GPipe")
INTERLEAVED = ("Interleaved1F1B", "Interleaved1F1B short forward")


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    runs: dict[str, Any] = run_step("pp_fsdp_gather_step.py", CASE, 4)["runs"]
    return runs


def _times(rank: dict[str, Any], kind: str, stage: int | None = None) -> list[float]:
    return [e[2] for e in rank["events"] if e[0] == kind and (stage is None or e[1] == stage)]


def _virtual(name: str) -> int:
    return int(CASE["virtual"]) if RUNS[name][0] == "Interleaved1F1B" else 1


@pytest.mark.parametrize("name", RUNS)
def test_each_stage_gathers_once_a_step(measured: dict[str, Any], name: str) -> None:
    """reshard_after_forward False: one all-gather per stage and step (eq. PP1), whatever the schedule."""
    pp, v = CASE["pp"], _virtual(name)
    for r in measured[name]:
        local = [r["pp_rank"] + s * pp for s in range(v)]
        assert sorted(e[1] for e in r["events"] if e[0] == "gather_issued") == local
        assert len(_times(r, "forward")) == v * CASE["microbatches"]


@pytest.mark.parametrize("name", SINGLE)
def test_single_stage_schedules_gather_after_the_input_arrives(measured: dict[str, Any], name: str) -> None:
    """No unshard before the forward's receive (schedules.py lines 1064-1075 / 905-915): stage 1 issues its
    all-gather only after stage 0's first forward has ended, and runs its own first forward after it (eq. (P7))."""
    ranks = measured[name]
    stage0_first_end = min(t for r in ranks if r["pp_rank"] == 0 for t in _times(r, "forward_end"))
    for r in ranks:
        issued = _times(r, "gather_issued")[0]
        assert issued < min(_times(r, "forward"))
        if r["pp_rank"] == 1:
            assert issued > stage0_first_end


@pytest.mark.parametrize("name", INTERLEAVED)
def test_interleaved_gathers_at_the_step_start(measured: dict[str, Any], name: str) -> None:
    """_add_unshard_reshard (schedules.py lines 1285-1366): every local stage's all-gather is issued before the
    rank's first forward, so rank 1's runs while rank 0 still waits for its own (eq. (P7'))."""
    ranks = measured[name]
    for r in ranks:
        assert max(_times(r, "gather_issued")) < min(_times(r, "forward"))
    rank0_first_done = min(t for r in ranks if r["pp_rank"] == 0 for t in _times(r, "gather_done", 0))
    assert all(_times(r, "gather_issued", 1)[0] < rank0_first_done for r in ranks if r["pp_rank"] == 1)


@pytest.mark.parametrize("name", RUNS)
def test_fill_follows_the_estimate(measured: dict[str, Any], name: str) -> None:
    """The last stage starts its first micro-batch after the fill's gather waits (eqs. (P7), (P7'), read through
    ``model_parallel_step``) and the chain's p v - 1 stage forwards before it; the measured delay and forward time
    go in. The estimate is the closest of the structures in question: the first gather only, each stage's in turn,
    every gather of the rank before the first forward."""
    pp, v = CASE["pp"], _virtual(name)
    ranks = measured[name]
    start = min(r["start"] for r in ranks)
    last = pp * v - 1
    fill = min(t for r in ranks for t in _times(r, "forward", last)) - start
    rank0 = [r for r in ranks if r["pp_rank"] == 0]
    delay = median(d - i for r in rank0 for i, d in zip(_times(r, "gather_issued", 0), _times(r, "gather_done", 0),
                                                          strict=True))
    chunk = median(b - a for r in ranks for a, b in zip(_times(r, "forward"), _times(r, "forward_end"), strict=True))
    # a rank: v units of one stage each, c_f = v delays, a_1 = one; its forward per micro-batch v chunk forwards
    comm = DataParallelComm(forward_seconds=v * delay, backward_seconds=0.0, first_seconds=delay, last_seconds=0.0,
                            bytes=0.0, bus_bandwidth=1.0, nodes=1, units=v)
    phi = 1.0 / 3.0
    step = model_parallel_step(v * chunk / phi, CASE["microbatches"], pp, v, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0,
                               fsdp=comm, forward_share=phi)
    waits = step.dp_exposed_seconds - comm.backward_seconds
    assert waits == pytest.approx(pipeline_fill_gather_seconds(pp, v, v * chunk, comm))
    chain = (pp * v - 1) * chunk
    estimate = waits + chain
    others = {"first gather only": delay + chain, "each stage in turn": pp * v * delay + chain,
              "the rank's gathers first": v * delay + chain}
    assert 0.8 < fill / estimate < 1.25, (fill, estimate)
    for what, other in others.items():
        if abs(other - estimate) > 0.1 * delay:  # a structure the estimate coincides with is no rival
            assert abs(fill - estimate) < abs(fill - other), (what, fill, estimate, other)


@pytest.mark.parametrize("virtual", [2, 3, 4])
def test_interleaved_regathers_beyond_three_stages_a_rank_are_warned(virtual: int) -> None:
    """torch's lowering (``_add_unshard_reshard``, max_active_stages = 3) unshards every local stage once a step up
    to 3 stages a rank and evicts and re-gathers beyond; eq. (P7') counts each stage's gathers once, so the estimate
    says so where torch gathers a stage again."""
    from torch.distributed.pipelining import schedules

    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate.duration import training_duration_for

    pp, m = 8, 8
    schedule = object.__new__(schedules.ScheduleInterleaved1F1B)  # the rank's actions only: no stages, no group
    schedule.n_local_stages, schedule.pp_group_size, schedule._n_microbatches = virtual, pp, m
    schedule.number_of_rounds, schedule.microbatches_per_round = 1, m
    lowered = schedules._add_unshard_reshard(schedule._calculate_single_rank_operations(0))
    unshards = [a.stage_index for a in lowered if a.computation_type == schedules.UNSHARD]
    regathered = len(unshards) > virtual
    assert sorted(set(unshards)) == [s * pp for s in range(virtual)]
    fields = dict(method="full", precision="bf16-mixed", seq_len=8192, grad_checkpointing="full", fsdp="full",
                  optimizer="adamw", gpus=512, tp=8, pp=pp, micro_batch=4, grad_accumulation=m,
                  virtual_stages=virtual, pipeline_split="torchtitan-9dec370", network="8x400 Gb/s")
    d = training_duration_for(find("llama-3.1-405b").spec(), builtin_catalog().devices["h100-sxm"], 512, 1e6, fields)
    assert any("gathers the evicted ones again" in w for w in d.warnings) == regathered

"""Multi-node training-speed rows (validation/public_measurements.csv): each is timed over the network its source
names between the machines (formulas/network.py eq. (11)) and summarised, or, where the source names none, kept out
of the summary with that reason. Plus the ways a user states the network (``network_for``, ``train --network``)."""

from __future__ import annotations

import statistics

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.duration import network_for, training_duration_for
from llmsizer.specs import TrainingWorkload
from llmsizer.validation_cases import (
    ASSUMED,
    MPT_NODE_GPUS,
    NETWORK_NOT_STATED,
    TOLERANCE,
    TORCHTITAN_FSDP,
    TORCHTITAN_RUNS,
    TRAINING_SPEED,
    Case,
    mpt_row,
    public_cases,
    public_rows,
)


def multinode_cases() -> list[Case]:
    rows = public_rows()
    out = []
    for c in public_cases()[0]:
        if not isinstance(c, Case) or c.kind != TRAINING_SPEED or c.id not in rows:
            continue
        r = rows[c.id]
        n = int(r["num_gpus"]) if r["num_gpus"].isdigit() else 0
        if n > MPT_NODE_GPUS and r["framework"].startswith(("torchtitan", "llm-foundry", "fms-fsdp")):
            out.append(c)
    return out


def test_every_multinode_row_is_summarised_with_its_network_or_kept_out_for_want_of_one() -> None:
    rows = public_rows()
    cases = multinode_cases()
    assert len(cases) >= 75
    summarised = [c for c in cases if not c.excluded]
    for c in cases:
        r = rows[c.id]
        where = r["source_location"] + r["hardware"] + r["notes"]
        if c.excluded and c.id in TORCHTITAN_RUNS and TORCHTITAN_RUNS[c.id][3]:  # a setting other than the network
            assert c.excluded == ASSUMED and TORCHTITAN_RUNS[c.id][2].get("network"), c.id  # not stated
        elif c.excluded:
            assert c.excluded == NETWORK_NOT_STATED, c.id
            assert "Gbps" not in where and "Gb/s" not in where, c.id  # the source really names no network
        else:
            # the quoted heading or hardware column names the network the row is timed over
            assert "1600 Gbps node-node interconnect" in where or "400 Gb/s RDMA per GPU" in where, c.id
            if c.id in TORCHTITAN_RUNS:  # timed by the duration rule with the workload's own network field
                assert TORCHTITAN_RUNS[c.id][2].get("network"), c.id
            else:
                assert "nodes over" in c.note or "RDMA per host" in c.note, c.id
    # 34 llm-foundry A100 rows (RoCE 1600 Gbps) + torchtitan PM0504/PM0505 and the float8 row PM0506 + torchtitan's
    # FSDP + TP (+ PP) rows PM1050-PM1053 + the bf16 AsyncTP benchmark rows PM1310/PM1311/PM1316/PM1317 + their
    # torchao rowwise float8 twins PM1314/PM1315/PM1320/PM1321 (expressible since the rowwise recipes)
    assert len(summarised) == 49
    errors = [abs(c.error) for c in summarised if c.error is not None]
    # one known miss: PM0939 (MPT-70B, 64 x A100 40GB, micro-batch 2, no accumulation) runs at 276 tokens/s per GPU
    # where the same table's 70B rows at 128 x 40GB (micro-batch 4, PM0938) and 32 x 80GB (micro-batch 2 with
    # accumulation 16, PM0878) run at 376 / 374: a per-micro-step cost the duration rule has no term for (+48 %
    # with the Ampere utilisation of 0.676, +59 % at 0.733 once the flash-attention kernel is timed apart)
    misses = {c.id for c in summarised if c.error is not None and abs(c.error) > TOLERANCE[TRAINING_SPEED]}
    # and PM1321 (torchao rowwise float8 + async TP, Llama 3.1 8B on 64 x H100): measured 3708 tokens/s per GPU,
    # below its bf16 twin PM1317 (4378), rowwise / tensorwise 0.73 against the single-node table's 0.88 (PM1335 /
    # PM1333): a TP-specific rowwise cost not established (+51 %, the bf16 twin +25 %)
    assert misses <= {"PM0939", "PM1321"}, misses
    # 8.2 % with attention at the GEMMs' rate and Ampere's u 0.676; 11.6 % since the flash-attention kernel is timed
    # apart and u is refitted (0.733): 30 of these rows are 2048-token A100 40GB rows, where attention is 5-15 % of
    # the step, so they take the higher u (+4-7 points each) without the long-sequence rows' gain; 10.9 % since
    # torchao's float8 tensor parallelism gathers in float8 (PM1050, formulas/model_parallel_time.py eq. (T1''));
    # 11.6 % since sequence parallelism's norms and residual adds run on 1/8 of the tokens (formulas/
    # elementwise_traffic.py eq. (E10)): PM1050 -11.9 % -> -2.9 %, but the async-TP rows PM1051-PM1053, timed with
    # eq. (T3')'s upper bound (every collective hidden), go +7.8 / +14.7 / +15.7 %; 12.4 % since FSDP's own
    # collectives beside TP / PP are timed, overlapped by phase, in place of a gradient all-reduce after the backward
    # (formulas/model_parallel_time.py eq. (P7)): PM1050-PM1053 +4.0 / +16.9 / +16.1 / +17.6 %; 13.6 % since the
    # llm-foundry rows run flash-attn's fused cross-entropy (formulas/elementwise_traffic.py eq. (E11), 8 B per
    # logit where the eager loss moved 44): their small-model rows are over-predicted more, Composer's two eager
    # train-metric cross-entropies per micro-batch not being in the time model
    assert statistics.median(errors) < 0.15


def test_the_network_is_what_makes_multinode_communication_longer() -> None:
    """torchtitan's 128-GPU row (PM0504): over 8 x 400 Gb/s per host the FULL_SHARD collectives run at 400 GB/s
    per device's ring, above NCCL's NVLink bus bandwidth (18 x 20.6 = 370.8 GB/s, formulas/network.py eq. (12)), so
    the ring stays at the NVLink figure; at 8 x 10 Gb/s they exceed the compute and set the pace."""
    spec = find("llama-3.1-8b").spec()
    dev = builtin_catalog().devices["h100-sxm"]
    fast = training_duration_for(spec, dev, 128, 1e9, dict(TORCHTITAN_FSDP, gpus=128, network="8x400 Gb/s"))
    slow = training_duration_for(spec, dev, 128, 1e9, dict(TORCHTITAN_FSDP, gpus=128, network="8x10 Gb/s"))
    one = training_duration_for(spec, dev, 8, 1e9, dict(TORCHTITAN_FSDP, gpus=8))
    assert fast.step is not None and slow.step is not None and one.step is not None
    assert fast.step.topology == "multi-node" and one.step.topology == "direct"
    # FULL_SHARD volume (n-1)/n (2W + G) at the bus bandwidth: 127/128 against 7/8 of the same bytes, both rings at
    # min(370.8 GB/s NVLink under NCCL, 400 GB/s network)
    assert fast.step.comm_seconds / one.step.comm_seconds == pytest.approx(
        (127 / 128) / (7 / 8) * 370.8 / min(370.8, 400), rel=1e-6)
    assert slow.step.comm_seconds > slow.step.compute_seconds
    assert slow.tokens_per_second < 0.5 * fast.tokens_per_second  # type: ignore[operator]
    names = {a.name: a for a in fast.assumptions}
    assert names["inter_node_network"].value == 8 * 400e9 / 8
    assert "8x400 Gb/s" in names["inter_node_network"].why
    # no network stated: a warning, and the run is timed on one machine's link (a lower bound)
    blind = training_duration_for(spec, dev, 128, 1e9, dict(TORCHTITAN_FSDP, gpus=128))
    assert any("no network between the machines" in w for w in blind.warnings)
    assert "inter_node_network" not in {a.name for a in blind.assumptions}


def test_network_for_reads_catalog_fabrics_bandwidths_and_instances() -> None:
    w = TrainingWorkload(gpus=16, network="ib-ndr")
    net = network_for(w)
    assert net is not None and net.bandwidth == 8 * 400e9 / 8  # one NDR port per device of 8
    net = network_for(TrainingWorkload(gpus=16, gpus_per_node=4, network="ib-ndr"))
    assert net is not None and net.bandwidth == 4 * 50e9
    net = network_for(TrainingWorkload(gpus=16, network="efa-p5"))
    assert net is not None and net.bandwidth == 3200e9 / 8  # per instance
    net = network_for(TrainingWorkload(gpus=16, network="1600 Gb/s"))
    assert net is not None and net.bandwidth == 200e9
    p5 = builtin_catalog().instances["aws-p5.48xlarge"]
    net = network_for(TrainingWorkload(gpus=16), p5)
    assert net is not None and net.bandwidth == 3200e9 / 8 and not net.given
    assert network_for(TrainingWorkload(gpus=16)) is None
    for bad in ("nvlink4", "12", "fast"):
        with pytest.raises(InputError, match="network"):
            network_for(TrainingWorkload(gpus=16, network=bad))


def test_llm_foundry_a100_rows_read_their_heading() -> None:
    """Every summarised llm-foundry multi-node row comes from a table whose heading names RoCE 1600 Gbps."""
    rows = public_rows()
    for c in multinode_cases():
        r = rows[c.id]
        if r["framework"].startswith("llm-foundry") and not c.excluded:
            assert mpt_row(r["quote"]).gpu.startswith("a100")
            assert "1600 Gbps node-node interconnect (RoCE)" in r["source_location"]


def test_train_cli_states_the_network(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli.cli_run import answer, run

    argv = ["train", "llama-3.1-8b", "--device", "h100-sxm", "--gpus", "16", "--fsdp", "full", "--tokens", "1B"]
    code, out, _ = run([*argv, "--network", "ib-ndr"], capsys)
    assert code in (0, 1)
    assert "multi-node communication" in out and "over InfiniBand NDR" in out
    _, data = answer([*argv, "--network", "8x400Gb/s"], capsys)
    names = {a["name"]: a for a in data["duration"]["assumptions"]}
    assert names["inter_node_network"]["value"] == 400e9 and names["inter_node_network"]["default"] is False
    assert data["duration"]["step"]["topology"] == "multi-node"
    code, _, err = run([*argv, "--network", "nvlink4"], capsys)
    assert code == 2 and "inside a machine" in err

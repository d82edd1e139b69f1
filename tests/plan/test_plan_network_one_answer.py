"""The plan's Network section renders the training duration's own collectives (estimate/duration.py StepTime), so a
plan and ``llmsizer train --tokens`` give one answer for the same workload; the figures are also checked against the
ring volumes and NCCL's bus bandwidth written out here (nccl-tests doc/PERFORMANCE.md: all-reduce moves
2 (n-1)/n S per rank; across machines the bus bandwidth is the bottleneck link, one machine's whole network).

Model: Qwen2.5-0.5B (494,032,768 parameters, tied embeddings); bf16-mixed keeps fp32 gradients (4 B each).
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer
from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

# catalog h100-sxm NVLink 4 (18 links, 450 GB/s per direction) as NCCL's topology credits it: 20.6 GB/s per NVLink 4
# link (NVIDIA/nccl src/graph/topo.h SM90_NVLINK_BW; formulas/network.py eq. (12))
H100_NVLINK = 18 * 20.6e9


def _plan_job(body: str):
    return make_plan(parse_request(job_yaml("training", body), source="t.yaml"), alternatives=False).jobs[0]


def _train(argv: list[str], tokens: float, capsys: pytest.CaptureFixture[str]) -> dict:
    _, data = answer(["train", "qwen2.5-0.5b", "--method", "full", "--tokens", str(int(tokens)), *argv], capsys)
    return data["duration"]


def test_plan_and_train_agree_across_machines(capsys: pytest.CaptureFixture[str]) -> None:
    """DDP over 2 machines of 4 H100 with 100 Gb/s each: the gradient all-reduce crosses the network once per
    optimizer step (no_sync under accumulation), at the machine's whole 12.5 GB/s (the ring's bottleneck), not
    at a quarter of it per device as the plan used to time it (4x too slow)."""
    j = _plan_job("""\
    method: full
    settings: {micro_batch: 1, seq_len: 2048, grad_accumulation: 2}
    resources: {device: h100-sxm, count: 8, nodes: 2, network: 100 Gb/s}
    """)
    net, dur = j.section("network"), j.section("duration")
    d = _train(["--device", "h100-sxm", "--gpus", "8", "--gpus-per-node", "4", "--network", "100 Gb/s",
                "--grad-accumulation", "2"], dur.value("tokens"), capsys)
    st = d["step"]
    # independent truth: ring all-reduce volume and the bus bandwidth of a ring across machines
    grads = count_params(load_model("qwen2.5-0.5b")).total * 4
    v = 2 * 7 / 8 * grads  # once per optimizer step of 2 micro-batches
    bus = min(H100_NVLINK, 100e9 / 8)
    assert net.value("dp_bytes") == pytest.approx(v)
    assert net.value("comm_seconds") == pytest.approx(v / bus)
    assert net.value("bus_bandwidth") == pytest.approx(bus)
    # one answer: the same duration, traffic and communication time
    assert dur.value("seconds") == pytest.approx(d["seconds"], rel=1e-12)
    assert net.value("comm_seconds") == pytest.approx(st["comm_seconds_per_step"], rel=1e-12)
    assert net.value("dp_bytes") == pytest.approx(st["comm_bytes_per_step"], rel=1e-12)


def test_plan_and_train_agree_for_fsdp_on_instances(capsys: pytest.CaptureFixture[str]) -> None:
    """FSDP full sharding on 2 p5.48xlarge (8 H100, 3200 Gb/s each): plan (resources.instance + nodes) and
    ``train --device p5.48xlarge --gpus 16`` (several instances) give the same communication and duration."""
    j = _plan_job("""\
    method: full
    settings: {micro_batch: 2, seq_len: 2048, grad_accumulation: 3, fsdp: full}
    resources: {instance: p5.48xlarge, nodes: 2}
    """)
    net, dur = j.section("network"), j.section("duration")
    d = _train(["--device", "p5.48xlarge", "--gpus", "16", "--fsdp", "full", "--batch", "2",
                "--grad-accumulation", "3"], dur.value("tokens"), capsys)
    st = d["step"]
    assert dur.value("seconds") == pytest.approx(d["seconds"], rel=1e-12)
    assert net.value("comm_seconds") == pytest.approx(st["comm_seconds_per_step"], rel=1e-12)
    assert net.value("exposed_comm_seconds") == pytest.approx(st["exposed_comm_seconds"] * 3, rel=1e-12)
    # FULL_SHARD per micro-step under the default bf16-mixed (autocast over fp32 parameters, no FSDP param_dtype:
    # each parameter all-gathered in its own dtype, fp32): every unit gathered in the forward, every decoder block
    # again in the backward (torch keeps the root unit, the tied embedding and the final norm, gathered from its
    # forward to its backward: _fsdp_state.py lines 203-207), a reduce-scatter of the fp32 gradients
    spec = load_model("qwen2.5-0.5b")
    n = count_params(spec).total
    root = spec.vocab_size * spec.hidden_size + spec.hidden_size
    assert net.value("dp_bytes") == pytest.approx(3 * 15 / 16 * (4 * n + 4 * (n - root) + 4 * n))
    assert net.value("bus_bandwidth") == pytest.approx(min(H100_NVLINK, 3200e9 / 8))


def test_plan_and_train_agree_for_tensor_and_pipeline_parallelism(capsys: pytest.CaptureFixture[str]) -> None:
    """TP 2 x PP 2 x DP 2 on one machine of 8 H100: the plan renders the duration's own tensor-parallel, pipeline
    and gradient all-reduce times (formulas/model_parallel_time.py), and the volumes match the ring and point-to-point
    counts written out (Qwen2.5-0.5B: 24 layers, h 896, 12 per stage; 3 micro-batches of 2 x 1024 tokens, bf16)."""
    j = _plan_job("""\
    method: full
    settings: {micro_batch: 2, seq_len: 1024, grad_accumulation: 3, tp: 2, pp: 2}
    resources: {device: h100-sxm, count: 8}
    """)
    net, dur = j.section("network"), j.section("duration")
    d = _train(["--device", "h100-sxm", "--gpus", "8", "--tp", "2", "--pp", "2", "--batch", "2", "--seq", "1024",
                "--grad-accumulation", "3"], dur.value("tokens"), capsys)
    mp = d["step"]["model_parallel"]
    act = 2 * 1024 * 896 * 2
    tp = 3 * 4 * 12 * 2 * (2 - 1) / 2 * act  # micro-batches x 4 all-reduces x stage layers x ring volume
    assert net.value("tp_bytes") == pytest.approx(tp)
    assert net.value("tp_seconds") == pytest.approx(tp / H100_NVLINK)
    assert net.value("pp_bytes") == pytest.approx(3 * 2 * act / 2)  # forward + backward, 1/tp per device
    assert net.value("bubble") == pytest.approx((2 - 1) / 3)
    # one answer: the same duration and the same times as `train --tokens`
    assert dur.value("seconds") == pytest.approx(d["seconds"], rel=1e-12)
    assert net.value("tp_seconds") == pytest.approx(3 * mp["tp_seconds"], rel=1e-12)
    assert net.value("bubble_seconds") == pytest.approx(mp["bubble_seconds"], rel=1e-12)
    assert net.value("mp_dp_seconds") == pytest.approx(mp["dp_seconds"], rel=1e-12)
    assert net.value("dp_bytes") is None


def test_the_communication_share_is_the_step_estimates(capsys: pytest.CaptureFixture[str]) -> None:
    """The plan's comm_share (its 'Communication-bound' check reads it) is the step estimate's own ``comm_share``,
    which ``train --json`` prints, not a share the plan recomputes: data-parallel, exposed communication x
    micro-steps / step time (formulas/training_time.py eq. (8'')); model-parallel, eq. (P6). Checked against the
    step's own times written out."""
    j = _plan_job("""\
    method: full
    settings: {micro_batch: 1, seq_len: 2048, grad_accumulation: 2}
    resources: {device: h100-sxm, count: 8, nodes: 2, network: 100 Gb/s}
    """)
    st = _train(["--device", "h100-sxm", "--gpus", "8", "--gpus-per-node", "4", "--network", "100 Gb/s",
                 "--grad-accumulation", "2"], j.section("duration").value("tokens"), capsys)["step"]
    share = st["exposed_comm_seconds"] * st["micro_steps"] / st["step_seconds"]
    assert share > 0
    assert st["comm_share"] == pytest.approx(share, rel=1e-12)
    assert j.section("network").value("comm_share") == j.facts["comm_share"] == st["comm_share"]

    j = _plan_job("""\
    method: full
    settings: {micro_batch: 2, seq_len: 1024, grad_accumulation: 3, tp: 2, pp: 2}
    resources: {device: h100-sxm, count: 8}
    """)
    st = _train(["--device", "h100-sxm", "--gpus", "8", "--tp", "2", "--pp", "2", "--batch", "2", "--seq", "1024",
                 "--grad-accumulation", "3"], j.section("duration").value("tokens"), capsys)["step"]
    mp = st["model_parallel"]
    assert not mp["tp_overlap"]  # the tensor-parallel time a micro-batch waits for: c_tp less what the backward hides
    exposed_tp = mp["tp_seconds"] - mp["tp_hidden_seconds"]
    # the data-parallel time not hidden (the gradient all-reduce after the backward, eq. (P5): all of it)
    assert mp["dp_exposed_seconds"] == mp["dp_seconds"] > 0
    share = (mp["micro_batches"] * (exposed_tp + mp["p2p_seconds"]) + mp["dp_exposed_seconds"]) / mp["step_seconds"]
    assert st["comm_share"] == pytest.approx(share, rel=1e-12) and share > 0
    assert j.section("network").value("comm_share") == j.facts["comm_share"] == st["comm_share"]


@pytest.mark.parametrize(("network", "per_machine"), [("efa-p5", 3200e9 / 8), ("ib-ndr", 4 * 400e9 / 8)])
def test_a_catalog_network_name_in_a_request_is_fits_network(network: str, per_machine: float,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """probe16 D-G: ``resources.network`` takes the catalog interconnect names ``fit --network`` takes (one reader,
    request/quantities.py ``parse_network``; before, 'efa-p5' was refused as "not a bandwidth", exit 2): the plan's
    duration is fit's. Independent truth for the bus: AWS p5's EFA is 3200 Gb/s per instance
    (aws.amazon.com/ec2/instance-types/p5), InfiniBand NDR 400 Gb/s per port, one port per device (4 per machine)."""
    j = _plan_job(f"""\
    method: full
    settings: {{micro_batch: 1, seq_len: 2048, grad_accumulation: 2}}
    resources: {{device: h100-sxm, count: 8, nodes: 2, network: {network}}}
    """)
    net, dur = j.section("network"), j.section("duration")
    _, fit = answer(["fit", "qwen2.5-0.5b", "--train", "--method", "full", "--device", "h100-sxm", "--count", "8",
                     "--gpus-per-node", "4", "--network", network, "--grad-accumulation", "2",
                     "--tokens", str(int(dur.value("tokens")))], capsys)
    assert dur.value("seconds") == pytest.approx(fit["training_time"]["seconds"], rel=1e-12)
    assert net.value("bus_bandwidth") == pytest.approx(min(H100_NVLINK, per_machine))


def test_a_network_inside_a_machine_is_refused_with_the_field() -> None:
    with pytest.raises(Exception, match=r"resources\.network.*nvlink4.*link inside a machine"):
        _plan_job("""\
        method: full
        resources: {device: h100-sxm, count: 8, nodes: 2, network: nvlink4}
        """)


def test_plan_shows_the_context_parallel_ring(capsys: pytest.CaptureFixture[str]) -> None:
    """probe25 D3: context parallelism's ring attention exchange is in the Network section, the same bytes and time as
    `train --tokens` reports. Qwen2.5-0.5B: 24 layers, 2 KV heads x 64 = 128-wide K and V; 8192 tokens split 4 ways =
    2048 per rank, 3 peers: 3 x 2048 x 256 = 1,572,864 K/V elements per layer, sent bf16 in the forward, the recomputed
    forward and the backward (2 B each) plus fp32 dK/dV (4 B): x 10 B x 24 layers, per micro-batch (eq. CP1)."""
    j = _plan_job("""\
    method: full
    settings: {micro_batch: 1, seq_len: 8192, context_parallel: 4, grad_checkpointing: full, fsdp: full, fsdp_version: 2}
    resources: {device: h100-sxm, count: 4}
    """)
    net, dur = j.section("network"), j.section("duration")
    d = _train(["--device", "h100-sxm", "--gpus", "4", "--seq", "8192", "--context-parallel", "4",
                "--grad-checkpointing", "full", "--fsdp", "full"], dur.value("tokens"), capsys)
    assert net.value("cp_ring_bytes") == 3 * 2048 * 256 * 10 * 24 == d["step"]["ring_bytes"]
    assert net.value("cp_ring_seconds") == pytest.approx(d["step"]["ring_seconds"], rel=1e-12)

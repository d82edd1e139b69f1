"""The all-reduces of a tensor-parallel decode step (formulas/speed.py eq. 6 with its latency alpha, estimate/engines.py
``tp_allreduce``). Independent truth: the engines' own code, replayed case by case (vllm 0.6.3 (PyPI wheel)
vllm/distributed/device_communicators/custom_all_reduce.py L48 world sizes, L54 max_size, L130-136 "not supported on
more than two PCIe-only GPUs", L236-248 should_custom_ar; csrc/custom_all_reduce.cuh @036bb68 REDUCE_CASE one/two
stage thresholds; SGLang @263bc85 the same rule), the count of all-reduces of a Qwen2 step read from vLLM's model file
(models/qwen2.py: two RowParallelLinear per layer, linear.py:1084; one VocabParallelEmbedding,
vocab_parallel_embedding.py:406), and the published latencies the constants quote."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.device import nvlink_mesh_for
from llmsizer.estimate.engines import tp_allreduce
from llmsizer.estimate.fit import link_bandwidth_for
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.speed import allreduce_time

KB = 1024
A100_NVLINK_BUS = 12 * 20.0e9  # NCCL's NVLink bandwidth on an A100 SXM: 12 links x topo.h SM80_NVLINK_BW [B/s]


@pytest.mark.parametrize(("engine", "tp", "nbytes", "mesh", "p2p", "kernel"), [
    ("vllm", 2, 16 * KB, False, True, "custom one-stage"),  # two GPUs: custom, one stage, NVLink or not
    ("vllm", 2, 4 * 1024 * KB, False, True, "custom one-stage"),  # two GPUs stay one-stage at any size < 8 MiB
    ("vllm", 4, 16 * KB, False, True, "NCCL"),  # more than two PCIe-only GPUs: disabled
    ("vllm", 4, 16 * KB, True, True, "custom one-stage"),
    ("vllm", 4, 600 * KB, True, True, "custom two-stage"),  # <= 4 GPUs: one stage below 512 KB
    ("vllm", 8, 300 * KB, True, True, "custom two-stage"),  # <= 8 GPUs: one stage below 256 KB
    ("vllm", 8, 200 * KB, True, True, "custom one-stage"),
    ("vllm", 3, 16 * KB, True, True, "NCCL"),  # world size not in 2, 4, 6, 8
    ("vllm", 4, 8192 * KB, True, True, "NCCL"),  # inp_size < max_size fails at 8 MiB
    ("vllm", 2, 16 * KB, False, False, "NCCL"),  # the P2P test fails
    ("sglang", 4, 16 * KB, True, True, "custom one-stage"),
    ("sglang", 4, 16 * KB, None, True, "NCCL"),  # link unknown: not taken as a mesh
])
def test_the_kernel_is_the_engines_choice(engine: str, tp: int, nbytes: int, mesh: bool | None, p2p: bool,
                                          kernel: str) -> None:
    path = tp_allreduce(engine, tp, nbytes, mesh, p2p)
    assert path is not None and path.kernel == kernel
    nccl = E.NCCL_ALLREDUCE_LATENCY if mesh else E.NCCL_ALLREDUCE_LATENCY_PCIE  # NCCL over the replica's link
    assert path.latency is (nccl if kernel == "NCCL" else E.CUSTOM_ALLREDUCE_LATENCY)


def test_no_path_on_one_gpu_or_for_engines_not_covered() -> None:
    assert tp_allreduce("vllm", 1, 16 * KB, True) is None
    for engine in (None, "llamacpp"):
        assert tp_allreduce(engine, 4, 16 * KB, True) is None


@pytest.mark.parametrize(("tp", "mesh", "latency"), [(2, True, "NCCL_ALLREDUCE_LATENCY"),
                                                     (2, False, "NCCL_ALLREDUCE_LATENCY_PCIE"),
                                                     (8, False, "NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS")])
def test_transformers_runs_nccl_whatever_the_message(tp: int, mesh: bool, latency: str) -> None:
    """transformers' plan styles call torch.distributed (dist.all_reduce, a DTensor redistribute), never a custom
    kernel: NCCL at the link's latency even for a 16 KB message on 2 GPUs, where vLLM takes its custom kernel."""
    path = tp_allreduce("transformers", tp, 16 * KB, mesh)
    assert path is not None and path.kernel == "NCCL"
    assert path.latency is getattr(E, latency)


def test_latencies_quote_their_published_tables() -> None:
    """SGLang PR #2904 (vLLM's kernel, H100, tp 2/4/8 at 4096 and 32768 B: 8.8/8.5/9.3, 8.7/9.2/11.8 us);
    Triton-distributed #57 (NCCL, 8 x H100: 128 B 19.19 us, 16 KB 20.71 us); vllm #50576 (NCCL on 8 x A800 PCIe,
    16 KB 63.8 us)."""
    custom = [8.8, 8.5, 9.3, 8.7, 9.2, 11.8]
    c = E.CUSTOM_ALLREDUCE_LATENCY
    assert (c.low, c.high) == (pytest.approx(min(custom) * 1e-6), pytest.approx(max(custom) * 1e-6))
    assert c.expected == pytest.approx((8.5 + 9.2) / 2 * 1e-6)  # tp 4 over 4-32 KB
    n = E.NCCL_ALLREDUCE_LATENCY
    assert (n.low, n.expected, n.high) == (pytest.approx(19.19e-6), pytest.approx(20.71e-6), pytest.approx(63.8e-6))
    assert c.high < n.low  # the custom kernel exists because it beats NCCL on small messages
    # NCCL over PCIe (probe20 D7): haohervchb/sglang-V100 PR #2, NCCL in a CUDA graph on 4 x V100 behind one PCIe
    # switch, fp16: 4/8/16/32 KB 19.4/20.3/22.3/24.2 us; high: vllm #50576's two PCIe islands, 16 KB 63.8 us
    p = E.NCCL_ALLREDUCE_LATENCY_PCIE
    assert (p.low, p.expected, p.high) == (pytest.approx(19.4e-6), pytest.approx(22.3e-6), pytest.approx(63.8e-6))
    # vllm #50576: NCCL on 8 x A800 PCIe as 2 x 4 islands, bf16, 8/16/32 KB 56.9/63.8/95.8 us
    i = E.NCCL_ALLREDUCE_LATENCY_PCIE_ISLANDS
    assert (i.low, i.expected, i.high) == (pytest.approx(56.9e-6), pytest.approx(63.8e-6), pytest.approx(95.8e-6))


@pytest.mark.parametrize(("device", "count", "latency"), [
    ("l40s", 4, 22.3e-6), ("a100-pcie-80gb", 4, 22.3e-6),  # four PCIe GPUs: the one-switch layout measured (4 x V100)
    ("l40s", 8, 63.8e-6), ("a100-pcie-80gb", 8, 63.8e-6),  # eight: two islands (vllm #50576's 2 x 4 A800 layout)
    ("rtx-4090", 8, 63.8e-6),  # no peer access, eight cards: NCCL, two islands
    ("h100-sxm", 8, 20.71e-6),  # an NVLink mesh at a 1 MiB message (NCCL): the NVLink figure, whatever the count
])
def test_nccl_over_pcie_takes_the_islands_figure_above_four_gpus(device: str, count: int, latency: float) -> None:
    """review25 D4: the catalog states no host topology (sockets, PCIe switches), so NCCL over PCIe is timed on the
    layout its sources measured: up to four GPUs behind one switch (haohervchb/sglang-V100 PR #2, 16 KB 22.3 us), more
    across two islands (vllm #50576, 8 x A800 PCIe as 2 x 4, 16 KB 63.8 us). Llama-3.1-70B (80 layers, hidden 8192):
    on PCIe one sequence's 16 KB decode message, 161 all-reduces a step, each the latency plus a ring's
    2 (n - 1) / n x message over the link; on the NVLink mesh 1024 sequences' 16 MiB message, above the custom
    kernel's 8 MiB, so NCCL there too, at its NVLink figure."""
    dev = builtin_catalog().devices[device]
    spec = find("llama-3.1-70b").spec()
    msg = spec.hidden_size * 2
    conc = 1 if device != "h100-sxm" else 1024 * KB // msg * 16  # 16 MiB: above the custom kernel's 8 MiB
    s = estimate_speed(spec, dev, count, weights_format="fp8", prompt_tokens=1, output_tokens=256, kv_dtype="bf16",
                       link_bandwidth=link_bandwidth_for(dev, None), engine="vllm", concurrency=conc,
                       nvlink_mesh=nvlink_mesh_for(dev, None, count))
    named = {a.name: a for a in s.assumptions}
    assert f"NCCL: {latency * 1e6:.2f} us" in str(named["tp_allreduce"].value)
    assert ("across two islands" in named["tp_allreduce"].why) == (latency == 63.8e-6)
    if device != "h100-sxm":
        link = link_bandwidth_for(dev, None)
        assert link is not None and s.decode is not None
        assert s.decode.comm_seconds == pytest.approx(161 * (latency + 2 * (count - 1) / count * msg / link))


def test_two_rtx_4090s_without_peer_access_take_nccls_pcie_latency() -> None:
    """probe20 D7: a pair of GeForce RTX 4090s has no peer-to-peer access (NVIDIA/nccl#1127; the catalog's
    peer_to_peer false) and no NVLink, so vLLM's decode all-reduce is NCCL over PCIe (through host memory): its PCIe
    latency, not the H100 NVLink figure it was timed at before."""
    dev = builtin_catalog().devices["rtx-4090"]
    assert nvlink_mesh_for(dev, None, 2) is not True
    path = tp_allreduce("vllm", 2, 16 * KB, nvlink_mesh_for(dev, None, 2), False)
    assert path is not None and path.kernel == "NCCL" and path.latency is E.NCCL_ALLREDUCE_LATENCY_PCIE


def test_alpha_beta_all_reduce() -> None:
    assert allreduce_time(16384, 4, 300e9, 8.85e-6) == pytest.approx(8.85e-6 + 1.5 * 16384 / 300e9)
    assert allreduce_time(16384, 1, 300e9, 8.85e-6) == 0.0
    with pytest.raises(InputError):
        allreduce_time(16384, 4, 300e9, -1.0)


def _decode(device: str, engine: str | None, count: int = 4, **kw: object):
    dev = builtin_catalog().devices[device]
    return estimate_speed(find("qwen2.5-72b").spec(), dev, count, weights_format="bf16", prompt_tokens=1,
                          output_tokens=2048, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                          engine=engine, engine_version="0.6.3" if engine == "vllm" else None,
                          nvlink_mesh=nvlink_mesh_for(dev, None, count), **kw)


def test_a_decode_step_pays_2L_plus_1_latencies() -> None:
    """Qwen2.5-72B (80 layers, hidden 8192) on 4 GPUs: 161 all-reduces of 16 KB per step, custom one-stage on the
    NVLink A100 SXM (eq. 6': each GPU reads the 16 KB from its 3 peers, at NCCL's NVLink figure, 12 NVLink 3 links x
    20.0 GB/s: NVIDIA/nccl src/graph/topo.h SM80_NVLINK_BW; A100 data sheet: 12 links), NCCL on four PCIe A100s (the
    PCIe line rate: no NVLink figure)."""
    spec = find("qwen2.5-72b").spec()
    assert (spec.num_layers, spec.hidden_size) == (80, 8192)
    msg = spec.hidden_size * 2
    sxm = _decode("a100-sxm-80gb", "vllm")
    link = A100_NVLINK_BUS
    assert sxm.decode is not None and sxm.decode.comm_seconds == pytest.approx(
        161 * (E.CUSTOM_ALLREDUCE_LATENCY.expected + 3 * msg / link))
    pcie = _decode("a100-pcie-80gb", "vllm")
    pcie_link = link_bandwidth_for(builtin_catalog().devices["a100-pcie-80gb"], None)
    assert pcie_link is not None
    assert pcie.decode is not None and pcie.decode.comm_seconds == pytest.approx(
        161 * (E.NCCL_ALLREDUCE_LATENCY_PCIE.expected + 1.5 * msg / pcie_link))
    named = {a.name: a for a in pcie.assumptions}
    assert "NCCL" in str(named["tp_allreduce"].value) and "PCIe-only" not in named["tp_allreduce"].why
    # an engine not covered keeps the bandwidth term alone: 2 L all-reduces, no latency, no assumption
    plain = _decode("a100-sxm-80gb", None)
    assert plain.decode is not None and plain.decode.comm_seconds == pytest.approx(160 * 1.5 * msg / link)
    assert "tp_allreduce" not in {a.name for a in plain.assumptions}
    given = _decode("a100-sxm-80gb", "vllm", allreduce_latency=0.0)
    assert given.decode is not None and given.decode.comm_seconds == pytest.approx(161 * 3 * msg / link)


@pytest.mark.parametrize(("device", "count", "mesh"), [
    ("a100-sxm-80gb", 4, True), ("h100-sxm", 8, True),  # NVSwitch boards
    ("a100-pcie-80gb", 4, False), ("l4", 2, False),  # PCIe
    ("h100-nvl", 2, True), ("h100-nvl", 4, False),  # an NVLink bridge joins pairs
    ("l40", 2, None),  # no interconnect in the catalog
    # Infinity Fabric: the 8-GPU CDNA 3 / CDNA 4 OAM boards are full xGMI meshes (seven links a GPU, one to each peer:
    # gpu.blog MI300X "Fully-connected 8-GPU xGMI mesh"; MI350 "links connecting each package with every other
    # package on the node"), what vLLM's RocmPlatform.is_fully_connected (every pair 1 XGMI hop) finds there; the
    # MI250X's GCDs are not all one hop apart, and vLLM's ROCm custom all-reduce is gfx94x/gfx95x only
    ("mi300x", 8, True), ("mi325x", 8, True), ("mi355x", 8, True), ("mi300x", 2, True),
    ("mi250x", 8, False),
])
def test_nvlink_mesh_from_the_catalog_link(device: str, count: int, mesh: bool | None) -> None:
    assert nvlink_mesh_for(builtin_catalog().devices[device], None, count) is mesh


def test_eight_mi300x_run_vllms_custom_all_reduce_over_the_xgmi_mesh() -> None:
    """review25 D3: 8 x MI300X (the device, and Azure's ND96isr MI300X v5 instance naming its interconnect) is a full
    xGMI mesh, so vLLM runs its custom all-reduce there (custom_all_reduce.py: world size 8 with fully_connected;
    on ROCm no P2P test), not NCCL "over PCIe". Llama-3.1-70B (80 layers, hidden 8192, the catalog's config) at
    one sequence: 161 all-reduces of 16 KB a step, one stage below 256 KB at 8 GPUs (custom_all_reduce.cuh
    REDUCE_CASE), each GPU reading the message from its 7 peers (eq. 6') at the board's 448 GB/s."""
    from llmsizer.estimate.fit import fit

    spec = find("llama-3.1-70b").spec()
    assert (spec.num_layers, spec.hidden_size) == (80, 8192)
    msg = spec.hidden_size * 2
    for target, count in (("mi300x", 8), ("azure-standard_nd96isr_mi300x_v5", None)):
        r = fit("llama-3.1-70b", target, count, engine="vllm", tensor_parallel=8, concurrency=1)
        assert r.speed is not None and r.speed.decode is not None
        named = {a.name: a for a in r.speed.assumptions}
        assert str(named["tp_allreduce"].value).startswith("161 x (custom one-stage")
        assert "PCIe" not in named["tp_allreduce"].why
        assert r.speed.decode.comm_seconds == pytest.approx(161 * (E.CUSTOM_ALLREDUCE_LATENCY.expected
                                                                   + 7 * msg / 448e9))


def test_the_python_api_reads_the_devices_own_link() -> None:
    """estimate_speed without ``nvlink_mesh`` takes the device's catalog interconnect (the NVSwitch A100 SXM: the
    custom kernel), as fit does."""
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    s = estimate_speed(find("qwen2.5-72b").spec(), dev, 4, weights_format="bf16", kv_dtype="bf16",
                       link_bandwidth=link_bandwidth_for(dev, None), engine="vllm")
    named = {a.name: a for a in s.assumptions}
    assert "custom one-stage" in str(named["tp_allreduce"].value)


def test_the_custom_kernels_published_saving_lies_inside_the_latency_ranges() -> None:
    """vLLM PR #2192 (validation row VB14: Llama-2-70B, TP 4 on A100-80G, 64 x (256 + 256) tokens) measured 16.37 s
    with NCCL and 14.57 s with the custom all-reduce. Only the decode steps' all-reduces change (the prefill's
    64 x 256 x 8192 x 2 B = 32 MiB messages stay on NCCL, above 8 MiB): 161 per step, 255 steps. The saving per
    all-reduce must lie between the expected latencies' difference and the widest one (NCCL high - custom low)."""
    import csv
    import re

    from llmsizer.validation_cases import data_dir

    row = next(r for r in csv.DictReader((data_dir() / "vllm_benchmark_latency.csv").open()) if r["id"] == "VB14")
    before = float(re.search(r"before the custom all-reduce \(NCCL\): ([0-9.]+) s", row["notes"]).group(1))  # type: ignore[union-attr]
    after = float(row["value"])
    spec = find(row["catalog_model"]).spec()
    steps = int(row["generated"]) - 1
    per_reduction = (before - after) / ((2 * spec.num_layers + 1) * steps)
    assert int(row["batch"]) * spec.hidden_size * 2 == 1024 * KB  # a 1 MiB decode message: the two-stage kernel
    path = tp_allreduce("vllm", 4, 1024 * KB, True)
    assert path is not None and path.kernel == "custom two-stage"  # what the measured saving is a saving of
    n, c = E.NCCL_ALLREDUCE_LATENCY, E.CUSTOM_ALLREDUCE_LATENCY
    assert n.expected - c.expected < per_reduction < n.high - c.low, per_reduction


def test_a_prefill_message_picks_its_own_kernel() -> None:
    """A 1024-token prefill of Qwen2.5-72B all-reduces 1024 x 8192 x 2 B = 16 MiB per call, above vLLM's 8 MiB custom
    all-reduce limit (custom_all_reduce.py L54, should_custom_ar): NCCL's latency, not the decode step's custom
    kernel's, even on the NVLink A100 SXM where the decode runs the custom kernel."""
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    s = estimate_speed(find("qwen2.5-72b").spec(), dev, 4, weights_format="bf16", prompt_tokens=1024,
                       output_tokens=64, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                       engine="vllm", engine_version="0.6.3")
    msg = 1024 * 8192 * 2
    path = tp_allreduce("vllm", 4, msg, True)
    assert path is not None and path.kernel == "NCCL"
    assert s.prefill is not None and s.prefill.comm_seconds == pytest.approx(
        161 * (E.NCCL_ALLREDUCE_LATENCY.expected + 1.5 * msg / A100_NVLINK_BUS))
    named = {a.name: a for a in s.assumptions}
    assert "custom one-stage" in str(named["tp_allreduce"].value)  # the decode step's, as named

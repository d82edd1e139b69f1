"""Network traffic of training (collectives between devices) and of serving (requests in, tokens out).

Units: bytes [B], bandwidth [B/s], time [s], rates [1/s]. Pure functions.

Training collectives
--------------------
A ring all-reduce of S bytes over n ranks sends (and receives) per rank (Patarasuk & Yuan 2009, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", J. Parallel Distrib. Comput. 69(2); NCCL-tests
``doc/PERFORMANCE.md``: bus bandwidth = algorithm bandwidth x 2 (n - 1) / n)::

    V_allreduce = 2 (n - 1) / n S                                                         (1)
    V_reduce_scatter = V_all_gather = (n - 1) / n S                                       (2)

Data parallelism (DDP, ZeRO-1/2/3, FSDP, HSDP): the collectives each device runs per micro-step and per optimizer
step, with when they overlap the compute, have one home, formulas/training_time.py eqs. (7c)-(7e), built from
(1)-(2) here (ZeRO paper, Rajbhandari et al. 2020, arXiv 1910.02054, section 7: baseline DP and P_os / P_os+g move
2 Psi, P_os+g+p 3 Psi).

Tensor and pipeline parallelism (Megatron-LM): the collectives and point-to-point transfers each device runs per
micro-batch, with their time and the pipeline bubble, have one home, formulas/model_parallel_time.py eqs. (T1)-(P6),
built from (1)-(2) here.

Time on a link of bandwidth B (how training's collectives overlap the compute: formulas/training_time.py
eqs. (8'), (8''))::

    t = V / B                                                                             (6)

Across machines the ring is limited by each device's share of its machine's network: B_dev = B_node / g for g
devices per machine (NCCL runs one ring per NIC; a p5.48xlarge has 3200 Gb/s for 8 GPUs = 50 GB/s each)::

    B_dev = B_node / g                                                                    (8)

That share is what a collective among one device per machine gets (HSDP's replica all-reduce: each device's ring
runs over its own NIC). A ring over *all* devices of N > 1 machines is different: NCCL builds one ring per channel
and each ring leaves each machine once, so the g channels cross the network in parallel on the g NICs while the
other hops run over the intra-machine link; the bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``: "The bus bandwidth
should reflect the speed of the hardware bottleneck: NVLink, PCI, QPI, or network") is the slower of the two::

    B_bus = B_intra                       (one machine)
    B_bus = min(B_intra, B_node)          (N > 1 machines, B_node = the machine's whole network)    (11)

Measured: "On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW"
(NVIDIA/nccl issue #1576, quoting AddyLaddy in #812: 96 % of the 8 x 25 GB/s line rate); one 200 Gb/s NIC per
8-GPU machine gives "~160GB/s intra-node and 24GB/s inter-node", and more NICs raise it "up to 160GB/s which is the
NVLink intra-node bandwidth of your system" (sjeaugey, NVIDIA/nccl issue #412). Latency (the alpha term of each
of the 2(n-1) ring steps) is not counted: at the per-layer message sizes of data-parallel training (tens to
hundreds of MB) the bandwidth term dominates (nccl-tests PERFORMANCE.md: "on large sizes, the time becomes linear
with the size").

What a ring collective reaches over NVLink (NCCL's own model): NCCL's topology search gives each NVLink link of a
GPU of compute capability cc a bandwidth ``ncclTopoNVLinkBw(cc)`` (NVIDIA/nccl @069a3d4f ``src/graph/topo.h`` lines
21-26: SM60 18.0, SM70 20.0, SM80 20.0, SM90 20.6, SM100 40.1 GB/s per link) below the link's line rate per
direction (NVLink 1: 20 GB/s, NVLink 2-4: 25 GB/s, NVLink 5: 50 GB/s per link per direction: the catalog's
per-direction totals, e.g. NVLink 4 450 GB/s = 18 links x 25); the rings run at the sum over the links. The bus
bandwidth of a ring collective inside an NVLink machine is therefore::

    B_bus = s(cc) B_link,   s(cc) = NCCL bw per link / line rate per link
          (0.9 on SM60, 0.8 on SM70/SM80, 0.824 on SM90, 0.802 on SM100; None where not an NVLink GPU)   (12)

Measured: 8 x H100 NVLink all_gather / all_reduce busbw "saturated at ~360 GB/s" at 128 MB-16 GB, and NCCL's
maintainer: "360 GB/s is exactly what we'd expect on H100" (NVIDIA/nccl-tests issue #326, sjeaugey 2025-06-24), 0.80
of 450 GB/s; eq. (12) gives 370.8 GB/s. One rule for every collective inside an NVLink machine: training's
(estimate/duration.py) and serving's tensor-parallel all-reduces (estimate/speed.py, formulas/speed.py eqs. (6), (6'))
read it through estimate/device.py ``nvlink_link_bandwidth``; vLLM's and SGLang's custom all-reduce (peer loads, not
NCCL) is taken at the same per-link figure, an assumption its tp_allreduce note states. SM86 (GA102's NVLink bridge, 12.0 per link) has no line rate in the catalog
to divide: not applied.

Latency of a small all-reduce across machines (serving's tensor-parallel all-reduces of a decode step, kilobytes,
where the alpha term decides): NCCL's own tuning model (NVIDIA/nccl @5067397c ``src/graph/tuning.cc``), which
times each algorithm as a base latency plus one latency per hop by the hardware the hop crosses (lines 149-177:
``baseLatencies`` and ``hwLatencies`` [us]; LL, the protocol whose base and hop latencies are each the smallest of
the three, is what it picks for such messages). For n ranks on N machines of n/N each (lines 384-418; the ring's
2(n - 1) steps of which 2(N - 1) cross the network, each intra-machine step no faster than the network's post
overhead o once N > 1, ``getNetOverhead`` lines 228-233: 1 us, 2 us on AMD x86 hosts; the tree's 2 (n/N - 1)
intra-machine hops and 2 log2 N network hops)::

    L_ring = 6.6 + (2 (n - 1) - 2 (N - 1)) max(l_intra, o [N > 1]) + 2 (N - 1) l_net,ring
    L_tree = 6.8 + 2 ((n/N - 1) l_intra + log2(N) l_net,tree)
    L_NCCL(n, N) = min(L_ring, L_tree)                                                    (13)

with l_intra = 0.6 us on NVLink (1.0 on PCIe), l_net = 2.7 (ring) / 5.0 (tree) us (with one rank per machine the
ring's network hop takes the tree's, line 387); the transport's own ``latencyInter`` is 0 (InfiniBand and sockets
leave it unset: src/transport/net_ib/init.cc line 558, net_socket.cc line 174). The model's figures are NCCL's
estimates, not measurements, so the measured in-machine latency alpha_1 (estimate/efficiency.py
NCCL_ALLREDUCE_LATENCY, n/N ranks on one machine) is kept and only what crossing the network adds is taken from
the model::

    alpha_N = alpha_1 + L_NCCL(n, N) - L_NCCL(n/N, 1)                                      (13')

e.g. 16 H100s on two 8-GPU machines: L_NCCL(16, 2) = min(6.6 + 28 x 1.0 + 2 x 2.7, 6.8 + 2 (7 x 0.6 + 5.0)) =
25.2 us (the tree), L_NCCL(8, 1) = 6.6 + 14 x 0.6 = 15.0 us, so +10.2 us on the measured 20.71 us. The bandwidth
term is eq. (11)'s, as for training's collectives. One point-to-point send between machines (a serving pipeline's
stage boundary, formulas/model_parallel_time.py eq. PP4) is taken as one step of the model's ring, its base and one
network hop, 6.6 + 2.7 = 9.3 us (a stand-in: NCCL's send/recv is not in the tuning model)::

    alpha_p2p = base_ring + l_net,ring                                                     (14)

Serving
-------
Little's law (Little 1961, Operations Research 9(3)): requests in the system = arrival rate x time in the
system, so with C requests in flight each taking W seconds::

    lambda = C / W,   W = max(TTFT + O / r_user, T_prefill(C))                            (9)

The C requests in service are also prefilled, together: T_prefill(C) = max(C t_c, t_m) + C t_comm + t_overhead
(eq. 3 of formulas/speed.py over C prompts; estimate/speed_result.py SpeedEstimate.prefill_batch_seconds, eq. P1), so a
replica serves them no faster than that (lambda <= its prefill tokens/s / P; compute-bound, lambda <= 1 / t_c). A
request that generates no token (embeddings, scoring, prefill-only, O = 0) is in service for that batch prefill
alone, not for one prompt's TTFT on an idle replica. (estimate/speed_result.py SpeedEstimate.request_seconds.) Under a
modelled load TTFT and r_user are formulas/serving_queue.py's (eqs. Q5-Q9), so W is that model's R = TTFT + O t_step
(eqs. Q7, Q10c) but for the prefill floor T_prefill(C), which only binds for prefill-only or prompt-heavy loads; a
stated rate is compared with a stated concurrency at the serving model's own R (plan/inference.py ``_network``),
and whether a deployment carries a rate at all is eq. Q10's question (estimate/fit.py, not this equation).

Traffic in and out: prompt text of P tokens and generated text of O tokens at c bytes per token (about 4 B of
UTF-8 per token of English, OpenAI's rule of thumb), plus a fixed envelope per request and response; streamed
output sends one server-sent event per token, each in its own TLS record and TCP segment::

    ingress = lambda (P c + o_req),   egress = lambda (O c_out + o_resp)                  (10)

with c_out = c for a whole response, or the bytes of one SSE chunk + TLS 1.3 record overhead (5 B header + 1 B
content type + 16 B AEAD tag, RFC 8446 section 5.2) + TCP/IPv4 headers (20 + 20 + 12 B timestamp option, RFC 791,
RFC 9293, RFC 7323) for a stream. The envelopes are measured from the literal examples below (``len()`` of each).

Images in the prompt arrive inline, as the OpenAI-style chat API carries them: one ``image_url`` content part per
image whose URL is a ``data:image/jpeg;base64,...`` data URL (vLLM's and SGLang's OpenAI servers read the same
shape). A W x H photograph encoded as a JPEG at b bits per pixel, then base64-encoded (4 characters per 3 bytes,
RFC 4648 section 4, padded to a whole group), plus the content part around it::

    I = 4 ceil(ceil(W H b / 8) / 3) + o_img,   ingress = lambda (P c + n_img I + o_req)          (10')

b = JPEG_BITS_PER_PIXEL = 1.5, the top of the range Wallace gives for "excellent quality, sufficient for most
applications" (0.75-1.5 bits/pixel for colour images of moderately complex scenes; 1.5-2.0 "usually
indistinguishable from the original"; G. K. Wallace, "The JPEG still picture compression standard", Communications
of the ACM 34(4), 1991). An assumption, not a measurement: a PNG screenshot or a higher JPEG quality is larger. Video
is not counted (it arrives as a video file or URL whose codec this module does not model).
"""

from __future__ import annotations

import math

from ..errors import InputError
from .storage import TEXT_BYTES_PER_TOKEN  # one home: OpenAI help, 1 token ~= 4 characters of English text

# One OpenAI-compatible streaming chunk (the chat.completion.chunk object; vLLM's server sends the same shape).
SSE_CHUNK_EXAMPLE = (
    'data: {"id":"chatcmpl-0123456789abcdef0123456789abcdef","object":"chat.completion.chunk",'
    '"created":1730000000,"model":"llama-3.1-8b","choices":[{"index":0,"delta":{"content":" word"},'
    '"logprobs":null,"finish_reason":null}]}\n\n'
)
TLS13_RECORD_OVERHEAD = 5 + 1 + 16  # RFC 8446 5.2: header, inner content type, AEAD tag
TCP_IP_HEADERS = 20 + 20 + 12  # IPv4 + TCP + timestamp option
STREAM_BYTES_PER_TOKEN = len(SSE_CHUNK_EXAMPLE.encode()) + TLS13_RECORD_OVERHEAD + TCP_IP_HEADERS

# Request and response envelopes around the text (headers + JSON without the text itself).
REQUEST_ENVELOPE_EXAMPLE = (
    "POST /v1/chat/completions HTTP/1.1\r\nHost: llm.internal.example.com\r\n"
    "Authorization: Bearer sk-0123456789abcdef0123456789abcdef0123456789abcdef\r\n"
    "Content-Type: application/json\r\nContent-Length: 4096\r\nAccept: text/event-stream\r\n\r\n"
    '{"model":"llama-3.1-8b","messages":[{"role":"system","content":""},{"role":"user","content":""}],'
    '"stream":true,"max_tokens":512,"temperature":0.7}'
)
RESPONSE_ENVELOPE_EXAMPLE = (
    "HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2025 00:00:00 GMT\r\nserver: uvicorn\r\n"
    "content-type: application/json\r\ncontent-length: 1024\r\n\r\n"
    '{"id":"chatcmpl-0123456789abcdef0123456789abcdef","object":"chat.completion","created":1730000000,'
    '"model":"llama-3.1-8b","choices":[{"index":0,"message":{"role":"assistant","content":""},'
    '"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":300,'
    '"total_tokens":1300}}'
)
REQUEST_OVERHEAD_BYTES = len(REQUEST_ENVELOPE_EXAMPLE.encode())
# Eq. (10'): the JPEG rate an inline image is taken at, and the content part around its base64 text
JPEG_BITS_PER_PIXEL = 1.5
IMAGE_PART_EXAMPLE = ',{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"}}'
IMAGE_PART_OVERHEAD_BYTES = len(IMAGE_PART_EXAMPLE.encode())
RESPONSE_OVERHEAD_BYTES = len(RESPONSE_ENVELOPE_EXAMPLE.encode())


def _check(n: int) -> None:
    if n < 1:
        raise InputError(f"ranks must be >= 1, got {n}")


def allreduce_bytes(nbytes: float, n: int) -> float:
    """Eq. (1): bytes each of ``n`` ranks sends in a ring all-reduce of ``nbytes``.

    >>> allreduce_bytes(1000, 4)
    1500.0
    """
    _check(n)
    return 2.0 * (n - 1) / n * nbytes


def reduce_scatter_bytes(nbytes: float, n: int) -> float:
    """Eq. (2): bytes each rank sends in a reduce-scatter (or all-gather) of ``nbytes``."""
    _check(n)
    return (n - 1) / n * nbytes


all_gather_bytes = reduce_scatter_bytes


def transfer_seconds(nbytes: float, bandwidth: float) -> float:
    """Eq. (6): seconds to move ``nbytes`` at ``bandwidth`` [B/s]."""
    if bandwidth <= 0:
        raise InputError(f"bandwidth must be positive, got {bandwidth}")
    return nbytes / bandwidth


def device_share_of_node_bandwidth(node_bandwidth: float, devices_per_node: int) -> float:
    """Eq. (8): one device's share of its machine's network [B/s]."""
    _check(devices_per_node)
    return node_bandwidth / devices_per_node


def ring_bus_bandwidth(intra_bandwidth: float, nodes: int, node_bandwidth: float | None) -> float:
    """Eq. (11): bus bandwidth [B/s] of a ring collective over every device of ``nodes`` machines: the intra-machine
    link alone on one machine, else the slower of it and the machine's whole network ``node_bandwidth``.

    >>> ring_bus_bandwidth(450e9, 1, None), ring_bus_bandwidth(450e9, 16, 8 * 400e9 / 8)
    (450000000000.0, 400000000000.0)
    """
    _check(nodes)
    if intra_bandwidth <= 0:
        raise InputError(f"intra-machine bandwidth must be positive, got {intra_bandwidth}")
    if nodes == 1:
        return intra_bandwidth
    if node_bandwidth is None or node_bandwidth <= 0:
        raise InputError(f"{nodes} machines need their network bandwidth (per machine)")
    return min(intra_bandwidth, node_bandwidth)


def request_seconds(ttft: float, output_tokens: float, tokens_per_second_per_user: float | None,
                    batch_prefill: float | None = None) -> float:
    """Eq. (9): time one of C requests in service spends in the server [s]: its prefill (``ttft``, one prompt's)
    then the decode of its output, and no less than ``batch_prefill``, T_prefill(C), the prefill of the C prompts
    in service together (None: not bounded). No output: the batch prefill alone (``ttft`` when not given), whatever
    the decode speed, which a prefill-only workload does not have.

    >>> request_seconds(0.025, 0, None, batch_prefill=0.2), request_seconds(0.025, 100, 50.0, batch_prefill=0.2)
    (0.2, 2.025)
    """
    floor = ttft if batch_prefill is None else max(ttft, batch_prefill)
    if output_tokens == 0:
        return floor
    if tokens_per_second_per_user is None or tokens_per_second_per_user <= 0:
        raise InputError("tokens_per_second_per_user must be positive")
    return max(floor, ttft + output_tokens / tokens_per_second_per_user)


def littles_law_rate(concurrency: float, seconds_per_request: float) -> float:
    """Eq. (9): arrival rate [1/s] that keeps ``concurrency`` requests in flight.

    >>> littles_law_rate(16, 8.0)
    2.0
    """
    if seconds_per_request <= 0:
        raise InputError("seconds_per_request must be positive")
    return concurrency / seconds_per_request


def inline_image_bytes(width: int, height: int, bits_per_pixel: float = JPEG_BITS_PER_PIXEL) -> int:
    """Eq. (10'): bytes of one ``width`` x ``height`` image sent inline as a base64 JPEG data URL, with its content
    part.

    >>> inline_image_bytes(1024, 768) - IMAGE_PART_OVERHEAD_BYTES  # 147,456 JPEG bytes -> 196,608 base64 characters
    196608
    """
    jpeg = math.ceil(width * height * bits_per_pixel / 8)
    return 4 * math.ceil(jpeg / 3) + IMAGE_PART_OVERHEAD_BYTES


def ingress_bytes_per_second(rate: float, prompt_tokens: float, bytes_per_token: float = TEXT_BYTES_PER_TOKEN,
                             overhead: float = REQUEST_OVERHEAD_BYTES, media_bytes: float = 0.0) -> float:
    """Eqs. (10), (10'): bytes/s arriving at the service; ``media_bytes``: the inline images of one request."""
    return rate * (prompt_tokens * bytes_per_token + media_bytes + overhead)


def egress_bytes_per_second(rate: float, output_tokens: float, stream: bool = True,
                            overhead: float = RESPONSE_OVERHEAD_BYTES) -> float:
    """Eq. (10): bytes/s leaving the service (streamed: one SSE chunk per token)."""
    per_token = STREAM_BYTES_PER_TOKEN if stream else TEXT_BYTES_PER_TOKEN
    return rate * (output_tokens * per_token + overhead)


# NCCL's per-link NVLink bandwidth by compute capability (NVIDIA/nccl @069a3d4f src/graph/topo.h lines 21-26:
# SM60_NVLINK_BW .. SM100_NVLINK_BW, GB/s) over the link's line rate per direction (GB/s), eq. (12)
NCCL_NVLINK_LINK_BW = ((100, 40.1, 50.0), (90, 20.6, 25.0), (80, 20.0, 25.0), (70, 20.0, 25.0), (60, 18.0, 20.0))


def nccl_nvlink_share(capability: int | None) -> float | None:
    """Eq. (12): the share s(cc) of an NVLink GPU's per-direction line rate that NCCL's rings reach (NCCL's per-link
    bandwidth over the line rate); None for no capability, SM86 (no line rate to divide) or below SM60.

    >>> round(nccl_nvlink_share(90), 3), nccl_nvlink_share(80), nccl_nvlink_share(86)
    (0.824, 0.8, None)
    """
    if capability is None or capability == 86:
        return None
    for cc, nccl, line in NCCL_NVLINK_LINK_BW:
        if capability >= cc:
            return nccl / line
    return None


# NCCL's tuning model, LL protocol (NVIDIA/nccl @5067397c src/graph/tuning.cc lines 149-177: baseLatencies and
# hwLatencies [us], the LL column; getNetOverhead lines 228-233), eqs. (13), (14)
NCCL_BASE_LATENCY_US = {"ring": 6.6, "tree": 6.8}
NCCL_HOP_LATENCY_US = {("nvlink", "ring"): 0.6, ("nvlink", "tree"): 0.6, ("pci", "ring"): 1.0, ("pci", "tree"): 1.0,
                       ("net", "ring"): 2.7, ("net", "tree"): 5.0}
NCCL_NET_OVERHEAD_US = 1.0  # getNetOverhead: x86 Intel and other hosts (2.0 on AMD x86: the tree answers below it)
NCCL_TUNING_SOURCE = "NVIDIA/nccl @5067397c src/graph/tuning.cc lines 149-177, 228-233, 384-418"


def nccl_allreduce_model_latency(ranks: int, nodes: int, nvlink: bool = True,
                                 net_overhead_us: float = NCCL_NET_OVERHEAD_US) -> float:
    """Eq. (13): NCCL's tuning-model latency [s] of an all-reduce over ``ranks`` on ``nodes`` machines (ranks / nodes
    each), LL protocol: the lesser of the ring's and the tree's. ``nvlink``: the hops inside a machine are NVLink
    (else PCIe).

    >>> round(nccl_allreduce_model_latency(8, 1) * 1e6, 2), round(nccl_allreduce_model_latency(16, 2) * 1e6, 2)
    (15.0, 25.2)
    """
    _check(ranks)
    _check(nodes)
    if ranks % nodes:
        raise InputError(f"{ranks} ranks do not split evenly over {nodes} machines")
    ppn = ranks // nodes
    hw = "nvlink" if nvlink else "pci"
    intra_ring = NCCL_HOP_LATENCY_US[(hw, "ring")]
    if nodes > 1:
        intra_ring = max(intra_ring, net_overhead_us)
    net_ring = NCCL_HOP_LATENCY_US[("net", "tree" if ppn == 1 else "ring")]
    inter_steps = 2 * (nodes - 1)
    ring = NCCL_BASE_LATENCY_US["ring"] + (2 * (ranks - 1) - inter_steps) * intra_ring + inter_steps * net_ring
    tree = NCCL_BASE_LATENCY_US["tree"] + 2 * ((ppn - 1) * NCCL_HOP_LATENCY_US[(hw, "tree")]
                                               + (nodes.bit_length() - 1) * NCCL_HOP_LATENCY_US[("net", "tree")])
    return min(ring, tree) * 1e-6


def cross_machine_allreduce_latency(measured: float, ranks: int, nodes: int, nvlink: bool = True) -> float:
    """Eq. (13'): the latency [s] of an all-reduce over ``ranks`` on ``nodes`` machines from ``measured``, the
    measured latency of one over the ranks / nodes of one machine, plus what NCCL's model (eq. 13) adds for the
    network.

    >>> round(cross_machine_allreduce_latency(20.71e-6, 16, 2) * 1e6, 2)
    30.91
    """
    if measured < 0:
        raise InputError(f"measured latency must not be negative, got {measured}")
    if nodes == 1:
        return measured
    return measured + nccl_allreduce_model_latency(ranks, nodes, nvlink) \
        - nccl_allreduce_model_latency(ranks // nodes, 1, nvlink)


def cross_machine_send_latency() -> float:
    """Eq. (14): latency [s] of one point-to-point send between machines, one step of NCCL's model ring.

    >>> round(cross_machine_send_latency() * 1e6, 2)
    9.3
    """
    return (NCCL_BASE_LATENCY_US["ring"] + NCCL_HOP_LATENCY_US[("net", "ring")]) * 1e-6

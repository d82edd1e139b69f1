"""Where llama.cpp puts each tensor, KV cell and compute buffer across GPUs and the host (layer and row split).

Rules, read in llama.cpp as vendored by llama-cpp-python 0.3.36 (PyPI sdist, llama.cpp ggml-org/llama.cpp@0c1e57098;
line numbers of that tree):

(1) Split points (src/llama-model.cpp:1557-1587): the ``--tensor-split`` proportions, or, when none is given (all
    zero), each device's free memory; summed cumulatively and normalised, ``p_i = sum_{j<=i} s_j / sum_j s_j``, in
    32-bit float.
(2) Layers on GPUs (src/llama-model.cpp:1589-1600): layers are numbered 0..n_layer, index n_layer being the output
    layer; with ``-ngl N`` the last N of these are offloaded, ``i_gpu_start = max(n_layer + 1 - N, 0)``, so the
    output layer is the first to go to a GPU (src/llama-model.cpp:1912-1924 logs "offloading output layer to GPU"
    as soon as N > 0). Offloaded layer ``il`` goes to GPU ``upper_bound(p, (il - i_gpu_start) / act)`` with
    ``act = min(N, n_layer + 1)``; the rest stay on the CPU.
(3) Token embeddings stay in host memory (src/llama-model.cpp:1603-1605: "there is very little benefit to
    offloading the input layer, so always keep it on the CPU"); a tied output matrix is a device copy of it
    (TENSOR_DUPLICATED).
(4) ``--n-cpu-moe N`` keeps the routed-expert tensors (``blk.i.ffn_*_exps``) of layers 0..N-1 in host memory
    whatever device their layer is on (common/arg.cpp:2766-2775, common/common.h:1198-1217).
(5) Row split (``-sm row``): each GPU's buffer list starts with its backend's split buffer type
    (src/llama-model.cpp:1140-1165), which holds the 2-D matrices of the GPU layers divided by rows,
    GPU i taking rows [nrows x p_{i-1}, nrows x p_i) (ggml/src/ggml-sycl/ggml-sycl.cpp:1183-1195 get_row_split);
    3-D expert stacks cannot be split (ggml-sycl.cpp:5205: "mul_mat_id does not support split buffers") and, with
    norms, stay on the layer's device. At this commit only the SYCL and Hexagon backends export a split buffer
    type (ggml-sycl.cpp:1512, ggml-hexagon.cpp:8081); a CUDA build refuses ``-sm row`` ("device ... does not
    support split buffers", src/llama-model.cpp:1163) -- older CUDA builds had one, with the same row rule.
(3b) Tensors named without a layer that llama.cpp creates in its layer loop (``rope_freqs``, ``rope_factors_long``,
    ``rope_factors_short``: LLM_TENSOR_LAYER_REPEATING, TENSOR_DUPLICATED after layer 0; src/models/llama.cpp:62-66,
    src/llama-arch.cpp:743-745) go to each layer's buffer type (src/llama-model.cpp:1963-1966) and a duplicate is
    skipped only where that buffer type already holds one (src/llama-model-loader.cpp:1370-1376): one copy on every
    device holding a repeating layer (the host only when some layer runs on the CPU).
(6) KV cache: each layer's K and V live on that layer's device (src/llama-kv-cache.cpp:216-219, ``model.dev_layer(il)``
    with offload_kqv, the default), in host memory for CPU layers.
(7) Compute buffers: llama-context.cpp reserves one compute buffer per backend for the worst-case graph of one ubatch
    (src/llama-context.cpp:641, 740); each GPU's holds the f32 intermediates of its layers (residual + the larger of
    attention and feed-forward, formulas/activations.py), the output layer's device also the f32 logits of the
    ubatch. ``-sm layer`` with every layer offloaded to several GPUs turns on pipeline parallelism
    (src/llama-context.cpp:430-457), which keeps up to GGML_SCHED_MAX_COPIES = 4 copies of each split's inputs
    (ggml/src/ggml-backend.cpp:772): small (ubatch x hidden x 4 B each), not modelled.
(8) Multimodal towers (the mmproj GGUF, loaded by tools/mtmd/clip.cpp, not by the layer placement above): on a GPU by
    default -- ``mmproj_use_gpu = true`` (common/common.h:596), turned off only by ``--no-mmproj-offload`` or
    ``-mmdev none`` (common/arg.cpp:2600-2617), passed to mtmd as ``use_gpu`` (tools/server/server-context.cpp:1029,
    tools/mtmd/mtmd-cli.cpp:157). Without ``-mmdev`` (or ``--device``, common/arg.cpp:889-893) clip.cpp:188-198 opens
    ``ggml_backend_init_by_type(GPU)``, which is the first GPU device registered
    (ggml/src/ggml-backend-reg.cpp:355-363, 374-380): GPU0, whatever ``-ngl`` and ``--tensor-split`` say; the
    towers' weights and clip's compute buffer live there. With no GPU (device cpu) they are in host memory.
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ...errors import InputError

CPU = -1  # device index of the host in a placement


_F32 = struct.Struct("f")


def f32(x: float) -> float:
    """``x`` rounded to IEEE 32-bit float, as llama.cpp's ``float`` split arithmetic holds it."""
    return float(_F32.unpack(_F32.pack(x))[0])


def split_points(shares: Sequence[float]) -> list[float]:
    """Rule (1): cumulative, normalised split points of ``shares`` (tensor-split proportions or free bytes)."""
    if not shares or any(s < 0 or not math.isfinite(s) for s in shares):
        raise InputError(f"tensor split must be non-negative numbers, got {list(shares)}")
    total = 0.0
    cum = []
    for s in shares:
        total = f32(total + f32(s))
        cum.append(total)
    if total <= 0:
        raise InputError("tensor split must give at least one device a share above 0")
    return [f32(c / total) for c in cum]


def layer_devices(n_layer: int, n_gpu_layers: int, points: Sequence[float]) -> tuple[int, ...]:
    """Rule (2): the device of layers 0..n_layer (index n_layer = the output layer); CPU (-1) for host layers."""
    return _layer_devices(n_layer, n_gpu_layers, tuple(points))


@lru_cache(maxsize=1024)
def _layer_devices(n_layer: int, n_gpu_layers: int, points: tuple[float, ...]) -> tuple[int, ...]:
    i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1) if points else 0
    if len(points) == 1:  # one GPU: min(upper_bound(...), 0) is GPU 0 for every offloaded layer
        return tuple(CPU if il < i_gpu_start or il - i_gpu_start >= act else 0 for il in range(n_layer + 1))
    out = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(CPU)
        else:
            out.append(min(bisect_right(points, f32((il - i_gpu_start) / act)), len(points) - 1))
    return tuple(out)


def counts_to_layers(devices: Sequence[int], n_gpus: int) -> list[int]:
    """Layers (output layer included) each GPU holds in a placement."""
    return [sum(1 for d in devices if d == g) for g in range(n_gpus)]


def per_layer_kv(total: int, per_layer: Sequence[float]) -> list[int]:
    """Integer KV bytes per layer from fractional per-layer bytes, rounded cumulatively so they sum to ``total``."""
    out, cum, prev = [], 0.0, 0
    for b in per_layer:
        cum += b
        now = min(math.ceil(cum), total)
        out.append(now - prev)
        prev = now
    if out:
        out[-1] += total - prev
    return out


@dataclass
class DevicePart:
    """What one device (a GPU, or the host) holds [bytes]."""

    name: str
    layers: list[int] = field(default_factory=list)  # repeating layers; the output layer is flagged separately
    output: bool = False
    weights: int = 0
    kv: int = 0
    compute: int = 0
    experts: int = 0  # of ``weights``: routed-expert tensors (a decode step reads only the routed share)

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute

    def layer_range(self) -> str:
        """What the device holds, in llama.cpp's numbering: ``layers 0-15``, ``+ output`` for the output layer (final
        norm and output matrix, rule (2)); a GPU given only the output layer (``-ngl 1``: it goes first) says so."""
        if not self.layers:
            return "output layer only" if self.output else "no layers"
        lo, hi = min(self.layers), max(self.layers)
        text = f"layer {lo}" if lo == hi else f"layers {lo}-{hi}"
        return text + (" + output" if self.output else "")


@dataclass(frozen=True)
class LayerCosts:
    """Per-layer inputs of a placement [bytes]: weights, their routed-expert and 2-D matrix parts, KV."""

    weights: Sequence[int]
    experts: Sequence[int]
    matrices: Sequence[int]
    kv: Sequence[int]
    output_matrix: int  # lm_head (or, tied, the device copy of token_embd)
    output_other: int  # final norm
    embedding: int  # token embeddings (always host)
    other_host: int  # anything outside the layers, embedding, output and mmproj, kept on the host
    tied: bool
    layer_compute: int  # one GPU's compute buffer for its layers (f32 graph of one ubatch)
    output_compute: int  # the output device's compute buffer (the layers' graph or the ubatch's logits, larger)
    per_layer_device: int = 0  # rule (3b): rope_freqs / rope_factors, one copy on each device holding layers
    mmproj: int = 0  # rule (8): the multimodal towers (mmproj GGUF), on the first GPU (the host without one)


def place(costs: LayerCosts, n_gpus: int, n_gpu_layers: int, points: Sequence[float], *,
          split_mode: str = "layer", row_shares: Sequence[float] = (), n_cpu_moe: int = 0) -> list[DevicePart]:
    """GPUs 0..n_gpus-1 then the host: what each holds under rules (1)-(7).

    Weights and KV are conserved: summed over the parts they equal the model's (plus the device copy of a tied
    output matrix and one copy of the rule (3b) tables per further device holding layers); compute buffers are per
    device.
    """
    n = len(costs.weights)
    devs = layer_devices(n, n_gpu_layers, points) if n_gpus else (CPU,) * (n + 1)
    parts = [DevicePart(f"GPU{g}") for g in range(n_gpus)] + [DevicePart("host")]
    host = parts[-1]
    host.weights += costs.embedding + costs.other_host
    parts[0].weights += costs.mmproj  # rule (8): GPU0, or the host when no GPU is used
    row = split_mode == "row" and n_gpus > 1
    shares = [float(s) for s in row_shares] if row_shares else [1.0] * n_gpus
    share_sum = sum(shares)

    def spread(nbytes: int) -> None:
        """Rule (5): a row-split matrix over the GPUs by the tensor-split shares (last one takes the rounding)."""
        left = nbytes
        for g in range(n_gpus - 1):
            b = int(nbytes * shares[g] / share_sum)
            parts[g].weights += b
            left -= b
        parts[n_gpus - 1].weights += left

    # per part (index -1 = the host, as CPU is): its layers and the integer sums the layer loop adds to it
    held: list[list[int]] = [[] for _ in parts]
    weights, experts, kv = [0] * len(parts), [0] * len(parts), [0] * len(parts)
    layer_w, layer_e, layer_m, layer_kv = costs.weights, costs.experts, costs.matrices, costs.kv
    for il in range(n):
        d = devs[il]
        held[d].append(il)
        w, e = layer_w[il], layer_e[il]
        if il < n_cpu_moe and e:
            weights[-1] += e
            experts[-1] += e
            w -= e
        else:
            experts[d] += e
        if row and d != CPU and layer_m[il]:
            spread(layer_m[il])
            w -= layer_m[il]
        weights[d] += w
        kv[d] += layer_kv[il]
    for part, layers, w, e, k in zip(parts, held, weights, experts, kv, strict=True):
        part.layers += layers
        part.weights += w + (costs.per_layer_device if layers else 0)
        part.experts += e
        part.kv += k
    d_out = devs[n]
    out = parts[d_out]
    out.output = True
    if d_out != CPU and row:
        spread(costs.output_matrix)
        out.weights += costs.output_other
    else:
        out.weights += costs.output_matrix + costs.output_other
    if d_out == CPU and costs.tied:
        out.weights -= costs.output_matrix  # the host reads the one token_embd it already holds
    for p in parts:
        if p.layers or p.output:
            p.compute = costs.output_compute if p.output else costs.layer_compute
    if row:  # every GPU computes its rows of every GPU layer
        gpu_layers = any(d != CPU for d in devs[:n])
        for g in range(n_gpus):
            if gpu_layers and not parts[g].compute:
                parts[g].compute = costs.layer_compute
    return parts

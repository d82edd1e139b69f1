"""llama.cpp's CUDA flash-attention kernels in a decode step: which kernel ggml-cuda runs for a given shape, and the
time its K/V stream takes.

Units: cells [tokens of cache], bytes [B], bandwidth [B/s], time [s]. Pure functions; the fitted share of the stream
rate lives in ``estimate/efficiency.py`` (LLAMACPP_FA_STREAM_SHARE).

Kernel choice (ggml-org/ggml src/ggml-cuda/fattn.cu @7b6abb2, the 2025-11-04 sync of llama.cpp's
ggml/src/ggml-cuda/fattn.cu, ``ggml_cuda_get_best_fattn_kernel`` L199-326). The shapes are those of
src/llama-graph.cpp build_attn_mha: Q is [head_dim, tokens per stream, n_head, n_stream], K and V
[head_dim, n_kv, n_head_kv, n_stream]; llama.cpp keeps one KV stream per sequence unless ``--kv-unified``
(PR #14363), so a decode step of b sequences has Q->ne[1] = 1 and Q->ne[3] = b, and with flash attention n_kv is
padded to FATTN_KQ_STRIDE = 256 cells (fattn-common.cuh L9)::

    gqa_opt  = (n_head / n_head_kv) even  and a mask  and no ALiBi  and n_kv % 256 == 0              (L219)
    vec_ok   = head_dim <= 256  and head_dim % 64 == 0  and n_kv % 256 == 0                           (L275)
    Turing+ tensor cores, n_kv % 256 == 0, head_dim != 40:                                             (L278)
        F16 K/V:        vec  if cc >= Ada and Q->ne[1] == 1 and Q->ne[3] == 1
                             and not (gqa ratio > 4 and n_kv >= 8192)                                  (L281)
        quantized K/V:  vec  if Q->ne[1] <= 2 (Ada and newer) or Q->ne[1] == 1 (Turing, Ampere)       (L285-293)
        either:         vec  if not gqa_opt and Q->ne[1] == 1                                          (L295)
        otherwise       mma_f16                                                                         (L300)
    Volta (WMMA):       vec  if vec_ok and Q->ne[1] <= 2, else wmma_f16                                 (L304-308)
    no tensor cores:    vec  for one column without gqa_opt (F16) or <= 2 columns (quantized), else tile (L312-325)

So a step of several sequences (one stream each) leaves the vector kernel on Ada and newer whenever the GQA
ratio is even: Gemma 3 (8 / 4 heads), Qwen3 (32 / 4), gpt-oss (64 / 8) run the tensor-core kernel, Qwen2.5-7B
(28 / 4 = 7) keeps the vector kernel.

K/V stream of a decode step (eq. F1). With one stream (Q->ne[3] == 1, fewer than 1024 queries) no KV_max scan runs
(fattn-common.cuh L879) and the kernel reads all n_kv cells of the view (fattn-vec.cuh L239: k_VKQ_max = ne11, the
mask only zeroes the padded cells' weights); n_kv is the cells in use padded to 256 (llama-kv-cache.cpp get_n_kv:
256 with flash attention in every build, llama.cpp PR #7257 of 2024-05 cut it to 32 only without; since PR #16812
of 2025-10 256 either way). With several streams
every kernel reads each sequence's K and V cells up to the last 256-cell tile
that its mask leaves open (fattn-common.cuh L879-891: flash_attn_mask_to_KV_max when Q->ne[3] > 1), one block per
(query tile, KV-head group, sequence) and, when the work does not fill the SMs, several blocks per KV range whose
partial results a second kernel combines (stream-k fixup for mma_f16, L991-999; flash_attn_combine_results for the
others, L1000-1008). Those kernels interleave the tile loads with the QK^T, softmax and V products of each tile
(the mma kernel with head size 256 loads synchronously, nstages_target = 1, fattn-mma-f16.cuh L235), so they do not
keep the memory as busy as the mat-vec weight stream does. With eta the share of the mat-vec stream's rate that the
flash-attention kernels reach::

    t_kv = sum_s KV(c_s) / (B e_m eta)                                                                  (F1)

eta is fitted (estimate/efficiency.py LLAMACPP_FA_STREAM_SHARE) on the step's growth with the prompt depth at a fixed
number of sequences, where the weights, the routings and every per-step constant cancel and only the K/V stream
changes. It applies to one sequence as well: the vector kernel's work per cell and query head does not depend on
the number of streams (fattn-vec.cuh, one block per (query head, sequence) x parallel_blocks, L95-102; blocks_num.z =
n_head x n_stream, fattn-common.cuh L947), and what keeps it below the weight stream's rate is per cell, not per
stream: a KQ dot product per cell and query head closed by a warp reduction (L262-263), a running max across the
warp (L284-286), an exp per cell (L290), the scores through shared memory (L292, L321) and the V products
(L314-335), all between the loads of one 128-cell iteration (L243) of a 128-thread block (L4-11, L20), where a
mat-vec weight kernel reduces once per row of thousands of weights. A KV head's cells are streamed by each of its
n_head / n_head_kv query-head blocks (L101-102).

What else a batched step's attention costs per sequence, read from the same launch code and left out because it is
small against the ~10 us per sequence and layer the rows showed before eq. F1 (DGX Spark, 273 GB/s):

- launches: one flash-attention kernel per layer for all streams (Q->ne[3] = b in one grid), plus at most one
  KV_max scan (L890) and one fixup or combine kernel (L996, L1005): per layer, not per sequence;
- the KV_max scan reads ncols1 mask rows of 256 cells per stream and tile until the first open one (L585-607): one
  tile per stream when the streams are equally long, 0.5-4 KB per sequence and layer;
- the stream-k fixup (mma_f16 launches with stream_k, fattn-mma-f16.cuh L1473-1474; on Ada and newer always, L910;
  only when the tiles do not divide over the blocks, L992): partials of blocks_num.x = SMs x occupancy blocks of
  ncols x (2 x 2 + DV) floats (L916): about 0.4 MB per layer at 48 SMs, ncols 8, DV 256, whatever b;
- the combine of the vector kernel's parallel_blocks partials (vec launches without stream_k, fattn-vec.cuh L522;
  L949-951, L1000-1008): parallel_blocks x D floats and
  a max/sum pair per (sequence, head), written and read: 28 heads x 128 x 4 B x 2 = 29 KB x parallel_blocks per
  sequence and layer for Qwen2.5-7B, under 1 us at parallel_blocks <= 8.
"""

from __future__ import annotations

from ..errors import InputError

FATTN_KQ_STRIDE = 256  # fattn-common.cuh L9: KV cells per tile; llama.cpp pads n_kv to it with flash attention
VEC, MMA_F16, WMMA_F16, TILE = "vec", "mma_f16", "wmma_f16", "tile"
# ggml-cuda common.cuh L47-50: the compute capabilities the choice compares against
CC_VOLTA, CC_TURING, CC_ADA_LOVELACE = 700, 750, 890
# ``compute_capability`` is ggml's scale, major x 100 + minor x 10 (8.9 -> 890); a device's capability has one home,
# catalog/hardware.py Device.capability (major x 10 + minor: its sourced compute_capability, else
# ARCHITECTURE_CAPABILITY of its architecture), which the caller scales. Blackwell parts differ in capability (B200
# 10.0, B300 10.3, RTX 50 / RTX PRO 12.0, GB10 12.1), and the choice below only compares with Turing, Volta and Ada
# Lovelace, so all of them take the Ada branch: the same kernel (ggml-org/ggml@d99724f src/ggml-cuda/fattn.cu
# ggml_cuda_get_best_fattn_kernel L358 ff. still tests turing_mma_available and cc >= GGML_CUDA_CC_ADA_LOVELACE; its
# GGML_CUDA_CC_BLACKWELL = 1200 / GGML_CUDA_CC_DGX_SPARK = 1210, common.cuh L59-60, pick only the MLA 576/512
# kernel's column count for GLM-4.7-Flash's GQA ratio 20, fattn.cu L193-210, a tile shape, not a kernel).
_HEAD_SIZES = (40, 64, 80, 96, 112, 128, 256)  # L223-234 (576/512, DeepSeek MLA, needs gqa_opt and a ratio of 16)


def fattn_kernel(head_dim: int, n_head: int, n_head_kv: int, tokens_per_stream: int, streams: int, n_kv: int,
                 compute_capability: int, kv_quantized: bool = False, head_dim_v: int | None = None,
                 mask: bool = True, alibi: bool = False) -> str | None:
    """The flash-attention kernel ggml-cuda runs on an NVIDIA GPU of ``compute_capability`` (e.g. 890) for Q of
    ``tokens_per_stream`` x ``n_head`` heads in each of ``streams`` streams over ``n_kv`` cells of ``n_head_kv``
    K/V heads (fattn.cu ggml_cuda_get_best_fattn_kernel, see the module doc); None where no kernel supports the
    shape (llama.cpp then runs attention without flash attention)."""
    if min(head_dim, n_head, n_head_kv, tokens_per_stream, streams, n_kv, compute_capability) < 1:
        raise InputError("flash-attention shape and compute capability must be positive")
    if n_head % n_head_kv:
        raise InputError(f"n_head {n_head} is not a multiple of n_head_kv {n_head_kv}")
    dv = head_dim if head_dim_v is None else head_dim_v
    gqa = n_head // n_head_kv
    padded = n_kv % FATTN_KQ_STRIDE == 0
    gqa_opt = gqa % 2 == 0 and mask and not alibi and padded
    if head_dim == 576:
        if dv != 512 or not gqa_opt or gqa % 16:
            return None
    elif head_dim not in _HEAD_SIZES or dv != head_dim:
        return None
    vec_ok = head_dim <= 256 and head_dim % 64 == 0 and padded
    if compute_capability >= CC_TURING and padded and head_dim != 40:
        if vec_ok:
            if not kv_quantized:
                if (compute_capability >= CC_ADA_LOVELACE and tokens_per_stream == 1 and streams == 1
                        and not (gqa > 4 and n_kv >= 8192)):
                    return VEC
            elif tokens_per_stream <= (2 if compute_capability >= CC_ADA_LOVELACE else 1):
                return VEC
            if not gqa_opt and tokens_per_stream == 1:
                return VEC
        return MMA_F16
    if compute_capability >= CC_VOLTA and padded and head_dim not in (40, 576):
        return VEC if vec_ok and tokens_per_stream <= 2 else WMMA_F16
    if vec_ok:
        if not kv_quantized:
            if tokens_per_stream == 1 and not gqa_opt:
                return VEC
        elif tokens_per_stream <= 2:
            return VEC
    return TILE


def padded_kv_cells(cells: int) -> int:
    """n_kv of a flash-attention step: the cells in use rounded up to FATTN_KQ_STRIDE (llama.cpp's KV cache pads its
    view to 256 cells when flash attention is on, so that the kernels' n_kv % 256 == 0 tests hold)."""
    if cells < 0:
        raise InputError("cells must not be negative")
    return -(-max(cells, 1) // FATTN_KQ_STRIDE) * FATTN_KQ_STRIDE


def fattn_stream_seconds(kv_bytes: float, bandwidth: float, bandwidth_efficiency: float, share: float) -> float:
    """Eq. (F1): seconds the flash-attention kernels take to stream ``kv_bytes`` of K/V cells at ``share`` of the
    mat-vec stream's rate ``bandwidth`` x ``bandwidth_efficiency``."""
    if kv_bytes < 0:
        raise InputError("kv_bytes must not be negative")
    if bandwidth <= 0 or bandwidth_efficiency <= 0 or not 0 < share <= 1:
        raise InputError("bandwidth and its efficiency must be positive and the share in (0, 1]")
    return kv_bytes / (bandwidth * bandwidth_efficiency * share)

"""Training compute and wall-clock time.

FLOPs per trained token (forward + backward), for N parameters, L layers that attend to the sequence (every
layer of a transformer; a hybrid's attention layers only: Mamba-, MoE- and MLP-only layers run no attention core),
attention width d = heads x head_dim and sequence length s::

    no recomputation:    F = 6 N + 12 L d s                                             (1)
    full recomputation:  F = 8 N + 16 L d s                                             (2)

(1): 2N forward + 4N backward (Kaplan et al. 2020, arXiv 2001.08361, section 2.1, C ~ 6N per token); the
attention term 12 L d s is PaLM's (Chowdhery et al. 2022, arXiv 2204.02311, Appendix B, "6N + 12LHQT").
(2): full activation checkpointing runs the forward pass twice, adding 2N + 4 L d s (Narayanan et al. 2021,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", arXiv 2104.04473, eq. 3:
F = 96 B s l h^2 (1 + s / 6h + V / 16 l h) per iteration, which is 8N + 16 l h s + 6 h V per token with
N = 12 l h^2; the 6hV logit term is the lm_head's share of 6N counted separately there).

Wall clock at model-FLOPs utilisation u on n devices of dense peak R [FLOP/s] (Chowdhery et al. 2022,
section 4.1, MFU)::

    t = T F / (n R u)          device-hours = n t / 3600                               (3)

MFU counts the FLOPs of (1); hardware-FLOPs utilisation counts those actually executed, (2) with recomputation.
Megatron's "% of peak" uses (2)-style counting, so it is an HFU.

Adapters (LoRA, DoRA, QLoRA) on a frozen base of N parameters with N_a trained adapter parameters::

    no recomputation:    F = 4 N + 6 N_a + 12 L d s                                       (4)
    full recomputation:  F = 6 N + 6 N_a + 16 L d s                                       (5)

The backward pass of a linear layer is two GEMMs of the forward's size: the gradient of its input (2N per token
over the model) and the gradient of its weight (2N); a frozen weight needs only the first (Kaplan et al. 2020
section 2.1 splits the 6N the same way; Hu et al. 2021, arXiv 2106.09685, section 4.2: LoRA does not compute
the gradients of the frozen weights). The adapters train fully (6 N_a) and attention has no weights, so its
term is unchanged. LoRA on fused MoE experts (PEFT's ParamWrapper, formulas/lora.py eq. (3)) trains through
W + delta W, so the routed experts' weight gradients are computed: N_e = (k/E) x the adapted expert stacks' elements
per token, and the adapters' own FLOPs D are per micro-step of T tokens, not per token::

    F = 4 N + 2 N_e + 6 N_a + 12 L d s,   N_a = the other adapters,   + D / T per token          (4')

A run's total FLOPs and the FLOPs per token it states count the step term spread over its tokens, F + D / T with
T = micro_batch x seq_len (estimate/duration.py ``TrainingFlops.effective_per_token``), as eq. (6)'s T F + D does.

QLoRA adds the dequantization of the 4-bit base in every forward and backward, which is
memory-bound work this FLOP count leaves out.

Step time of data-parallel training on n devices (per micro-step of T tokens per device, F FLOPs per token, peak
R, achieved utilisation u of the executed FLOPs)::

    t_compute = T F / (R u)                                                             (6)

Data-parallel communication per device, ring collectives (Patarasuk & Yuan 2009, J. Parallel Distrib. Comput.
69(2): a ring all-gather or reduce-scatter of S bytes moves (n-1)/n S per device, an all-reduce twice that;
formulas/network.py eqs. (1)-(2), the byte counts every collective below takes). W = bytes of the full weights,
G = bytes of the trained parameters' gradients. FULL_SHARD all-gathers each layer's parameters in the forward pass,
frees them (reshard_after_forward) and all-gathers them again for the backward pass, then reduce-scatters the
gradients (Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277, section 3.2; Rajbhandari et al. 2020, ZeRO, arXiv
1910.02054, section 7.2.2: 3x the parameter volume, 1.5x DDP's all-reduce). Over direct links (NVLink, PCIe
peer-to-peer) of per-direction bandwidth B each device moves its own bytes b: t = b / B. Devices without
peer-to-peer access stage every transfer through host memory, whose bandwidth B_host all n devices share:
t = n b / B_host.

By phase (PyTorch FSDP2, torch 2.13.0 ``distributed/fsdp/_fully_shard/_fsdp_param_group.py``: the all-gather
stream "allows overlapping next all-gather with current forward compute" (lines 87-89), the reduce-scatter stream
is a "separate execution 'thread' for post-backward" (lines 90-92), ``pre_backward`` prefetches the next unit's
all-gather in the backward (lines 576-585, ``_backward_prefetch`` lines 795-830), and the root's final callback
waits for the last reduce (``finalize_backward`` lines 763-767); FSDP1 and DeepSpeed ZeRO-3 prefetch the same
way, Zhao et al. 2023 section 3.3). A collective overlaps only the compute of its own phase; with U wrapped units
(U = the decoder layers), nothing hides the first unit's forward all-gather a_1 = c_f / U (no compute can start
before it), and the last unit's gradient reduction r_U (its share of c_b) waits for the last backward compute,
while in a communication-bound phase one unit's compute is the part the collectives cannot hide::

    t_micro = max(t_f + a_1, c_f + t_f / U) + max(t_b + r_U, c_b + t_b / U),                    (8')
    t_f = phi t_compute,  t_b = (1 - phi) t_compute

phi = forward FLOPs / executed FLOPs (1/3 for full training without recomputation); per device and micro-step, on
s = devices sharing the parameters (all n for FULL_SHARD / SHARD_GRAD_OP, the g devices of one machine for HYBRID),
bus bandwidth B_bus (formulas/network.py eq. (11): min(intra-machine link, machine network) when the ring spans
machines), W_b the weights all-gathered again in the backward (those of the units resharded after their forward;
W when every unit is, as DeepSpeed ZeRO-3 is timed) and, under FSDP, W, W_b and G the payloads of
estimate/training/gather_units.py ``fsdp_collective_volume`` (each unit in its all-gather dtype; FSDP keeps its
root unit gathered from forward to backward, formulas/fsdp2_units.py eq. (U5); G only the gradients autograd
produced, a LoRA step's adapters')::

    FULL_SHARD / ZeRO-3:   c_f = (s-1)/s W / B_bus,   c_b = (s-1)/s (W_b + G) / B_bus          (7c)
    SHARD_GRAD_OP:         c_f = (s-1)/s W / B_bus,   c_b = (s-1)/s G / B_bus
    HYBRID (HSDP):         FULL_SHARD within the machine (B_bus = B_intra), and each device all-reduces its
                           gradient shard over the r = n/g machines at its share of the network,
                           c_r = 2 (r-1)/r (G/g) / (B_node/g), concurrently with the intra-machine collectives
                           (FSDP2 runs "the HSDP all-reduces concurrently with all-gather/reduce-scatter since
                           collectives use different network resources", _fsdp_param_group.py lines 99-102;
                           ``_fsdp_collectives.py`` ``foreach_reduce`` lines 634-660): c_b = max(c_b, c_r)

Replicated gradients, by when they are reduced (per device, on all n devices)::

    DDP, every micro-step:        c_b = 2 (n-1)/n G / B_bus                                        (7d)
    DDP under no_sync:            c_s = 2 (n-1)/n G / B_bus   (the optimizer step's last micro-step only)
    ZeRO-2:                       c_b = 2 (n-1)/n G / B_bus,  c_u = (n-1)/n W_t / B_bus            (7e)
    ZeRO-1:                       c_s = 2 (n-1)/n G / B_bus,  c_u = (n-1)/n W_t / B_bus
    Megatron-Core DDP, all-reduce: c_s = 2 (n-1)/n G / B_bus                                       (7f)
    Megatron distributed optimizer: c_s = (n-1)/n G / B_bus,  c_u = (n-1)/n W_t / B_bus

(7d): torch DDP's reducer all-reduces gradient buckets from autograd hooks while the backward runs (overlapped,
as (8')), only when ``require_backward_grad_sync`` is set; ``no_sync`` clears it, so "gradients will be
accumulated on module variables, which will later be synchronized in the first forward-backward pass exiting the
context" (torch 2.13.0 ``nn/parallel/distributed.py`` lines 1659-1685, checked at lines 1754 and 1828). HF
accelerate's ``accumulate`` enters ``no_sync`` on every micro-step but the step's last (accelerate 1.15.0
``accelerator.py`` lines 1286-1297, ``no_sync`` lines 1166-1178), as the HF Trainer does (transformers 5.24.0
``trainer.py`` lines 1904-1915): 'optimizer-step' (c_s, once per step) is that default, 'micro-step' a plain loop
without ``no_sync``. (7e): DeepSpeed (deepspeedai/DeepSpeed @edaa722) reduces ZeRO-2's partitioned gradients in
every micro-step ("ZeRO stage >= 2 communicates during non gradient accumulation boundaries as well",
``runtime/engine.py`` lines 2902-2904; ``runtime/zero/stage_1_and_2.py`` ``reduce_ready_partitions_and_remove_grads``
lines 1767-1769 reduce when ``partition_gradients`` or at the boundary), ZeRO-1's only at the accumulation boundary
(engine.py lines 2906-2910); each reduction is an all-reduce of the bucket by default
(``use_multi_rank_bucket_allreduce`` = True, ``runtime/zero/config.py`` line 119; stage_1_and_2.py
``average_tensor`` lines 1441-1445), on the compute stream unless ``overlap_comm`` (default off below stage 3,
config.py lines 383-386; stage_1_and_2.py lines 1350-1365), so it adds to the compute; after the optimizer update
every rank all-gathers the updated 16-bit weights W_t of the trained parameters (stage_1_and_2.py lines 2394-2400),
before the next forward. With k micro-steps per optimizer step::

    t_step = (k - 1) t_micro + t_micro(c_b + c_s) + c_u                                          (8'')

(7f): Megatron-Core's DDP (NVIDIA/Megatron-LM @d98e8a64) reduces its one grad buffer, G = its elements x the
buffer's dtype bytes (fp32 under bf16 by default, fp16 under fp16: megatron/training/arguments.py lines 1204-1216,
megatron/core/distributed/param_and_grad_buffer.py line 924), once per optimizer step: the schedules run every
micro-batch but the last under ``no_sync`` (pipeline_parallel/schedules.py lines 814-830; the DDP's ``no_sync``,
distributed/distributed_data_parallel.py lines 589-600, clears each bucket group's ``is_last_microbatch``) and
``finalize_model_grads`` finishes the reduction after the last backward (schedules.py lines 863-870,
finalize_model_grads.py line 640). Without the distributed optimizer it is an all-reduce of the buffer, with it a
reduce-scatter, each in place on the buffer's bucket views (param_and_grad_buffer.py lines 708-733); the
distributed optimizer then all-gathers the updated parameters W_t in their own dtype into the param buffer
(param_and_grad_buffer.py lines 507-525, distrib_optimizer.py lines 3175-3185) before the next forward. With
Megatron-LM's default ``--overlap-grad-reduce`` False (arguments.py lines 3121-3122) the buffer is one bucket
(distributed_data_parallel.py lines 135-137) reduced synchronously, so c_s adds to the compute.

With ``--overlap-grad-reduce`` (Megatron-Bridge's recipes set it, with ``overlap_param_gather``: e.g.
NVIDIA-NeMo/Megatron-Bridge @f9b6319e src/megatron/bridge/recipes/llama/llama3.py lines 727-728) the buffer is cut
into buckets: its parameters are taken in backward order and a bucket closes once it holds at least b elements, the
rest forming the last one (param_and_grad_buffer.py lines 954-1002; the distributed optimizer's layout the same,
optimizer/distrib_optimizer.py lines 552-580, whose padding is left out), b = max(40 M, 1 M x the dp x cp ranks)
by default (megatron/training/training.py lines 2179-2194, distributed_data_parallel.py lines 133-134;
``bucket_size`` in distributed_data_parallel_config.py lines 48-51). Each bucket's collective is launched, on its
own, once the last micro-batch's backward has produced every gradient of the bucket (distributed_data_parallel.py
lines 553-586, param_and_grad_buffer.py ``register_grad_ready`` lines 863-885), and ``finalize_model_grads`` waits
for them all after the backward (``finish_grad_sync``, lines 787-832). The collectives run one after the other
beside the backward's compute: a flow shop of two machines. With bucket j (in the order reduced) ready when a share
r_j of the backward's T seconds has run and its collective taking c_j, the last one ends at
max_j (r_j T + sum_{i >= j} c_i), so the backward leaves exposed::

    x = max_j (r_j T + sum_{i >= j} c_i) - T                                                     (7g)

at least the last bucket's c_K (r_K = 1), and sum c - T when the collectives outrun the compute. The updated
parameters' all-gather under ``--overlap-param-gather`` is the mirror image: the optimizer step no longer gathers
(distrib_optimizer.py lines 3175-3185); the next step's first forward gathers the buckets in forward order, the
first dispatched by the first module's forward pre-hook and each next one as soon as the previous one is waited for
(the buckets chained last to first, distributed_data_parallel.py lines 369-380; the hooks lines 517-551,
param_and_grad_buffer.py ``finish_param_sync`` lines 538-573), bucket j
needed once a share 1 - r_j of the forward T_f has run. Read backwards in time that is (7g) again, with the same
buckets, the same r_j and T = T_f: the first bucket (the embedding's) is never hidden. Gradients are taken to be
produced at an even rate over the decoder layers' elements (the output layer's first, at r = 0; the embedding's last,
at r = 1); the dense and the expert buffers (reduced over their own groups) as one sequence.

Recomputation that is not a whole layer (``recompute_flops_per_token``): a layer checkpointed with torchtitan's
op-level policy re-runs every matmul the policy does not save (formulas/selective_checkpointing.py
``op_sac_recompute_flops``: every second mm, the MoE router and routed experts); with only every k-th layer
checkpointed (torchtitan ``selective_ac_option`` / ``ac_freq``) the share of checkpointed layers c / L scales the
recompute term of (2) or of the op-level policy. The checkpoint wraps the decoder layers (HF
``gradient_checkpointing_enable``, torchtune ``set_activation_checkpointing`` on ``TransformerSelfAttentionLayer``,
torchtitan ``apply_ac`` per transformer block), so only their matmuls run again, not the embedding or the
lm_head, and PyTorch's non-reentrant checkpoint stops before the layer's last matmul (M_l: 2 x the parameters of
every matmul of layer l but the last, formulas/selective_checkpointing.py ``full_recompute_flops``)::

    F = F_(1 or 4) + sum over checkpointed layers of M_l + 4 c d s    full recomputation of c layers  (2')
    F = F_(1 or 4) + sum over checkpointed layers of R_l     op-level selective, R_l per token       (2'')

QLoRA dequantizes each 4-bit weight to the compute dtype before each GEMM that uses it: bitsandbytes
``MatMul4Bit`` (bitsandbytes/autograd/_functions.py @012c660) runs ``F.dequantize_4bit(B, quant_state)`` in
``forward`` and again in ``backward`` for grad_A; torchao's ``LinearNF4`` (torchao/dtypes/nf4tensor.py, used by
torchtune's QLoRA) does ``weight.to(input.dtype)`` in forward and ``weight.to(grad_output.dtype)`` in backward.
Each dequantization reads the 4-bit codes (0.5 B/weight), the block scales and writes a bf16 copy (2 B/weight);
with double quantization (bitsandbytes ``compress_statistics``, block 64) the uint8 absmax is first dequantized
to fp32 (``dequantize_blockwise``: 1 B read + 4 B written per 64 weights) and read again (4 B per 64)::

    beta = 0.5 + 2 + (1 + 4 + 4) / 64 = 2.640625 B per weight
    t_dq = p N_q beta / B_mem,   p = 2 + c / L passes (forward, backward, recomputed forward)         (9)

a memory-bound kernel; B_mem is the bandwidth it streams at: the caller's, the datasheet bandwidth times the share
every memory-bound kernel of a training step reaches (estimate/efficiency.py MEMORY_BOUND_BANDWIDTH, the one rule
of formulas/elementwise_traffic.py eq. E7's kernels, which these are).

QLoRA on a GPTQ int4 checkpoint (PEFT LoRA over auto-gptq's ``QuantLinear``; Qwen's finetune.py loads it with
``GPTQConfig(bits=4, disable_exllama=True)``, so auto-gptq ``dynamically_import_QuantLinear`` takes
``qlinear_cuda_old`` for desc_act False): ``QuantLinear.forward`` (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py
@179776bd) runs its CUDA matrix-vector kernel only below ``kernel_switch_threshold`` = 128 rows; a training
micro-batch of more tokens takes the eager branch, which unpacks the whole weight with PyTorch ops before
``torch.matmul``: ``bitwise_right_shift`` of the expanded int32 ``qweight`` (0.5 B read, 4 B int32 written per
weight), ``.to(torch.int8)`` (4 + 1), ``bitwise_and(..., out=weight)`` (1 + 1), ``weight - zeros`` (1 + 1) and
``scales * (...)`` to fp16 (1 + 2; the per-group zeros and scales are negligible)::

    beta_gptq = 0.5 + 4 + 5 + 2 + 2 + 3 = 16.5 B per weight                                              (9b)

The dequantized fp16 weight is an ordinary autograd intermediate: ``torch.matmul`` saves it for the input gradient,
so the backward does not dequantize again: p = 1 + c / L passes (the forward and the recomputed forward).

The attention core as it executes (the 12 L d s of (1) is PaLM's MFU count: the full s x s score matrix, forward
and backward GEMMs, which llm-foundry's MFU also counts, scripts/train/benchmarking/README.md @4952183 lines 40-47,
``attn_flops_per_seq = n_layers * 2 * 2 * (d_model * (seq_len**2))`` times 3). A fused flash-attention kernel
(flash-attn, PyTorch SDPA's flash backend, llm-foundry's Triton kernel) runs something else: with a causal mask it
skips the tiles above the diagonal, half of the score matrix, and its backward recomputes the scores instead of
reading them, 2.5 x the forward's FLOPs (Dao-AILab/flash-attention ``benchmarks/benchmark_flash_attention.py``
@0469c72 lines 27-30: ``f = 4 * batch * seqlen**2 * nheads * headdim // (2 if causal else 1)``, bwd ``2.5 * f``,
fwd_bwd ``3.5 * f``; Dao 2023, arXiv 2307.08691, section 3.1.2; llm-foundry's README line 58: "our models use Flash
Attention, which requires including an extra recompute factor ... the attention multiplier would be 5 instead of
4"). Per token, with c of the L attention layers recomputed in full (their forward runs again)::

    flash:   A = a (3.5 L + c),   a = 4 d s / (2 if causal else 1)                                   (10)
    eager:   A = 12 L d s + 4 c d s   (materialised scores: every tile, the backward reads them: (1)/(2'))

A flash kernel that skips what a sliding window, a chunk or a packed document's boundary masks attends a = P / s keys
per query instead of s / 2 (formulas/attention_mask.py eqs. (M1)-(M4)): A = 4 d (3.5 L a + c a_c), a the mean over
the attention layers, a_c over the recomputed ones.

Two flash kernels compared pass by pass (a paper's forward and backward speed-ups r_f, r_b of kernel 1 over kernel 2,
and kernel 1's shares S_f, S_b of the peak in each pass): over eq. (10)'s forward + backward, whose backward runs 2.5 x
the forward's FLOPs, kernel 1 is faster by the ratio of the two passes' summed times::

    R = (r_f / S_f + 2.5 r_b / S_b) / (1 / S_f + 2.5 / S_b)                                      (10')

One kernel's two passes do not run at one rate: its share of the peak is S_f in the forward and S_b in the backward.
Timed at its forward + backward rate (what eq. (10)'s A over one speed does), a recomputed forward (c layers) is
charged the backward's slowness it does not have; at its own pass's rate its a c FLOPs cost what w_c a c FLOPs cost at
the forward + backward rate (3.5 a per layer in 1 / S_f + 2.5 / S_b units of a / peak)::

    A_t = a (3.5 L + w_c c),   w_c = 3.5 S_b / (S_b + 2.5 S_f)                                     (10'')

(w_c = 1 when S_f = S_b; the executed FLOPs stay (10)'s A.)

Optimizer states in CUDA unified memory (bitsandbytes paged optimizers: ``get_paged`` = ``cudaMallocManaged``,
functional.py @0.43.1 lines 183-191, pythonInterface.cpp lines 380-387) are touched once per optimizer step, each
parameter's in the same order: ``Optimizer8bit.step`` prefetches a parameter's states to the device
(``cudaMemPrefetchAsync`` on stream 0, ``prefetch_state``), updates it and synchronizes before the next one
(optim/optimizer.py @0.43.1 lines 278-292), so the paging is not overlapped with compute. The driver evicts the
states' 2 MiB root chunks in the order they were brought to the device (NVIDIA open-gpu-kernel-modules
kernel-open/nvidia-uvm/uvm_pmm_gpu.c, header: the LRU list ``root_chunks.va_block_used``, a chunk moved to its
tail when a VA block allocates it). A sweep in one order over S_paged bytes that do not fit the F bytes the
device leaves free therefore evicts every chunk before its next use: all S_paged move in, and out again, each step;
states that fit stay resident after the first step and move nothing::

    D_page = 0 if S_paged <= F, else 2 S_paged;   t_page = D_page / B_pcie                           (12)

The optimizer update t_opt and the gradient accumulation t_acc of each micro-step after the first are
memory-bound and token-independent (formulas/optimizer_step.py). Tokens per second over a step of k micro-steps:
n k T / (t_step + t_page + t_opt + (k - 1) t_acc).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

from ..errors import InputError
from ..specs.training import GRAD_SYNC
from ..suggest import unknown_choice
from .network import (
    all_gather_bytes,
    allreduce_bytes,
    device_share_of_node_bandwidth,
    reduce_scatter_bytes,
    ring_bus_bandwidth,
)

Recompute = Literal["none", "full"]
RECOMPUTE_MODES = ("none", "full")


def training_flops_per_token(params: float, num_layers: int, attn_width: int, seq_len: int,
                             recompute: str = "none") -> float:
    """Eqs. (1)-(2): training FLOPs per token [FLOP]."""
    if recompute not in RECOMPUTE_MODES:
        raise InputError(unknown_choice("recompute", recompute, RECOMPUTE_MODES))
    if params <= 0 or seq_len <= 0:
        raise InputError("params and seq_len must be positive")
    if recompute == "full":
        return 8.0 * params + 16.0 * num_layers * attn_width * seq_len
    return 6.0 * params + 12.0 * num_layers * attn_width * seq_len


def adapter_flops_per_token(params: float, adapter_params: float, num_layers: int, attn_width: int, seq_len: int,
                            recompute: str = "none", expert_grad_params: float = 0.0) -> float:
    """Eqs. (4)-(5): FLOPs per token [FLOP] when only ``adapter_params`` train over a frozen base of ``params``;
    ``expert_grad_params``: N_e of eq. (4'), base elements per token whose weight gradient is computed (+2 each)."""
    if recompute not in RECOMPUTE_MODES:
        raise InputError(unknown_choice("recompute", recompute, RECOMPUTE_MODES))
    if params <= 0 or seq_len <= 0 or adapter_params < 0:
        raise InputError("params and seq_len must be positive, adapter_params not negative")
    if recompute == "full":
        return 6.0 * params + 2.0 * expert_grad_params + 6.0 * adapter_params + 16.0 * num_layers * attn_width * seq_len
    return 4.0 * params + 2.0 * expert_grad_params + 6.0 * adapter_params + 12.0 * num_layers * attn_width * seq_len


NF4_DEQUANT_BYTES_PER_WEIGHT = 0.5 + 2.0 + (1.0 + 4.0 + 4.0) / 64.0  # eq. (9) beta
GPTQ_DEQUANT_BYTES_PER_WEIGHT = 0.5 + 4.0 + (4.0 + 1.0) + (1.0 + 1.0) + (1.0 + 1.0) + (1.0 + 2.0)  # eq. (9b)
# without double quantization the fp32 absmax is read directly: 4 B per 64 weights
NF4_NO_DQ_DEQUANT_BYTES_PER_WEIGHT = 0.5 + 2.0 + 4.0 / 64.0
DEQUANT_BYTES_PER_WEIGHT = {"nf4-dq": NF4_DEQUANT_BYTES_PER_WEIGHT, "nf4": NF4_NO_DQ_DEQUANT_BYTES_PER_WEIGHT,
                            "gptq-int4": GPTQ_DEQUANT_BYTES_PER_WEIGHT}


def dequantization_passes(base_format: str, recomputed_share: float) -> float:
    """Eqs. (9)/(9b): dequantizations of each quantized weight per micro-step, ``recomputed_share`` = c / L: NF4
    dequantizes in forward and again in backward (bitsandbytes MatMul4Bit, torchao LinearNF4); auto-gptq's
    dequantized weight is saved by torch.matmul, so only the forward and its recompute."""
    if base_format not in DEQUANT_BYTES_PER_WEIGHT:
        raise InputError(f"no dequantization rule for {base_format!r}")
    return (1.0 if base_format == "gptq-int4" else 2.0) + recomputed_share


ATTENTION_KERNELS = ("flash", "eager")


def attention_core_flops(num_layers: int, attn_width: int, seq_len: int, recomputed_layers: int = 0,
                         kernel: str = "flash", causal: bool = True, recompute_weight: float = 1.0,
                         attended: float | None = None, recomputed_attended: float | None = None) -> float:
    """Eq. (10): FLOPs per token the attention core executes over ``num_layers`` attention layers of width d =
    ``attn_width`` at sequence ``seq_len``, ``recomputed_layers`` of them running their forward again (full
    activation checkpointing); ``kernel`` 'flash' (tiles above a causal diagonal skipped, the backward recomputing
    the scores: flash-attn's own count) or 'eager' (materialised scores, PaLM's 12 L d s); ``recompute_weight``: w_c of
    eq. (10'') for a flash kernel's recomputed forwards (1: the executed FLOPs; below 1: the FLOPs that time them);
    ``attended`` / ``recomputed_attended``: a flash kernel's mean keys per query over the layers / the recomputed
    layers when it skips what a mask empties (formulas/attention_mask.py: a = P / s; None: s / 2 causal, s not).

    >>> attention_core_flops(1, 128, 1024)   # causal flash: 2 d s forward + 5 d s backward
    917504.0
    >>> attention_core_flops(1, 128, 1024, kernel="eager") == 12 * 128 * 1024
    True
    """
    if kernel not in ATTENTION_KERNELS:
        raise InputError(unknown_choice("attention kernel", kernel, ATTENTION_KERNELS))
    if num_layers < 0 or recomputed_layers < 0 or attn_width < 0 or seq_len <= 0:
        raise InputError("layer counts and widths must not be negative, seq_len positive")
    d, s = float(attn_width), float(seq_len)
    if kernel == "eager":
        return 12.0 * num_layers * d * s + 4.0 * recomputed_layers * d * s
    full = s / (2.0 if causal else 1.0)
    a = full if attended is None else attended
    a_c = a if recomputed_attended is None else recomputed_attended
    if a < 0 or a_c < 0:
        raise InputError("attended keys per query must not be negative")
    return 4.0 * d * (3.5 * num_layers * a + recompute_weight * recomputed_layers * a_c)


def fwd_bwd_speed_ratio(forward_ratio: float, backward_ratio: float, forward_share: float,
                        backward_share: float) -> float:
    """Eq. (10'): how much faster one flash kernel runs eq. (10)'s forward + backward (the backward 2.5 x the
    forward's FLOPs) than another that it beats by ``forward_ratio`` in the forward and ``backward_ratio`` in the
    backward, the faster kernel reaching ``forward_share`` / ``backward_share`` of the peak in each pass.

    >>> fwd_bwd_speed_ratio(2.0, 2.0, 0.7, 0.6)
    2.0
    """
    if min(forward_ratio, backward_ratio, forward_share, backward_share) <= 0:
        raise InputError("speed ratios and shares must be positive")
    t_fwd, t_bwd = 1.0 / forward_share, 2.5 / backward_share
    return (forward_ratio * t_fwd + backward_ratio * t_bwd) / (t_fwd + t_bwd)


def recompute_pass_weight(forward_share: float, backward_share: float) -> float:
    """Eq. (10''): w_c, what one recomputed forward FLOP of a flash kernel costs in FLOPs timed at its forward +
    backward rate, the kernel reaching ``forward_share`` / ``backward_share`` of the peak in each pass.

    >>> recompute_pass_weight(0.6, 0.6)
    1.0
    >>> round(recompute_pass_weight(0.73 / 1.4, 0.63 / 2.0), 4)   # llm-foundry's Triton kernel (Dao 2023 sec. 4.1)
    0.6812
    """
    if forward_share <= 0 or backward_share <= 0:
        raise InputError("pass shares must be positive")
    return 3.5 * backward_share / (backward_share + 2.5 * forward_share)


def partial_recompute_flops(matmul_flops: float, attn_width: int, seq_len: int, checkpointed_layers: int) -> float:
    """Eq. (2'): FLOPs per token a full recomputation of checkpointed decoder layers adds, their recomputed matmuls
    taking ``matmul_flops`` per token in all and ``checkpointed_layers`` (c) of them running an attention core (a
    hybrid's Mamba-, MoE- or MLP-only layers run none)."""
    if checkpointed_layers < 0 or matmul_flops < 0:
        raise InputError("checkpointed layers and matmul FLOPs must not be negative")
    return matmul_flops + 4.0 * checkpointed_layers * attn_width * seq_len


def dequantization_seconds(quantized_weights: float, passes: float, memory_bandwidth: float,
                           bytes_per_weight: float = NF4_DEQUANT_BYTES_PER_WEIGHT) -> float:
    """Eqs. (9)/(9b): seconds per micro-step that dequantizing ``quantized_weights`` weights takes over ``passes``
    GEMM passes at ``memory_bandwidth`` [B/s], ``bytes_per_weight`` per pass (NF4 by default)."""
    if quantized_weights < 0 or passes < 0 or memory_bandwidth <= 0 or bytes_per_weight <= 0:
        raise InputError("quantized weights and passes must not be negative, memory bandwidth positive")
    return passes * quantized_weights * bytes_per_weight / memory_bandwidth


def megatron_flops_per_iteration(batch: int, seq_len: int, num_layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. 3 (with full recomputation), FLOPs per iteration of ``batch`` sequences."""
    h, s, n = float(hidden), float(seq_len), float(num_layers)
    return 96.0 * batch * s * n * h * h * (1.0 + s / (6.0 * h) + vocab / (16.0 * n * h))


def training_seconds(tokens: float, flops_per_token: float, devices: int, peak_flops: float, utilization: float) -> float:
    """Eq. (3): wall-clock seconds to train on ``tokens`` tokens."""
    if devices < 1:
        raise InputError(f"devices must be >= 1, got {devices}")
    if peak_flops <= 0 or not 0 < utilization <= 1:
        raise InputError(f"need peak_flops > 0 and utilization in (0, 1], got {peak_flops}, {utilization}")
    return tokens * flops_per_token / (devices * peak_flops * utilization)


def tokens_per_second(flops_per_token: float, devices: int, peak_flops: float, utilization: float) -> float:
    """Training throughput implied by eq. (3) [tokens/s]."""
    return devices * peak_flops * utilization / flops_per_token


def device_hours(seconds: float, devices: int) -> float:
    """Eq. (3): devices x hours."""
    return devices * seconds / 3600.0


def achieved_utilization(tokens_per_second_measured: float, flops_per_token: float, devices: int,
                         peak_flops: float) -> float:
    """The utilisation a measured throughput implies: tokens/s x F / (n R)."""
    return tokens_per_second_measured * flops_per_token / (devices * peak_flops)


def paged_step_bytes(paged_bytes: float, free_device_bytes: float) -> float:
    """Eq. (12): bytes of paged optimizer states [B] that cross the host link per optimizer step, given the states'
    bytes ``paged_bytes`` and the device memory the step's tensors leave free ``free_device_bytes`` [B]: none when
    the states fit (resident after the first step), else every byte in and out (eviction in arrival order under a
    sweep in one order: no chunk survives to its next use).

    >>> paged_step_bytes(4e9, 6e9)
    0.0
    >>> paged_step_bytes(16e9, 4e9)
    32000000000.0
    """
    if paged_bytes < 0:
        raise InputError("paged bytes must not be negative")
    return 0.0 if paged_bytes <= max(free_device_bytes, 0.0) else 2.0 * float(paged_bytes)


def step_tokens_per_second(devices: int, tokens_per_micro: float, micro_steps: int, micro_steps_seconds: float,
                           paging_s: float = 0.0, per_step_s: float = 0.0) -> float:
    """Tokens per second over one optimizer step of ``micro_steps`` micro-steps that take ``micro_steps_seconds``
    together (eq. (8''), collectives included), the paging term and the token-independent work of each optimizer
    step (``per_step_s``: the optimizer update and gradient accumulation, formulas/optimizer_step.py)."""
    if devices < 1 or micro_steps < 1 or tokens_per_micro <= 0:
        raise InputError("devices, micro_steps must be >= 1 and tokens_per_micro positive")
    if per_step_s < 0:
        raise InputError("per-step seconds must not be negative")
    step = micro_steps_seconds + paging_s + per_step_s
    if step <= 0:
        raise InputError("step time must be positive")
    return devices * tokens_per_micro * micro_steps / step


SHARDING_MODES = ("full", "hybrid", "grad_op", "ddp", "zero1", "zero2", "megatron-ddp", "megatron-distopt")


# Megatron-Core's default bucket size (eq. (7g)): max(40 M, 1 M x the dp x cp ranks) elements (NVIDIA/Megatron-LM
# @d98e8a64 megatron/training/training.py lines 2179-2194, megatron/core/distributed/distributed_data_parallel.py
# lines 133-134)
MEGATRON_BUCKET_MIN_ELEMENTS = 40_000_000
MEGATRON_BUCKET_ELEMENTS_PER_RANK = 1_000_000


def megatron_bucket_elements(dp_cp_ranks: int) -> int:
    """Eq. (7g): Megatron-Core's default bucket size [elements] for a data-parallel x context-parallel group of
    ``dp_cp_ranks`` ranks (larger groups get larger buckets, to keep each ring's chunks bandwidth-bound).

    >>> megatron_bucket_elements(8), megatron_bucket_elements(64)
    (40000000, 64000000)
    """
    if dp_cp_ranks < 1:
        raise InputError(f"dp x cp ranks must be >= 1, got {dp_cp_ranks}")
    return max(MEGATRON_BUCKET_MIN_ELEMENTS, MEGATRON_BUCKET_ELEMENTS_PER_RANK * dp_cp_ranks)


class Buckets(NamedTuple):
    """Eq. (7g)'s buckets of one device's grad buffer, in the order they are reduced, as runs of equal buckets (the
    decoder layers' full buckets: one run, their ready shares evenly spaced)."""

    shares: tuple[float, ...]  # each run's buckets' share of the buffer's elements (each bucket's)
    ready: tuple[float, ...]  # r_j of the run's first bucket: the share of the span T run when it is ready
    counts: tuple[int, ...]  # buckets in the run
    steps: tuple[float, ...]  # r_(j+1) - r_j inside the run
    span: float = 1.0  # T in micro-batch backwards of the device: ((v - 1) g + 1) / v over v chunks g apart

    def expanded(self) -> tuple[list[float], list[float]]:
        """(each bucket's share, each bucket's r_j), bucket by bucket."""
        shares: list[float] = []
        ready: list[float] = []
        for x, r, m, d in zip(self.shares, self.ready, self.counts, self.steps, strict=True):
            shares += [x] * m
            ready += [r + i * d for i in range(m)]
        return shares, ready


def megatron_buckets(layer_elements: float, bucket_elements: float | None, first: float = 0.0, last: float = 0.0,
                     chunks: int = 1, chunk_gap: float = 1.0) -> Buckets:
    """Eq. (7g): Megatron-Core's bucket rule on one device's buffer, its parameters in backward order: ``first`` (the
    output layer, one parameter, its gradient ready at r = 0), the decoder layers' ``layer_elements`` (many small
    parameters, their gradients produced at an even rate over the backward: a bucket closes at exactly
    ``bucket_elements`` inside them), then ``last`` (the embedding, one parameter, ready at r = 1). A bucket closes
    once it holds at least ``bucket_elements``; the rest is the last bucket; None: one bucket (overlap off, or a
    pipeline rank > 0). ``chunks``: the interleaved schedule's model chunks of the device, each its own DDP; those
    after the first are one bucket each (``disable_bucketing``, megatron/training/training.py lines 2504-2515) and
    finish their last backward first, ``chunk_gap`` chunk-backwards apart: the interleaved schedule runs the last
    group of p micro-batches chunk by chunk (pipeline_parallel/schedules.py ``get_schedule_table`` lines 989-1016,
    ``microbatch_group_size_per_vp_stage`` = p by default, model_parallel_config.py lines 567-568), so chunk j's last
    backward ends j p chunk-backwards before chunk 0's (gap p). The span T then holds (v - 1) g + 1 chunk-backwards,
    ``Buckets.span`` = ((v - 1) g + 1) / v micro-batch backwards; chunk j ready at ((v - 1 - j) g + 1) / ((v - 1) g + 1).

    >>> b = megatron_buckets(100.0, 40.0, last=30.0)   # 40 | 40 | 20 + the embedding's 30
    >>> shares, ready = b.expanded()
    >>> [round(x * 130) for x in shares], ready
    ([40, 40, 50], [0.4, 0.8, 1.0])
    >>> megatron_buckets(60.0, 40.0, first=50.0).expanded()[1]   # the output layer alone, then 40 | 20
    [0.0, 0.6666666666666666, 1.0]
    >>> megatron_buckets(90.0, None, last=10.0, chunks=3).expanded()  # chunks 2 and 1 whole, then chunk 0 + embedding
    ([0.3, 0.3, 0.4], [0.3333333333333333, 0.6666666666666666, 1.0])
    >>> c = megatron_buckets(90.0, None, chunks=3, chunk_gap=2.0)   # 5 chunk-backwards: chunk 2 ends at 1, 1 at 3, 0 at 5
    >>> c.expanded()[1], c.span
    ([0.2, 0.6, 1.0], 1.6666666666666667)
    """
    if layer_elements < 0 or first < 0 or last < 0 or chunks < 1 or chunk_gap < 1:
        raise InputError("elements must not be negative, chunks >= 1 and chunk_gap >= 1")
    if bucket_elements is not None and bucket_elements <= 0:
        raise InputError(f"bucket elements must be positive, got {bucket_elements}")
    total = layer_elements + first + last
    if total <= 0:
        raise InputError("a grad buffer needs elements")
    b = math.inf if bucket_elements is None else float(bucket_elements)
    per = layer_elements / chunks
    units = (chunks - 1) * chunk_gap + 1  # T in chunk-backwards
    sizes = [per] * (chunks - 1)
    ready = [((chunks - 1 - j) * chunk_gap + 1) / units for j in range(chunks - 1, 0, -1)]
    counts = [1] * (chunks - 1)
    steps = [0.0] * (chunks - 1)
    start = (units - 1) / units
    cur = first
    if cur >= b:
        sizes.append(cur)
        ready.append(start)
        counts.append(1)
        steps.append(0.0)
        cur = 0.0
    done = 0.0
    if per > 0 and per >= b - cur:  # the first bucket closed inside the layers, then a run of full ones
        done = b - cur
        m = int((per - done) // b)
        sizes += [b, b]
        ready += [start + (1.0 - start) * done / per, start + (1.0 - start) * (done + b) / per]
        counts += [1, m]
        steps += [0.0, (1.0 - start) * b / per]
        done += m * b
        cur = 0.0
    cur += per - done + last
    if cur > 0:
        sizes.append(cur)
        ready.append(1.0)
        counts.append(1)
        steps.append(0.0)
    keep = [i for i, m in enumerate(counts) if m]
    return Buckets(tuple(sizes[i] / total for i in keep), tuple(ready[i] for i in keep),
                   tuple(counts[i] for i in keep), tuple(steps[i] for i in keep), units / chunks)


def overlapped_collective_seconds(seconds: Sequence[float], ready: Sequence[float], compute_seconds: float) -> float:
    """Eq. (7g): what of the bucket collectives ``seconds`` (in the order they run) ``compute_seconds`` of compute
    does not hide, bucket j launched once a share ``ready[j]`` of the compute has run [s]: x = max_j (r_j T +
    sum_{i >= j} c_i) - T. For the all-gather under ``overlap_param_gather``: the reduction's buckets and shares, T the
    first forward.

    >>> overlapped_collective_seconds([4.0, 4.0, 5.0], [0.4, 0.8, 1.0], 20.0)  # only the last bucket
    5.0
    >>> overlapped_collective_seconds([4.0, 4.0, 5.0], [0.4, 0.8, 1.0], 10.0)  # 13 s of collectives, 10 s of compute
    7.0
    """
    if len(seconds) != len(ready) or not seconds:
        raise InputError("one ready share per bucket, at least one bucket")
    if compute_seconds < 0 or any(c < 0 for c in seconds) or any(not 0.0 <= r <= 1.0 for r in ready):
        raise InputError("seconds must not be negative, ready shares in [0, 1]")
    end = tail = 0.0
    for c, r in zip(reversed(seconds), reversed(ready), strict=True):
        tail += c
        end = max(end, r * compute_seconds + tail)
    return max(0.0, end - compute_seconds)


class DataParallelComm(NamedTuple):
    """Eqs. (7c)-(7f): one device's data-parallel collectives [s, B]."""

    forward_seconds: float  # c_f: every micro-step, overlaps the forward compute
    backward_seconds: float  # c_b: every micro-step, overlaps the backward compute
    first_seconds: float  # a_1: the first unit's forward all-gather (before any compute)
    last_seconds: float  # r_U: the last unit's gradient reduction (after the last compute)
    bytes: float  # sent per device and micro-step (every micro-step's collectives)
    bus_bandwidth: float  # B_bus of the collectives over all s devices [B/s]
    nodes: int
    units: int
    sync_seconds: float = 0.0  # c_s: only in the backward of an optimizer step's last micro-step
    sync_last_seconds: float = 0.0  # its last unit's share (after the last compute)
    after_step_seconds: float = 0.0  # c_u: after the optimizer update, before the next forward (not hidden)
    step_bytes: float = 0.0  # sent per device once per optimizer step
    overlapped: bool = True  # False: the collectives run on the compute stream (DeepSpeed overlap_comm off)
    # Megatron --overlap-grad-reduce: c_s's buckets, hidden behind the last micro-step's backward (eq. (7g))
    buckets: Buckets | None = None
    gather_overlapped: bool = False  # --overlap-param-gather: c_u hidden behind the first forward by the same buckets

    def bytes_per_step(self, micro_steps: int) -> float:
        """Bytes one device sends per optimizer step of ``micro_steps`` micro-steps."""
        return micro_steps * self.bytes + self.step_bytes

    def seconds_per_step(self, micro_steps: int) -> float:
        """The collectives' own time per optimizer step (the traffic, hidden or not)."""
        return (micro_steps * (self.forward_seconds + self.backward_seconds) + self.sync_seconds
                + self.after_step_seconds)


def data_parallel_comm(devices: int, devices_per_node: int, weight_bytes: float, grad_bytes: float, mode: str,
                       units: int, intra_bandwidth: float, node_bandwidth: float | None = None,
                       host_staged: bool = False, grad_sync: str = "micro-step",
                       updated_bytes: float | None = None, regathered_bytes: float | None = None,
                       step_gathered_bytes: float = 0.0, buckets: Buckets | None = None,
                       gather_overlapped: bool = False, ring_bandwidth: float | None = None) -> DataParallelComm:
    """Eqs. (7c)-(7f) for ``devices`` in machines of ``devices_per_node``, W = ``weight_bytes``, G = ``grad_bytes``,
    sharding ``mode`` (SHARDING_MODES) over ``units`` wrapped units; ``intra_bandwidth`` per direction,
    ``node_bandwidth`` the machine's whole network (needed when the devices span machines); ``host_staged``: devices
    without peer-to-peer access, whose transfers all share the host path (t = n b / B_host, one machine);
    ``grad_sync`` (DDP only): the all-reduce once per 'optimizer-step' (``no_sync``) or every 'micro-step';
    ``updated_bytes``: the trained weights ZeRO-1/2 all-gather after the update (default G); ``regathered_bytes``:
    W_b, the weights FULL_SHARD / HYBRID all-gather again in the backward (default W: every unit resharded);
    ``step_gathered_bytes``: what FULL_SHARD all-gathers once after each optimizer update (DeepSpeed ZeRO-3's
    persistent parameters, formulas/deepspeed_zero.py), not hidden; ``buckets`` (Megatron modes): the buffer's
    buckets under ``--overlap-grad-reduce`` (eq. (7g)), and ``gather_overlapped`` their all-gather under
    ``--overlap-param-gather``; ``ring_bandwidth`` (DDP, ZeRO-1/2, Megatron modes): the bus bandwidth the gradient
    reduction and the updated weights' all-gather see where part of them runs on other groups than the ``devices``'
    ring (the routed experts' data-parallel groups: formulas/model_parallel_time.py eqs. (P5), (P5e); None: B_bus).

    >>> c = data_parallel_comm(16, 8, 100.0, 100.0, "full", 10, 4.0, 2.0)   # 2 machines: B_bus = min(4, 2)
    >>> round(c.forward_seconds, 4), round(c.backward_seconds, 4), round(c.first_seconds, 4), round(c.last_seconds, 4)
    (46.875, 93.75, 4.6875, 4.6875)
    >>> d = data_parallel_comm(8, 8, 100.0, 100.0, "ddp", 10, 7.0, grad_sync="optimizer-step")  # once per step
    >>> d.backward_seconds, d.sync_seconds, d.seconds_per_step(4)
    (0.0, 25.0, 25.0)
    >>> m = data_parallel_comm(8, 8, 0.0, 400.0, "megatron-distopt", 10, 7.0, updated_bytes=200.0)  # (7f)
    >>> m.sync_seconds, m.after_step_seconds, m.bytes_per_step(4), m.overlapped
    (50.0, 25.0, 525.0, False)
    """
    if mode not in SHARDING_MODES:
        raise InputError(unknown_choice("sharding", mode, SHARDING_MODES))
    if grad_sync not in GRAD_SYNC:
        raise InputError(unknown_choice("grad_sync", grad_sync, GRAD_SYNC))
    if (devices < 1 or devices_per_node < 1 or units < 1 or weight_bytes < 0 or grad_bytes < 0
            or (regathered_bytes or 0.0) < 0):
        raise InputError("devices, devices per node and units must be >= 1, byte counts not negative")
    n = devices
    g = min(n, devices_per_node)
    nodes = math.ceil(n / g)
    if host_staged:
        if nodes > 1:
            raise InputError("host-staged collectives (no peer-to-peer access) are modelled within one machine only")
        bus = intra_bandwidth / n
    elif mode == "hybrid":
        bus = ring_bus_bandwidth(intra_bandwidth, 1, None)
    else:
        bus = ring_bus_bandwidth(intra_bandwidth, nodes, node_bandwidth)
    if ring_bandwidth is not None and mode in ("megatron-ddp", "megatron-distopt", "ddp", "zero1", "zero2") \
            and not host_staged:
        bus = ring_bandwidth
    if mode.startswith("megatron-"):  # (7f): once per step, on the compute stream; (7g) with overlap_grad_reduce
        if mode == "megatron-ddp":
            ar = allreduce_bytes(grad_bytes, n)
            return DataParallelComm(0.0, 0.0, 0.0, 0.0, 0.0, bus, nodes, units, ar / bus, 0.0, 0.0, ar, False,
                                    buckets)
        rs = reduce_scatter_bytes(grad_bytes, n)
        ag = all_gather_bytes(grad_bytes if updated_bytes is None else updated_bytes, n)
        return DataParallelComm(0.0, 0.0, 0.0, 0.0, 0.0, bus, nodes, units, rs / bus, 0.0, ag / bus, rs + ag, False,
                                buckets, gather_overlapped and buckets is not None)
    if mode in ("ddp", "zero1", "zero2"):
        ar = allreduce_bytes(grad_bytes, n)
        if mode == "ddp":  # (7d): torch DDP's bucketed all-reduce, hooked into the backward (overlapped)
            if grad_sync == "micro-step":
                return DataParallelComm(0.0, ar / bus, 0.0, ar / bus / units, ar, bus, nodes, units)
            return DataParallelComm(0.0, 0.0, 0.0, 0.0, 0.0, bus, nodes, units, ar / bus, ar / bus / units, 0.0, ar)
        ag = all_gather_bytes(grad_bytes if updated_bytes is None else updated_bytes, n)
        if mode == "zero2":  # (7e): every micro-step's gradients reduced, the updated weights gathered once
            return DataParallelComm(0.0, ar / bus, 0.0, 0.0, ar, bus, nodes, units, 0.0, 0.0, ag / bus, ag, False)
        return DataParallelComm(0.0, 0.0, 0.0, 0.0, 0.0, bus, nodes, units, ar / bus, 0.0, ag / bus, ar + ag, False)
    s = g if mode == "hybrid" else n
    inter = 0.0
    f = all_gather_bytes(weight_bytes, s)
    last = reduce_scatter_bytes(grad_bytes, s)
    again = f if regathered_bytes is None else all_gather_bytes(regathered_bytes, s)
    b = (again if mode != "grad_op" else 0.0) + last
    c_f, c_b = f / bus, b / bus
    if mode == "hybrid" and nodes > 1:
        if node_bandwidth is None or node_bandwidth <= 0:
            raise InputError(f"{nodes} machines need their network bandwidth (per machine)")
        inter = allreduce_bytes(grad_bytes / s, nodes)
        c_b = max(c_b, inter / device_share_of_node_bandwidth(node_bandwidth, g))
    r_last = max(last / bus, inter / device_share_of_node_bandwidth(node_bandwidth, g)
                 if inter and node_bandwidth else 0.0) / units
    after = all_gather_bytes(step_gathered_bytes, s) if mode == "full" else 0.0
    return DataParallelComm(c_f, c_b, f / bus / units, r_last, f + b + inter, bus, nodes, units,
                            after_step_seconds=after / bus, step_bytes=after)


def micro_step_seconds(compute_seconds: float, forward_share: float, comm: DataParallelComm | None,
                       sync: bool = False) -> float:
    """Eq. (8'): one micro-step with the data-parallel collectives overlapping their own phase's compute; ``sync``:
    the optimizer step's last micro-step, which also runs the once-per-step reduction (``comm.sync_seconds``).
    Collectives that do not overlap (``comm.overlapped`` False) add to the compute, but for Megatron's bucketed
    reduction (``comm.buckets``), of which the backward hides what eq. (7g) says."""
    if not 0 < forward_share <= 1:
        raise InputError(f"forward share must be in (0, 1], got {forward_share}")
    if comm is None:
        return compute_seconds
    c_b = comm.backward_seconds + (comm.sync_seconds if sync else 0.0)
    last = max(comm.last_seconds, comm.sync_last_seconds if sync else 0.0)
    if not comm.overlapped:
        if sync and comm.buckets is not None:
            c_b = comm.backward_seconds + bucketed_seconds(comm.sync_seconds, comm.buckets,
                                                           (1 - forward_share) * compute_seconds)
        return compute_seconds + comm.forward_seconds + c_b
    fwd, bwd, u = forward_share * compute_seconds, (1 - forward_share) * compute_seconds, comm.units
    return (max(fwd + comm.first_seconds, comm.forward_seconds + fwd / u)
            + max(bwd + last, c_b + bwd / u))


def optimizer_step_seconds(compute_seconds: float, forward_share: float, comm: DataParallelComm | None,
                           micro_steps: int) -> float:
    """Eq. (8''): the ``micro_steps`` micro-steps of one optimizer step, the last one with the once-per-step
    reduction, then the collective after the update (ZeRO-1/2's weight all-gather; Megatron's under
    ``--overlap-param-gather``: what the first micro-step's forward does not hide, eq. (7g)) [s]."""
    if micro_steps < 1:
        raise InputError(f"micro_steps must be >= 1, got {micro_steps}")
    if comm is None:
        return micro_steps * compute_seconds
    after = comm.after_step_seconds
    if comm.gather_overlapped and comm.buckets is not None:
        after = bucketed_seconds(after, comm.buckets, forward_share * compute_seconds)
    return ((micro_steps - 1) * micro_step_seconds(compute_seconds, forward_share, comm)
            + micro_step_seconds(compute_seconds, forward_share, comm, sync=True) + after)


def bucketed_seconds(collective_seconds: float, buckets: Buckets, compute_seconds: float) -> float:
    """Eq. (7g) for a buffer's collective of ``collective_seconds`` in all, split as ``buckets`` split its elements,
    beside ``compute_seconds`` of compute (one micro-batch's backward, or forward; ``buckets.span`` of them): its
    exposed part [s]: eq. (7g) over the buckets, each run of equal buckets read at its two ends (the bound is linear
    in j along it).

    >>> bucketed_seconds(13.0, megatron_buckets(100.0, 40.0, last=30.0), 20.0)   # the last bucket's 5 s
    5.0
    """
    if collective_seconds < 0 or compute_seconds < 0:
        raise InputError("seconds must not be negative")
    t = compute_seconds * buckets.span
    end = tail = 0.0
    for x, r, m, d in zip(reversed(buckets.shares), reversed(buckets.ready), reversed(buckets.counts),
                          reversed(buckets.steps), strict=True):
        c = collective_seconds * x
        # r_j T + sum_{i >= j} c_i is linear along a run of equal, evenly spaced buckets: its ends bound it
        end = max(end, (r + (m - 1) * d) * t + tail + c, r * t + tail + m * c)
        tail += m * c
    return max(0.0, end - t)

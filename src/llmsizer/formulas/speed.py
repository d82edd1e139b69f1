"""Inference speed from FLOPs, bytes moved, and a device's peak rates: prefill (compute-bound), decode
(memory-bandwidth-bound), and the roofline that says which bound applies.

Units: FLOPs [FLOP], bytes [B], bandwidth [B/s], peak [FLOP/s], time [s]. Pure functions; no defaults that
change an answer (efficiencies are arguments; their named defaults live in ``estimate/efficiency.py``).

Equations
---------
Forward FLOPs of a decoder token (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
arXiv 2001.08361, Table 1: C_forward = 2N + 2 n_layer n_ctx d_attn for the QK^T product; the value product
doubles the context term, as in PaLM, Chowdhery et al. 2022, arXiv 2204.02311, Appendix B)::

    F_token(c) = 2 N_active + 4 L d_attn c                                              (1)

with N_active the parameters a token multiplies (MoE: shared + k routed experts), L layers, d_attn = heads x
head_dim and c the tokens attended. A causal prefill of T tokens after P cached tokens attends c = P + t for
token t = 1..T::

    F_prefill = 2 N_active T + 4 L d_attn (T P + T (T + 1) / 2)                         (2)

Eqs. (1) and (2) are the textbook count, the LM head on every token. A serving engine asks the head for the logits
of each sequence's last scheduled token only (vLLM v1 ``gpu_model_runner.py`` ``_prepare_inputs``
``logits_indices = query_start_loc[1:] - 1`` L2047 and ``sample_hidden_states = hidden_states[logits_indices]`` ->
``compute_logits`` L4069-4070, vllm 0.19.1; llama.cpp ``llama_batch_allocr::init`` "return the output only for the
last token" where the batch marks none, src/llama-batch.cpp L121-129 @21e9bbe2, and its examples set
``batch.logits[batch.n_tokens - 1] = true``; transformers ``generate`` sets ``logits_to_keep = 1``,
generation/utils.py L2952-2956, which ``LlamaForCausalLM.forward`` applies before ``lm_head``,
models/llama/modeling_llama.py L470, transformers 5.24.0). The embedding is a row lookup, not a product (N_mm: the
parameters a token multiplies, embedding excluded unless tied, where it is the head H). What runs::

    F_prefill = 2 (N_mm - H) T + 2 H + F_attn                                          (2')
    F_step = b (2 N_mm) + F_attn                                                        (1')

with F_attn the context term of (2) (``attention_flops``), over the T prompt tokens or the b one-token sequences
of a decode step (each of which is sampled, so each gets the head). llama.cpp also drops the non-output rows
before its last layer's feed-forward (``inp_out_ids``, ``ggml_get_rows`` at ``il == n_layer - 1``): 1 / L of the
feed-forward's T - 1 rows, not counted here.

Time of a phase on a device with peak rate R [FLOP/s] and bandwidth B [B/s], at efficiencies e_c, e_m (the
roofline model, Williams, Waterman & Patterson 2009, CACM 52(4), "Roofline: an insightful visual performance
model")::

    t = max(F / (R e_c), bytes / (B e_m))                                               (3)

Decode reads every weight once per step plus each sequence's KV cache (Pope et al. 2022, "Efficiently Scaling
Transformer Inference", arXiv 2211.05102, section 2)::

    bytes_step = W + b * KV(c)          F_step = b * F_token(c)                         (4)

for b sequences decoded together. Arithmetic intensity I = F / bytes; the ridge point R / B separates
memory-bound (I < R/B) from compute-bound phases. Taken at the rates eq. (3) times the phase with, the ridge is
(R e_c) / (B e_m), and I >= (R e_c) / (B e_m) exactly when F / (R e_c) >= bytes / (B e_m): the roofline's label and
the phase's bound are one comparison (a llama.cpp MoE prefill at its MMQ efficiency sits far right of the peak ridge
R / B, probe17 F1)::

    ridge = (R e_c) / (B e_m),   bound = compute if I >= ridge else memory             (3r)

MoE weights read per decode step: with k of E experts per token and uniform routing, b tokens touch a
fraction 1 - (1 - k/E)^b of a layer's experts (expected coverage of b independent draws)::

    W_step = W_dense + W_experts (1 - (1 - k/E)^b)                                      (5)

Tensor parallelism over n devices adds two all-reduces of the activations per layer (Shoeybi et al. 2019,
Megatron-LM, arXiv 1909.08053, section 3); a ring all-reduce of S bytes over n devices moves 2 (n-1)/n S bytes
per device (Patarasuk & Yuan 2009, J. Parallel Distrib. Comput. 69(2))::

    t_allreduce = alpha + 2 (n - 1) / n * S / B_link                                    (6)

vLLM's (and SGLang's copy of its) custom all-reduce has two kernels (vllm csrc/custom_all_reduce.cuh @036bb68
cross_device_reduce_1stage / _2stage): the two-stage one is a reduce-scatter then an all-gather, the ring's volume
(6); the one-stage one has every GPU read the whole message from each of its n - 1 peers::

    t_allreduce,1-stage = alpha + (n - 1) S / B_link                                    (6')

A ring all-gather of S bytes (every device ends with the whole S, each held S / n of it) moves (n - 1) / n S bytes
per device, half the all-reduce's volume (its reduce-scatter half skipped; Thakur, Rabenseifner & Gropp 2005,
section 3, the ring algorithm for allgather), with its own per-call latency alpha::

    t_allgather = alpha + (n - 1) / n * S / B_link                                       (6g)

B_link is the bandwidth the link reaches, not its line rate: on NVLink formulas/network.py eq. (12), NCCL's own
per-link figure (estimate/device.py ``nvlink_link_bandwidth``, the one rule training's collectives read too).

alpha is the latency of one all-reduce whatever its size (the alpha-beta, "Hockney", model of a message: Hockney
1994, "The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20(3), eq. 1;
for collectives Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), section 2). A decode step all-reduces b x hidden activations, a few KB to a few hundred KB, where
alpha dominates (a 16 KB message moves in 0.04 us over NVLink 3 at 300 GB/s; one all-reduce takes microseconds).
Which kernel runs, and so alpha, is the engine's choice (estimate/engines.py ``tp_allreduce``).

A decode step also has a fixed part that moves no weight bytes: per layer, kernel-launch gaps and kernels too
short to reach full bandwidth (llama.cpp at batch 1). With tau seconds per layer (an engine x backend constant)::

    t_step = max(F / (R e_c), bytes / (B e_m)) + t_comm + L tau                         (7)

A matrix product of P weights over n columns (tokens in one kernel launch) on a kernel path with peak rate R_k
(the tensor-core rate that path runs at) and efficiency e_k reaches e_k n / (n + n_h) of R_k: a tile-based GEMM
loads each weight tile once per column tile, so narrow products (few tokens, or an MoE expert that sees only
n k / E of them) amortise the weight loads and the launch over fewer FLOPs (a saturating, Michaelis-Menten form
with n_h the column count at half efficiency)::

    t_gemm = 2 P T / (R_k e_k) x (1 + n_h / n)                                          (9)

(T tokens in all; the path, R_k, e_k and n_h are the engine's, estimate/efficiency.py; on Hopper R_k is the rate its
warp-level mma.sync instructions can issue, half the wgmma peak of the catalog: efficiency.LLAMACPP_SYNC_MMA_SHARE.) Prefill computes the
logits of the last prompt token only (llama.cpp src/llama-batch.cpp: a batch without a logits array outputs
"only ... last output"), so the lm_head's 2 V d FLOPs count once, not T times.

Builds of llama.cpp before the June 2024 switch to int8 MMQ (ggml-org/ggml src/ggml-cuda.cu @8c44bc9, the 2024-05-14
sync, ``ggml_cuda_mul_mat`` L1903-1926: "when tensor cores are available, use them for large batch size") run a
quantized product of more than 32 columns on Volta and later through ``ggml_cuda_op_mul_mat_cublas`` (L1233-1268),
which first converts the whole weight matrix to F16 in a pool buffer (``to_fp16_cuda``: the quantized bytes read, 2
bytes per weight written) and then multiplies on the F16 path. One conversion per product, i.e. per ubatch; for a
prompt of T tokens in ubatches of u, with W_q the quantized bytes and P the weights of the products::

    t = t_gemm(F16 path) + ceil(T / u) (W_q + 2 P) / (B e_m)                              (9')

B e_m the engine's streaming rate (the conversion is a streaming kernel, like the decode step's mat-vec products).

From June 2024 the quantized products run as MMQ tiles of mmq_y = 128 weight rows x mmq_x columns (ggml-org/ggml
src/ggml-cuda/mmq.cuh @da232870, the 2025-11-04 sync: get_mmq_x_max_host L94-102, 128 with Turing MMA; get_mmq_y_host
L127-130; the launcher takes the smallest number of column tiles, ceil(n / mmq_x), L3650-3668), and each tile loads
its weight rows for itself, so a ubatch of n columns reads the weights ceil(n / 128) times. Read from DRAM at the
streaming rate, not hidden under the tile's arithmetic (kernels that overlap loads and MMA would hide part of it;
the efficiency e is fitted with this term), a dense quantized product of W_q bytes costs::

    t = 2 P T / (R_int8 e) + (sum over ubatches of ceil(n_u / 128)) W_q / (B e_m)       (9'')

The routed-expert products (mul_mat_id) run the same MMQ kernel over each expert's own columns (ggml-org/ggml
src/ggml-cuda/mmq.cu @da232870 ggml_cuda_mul_mat_q, L150-196: the tokens sorted by expert, ``expert_bounds`` per
expert, and ``ncols_max = ne12``, the ubatch's token count). The launcher sizes the column tile by that count
(mmq.cuh mul_mat_q_case L3650-3666: the narrowest mmq_x, a multiple of the granularity of 8, or 16 from 48 columns
(mmq_get_granularity_host L233-241), that needs the fewest tiles of at most 128 columns: 128 for ubatches of 512 or
2048 tokens, 80 for 129-160), and mul_mat_q runs, for each expert, ceil(m_e / mmq_x) tiles of its m_e columns
(L3263-3274: a tile at or past the expert's last column is skipped). A partly filled tile costs a full one's MMA work
(mul_mat_q_process_tile L3050-3100 loads and multiplies all mmq_x columns; tile_y_max_j only bounds the write-back)
and reads the expert's weight rows like any tile of eq. (9''). With k of E experts per token and uniform routing (as eq. 5), an expert's
columns in a ubatch of n tokens are m ~ Binomial(n, k / E), so per expert the prompt runs::

    N_tiles = sum over ubatches of E[ceil(m / w_n)],   C = sum over ubatches of w_n E[ceil(m / w_n)]
    t_experts = 2 P_experts C / (R_int8 e_id) + N_tiles W_experts / (B e_m)                  (9''')

(P_experts, W_experts all routed experts' weights and quantized bytes, C the tile columns executed per expert, w_n the
tile width, e_id the share the mul_mat_id tiles reach of the int8 rate on executed columns). Real routing is not
uniform; a skewed load fills more partial tiles than (9''') counts.

On Apple silicon llama.cpp's Metal backend runs every product of more than one column (ne11 > ne11_mm_min = 1) as
``kernel_mul_mm`` (ggml-org/ggml src/ggml-metal.m @8c44bc9 L1474-1505; src/ggml-metal.metal @8c44bc9 L6147-6262,
kernel_mul_mm_impl): a threadgroup of 128 threads computes a 64-row x 32-column output tile; for each 32-wide step
along the reduction every thread first dequantizes 16 weights of the 64 x 32 weight tile (``dequantize_func(x, il,
temp_a)``, one 4x4, into threadgroup memory as half), then each simdgroup issues 4 x 8 ``simdgroup_multiply_accumulate``
of 8 x 8 x 8, i.e. 64 x 32 x 32 / 128 = 512 FMAs per thread. The weights are dequantized again for every 32-column
tile (each threadgroup loads its own). Apple's GPUs before M5 have no separate matrix units: the simdgroup matrix
instructions and the dequantization issue on the same shader cores whose rate is the catalog's FP16 peak. Both are
counted in issue cycles of one SIMD (philipturner/metal-benchmarks README @936d911, M1-family instruction
throughputs): a simple ALU operation (FFMA16/32, FMUL, bitwise, select) takes 1 cycle, an integer <-> float
CONVERT 4 (the "integer and complex math pipeline"), a constant shift LSHIFT32 4, and one 8 x 8 x 8
``simdgroup_multiply_accumulate`` ~20.87 (MATMUL<F16x8x8>; 20.14 for F32), i.e. 1.30 cycles per FMA, not 1.
Float <-> half changes of a value ride on the operands of the ALU instruction that reads or writes it (G13 operands
name 16-bit register halves, dougallj/applegpu README disassembly) and cost nothing of their own. With c_q the issue
cycles the type's dequantize function spends per weight (estimate/efficiency.py LLAMACPP_METAL_DEQUANT_CYCLES,
counted from the source) and the kernel issuing both on one pipeline, the products take::

    t = 2 P T / (R e) x (1 + c_q n_w / (n_mm tau_mm)),   n_w = 16, n_mm = 32, tau_mm = 20.87          (9m)

independent of the column count once the 32-column tiles are full (a ubatch of 512 tokens: 16 of them); an F16
product's dequantize_f16 only copies (c_q = 0), so F16 keeps eq. (3) alone. c_q of a file type mixing GGML types
(Q4_K_M: Q4_K and Q6_K) is the weight-weighted mean over the products' tensors. Every quantized type pays one
int -> float CONVERT per weight (4 of its cycles), so the types differ less than their operation counts: Q4_0 (6.5
cycles) and Q8_0 (5) take 1.156 and 1.120 x their F16 time, a Q4_0 / Q8_0 prefill of 0.97 (0.93 when each operation
counted one cycle and an FMA one cycle).

When all b sequences carry the same tokens (llama.cpp's llama-batched-bench feeds token 0 to every sequence:
tools/batched-bench/batched-bench.cpp), they would route to the same k experts and (5) would take b = 1; measured
on DGX Spark they do not (see eq. 11), so the batched form takes the routings of (11).

Batched decode on llama.cpp's CUDA backend. One step of b sequences runs its kernels one after another
(ggml_backend_sched computes the graph node by node): the matrix products stream the weights once for the whole batch
(ggml-cuda mmvq.cu ``mul_mat_vec_q`` loops over up to MMVQ_MAX_BATCH_SIZE = 8 columns per weight row read; above
that ggml-cuda.cu ``ggml_cuda_mul_mat`` takes mmq.cu ``ggml_cuda_mul_mat_q``, one weight tile per column tile), the
flash-attention kernel of every sequence reads that sequence's own K and V cells (llama.cpp PR #14363 "high-throughput
mode": one KV stream per sequence unless ``--kv-unified``, split in src/llama-graph.cpp build_attn @c96c48c
L1035-1044, so the attention reads sum_s KV(c_s)), and each product's arithmetic over the b columns adds to, rather
than hides under, the weight stream: measured (below), a dense Q8_0 7B model's step grows by 0.5-0.8 ms per extra
sequence at a 0.5k context, the size of its 2N FLOPs at the calibrated MMQ rate, while the bytes it adds (its KV)
take 0.1 ms. With the single-sequence step (7) as the calibrated base::

    t_step(b) = (W_b + S_b) / (B e_m)  +  sum_s KV(c_s) / (B e_m eta)  +  2 N (b - 1) / (R_k e_k)
                +  F_attn(b) / (R_16 e_16)  +  t_comm + L tau + L tau_g                      (10)

eta the share of the weight stream's rate that the flash-attention kernels reach on the K/V cells
(formulas/flash_attention.py eq. F1; 1 without flash attention), W_b the weight bytes of (5) at b independent routings (r of eq. 11 when the sequences are identical), S_b the
recurrent state read and written, N the parameters a token multiplies, R_k e_k the rate of the product's kernel path (eq. 9, dense: n_h = 0), the (b - 1) because the
first column's products are inside the calibrated single-sequence constants (e_m, tau), and F_attn the b sequences'
attention FLOPs at the FP16 tensor rate, and tau_g the time per layer that a step of b >= 2 sequences pays because
ggml-cuda runs it without a CUDA graph and without the one-column fusions (ggml-cuda.cu check_node_graph_compatibility:
"disable CUDA graphs for batch size > 1", and MUL_MAT_ID over more than one token; ggml_cuda_should_fuse_mul_mat_vec_q:
gate/up + GLU fused "only for ncols_dst = 1"; ggml-org/ggml @da232870 L2139-2172, L2862-2878): each kernel is
launched from the host, measured on DGX Spark as a jump of 1.3-2.8 ms from b = 1 to b = 2 on dense models whose
bytes and FLOPs grow by < 0.3 ms (tau_g calibrated, estimate/efficiency.py LLAMACPP_GRAPHS_OFF_OVERHEAD_GPU). The KV
cells are llama.cpp's layout (estimate/engines.py
``llamacpp_kv_cells``, the rule the memory estimate sizes with): one stream per sequence by default; with
``--kv-unified`` all sequences share one buffer, the cells read are that buffer's cells in use, and each query's
attention runs over every sequence's cells (masked, not skipped: PR #14363 "cross-sequence attention"), so F_attn
grows by b. Measured with llama-batched-bench on DGX Spark (build 6918, b = 2..32,
contexts 0.5k-8k, five models): the step of a mixture-of-experts model grows 1.7-1.9x from b = 1 to b = 2, a dense
model's 1.07-1.2x, although every sequence carries token 0. Part of that jump at b = 2 is the kernel of that
build: ggml-cuda ran MoE products (mul_mat_id) of more than one token through MMQ until llama.cpp PR #18958
(2026-01-20, "Currently for batch_sizes > 1, we immediately move to mmq which is suboptimal for small batch
sizes ... previously there was a dip at n_tokens = 2"; its micro-benchmark: MUL_MAT_ID q4_0 128 experts, 8 used,
n = 4 tokens at 2.34 TFLOPS on MMQ vs 6.13 on MMVQ); eq. (10) does not model that dip (no published MMQ
mul_mat_id rate at 1-2 columns per expert on this GPU; it is 22-31 % fast at b = 2 on those MoE rows).

Routings of identical sequences. llama-batched-bench feeds every sequence token 0 at the same positions (prompt:
tools/batched-bench/batched-bench.cpp L127-131 ``common_batch_add(batch, 0, i, { j }, false)`` for each sequence
j; generation: L154-159 ``common_batch_add(batch, 0, pp + i, { j }, true)``, at ggml-org/llama.cpp @0a1f017), so
in exact arithmetic all b sequences route to the same k experts. Measured, they do not: with W_b at one routing,
eq. (10) is +76 to +233 % fast on every gpt-oss-120b row (the 120b step grows 5.8x from b = 1 to 32 at a 0.5k
prompt, the compute of 32 columns explains < 10 ms of its 85 ms). Nor do they route independently: with b
routings (5) is up to 42 % slow at b = 16-32 on the 128-expert models (gpt-oss-120b -21 to -42 %, Qwen3-30B-A3B
-2 to -28 %), where the expert coverage of b routings is far from saturated; reading that many experts at the
bandwidth takes longer than the measured step. The routings r that make (10) match each measured row grow like
b^0.56-0.59 on all three MoE models alike (after a 0.5k prompt r = 4.3 and 4.1, 5.9 and 6.0, 8.3 and 8.9 at b = 4, 8,
16 for gpt-oss-120b and Qwen3-30B-A3B), so a step of b >= 2 identical sequences is modelled as reading the experts
of r routings, a property of the workload (``identical_sequences``; distinct prompts, a real server's default,
keep r = b)::

    r(b) = c b^alpha        (b >= 2; b = 1 reads one routing)                            (11)

with c, alpha fitted on named rows (estimate/efficiency.py LLAMACPP_IDENTICAL_ROUTINGS_*: the gpt-oss-120b rows at
b >= 4; Qwen3-30B-A3B, gpt-oss-20b and every b = 2 row held out) and re-derived by
tests/estimate/test_identical_routings.py. r counts expert reads in units of one routing at the single-sequence
bandwidth, so it also carries the MMQ path that every b >= 2 MoE product of that build took (PR #18958 above): at
b = 2 it exceeds b (r = 2.6 with the graphs-off time of eq. 10; 2.9 before it), the dip, and the nine b = 2 rows,
outside the fit, land at -5.5 to +4.1 %
instead of +22 to +31 %. Why identical sequences diverge is not modelled (the bench's code gives no reason; rounding that
differs between matrix tiles, e.g. MMQ's stream-k k-splits, is one candidate), so (11) holds for this benchmark on
this build (2f68ce7cf, 6918) only.

Streaming limit of a GPU's mat-vec kernels. A decode step's matrix-vector products stream the weights through the
SMs; by Little's law (Little 1961, Operations Research 9(3): concurrency = throughput x latency) a kernel that keeps
Q bytes of loads in flight per SM against a memory latency of lambda cycles sustains N_SM x f x Q / lambda bytes/s,
whatever the DRAM's peak (Volkov 2016, "Understanding Latency Hiding on GPUs", UC Berkeley EECS-2016-143, ch. 4:
memory throughput = memory parallelism / latency until the bandwidth bound). With beta = Q / lambda the bytes an SM
streams per cycle (a property of the engine's kernels, taken equal across parts when latency is counted in SM
cycles), the bandwidth a decode step sees is::

    B_step = min(e_m B, N_SM f beta),     f = R_fp32 / (2 c)                               (12)

N_SM the SM count, f the clock of the stated FP32 peak R_fp32 over c FP32 lanes (one FMA per lane per cycle). It
binds where the memory is wide and the SMs few or slow: HBM parts (A100: 108 SMs at 1.41 GHz against 1.9-2.0 TB/s)
and not the GDDR cards (RTX 4090: 128 SMs at 2.52 GHz against 1.0 TB/s). beta for llama.cpp is fitted on one named
row (estimate/efficiency.py LLAMACPP_STREAM_BYTES_PER_SM_CYCLE). The serving engines (vLLM, SGLang) multiply through
PyTorch / cuBLAS kernels picked per architecture and release, so their beta is per architecture and applies to the
releases whose rows show it (estimate/efficiency.py SERVING_STREAM_BYTES_PER_SM_CYCLE, estimate/engines.py
STREAM_LIMITED; e_m their DRAM share): Hopper's, fitted on one H100 SXM row, puts the H20 (78 SMs against 4.0 TB/s)
at 0.35 of its bandwidth, as the H20's held-out rows of another engine measure.

Attention of one decode token without flash attention (llama.cpp -fa 0, llama-bench's default before 2025). The two
attention products of a single-token step, KQ (every cached key against the query) and KQV (the softmax weights
against every cached value), are separate matrix products over the F16 cache with one column per query head, and the
engines' kernels for them cost in proportion to their arithmetic at the kernel path's peak, not to the cache bytes:
- ggml-cuda (ggml-org/ggml src/ggml-cuda.cu @8c44bc9, the 2024-05-14 sync of llama.cpp's ggml-cuda.cu,
  ``ggml_cuda_mul_mat`` L1943-1952): with fast FP16 (Pascal P100, Volta and later) an F16 product with several heads
  (src1->ne[2] > 1) goes to ``ggml_cuda_mul_mat_batched_cublas`` (L1725-1840): the query converted to F16,
  cublasGemmBatchedEx / cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_16F (L1759), a GEMM of n = 1 column per
  head, batched over the heads; a tensor-core GEMM pads that column to a whole tile, so it runs at the FP16 tensor
  rate on many times its FLOPs.
- ggml-metal (ggml-org/ggml src/ggml-metal.m and ggml-metal.metal @8c44bc9): an F16 product of one token
  (ne11 = 1 <= ne11_mm_min, L1474-1505) takes the mat-vec kernel ``kernel_mul_mv_f16_f32_l4`` (.m L1576-1586, nth0 = 32,
  nth1 = 1; .metal L1552) dispatched as ne01 x ny x heads threadgroups of one 32-thread simdgroup (.m L1779): for KQ,
  one simdgroup per cached cell and head, each a 128-element dot product closed by a simd_sum reduction, a fixed
  shader cost per (cell, head) rather than per byte.
With w the work those kernels do per FLOP of the two products, in units of the path's peak (an engine x backend
constant), and the cache read inside the same kernels::

    t_attn = max(KV(c) / (B e_m), w F_attn(c) / R_p),      F_attn(c) = 4 d_attn L c              (13)

R_p the FP16 tensor rate (CUDA, the FP16-accumulate rate, x the warp-level mma share on Hopper as for cuBLAS
prefill) or the FP16 shader rate (Apple). The step of eq. (7) then reads the weights (and recurrent state) at
B e_m and adds t_attn. Measured (XiongjieDai llama-bench tables of May 2024, tg512 -> tg8192 of Llama-3-8B, -fa 0):
each added cached cell slows a step by 2.1-4.8x (NVIDIA, 8 GPUs) and 5-10x (Apple, 3 chips) the time of reading its
K and V at the calibrated bandwidth, and the excess, times R_p, is one figure within about 2x across GPUs whose SM
count x clock differs 2.6x; w is fitted on named rows (estimate/efficiency.py LLAMACPP_UNFUSED_ATTENTION_WORK). With
flash attention (llama.cpp's default since -fa auto) KQ, softmax and KQV run in one kernel that streams the cache
and eq. (13) does not apply: on ggml-cuda the step of eq. (7) then reads the weights at B e_m and adds the K/V cells
of the kernel's padded view at eta B e_m (formulas/flash_attention.py eq. F1, the same share as eq. 10's). Eq. (13)
is the step of one sequence (b = 1); a step of several sequences keeps eq. (10)'s attention terms (no published
-fa 0 batched row checks eq. 13 there).

Host work that overlaps the device. A serving engine's host (CPU) work for a decode step -- scheduling, input
preparation, sampling, output processing -- either runs between the device's steps, when it is a fixed term of the
step (eq. 7), or is done for step n + 1 while the device runs step n (vLLM's asynchronous scheduling, SGLang's
overlap scheduler; NanoFlow, Zhu et al. 2024, arXiv 2408.12757, section 4). Two stages of a pipeline that hand each
step on run at the pace of the slower (the steady state of a two-stage pipeline; Hennessy & Patterson, *Computer
Architecture*, 5th ed., section C.1: throughput is set by the longest stage)::

    t_step = max(t_device, t_host)                                                        (14)

t_device the step of eqs. (3)-(7), t_host the engine's host seconds per step (estimate/engines.py STEP_HOST).

The kernel-latency roof. A decode step is a chain of kernels run one after the other (a CUDA graph removes the
host's launches, not the kernels); each takes at least its own latency -- start on the device, DRAM latency, a grid
too small to fill the GPU, the tail -- whatever its bytes. Where the bytes one layer reads on one GPU are few (a
routed-expert layer at small batch, its experts and heads split over 8 GPUs) the sum of those minimums, not the
bytes, sets the device's step: the step is at least the layers' chains of latency-bound kernels::

    t_device = max(t_c, t_m, L tau_k) + t_comm + ...                                       (15)

tau_k the device time of one layer's chain at small batch (estimate/efficiency.py: per layer kind, calibrated on a
named row), L tau_k from eq. (7)'s product (``step_overhead``). A roof, not a term added to t_m: where the weight
products stream long enough to hide the chain (dense layers on one GPU, whose rows fitted the bandwidth share), eq.
(3) is unchanged. Published launch-bound decodes measure such chains: gLLM PR #264 (gty111/gLLM, 2026-08-31),
DeepSeek-V4 TP 4, one token: 8412 kernels in 22.7 ms of GPU time, 2.7 us a kernel; vLLM PR #36559 (fused_moe
kernel, batch 1: 26.7 us for a step whose expert bytes stream in a few us).

The fused-MoE kernel. A serving engine runs a layer's routed experts in one fused kernel call (vLLM / SGLang
``fused_experts``: the tokens aligned by expert, both expert GEMMs over each touched expert's weights, the
activation between them). Its published kernel times at decode batches (validation/fused_moe_kernel_times.csv,
``benchmark_moe.py`` / ``tuning_fused_moe_triton.py`` tables of vLLM PR #24700 and SGLang PR #11730: H100 and H200,
bf16 and fp8, 8-128 experts) follow a stream of the touched experts' bytes at a share s_e of the datasheet
bandwidth, plus a fixed time per call and a fixed time per touched expert (each expert's tiles start, fill their
pipeline and drain apart: a grid of many small GEMMs)::

    t_moe = B_e / (B s_e) + L_moe (t_call + n_e t_e)                                      (16)

B_e the routed-expert bytes one GPU reads in the step (eq. 5's touched share of its shard), L_moe the MoE layers,
n_e = E (1 - (1 - k/E)^b) the experts touched per layer (eq. 5), s_e, t_call, t_e fitted on those kernel rows
(estimate/efficiency.py FUSED_MOE_*). In a decode step the experts' bytes stay in eq. (3)'s t_m at the step's own
share (the serving rows' calibrated share, which every weight byte of a real step reaches, below a kernel's alone:
s_e describes the kernel benchmarks, not a step), and eq. (16)'s fixed terms, L_moe (t_call + n_e t_e), join eq.
(7)'s t_o: what the fused-MoE kernel takes beyond its bytes. Where eq. (15)'s roof applies (MLA + MoE layers),
the roof's tau_k was fitted on a whole layer's chain, its fused-MoE kernels included, and eq. (16) is not added.
The chunked Gated DeltaNet scan. A serving engine prefills a Gated DeltaNet layer (Yang et al. 2024, arXiv
2412.06464, section 3.3) with flash-linear-attention's chunked kernels: the prompt cut into chunks of C = 64 tokens,
the intra-chunk products parallel over chunks and heads, and the state carried from chunk to chunk by a scan whose
programs (one per head and value block, a few dozen on a GPU of 100+ SMs) walk the chunks in order. Its FLOPs are
about 1 % of the layer's products; its time is that walk's, growing with the chunks of the longest sequence in the
call, plus a fixed time per call (the launches of its kernels, and the parallel stages)::

    t_gdn = L_gdn (t_g + t_ch ceil(T / C))                                                (17)

L_gdn the Gated DeltaNet layers, T the prompt's tokens, t_g and t_ch fitted on published kernel times
(estimate/efficiency.py GDN_CHUNK_*); added to the prefill beside eq. (3), as eq. (16)'s fixed terms are to a decode
step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..errors import InputError
from ..frozen import fast_init
from .flash_attention import fattn_stream_seconds
from .network import all_gather_bytes


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise InputError(f"{name} must be positive, got {value}")


def attended_tokens(tokens: int, past_tokens: int = 0, window: int | None = None) -> float:
    """Sum over ``tokens`` new causal tokens of the tokens each attends: sum_{t=1..T} min(P + t, W).

    Without a window this is T P + T (T + 1) / 2 (eq. 2); a sliding-window layer caps each term at W."""
    if tokens < 0 or past_tokens < 0:
        raise InputError("tokens and past_tokens must not be negative")
    if window is None or past_tokens + tokens <= window:
        return tokens * past_tokens + tokens * (tokens + 1) / 2
    # terms P+1 .. P+T; those <= W sum arithmetically, the rest are W each
    below = max(0, min(tokens, window - past_tokens))
    first = past_tokens + 1
    return below * (first + past_tokens + below) / 2 + (tokens - below) * window


def chunked_attended_tokens(tokens: int, past_tokens: int, chunk: int) -> float:
    """Sum over ``tokens`` new causal tokens after ``past_tokens`` of the tokens each attends in a chunked-attention
    layer (Llama 4: a token sees only the earlier tokens of its own ``chunk``-token chunk, counted from position 0;
    transformers ``masking_utils.chunked_overlay``, vLLM's local-attention virtual batches): sum_{t=P+1..P+T}
    ((t - 1) mod C + 1), not eq. (2)'s min(P + t, W) of a sliding window.

    >>> chunked_attended_tokens(10, 0, 4)   # 1+2+3+4 + 1+2+3+4 + 1+2
    23.0
    """
    if tokens < 0 or past_tokens < 0 or chunk < 1:
        raise InputError("tokens and past_tokens must not be negative, chunk positive")

    def upto(n: int) -> float:  # sum_{t=1..n} ((t - 1) mod C + 1)
        k, r = divmod(n, chunk)
        return k * chunk * (chunk + 1) / 2 + r * (r + 1) / 2

    return upto(past_tokens + tokens) - upto(past_tokens)


def attention_flops(num_layers: int, attn_width: int, tokens: int, past_tokens: int = 0,
                    window: int | None = None) -> float:
    """Causal attention FLOPs (QK^T and AV) of ``tokens`` new tokens after ``past_tokens`` cached: the context
    term of eq. (2), 4 L d_attn (T P + T (T+1) / 2) [FLOP]; ``window`` caps the attended span."""
    return 4.0 * num_layers * attn_width * attended_tokens(tokens, past_tokens, window)


def prefill_flops(matmul_params: float, head_params: float, tokens: int, attn_flops: float = 0.0,
                  logit_tokens: int = 1) -> float:
    """Eq. (2'): FLOPs of a prefill of ``tokens`` prompt tokens as engines run it [FLOP]: the ``matmul_params``
    parameters a token multiplies (embedding excluded unless tied), less the LM head's ``head_params``, on every
    token; the head on the ``logit_tokens`` tokens whose logits are kept (1: the last, vLLM ``logits_indices``,
    llama.cpp ``batch.logits``, transformers ``logits_to_keep``; 0: the layer stack's products alone); plus the
    attention's ``attn_flops`` (eq. 2's context term, ``attention_flops``).

    >>> prefill_flops(7e9, 5e8, 1000, 2.62406144e11)   # 2 x 6.5e9 x 1000 + 2 x 5e8 + attention
    13263406144000.0
    """
    if tokens < 0 or logit_tokens < 0:
        raise InputError("tokens and logit_tokens must not be negative")
    return 2.0 * (matmul_params - head_params) * tokens + 2.0 * head_params * logit_tokens + attn_flops


def decode_flops(matmul_params: float, sequences: int, attn_flops: float = 0.0) -> float:
    """Eq. (1'): FLOPs of a decode step of ``sequences`` sequences, one new token each [FLOP]: the ``matmul_params``
    parameters a token multiplies, LM head included (every token of the step is sampled), once per sequence, plus
    the attention's ``attn_flops`` (eq. 1's context term over the step's sequences).

    >>> decode_flops(8e9, 4, 1e9)   # 4 x 2 x 8e9 + 1e9
    65000000000.0
    """
    if sequences < 0:
        raise InputError(f"sequences must not be negative, got {sequences}")
    return sequences * 2.0 * matmul_params + attn_flops


def compute_time(flops: float, peak_flops: float, efficiency: float) -> float:
    """Seconds to execute ``flops`` at ``peak_flops`` x ``efficiency`` (first term of eq. 3)."""
    _positive("peak_flops", peak_flops)
    _positive("efficiency", efficiency)
    return flops / (peak_flops * efficiency)


def memory_time(nbytes: float, bandwidth: float, efficiency: float) -> float:
    """Seconds to stream ``nbytes`` at ``bandwidth`` x ``efficiency`` (second term of eq. 3)."""
    _positive("bandwidth", bandwidth)
    _positive("efficiency", efficiency)
    return nbytes / (bandwidth * efficiency)


def gemm_time(flops: float, peak_flops: float, efficiency: float, columns: float, half_columns: float) -> float:
    """Eq. (9): seconds for matrix products of ``flops`` FLOPs whose launches each cover ``columns`` tokens, on a
    kernel path of peak ``peak_flops`` x ``efficiency`` that reaches half of it at ``half_columns`` columns."""
    _positive("peak_flops", peak_flops)
    _positive("efficiency", efficiency)
    _positive("columns", columns)
    if half_columns < 0:
        raise InputError(f"half_columns must not be negative, got {half_columns}")
    return flops / (peak_flops * efficiency) * (1.0 + half_columns / columns)


def dequantize_time(quantized_bytes: float, params: float, tokens: int, ubatch: int, stream_rate: float) -> float:
    """Eq. (9'): seconds a pre-June-2024 llama.cpp build spends converting ``params`` quantized weights
    (``quantized_bytes``) to F16 for cuBLAS, once per ubatch of ``ubatch`` of the ``tokens`` prompt tokens, at
    ``stream_rate`` [B/s]."""
    if quantized_bytes < 0 or params < 0:
        raise InputError("quantized_bytes and params must not be negative")
    if tokens < 1 or ubatch < 1:
        raise InputError("tokens and ubatch must be >= 1")
    _positive("stream_rate", stream_rate)
    return -(-tokens // ubatch) * (quantized_bytes + 2.0 * params) / stream_rate


METAL_MM_WEIGHTS_PER_THREAD = 16  # kernel_mul_mm: one half4x4 dequantized per thread per 32-wide K step
METAL_MM_FMA_PER_THREAD = 512  # 64 x 32 x 32 FMAs of a K step over the threadgroup's 128 threads
METAL_MM_PRODUCTS_PER_SIMDGROUP = 32  # 4 x 8 simdgroup_multiply_accumulate of 8x8x8 per simdgroup per K step
# Issue cycles of one 8x8x8 simdgroup_multiply_accumulate: MATMUL<F16x8x8> ~20.87 (philipturner/metal-benchmarks
# README @936d911, intra-simd communication table, measured on M1-family GPUs)
METAL_SIMDGROUP_MATMUL_CYCLES = 20.87


def metal_dequant_share(cycles_per_weight: float, weights_per_thread: int = METAL_MM_WEIGHTS_PER_THREAD,
                        products_per_thread: int = METAL_MM_PRODUCTS_PER_SIMDGROUP,
                        cycles_per_product: float = METAL_SIMDGROUP_MATMUL_CYCLES) -> float:
    """Eq. (9m): the issue time a Metal ``kernel_mul_mm`` product spends dequantizing its weight tiles, as a share of
    its simdgroup-matrix products: ``cycles_per_weight`` issue cycles on each of ``weights_per_thread`` weights per
    ``products_per_thread`` 8x8x8 products of ``cycles_per_product`` cycles each."""
    if cycles_per_weight < 0:
        raise InputError(f"cycles_per_weight must not be negative, got {cycles_per_weight}")
    if weights_per_thread < 1 or products_per_thread < 1:
        raise InputError("weights_per_thread and products_per_thread must be >= 1")
    _positive("cycles_per_product", cycles_per_product)
    return cycles_per_weight * weights_per_thread / (products_per_thread * cycles_per_product)


def mmq_tile_reads(tokens: int, ubatch: int, tile_columns: int) -> int:
    """Eq. (9''): how many times a prompt of ``tokens`` in ubatches of ``ubatch`` reads a dense product's weights on
    MMQ, once per column tile of ``tile_columns``: sum over ubatches of ceil(n_u / tile_columns)."""
    if tokens < 1 or ubatch < 1 or tile_columns < 1:
        raise InputError("tokens, ubatch and tile_columns must be >= 1")
    full, rest = divmod(tokens, ubatch)
    return full * -(-ubatch // tile_columns) + (-(-rest // tile_columns) if rest else 0)


def mmq_tile_width(columns: int, tile_columns: int) -> int:
    """The MMQ column tile (mmq_x) for a launch whose widest column span is ``columns`` (ggml-cuda mmq.cuh
    mul_mat_q_case: the first mmq_x, in steps of 8 up to ``tile_columns``, 128 with tensor-core MMA, that needs the
    fewest tiles, ceil(columns / tile_columns), among the multiples of the granularity, 8 below 48 columns and 16 from
    48)."""
    if columns < 1 or tile_columns < 1:
        raise InputError("columns and tile_columns must be >= 1")
    need = -(-columns // -(-columns // tile_columns))  # the narrowest tile that still needs the fewest tiles
    width = -(-need // 8) * 8
    if width >= 48:
        width = -(-need // 16) * 16
    return min(width, tile_columns)


@lru_cache(maxsize=1024)
def _expected_tiles(n: int, p: float, width: int) -> float:
    """E[ceil(m / width)] for m ~ Binomial(n, p), summed over the binomial's mass within 9 standard deviations of its
    mean (the mass outside is below 1e-18)."""
    if p >= 1.0:
        return float(-(-n // width))
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    lo, hi = max(0, math.floor(mean - 9 * sd - 1)), min(n, math.ceil(mean + 9 * sd + 1))
    ratio = p / (1.0 - p)
    pmf = math.exp(math.lgamma(n + 1) - math.lgamma(lo + 1) - math.lgamma(n - lo + 1) + lo * math.log(p)
                   + (n - lo) * math.log1p(-p))
    total = block = 0.0
    tiles = -(-lo // width)
    for m in range(lo, hi + 1):
        block += pmf
        if m % width == 0:  # m is the last count of this tile number: close the block
            total += block * tiles
            block = 0.0
            tiles += 1
        pmf *= (n - m) / (m + 1) * ratio
    return total + block * tiles


def moe_expert_tiles(tokens: int, ubatch: int, experts_per_token: int, num_experts: int,
                     tile_columns: int) -> tuple[float, float]:
    """Eq. (9'''): (tiles, columns) an MMQ mul_mat_id runs per routed expert over a prompt of ``tokens`` in ubatches of
    ``ubatch``: per ubatch of n tokens, E[ceil(m / w_n)] tiles of w_n = mmq_tile_width(n) columns, m ~ Binomial(n,
    k / E) the expert's columns (uniform routing); summed over the ubatches."""
    if tokens < 1 or ubatch < 1 or tile_columns < 1:
        raise InputError("tokens, ubatch and tile_columns must be >= 1")
    if not 0 < experts_per_token <= num_experts:
        raise InputError(f"experts_per_token must be in 1..num_experts, got {experts_per_token}/{num_experts}")
    p = experts_per_token / num_experts
    full, rest = divmod(tokens, ubatch)
    tiles = columns = 0.0
    for n, count in ((ubatch, full), (rest, 1)):
        if n and count:
            width = mmq_tile_width(n, tile_columns)
            per = _expected_tiles(n, p, width)
            tiles += count * per
            columns += count * per * width
    return tiles, columns


def moe_expert_fraction(experts_per_token: int, num_experts: int, batch: float) -> float:
    """Eq. (5): expected fraction of a layer's routed experts that ``batch`` tokens touch (uniform routing);
    ``batch`` may be a fractional count of independent routings (eq. 11)."""
    if not 0 < experts_per_token <= num_experts:
        raise InputError(f"experts_per_token must be in 1..num_experts, got {experts_per_token}/{num_experts}")
    if batch < 1:
        raise InputError(f"batch must be >= 1, got {batch}")
    return 1.0 - (1.0 - experts_per_token / num_experts) ** batch



def identical_sequence_routings(batch: int, scale: float, exponent: float) -> float:
    """Eq. (11): the routings whose experts a llama.cpp batched step of ``batch`` sequences fed identical tokens
    reads, c b^alpha for b >= 2 (1 for one sequence); ``scale`` c and ``exponent`` alpha are fitted
    (estimate/efficiency.py)."""
    if batch < 1:
        raise InputError(f"batch must be >= 1, got {batch}")
    _positive("scale", scale)
    if not 0 <= exponent <= 1:
        raise InputError(f"exponent must be in 0..1, got {exponent}")
    return 1.0 if batch == 1 else scale * batch ** exponent


def sm_streaming_bandwidth(sm_cycles_per_second: float, bytes_per_sm_cycle: float) -> float:
    """Eq. (12): the bytes/s a GPU's SMs stream when each keeps ``bytes_per_sm_cycle`` (beta = bytes in flight /
    latency in cycles) moving: N_SM f beta [B/s]; ``sm_cycles_per_second`` is N_SM x f."""
    _positive("sm_cycles_per_second", sm_cycles_per_second)
    _positive("bytes_per_sm_cycle", bytes_per_sm_cycle)
    return sm_cycles_per_second * bytes_per_sm_cycle


def unfused_attention_time(kv_bytes: float, bandwidth: float, bandwidth_efficiency: float, attn_flops: float,
                           path_peak: float, work_per_flop: float) -> float:
    """Eq. (13): seconds of a decode token's KQ and KQV products without flash attention: the larger of reading the
    cache, ``kv_bytes`` at ``bandwidth`` x ``bandwidth_efficiency``, and ``work_per_flop`` x ``attn_flops`` at the
    kernel path's peak ``path_peak`` [FLOP/s]."""
    if kv_bytes < 0 or attn_flops < 0:
        raise InputError("kv_bytes and attn_flops must not be negative")
    _positive("path_peak", path_peak)
    _positive("work_per_flop", work_per_flop)
    return max(memory_time(kv_bytes, bandwidth, bandwidth_efficiency), work_per_flop * attn_flops / path_peak)


def allreduce_time(nbytes: float, devices: int, link_bandwidth: float, latency_seconds: float = 0.0,
                   one_stage: bool = False) -> float:
    """Eq. (6): all-reduce of ``nbytes`` over ``devices`` devices on links of ``link_bandwidth`` [B/s]: the
    latency ``latency_seconds`` (alpha) plus the ring's bandwidth term; ``one_stage``: eq. (6'), every device reads
    the whole message from each peer.

    >>> allreduce_time(1e6, 4, 1e9), allreduce_time(1e6, 4, 1e9, one_stage=True)
    (0.0015, 0.003)
    """
    if devices <= 1:
        return 0.0
    _positive("link_bandwidth", link_bandwidth)
    if latency_seconds < 0:
        raise InputError("latency_seconds must not be negative")
    volume = (devices - 1) * nbytes if one_stage else 2.0 * (devices - 1) / devices * nbytes
    return latency_seconds + volume / link_bandwidth


def allgather_time(nbytes: float, devices: int, link_bandwidth: float, latency_seconds: float = 0.0) -> float:
    """Eq. (6g): ring all-gather of ``nbytes`` (the gathered whole) over ``devices`` devices on links of
    ``link_bandwidth`` [B/s]: the latency ``latency_seconds`` (alpha) plus the bytes each device sends
    (formulas/network.py eq. 2, ``all_gather_bytes``) over the link.

    >>> allgather_time(1e6, 4, 1e9)
    0.00075
    """
    if devices <= 1:
        return 0.0
    _positive("link_bandwidth", link_bandwidth)
    if latency_seconds < 0:
        raise InputError("latency_seconds must not be negative")
    return latency_seconds + all_gather_bytes(nbytes, devices) / link_bandwidth


@fast_init
@dataclass(frozen=True)
class Roofline:
    """Where a phase sits on the roofline: intensity [FLOP/B], ridge point [FLOP/B] at the rates the phase is timed
    with (eq. 3r), the attainable rate min(R e_c, I B e_m) [FLOP/s], the binding resource, and the ridge of the
    peaks R / B [FLOP/B] beside it."""

    intensity: float
    ridge: float
    attainable_flops: float
    bound: str  # "memory" or "compute"
    peak_ridge: float = 0.0  # R / B (0: not given)

    def to_dict(self) -> dict[str, float | str]:
        return {"intensity_flop_per_byte": self.intensity, "ridge_flop_per_byte": self.ridge,
                "peak_ridge_flop_per_byte": self.peak_ridge,
                "attainable_flops": self.attainable_flops, "bound": self.bound}


def roofline(flops: float, nbytes: float, peak_flops: float, bandwidth: float, compute_efficiency: float = 1.0,
             bandwidth_efficiency: float = 1.0) -> Roofline:
    """Arithmetic intensity I = flops / bytes against the ridge (R e_c) / (B e_m) of eq. (3r) (Williams et al. 2009
    at the achieved rates: the same comparison as eq. (3)'s two times; e_c = e_m = 1: the peaks' ridge R / B)."""
    _positive("peak_flops", peak_flops)
    _positive("bandwidth", bandwidth)
    _positive("compute_efficiency", compute_efficiency)
    _positive("bandwidth_efficiency", bandwidth_efficiency)
    rate, stream = peak_flops * compute_efficiency, bandwidth * bandwidth_efficiency
    intensity = flops / nbytes if nbytes > 0 else float("inf")
    ridge = rate / stream
    attainable = min(rate, intensity * stream)
    return Roofline(intensity, ridge, attainable, "memory" if intensity < ridge else "compute",
                    peak_flops / bandwidth)


@fast_init
@dataclass(frozen=True)
class PhaseTime:
    """Time of one phase: the larger of its compute and memory times (eq. 3) plus communication."""

    seconds: float
    compute_seconds: float
    memory_seconds: float
    comm_seconds: float
    overhead_seconds: float = 0.0
    attention_seconds: float = 0.0  # eq. (13): unfused single-token attention products, outside memory_seconds
    host_seconds: float = 0.0  # the engine's host step when it overlaps the device's (eq. 14); 0: none
    elementwise_seconds: float = 0.0  # eager memory-bound kernels between the GEMMs (elementwise_traffic eq. E13)
    floor_seconds: float = 0.0  # eq. (15): the layers' chains of latency-bound kernels, a roof beside t_c and t_m

    @property
    def bound(self) -> str:
        if self.host_seconds and self.host_seconds >= self.seconds:
            return "host"
        if self.comm_seconds > max(self.compute_seconds, self.memory_seconds, self.floor_seconds):
            return "communication"
        if self.floor_seconds > max(self.compute_seconds, self.memory_seconds):
            return "kernel latency"
        if self.attention_seconds > max(self.compute_seconds, self.memory_seconds):
            return "attention"
        # the eager memory-bound kernels run apart from the GEMMs: memory time of their own
        return "compute" if self.compute_seconds >= self.memory_seconds + self.elementwise_seconds else "memory"

    def to_dict(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {
            "seconds": self.seconds, "compute_seconds": self.compute_seconds, "memory_seconds": self.memory_seconds,
            "comm_seconds": self.comm_seconds, "overhead_seconds": self.overhead_seconds, "bound": self.bound}
        if self.host_seconds:
            out["host_seconds"] = self.host_seconds
        if self.attention_seconds:
            out["attention_seconds"] = self.attention_seconds
        if self.elementwise_seconds:
            out["elementwise_seconds"] = self.elementwise_seconds
        if self.floor_seconds:
            out["kernel_floor_seconds"] = self.floor_seconds
        return out


def phase_time(flops: float, nbytes: float, peak_flops: float | None, bandwidth: float | None,
               compute_efficiency: float, bandwidth_efficiency: float, comm_seconds: float = 0.0,
               overhead_seconds: float = 0.0, attention_seconds: float = 0.0,
               elementwise_seconds: float = 0.0, floor_seconds: float = 0.0) -> PhaseTime:
    """Eq. (3) with either resource optional (an unknown peak contributes no lower bound of its own), plus
    communication, a fixed per-step ``overhead_seconds`` (eq. 7) and ``attention_seconds``: the unfused attention
    products of eq. (13), or the flash-attention K/V stream of eq. F1, that run after the weight products (their cache
    read is then not part of ``nbytes``); and ``elementwise_seconds``: the memory-bound kernels an eager framework
    runs one after another between its GEMMs (formulas/elementwise_traffic.py eqs. E7, E13), which overlap neither;
    ``floor_seconds``: eq. (15)'s roof of latency-bound kernels (0: none)::

        T = max(t_c, t_m, t_floor) + t_comm + t_overhead + t_attn + t_elementwise                    (3')

    Raises InputError when both are unknown."""
    if not peak_flops and not bandwidth:
        raise InputError("need a peak FLOP/s or a memory bandwidth to estimate time")
    if attention_seconds < 0 or elementwise_seconds < 0 or floor_seconds < 0:
        raise InputError("attention_seconds, elementwise_seconds and floor_seconds must not be negative")
    tc = compute_time(flops, peak_flops, compute_efficiency) if peak_flops else 0.0
    tm = memory_time(nbytes, bandwidth, bandwidth_efficiency) if bandwidth else 0.0
    return PhaseTime(max(tc, tm, floor_seconds) + comm_seconds + overhead_seconds + attention_seconds
                     + elementwise_seconds, tc, tm, comm_seconds, overhead_seconds, attention_seconds,
                     elementwise_seconds=elementwise_seconds, floor_seconds=floor_seconds)


def phase_roofline(flops: float, nbytes: float, phase: PhaseTime, peak_flops: float, bandwidth: float) -> Roofline:
    """Eq. (3r) for a timed ``phase`` of ``flops`` and ``nbytes`` (their true counts): the roofline at the rates its
    eq. (3) achieved, e_c = flops / (R t_c) and e_m = bytes / (B (t_m + t_e)) (t_e: the eager memory-bound kernels,
    which ``PhaseTime.bound`` adds to the memory side), so its compute/memory label is ``PhaseTime.bound``'s last
    comparison whatever efficiency, quantized-kernel rate or encoder scaling timed it; a phase with no compute or
    memory time: the peaks' ridge."""
    t_m = phase.memory_seconds + phase.elementwise_seconds
    if phase.compute_seconds <= 0 or t_m <= 0 or flops <= 0 or nbytes <= 0:
        return roofline(flops, nbytes, peak_flops, bandwidth)
    return roofline(flops, nbytes, peak_flops, bandwidth, flops / (peak_flops * phase.compute_seconds),
                    nbytes / (bandwidth * t_m))


def host_overlapped_step(device: PhaseTime, host_seconds: float) -> PhaseTime:
    """Eq. (14): a step whose host work (``host_seconds``) runs while the device works on the previous step takes
    the longer of the two; ``device`` is the device's step (eqs. 3-7)."""
    if host_seconds < 0:
        raise InputError("host_seconds must be >= 0")
    return PhaseTime(max(device.seconds, host_seconds), device.compute_seconds, device.memory_seconds,
                     device.comm_seconds, device.overhead_seconds, attention_seconds=device.attention_seconds,
                     host_seconds=host_seconds, elementwise_seconds=device.elementwise_seconds,
                     floor_seconds=device.floor_seconds)


def batched_decode_time(nbytes: float, bandwidth: float, bandwidth_efficiency: float, extra_gemm_flops: float,
                        gemm_peak: float, gemm_efficiency: float, attn_flops: float, attn_peak: float,
                        attn_efficiency: float, comm_seconds: float = 0.0,
                        overhead_seconds: float = 0.0, kv_bytes: float = 0.0, kv_share: float = 1.0) -> PhaseTime:
    """Eq. (10): one decode step of several sequences on llama.cpp's CUDA backend: the bytes (weights once, every
    sequence's KV and state) at ``bandwidth`` x ``bandwidth_efficiency``, plus the products' arithmetic beyond the
    first column (``extra_gemm_flops`` = 2 N (b - 1)) at the kernel path's rate, plus the attention FLOPs at the FP16
    rate, plus communication and the fixed per-step ``overhead_seconds`` (eq. 7). The compute terms add to the
    memory term (kernels of a step run one after another; see eq. 10 in the module doc). ``kv_bytes`` of ``nbytes``
    are the K/V cells the flash-attention kernels stream at ``kv_share`` of that rate (formulas/flash_attention.py
    eq. F1; 1: at the rate of the rest)."""
    if nbytes < 0 or extra_gemm_flops < 0 or attn_flops < 0 or not 0 <= kv_bytes <= nbytes:
        raise InputError("bytes and FLOPs must not be negative; kv_bytes at most nbytes")
    tm = memory_time(nbytes - kv_bytes, bandwidth, bandwidth_efficiency)
    if kv_bytes:
        tm += fattn_stream_seconds(kv_bytes, bandwidth, bandwidth_efficiency, kv_share)
    tc = compute_time(extra_gemm_flops, gemm_peak, gemm_efficiency) + compute_time(attn_flops, attn_peak,
                                                                                    attn_efficiency)
    return PhaseTime(tm + tc + comm_seconds + overhead_seconds, tc, tm, comm_seconds, overhead_seconds)


def fused_moe_seconds(expert_bytes: float, bandwidth: float, stream_share: float, moe_layers: int,
                      experts_touched: float, call_seconds: float, expert_seconds: float) -> float:
    """Eq. (16): the fused-MoE kernels of one decode step on one GPU, ``expert_bytes`` of touched routed experts at
    ``stream_share`` of ``bandwidth`` plus ``moe_layers`` x (``call_seconds`` + ``experts_touched`` x
    ``expert_seconds``) [s]."""
    if expert_bytes < 0 or bandwidth <= 0 or not 0 < stream_share <= 1 or moe_layers < 0 or experts_touched < 0 \
            or call_seconds < 0 or expert_seconds < 0:
        raise InputError("fused_moe_seconds: bytes, layers, experts and seconds must be >= 0, bandwidth > 0, "
                         "stream_share in (0, 1]")
    return expert_bytes / (bandwidth * stream_share) + moe_layers * (call_seconds + experts_touched * expert_seconds)


def chunked_scan_seconds(layers: int, tokens: int, chunk_tokens: int, call_seconds: float,
                         chunk_seconds: float) -> float:
    """Eq. (17): seconds of ``layers`` chunked Gated DeltaNet scans over a prompt of ``tokens`` in chunks of
    ``chunk_tokens``: each layer's call ``call_seconds`` plus ``chunk_seconds`` per chunk [s]."""
    if layers <= 0 or tokens <= 0:
        return 0.0
    _positive("chunk_tokens", chunk_tokens)
    return layers * (call_seconds + chunk_seconds * math.ceil(tokens / chunk_tokens))


def step_overhead(num_layers: int, seconds_per_layer: float) -> float:
    """Eq. (7): the fixed time of one decode step that moves no weight bytes, t_o = L x tau [s].

    Each layer of a step launches the same short chain of kernels (norm, projections, attention, MLP); at batch
    1 the gaps between them and the kernels too small to reach full bandwidth add a time that grows with the
    layer count, not with the bytes read (NVIDIA's CUDA-graphs work on llama.cpp measured part of it: issue
    ggml-org/llama.cpp#6763, H100-PCIe Llama-2-7B Q4_K_M 143.35 -> 163.83 tokens/s by removing GPU-side launch
    gaps alone). tau is an engine x backend constant (estimate/efficiency.py)."""
    if num_layers < 0 or seconds_per_layer < 0:
        raise InputError("num_layers and seconds_per_layer must be >= 0")
    return num_layers * seconds_per_layer


def split_decode_time(parts: Sequence[tuple[float, float, float]], transfer_bytes: float,
                      link_bandwidth: float | None, overhead_seconds: float = 0.0) -> PhaseTime:
    """Eq. (8): one decode step of a model split by layers over devices that run one after the other (llama.cpp
    layer split and partial offload: each device computes its layers, then hands the activations on)::

        t = sum_d bytes_d / (B_d e_d) + X / B_link + L tau                                              (8)

    ``parts`` is (bytes read [B], bandwidth [B/s], efficiency) per device; ``transfer_bytes`` X what crosses the
    link per step (the f32 residual, hidden x 4 B, at each change of device along the layer order, and the f32
    logits back to the host) over ``link_bandwidth`` (PCIe). The link's latency (~10 us per transfer) is not
    included: at batch 1 it can exceed the transfer time."""
    if transfer_bytes < 0:
        raise InputError("transfer_bytes must be >= 0")
    tm = sum(memory_time(b, bw, e) for b, bw, e in parts if b > 0)
    comm = transfer_bytes / link_bandwidth if transfer_bytes and link_bandwidth else 0.0
    return PhaseTime(tm + comm + overhead_seconds, 0.0, tm, comm, overhead_seconds)


def row_split_decode_time(row_parts: Sequence[tuple[float, float, float]],
                          serial_parts: Sequence[tuple[float, float, float]], transfer_bytes: float,
                          link_bandwidth: float | None, exchanges: int, exchange_seconds: float,
                          overhead_seconds: float = 0.0) -> PhaseTime:
    """Eq. (8r): one decode step of a llama.cpp row split (``-sm row``), read in llama.cpp's CUDA split buffer
    (ggml-org/llama.cpp@f6d77a1ba0ac794e950bd3abb630b904bdcd8fb8 ggml/src/ggml-cuda/ggml-cuda.cu
    ``ggml_cuda_op_mul_mat``, ``get_row_split``; removed upstream in 74976e1ae "CUDA: remove -sm row")::

        t = max_g R_g / (B_g e_g) + sum_d S_d / (B_d e_d) + X / B_link + 2 M alpha + L tau              (8r)

    Each GPU g holds rows [nrows p_{g-1}, nrows p_g) of every split matrix and multiplies them at the same time as
    the others (one stream per device, ``ctx.stream(id, is)``); with the same shares for every matrix the sum over
    matmuls of the slowest GPU's share is the slowest GPU's total, max_g R_g (``row_parts``: its row bytes,
    bandwidth, efficiency). What is not split runs one device after the other (``serial_parts``: the KV cells of the
    layers each device holds, the host's layers). Per split matmul (M of them) the main GPU records an event that the
    others wait on before copying its (q8_1-quantized) input to them (``cudaMemcpyPeerAsync``), and each other GPU
    copies its slice of the output back (``ggml_cuda_Memcpy2DPeerAsync``) and records an event the main GPU waits on:
    two synchronised exchanges, each of latency alpha (``exchange_seconds``), their ``transfer_bytes`` X over the
    link. L tau: the per-layer launch overhead of eq. (8)."""
    if transfer_bytes < 0 or exchanges < 0:
        raise InputError("transfer_bytes and exchanges must be >= 0")
    rows = max((memory_time(b, bw, e) for b, bw, e in row_parts if b > 0), default=0.0)
    serial = sum(memory_time(b, bw, e) for b, bw, e in serial_parts if b > 0)
    comm = (transfer_bytes / link_bandwidth if transfer_bytes and link_bandwidth else 0.0) \
        + 2 * exchanges * exchange_seconds
    return PhaseTime(rows + serial + comm + overhead_seconds, 0.0, rows + serial, comm, overhead_seconds)


# ggml-org/llama.cpp@00108827d87949b538ad1821f81a6b111827fcda ggml/src/ggml-cuda/ggml-cuda.cu
# ``ggml_backend_cuda_device_offload_op``: the CUDA backend takes an op whose weights sit in a host buffer when
# ``get_op_batch_size(op) >= op_offload_min_batch_size`` (32 unless GGML_OP_OFFLOAD_MIN_BATCH; MUL_MAT: ne[1], the
# tokens; MUL_MAT_ID, the experts' product: ne[2], the tokens); the scheduler (ggml/src/ggml-backend.cpp
# ``ggml_backend_sched_backend_id_from_cur``, ``sched->op_offload``, on by default: llama.cpp --no-op-offload turns
# it off) then copies those weights to the GPU for every graph, i.e. every ubatch, and for MUL_MAT_ID copies only
# the experts the ubatch's router ids use (``ggml_backend_sched_compute_splits``: "copying only the experts that are
# used"). llama.cpp's Metal backend takes the same ops at the same threshold: ggml/src/ggml-metal/ggml-metal.cpp
# ``ggml_backend_metal_device_offload_op`` (MUL_MAT / MUL_MAT_ID whose ``get_op_batch_size`` is at least the device
# props' ``op_offload_min_batch_size``, set in ggml-metal-device.m: 32 unless GGML_OP_OFFLOAD_MIN_BATCH).
OP_OFFLOAD_MIN_BATCH = 32
# the backend whose offload_op decides it, per GPU runtime (estimate/device.py gpu_runtime): its name and function;
# ROCm builds ggml-cuda.cu as its HIP backend, so every runtime but Metal is the CUDA one's
OP_OFFLOAD_SOURCES = {"metal": ("Metal", "ggml-metal.cpp ggml_backend_metal_device_offload_op"),
                      "cuda": ("CUDA", "ggml-cuda.cu ggml_backend_cuda_device_offload_op")}


def op_offload_source(runtime: str) -> tuple[str, str]:
    """(backend name, its offload_op function) of llama.cpp's GPU backend on ``runtime`` (``OP_OFFLOAD_SOURCES``)."""
    return OP_OFFLOAD_SOURCES.get(runtime, OP_OFFLOAD_SOURCES["cuda"])


def split_prefill_time(gpu_seconds: float, ubatches: Sequence[int], dense_bytes: float, expert_bytes: float,
                       expert_fraction: Sequence[float], link_bandwidth: float,
                       host_bandwidth: float | None, host_efficiency: float,
                       kv_bytes_per_token: float = 0.0) -> tuple[float, float, float]:
    """Eq. (8p): the prefill of a llama.cpp split whose host RAM holds ``dense_bytes`` of layer weights (-ngl < all)
    with ``kv_bytes_per_token`` K (the K and V bytes per token of those layers' KV cache) and ``expert_bytes`` of
    routed experts (--n-cpu-moe), run as ``ubatches`` of u_i tokens (n_ubatch each, the last the rest), n_i = u_1 +
    ... + u_i the cells the i-th attends::

        b_i = D + X f(u_i) + K (n_i + u_i)
        T = T_gpu + sum_{u_i >= M} b_i / B_link + sum_{u_i < M} b_i / (B_host e_host),  M = OP_OFFLOAD_MIN_BATCH   (8p)

    A ubatch of M tokens or more runs every weight product on the GPU (``ggml_backend_sched_backend_id_from_cur``
    offloads an op whose source is a host WEIGHTS buffer), its host weights copied over the link first (the copy and
    the GPU's work on that split run one after the other on the backend's stream): D + X f(u_i) per ubatch, f(u) the
    share of experts u tokens route to (eq. 5, ``expert_fraction``). The host layers' attention (KQ, softmax, KQV or
    FLASH_ATTN_EXT) has no weights source, so the same function leaves it unassigned and the scheduler's
    "expand gpu" passes (``ggml_backend_sched_split_graph`` pass 2) give it the backend of the offloaded products
    around it, the GPU; its K and V views of the host layers' cache (llama-kv-cache.cpp allocates each layer's
    cache on ``model.dev_layer(il)``, the host) are split inputs copied to the GPU (pass 5), and the ubatch's new
    K/V rows are written back to the host cache: K (n_i + u_i) over the link (n_i: the cells in use, without
    llama.cpp's padding of n_kv, a lower bound). llama.cpp's own check shows this placement: with flash attention
    on auto, a host layer whose FLASH_ATTN_EXT the scheduler put on the GPU turns flash attention off ("layer %d is
    assigned to device %s but the Flash Attention tensor is assigned to device %s", llama-context.cpp), so the
    attention's FLOPs are the GPU's, already in T_gpu. A smaller ubatch stays on the CPU, which reads the same bytes
    at its own bandwidth (memory-bound at so few tokens: a lower bound). B_link is the link's pinned-memory rate:
    llama.cpp keeps host layers in the GPU's pinned host buffer (llama-model.cpp ``make_cpu_buft_list``, "useful
    when the processing of large batches is offloaded") only without mmap; under its default mmap they stay in the
    pageable file mapping (CPU_Mapped), which copies slower than pinned at a rate no source here states, so T is
    then a lower bound. Returns (seconds, transfer seconds, host seconds); host seconds are inf without a host
    bandwidth."""
    if link_bandwidth <= 0:
        raise InputError("link_bandwidth must be > 0")
    transfer = host = 0.0
    cells = 0
    for u, f in zip(ubatches, expert_fraction, strict=True):
        cells += u  # n_i: the ubatch's own rows are written to the cache before its attention reads them
        nbytes = dense_bytes + expert_bytes * f + kv_bytes_per_token * (cells + u)
        if u >= OP_OFFLOAD_MIN_BATCH:
            transfer += nbytes / link_bandwidth
        elif nbytes > 0:
            host += nbytes / (host_bandwidth * host_efficiency) if host_bandwidth else math.inf
    return gpu_seconds + transfer + host, transfer, host

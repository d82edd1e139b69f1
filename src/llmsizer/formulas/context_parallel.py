"""Context parallelism: per-device tokens, ring attention's buffers and exchange, torchtitan's and Megatron-Core's.

Two implementations, by the framework (``TrainingWorkload.cp_ring``): torchtitan's (``context_parallel_degree``,
torch's ring attention, below) and Megatron-Core's (``context_parallel_size``, TransformerEngine's P2P ring, the
section "Megatron-Core" further down).

torchtitan shards every sequence over the ``cp`` mesh (``torchtitan/distributed/context_parallel/api.py``
``prepare_context_parallel_input`` / ``cp_shard``, commit b5bcd76, lines 36-228: inputs, labels and positions split along the sequence, with the
head-tail load balancer by default: 2 x cp chunks, rank i taking chunks i and 2cp-1-i), so every activation
of a layer, the logits and the loss are those of seq / cp tokens. Parameters are sharded by FSDP over
dp_shard x cp (``torchtitan/distributed/parallel_dims.py`` line 281: ``fsdp = self.dp_shard * self.cp``).

Attention runs as ring attention (torch ``torch/distributed/tensor/experimental/_context_parallel/_attention.py``,
torch 2.13): autograd saves the local q, k, v, output and log-sum-exp as plain SDPA would (the ring is inside
one op). The op's buffers, per layer in flight, are those of the worst rank at its worst moment (head-tail load
balancing gives the ranks different block shapes: from step 1 on, a rank r at step i <= r runs its whole q on the
first half of the block's K/V, at i > r the second half of its q on the whole K/V, lines 451-470 and 541-569;
``tokens`` is even, two chunks of tokens / 2). q, k, v, o: the widths; c: the compute dtype's bytes; fp32 (4 B)
accumulators (``convert_to_f32=True``, line 75):

- forward (``_templated_ring_attention``, lines 317-487): the K/V of all cp ranks, gathered once by the default
  ``_AllGatherRotater`` (rotate_method ALL_GATHER, line 77; lines 273-302), cp x t (k + v) c, held to the end; on
  top, the larger of step 0 (the local K/V concatenated, line 438, until the gather is waited, + the block output
  and its fp32 copy, lines 475 and 214: t (k + v) c + t o (c + 4)) and a whole-q merge on a rank r >= 1 at step
  1 (``_SDPAMerger._merge_one`` line 186, ``out - sigmoid(block_lse - lse) * (out - block_out)``: the merged fp32
  output, the block output in c and in fp32, and two fp32 temporaries of the update alive at once: t o (16 + c));
  the half-q merge (rank 0, ``_partial_update`` line 136) is smaller (t o (12 + c / 2));
- backward (``_templated_ring_attention_backward``, lines 488-657), beyond a plain SDPA backward's dq, dk, dv (which
  every layer's backward transient already counts): the fp32 dq accumulator (line 513, t q 4) and the concatenated
  + gathered K/V again ((cp + 1) t (k + v) c, lines 533-534), held throughout; on top, the largest of
  (A) the block op at step 1 (line 574): three fp32 dK/dV (the accumulator, line 514-515, the ``torch.cat`` sent at
  step 0, line 625, and its all-to-all output, line 265) and the new block's dq, dk, dv while step 0's are still
  bound (``grad_query_, ...`` rebind only when the op returns): 3 t (k + v) 4 + max(t q + t (k + v) / 2,
  t q / 2 + t (k + v)) c;
  (B) the dK/dV exchange of a rank r >= 1 at step 1 (line 627): four fp32 dK/dV (the received buffer the
  ``_AllToAllRotater`` still holds until ``self._buffer`` is rebound, line 265, the ``_partial_update`` results,
  lines 605-620, the cat sent on and the new all-to-all output) with that step's block gradients, smaller than a
  plain layer's by t (k + v) / 2 c: 4 t (k + v) 4 - t (k + v) c / 2;
  (C) rank 0's dq ``_partial_update`` at step 1 (line 632: a second fp32 dq while the first lives), three fp32
  dK/dV and its block gradients: t q 4 + 3 t (k + v) 4 - t q c / 2.
  The log-sum-exp chunk made contiguous (line 568, heads x t / 2 x 4 B) is left out.

Measured on torch's own ring attention over gloo, the largest rank's peak live bytes above the inputs
(tests/training/test_context_parallel.py).

Megatron-Core (NVIDIA/Megatron-LM @d98e8a64, TransformerEngine @d0067d0):

- the batch: each sequence split into 2 x cp chunks, rank r taking chunks r and 2cp-1-r
  (``megatron/core/utils.py`` ``_get_batch_on_this_cp_rank_per_sequence_balancing``, lines 2504-2560): seq / cp
  tokens a rank, every activation of a layer those of seq / cp tokens, as torchtitan's;
- attention: ``TEDotProductAttention`` passes ``cp_comm_type`` 'p2p' when none is configured
  (``megatron/core/extensions/transformer_engine.py`` lines 2063, 2141-2142; ``transformer_config.py`` line 1030:
  default None), TransformerEngine's ``AttnFuncWithCPAndKVP2P``
  (``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``): the forward (lines
  1685-1717) runs cp steps; before step i < cp - 1's block it posts the send of the K/V it holds (local t x (k + v)
  elements, concatenated into ``p2p_comm_buffers[0]``, line 1690) to the next rank and the receive of the previous
  rank's into a new ``p2p_comm_buffers[i + 1]`` (``flash_attn_p2p_communicate``, lines 96-135: isend / irecv), so
  the K/V travel cp - 1 times and the cp receive buffers stay in the list to the end of the forward (line 2087);
  the backward (lines 2393-2401 and 2459-2497, the 16-bit path: no FP8 attention) holds two send / receive buffers
  of [2, t x (k + v)] in the compute dtype and a dq buffer like q (line 2396), and at step i sends the K/V (step 0),
  the K/V and the accumulated dK/dV (0 < i < cp - 1), the dK/dV (step cp - 1): 2 (cp - 1) transfers of t (k + v)
  elements in the compute dtype, each posted before that step's block attention and waited after it (line 2718);
- the data-parallel gradient reduction and the distributed optimizer's shards span dp x cp ranks (the DDP buffers
  reduce on ``intra_dp_cp_group``, ``megatron/core/distributed/distributed_data_parallel.py`` line 289; the group
  from ``RankGenerator.get_ranks('dp-cp')``, ``megatron/core/parallel_state.py`` line 963);
- placement: ranks are laid out in the order tp-cp-ep-dp-pp (``parallel_state.py`` line 617, ``RankGenerator`` line
  465): a CP group's ranks are tp apart, so the ring stays inside one machine only when tp x cp <= its GPUs.

DeepSpeed-Ulysses (``cp_kind`` 'ulysses'; Jacobs et al. 2023, arXiv 2309.14509, section 3.1 and Figure 2; as Arctic
Long Sequence Training runs it, DeepSpeed @edaa7221 ``deepspeed/runtime/sequence_parallel/ulysses_sp.py``
``UlyssesSPAttentionHF``):

- outside the attention every rank holds seq / cp tokens of each sequence (``UlyssesSPDataLoaderAdapter``, lines
  564-700: the batch split along the sequence, seqlen divisible by cp, line 698), so every saved activation is that
  of seq / cp tokens (``local_tokens``), as under a ring;
- inside the attention, ``_combine_local_sequences`` (lines 166-204) all-to-alls q, k and v (``_DimZeroAllToAll``,
  ``deepspeed/sequence/layer.py``) from [s / cp, heads] to [s, heads / cp], the attention runs on the whole sequence
  for heads / cp heads, and ``_partition_global_sequence`` (lines 206-227) all-to-alls its output back to [s / cp,
  heads]: four all-to-alls per layer forward, four more (their gradients) in the backward. The head count must divide
  by cp (line 145-146 raise "Attention head count ... is not divisible by SP size"), the K/V head count divide cp or
  be divided by it (lines 147-150); with fewer K/V heads than cp ranks each K/V head is replicated
  cp / kv_heads times before the exchange (lines 131-135, 181-184: ``repeat_interleave``), so k and v reach the
  attention as cp / kv_heads times their local width:

      k' = k max(1, cp / kv_heads), v' likewise                                                   (U0)

  The attention kernel saves its q, k', v', output and log-sum-exp: t (q + k' + v' + o) elements a rank, as a plain
  attention's t (q + k + v + o) when kv_heads >= cp; the replicated excess t (k' - k + v' - v) c is a term of its own.
- buffers (not traced): in the forward, while one of q, k, v is exchanged, the local q, k, v (the op's inputs,
  counted apart), the exchanged ones made so far and the send copy and receive buffer of the one in flight
  (``rearrange(...).contiguous()`` then the all-to-all output, lines 195-197) are alive; in the backward the
  attention kernel's dq, dk', dv' (a plain layer's backward counts dq, dk, dv: the replicated excess is added) and
  the send copy and receive buffer of the gradient in flight, each exchanged gradient replacing the kernel's::

      M_f = t (q + k' + v') c + 2 t max(q, k') c                                                    (U1)
      M_b = t (k' - k + v' - v) c + 2 t max(q, k') c                                                (U2)
- exchange: each all-to-all sends (cp - 1) / cp of the rank's tensor (the paper's "communication volume per link
  ... 4Nh/P" for the four of a layer, section 3.2); blocking (no overlap with the attention kernels in
  ``UlyssesSPAttentionHF.forward``, lines 296-392)::

      V_f = L (cp - 1) / cp t (q + k' + v' + o) c
      V_b = (L + L_r) (cp - 1) / cp t (q + k' + v' + o) c                                          (U3)
"""

from __future__ import annotations

from .dtypes import dtype_bytes

SOURCE = ("torch distributed/tensor/experimental/_context_parallel/_attention.py (ring attention, lines 70-78, "
          "136, 186, 214, 253-302, 317-487, 488-657); torchtitan distributed/context_parallel/api.py, parallel_dims.py "
          "line 281")

TE_CP_SOURCE = ("TransformerEngine @d0067d0 transformer_engine/pytorch/attention/dot_product_attention/"
                "context_parallel.py AttnFuncWithCPAndKVP2P lines 96-135, 1685-1717, 2087, 2393-2401, 2459-2497; "
                "Megatron-LM @d98e8a64 megatron/core/extensions/transformer_engine.py lines 2063, 2141-2142 "
                "(cp_comm_type 'p2p')")
ULYSSES_SOURCE = ("DeepSpeed @edaa7221 deepspeed/runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF lines "
                  "131-150, 166-227; Jacobs et al. 2023 arXiv 2309.14509 (DeepSpeed-Ulysses) section 3")
FP32 = dtype_bytes("fp32")  # the accumulators' bytes per element (convert_to_f32=True, line 75)


def local_tokens(seq_len: int, cp: int) -> int:
    """Tokens of one sequence on one context-parallel rank (torchtitan ``cp_shard``) [tokens]."""
    return seq_len // cp


def ring_attention_forward_bytes(tokens: int, k_width: int, v_width: int, o_width: int, cp: int,
                                 compute_bytes: int) -> int:
    """Buffers of one layer's ring-attention forward on the worst rank [bytes]: the K/V gathered from all cp ranks
    (cp x tokens x (k + v) x compute bytes) + the larger of step 0 (the local K/V concatenated + the block output
    in the compute dtype and in fp32) and a whole-q merge (merged fp32 output, the block output in the compute
    dtype and in fp32, two fp32 temporaries: tokens x o x (16 + compute bytes))."""
    if cp <= 1:
        return 0
    kv = tokens * (k_width + v_width)
    o = tokens * o_width
    first_step = kv * compute_bytes + o * (compute_bytes + FP32)
    merge = o * (4 * FP32 + compute_bytes)
    return cp * kv * compute_bytes + max(first_step, merge)


def ring_attention_backward_bytes(tokens: int, q_width: int, k_width: int, v_width: int, cp: int,
                                  compute_bytes: int) -> int:
    """Buffers of one layer's ring-attention backward on the worst rank [bytes], beyond a plain SDPA backward's dq,
    dk, dv: the fp32 dq accumulator and the concatenated + gathered K/V, + the largest of (A) the block op at step
    1 (three fp32 dK/dV, a second block's gradients), (B) the dK/dV exchange on a rank >= 1 (four fp32 dK/dV) and
    (C) rank 0's dq partial update (a second fp32 dq, three fp32 dK/dV); the module docstring has the lines."""
    if cp <= 1:
        return 0
    q = tokens * q_width
    kv = tokens * (k_width + v_width)
    half_q = tokens // 2 * q_width  # head-tail: a rank's tokens are two chunks
    half_kv = tokens // 2 * (k_width + v_width)
    held = q * FP32 + (cp + 1) * kv * compute_bytes
    block_op = 3 * kv * FP32 + max(q + half_kv, half_q + kv) * compute_bytes
    dkv_exchange = 4 * kv * FP32 - half_kv * compute_bytes
    dq_update = q * FP32 + 3 * kv * FP32 - half_q * compute_bytes
    return held + max(block_op, dkv_exchange, dq_update)


def ring_exchange_bytes(tokens: int, k_width: int, v_width: int, cp: int, compute_bytes: int, layers: int,
                        recomputed_layers: int = 0) -> tuple[int, int]:
    """(forward, backward) bytes one context-parallel rank receives per micro-step for ring attention's K/V
    exchange [bytes] (module docstring's line numbers): every layer's forward gathers the K/V of the other cp - 1
    ranks (``_AllGatherRotater``: (cp - 1) t (k + v) c, the same bytes as cp - 1 ring rounds); its backward gathers
    them again and passes the fp32 dK/dV accumulators round the ring (``_AllToAllRotater``, cp - 1 rounds of
    t (k + v) 4 B); a checkpointed layer's recomputed forward gathers once more, in the backward::

        V_f = L (cp - 1) t (k + v) c
        V_b = (L + L_r) (cp - 1) t (k + v) c + L (cp - 1) t (k + v) 4                             (CP1)
    """
    if cp <= 1:
        return 0, 0
    kv = (cp - 1) * tokens * (k_width + v_width)
    return layers * kv * compute_bytes, (layers + recomputed_layers) * kv * compute_bytes + layers * kv * FP32


def p2p_ring_exchange_bytes(tokens: int, k_width: int, v_width: int, cp: int, compute_bytes: int, layers: int,
                            recomputed_layers: int = 0) -> tuple[int, int]:
    """(forward, backward) bytes one context-parallel rank sends (and receives) per micro-step for
    TransformerEngine's P2P ring (``AttnFuncWithCPAndKVP2P``, module docstring's Megatron-Core lines): every layer's
    forward passes its K/V on cp - 1 times; its backward passes the K/V and the dK/dV, in the compute dtype, cp - 1
    times each; a layer whose attention core is recomputed (full recomputation, or Megatron's selective
    'core_attn') runs the ring again in the backward, L_r such layers::

        V_f = L (cp - 1) t (k + v) c
        V_b = (L + L_r) (cp - 1) t (k + v) c + L (cp - 1) t (k + v) c                          (CP3)
    """
    if cp <= 1:
        return 0, 0
    kv = (cp - 1) * tokens * (k_width + v_width) * compute_bytes
    return layers * kv, (2 * layers + recomputed_layers) * kv


def p2p_ring_forward_bytes(tokens: int, k_width: int, v_width: int, cp: int, compute_bytes: int) -> int:
    """Receive buffers of one layer's P2P ring-attention forward [bytes]: the cp K/V buffers of
    ``p2p_comm_buffers`` (the local K/V concatenated and the cp - 1 received), held to the end of the forward::

        M_f = cp t (k + v) c                                                                      (CP4)

    Left out: the per-step outputs and log-sum-exps and the fp32 output correction."""
    if cp <= 1:
        return 0
    return cp * tokens * (k_width + v_width) * compute_bytes


def p2p_ring_backward_bytes(tokens: int, q_width: int, k_width: int, v_width: int, cp: int,
                            compute_bytes: int) -> int:
    """Buffers of one layer's P2P ring-attention backward beyond a plain attention backward's dq, dk, dv [bytes]:
    the two send / receive buffers of [2, t (k + v)] (K/V and dK/dV) and the dq buffer like q::

        M_b = 4 t (k + v) c + t q c                                                               (CP5)
    """
    if cp <= 1:
        return 0
    return (4 * tokens * (k_width + v_width) + tokens * q_width) * compute_bytes


def ring_exposed_seconds(exchange_seconds: float, attention_seconds: float) -> float:
    """The ring exchange's time the attention does not hide [s]: each step's transfer is issued before that step's
    block attention runs (the forward's all-gather is waited after step 0's local block, the backward's all-to-all
    of step i after step i + 1's block op, lines 438-487 and 574-627), so the exchange overlaps the attention
    kernels of its layer and nothing else::

        t_cp = max(0, V / B - t_attn)                                                            (CP2)

    TransformerEngine's P2P ring the same way: each step's send / receive is posted before that step's block
    attention and waited after it (context_parallel.py lines 1700-1717, 2459-2497, 2718), so it hides behind the
    attention kernels only (not the GEMMs)."""
    return max(0.0, exchange_seconds - attention_seconds)


def ulysses_kv_width(kv_width: int, kv_heads: int, cp: int) -> int:
    """Eq. (U0): the width k (or v) reaches the attention with under Ulysses: replicated cp / kv_heads times when the
    model has fewer K/V heads than cp ranks (ulysses_sp.py lines 131-135, 181-184)."""
    return kv_width * max(1, cp // max(1, kv_heads))


def ulysses_refusal(num_heads: int, kv_heads: int, cp: int) -> str | None:
    """Why DeepSpeed's UlyssesSPAttentionHF refuses ``cp`` ranks for this model's heads (ulysses_sp.py lines
    145-150), or None."""
    if num_heads % cp:
        return f"the attention head count {num_heads} is not divisible by context_parallel {cp}"
    if kv_heads % cp and cp % kv_heads:
        return f"the K/V head count {kv_heads} neither divides nor is divisible by context_parallel {cp}"
    return None


def ulysses_forward_bytes(tokens: int, q_width: int, k_width: int, v_width: int, compute_bytes: int) -> int:
    """Eq. (U1): one layer's Ulysses all-to-all buffers in its attention forward, beyond the local q, k, v [bytes]:
    q, k', v' exchanged, one tensor's send copy and receive buffer in flight (``k_width``, ``v_width``: eq. U0's)::

        M_f = t (q + k' + v') c + 2 t max(q, k') c
    """
    return tokens * (q_width + k_width + v_width) * compute_bytes + 2 * tokens * max(q_width, k_width) * compute_bytes


def ulysses_backward_bytes(tokens: int, q_width: int, k_width: int, v_width: int, k_local: int, v_local: int,
                           compute_bytes: int) -> int:
    """Eq. (U2): one layer's Ulysses buffers in its backward beyond a plain attention backward's dq, dk, dv [bytes]:
    the replicated K/V gradients' excess (``k_width`` - ``k_local``, eq. U0) and one gradient's send copy and
    receive buffer in flight::

        M_b = t (k' - k + v' - v) c + 2 t max(q, k') c
    """
    return (tokens * (k_width - k_local + v_width - v_local) * compute_bytes
            + 2 * tokens * max(q_width, k_width) * compute_bytes)


def ulysses_exchange_bytes(tokens: int, q_width: int, k_width: int, v_width: int, o_width: int, cp: int,
                           compute_bytes: int, layers: int, recomputed_layers: int = 0) -> tuple[int, int]:
    """Eq. (U3): (forward, backward) bytes one Ulysses rank sends per micro-step: four all-to-alls a layer (q, k',
    v', output), each sending (cp - 1) / cp of the rank's tensor; the backward's four of the gradients, and a
    recomputed layer's forward four more::

        V_f = L (cp - 1) / cp t (q + k' + v' + o) c
        V_b = (L + L_r) (cp - 1) / cp t (q + k' + v' + o) c
    """
    if cp <= 1:
        return 0, 0
    one = (cp - 1) * tokens * (q_width + k_width + v_width + o_width) * compute_bytes // cp
    return layers * one, (layers + recomputed_layers) * one

"""Context parallelism (torchtitan ``context_parallel_degree``): per-device tokens and ring attention's buffers.

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
"""

from __future__ import annotations

from .dtypes import dtype_bytes

SOURCE = ("torch distributed/tensor/experimental/_context_parallel/_attention.py (ring attention, lines 70-78, "
          "136, 186, 214, 253-302, 317-487, 488-657); torchtitan distributed/context_parallel/api.py, parallel_dims.py "
          "line 281")

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


def ring_exposed_seconds(exchange_seconds: float, attention_seconds: float) -> float:
    """The ring exchange's time the attention does not hide [s]: each step's transfer is issued before that step's
    block attention runs (the forward's all-gather is waited after step 0's local block, the backward's all-to-all
    of step i after step i + 1's block op, lines 438-487 and 574-627), so the exchange overlaps the attention
    kernels of its layer and nothing else::

        t_cp = max(0, V / B - t_attn)                                                            (CP2)
    """
    return max(0.0, exchange_seconds - attention_seconds)

"""Context parallelism (torchtitan ``context_parallel_degree``): per-device tokens and ring attention's buffers.

torchtitan shards every sequence over the ``cp`` mesh (``torchtitan/distributed/context_parallel/api.py``
``prepare_context_parallel_input`` / ``cp_shard``, commit b5bcd76, lines 36-228: inputs, labels and positions split along the sequence, with the
head-tail load balancer by default: 2 x cp chunks, rank i taking chunks i and 2cp-1-i), so every activation
of a layer, the logits and the loss are those of seq / cp tokens. Parameters are sharded by FSDP over
dp_shard x cp (``torchtitan/distributed/parallel_dims.py`` line 281: ``fsdp = self.dp_shard * self.cp``).

Attention runs as ring attention (torch ``torch/distributed/tensor/experimental/_context_parallel/_attention.py``,
torch 2.13): autograd saves the local q, k, v, output and log-sum-exp as plain SDPA would (the ring is inside
one op), and the op allocates, per layer in flight:

- forward (``_templated_ring_attention``, lines 317-487): the local K and V concatenated (``torch.cat``, line
  438) and the K and V of all cp ranks, gathered once by the default ``_AllGatherRotater`` (rotate_method
  ALL_GATHER, line 77; lines 273-302): (cp + 1) x local (k + v) in the compute dtype; and the ``_SDPAMerger``'s
  fp32 output (``convert_to_f32=True``, line 75): t o 4. The temporaries of its update ``out - sigmoid(block_lse
  - lse) * (out - block_out)`` (``_merge_one``, lines 151-200) do not coincide with the gathered K/V's peak
  (tests/training/test_context_parallel.py measures the whole forward);
- backward (``_templated_ring_attention_backward``, lines 488-657): the fp32 dq accumulator (lines 513-515),
  the fp32 dK/dV three times (the accumulator or the buffer received from the previous rank, the ``torch.cat``
  sent on, line 625, and the all-to-all's output, ``dkv_rotater``), and the concatenated + gathered K/V again
  ((cp + 1) x local (k + v), lines 533-534). The per-block dq, dk, dv of the SDPA backward are a plain layer's.
"""

from __future__ import annotations

SOURCE = ("torch distributed/tensor/experimental/_context_parallel/_attention.py (ring attention, lines 70-78, "
          "273-302, 317-487, 488-657); torchtitan distributed/context_parallel/api.py, parallel_dims.py line 281")


def local_tokens(seq_len: int, cp: int) -> int:
    """Tokens of one sequence on one context-parallel rank (torchtitan ``cp_shard``) [tokens]."""
    return seq_len // cp


def ring_attention_forward_bytes(tokens: int, k_width: int, v_width: int, o_width: int, cp: int,
                                 compute_bytes: int) -> int:
    """Buffers of one layer's ring-attention forward on one rank [bytes]: the local K/V concatenated and K/V
    gathered from all cp ranks ((cp + 1) x local tokens x (k + v) x compute bytes) + the merger's fp32 output
    (tokens x o x 4 B)."""
    if cp <= 1:
        return 0
    return (cp + 1) * tokens * (k_width + v_width) * compute_bytes + tokens * o_width * 4


def ring_attention_backward_bytes(tokens: int, q_width: int, k_width: int, v_width: int, cp: int,
                                  compute_bytes: int) -> int:
    """Buffers of one layer's ring-attention backward on one rank [bytes], beyond a plain SDPA backward: the fp32
    dq accumulator, three fp32 dK/dV buffers (held, sent, received) and the concatenated + gathered K/V."""
    if cp <= 1:
        return 0
    dq = tokens * q_width * 4
    dkv = 3 * tokens * (k_width + v_width) * 4
    gathered = (cp + 1) * tokens * (k_width + v_width) * compute_bytes
    return dq + dkv + gathered

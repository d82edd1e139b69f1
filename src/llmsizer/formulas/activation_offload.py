"""Activation offloading to host memory (torchtune ``OffloadActivations``): what stays on the device.

torchtune ``torchtune/training/_activation_offloading.py`` (commit bd2a0fc) is a ``saved_tensors_hooks`` context
that the recipes enter around the model's forward (``get_act_offloading_ctx_manager``, lines 388-465):

- pack (lines 137-211): every tensor autograd saves that is on the accelerator, at least ``min_offload_size`` =
  1024 bytes (line 71) and not an ``nn.Parameter`` / ``nn.Buffer`` is copied into a new pinned host tensor
  (``torch.empty_like(..., pin_memory=True, device="cpu")``, lines 179-199); autograd keeps only an id, so the
  device copy is freed. With streams (the default) the device original is kept in ``fwd_stash`` until
  ``max_fwd_stash_size`` = 5 later tensors have been packed (lines 165-172, 200-204), so that the copy can finish;
- unpack (lines 240-361): in the backward each tensor comes back when the autograd node that saved it runs, and
  is freed once the next node has started (``prev_node_ids``, lines 272-280, 349-353): the device holds the saved
  tensors of about one node at a time, never a whole layer more;
- the output projection runs under ``NoOpManager`` (lines 405-433): the lm_head input and the loss, computed
  outside the context, are not offloaded.

With activation checkpointing (torchtune recommends both together) the tensors saved are the checkpoint inputs
(non-reentrant checkpointing saves its inputs through ``_NoopSaveInputs``, under the outer hooks, torch
``torch/utils/checkpoint.py``), so they go to the host and the recomputed layer lives on the device only during
its own backward.

The pack hook runs once per *save*, not per tensor: a tensor saved by several ops (an RMSNorm's fp32 input, saved
by ``pow`` and by the ``mul`` by 1/rms; the q/k/v projections' shared input; the gate/up projections' shared
input; the rotary cos/sin, saved by the q and the k rotation of every layer) gets a host copy per save
(``get_tensor_id`` per call, lines 125-128, 144). :func:`repeated_saves` lists those extra copies.

So, per device and micro-batch in flight: forward end holds at most the last layer's saved tensors (the stash);
the backward of layer j holds the saved tensors of the node being differentiated (the largest group of a
layer's saved tensors bounds it; a checkpointed layer: its input and what its recompute rebuilds, the recompute
running outside the hooks); the host holds every save of every layer (pinned). torchtitan has the same mechanism only in its experimental
graph_trainer (``torchtitan/experiments/graph_trainer/cpu_offload.py``, over ``torch._functorch._activation_offloading``).
Tensors under 1 KiB stay on the device; they are a few hundred bytes per layer and not modelled.
"""

from __future__ import annotations

MIN_OFFLOAD_BYTES = 1024  # torchtune _activation_offloading.py line 71 (min_offload_size)
FWD_STASH_TENSORS = 5  # line 70 (max_fwd_stash_size): device originals kept while their copies run
SOURCE = "torchtune training/_activation_offloading.py (OffloadActivations, lines 137-211, 240-361, 405-433)"


def offload_stash_bytes(last_save_bytes: int, final_norm_bytes: int) -> int:
    """Saved-activation bytes left on the device at forward end: the forward stash holds the originals of the
    last ``FWD_STASH_TENSORS`` saves, which are the final norm's (its fp32 input saved twice, 1/rms, the
    normalised tensor: ``final_norm_bytes``) and the last decoder layer's last save (``last_save_bytes``: the
    down projection's input, or a checkpointed layer's input). The stash is emptied when the backward starts
    (lines 343-347)."""
    return last_save_bytes + final_norm_bytes


def offload_host_bytes(layer_kept: list[int], in_flight: int, per_layer_repeats: int = 0) -> int:
    """Pinned host bytes: every layer's saved tensors of every micro-batch in flight, plus each layer's
    ``per_layer_repeats`` (:func:`repeated_saves`) [bytes]."""
    return (sum(layer_kept) + per_layer_repeats * len(layer_kept)) * in_flight


def repeated_saves(tokens: int, hidden: int, residual_bytes: int, compute_bytes: int, head_dim: int,
                   norms: int, qkv_consumers: int, mlp_consumers: int) -> int:
    """Extra host bytes of one layer from tensors saved more than once [bytes] (module docstring): each RMSNorm's
    fp32 input a second time, the q/k/v input (qkv_consumers - 1) more times, the gate/up input
    (mlp_consumers - 1) more times, and the rotary cos/sin saved by the q and k rotations (4 saves of
    t x head_dim)."""
    norm = norms * tokens * hidden * max(4, residual_bytes)
    shared = (max(0, qkv_consumers - 1) + max(0, mlp_consumers - 1)) * tokens * hidden * compute_bytes
    rope = 4 * tokens * head_dim * residual_bytes
    return norm + shared + rope


STREAM_SOURCE = ("torchtune training/_activation_offloading.py @bd2a0fc OffloadActivations(use_streams=True): pack "
                 "copies each save to pinned host memory on the side stream s1 after s1.wait_stream(s0) and the "
                 "compute stream waits only for copies older than max_fwd_stash_size saves (pack, lines 137-211); unpack "
                 "copies each save back on s1 and the compute stream waits for it (s0.wait_stream(s1); unpack_tensor_with_streams, lines 240-361)")


def offload_step_seconds(forward_seconds: float, backward_seconds: float, offloaded_bytes: float,
                         link_bandwidth: float) -> float:
    """One micro-step's device time with activation offloading on a side stream [s] (``STREAM_SOURCE``).

    Every offloaded save crosses the host link once device-to-host in the forward and once host-to-device in the
    backward, X bytes each way per micro-step at B bytes/s per direction. The copies run on their own stream beside
    the compute, which waits for them only through the bounded forward stash and, in the backward, for the save the
    next autograd node needs: each phase takes the longer of its compute and its copies::

        t_x = X / B;   t_step = max(c_f, t_x) + max(c_b, t_x)                                          (AO1)

    (the first copy of a phase, one save of ~1/(saves per step) of X, is left unhidden: not modelled)."""
    if offloaded_bytes <= 0:
        return forward_seconds + backward_seconds
    t_x = offloaded_bytes / link_bandwidth
    return max(forward_seconds, t_x) + max(backward_seconds, t_x)

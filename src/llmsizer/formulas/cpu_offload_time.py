"""Step time of fully sharded training with the parameters, gradients and optimizer states in host memory (PyTorch
FSDP2 ``CPUOffloadPolicy``; torchtune ``fsdp_cpu_offload: True``).

**Where the states live.** ``CPUOffloadPolicy`` "offloads parameters, gradients, and optimizer states to CPU.
Sharded parameters are copied host-to-device before all-gather. The all-gathered parameters are freed according to
``reshard_after_forward``. Sharded gradients are copied device-to-host in backward, and the optimizer step runs on
CPU with CPU optimizer states" (torch 2.13.0 ``distributed/fsdp/_fully_shard/_fsdp_api.py`` lines 183-197; pinned
by default, ``pin_memory=True``). In the code: the sharded parameter is moved to the CPU and pinned at wrap time
(``_fsdp_param.py`` lines 312-315); each all-gather's input is the shard copied to the device,
``sharded_param_data.to(self.device, non_blocking=True)`` (``all_gather_inputs``, lines 897-900; lines 839-842 for
tensor subclasses), on the all-gather copy-in stream (``_fsdp_collectives.py`` ``foreach_all_gather`` lines
336-337), which the all-gather stream waits for (line 362); each reduce-scattered gradient shard is copied to the
host, ``new_sharded_grad.to(torch.device("cpu"), non_blocking=...)``, on the post-reduce stream after its
reduce-scatter (``foreach_reduce`` lines 711-743), asynchronously when the memory is pinned and nothing consumes
the gradient on the CPU during the backward (no accumulation into an existing ``.grad``, no post-accumulate-grad
hook), and ``finalize_backward`` waits for those copies before the optimizer (``_fsdp_param_group.py`` lines
769-772). A second micro-step's gradient is added into the host gradient on the CPU
(``fsdp_param.sharded_param.grad._local_tensor += new_sharded_grad``, ``_fsdp_collectives.py`` lines 744-750).

**Host-link traffic** per device and micro-step, on s devices sharing the parameters, W_s the bytes of the weights
as stored (the sharded parameter's dtype: the copy precedes any mixed-precision cast, ``_to_dtype_if_needed`` runs
on the device copy, line 901), G the bytes of the trained parameters' gradients::

    forward  H2D:  h_f = W_s / s                      (every unit's shard, once, before its all-gather)   (H1)
    backward H2D:  h_b = W_s / s  (reshard_after_forward: the unit is gathered again),  0 otherwise
    backward D2H:  d_b = G / s     (in the parameter's dtype: reduce_output is cast back first, line 696)

A host link of B_link bytes/s per direction (PCIe is full duplex: the H2D and D2H copies of the backward run in
opposite directions at once)::

    t_hf = h_f / B_link,   t_hb = max(h_b, d_b) / B_link                                           (H2)

**Overlap.** The copies use the host link, the collectives the device interconnect; each unit's H2D copy precedes
its all-gather and its D2H copy follows its reduce-scatter, on side streams, so across the U units they pipeline
with each other and with the compute of their phase. Each phase's transfers take the longer of the two, and the
first unit's copy and the last unit's copy are exposed with the first all-gather and the last reduction
(formulas/training_time.py eq. (8'), with)::

    c_f' = max(c_f, t_hf),   c_b' = max(c_b, t_hb),   a_1' = a_1 + t_hf / U,   r_U' = r_U + (d_b / B_link) / U   (H3)

**The optimizer step on the host.** The optimizer runs over the host copies (torch's fused AdamW on CPU:
``_fused_adamw_`` -> aten/src/ATen/native/cpu/FusedAdamKernel.cpp ``adam_fused_step_impl``, pytorch @000510a lines
60-92: one vectorised pass that loads parameter, gradient and both moments and stores parameter and moments, the
gradient only under a grad scaler: formulas/optimizer_step.py eq. (O2), b = 2p + g + 4s bytes per element). It is
an elementwise stream over host DRAM, and every rank of a machine steps at the same time on its share of the cores
(torchtune ``set_torch_num_threads``: os.cpu_count() // world size threads per rank, torchtune @30b8519
torchtune/training/_distributed.py lines 137-150, called by full_finetune_distributed.py lines 746-749 "This
provides ~2x speed up when benchmarking fused AdamW on CPU"), so the g ranks of one machine share its memory
bandwidth B_host at the CPU's memory-bound share eta_cpu::

    t_opt,host = (g N_t / s) b / (eta_cpu B_host)          (N_t trained elements; g N_t / s on one machine)   (H4)

It runs after the backward has waited for the D2H copies and before the next forward's first H2D copy: nothing
overlaps it. Gradient accumulation (k > 1) adds each later micro-step's gradient on the host, 3g bytes per element
(eq. (O3)) at the same host bandwidth.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InputError
from .training_time import DataParallelComm

SOURCE = ("torch 2.13.0 distributed/fsdp/_fully_shard: _fsdp_api.py CPUOffloadPolicy L183-199, _fsdp_param.py "
          "L312-315 and all_gather_inputs L897-900, _fsdp_collectives.py foreach_all_gather L336-362 and "
          "foreach_reduce L711-750, _fsdp_param_group.py finalize_backward L769-772")


class HostLinkTraffic(NamedTuple):
    """Eq. (H1): one device's host-link bytes per micro-step [B]."""

    forward_h2d: float
    backward_h2d: float
    backward_d2h: float

    @property
    def total(self) -> float:
        return self.forward_h2d + self.backward_h2d + self.backward_d2h


def host_link_traffic(stored_weight_bytes: float, grad_bytes: float, shards: int,
                      reshard_after_forward: bool = True) -> HostLinkTraffic:
    """Eq. (H1): H2D bytes of the parameter shards (forward; backward again when resharded after the forward) and
    D2H bytes of the gradient shards, per device and micro-step, for ``shards`` devices sharing the parameters.

    >>> host_link_traffic(800.0, 400.0, 8)
    HostLinkTraffic(forward_h2d=100.0, backward_h2d=100.0, backward_d2h=50.0)
    >>> host_link_traffic(800.0, 400.0, 8, reshard_after_forward=False).backward_h2d
    0.0
    """
    if shards < 1:
        raise InputError(f"shards must be >= 1, got {shards}")
    if stored_weight_bytes < 0 or grad_bytes < 0:
        raise InputError("byte counts must not be negative")
    shard = stored_weight_bytes / shards
    return HostLinkTraffic(shard, shard if reshard_after_forward else 0.0, grad_bytes / shards)


def offloaded_comm(comm: DataParallelComm, traffic: HostLinkTraffic, link_bandwidth: float) -> DataParallelComm:
    """Eqs. (H2)-(H3): the data-parallel collectives of ``comm`` with the host-link copies of ``traffic`` at
    ``link_bandwidth`` bytes/s per direction folded into their phases (the longer of collectives and copies per
    phase; the first unit's H2D copy before the first all-gather, the last unit's D2H copy after the last reduction).

    >>> from llmsizer.formulas.training_time import data_parallel_comm
    >>> c = data_parallel_comm(8, 8, 800.0, 400.0, "full", 10, 100.0)
    >>> o = offloaded_comm(c, host_link_traffic(800.0, 400.0, 8), 10.0)
    >>> round(o.forward_seconds, 3), round(o.backward_seconds, 3), round(o.first_seconds, 3), round(o.last_seconds, 3)
    (10.0, 10.5, 1.7, 0.85)
    """
    if link_bandwidth <= 0:
        raise InputError(f"host link bandwidth must be positive, got {link_bandwidth}")
    t_hf = traffic.forward_h2d / link_bandwidth
    t_hb = max(traffic.backward_h2d, traffic.backward_d2h) / link_bandwidth
    return comm._replace(forward_seconds=max(comm.forward_seconds, t_hf),
                         backward_seconds=max(comm.backward_seconds, t_hb),
                         first_seconds=comm.first_seconds + t_hf / comm.units,
                         last_seconds=comm.last_seconds + traffic.backward_d2h / link_bandwidth / comm.units)


def host_step_seconds(machine_elements: float, bytes_per_element: float, host_bandwidth: float,
                      efficiency: float) -> float:
    """Eq. (H4): seconds of an elementwise step (the optimizer update, eq. (O1)/(O2); a gradient accumulation,
    eq. (O3)) over ``machine_elements`` held in one machine's host memory of ``host_bandwidth`` bytes/s, reached at
    ``efficiency`` (all its ranks step at once, so they share it).

    >>> host_step_seconds(8.8e9 * 8, 14.0, 409.6e9, 0.5)
    4.8125
    """
    if machine_elements < 0 or bytes_per_element < 0:
        raise InputError("element count and bytes per element must not be negative")
    if host_bandwidth <= 0 or not 0 < efficiency <= 1:
        raise InputError("host bandwidth must be positive and its efficiency in (0, 1]")
    return machine_elements * bytes_per_element / (host_bandwidth * efficiency)

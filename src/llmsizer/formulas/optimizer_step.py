"""Device-memory traffic of the per-step, token-independent work of training: the optimizer step and gradient
accumulation.

Both are elementwise over the trained parameters, so they are bound by device memory whatever the batch: a fixed
cost per optimizer step (per micro-step for accumulation) that matters when few tokens run per step.

**Adam / AdamW** (torch/optim/adam.py, torch 2.13; ``AdamW`` is ``Adam`` with ``decoupled_weight_decay=True``,
torch/optim/adamw.py). Per trained element, with p, g and s the element sizes of the parameter, its gradient and
each of the two moments (the default, non-capturable, no-amsgrad path):

- ``foreach`` (``_multi_tensor_adam``, lines 691-799; torch's default on CUDA): ``_foreach_mul_(params)``
  (decoupled weight decay: 2p), ``_foreach_lerp_(exp_avgs, grads)`` (2s + g), ``_foreach_mul_(exp_avg_sqs)`` (2s),
  ``_foreach_addcmul_(exp_avg_sqs, grads, grads)`` (2s + g), ``_foreach_sqrt(exp_avg_sqs)`` (2s, a new list),
  ``_foreach_div_`` and ``_foreach_add_`` on it (2s each), ``_foreach_addcdiv_(params, exp_avgs, sqrt)``
  (2p + 2s)::

      b_foreach = 4p + 2g + 14s                                                            (O1)

- ``for-loop`` (``_single_tensor_adam``, lines 419-546): the same ops one tensor at a time (``param.mul_``,
  ``exp_avg.lerp_``, ``exp_avg_sq.mul_().addcmul_()``, ``exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)``,
  ``param.addcdiv_``): the same bytes as (O1), more kernel launches.
- ``fused`` (``_fused_adam``, line 877: ``torch._fused_adamw_``): one kernel that reads parameter, gradient and
  both moments and writes parameter and moments (the gradient is stored back only when a GradScaler's
  ``grad_scale`` is given: aten/src/ATen/native/cuda/fused_adam_utils.cuh, ``if (i != kGradIdx ||
  grad_scale_ptr) load_store(...)``)::

      b_fused = 2p + g + 4s                                                                (O2)

- bitsandbytes optimizers (paged or not; ``functional.optimizer_update_32bit`` /
  ``optimizer_update_8bit_blockwise``: one kernel per tensor, fp32 or uint8 + block absmax moments): (O2) with
  s = 4, or s = 1 for the 8-bit states (their 1 absmax per 256 elements left out).

**Gradient accumulation**: from the second micro-step of an optimizer step on, autograd's ``AccumulateGrad`` adds
each new gradient into ``.grad`` in place (torch/csrc/autograd/functions/accumulate_grad.h: ``variable_grad +=
new_grad``): 3g per trained element and micro-step (O3).

A model with separate master weights (DeepSpeed, Megatron: an fp32 master of m bytes beside the half-precision
model of p bytes) updates the master (p -> m in O1/O2) and copies it back to the model (m + p) (O4).

Time at the device memory bandwidth B_mem x eta: t = n_local b / (eta B_mem) per optimizer step (accumulation:
per micro-step after the first), n_local the trained elements the device holds (sharded optimizers and
gradients: / data-parallel degree).
"""

from __future__ import annotations

from ..errors import InputError
from ..suggest import unknown_choice

ADAM_IMPLS = ("fused", "foreach", "for-loop")
BNB_OPTIMIZERS = ("paged-adamw", "paged-adamw-8bit", "adamw-8bit")
SOURCE = "torch/optim/adam.py _multi_tensor_adam L691-799, _single_tensor_adam L419-546, _fused_adam L877"


def adam_step_bytes(impl: str, param: float, grad: float, state: float, master: float = 0.0) -> float:
    """Bytes per trained element of one Adam/AdamW step: (O1) foreach / for-loop, (O2) fused, (O4) with a
    master copy of ``master`` bytes (the update runs on the master)."""
    if impl not in ADAM_IMPLS:
        raise InputError(unknown_choice("optimizer implementation", impl, ADAM_IMPLS))
    if min(param, grad, state, master) < 0:
        raise InputError("element sizes must not be negative")
    p = master or param
    b = 2 * p + grad + 4 * state if impl == "fused" else 4 * p + 2 * grad + 14 * state
    return b + (master + param if master else 0.0)


def optimizer_step_bytes(optimizer: str, impl: str, param: float, grad: float, state: float,
                         master: float = 0.0) -> float | None:
    """Bytes per trained element of one step of ``optimizer`` (None: no sourced kernel count, e.g. Adafactor,
    Lion, SGD)."""
    if optimizer in ("adamw", "adam"):
        return adam_step_bytes(impl, param, grad, state, master)
    if optimizer in BNB_OPTIMIZERS:
        return adam_step_bytes("fused", param, grad, 1.0 if optimizer.endswith("8bit") else 4.0, master)
    return None


def accumulation_bytes(grad: float) -> float:
    """Eq. (O3): bytes per trained element that adding one micro-step's gradient into ``.grad`` moves."""
    if grad < 0:
        raise InputError("element size must not be negative")
    return 3.0 * grad

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

**bitsandbytes optimizers** (paged or not; csrc/kernels.cu and csrc/ops.cu at tag 0.50.1, commit 37d2a93): one
kernel per tensor that loads the gradient, the states and the parameter and stores the parameter and the states.
With k states (2 Adam, 1 Lion) of s bytes (4: fp32 whatever the parameter dtype; 1: the uint8 8-bit states) and,
for the 8-bit states, one fp32 absmax per block of ``BNB_BLOCKSIZE`` = 256 elements loaded and stored per state::

      b_bnb = 2p + g + k (2s + 8 a / 256),  a = 1 for the 8-bit states, else 0                (O5)

- 32-bit (``kOptimizer32bit2State`` for Adam; ``kOptimizer32bit1State``, kernels.cu lines 805-909, for Lion:
  ``Load(g)``, ``LoadFloat(state1)``, ``Load(p)``, then ``Store(p)``, ``StoreFloat(state1)``; ops.cu lines 136-149
  launch it alone for LION unless ``max_unorm > 0``, bitsandbytes' default 0): Lion 2p + g + 8.
- 8-bit blockwise (``kOptimizerStatic8bit2StateBlockwise``; ``kOptimizerStatic8bit1StateBlockwise``, kernels.cu
  lines 1152-1324, for Lion: ``LoadT(g)``, ``LoadChar(state1)``, ``LoadT(p)``, ``absmax1[i / BLOCK_SIZE]`` read
  and written once per block, ``StoreT(p)``, ``StoreChar(state1)``; ops.cu lines 154-189 ``BLOCKSIZE_1STATE`` /
  ``BLOCKSIZE_2STATE`` 256): Lion 2p + g + 2 + 1/32.
- the 256-entry quantization map is read once per thread block into shared memory (not per element) and left
  out; tensors under ``min_8bit_size`` (4096 elements) run the 32-bit kernel, a share of the elements too small
  to count (left out).

**SGD** (torch/optim/sgd.py, torch 2.13.0; weight decay 0, no Nesterov, torch's defaults; a step after the first,
whose momentum buffer exists), per trained element with s the momentum buffer's element size:

- without momentum, every implementation: ``param += -lr grad`` (``_multi_tensor_sgd`` line 472
  ``_foreach_add_(params, grads)``; ``_single_tensor_sgd`` line 379 ``param.add_``; fused: the depth-2 kernel,
  aten/src/ATen/native/cuda/FusedSgdKernel.cu @064f50b lines 88-112, loads parameter and gradient, stores the
  parameter)::

      b_sgd = 2p + g                                                                       (O6)

- with momentum, ``foreach`` (lines 445-446 ``_foreach_mul_(bufs)``, 2s; ``_foreach_add_(bufs, grads)``, 2s + g;
  line 472 ``_foreach_add_(params, bufs)``, 2p + s) and ``for-loop`` (line 364 ``buf.mul_().add_()``, line 379
  ``param.add_(buf)``: the same ops one tensor at a time)::

      b_sgdm = 2p + g + 5s                                                                 (O7)

- with momentum, ``fused`` (``_fused_sgd`` line 529 ``torch._fused_sgd_``: the depth-3 kernel of
  FusedSgdKernel.cu lines 88-112 loads parameter, gradient and buffer and stores parameter and buffer, the gradient
  only under a GradScaler's ``grad_scale``)::

      b_sgdm_fused = 2p + g + 2s                                                           (O8)

**Adafactor** (torch.optim.Adafactor, torch/optim/_adafactor.py, torch 2.13.0: the implementation llmsizer sizes
and ``llmsizer measure`` runs, ``OPTIMIZER_INFO``; weight decay 0, its default). Per element of a matrix, with v
the size of the full-size temporaries (``row_var @ col_var``, in the states' dtype s): ``p.norm()`` for the step
size (p); the row and column statistics ``torch.norm(grad, dim=-1)`` and ``dim=-2`` (2g; their updates touch
rows + columns elements, left out); ``var_estimate = row_var @ col_var`` (writes s), ``div_`` (2s),
``clamp_min_`` (2s), ``rsqrt_`` (2s), ``mul_(grad)`` (2s + g), ``update.norm()`` (s), then

- ``for-loop`` (``_single_tensor_adafactor`` lines 381-416): ``param.add_(update, alpha)`` (2p + s)::

      b_adafactor = 3p + 3g + 11s                                                          (O9)

- ``foreach`` (``_multi_tensor_adafactor`` lines 530-599): the same, with the step size applied by its own
  ``_foreach_mul_(updates, alphas)`` (2s) before ``_foreach_add_(params, updates)``: 3p + 3g + 13s (O10).

torch's Adafactor has no fused implementation (its constructor takes ``foreach`` only, line 33), and ``foreach``
unset runs ``_single_tensor_adafactor`` on every device (``adafactor()`` lines 636-639: ``if foreach:``, no
``_default_to_fused_or_foreach``): ``fused`` counts (O9). 1-D tensors (norm weights, biases) keep a full-size
``variance`` instead of the factored statistics (lines 407-410); they are counted at the matrix rate, a share of a
model's elements under 0.1 %.

**Gradient accumulation**: from the second micro-step of an optimizer step on, autograd's ``AccumulateGrad`` adds
each new gradient into ``.grad`` in place (torch/csrc/autograd/functions/accumulate_grad.h: ``variable_grad +=
new_grad``): 3g per trained element and micro-step (O3).

Megatron keeps the gradient in its own ``main_grad`` buffer of g bytes per element (fp32 under bf16; fp16 under fp16
without fp32 accumulation) and, unfused, its DDP backward hook adds the model-dtype ``param.grad`` of p bytes into
it (NVIDIA/Megatron-LM @d98e8a64 megatron/core/distributed/distributed_data_parallel.py:575-578,
``param.main_grad.add_(param.grad.data)``; @9aad920 megatron/model/distributed.py:174): it reads ``main_grad`` and
``param.grad`` and writes ``main_grad``::

    b_megatron = 2g + p                                                                  (O3m)

(= 3g when the buffer has the model's dtype, fp16; 10 B under bf16 with fp32 ``main_grad``).

Megatron's ``gradient_accumulation_fusion`` removes that pass: Transformer Engine's wgrad GEMM accumulates into the
fp32 ``main_grad`` itself (``fuse_wgrad_accumulation``, NVIDIA/Megatron-LM @d98e8a64
megatron/core/extensions/transformer_engine.py:1293, 1524, 2527), and the DDP backward hook skips its
``param.main_grad.add_(param.grad.data)`` for those weights (megatron/core/distributed/distributed_data_parallel.py:
575-578, ``grad_added_to_main_grad``): 0 bytes of (O3) for them. Only the wgrad-fused linears set that flag (TE's,
and Megatron's own ``LinearWithGradAccumulationAndAsyncCommunication``, tensor_parallel/layers.py:733-762); the DDP
wrapper sets it False on every parameter (distributed_data_parallel.py:184-187), so the word embedding (a lookup), the
norm weights and an MoE router's weight still pay (O3m) each micro-step (estimate/duration.py ``unfused_elements``).
The GEMM's read of ``main_grad`` as its accumulator is part of a compute-bound GEMM and is not timed.

A model with separate master weights (DeepSpeed, Megatron: an fp32 master of m bytes beside the half-precision
model of p bytes) updates the master (p -> m in O1/O2) and copies it back to the model (m + p) (O4).

Time at the device memory bandwidth B_mem x eta: t = n_local b / (eta B_mem) per optimizer step (accumulation:
per micro-step after the first), n_local the trained elements the device holds (sharded optimizers and
gradients: / data-parallel degree).
"""

from __future__ import annotations

from ..errors import InputError
from ..suggest import unknown_choice
from .training_states import BNB_BLOCKSIZE, optimizer_info

ADAM_IMPLS = ("fused", "foreach", "for-loop")
SOURCE = "torch/optim/adam.py _multi_tensor_adam L691-799, _single_tensor_adam L419-546, _fused_adam L877"
SGD_SOURCE = ("eqs. (O6)-(O8), weight decay 0 and no Nesterov (torch's defaults): torch/optim/sgd.py "
              "_multi_tensor_sgd L445-472, _single_tensor_sgd L364-379, _fused_sgd L529; aten/src/ATen/native/cuda/FusedSgdKernel.cu @064f50b L88-112")
ADAFACTOR_SOURCE = ("eqs. (O9)/(O10), weight decay 0 (torch's default), 1-D tensors at the matrix rate: "
                    "torch/optim/_adafactor.py _single_tensor_adafactor L381-416, "
                    "_multi_tensor_adafactor L530-599, adafactor() L636-639")
BNB_SOURCE = ("eq. (O5): bitsandbytes @0.50.1 csrc/kernels.cu kOptimizer32bit1State L805-909, "
              "kOptimizerStatic8bit1StateBlockwise L1152-1324 (and the 2-state kernels); csrc/ops.cu L136-189")


def adam_step_bytes(impl: str, param: float, grad: float, state: float, master: float = 0.0) -> float:
    """Bytes per trained element of one Adam/AdamW step: (O1) foreach / for-loop, (O2) fused, (O4) with a
    master copy of ``master`` bytes (the update runs on the master)."""
    _check(impl, param, grad, state, master)
    p = master or param
    b = 2 * p + grad + 4 * state if impl == "fused" else 4 * p + 2 * grad + 14 * state
    return b + (master + param if master else 0.0)


def bnb_step_bytes(states: int, eight_bit: bool, param: float, grad: float, master: float = 0.0) -> float:
    """Eq. (O5): bytes per trained element of one bitsandbytes optimizer step with ``states`` states (2 Adam, 1
    Lion), uint8 block-wise states when ``eight_bit`` else fp32; (O4) with a master copy of ``master`` bytes."""
    if min(param, grad, master) < 0 or states < 0:
        raise InputError("element sizes and state counts must not be negative")
    p = master or param
    per_state = 2 * 1 + 2 * 4 / BNB_BLOCKSIZE if eight_bit else 2 * 4
    return 2 * p + grad + states * per_state + (master + param if master else 0.0)


def sgd_step_bytes(impl: str, momentum: bool, param: float, grad: float, state: float,
                   master: float = 0.0) -> float:
    """Bytes per trained element of one torch SGD step: (O6) without momentum, (O7) with momentum ``foreach`` /
    ``for-loop``, (O8) with momentum ``fused``; (O4) with a master copy of ``master`` bytes."""
    _check(impl, param, grad, state, master)
    p = master or param
    b = 2 * p + grad
    if momentum:
        b += 2 * state if impl == "fused" else 5 * state
    return b + (master + param if master else 0.0)


def adafactor_step_bytes(impl: str, param: float, grad: float, state: float, master: float = 0.0) -> float:
    """Bytes per trained element of one torch Adafactor step: (O10) ``foreach``, (O9) otherwise (``for-loop``, and
    ``fused``, which torch's Adafactor lacks: it runs the for-loop); (O4) with a master copy of ``master`` bytes."""
    _check(impl, param, grad, state, master)
    p = master or param
    b = 3 * p + 3 * grad + (13 if impl == "foreach" else 11) * state
    return b + (master + param if master else 0.0)


def _check(impl: str, *sizes: float) -> None:
    if impl not in ADAM_IMPLS:
        raise InputError(unknown_choice("optimizer implementation", impl, ADAM_IMPLS))
    if min(sizes) < 0:
        raise InputError("element sizes must not be negative")


def optimizer_step_bytes(optimizer: str, impl: str, param: float, grad: float, state: float,
                         master: float = 0.0) -> float:
    """Bytes per trained element of one step of ``optimizer``. A bitsandbytes optimizer (``OptimizerInfo.library``)
    runs its own kernel, whatever ``impl`` and ``state``: eq. (O5); torch's: (O1)/(O2) Adam, (O6)-(O8) SGD,
    (O9)/(O10) Adafactor."""
    info = optimizer_info(optimizer)
    if info.bnb:
        return bnb_step_bytes(round(info.states), info.eight_bit, param, grad, master)
    if optimizer in ("sgd", "sgd-momentum"):
        return sgd_step_bytes(impl, optimizer == "sgd-momentum", param, grad, state, master)
    if optimizer == "adafactor":
        return adafactor_step_bytes(impl, param, grad, state, master)
    return adam_step_bytes(impl, param, grad, state, master)


def step_source(optimizer: str, impl: str) -> str:
    """What :func:`optimizer_step_bytes` counted for ``optimizer`` and its kernel source (``impl`` names torch's
    implementation; a bitsandbytes optimizer has its own kernel)."""
    if optimizer_info(optimizer).bnb:
        return f"{optimizer} (bitsandbytes' own kernel), {BNB_SOURCE}"
    if optimizer in ("sgd", "sgd-momentum"):
        return f"{optimizer} {impl}, {SGD_SOURCE}"
    if optimizer == "adafactor":
        ran = "foreach" if impl == "foreach" else "for-loop" + (" (torch's Adafactor has no fused path)"
                                                                  if impl == "fused" else "")
        return f"{optimizer} {ran}, {ADAFACTOR_SOURCE}"
    return f"{optimizer} {impl}, {SOURCE}"


def megatron_accumulation_bytes(main_grad: float, grad: float) -> float:
    """Eq. (O3m): bytes per trained element of Megatron's unfused ``main_grad.add_(param.grad)``: the
    ``main_grad`` buffer (``main_grad`` bytes per element) read and written, the model-dtype gradient (``grad``)
    read."""
    if main_grad < 0 or grad < 0:
        raise InputError("element size must not be negative")
    return 2.0 * main_grad + grad


def accumulation_bytes(grad: float) -> float:
    """Eq. (O3): bytes per trained element that adding one micro-step's gradient into ``.grad`` moves."""
    if grad < 0:
        raise InputError("element size must not be negative")
    return 3.0 * grad

"""Model states of training: weights, master weights, gradients and optimizer states, per precision recipe.

A *recipe* fixes the element size of each copy a framework keeps for every trained parameter:

==============  =====  ======  =====  =========  ========  =================================================
recipe          model  master  grads  main grad  autocast  source
==============  =====  ======  =====  =========  ========  =================================================
fp32            4      -       4      -          -         plain fp32 training
bf16-mixed      4      -       4      -          2         torch.autocast (PyTorch AMP docs); HF Trainer
fp16-mixed                                                 ``--bf16/--fp16``: transformers docs "Model training
                                                           anatomy" (model_memory_anatomy.md): weights 6 B/param
                                                           in mixed precision (fp32 + half copy), gradients
                                                           4 B/param "always kept in fp32", AdamW 8 B -> 18
fsdp-bf16-mixed 4      -       4      -          -         FSDP2 ``MixedPrecisionPolicy(param_dtype=bf16,
                                                           reduce_dtype=fp32)`` (torchtitan, torchtune): fp32
                                                           sharded parameters and gradients; each unit is
                                                           all-gathered in bf16 for its forward/backward and freed
                                                           after (reshard_after_forward), so no bf16 copy of every
                                                           weight is held; activations and the residual stream bf16
bf16 / fp16     2      -       2      -          -         pure half precision: every tensor in bf16, torch
                                                           optimizers keep states in the parameter dtype
                                                           (``torch.zeros_like(p)`` in torch/optim/adamw.py)
deepspeed-bf16  2      4       2      -          -         ZeRO paper (Rajbhandari et al. 2020, arXiv 1910.02054)
deepspeed-fp16                                             section 3.1: "2Psi + 2Psi + K Psi" with K = 12 (fp32
                                                           parameters, momentum, variance) -> 16 B/param
megatron-bf16   2      4       4      -          -         Megatron-LM README "Distributed Optimizer": bf16
                                                           param, fp32 grads: 18 B/param (6 + 12/d sharded)
megatron-fp16   2      4       2      4          -         same table: fp16 param, fp16 grads: 20 B/param
                                                           (4 + 16/d sharded; fp32 main grads are a copy)
==============  =====  ======  =====  =========  ========  =================================================

**16 versus 18 bytes per parameter.** Both counts are right, for different recipes. The ZeRO paper's 16
(2 + 2 + 4 + 8) describes frameworks that *store* the model in half precision and keep a separate fp32
master copy inside the optimizer (DeepSpeed, and Megatron with fp16 gradients minus its main-grad copy);
gradients are produced in half precision (2 B). PyTorch AMP, which the Hugging Face Trainer uses, keeps the
model itself in fp32 (that *is* the master copy, 4 B), lets ``torch.autocast`` make a half-precision copy of
each weight for the matmuls (2 B, alive between a layer's forward and its backward), and accumulates
gradients into the fp32 parameters' ``.grad`` (4 B): 4 + 2 + 4 + 8 = 18. Megatron's bf16 recipe reaches 18
another way (2 B bf16 model, 4 B fp32 main gradients, 4 B master, 8 B Adam).

Optimizer states per trained element (``s`` = state element size):

===================  ==============================================  ==========================================
optimizer            state                                           source
===================  ==============================================  ==========================================
adam / adamw         exp_avg + exp_avg_sq = 2s, + a 4 B ``step``     Kingma & Ba 2015 Alg. 1; torch/optim/adam.py
                     scalar tensor per parameter tensor              ``_init_group``
adamw-8bit           uint8 state1 + state2 (2 B) + fp32 absmax per   Dettmers et al. 2022 (arXiv 2110.02861) sec.
                     256-element block each; tensors under 4096      2; bitsandbytes optim/optimizer.py
                     elements keep 32-bit states; two 256-entry      ``Optimizer2State.init_state``
                     fp32 quantization maps shared by all tensors    (min_8bit_size=4096, blocksize 256)
paged-adamw(-8bit)   same bytes; state1 + state2 of tensors of 1e5   bitsandbytes ``get_paged``; QLoRA paper
                     elements and more in CUDA unified memory (the   (Dettmers et al. 2023) sec. 3 "Paged Optimizers";
                     driver pages them to host RAM under pressure),  optim/optimizer.py @0.43.1 lines 319-327
                     absmax, qmaps and smaller tensors' states on    (``get_state_buffer``), 461-462 (absmax
                     the device                                      ``device=p.device``)
sgd                  none                                            torch/optim/sgd.py
sgd-momentum         momentum_buffer = s                             torch/optim/sgd.py (clone of the gradient)
adafactor            factored second moment: rows + columns of each  Shazeer & Stern 2018 (arXiv 1804.04235)
                     matrix (n/cols + n/rows elements), a full       sec. 3; torch/optim/_adafactor.py
                     vector for 1-D tensors; no first moment; a 4 B  (row_var, col_var, variance, step)
                     ``step``
lion                 bitsandbytes Lion (torch has none): one fp32    Chen et al. 2023 (arXiv 2302.06675) Alg. 2;
                     state1 = 4 B whatever the parameter dtype       bitsandbytes optim/lion.py @0.50.1 ``Lion``
                                                                     (optim_bits=32), optim/optimizer.py
                                                                     ``Optimizer1State.init_state`` lines 667-681
lion-8bit            uint8 state1 + fp32 absmax per 256-element      bitsandbytes optim/lion.py @0.50.1
                     block, one 256-entry map; tensors under 4096    ``Lion8bit``
                     elements keep the fp32 state
paged-lion(-8bit)    as lion(-8bit); paged as paged-adamw            bitsandbytes optim/lion.py @0.50.1
                                                                     ``PagedLion``, ``PagedLion8bit``
===================  ==============================================  ==========================================

Which library implements each optimizer is one field of its record (``OptimizerInfo.library``): the bitsandbytes
ones keep their 32-bit-class states in fp32 whatever the parameter dtype (``get_state_buffer(p,
dtype=torch.float32)``), the torch ones in the state dtype the recipe gives (``torch.zeros_like(p)``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..suggest import unknown_choice

ADAM_STEP_BYTES = 4  # torch keeps ``state["step"]`` as a float32 scalar tensor (``_get_scalar_dtype()``)
BNB_MIN_8BIT_SIZE = 4096  # bitsandbytes Optimizer8bit default min_8bit_size
BNB_BLOCKSIZE = 256  # bitsandbytes blockwise 8-bit optimizer state block (BNB_BLOCKSIZE_SOURCE)
BNB_BLOCKSIZE_SOURCE = (
    "bitsandbytes >= 0.44.0: one fp32 absmax per 256 elements of each 8-bit state (csrc/ops.cu BLOCKSIZE_2STATE / "
    "BLOCKSIZE_1STATE 256 and optim/optimizer.py ``blocks = n // 256`` at tags 0.44.0 and 0.50.1; 0.43.x used "
    "2048-element blocks, 1/8 of the absmax bytes)")
BNB_PAGED_MIN_ELEMENTS = 100_000  # get_state_buffer: a tensor under 1e5 elements gets device states (@0.43.1 l. 320)
BNB_QMAP_BYTES = 2 * 256 * 4  # the 'dynamic' and 'udynamic' 256-entry fp32 maps, shared by every tensor


@dataclass(frozen=True)
class Recipe:
    """Element sizes [bytes] a precision recipe keeps per trained parameter (see module table).

    ``grad_bytes`` (or ``main_grad_bytes`` where a recipe keeps an fp32 main-gradient copy) is also the element size
    DDP and FSDP reduce across data-parallel ranks: estimate/duration.py ``reduced_grad_bytes`` reads it from here.
    It differs legitimately under DeepSpeed ZeRO only: the engine reduces in its ``communication_data_type`` (bf16 /
    fp16 whenever that precision is enabled, runtime/engine.py lines 1405-1416 @ edaa722) whatever a non-DeepSpeed
    recipe stores; DeepSpeed's own recipes store 2-byte gradients, so there the two agree."""

    name: str
    model_bytes: int  # the weights the forward reads, as stored on the model
    master_bytes: int  # a separate fp32 master copy held by the optimizer (0: the model weights are the master)
    grad_bytes: int  # gradients as produced/accumulated
    main_grad_bytes: int  # a separate fp32 gradient copy the optimizer reads (Megatron fp16)
    autocast_bytes: int  # half-precision weight copy torch.autocast makes for each matmul (0: none)
    compute_bytes: int  # element size of matmul inputs/outputs (activations)
    default_state_dtype: str
    description: str
    source: str

    @property
    def autocast(self) -> bool:
        return self.autocast_bytes > 0

    def forward_weight_bytes(self, stored: int) -> int:
        """Element size of a weight as a layer's forward sees it, for a weight stored at ``stored`` bytes: under
        FSDP's mixed precision (``fsdp-bf16-mixed``) the unit all-gathered in ``param_dtype`` (FSDP2
        ``MixedPrecisionPolicy``, FSDP1 ``MixedPrecision``; estimate/training/gather_units.py "Dtypes"), so a tensor
        made ``zeros_like`` it (Liger's FLCE grad_weight, formulas/liger_kernels.py eqs. LG4/LG5) is half precision;
        else the stored weight (torch.autocast casts a copy per matmul but leaves the parameter fp32)."""
        return self.compute_bytes if self.name == "fsdp-bf16-mixed" else stored

    def bytes_per_param(self, state_bytes_per_param: float) -> float:
        """Model-state bytes per trained parameter: model + master + grads + main grads + autocast copy + states."""
        return (self.model_bytes + self.master_bytes + self.grad_bytes + self.main_grad_bytes + self.autocast_bytes
                + state_bytes_per_param)


_HF = "transformers docs 'Model training anatomy' (model_memory_anatomy.md, 'Anatomy of Model's Memory')"
_ZERO = "Rajbhandari et al. 2020, ZeRO (arXiv 1910.02054), section 3.1 and Figure 1 (K = 12)"
_MEGATRON = "Megatron-LM README, 'Distributed Optimizer' bytes-per-parameter table"
RECIPES: dict[str, Recipe] = {
    "fp32": Recipe("fp32", 4, 0, 4, 0, 0, 4, "fp32", "fp32 weights, gradients, states and activations",
                   "plain fp32 training"),
    "bf16-mixed": Recipe("bf16-mixed", 4, 0, 4, 0, 2, 2, "fp32",
                         "PyTorch AMP (torch.autocast bf16): fp32 weights are the master copy, bf16 copies for "
                         "matmuls, fp32 gradients; HF Trainer --bf16 (18 B/param with AdamW)", _HF),
    "fp16-mixed": Recipe("fp16-mixed", 4, 0, 4, 0, 2, 2, "fp32",
                         "PyTorch AMP (torch.autocast fp16 + GradScaler): as bf16-mixed; HF Trainer --fp16", _HF),
    "fsdp-bf16-mixed": Recipe("fsdp-bf16-mixed", 4, 0, 4, 0, 0, 2, "fp32",
                              "FSDP MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32 sharded parameters, "
                              "gradients and Adam states; bf16 units gathered one at a time (16 B/param sharded)",
                              "torch/distributed/fsdp/_fully_shard/_fsdp_api.py MixedPrecisionPolicy; "
                              "_fsdp_param.py (all-gather in param_dtype, reshard after forward)"),
    "bf16": Recipe("bf16", 2, 0, 2, 0, 0, 2, "bf16",
                   "pure bf16: weights, gradients and optimizer states in bf16 (torchtune dtype=bf16)",
                   "torch optimizers keep states in the parameter dtype (torch/optim/adamw.py zeros_like)"),
    "fp16": Recipe("fp16", 2, 0, 2, 0, 0, 2, "fp16", "pure fp16 (rarely stable; listed for completeness)",
                   "torch optimizers keep states in the parameter dtype"),
    "deepspeed-bf16": Recipe("deepspeed-bf16", 2, 4, 2, 0, 0, 2, "fp32",
                             "DeepSpeed mixed precision: bf16 model and gradients, fp32 master + Adam states "
                             "(16 B/param)", _ZERO),
    "deepspeed-fp16": Recipe("deepspeed-fp16", 2, 4, 2, 0, 0, 2, "fp32",
                             "DeepSpeed fp16 mixed precision with loss scaling (16 B/param)", _ZERO),
    "megatron-bf16": Recipe("megatron-bf16", 2, 4, 4, 0, 0, 2, "fp32",
                            "Megatron-LM bf16: bf16 model, fp32 main gradients, fp32 master (18 B/param)", _MEGATRON),
    "megatron-fp16": Recipe("megatron-fp16", 2, 4, 2, 4, 0, 2, "fp32",
                            "Megatron-LM fp16: fp16 model and gradients + fp32 main params and main grads "
                            "(20 B/param)", _MEGATRON),
}


# DeepSpeed's own mixed precision. Under ZeRO (stages 1-3) the bf16/fp16 of a training script is DeepSpeed's
# "bf16"/"fp16" config section, not torch.autocast: accelerate turns native AMP off for DistributedType.DEEPSPEED
# (accelerate/accelerator.py Accelerator.__init__: ``mixed_precision == "bf16" and self.distributed_type not in
# (DistributedType.DEEPSPEED, DistributedType.MEGATRON_LM)``; the HF Trainer runs through it), and the engine casts the
# module's parameters to bf16/fp16 (deepspeed/runtime/engine.py lines 1755-1762 @ edaa722,
# ``_cast_module_mixed_precision``, replacing ``module.bfloat16()``) and runs the forward without autocast unless
# the config's ``torch_autocast`` section enables it (runtime/torch_autocast.py ``autocast_if_enabled``, default off).
# The fp32 master weights exist only as the optimizer's partition (zero/stage_1_and_2.py line 509
# ``single_partition_of_fp32_groups``; zero/stage3.py lines 1119-1122 ``fp32_partitioned_groups_flat``, a clone of
# the bf16 partition converted to fp32), and gradients accumulate in the model dtype (engine.py lines 1485-1496
# ``get_data_types``: grad_accum_dtype defaults to the model dtype, so engine.py lines 1994-1997 pick the ZeRO
# optimizer, not BF16_Optimizer's fp32 gradient buffers). Per parameter: 2 bf16 weights + 2 bf16 gradients + 12
# (fp32 master, momentum, variance) = the ZeRO paper's 2Psi + 2Psi + 12Psi (Rajbhandari et al. 2020, section 3.1,
# Figure 1), with no autocast copy. QLoRA keeps its own recipe (its 4-bit base is not cast).
DEEPSPEED_PRECISION = {"bf16-mixed": "deepspeed-bf16", "fp16-mixed": "deepspeed-fp16"}
DEEPSPEED_PRECISION_SOURCE = (
    "DeepSpeed mixed precision under ZeRO: accelerate disables torch autocast for DeepSpeed (accelerator.py "
    "native_amp); the engine casts parameters to bf16/fp16 (runtime/engine.py 1755-1762 @ edaa722) and keeps fp32 "
    "master weights only in the optimizer partition (zero/stage_1_and_2.py 509, zero/stage3.py 1119-1122): "
    "ZeRO paper 2+2+12 B/param, no autocast copy")


def training_recipe_name(precision: str, zero: int, method: str = "full") -> str:
    """The recipe a training run keeps its states by: ``precision``, except that a mixed-precision run under
    DeepSpeed ZeRO (``zero`` 1-3) follows DeepSpeed's own bf16/fp16 (DEEPSPEED_PRECISION; not for QLoRA)."""
    if zero and method != "qlora":
        return DEEPSPEED_PRECISION.get(precision, precision)
    return precision


AUTOCAST_CACHE_SOURCE = (
    "torch.autocast cast cache: aten/src/ATen/autocast_mode.cpp cached_cast lines 120-140 @ 008ec6b (pytorch/pytorch; "
    "can_try_cache needs arg.requires_grad() && arg.is_leaf() && !arg.is_view(), lines 124-127), cleared when the "
    "outermost autocast context exits (torch 2.13 torch/amp/autocast_mode.py lines 348-349)")


def autocast_cache_holds(requires_grad: bool, weights_are_views: bool) -> bool:
    """Whether ``torch.autocast`` keeps the half copy of an fp32 weight in its cast cache from its first use until
    the outermost autocast context exits (the end of the forward), rather than casting afresh at every use.

    The cache takes only fp32 tensors that require grad, are leaves and are not views (AUTOCAST_CACHE_SOURCE):
    a frozen weight, or a weight that is a view into a larger tensor (FSDP1's parameters during forward and
    backward: formulas/fsdp_flat_param.py), is cast at each use and its copy lives only as long as the op's
    output or autograd keeps it (a non-checkpointed layer saves it for its backward; a checkpointed layer does
    not, and its recomputation casts again). Measured on the CPU (tests/training/test_autocast_cache.py)."""
    return requires_grad and not weights_are_views


def recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise InputError(unknown_choice("precision", name, RECIPES))
    return RECIPES[name]


@dataclass(frozen=True)
class OptimizerInfo:
    name: str
    states: float  # state elements per trained element (2 for Adam)
    library: str  # whose implementation the estimate sizes and ``llmsizer measure`` runs: 'torch' or 'bitsandbytes'
    paged: bool  # states live in CUDA unified memory (bitsandbytes paged optimizers)
    eight_bit: bool
    description: str
    source: str

    @property
    def bnb(self) -> bool:
        """A bitsandbytes optimizer: its 32-bit-class states are fp32 whatever the parameter dtype (module table)."""
        return self.library == BNB


TORCH, BNB = "torch", "bitsandbytes"
_BNB_OPTIM = "bitsandbytes @0.50.1 optim/optimizer.py"
_BNB_1STATE = f"{_BNB_OPTIM} Optimizer1State.init_state lines 664-695"
OPTIMIZER_INFO: dict[str, OptimizerInfo] = {i.name: i for i in (
    OptimizerInfo("adamw", 2, TORCH, False, False, "AdamW: first and second moment (Loshchilov & Hutter 2019)",
                  "torch/optim/adamw.py; Kingma & Ba 2015 Algorithm 1"),
    OptimizerInfo("adam", 2, TORCH, False, False, "Adam: first and second moment", "Kingma & Ba 2015 Algorithm 1"),
    OptimizerInfo("adamw-8bit", 2, BNB, False, True,
                  "bitsandbytes 8-bit AdamW: block-wise quantized moments (uint8 + fp32 absmax / 256)",
                  "Dettmers et al. 2022 (arXiv 2110.02861); bitsandbytes Optimizer2State.init_state"),
    OptimizerInfo("paged-adamw", 2, BNB, True, False, "bitsandbytes PagedAdamW (32-bit states in CUDA unified memory)",
                  "QLoRA (Dettmers et al. 2023, arXiv 2305.14314) section 3; bitsandbytes get_paged"),
    OptimizerInfo("paged-adamw-8bit", 2, BNB, True, True,
                  "bitsandbytes PagedAdamW8bit (8-bit states in CUDA unified memory)",
                  "bitsandbytes optim/adamw.py PagedAdamW8bit"),
    OptimizerInfo("sgd", 0, TORCH, False, False, "SGD without momentum: no state", "torch/optim/sgd.py"),
    OptimizerInfo("sgd-momentum", 1, TORCH, False, False, "SGD with momentum: one buffer",
                  "torch/optim/sgd.py (momentum_buffer)"),
    OptimizerInfo("adafactor", 0, TORCH, False, False,
                  "Adafactor: factored second moment (row and column statistics), no first moment",
                  "Shazeer & Stern 2018 (arXiv 1804.04235) section 3; torch/optim/_adafactor.py"),
    OptimizerInfo("lion", 1, BNB, False, False,
                  "bitsandbytes Lion: one momentum buffer (sign update), fp32 whatever the parameter dtype",
                  "Chen et al. 2023 (arXiv 2302.06675) Algorithm 2; bitsandbytes @0.50.1 optim/lion.py Lion "
                  f"(Optimizer1State, optim_bits=32; torch has no Lion); {_BNB_1STATE}"),
    OptimizerInfo("lion-8bit", 1, BNB, False, True,
                  "bitsandbytes Lion8bit: one block-wise quantized momentum (uint8 + fp32 absmax / 256)",
                  f"bitsandbytes @0.50.1 optim/lion.py Lion8bit (Optimizer1State, optim_bits=8); {_BNB_1STATE}"),
    OptimizerInfo("paged-lion", 1, BNB, True, False,
                  "bitsandbytes PagedLion (one 32-bit momentum in CUDA unified memory)",
                  f"bitsandbytes @0.50.1 optim/lion.py PagedLion (Optimizer1State, is_paged=True); {_BNB_1STATE}"),
    OptimizerInfo("paged-lion-8bit", 1, BNB, True, True,
                  "bitsandbytes PagedLion8bit (one 8-bit momentum in CUDA unified memory)",
                  f"bitsandbytes @0.50.1 optim/lion.py PagedLion8bit; {_BNB_1STATE}"),
)}
# the optimizers bitsandbytes implements (CUDA kernels, and CPU ones in 0.50.2; ``llmsizer measure`` imports it for them)
BNB_OPTIMIZERS = tuple(name for name, info in OPTIMIZER_INFO.items() if info.bnb)


def optimizer_info(name: str) -> OptimizerInfo:
    if name not in OPTIMIZER_INFO:
        raise InputError(unknown_choice("optimizer", name, OPTIMIZER_INFO))
    return OPTIMIZER_INFO[name]


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def optimizer_state_bytes(shapes: Iterable[Sequence[int]], optimizer: str, state_bytes: int) -> int:
    """Exact optimizer-state bytes for trained tensors of the given shapes.

    Parameters: shapes [one shape per trained parameter tensor], optimizer [OPTIMIZER_INFO key],
    state_bytes [element size of the 32-bit-class states: 4 fp32, 2 bf16/fp16].
    Rules per optimizer are in the module table; e.g. AdamW: sum over tensors of (2 n s + 4).

    >>> optimizer_state_bytes([(4096, 4096)], "adamw", 4)
    134217732
    """
    return optimizer_state_bytes_counted(Counter(tuple(sp) for sp in shapes), optimizer, state_bytes)


def optimizer_state_bytes_counted(counts: Mapping[tuple[int, ...], int], optimizer: str, state_bytes: int) -> int:
    """:func:`optimizer_state_bytes` of ``counts[shape]`` trained tensors of each shape."""
    info = optimizer_info(optimizer)
    total = 0
    any_8bit = False
    # each rule is per tensor, so identical shapes (one per layer) are evaluated once and multiplied
    for shape, k in counts.items():
        before = total
        n = _numel(shape)
        if info.name in ("adamw", "adam"):
            total += 2 * n * state_bytes + ADAM_STEP_BYTES
        elif info.bnb:  # bitsandbytes: Optimizer2State (Adam) or Optimizer1State (Lion)
            m = round(info.states)
            if info.eight_bit and n >= BNB_MIN_8BIT_SIZE:
                total += m * (n + 4 * math.ceil(n / BNB_BLOCKSIZE))
                any_8bit = True
            else:
                total += m * n * 4  # bitsandbytes 32-bit states are always fp32
        elif info.name == "sgd-momentum":
            total += n * state_bytes
        elif info.name == "adafactor":
            if len(shape) >= 2:
                total += (n // shape[-1] + n // shape[-2]) * state_bytes
            else:
                total += n * state_bytes
            total += ADAM_STEP_BYTES
        total = before + (total - before) * k
    if any_8bit:  # one map per state ('dynamic'; Adam's second 'udynamic')
        total += round(info.states) * BNB_QMAP_BYTES // 2
    return total


def paged_state_bytes_counted(counts: Mapping[tuple[int, ...], int], optimizer: str) -> int:
    """The part of :func:`optimizer_state_bytes_counted` a paged optimizer keeps in CUDA unified memory: state1 and
    state2 of each tensor of at least ``BNB_PAGED_MIN_ELEMENTS`` elements (uint8 for the 8-bit optimizers' tensors
    of ``BNB_MIN_8BIT_SIZE`` and more, else fp32); 0 for an optimizer that is not paged. The rest (block absmax,
    quantization maps, smaller tensors' states) is allocated on the device (bitsandbytes optim/optimizer.py @0.43.1
    ``get_state_buffer`` lines 319-327, ``Optimizer2State.init_state`` lines 440-462).

    >>> paged_state_bytes_counted({(4096, 4096): 2, (4096,): 3}, "paged-adamw-8bit")
    67108864
    """
    info = optimizer_info(optimizer)
    if not info.paged:
        return 0
    total = 0
    for shape, k in counts.items():
        n = _numel(shape)
        if n >= BNB_PAGED_MIN_ELEMENTS:
            total += k * round(info.states) * (n if info.eight_bit and n >= BNB_MIN_8BIT_SIZE else 4 * n)
    return total


def state_bytes_per_param(optimizer: str, state_bytes: int) -> float:
    """Optimizer-state bytes per trained element for a large matrix (the asymptotic rate, for explanations)."""
    info = optimizer_info(optimizer)
    if info.eight_bit:
        return info.states * (1 + 4 / BNB_BLOCKSIZE)
    if info.bnb:
        return info.states * 4
    return info.states * state_bytes


def step_temporary_bytes(optimizer: str, impl: str, trained_elements: int, largest_tensor: int,
                         state_bytes: int) -> int:
    """Transient bytes the optimizer step allocates on top of the states (a named term).

    Adam/AdamW ``foreach`` (torch's default on CUDA): ``torch._foreach_sqrt(exp_avg_sqs)`` makes one
    state-sized list of temporaries over the whole parameter group -> n x s (torch/optim/adam.py
    ``_multi_tensor_adam``); ``for-loop`` computes ``denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)``
    one tensor at a time, the sqrt and the quotient coexisting -> 2 x largest tensor x s
    (``_single_tensor_adam``); ``fused`` kernels update in place -> 0. Adafactor ``foreach`` makes one full-size
    ``row_var @ col_var`` estimate per matrix of the group and keeps them all as the updates until the parameters
    are added (torch 2.13 torch/optim/_adafactor.py ``_multi_tensor_adafactor`` lines 564-599) -> n x s; its
    for-loop (and 'fused', which torch's Adafactor lacks: it runs the for-loop) one tensor's at a time, the previous
    tensor's estimate still bound to the loop's local variable while the next is made -> at most 2 x largest tensor
    x s (an upper bound: the largest tensor and its predecessor, whose order the count does not know). bitsandbytes optimizers update in place (0). SGD and Lion update in place.
    """
    info = optimizer_info(optimizer)
    if info.name in ("adamw", "adam"):
        return {"fused": 0, "foreach": trained_elements * state_bytes,
                "for-loop": 2 * largest_tensor * state_bytes}[impl]
    if info.name == "adafactor":
        return (trained_elements if impl == "foreach" else 2 * largest_tensor) * state_bytes
    return 0

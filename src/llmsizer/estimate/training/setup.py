"""Resolve a TrainingWorkload against a model: every default applied here is recorded as an assumption.

The result (:class:`TrainingContext`) holds only decisions (dtypes, trained tensors, parallel layout); the
arithmetic lives in ``formulas/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...catalog.hardware import Device
from ...errors import DeviceCannotRunError, FieldError, InputError, NotModelledError
from ...formulas import liger_kernels, unsloth_kernels
from ...formulas.context_parallel import local_tokens, ulysses_refusal
from ...formulas.dtypes import DTYPE_BYTES
from ...formulas.float8_training import TE_RECIPES
from ...formulas.lora import (
    LoraParams,
    adapted_roles,
    any_quantizable,
    fused_targets,
    lora_params,
    peft_refused_towers,
    rank_ceiling,
    vision_targets,
)
from ...formulas.nf4_quantization import (
    ASYNC_LOAD_WARNING,
    FUSED_EXPERTS_WHY,
    async_load_bound_bytes,
    fused_experts_kept,
    matmul_keeps_input,
    quantizes_lm_head,
)
from ...formulas.parallelism import expert_shard_group, zero_shards
from ...formulas.sdpa_dispatch import TE_ATTENTION_SOURCE, attention_dtype, te_attention_backend
from ...formulas.tensor_parallel import (
    check_tensor_parallel,
    expert_tp_ways,
    resident_expert_tp,
    training_tp_framework,
)
from ...formulas.training_activations import TILED_MLP_SOURCE, ActivationSetup, tiled_mlp_shards
from ...formulas.training_states import (
    BNB_BLOCKSIZE,
    BNB_BLOCKSIZE_SOURCE,
    DEEPSPEED_PRECISION,
    DEEPSPEED_PRECISION_SOURCE,
    OptimizerInfo,
    Recipe,
    optimizer_info,
    recipe,
    training_recipe_name,
)
from ...formulas.weight_formats import GROUP_SIZE_DEFAULT, stored_format, weight_bytes
from ...result import Assumption
from ...specs import ModelSpec, TrainingWorkload
from ...specs.training import (
    ALL_LINEAR,
    DEFAULT_ATTENTION_KERNEL_WHY,
    MEGATRON_PRECISIONS,
    POOL_METRICS,
    QLORA_GRAD_CHECKPOINTING_WHY,
    RECOMPUTE_MODULES,
    attention_kernel_of,
    default_grad_checkpointing,
    default_mamba_path,
    offload_without_zero,
)
from ...units import format_bytes
from .. import efficiency as E
from ..device import float8_not_modelled, float8_refusal, precision_notes
from ..framework import model_defaults_applied, profile_why, with_framework
from ..inference.common import Acc
from ..model_warnings import source_length_warning

_WHY = {
    "method": "full fine-tuning: every parameter trained",
    "precision": "",
    "micro_batch": "sequences per device per forward pass",
    "seq_len": "tokens per sequence (padded or packed length)",
    "grad_accumulation": "micro-batches per optimizer step",
    "grad_checkpointing": "no activation checkpointing",
    "checkpoint_every": "every decoder layer checkpointed alike",
    "attention": "transformers default attn_implementation sdpa",
    "packing": "one document per row, causal mask only",
    "loss": "the model returns the logits, the loss upcasts them (transformers ForCausalLMLoss)",
    "loss_chunks": "the whole sequence's cross-entropy at once",
    "layernorm": "torch nn.LayerNorm: under autocast it runs in fp32 (autocast's fp32 op list) and keeps its fp32 input",
    "framework": "no framework profile: llmsizer's own defaults",
    "train_metric_passes": ("eager no-grad cross-entropies over each micro-batch's logits after its backward "
                            "(Composer's train metrics; formulas/elementwise_traffic.py eq. (E12))"),
    "checkpoint_offload": "the checkpointed layer inputs stay on the device",
    "checkpoint_impl": "torch.utils.checkpoint use_reentrant=False (transformers >= 5.0, torchtune)",
    "kernels": "the framework's PyTorch modules (transformers, PEFT, torchtune)",
    "nf4_quantizer": "bitsandbytes >= 0.43.2 Params4bit (PEFT / transformers QLoRA)",
    "lora_dropout": "adapters read their input (PEFT and torchtune default lora_dropout 0)",
    "loop_keeps_graph": "the loop drops the step's graph with the step (HF Trainer, torchtune)",
    "deepspeed_gather": "DeepSpeed >= 0.9: a single rank uses its partition in place (no gather buffer)",
    "zero_grad": ("optimizer.zero_grad(set_to_none=True) frees the gradients before the next forward (torch >= 2.0, "
                  "HF Trainer, accelerate >= 0.28)"),
    "gpus": "one device",
    "zero": "no ZeRO sharding",
    "tp": "no tensor parallelism", "pp": "no pipeline parallelism", "ep": "no expert parallelism",
    "offload": "everything on the device",
    "fsdp_version": "FSDP2 fully_shard (per-parameter shards)",
    "fsdp2_units": "the two largest units gathered, less the rank's own shard (wrapping not traced)",
    "fsdp1_lora_wrap": ("every LoRA matrix its own FSDP1 unit (torchtune lora_fsdp_wrap_policy, PEFT "
                        "fsdp_auto_wrap_policy): frozen layer units without gradients"),
    "context_parallel": "each sequence on one device (no context parallelism)",
    "cp_kind": "ring attention (K/V passed round the ranks; formulas/context_parallel.py)",
    "activation_offload": "saved activations stay on the device",
    "tiled_mlp": "each MLP runs over the whole sequence at once, keeping its [tokens, intermediate] tensors",
    "float8": "bf16 linears (no torchao float8)",
    "float8_recipe": "torchao Float8Linear, dynamic tensorwise scaling",
    "compile": "eager PyTorch: every op saves what its own backward needs",
    "compile_scope": "the decoder layers and the cross-entropy (torchtune compile_model + compile_loss)",
    "pipeline_split": "even: the remainder of the layers on the first stages (Megatron-LM, DeepSpeed uniform)",
    "batch_shapes": "variable: batches padded to their longest sample, shapes change between steps",
    "sequence_parallel": "off: the norms' and dropouts' activations replicated on every tensor-parallel rank "
                         "(Korthikanti et al. 2022 sec. 4.2.2 without sequence parallelism)",
}


# Korthikanti et al. 2022 (arXiv 2205.05198) §4.2: selective recompute drops only the attention's s^2 terms (QK^T,
# softmax, its dropout), which a fused kernel (SDPA, flash, flex) never saves (formulas/training_activations.py)
SELECTIVE_FUSED_WARNING = ("grad_checkpointing 'selective' (Korthikanti's selective recompute) drops only eager "
                           "attention's s x s terms; attention {attention} saves none, so it saves nothing here: "
                           "{advice}")
# what SELECTIVE_FUSED_WARNING advises, by whether the run's TP plan is Megatron-Core's (formulas/tensor_parallel.py training_tp_framework):
# Megatron-Core recomputes more modules by name (specs/training.py RECOMPUTE_MODULES); the others run torchtitan's
# op-level selective checkpointing
SELECTIVE_FUSED_ADVICE = {
    True: "name more of Megatron-Core's modules to recompute with recompute_modules "
                     "(--recompute-modules: " + ", ".join(RECOMPUTE_MODULES) + ")",
    False: "for torchtitan's op-level selective checkpointing use selective-op"}
# packing under SDPA/eager: one explicit mask over the row, every tile computed (estimate/duration.py doc_len_masked)
DOC_LEN_MASKED_WARNING = ("doc_len has no effect with attention {attention}: the packed documents share one explicit "
                          "mask over the row, every tile computed; use attention flash or flex (--attention)")


def given(w: TrainingWorkload, *names: str) -> bool:
    """Whether the caller gave any of ``names`` (specs/given.py), whatever the value: a given value equal to the
    default is still given."""
    return bool(w.given and w.given.intersection(names))


MEGATRON_LOSS_WHY = ("default under the megatron precisions: Megatron-Core's vocab_parallel_cross_entropy (one fp32 "
                     "copy of the logits made the softmax in place; formulas/training_activations.py eq. MC1)")


# why the experts' tensor-parallel size is what it is when etp is not stated (formulas/tensor_parallel.py
# expert_tp_ways), by training_tp_framework's plan ("" for none)
ETP_WHY = {
    "megatron-core": "Megatron-Core's default, expert_tensor_parallel_size = tensor_model_parallel_size when unset "
                     "(Megatron-LM @d98e8a64 megatron/training/arguments.py:587-588); Megatron-Bridge's MoE recipes "
                     "state 1",
    "torchtitan": "torchtitan keeps each routed expert whole on every TP rank under EP (moe_sharding.py 'sparse' "
                  "placement), split tp ways without EP",
    "": "the experts split tp ways like the dense layers (PyTorch tensor parallelism)",
}


def expert_tp(w: TrainingWorkload) -> int:
    """The experts' tensor-parallel ways llmsizer's states and expert data-parallel group use for ``w``
    (formulas/tensor_parallel.py ``resident_expert_tp``: the stated etp under Megatron-Core, else tp)."""
    return resident_expert_tp(training_tp_framework(w.precision, w.framework), w.tp, w.ep, w.etp)


def expert_tp_split(w: TrainingWorkload) -> int:
    """The ways ``w``'s framework really splits each routed expert (formulas/tensor_parallel.py ``expert_tp_ways``:
    Megatron-Core's etp, torchtitan's whole experts under EP, tp otherwise): the expert tensor-parallel group the EP
    exchange gathers in and the stride of an EP group's ranks (formulas/expert_parallel_time.py eq. (E3'));
    ``expert_tp`` is the states' counting equivalent."""
    return expert_tp_ways(training_tp_framework(w.precision, w.framework), w.tp, w.ep, w.etp)


def expert_group(w: TrainingWorkload) -> int:
    """The ranks one routed expert's shards span under ``w``'s ZeRO / FSDP (formulas/parallelism.py
    ``expert_shard_group`` over the dense shard group, with the experts' own tensor-parallel ways, ``expert_tp``): the
    one reading of that rule every caller uses (states, the optimizer-step temporaries, the duration, the texts)."""
    return expert_shard_group(w.shard_group, w.ep, w.tp, expert_tp(w))


def model_state_ways(w: TrainingWorkload, group: int) -> tuple[int, int, int]:
    """Ways (weights, gradients, optimizer states + master) ``w``'s sharding splits a tensor over ``group`` ranks:
    formulas/parallelism.py ``zero_shards`` of ``w.shard_stage``, except that under the megatron precisions the
    gradients are never split. Megatron-Core's distributed optimizer (zero 1 or 2 here) keeps every rank's whole
    grad buffer (``grad_data = torch.zeros(numel)``, NVIDIA/Megatron-LM @d98e8a64
    megatron/core/distributed/param_and_grad_buffer.py:1190-1195) and reduce-scatters into the rank's own view of it
    (:708-725); it shards the fp32 main parameters and the optimizer states only (optimizer/distrib_optimizer.py
    ``_build_model_and_main_param_groups``). The one reading of that rule (states, timeline, texts, duration)."""
    w_ways, g_ways, o_ways = zero_shards(w.shard_stage, group)
    return w_ways, 1 if w.megatron_grad_buffer else g_ways, o_ways


def check_expert_tp(spec: ModelSpec, w: TrainingWorkload) -> None:
    """A stated ``etp``: Megatron-Core's ``--expert-tensor-parallel-size``, for an MoE model, under sequence
    parallelism when tp > 1 (Megatron-LM @d98e8a64 megatron/core/transformer/moe/moe_layer.py:636-640 raises in
    training with MoE and TP without it). Its layout rule is TrainingWorkload's (etp x ep x pp dividing gpus)."""
    if not spec.is_moe:
        raise FieldError("etp", f"etp (expert tensor parallelism) needs a mixture-of-experts model; {spec.name} is "
                         "dense")
    if training_tp_framework(w.precision, w.framework) != "megatron-core":
        raise FieldError("etp", f"etp is Megatron-Core's expert_tensor_parallel_size; give precision megatron-bf16 "
                         f"or megatron-fp16 (here {w.precision})")
    if w.tp > 1 and not w.sequence_parallel:
        raise FieldError("etp", "Megatron-Core trains an MoE model with tp > 1 only under sequence parallelism "
                         "(moe_layer.py raises otherwise); give sequence_parallel")


# the fields whose recorded value or reason has a rule of its own (``_recorded``; under a framework profile every
# field has: ``profile_why``); any other field records its value with _WHY's reason or "given"
_RECORDED_APART = frozenset({"recompute_modules", "grad_checkpointing", "loss", "precision", "attention"})
# the megatron precisions' core attention where neither an attention API nor a kernel is named (review23a D4): the
# estimate's assumptions name what the duration times (``megatron_attention_kernel``), not torch SDPA's dispatch
MEGATRON_ATTENTION_WHY = ("Megatron-Core's core attention, TEDotProductAttention (NVIDIA/Megatron-LM @d98e8a64 "
                          "transformer_engine_spec_provider.py lines 71-73), 'sdpa' standing for it")
MEGATRON_ATTENTION_KERNEL_WHY = ("TransformerEngine's own backend choice in Megatron-Core's TEDotProductAttention "
                                 "(attention_backend auto): cuDNN's fused attention on sm90 and later, FlashAttention "
                                 "below (formulas/sdpa_dispatch.py te_attention_backend; "
                                 f"{TE_ATTENTION_SOURCE}); attention_kernel_timed names the kernel timed on the device")


TILED_MLP_DURATION_WARNING = ("tiled_mlp: memory only; the duration leaves out TiledMLP's extra forward of every MLP "
                              "(its backward recomputes each shard: " + TILED_MLP_SOURCE + ")")


def record_workload(w: TrainingWorkload, acc: Acc, names: tuple[str, ...]) -> None:
    """Record workload fields; a field the caller did not give is flagged default=True."""
    named = w.given or ()
    profiled = w.framework != "none"
    append = acc.assumptions.append
    for name in names:
        default = name not in named  # not given(w, name)
        if profiled or name in _RECORDED_APART:
            value, why = _recorded(w, name, default)
        else:  # a plain field without a profile: its value, with _WHY's reason or "given" (as ``_recorded`` says)
            value, why = getattr(w, name), (_WHY.get(name, "") if default else "given")
        append(Assumption(name, value, default, why))


def _recorded(w: TrainingWorkload, name: str, default: bool) -> tuple[object, str]:
    """(the value, the reason) ``record_workload`` records for field ``name`` of ``w`` (``default``: not given)."""
    value = getattr(w, name)
    if name == "recompute_modules":  # the list the estimate applies (Megatron's default where none is stated)
        value = ",".join(m for m in RECOMPUTE_MODULES if m in w.recomputed_modules)
    why = _WHY.get(name, "") if default else "given"
    if default and name == "grad_checkpointing" and w.grad_checkpointing == default_grad_checkpointing(w.method) \
            and w.method == "qlora":  # the method's own default (specs/training.py default_grad_checkpointing)
        why = QLORA_GRAD_CHECKPOINTING_WHY
    if default and name == "loss" and w.precision in MEGATRON_PRECISIONS:  # specs/training.py default_loss
        why = MEGATRON_LOSS_WHY
    if default and name == "attention" and megatron_te_attention(w):
        why = MEGATRON_ATTENTION_WHY
    if default and name == "recompute_modules":
        why = "Megatron-Core's default recompute_modules ['core_attn'] (transformer_config.py)"
    if name == "precision":
        why = precision_notes(w)[0] or recipe(w.precision).description
    if default and w.framework != "none":  # a framework profile's default (estimate/framework.py)
        why = profile_why(w, name) or why
    return value, why


@dataclass(frozen=True)
class TrainingContext:
    spec: ModelSpec
    w: TrainingWorkload
    recipe: Recipe
    optimizer: OptimizerInfo
    state_bytes: int  # element size of 32-bit-class optimizer states
    optimizer_impl: str
    base_bytes: int  # element size of the (frozen or trained) model weights
    base_format: str  # weight format name for weight_formats.weight_bytes ('fp32', 'bf16', 'nf4-dq')
    adapter_bytes: int  # element size of adapters and their gradients (LoRA)
    lora: LoraParams | None
    act: ActivationSetup
    weight_copy_bytes: int  # autocast half copies of fp32 linear weights (0: none)
    fused_experts: bool = False  # QLoRA base: routed experts + router left in base_bytes (qlora_fused_experts)


def compile_partitions_layers(w: TrainingWorkload) -> bool:
    """Whether torch.compile's min-cut partitioner decides what each decoder layer saves for its backward
    (formulas/compiled_activations.py, formulas/selective_checkpointing.py): under ``compile``, unless Unsloth's
    hand-written autograd kernels replace the layer (formulas/unsloth_kernels.py)."""
    return w.compile and w.kernels != "unsloth"


def te_first_microbatch_cache(w: TrainingWorkload) -> bool:
    """Whether TransformerEngine keeps each te layer's float8 weight in ``_fp8_workspaces`` across the micro-batches
    of a step: the training loop passes ``is_first_microbatch``, which Megatron-Core does (the megatron precisions;
    formulas/float8_training.py ``MEGATRON_TE_CALL``) and llm-foundry's blocks do not (``LLM_FOUNDRY_TE_CALL``);
    never under FSDP2 (TE keeps no cache there). The one rule both the casts' time (estimate/duration.py
    ``float8_time``, eq. T2) and the copies' lifetime (timeline.py, ``te_weight_copy_lifetime``) read. Under
    ``w.fp8_params`` (eq. T3) there is no copy to keep: both read that first."""
    return (w.float8 and w.float8_recipe in TE_RECIPES and w.precision in MEGATRON_PRECISIONS
            and not (w.fsdp is not None and w.fsdp_version == 2))


def fp8_param_gather_why(w: TrainingWorkload) -> str:
    """Why ``w``'s te linears hold float8 parameters or not (``TrainingWorkload.fp8_params``, eq. T3)."""
    if given(w, "fp8_param_gather"):
        return "given" + ("" if w.fp8_params else ": each te linear keeps its bf16 parameter and a float8 copy")
    if w.float8_recipe == "transformer-engine-mxfp8":
        return ("off: under MXFP8 Megatron-Bridge's recipe sets it with reuse_grad_buf_for_mxfp8_param_ag (bf16 "
                "all-gather through the gradient buffer, a cast into MXFP8 parameters), which llmsizer does not "
                "model: each te linear keeps its bf16 parameter and an MXFP8 copy (eq. T1m)")
    if not w.fp8_params_possible:
        return ("off: Megatron's fp8_param_gather needs the distributed optimizer (zero >= 1; Megatron-LM @d98e8a64 "
                "arguments.py lines 1095-1097) and no fsdp (lines 1051-1056): each te linear keeps its bf16 "
                "parameter and a float8 copy")
    return ("off, Megatron-LM's own default (--fp8-param-gather is a store_true flag, Megatron-LM @d98e8a64 "
            "megatron/training/arguments.py line 2016): each te linear keeps its bf16 parameter and a float8 copy; "
            "Megatron-Bridge's float8 recipes turn it on (training/mixed_precision.py @f9b6319e lines 223, 294): "
            "--fp8-param-gather for such a run, the te linears' weights then float8 parameters, 1 B an element + the "
            "transpose on TN-only GPUs, no float8 copy, the all-gather at 1 B (formulas/float8_training.py eq. T3)")


def compiled_loss(w: TrainingWorkload) -> bool:
    """Whether the cross-entropy runs under torch.compile (formulas/training_activations.py eqs. C1/C2, and its
    fused kernels for the duration): ``compile`` with scope 'layers+loss', on the plain 'ce' loss (torchtune
    ``compile_loss``; the 2024-05 kept-logits loop, the linear and Cut CE losses are not this path)."""
    return w.compile and w.compile_scope != "layers" and w.loss == "ce" and w.kernels != "unsloth"


def embedding_trained(w: TrainingWorkload, lora: LoraParams | None) -> bool:
    """Whether the token embedding trains, so that its backward runs: full training, PEFT ``modules_to_save``
    'embed', or a LoRA adapter on it (an adapter's output needs a gradient)."""
    return not w.adapters or "embed" in w.modules_to_save or (
        lora is not None and "token_embd" in lora.layout.roles)


def embedding_output_needs_grad(w: TrainingWorkload, lora: LoraParams | None) -> bool:
    """Whether the embedding's output needs a gradient, so that the first decoder layer keeps for its backward what
    every other layer keeps (formulas/training_activations.py eq. F1) and the backward of the modules reading that
    output runs (DeepSpeed ZeRO-3 re-gathers them: gather_units.py ``deepspeed_zero3_uses``).

    Yes when the embedding trains (:func:`embedding_trained`) and under full (per-layer) gradient checkpointing:
    transformers' ``_activation_checkpointing_enable`` calls ``enable_input_require_grads`` (a forward hook that sets
    ``requires_grad`` on the embedding's output) for every model whose main input is ``input_ids``
    (transformers 5.24.0 modeling_utils.py lines 3190-3198), as PEFT does when it wraps a model with checkpointing
    on (peft 0.21.2 peft_model.py lines 184-185, 728-735) and in ``prepare_model_for_kbit_training`` (utils/other.py
    lines 224-233). torchtune's and litgpt's checkpointing set nothing, but a checkpointed layer keeps its input
    whether or not it needs a gradient (torch.utils.checkpoint's ``_NoopSaveInputs`` saves it beside a dummy that
    requires grad), so only the first layer's recompute would be smaller there: not modelled. 'selective' (the
    attention core recomputed: Megatron's, not transformers') sets nothing either: its first layer follows eq. F1.

    Yes too under FSDP1 with the adapters in their layer's unit when the root unit (the embedding, final norm and
    lm_head) holds a trained parameter (an lm_head adapter, or the lm_head in modules_to_save): with
    ``use_orig_params`` a flat parameter requires grad when any of its tensors does (torch 2.13
    ``distributed/fsdp/_flat_param.py`` lines 804-836) and its unsharded views are parameters with the flat
    parameter's ``requires_grad`` (lines 1982-1992), the embedding's among them. Measured: every block gathered
    again and reduce-scattered (tests/training/test_fsdp_collective_volume.py, the lm_head adapted alone)."""
    root_grad = (w.fsdp is not None and w.fsdp_version == 1 and w.adapters and w.fsdp1_lora_wrap == "with-layers"
                 and ("lm_head" in w.modules_to_save or (lora is not None and "output" in lora.layout.roles)))
    return embedding_trained(w, lora) or w.grad_checkpointing == "full" or root_grad


def layer_inputs_need_grad(w: TrainingWorkload, lora: LoraParams | None, layers: list[int],
                           has_embedding: bool = True) -> list[bool]:
    """Whether each of ``layers`` (decoder layer indices) gets an input that needs a gradient (eq. F1 of
    formulas/training_activations.py): every layer when the embedding's output needs one
    (:func:`embedding_output_needs_grad`, or no embedding on this pipeline stage), else only the layers after the
    first one holding an adapter: a decoder layer without an adapter over an input that needs no gradient outputs
    none either (a hybrid's leading frozen Mamba layers; Granite-4.0-H's Mamba layers before its first attention
    layer when only q/k/v/o are adapted; measured: tests/training/test_mamba_lora_saved_tensors.py)."""
    if not has_embedding or embedding_output_needs_grad(w, lora):
        return [True] * len(layers)
    first = lora.layout.first_layer if lora is not None else None
    return [first is not None and i > first for i in layers]


def _default_optimizer(w: TrainingWorkload) -> tuple[str, str]:
    # paged states live in CUDA unified memory (bitsandbytes csrc/pythonInterface.cpp cget_managed_ptr:
    # cudaMallocManaged, built only with BUILD_CUDA): none on a CPU, none on an Apple chip (Metal)
    if w.method == "qlora" and w.device == "cpu":
        return "adamw", "QLoRA on a CPU: AdamW (bitsandbytes paged optimizers page CUDA unified memory)"
    if w.method == "qlora" and w.gpu_runtime == "metal":
        return "adamw", "QLoRA on an Apple chip: AdamW (bitsandbytes paged optimizers page CUDA unified memory)"
    if w.method == "qlora":
        return "paged-adamw", "QLoRA recipe: paged AdamW (Dettmers et al. 2023, arXiv 2305.14314, section 3)"
    return "adamw", "AdamW, the default of HF Trainer, torchtune and Megatron-LM"


# The dtype QLoRA's non-quantized tensors (embeddings, norms, lm_head, biases) train in, by the code that prepares
# the model. PEFT's ``prepare_model_for_kbit_training`` (peft 0.21.2 = huggingface/peft @5d602fdb src/peft/utils/
# other.py lines 197-209) casts every fp16/bf16 parameter that is not a bitsandbytes ``Params4bit`` to fp32 ("cast all
# non INT8 parameters to fp32"; not for GPTQ/AQLM/EETQ/HQQ/torchao models, lines 197-203); the residual stream that
# leaves the fp32 embedding and norms is then fp32 too (measured on the CPU: tests/training/test_kbit_prep_upcast.py).
# HF's QLoRA recipe calls it (it is where the qlora checkpointing default comes from, specs/training.py
# QLORA_GRAD_CHECKPOINTING_WHY), and TRL's SFTTrainer does for a 4-bit model unless sharded (trl @ddf4c8d
# trl/trainer/sft_trainer.py lines 222-240) -- with bf16=True it then casts the embedding and lm_head back to bf16
# (lines 266-272, trl/trainer/utils.py peft_module_casting_to_bf16 lines 745-752): base_dtype bf16 states that run's
# weights, not its residual stream, which its fp32 norms keep fp32 (RMSNorm's fp32 weight times its bf16 output;
# measured on the CPU, not modelled). Under autocast the fp32 lm_head's bf16 copy stays saved for the backward
# (states.py, the head's only: bitsandbytes' 4-bit linears dequantize their own weights).
# Unsloth replaces the function with its own, which casts only the LoRA weights to fp32 (unslothai/unsloth @e3162dc
# unsloth/models/_utils.py lines 516-531); torchtune (to_nf4), litgpt (Lightning's BitsandbytesPrecision) and
# sharded QLoRA under FSDP / ZeRO-3 (TRL skips the call when the 4-bit weights sit on the CPU, sft_trainer.py lines
# 225-231) keep them in the load dtype.
KBIT_PREP_WHY = ("PEFT prepare_model_for_kbit_training casts every non-4-bit fp16/bf16 parameter (embeddings, norms, "
                 "lm_head) to fp32 (peft utils/other.py lines 204-209 @5d602fdb), so the residual stream is fp32 too; "
                 "base_dtype bf16 where the model is not prepared so (TRL's bf16 recast of the embedding and lm_head "
                 "after it keeps fp32 norms and so an fp32 residual stream: between the two, not modelled)")
NO_KBIT_PREP_WHY = "non-quantized tensors (embeddings, norms, lm_head) kept in bf16; bnb_4bit_compute_dtype bf16"


def qlora_unquantized_dtype(w: TrainingWorkload, gptq: bool) -> tuple[str, str]:
    """(default dtype, why) of a QLoRA run's non-quantized tensors: 'fp32' where PEFT's prepare_model_for_kbit_training
    prepares the bitsandbytes model (no framework profile, PyTorch kernels, not sharded under FSDP / ZeRO-3), else
    'bf16' (the comment above)."""
    peft_prep = (w.framework == "none" and w.kernels != "unsloth" and not gptq
                 and w.nf4_quantizer in ("bitsandbytes", "bitsandbytes-0.42") and w.fsdp is None and w.zero != 3)
    return ("fp32", KBIT_PREP_WHY) if peft_prep else ("bf16", NO_KBIT_PREP_WHY)


# A checkpoint published fp8-block (quantization_config quant_method 'fp8' with weight_block_size: DeepSeek-V3/R1,
# MiniMax-M2.x, the -FP8 releases) is loaded by transformers' FineGrainedFP8HfQuantizer (transformers 5.24.0, our test
# extra's pin: quantizers/quantizer_finegrained_fp8.py). Its weights stay float8_e4m3fn in memory -- every nn.Linear
# outside modules_to_not_convert (and each model's fused ``.experts``) swapped for FP8Linear / FP8Experts with fp32
# ``weight_scale_inv`` per 128x128 block (integrations/finegrained_fp8.py replace_with_fp8_linear lines 935-1018) --
# unless validate_environment (lines 31-57) sets ``dequantize = True``: no CUDA/XPU GPU (a pre-quantized checkpoint
# is dequantized to bf16, lines 39-44) or a CUDA GPU below compute capability 8.9 (lines 48-57: A100, V100, T4).
# The quantizer is trainable (``is_trainable`` True, lines 162-164): FP8LinearFunction / FP8GroupedMatmulFunction
# (finegrained_fp8.py lines 306-375) give the input its gradient through the weight dequantized in the backward and
# the frozen FP8 weights none -- so LoRA trains over the FP8 base, and full fine-tuning (no weight gradient) needs
# the weights dequantized first (FineGrainedFP8Config(dequantize=True): bf16).
FP8_BLOCK_MIN_CAPABILITY = 89  # quantizer_finegrained_fp8.py lines 49-51: (major, minor) >= (8, 9)
FP8_BLOCK_SOURCE = "transformers 5.24.0 quantizers/quantizer_finegrained_fp8.py validate_environment lines 31-57"
FP8_BLOCK_KEPT_WHY = ("the checkpoint's fp8-block weights stay FP8 (1 B an element + an fp32 scale per 128x128 block; "
                      "embeddings, norms, router and lm_head bf16) under transformers' FineGrainedFP8 quantizer on a "
                      "CUDA GPU of compute capability >= 8.9, and PEFT LoRA trains over them (FP8LinearFunction: the "
                      "input's gradient through the weight dequantized in the backward, integrations/finegrained_fp8.py "
                      "lines 306-322; " + FP8_BLOCK_SOURCE + "); the backward's dequantized weight (one linear, or up "
                      "to 1 GiB of experts: FP8GroupedMatmulFunction.dequant_budget_bytes) is not counted")


def fp8_block_base(spec: ModelSpec, w: TrainingWorkload, method: str | None = None) -> tuple[bool, str] | None:
    """Whether the model weights of ``w`` (run as ``method``, default its own) stay in the checkpoint's fp8-block
    format, and why: None where the
    checkpoint is not stored fp8-block (``weight_formats.stored_format``), else (kept, why). Kept: a LoRA run (frozen
    base) on transformers + PEFT (no framework profile or Megatron precision, PyTorch kernels, no ZeRO-3/FSDP
    sharding, base_dtype not given) on a GPU transformers keeps FP8 on (CUDA or ROCm, compute capability >= 8.9 or
    not known). Otherwise the base is the dequantized one, and ``why`` says why. The one rule the training estimate
    and the QLoRA refusal read (the comment above)."""
    if stored_format(spec)[0] != "fp8-block":
        return None
    method = method or w.method
    deq = "the base is sized dequantized to bf16 (FineGrainedFP8Config(dequantize=True))"
    if method == "full":
        return False, (f"{spec.name} is published fp8-block: full fine-tuning trains its weights, which FP8Linear "
                       f"gives no gradient (integrations/finegrained_fp8.py lines 306-322), so {deq}")
    if method != "lora":
        return False, f"{spec.name} is published fp8-block; {method} does not train over it"
    if given(w, "base_dtype"):
        return False, f"given base_dtype {w.base_dtype}: the checkpoint's fp8-block weights dequantized on load"
    if w.device == "cpu" or w.gpu_runtime == "metal":
        return False, (f"{spec.name} is published fp8-block and transformers dequantizes a pre-quantized FP8 "
                       f"checkpoint to bf16 where no CUDA/XPU GPU is present ({FP8_BLOCK_SOURCE})")
    if w.gpu_capability is not None and w.gpu_capability < FP8_BLOCK_MIN_CAPABILITY:
        cc = f"{w.gpu_capability // 10}.{w.gpu_capability % 10}"
        return False, (f"{spec.name} is published fp8-block and transformers dequantizes it to bf16 on a GPU of "
                       f"compute capability {cc}, below 8.9 ({FP8_BLOCK_SOURCE})")
    if (w.framework != "none" or w.precision in MEGATRON_PRECISIONS or w.kernels != "pytorch"
            or w.fsdp is not None or w.zero == 3 or w.precision == "fp32"):
        return False, (f"{spec.name} is published fp8-block; an FP8 base is modelled for transformers + PEFT LoRA "
                       "in bf16 mixed precision unsharded only (no framework profile, Megatron, Unsloth kernels, "
                       f"ZeRO-3 or FSDP), so {deq}")
    return True, FP8_BLOCK_KEPT_WHY


def qlora_base_format(spec: ModelSpec, nf4_format: str = "nf4-dq") -> str:
    """The base format QLoRA trains over: a GPTQ int4 checkpoint stays GPTQ (PEFT LoRA over auto-gptq's QuantLinear),
    anything else is quantized by bitsandbytes to ``nf4_format`` (the workload's: NF4 with or without double
    quantization)."""
    q = spec.quantization_config
    return "gptq-int4" if q.get("quant_method") == "gptq" and q.get("bits", 4) == 4 else nf4_format


def qlora_fused_experts(spec: ModelSpec, w: TrainingWorkload) -> bool:
    """Whether the QLoRA base keeps its routed experts and router in the base dtype: a bitsandbytes NF4 base of an
    MoE model under transformers 5, which stores them as fused nn.Parameters (formulas/nf4_quantization.py)."""
    return w.method == "qlora" and fused_experts_kept(spec, qlora_base_format(spec, w.nf4_format), w.nf4_quantizer)


def compute_bytes(w: TrainingWorkload) -> int:
    """Bytes per element of the step's activations (matmul inputs/outputs, the attention's q/k/v): the precision
    recipe's, 2 under QLoRA (bitsandbytes' 16-bit compute dtype)."""
    rec = recipe(training_recipe_name(w.precision, w.zero, w.method))
    return rec.compute_bytes if w.method != "qlora" else 2


AttentionKernelCall = tuple[str, str, str, "int | None", str, bool, bool, bool, int]


def attention_kernel_call(spec: ModelSpec, w: TrainingWorkload, device: Device) -> AttentionKernelCall | None:
    """The arguments of ``efficiency.timed_attention_kernel`` / ``attention_kernel_refusal`` for the attention of
    ``w`` on ``device`` (the attention API, the kernel it runs, the GPU's architecture and compute capability, the
    q/k/v dtype of the precision recipe, fewer K/V heads than query heads handed to SDPA without enable_gqa, a mask the
    module always materialises (Falcon), whether the caller named the kernel (a profile's is not named), the widest
    q/k/v head); None where no fused kernel runs: off a GPU (a CPU's or Apple chip's attention; flex refused there by
    specs/training.py), eager attention, no attention layer. The one reading the memory's device checks and the duration (estimate/duration.py) share."""
    if device.kind != "gpu" or w.attention == "eager" or not spec.attention_layers:
        return None
    return (w.attention, megatron_attention_kernel(w, device) or attention_kernel_of(w.attention, w.attention_kernel),
            device.architecture, device.capability,
            attention_dtype(w.precision, compute_bytes(w)), spec.math_attention, spec.attention_mask_materialised,
            given(w, "attention_kernel"), attention_head_width(spec))


def megatron_attention_kernel(w: TrainingWorkload, device: Device) -> str | None:
    """The kernel Megatron-Core's TEDotProductAttention runs on ``device`` where the caller named neither an attention
    API other than the default 'sdpa' nor a kernel: TransformerEngine's own backend choice
    (formulas/sdpa_dispatch.py ``te_attention_backend``: cuDNN's fused attention from sm90); None where it does not
    apply (not a megatron precision, a kernel or attention given, below sm90: SDPA's dispatch stands)."""
    return te_attention_backend(device.capability) if megatron_te_attention(w) else None


def megatron_te_attention(w: TrainingWorkload) -> bool:
    """Whether ``w``'s attention is Megatron-Core's TEDotProductAttention with TransformerEngine choosing its backend:
    a megatron precision, the default attention API 'sdpa' and no kernel named. The one predicate the duration's
    kernel (``megatron_attention_kernel``) and the estimate's attention assumptions read."""
    return w.precision in MEGATRON_PRECISIONS and w.attention == "sdpa" and w.attention_kernel is None


def attention_head_width(spec: ModelSpec) -> int:
    """The widest per-head q/k/v width the attention kernel takes: ``head_dim``; under MLA the larger of the q/k head
    (qk_nope_head_dim + qk_rope_head_dim) and the v head (v_head_dim)."""
    m = spec.mla
    return spec.head_dim if m is None else max(m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim)


def refuse_attention_kernel(spec: ModelSpec, w: TrainingWorkload, device: Device) -> None:
    """Refuse (``DeviceCannotRunError``: exit 2 where the device is given, a rejected option in a search) a training
    workload whose attention kernel cannot run on ``device`` (``efficiency.attention_kernel_refusal``: flex-attention
    below sm70, the flash-attn package below sm80 or in fp32, a forced SDPA backend its checks refuse). Called wherever
    a training workload meets a named device, whatever is asked: ``estimate_training(device=)``, the reverse
    questions, ``fit_training`` (fit --train, train --device, recommend, the plan) and the duration, so a memory-only
    answer refuses it exactly as the duration does, with the same one-line message. The workload's framework profile
    is applied first (estimate/framework.py ``with_framework``, idempotent), so every caller checks the kernel the
    estimate and the duration run, whether it passes the raw or the applied workload. The float8 linears' GEMM
    (torch._scaled_mm) is refused here too, on a GPU it cannot run on (estimate/device.py ``float8_refusal``: CUDA
    below compute capability 8.9, ROCm before CDNA3), with the same reach; float8 on an Intel Gaudi, which runs it
    through a stack not modelled, raises ``NotModelledError`` (``float8_not_modelled``) with the same reach."""
    spec, w = with_framework(spec, w)
    call = attention_kernel_call(spec, w, device)
    refused = E.attention_kernel_refusal(*call) if call is not None else None
    if refused is not None:
        raise refused
    no_float8 = float8_refusal(device, w.float8_recipe, w.gpu_capability) if w.float8 else None
    if no_float8 is not None:
        raise DeviceCannotRunError("float8", no_float8)
    unmodelled = float8_not_modelled(device) if w.float8 else None
    if unmodelled is not None:  # the device runs it (a Gaudi's own TransformerEngine): not modelled, not "cannot"
        raise NotModelledError("float8", unmodelled)


# FSDP shards over a torch.distributed process group; on macOS the backend is Gloo (torch maps 'mps' to gloo since
# pytorch/pytorch#149538), whose collectives check the tensors' device and take CPU and CUDA only (ProcessGroupGloo.cpp
# "unsupported device type", quoted in pytorch/pytorch#184010, 2026-05; #160732 "GLOO backend should have MPS
# capability" open, its PR #160733 closed unmerged). No source shows FSDP running on MPS tensors: warned, not refused,
# and only over more than one device (a world of one process may skip every collective). DDP's gradient all-reduce
# over several Apple GPUs goes through the same Gloo group on the same MPS tensors: the same warning.
FSDP_ON_MPS = ("fsdp over several Apple GPUs: torch's Gloo backend, the process group FSDP gets on macOS, takes CPU "
               "and CUDA tensors only (pytorch/pytorch#184010, #160732), so no FSDP run on MPS is known; sized as "
               "FSDP on a CUDA GPU")
DDP_ON_MPS = ("data parallel over several Apple GPUs: DDP's gradient all-reduce goes through torch's Gloo backend "
              "(the process group on macOS), which takes CPU and CUDA tensors only (pytorch/pytorch#184010, "
              "#160732), so no multi-device run on MPS is known; sized as on a CUDA GPU")


# bitsandbytes on an Apple GPU (MPS), at tag 0.50.1 (commit 37d2a93): the 4-bit ops QLoRA runs (quantize_4bit,
# dequantize_4bit, gemm_4bit) are registered for "mps" in bitsandbytes/backends/mps/ops.py (lines 131, 167, 241), first
# in 0.50.0 (c5d481b; 0.49.2 has no MPS backend); the 8-bit blockwise optimizer step (optimizer_update_8bit_blockwise)
# is registered for cpu, cuda and xpu only (backends/{cpu,cuda,xpu}/ops.py; none in backends/mps or default), and
# README.md's support table marks 8-bit optimizers on Metal as in progress (line 185-190)
NF4_ON_MPS_WHY = ("QLoRA's NF4 base on an Apple GPU runs on bitsandbytes' MPS backend, first released in 0.50.0 "
                  "(bitsandbytes/backends/mps/ops.py quantize_4bit, gemm_4bit @37d2a93, tag 0.50.1); older releases "
                  "have no 4-bit path on MPS")
EIGHT_BIT_OPTIMIZER_ON_MPS = (
    "optimizer {optimizer} on an Apple GPU: bitsandbytes has no 8-bit optimizer step for MPS "
    "(optimizer_update_8bit_blockwise is registered for cpu, cuda and xpu only, backends/*/ops.py @37d2a93, tag "
    "0.50.1; its README marks 8-bit optimizers on Metal as in progress), so no such run is known; sized as on a CUDA "
    "GPU (adamw keeps fp32 states and runs)")


def resolve(spec: ModelSpec, w: TrainingWorkload, acc: Acc) -> TrainingContext:
    """Apply the workload's defaults for ``spec`` and validate what needs the model (see module docstring)."""
    no_stage = offload_without_zero(w)  # on the stage the estimate sizes (a chosen one included)
    if no_stage is not None:
        raise no_stage
    rec = recipe(training_recipe_name(w.precision, w.zero, w.method))
    record_workload(w, acc, ("method", "precision", "micro_batch", "seq_len", "grad_accumulation",
                             "grad_checkpointing", "attention", "packing", "loss", "loss_chunks", "kernels"))
    if spec.norm_kind == "layernorm":
        record_workload(w, acc, ("layernorm",))
    elif w.layernorm != "torch" and given(w, "layernorm"):  # a profile's default (llm-foundry's) is not the user's
        acc.warnings.append(f"layernorm {w.layernorm!r} changes nothing: {spec.name} has RMSNorm, not LayerNorm")
    if w.train_metric_passes:
        record_workload(w, acc, ("train_metric_passes",))
    kernel_given = given(w, "attention_kernel")
    acc.assumptions.append(Assumption("attention_kernel", attention_kernel_of(w.attention, w.attention_kernel),
                                      not kernel_given, "given" if kernel_given
                                      else profile_why(w, "attention_kernel")
                                      or (MEGATRON_ATTENTION_KERNEL_WHY if megatron_te_attention(w)
                                          else DEFAULT_ATTENTION_KERNEL_WHY[w.attention])))
    if w.framework != "none":
        record_workload(w, acc, ("framework",))
        for field, why in model_defaults_applied(spec, w):  # the framework's own model code's layout
            acc.assumptions.append(Assumption("model." + field, getattr(spec, field), True, why))
    bf16_warning = precision_notes(w)[1]
    if bf16_warning is not None:
        acc.warnings.append(bf16_warning)
    if w.gpu_runtime == "metal" and w.gpus > 1:  # one device: no collective to run
        acc.warnings.append(FSDP_ON_MPS if w.fsdp is not None else DDP_ON_MPS)
    if rec.name != w.precision:
        acc.assumptions.append(Assumption("precision_semantics", rec.name, True,
                                          f"{w.precision} under ZeRO-{w.zero} is {DEEPSPEED_PRECISION_SOURCE}"))
    if w.method == "qlora":
        record_workload(w, acc, ("nf4_quantizer", "loop_keeps_graph"))
        load_bound = async_load_bound_bytes(weight_bytes(spec, "bf16").total, w.nf4_quantizer)
        # eq. (6): a bound on a load-time race, named, not counted; only the pool metrics can show it (the
        # allocator keeps it reserved), and no workload field states the transformers release: docs/training.md
        if load_bound and w.metric in POOL_METRICS:
            acc.warnings.append(ASYNC_LOAD_WARNING.format(dtype="bf16", bound=format_bytes(load_bound)))
        if w.loop_keeps_graph and not matmul_keeps_input(w.nf4_quantizer):
            acc.warnings.append(f"loop_keeps_graph changes nothing with nf4_quantizer {w.nf4_quantizer!r}: its one "
                                "modelled effect is what bitsandbytes 0.42's 4-bit matmuls keep (eq. G1; "
                                "--nf4-quantizer bitsandbytes-0.42 or lightning-bnb-0.42)")
    if w.zero == 3 and w.fsdp is None:
        record_workload(w, acc, ("deepspeed_gather",))
    if not w.zero and w.fsdp is None and not w.optimizer_in_backward:
        record_workload(w, acc, ("zero_grad",))
    if w.grad_checkpointing == "selective" and w.attention != "eager" and w.recomputed_modules == {"core_attn"}:
        megatron = training_tp_framework(w.precision, w.framework) == "megatron-core"
        acc.warnings.append(SELECTIVE_FUSED_WARNING.format(attention=w.attention, advice=SELECTIVE_FUSED_ADVICE[megatron]))
    if w.doc_len is not None and w.attention in ("sdpa", "eager"):
        acc.warnings.append(DOC_LEN_MASKED_WARNING.format(attention=w.attention))
    if w.grad_checkpointing in ("full", "selective-op"):
        record_workload(w, acc, ("checkpoint_every",))
    if w.grad_checkpointing == "selective" and w.precision in MEGATRON_PRECISIONS:
        record_workload(w, acc, ("recompute_modules",))
    if w.grad_checkpointing == "full":
        record_workload(w, acc, ("checkpoint_offload", "checkpoint_impl"))
    record_workload(w, acc, ("compile", "activation_offload", "tiled_mlp", "float8", "context_parallel"))
    if w.context_parallel > 1:
        record_workload(w, acc, ("cp_kind",))
    if w.float8:
        record_workload(w, acc, ("float8_recipe",))
        if w.precision in MEGATRON_PRECISIONS and w.float8_recipe in TE_RECIPES:
            acc.assumptions.append(Assumption("fp8_param_gather", w.fp8_params, not given(w, "fp8_param_gather"),
                                              fp8_param_gather_why(w)))
    if w.compile:
        record_workload(w, acc, ("compile_scope",))
    if w.fsdp is not None:
        record_workload(w, acc, ("fsdp_version",))
        if w.fsdp_version == 2:
            record_workload(w, acc, ("fsdp2_units",))
        elif w.adapters:
            record_workload(w, acc, ("fsdp1_lora_wrap",))
    if w.metric in ("reserved", "nvidia-smi"):  # what the allocator keeps reserved (estimate/allocator.py)
        record_workload(w, acc, ("batch_shapes",))
    if w.device != "gpu":
        record_workload(w, acc, ("device",))
    opt_name = acc.assume("optimizer", *_default_optimizer(w)[:1], w.optimizer, _default_optimizer(w)[1])
    opt = optimizer_info(str(opt_name))
    if w.gpu_runtime == "metal" and str(opt_name).endswith("-8bit"):
        acc.warnings.append(EIGHT_BIT_OPTIMIZER_ON_MPS.format(optimizer=opt_name))
    if w.method == "qlora" and w.gpu_runtime == "metal":
        acc.assumptions.append(Assumption("nf4_on_mps", "bitsandbytes >= 0.50.0", True, NF4_ON_MPS_WHY))
    if w.tp > 1:
        check_tensor_parallel(spec, w.tp)
    if w.ep > 1:
        if not spec.is_moe or spec.moe is None:
            raise InputError(f"expert parallelism (ep={w.ep}) needs a mixture-of-experts model; {spec.name} is dense")
        if spec.moe.num_experts % w.ep:
            raise InputError(f"ep {w.ep} does not divide the {spec.moe.num_experts} routed experts of {spec.name}")
    if w.moe_router_fusion and (not spec.is_moe or spec.moe is None):  # a dense model has no router to fuse
        raise FieldError("moe_router_fusion", f"moe_router_fusion is Megatron-Core's MoE router's (TE's fused top-k "
                         f"and score function); {spec.name} is dense: it has no router")
    check_framework_layout(spec, w)
    if w.ep > 1 and w.zero == 3 and w.fsdp is None:  # (tp 1: check_framework_layout refuses tp > 1 here)
        acc.assumptions.append(Assumption("expert_layer", "AutoEP", True, AUTOEP_WHY))
    if w.ep > 1 and w.moe_dispatcher == "flex":
        acc.assumptions.append(Assumption("flex_dispatcher_buffers", "not counted", True, FLEX_BUFFERS_WHY))
    if w.etp is not None:
        check_expert_tp(spec, w)
    if spec.is_moe and (w.tp > 1 or w.etp is not None):
        acc.assumptions.append(Assumption(
            "etp", expert_tp(w), w.etp is None,
            "given" if w.etp is not None else ETP_WHY[training_tp_framework(w.precision, w.framework) or ""]))
    if w.pp > spec.num_layers:
        raise InputError(f"pp {w.pp} exceeds the {spec.num_layers} layers of {spec.name}")
    if w.context_parallel > 1 and spec.recurrent_layer_count:
        # torchtitan's context parallelism replaces SDPA with ring attention and nothing else (formulas/
        # context_parallel.py): a recurrent scan over one rank's shard would start from a zero state. Megatron-Core's
        # all-to-all Mamba CP (megatron/core/ssm/mamba_context_parallel.py) is another scheme, not modelled.
        raise InputError(f"context_parallel {w.context_parallel}: {spec.name} has {spec.recurrent_layer_count} "
                         f"recurrent ({spec.recurrent.kind if spec.recurrent else 'linear-attention'}) layers, and "
                         "torchtitan's context parallelism (ring attention over SDPA) has no rule for them")

    if w.cp_kind == "ulysses":  # DeepSpeed's UlyssesSPAttentionHF checks the heads (formulas/context_parallel.py)
        refusal = ("its attention is multi-head latent attention, whose heads UlyssesSPAttentionHF's fixed q/k/v "
                   "shapes do not describe" if spec.mla is not None else
                   "it is an encoder-decoder model" if spec.encoder_decoder is not None else
                   ulysses_refusal(spec.num_heads, spec.num_kv_heads, w.context_parallel))
        if refusal:
            raise InputError(f"cp_kind 'ulysses' with context_parallel {w.context_parallel} on {spec.name}: {refusal} "
                             "(DeepSpeed ulysses_sp.py @edaa7221 lines 145-150)")

    # weights of the model
    if w.method == "full":
        base_bytes, base_format = rec.model_bytes, {4: "fp32", 2: "bf16"}[rec.model_bytes]
    elif w.method == "qlora":
        q = spec.quantization_config.get("quant_method")
        gptq = qlora_base_format(spec, w.nf4_format) == "gptq-int4"
        if q and q != "bitsandbytes" and not gptq:
            fp8 = fp8_block_base(spec, w, "lora")
            option = (("use method lora: transformers keeps its FP8 weights on this GPU and PEFT LoRA trains over "
                       "them" if fp8[0] else "use method lora, over its weights dequantized to bf16 here "
                       "(transformers keeps them FP8 only on a CUDA GPU of compute capability >= 8.9)")
                      if fp8 is not None else "start from the unquantized checkpoint")
            raise InputError(f"qlora quantizes bf16/fp16 linears with bitsandbytes NF4 or trains on a GPTQ int4 "
                             f"checkpoint; {spec.name} is {q}-quantized ({option})")
        if not any_quantizable(spec):
            raise InputError(f"qlora: {spec.name} has no linear layers bitsandbytes can quantize to 4 bits")
        kbit_default, kbit_why = qlora_unquantized_dtype(w, gptq)
        other = acc.assume("base_dtype", kbit_default, w.base_dtype, kbit_why)
        base_bytes, base_format = DTYPE_BYTES[str(other)], "gptq-int4" if gptq else w.nf4_format
        if gptq:
            acc.assumptions.append(Assumption("base_weights", "gptq-int4", True, "QLoRA on the checkpoint's GPTQ "
                                              "int4 weights (auto-gptq QuantLinear under PEFT LoRA)"))
        else:
            acc.assumptions.append(Assumption("base_weights", w.nf4_format, not given(w, "nf4_format"),
                                              "QLoRA: NF4 with double quantization (Dettmers et al. 2023 section 3), "
                                              "bitsandbytes Linear4bit" if w.nf4_format == "nf4-dq" else
                                              "given: NF4 with fp32 block scales, bitsandbytes Linear4bit"))
            if qlora_fused_experts(spec, w):
                acc.assumptions.append(Assumption(
                    "fused_experts", str(other), True, FUSED_EXPERTS_WHY))
    else:
        default = "fp32" if w.precision == "fp32" else "bf16"
        bd = str(acc.assume("base_dtype", default, w.base_dtype,
                            "frozen base loaded in bf16 (torch_dtype=bfloat16), the usual PEFT setup"
                            if default == "bf16" else "fp32 training keeps the base in fp32"))
        base_bytes, base_format = DTYPE_BYTES[bd], bd
    fp8 = fp8_block_base(spec, w)
    if fp8 is not None:
        acc.assumptions.append(Assumption("base_weights", "fp8-block" if fp8[0] else base_format, True, fp8[1]))
        if fp8[0]:
            base_format = "fp8-block"
        elif w.method != "qlora" and not given(w, "base_dtype"):
            acc.warnings.append(f"{fp8[1]}: {format_bytes(weight_bytes(spec, base_format, GROUP_SIZE_DEFAULT).total)} "
                                f"of {base_format} weights, against "
                                f"{format_bytes(weight_bytes(spec, 'fp8-block', GROUP_SIZE_DEFAULT).total)} as published")

    lora = None
    adapter_bytes = 0
    if w.adapters:
        lora = lora_params(spec, w.rank, w.targets, dora=w.dora)
        ceiling = rank_ceiling(lora.layout)
        if ceiling is not None and w.rank > ceiling[0]:
            acc.warnings.append(
                f"LoRA rank {w.rank} is above min(in, out) = {ceiling[0]} of the {ceiling[1]} projection: its update "
                f"B A has rank at most {ceiling[0]}, so the rank is capped there in effect and the adapters' "
                f"parameters beyond it are wasted (formulas/lora.py rank_ceiling; Hu et al. 2021 sec. 4.1); a rank of "
                f"{ceiling[0]} or less trains the same update")
        if rec.name in DEEPSPEED_PRECISION.values():  # the engine casts every parameter, adapters too
            default_ad, ad_why = rec.name.split("-")[1], ("DeepSpeed casts every parameter to its bf16/fp16 "
                                                          "(runtime/engine.py lines 1755-1762); fp32 master copies "
                                                          "live in the optimizer partition")
        else:
            # fp32 parameters (fp32, FSDP2's MixedPrecisionPolicy: param_dtype only for compute) or mixed precision
            default_ad = ("fp32" if (rec.autocast or rec.master_bytes or rec.model_bytes == 4)
                          else w.precision.split("-")[0])
            ad_why = ("the sharded parameters stay fp32 under FSDP2's MixedPrecisionPolicy, adapters too (bf16 only "
                      "as all-gathered for compute)" if w.precision == "fsdp-bf16-mixed" else
                      "PEFT keeps adapters in fp32 under mixed precision (autocast_adapter_dtype=True)"
                      if default_ad == "fp32" else "adapters in the training dtype (pure half precision)")
        ad = str(acc.assume("adapter_dtype", default_ad, w.adapter_dtype, ad_why))
        adapter_bytes = DTYPE_BYTES[ad]
        if w.fsdp is not None and w.fsdp_version == 1 and w.method == "qlora":
            raise InputError("FSDP1 QLoRA (a quantized base in flat parameters) is not modelled; give "
                             "fsdp_version 2")
        if (w.fsdp is not None and w.fsdp_version == 1 and w.fsdp1_lora_wrap == "with-layers"
                and adapter_bytes != base_bytes):
            raise InputError(f"FSDP1 flattens each unit into one flat parameter of one dtype (torch "
                             f"_flat_param.py lines 804-836): the {ad} adapters cannot share a unit with the "
                             f"{base_format} base; give adapter_dtype equal to base_dtype, fsdp1_lora_wrap "
                             "adapters-apart, or fsdp_version 2")
        if w.modules_to_save:
            acc.assumptions.append(Assumption("modules_to_save", ",".join(w.modules_to_save), False,
                                              "trained copies beside the frozen originals (PEFT ModulesToSaveWrapper)"))
        record_workload(w, acc, ("lora_dropout",))
        fused = fused_targets(spec, w.targets)  # the targets that name a fused linear on this model (one adapter)
        tower = vision_targets(spec, w.targets)  # the vision tower's modules the named targets adapt as well
        refused = peft_refused_towers(spec, w.targets)
        if refused:
            acc.warnings.append(
                f"PEFT refuses target_modules {', '.join(refused)} on {spec.name}: they also match its vision/audio "
                f"towers' Gemma4ClippableLinear modules, which LoRA cannot wrap (formulas/lora.py "
                f"peft_refused_towers); the count is the language model's, as a regex target such as "
                f"r'.*language_model\\..*\\.({'|'.join(refused)})' adapts")
        acc.assumptions.append(Assumption("lora", f"rank {w.rank}, targets {'all-linear' if w.targets == ALL_LINEAR else ','.join(w.targets)}"
                                          + (f" (one adapter on each fused {', '.join(m for _, m in fused)})"
                                             if fused else "")
                                          + (f" (vision tower's {', '.join(tower)} too)" if tower else "")
                                          + (", DoRA" if w.dora else ""), not given(w, "rank", "targets"),
                                          "LoRA rank and adapted modules (Hu et al. 2021)" + "".join(
                                              f"; {t} name the fused {m}: PEFT adapts the whole linear once"
                                              for t, m in fused)
                                          + ("; PEFT matches target names by suffix, so the vision tower's "
                                             f"{', '.join(tower)} take adapters as the decoder's do (formulas/lora.py "
                                             "VISION_MODULES)" if tower else "")))
    if opt.bnb:  # bitsandbytes' 32-bit-class states are fp32 whatever the parameters (formulas/training_states.py)
        if w.optimizer_state_dtype not in (None, "fp32"):
            raise InputError(f"optimizer {opt.name} (bitsandbytes) keeps its states in fp32 (8-bit: uint8 + fp32 "
                             f"absmax); optimizer_state_dtype {w.optimizer_state_dtype} applies to torch optimizers")
        sd = str(acc.assume("optimizer_state_dtype", "fp32", w.optimizer_state_dtype,
                            "bitsandbytes allocates its 32-bit states as fp32 whatever the parameter dtype "
                            "(optim/optimizer.py @0.50.1 get_state_buffer(p, dtype=torch.float32), init_state)"))
        if opt.eight_bit:
            acc.assumptions.append(Assumption("bnb_blocksize", BNB_BLOCKSIZE, True, BNB_BLOCKSIZE_SOURCE))
    else:
        sd_default = rec.default_state_dtype if not w.adapters else (
            "fp32" if adapter_bytes == 4 or rec.master_bytes else rec.default_state_dtype)
        sd = str(acc.assume("optimizer_state_dtype", sd_default, w.optimizer_state_dtype,
                            "torch optimizers keep states in the dtype of the parameters they update"))
    impl_default, impl_why = default_optimizer_impl(opt.name, w.device)
    impl = str(acc.assume("optimizer_impl", impl_default, w.optimizer_impl, impl_why))

    # autocast's half copies of fp32 linear weights; a QLoRA base's are its unquantized lm_head's only (states.py)
    copies = 2 if (rec.autocast and base_bytes == 4 and (w.method != "qlora" or not (
        base_format == "gptq-int4" or quantizes_lm_head(w.nf4_quantizer)))) else 0
    compute = compute_bytes(w)
    # FSDP's MixedPrecisionPolicy casts the forward inputs and gathers bf16 parameters: the residual stream is bf16
    residual = rec.compute_bytes if w.precision == "fsdp-bf16-mixed" else base_bytes
    # bitsandbytes' own MatMul4Bit autograd runs the 4-bit linears (Unsloth's kernels replace it with their own;
    # Liger's leave the linears to PEFT and bitsandbytes)
    qlora_nf4 = w.method == "qlora" and base_format != "gptq-int4" and w.kernels != "unsloth"
    adapted = adapted_roles(spec, w.targets) if lora else frozenset()  # (lora's modules are these targets')
    target = 0
    if spec.encoder_decoder is not None:
        target = int(acc.assume("target_len", w.seq_len, w.target_len,
                                "an encoder-decoder's target (decoder) tokens per sequence; seq_len is its source "
                                "(encoder) length; not given: seq_len"))
        long = source_length_warning(spec, w.seq_len)
        if long is not None:
            acc.warnings.append(long)
    elif w.target_len is not None:
        raise FieldError("target_len", f"target_len applies to encoder-decoder models; {spec.name!r} is decoder-only "
                         "(drop it)")
    mamba_path = "torch"
    cuda = w.device != "cpu" and w.gpu_runtime == "cuda"
    rocm = w.device != "cpu" and w.gpu_runtime == "rocm"
    if spec.recurrent is not None and spec.recurrent.kind in ("mamba", "mamba2") and spec.recurrent_layer_count:
        # transformers 5.24 takes mamba_ssm / causal-conv1d whenever they import (integrations/hub_kernels.py lines
        # 990-1055); they build for CUDA and, from source, for ROCm (both setup.py: HIP_BUILD = torch.version.hip),
        # so elsewhere the torch reference functions run (mamba_activations.py)
        if w.mamba_path == "cuda-kernels" and not (cuda or rocm):
            raise FieldError("mamba_path", "mamba_path cuda-kernels needs a CUDA or ROCm GPU (mamba_ssm and "
                             "causal-conv1d are CUDA / HIP extensions); this job runs on "
                             f"{'cpu' if w.device == 'cpu' else w.gpu_runtime}")
        mamba_path = str(acc.assume(
            "mamba_path", default_mamba_path(w.device, w.gpu_runtime), w.mamba_path,
            "CUDA GPU: mamba_ssm and causal-conv1d installed (MambaSplitConv1dScanCombinedFn / SelectiveScanFn, eqs. "
            "M2, J2); without them transformers runs its torch reference functions, which keep several times more"
            if cuda else "ROCm GPU: mamba_ssm and causal-conv1d build there from source with hipcc (setup.py "
            "HIP_BUILD; on ROCm 6.0 after a header patch, their READMEs' 'Patching ROCm'), which a plain install does "
            "not do, so transformers' torch reference functions (eqs. M1, J1); mamba_path cuda-kernels where built"
            if rocm else f"no CUDA or ROCm GPU ({'cpu' if w.device == 'cpu' else w.gpu_runtime}): transformers' "
            "torch reference functions (chunked scan / sequential loop in fp32, eqs. M1, J1)"))
    elif w.mamba_path is not None:
        raise FieldError("mamba_path", f"mamba_path applies to models with Mamba layers; {spec.name!r} has none "
                         "(drop it)")
    mlp_shards = 0
    if w.tiled_mlp:
        if (spec.moe is not None or not spec.mlp_gated or spec.encoder_decoder is not None or spec.gemma3n is not None
                or spec.recurrent is not None or spec.parallel_block):
            raise NotModelledError("tiled_mlp", f"tiled_mlp is modelled for decoders whose every layer has a dense gated (SwiGLU) "
                                   f"MLP (Llama, Qwen, Mistral); {spec.name} has another layout")
        mlp_shards = tiled_mlp_shards(local_tokens(w.seq_len, w.context_parallel), spec.hidden_size)
        acc.warnings.append(TILED_MLP_DURATION_WARNING)
    act = ActivationSetup(
        mlp_shards=mlp_shards, target=target, mamba_path=mamba_path, batch=w.micro_batch, seq=local_tokens(w.seq_len, w.context_parallel), residual=residual, compute=compute, expert=base_bytes if w.method != "qlora" else 2,
        weight_copy=copies, autocast=rec.autocast, full=w.method == "full", adapted=adapted,
        adapter_cast_copy=bool(w.adapters and rec.autocast and adapter_bytes != compute),
        rank=w.rank if w.adapters else 0, dora=w.dora, attention=w.attention, packing=w.packing,
        checkpointing=w.grad_checkpointing, tp=w.tp, sp=w.sequence_parallel, etp=expert_tp(w) if w.etp else 0,
        dropout=w.lora_dropout if w.adapters else "none",
        # a dropout mask: bool on CUDA (native_dropout), the scaled noise in the input dtype on a CPU (_dropout_impl)
        dropout_mask=compute if w.device == "cpu" else 1,
        # Gated DeltaNet: fla's Triton kernels need a GPU; a CPU runs transformers' torch fallback (eqs. DN2, DN3)
        recurrent_kernel="torch" if w.device == "cpu" else "fla",
        frozen_keeps_input=qlora_nf4 and matmul_keeps_input(w.nf4_quantizer),
        lp_layernorm=w.layernorm == "low-precision",
        megatron_te=w.precision in MEGATRON_PRECISIONS, recompute=w.recomputed_modules,
        lm_head_keeps_input=(qlora_nf4 and matmul_keeps_input(w.nf4_quantizer) and quantizes_lm_head(w.nf4_quantizer)
                             and not spec.tie_word_embeddings))
    if w.kernels == "unsloth":
        unsloth_kernels.check(spec, act)
    for what, on in (("kernels liger", w.kernels == "liger"), ("loss liger-flce", w.loss == "liger-flce")):
        if on:  # apply_liger_kernel_to_* patches these model types only
            liger_kernels.check(spec, what)
    if w.loss == "liger-flce" and "output" in act.adapted:
        raise InputError("loss liger-flce multiplies by lm_head.weight inside the loss (Liger-Kernel "
                         "@ead96b6 transformers/model/llama.py lines 183-197), so a LoRA adapter on the lm_head would not run; "
                         "leave lm_head out of the LoRA targets")
    return TrainingContext(spec=spec, w=w, recipe=rec, optimizer=opt, state_bytes=DTYPE_BYTES[sd],
                           optimizer_impl=impl, base_bytes=base_bytes, base_format=base_format,
                           adapter_bytes=adapter_bytes, lora=lora, act=act, weight_copy_bytes=copies,
                           fused_experts=qlora_fused_experts(spec, w))


def default_optimizer_impl(optimizer: str, device: str) -> tuple[str, str]:
    """(implementation, why) an optimizer runs when none is given: HF Trainer's fused AdamW for the Adam family;
    torch's own default for the optimizers HF Trainer builds plainly (optim "sgd" is torch.optim.SGD, "adafactor"
    torch.optim.Adafactor here): SGD passes use_fused=False to _default_to_fused_or_foreach, so foreach on CUDA and
    the for-loop on a CPU (torch 2.13.0 torch/optim/sgd.py lines 279-292); Adafactor runs its for-loop unless
    foreach=True is passed (torch/optim/_adafactor.py line 636, ``if foreach``)."""
    if optimizer in ("sgd", "sgd-momentum"):
        impl = "foreach" if device == "gpu" else "for-loop"
        return impl, ("torch.optim.SGD's default: foreach on CUDA, the for-loop on a CPU (use_fused=False; torch "
                      "2.13.0 torch/optim/sgd.py lines 279-292)")
    if optimizer == "adafactor":
        return "for-loop", ("torch.optim.Adafactor's default: the for-loop unless foreach=True (torch 2.13.0 "
                            "torch/optim/_adafactor.py line 636)")
    return "fused", ("HF Trainer default optim adamw_torch_fused (torch >= 2.8); plain torch.optim.AdamW on CUDA uses "
                     "foreach, which adds one state-sized temporary at the step")


# DeepSpeed ZeRO-3 with expert parallelism: the one layer kind that runs (check_framework_layout's docstring)
FLEX_BUFFERS_WHY = ("the flex dispatcher's persistent DeepEP / HybridEP communication buffers are not in the memory "
                    "above: Megatron-Core allocates a DeepEP Buffer of the size hints of its dispatch and combine "
                    "configs (NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/moe/fused_a2a.py lines 36-66; "
                    "deepseek-ai/DeepEP csrc/config.hpp Config.get_nvl_buffer_size_hint / "
                    "get_rdma_buffer_size_hint) or a HybridEP buffer (fused_a2a.py init_hybrid_ep_buffer), typically "
                    "hundreds of MB per device")
AUTOEP_WHY = ("DeepSpeed ZeRO-3 with ep > 1 is read as AutoEP expert layers: DeepSpeed refuses native DeepSpeed-MoE "
              "layers (deepspeed.moe.layer.MoE) under stage 3 and passes only AutoEP ones (deepspeedai/DeepSpeed "
              "@edaa7221 deepspeed/runtime/engine.py:1872-1897 _validate_zero3_moe_compatibility); AutoEP partitions "
              "each rank's experts over the expert data-parallel group only (runtime/zero/stage3.py:658-675), so "
              "the gathered layers hold the rank's own experts, not all of them")


def megatron_sequence_parallel_refusal(spec: ModelSpec, tp: int, sequence_parallel: bool, seq_len: int, cp: int,
                                       tp_comm_overlap: bool) -> FieldError | None:
    """Why Megatron-Core (NVIDIA/Megatron-LM @d98e8a64) will not train ``spec`` with ``tp`` tensor-parallel ranks and
    sequence parallelism ``sequence_parallel`` (at ``seq_len`` tokens a sequence over ``cp`` context-parallel ranks,
    ``tp_comm_overlap`` stated), as the error to raise; None where it trains it. The one rule of
    ``check_framework_layout`` (a stated layout) and the scale-out search's sequence-parallel choice
    (recommend_layout.py ``candidate_layouts``):

    - an MoE model with tp > 1 needs sequence parallelism: ``MoELayer.forward`` raises ValueError in training
      without it (megatron/core/transformer/moe/moe_layer.py:636-640; yaml_arguments.py:335-338 asserts it).
    - ``--tp-comm-overlap`` needs sequence parallelism (megatron/training/arguments.py:1441-1442 asserts it).
    - under sequence parallelism a rank's sequence (seq_len / cp tokens, the first dimension of the [s, b, h]
      hidden states) is split over the tp ranks by the embedding's scatter or reduce-scatter, which asserts that
      tp divides it (megatron/core/tensor_parallel/mappings.py:60-74 ``_split_along_first_dim`` and 159-178
      ``_reduce_scatter_along_first_dim``; called from models/common/embeddings/language_model_embedding.py:143-147).

    Sequence parallelism with tp 1 is TrainingWorkload's refusal (model_parallel_config.py:502-504 raises too)."""
    if tp <= 1:
        return None
    if spec.is_moe and spec.moe is not None and not sequence_parallel:
        return FieldError("sequence_parallel", also=("tp",), message=(
            f"Megatron-Core refuses to train a mixture-of-experts model ({spec.name}) with tp {tp} and no "
            "sequence_parallel (megatron/core/transformer/moe/moe_layer.py:636-640 raises ValueError): give "
            "sequence_parallel"))
    if tp_comm_overlap and not sequence_parallel:
        return FieldError("tp_comm_overlap", also=("sequence_parallel",), message=(
            "Megatron-Core overlaps the tensor-parallel communication with the GEMMs only under sequence "
            "parallelism (megatron/training/arguments.py:1441-1442 asserts it): give sequence_parallel"))
    local = local_tokens(seq_len, cp)
    if sequence_parallel and local % tp:
        return FieldError("seq_len", also=("tp", "sequence_parallel", "context_parallel"), message=(
            f"Megatron-Core's sequence parallelism splits each rank's {local} tokens (seq_len {seq_len}"
            + (f" / context_parallel {cp}" if cp > 1 else "") + f") over the tp {tp} ranks and asserts that tp "
            "divides them (megatron/core/tensor_parallel/mappings.py:60-74): give a seq_len that is a multiple of "
            f"{tp * cp}, or no sequence_parallel"))
    return None


def check_framework_layout(spec: ModelSpec, w: TrainingWorkload) -> None:
    """Refuse the mixture-of-experts layouts the framework itself refuses to train (one line naming the fields):

    - Megatron-Core (precision 'megatron-*'; NVIDIA/Megatron-LM @d98e8a64): ``MoELayer.forward`` raises ValueError
      in training when the attention's tensor-parallel group has more than one rank and sequence parallelism is off
      (megatron/core/transformer/moe/moe_layer.py:636-640; megatron/training/yaml_arguments.py:335-338 asserts the
      same, and model_parallel_config.py:560-565 warns for ep > 1 with tp > 1).
    - DeepSpeed ZeRO-3 with expert parallelism (deepspeedai/DeepSpeed @edaa7221,
      deepspeed/runtime/engine.py:1872-1897 ``_validate_zero3_moe_compatibility``): native DeepSpeed-MoE layers are
      refused under stage 3 and only AutoEP layers pass, and AutoEP under stage 3 refuses AutoTP (tensor
      parallelism): ep > 1 with tp > 1 cannot run. (AutoEP alone partitions the experts over their expert
      data-parallel group, runtime/zero/stage3.py:658-675: formulas/parallelism.py expert_shard_group.)
    - Megatron-Core with ZeRO stage 3 (any model): Megatron has no ZeRO-3. Its distributed optimizer
      (``--use-distributed-optimizer``, megatron/core/optimizer/distrib_optimizer.py ``DistributedOptimizer``) shards
      the fp32 main parameters and optimizer states over the data-parallel group and reduce-scatters the gradients
      (ZeRO-1-like: every rank keeps its whole grad buffer and its whole model shard); parameter sharding is the separate Megatron-FSDP
      path (``--use-megatron-fsdp``), which the megatron precisions do not model. ``zero`` is DeepSpeed's stage.
    - DeepSpeed ZeRO stage 2 or 3 with pipeline parallelism (any model): ``PipelineEngine.__init__`` asserts
      ``zero_optimization_stage() < ZeroStageEnum.gradients``, "ZeRO-2 and ZeRO-3 are incompatible with pipeline
      parallelism" (deepspeedai/DeepSpeed @edaa7221, deepspeed/runtime/pipe/engine.py:76-77): its pipeline schedules
      the gradient all-reduce itself and keeps every stage's gradients whole, so ZeRO-0/1 only. (ZeRO-3 with AutoTP
      tensor parallelism is allowed: "AutoTP + ZeRO stage 3 is supported for both inference and training",
      deepspeed/runtime/engine.py:666-669 @edaa7221.) Megatron's distributed optimizer (the megatron precisions'
      zero 1/2) runs with its own pipeline, and FSDP (``fsdp``) is not DeepSpeed's.

    ``sharded_workload`` (recommend, fit, train --memory) skips the stages refused here: one check."""
    if w.zero == 3 and w.precision.startswith("megatron-"):
        raise FieldError("zero", also=("precision",), message=(
            f"zero 3 with precision {w.precision}: Megatron-Core has no ZeRO-3 (its distributed optimizer shards the "
            "fp32 main parameters and optimizer states; every rank keeps its whole grad buffer and its parameters: "
            "megatron/core/optimizer/distrib_optimizer.py): give zero 1 or 2, or a deepspeed-*/fsdp-* precision"))
    if w.pp > 1 and w.zero >= 2 and w.fsdp is None and not w.precision.startswith("megatron-"):
        raise FieldError("zero", also=("pp",), message=(
            f"zero {w.zero}{' (which offload params needs)' if w.offload == 'params' else ''} with pp {w.pp}: "
            "DeepSpeed's pipeline engine refuses ZeRO stages 2 and 3 (\"ZeRO-2 and "
            "ZeRO-3 are incompatible with pipeline parallelism\", deepspeed/runtime/pipe/engine.py:76-77): give zero "
            "0 or 1, or pp 1"))
    if w.precision.startswith("megatron-"):
        refused = megatron_sequence_parallel_refusal(spec, w.tp, w.sequence_parallel, w.seq_len, w.context_parallel,
                                                     w.tp_comm_overlap)
        if refused is not None:
            raise refused
    if w.ep > 1 and w.zero == 3 and w.fsdp is None and w.tp > 1:
        raise FieldError("zero", also=("ep", "tp"), message=(
            f"DeepSpeed ZeRO-3 with expert parallelism (ep {w.ep}) runs only AutoEP layers, and AutoEP under ZeRO "
            f"stage 3 does not take tensor parallelism (tp {w.tp}; deepspeed/runtime/engine.py:1889-1897): give "
            "zero 1 or 2, or tp 1"))

"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053, section 3): per-device shares.

Column- and row-parallel linears split every matrix across ``tp`` devices; vocabulary-parallel
embeddings and lm_head split the vocabulary (vLLM ``VocabParallelEmbedding``); 1-D tensors (norms) stay
replicated. KV heads are split across devices, but a device holds at least one head, so with fewer KV
heads than devices they are replicated (vLLM ``get_num_kv_heads``: max(1, num_kv_heads // tp)). An MLA
latent cache is one shared "head" and is replicated on every device. vLLM and SGLang hold the K/V projection
weights of that head the same way (``QKVParallelLinear``: ``kv_projection_share``, eq. TP3), and a copy of
Mamba-2's one B/C group on every rank (eq. TP4): ``replica_shares``. An FP8-block checkpoint shards only into whole
blocks of its ``weight_block_size`` (eq. TP5: every sharded linear's split dimension per rank a multiple of the block),
a GPTQ/AWQ/compressed-tensors group checkpoint only into whole groups (``quant_block_refusal``, one of the degrees
``serving_tensor_parallel_refusal`` refuses). In any format, vLLM and SGLang split every feed-forward width exactly
(eq. TP6, ``width_refusal``: the dense MLP's and shared experts' intermediate by tp, the routed experts' by the
ways the MoE layer splits them).

A serving engine also keeps some 2-D weights whole on every rank (``REPLICATED_MATRICES``, per engine and tensor
role): MLA's down-projections, the DSA indexer's projections, the MoE router and Qwen's shared-expert gate.
transformers' own tensor parallelism (``tp_plan="auto"``) splits only what the model's plan names and keeps every
other tensor whole (``TRANSFORMERS_SPLIT``, per model type); a model type without a plan it refuses
(``transformers_tensor_parallel_refusal``). ``replicated_matrix`` is the one rule for both.

What the module holds: per-device shares under tensor parallelism (Megatron-LM), and the degrees vLLM refuses; the
weights a serving engine keeps whole on every rank (``REPLICATED_MATRICES``, per engine and tensor role: MLA q_a/kv_a,
the DSA indexer, MoE routers, Qwen's shared-expert gate, vLLM's Nemotron latent and Gemma per-layer-input projections,
read from vLLM/SGLang model code) and the 1-D ones they split (``SPLIT_VECTORS``: column-parallel biases, sinks);
transformers' own plan (``TRANSFORMERS_SPLIT``); ``kept_whole``, the one rule of both: which activations a rank holds
whole (``activation_split``) and the share of each component's parameters a rank multiplies and reads
(``plan_rank_shares``, eq. TP1: the speed's per-rank FLOPs and decode weight bytes on transformers, vLLM and SGLang
alike); the collectives transformers' plan runs in a forward and their seconds (``transformers_plan_collectives``,
``plan_collective_seconds``, eq. TP2); what vLLM/SGLang ranks hold beyond 1/tp where they copy heads or groups
(``replica_shares``: one whole KV head's K/V projections when tp > KV heads, eq. TP3; Mamba-2's one B/C group, eq.
TP4), in the weights and in eq. TP1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from ..errors import FieldError, InputError
from ..specs import ModelSpec
from .compressed_tensors import CT_METHOD, CTScheme, ct_config, ct_scheme_of
from .params import count_params
from .recurrent_state import extra_groups, mamba2_groups_refusal
from .speed import allgather_time, allreduce_time
from .tensors import Tensor, model_tensors
from .weight_formats import (
    GROUP_SIZE_DEFAULT,
    QUANT_COMPONENTS,
    WeightBytes,
    correction_bias_bytes,
    engine_tensor_bytes,
    normalize_format,
    spec_ct_config,
    tensor_bytes,
)


def check_tensor_parallel(spec: ModelSpec, tp: int) -> None:
    """TP must divide the attention heads (vLLM: 'Total number of attention heads must be divisible by tp')."""
    if tp < 1:
        raise InputError(f"tensor_parallel must be >= 1, got {tp}")
    if spec.num_heads % tp:
        raise FieldError("tensor_parallel",
                         f"tensor_parallel {tp} does not divide the {spec.num_heads} attention heads of {spec.name}")


def serving_tensor_parallel_refusal(spec: ModelSpec, tp: int, engine: str = "vllm", weights: str | None = None,
                                    group_size: int | None = None, expert_tp: int | None = None) -> str | None:
    """Why vLLM (and SGLang, whose QKVParallelLinear is the same) will not shard ``spec`` ``tp`` ways, or None.

    vllm 0.19.1 (PyPI wheel): the attention heads must divide by tp (vllm/config/model.py:1110-1116, "Total number of
    attention heads ... must be divisible by tensor parallel size"); the KV heads are split when tp < kv heads and
    replicated when tp >= kv heads, each through ``divide``, which asserts exact divisibility
    (vllm/model_executor/layers/linear.py:1012-1016, vllm/distributed/utils.py:53-64): kv % tp == 0 or tp % kv == 0.
    An MLA model's latent cache is one shared head, replicated on every device (no KV-head rule). A Mamba-2 mixer's
    groups must divide by tp unless there is one (formulas/recurrent_state.py ``mamba2_groups_refusal``: vLLM and
    SGLang shard the mixer; ``engine`` another, whose tensor parallelism leaves the mixer whole: no group rule).
    ``weights`` the format the engine runs: fp8-block also needs every shard whole in FP8 blocks, a group format
    (gptq/awq, compressed-tensors pack-quantized groups; ``group_size`` the workload's) whole groups
    (``quant_block_refusal``; ``expert_tp`` the ways each routed expert is split where not ``tp``: 1 under expert
    parallelism, formulas/serving_expert_parallel.py eq. EP1). In any format, every feed-forward width divides by the
    ways it is split (``width_refusal``, eq. TP6; ``expert_tp`` the routed experts')."""
    heads = heads_refusal(spec, tp, engine)
    if heads is not None:
        return heads
    widths = width_refusal(spec, tp, engine, expert_tp)
    if widths is not None:
        return widths
    return (quant_block_refusal(spec, tp, engine, weights, group_size, expert_tp) if weights in QUANT_SHARD_FORMATS
            else None)


def heads_refusal(spec: ModelSpec, tp: int, engine: str = "vllm") -> str | None:
    """The head and group rules of ``serving_tensor_parallel_refusal`` alone (its docstring): a Mamba-2 mixer's
    groups, the attention heads, the KV heads; None where ``tp`` meets them. The stand-in degree rule for an engine
    that is neither vLLM nor SGLang (``estimate/fit.py`` ``tensor_parallel_options``)."""
    groups = mamba2_layout_refusal(spec, tp, engine)
    if groups is not None:
        return groups
    if spec.num_heads % tp:
        return f"tensor_parallel {tp} does not divide the {spec.num_heads} attention heads of {spec.name}"
    kv = spec.num_kv_heads
    if spec.mla is None and kv % tp and tp % kv:
        return (f"tensor_parallel {tp} neither divides nor is a multiple of the {kv} KV heads of {spec.name} "
                "(vLLM splits KV heads evenly or replicates them evenly)")
    return None


# eq. TP6's linears: the dense MLP's and the shared experts' gate/up (column-parallel: output rows split, axis 0 of
# [out, in]) and down (row-parallel: input columns split, axis 1), and the routed experts' down [hidden, I] (axis 1)
_WIDTH_AXIS = {"ffn_gate": 0, "ffn_up": 0, "ffn_down": 1, "ffn_shexp_gate": 0, "ffn_shexp_up": 0, "ffn_shexp_down": 1,
               "ffn_exps_down": 1}
_WIDTH_NAMES = {"mlp": "dense MLP", "shared_experts": "shared-expert"}


@lru_cache(maxsize=256)  # per spec and engine, like _block_checked
def split_widths(spec: ModelSpec, engine: str) -> tuple[tuple[str, str, int], ...]:
    """The distinct (role, component, width) of ``spec``'s feed-forward linears eq. TP6 checks on ``engine``: the
    width ``_WIDTH_AXIS`` names of each sharded (not ``replicated_matrix``) one, every decoder layer's
    (``ModelSpec.ffn_sizes``: a per-layer intermediate list gives each its own)."""
    seen: dict[tuple[str, str, int], None] = {}
    for t in model_tensors(spec):
        axis = _WIDTH_AXIS.get(t.role)
        if axis is not None and len(t.shape) == 2 and not replicated_matrix(engine, t, spec.model_type):
            seen[(t.role, t.component, t.shape[axis])] = None
    return tuple(seen)


def width_refusal(spec: ModelSpec, tp: int, engine: str = "vllm", expert_tp: int | None = None,
                  components: frozenset[str] | None = None) -> str | None:
    """Why vLLM or SGLang will not build ``spec``'s feed-forward layers ``tp`` ways, whatever the weight format
    (bf16 included), or None (eq. TP6): every split width must divide by the ways it is split,

        I_dense % tp == 0,   I_shared % tp == 0,   I_expert % expert_tp == 0                                  (TP6)

    (``expert_tp``: the ways each routed expert's intermediate is split, default ``tp``; 1 under expert
    parallelism, dp x tp with data parallelism without it: formulas/serving_expert_parallel.py eq. EP1).

    Sources. Both engines split a linear with ``divide``, which asserts exact divisibility (vllm 0.19.1 PyPI wheel
    vllm/distributed/utils.py:53-64 ``ensure_divisibility`` / ``divide``; sglang 0.5.23 PyPI wheel
    srt/distributed/utils.py:68-79): a MergedColumnParallelLinear (gate_up_proj) each output partition
    ``divide(output_size, tp_size)`` (vllm model_executor/layers/linear.py:451-457; sglang srt/layers/linear.py
    :483-489), a RowParallelLinear (down_proj) ``divide(input_size, tp_size)`` (vllm linear.py:1417; sglang
    linear.py:1611): the dense MLPs and the shared experts (vLLM's DeepseekV2MLP / Qwen2MoeMLP are these layers).
    The fused routed experts: ``assert intermediate_size % self.tp_size == 0`` before
    ``intermediate_size_per_partition = intermediate_size // self.tp_size`` (vllm
    model_executor/layers/fused_moe/layer.py:425-426, the MoE layer's own tp: 1 under expert parallelism,
    fused_moe/config.py:1116-1131; the quant methods' create_weights, Fp8MoEMethod and the rest, only receive the
    partition, the padding of ``maybe_roundup_sizes`` :537-545 comes after the assert); sglang
    srt/layers/moe/fused_moe_triton/layer.py:427-428 (``moe_tp_size`` = tp_size // moe_ep_size // moe_dp_size,
    srt/model_executor/model_runner_components/moe_ep_setup.py:154, which raises "moe_intermediate_size ... must be
    divisible by moe_tp_size" there too for a block-quantized checkpoint, :162-165). ``components``: only those
    components' linears (SGLang's attention DP splits its dense MLPs and shared experts over the whole TP group,
    formulas/serving_expert_parallel.py eq. EP1s); None: every one. Other engines: None (transformers' plans,
    llama.cpp's split: not this rule)."""
    if engine not in FP8_BLOCK_ENGINES:
        return None
    etp = tp if expert_tp is None else expert_tp
    who = "vLLM" if engine == "vllm" else "SGLang"
    for role, comp, width in split_widths(spec, engine):
        if components is not None and comp not in components:
            continue
        if role == _EXPERT_DOWN:
            if etp > 1 and width % etp:
                return (f"{_expert_split_words(tp, etp)} splits the {width}-wide routed-expert intermediate of "
                        f"{spec.name} into {width / etp:g} per device: {who}'s fused-MoE layer asserts "
                        "intermediate_size % tp_size == 0 (eq. TP6, any weight format); give expert_parallel (with "
                        "data_parallel: experts whole on each device, formulas/serving_expert_parallel.py eq. EP1), "
                        f"a tensor_parallel that divides {width}, or pipeline_parallel")
        elif tp > 1 and width % tp:
            return (f"tensor_parallel {tp} does not divide the {width}-wide {_WIDTH_NAMES.get(comp, comp)} "
                    f"intermediate of {spec.name} ({width / tp:g} per device): {who} splits it with divide(), which "
                    f"asserts divisibility (eq. TP6, any weight format); give a tensor_parallel that divides {width}, "
                    "or pipeline_parallel")
    return None


def every_degree_refusal(spec: ModelSpec, engine: str, weights: str | None, group_size: int | None = None
                         ) -> str | None:
    """Why vLLM or SGLang (``FP8_BLOCK_ENGINES``) will load ``spec`` in ``weights`` at no tensor-parallel degree, or
    None: ``serving_tensor_parallel_refusal`` at TP 1, where vLLM's fused-MoE and SGLang's merged-layer block checks
    (eq. TP5, ``quant_block_refusal``) run too. A partition of partial blocks or groups at TP 1 stays partial at every
    larger degree (it is the TP 1 size / t), so a refusal at TP 1 is one at every degree: the estimate refuses TP 1
    with it, the hardware searches refuse the format (the rung) with it."""
    if engine not in FP8_BLOCK_ENGINES:
        return None
    return serving_tensor_parallel_refusal(spec, 1, engine, weights, group_size)


# FP8 block quantization (DeepSeek-V3 ``quantization_config.weight_block_size`` [block_n, block_k]: one scale per
# block_n output rows x block_k input columns). A checkpoint without the field: 128 x 128, the block
# weight_formats.py sizes fp8-block's scales with.
FP8_BLOCK_DEFAULT = (128, 128)
# The sharded linears a serving engine checks against the block (llmsizer roles, formulas/tensors.py):
# row-parallel, input columns split (RowParallelLinear: o_proj, down_proj, the shared experts' down_proj)
_ROW_SPLIT = frozenset({"attn_output", "ffn_down", "ffn_shexp_down", "ssm_out"})
# column-parallel alone, output rows split (MLA's q_b_proj / q_proj and kv_b_proj: ColumnParallelLinear,
# vllm 0.19.1 vllm/model_executor/models/deepseek_v2.py:465-489)
_MLA_COLUMN = frozenset({"attn_q", "attn_q_b", "attn_kv_b"})
# merged column-parallel (gate_up_proj): each partition checked by SGLang, let through by vLLM (below)
_MERGED_COLUMN = frozenset({"ffn_gate", "ffn_up", "ffn_shexp_gate", "ffn_shexp_up"})
# the merged QKV partitions of a non-MLA attention (QKVParallelLinear: q per rank, K/V heads split or replicated)
_QKV = frozenset({"attn_q", "attn_k", "attn_v"})
# Gated DeltaNet's in_proj_qkvz (a merged column-parallel layer of partitions key, key, value, value) and a
# recurrent mixer's out_proj (RowParallelLinear): sglang 0.5.23 srt/models/qwen3_next.py:168-175, :257-266,
# qwen3_5.py:409-416, :635-652; vllm 0.19.1 vllm/model_executor/layers/mamba/gdn_linear_attn.py:265-318
_SSM_IN, _SSM_OUT = "ssm_in", "ssm_out"
# the fused routed experts (FusedMoE w13 / w2): their intermediate split tp ways
_EXPERT_DOWN = "ffn_exps_down"
FP8_BLOCK_ENGINES = ("vllm", "sglang")
# the formats whose shards ``quant_block_refusal`` checks: fp8-block's blocks, the group formats' groups
QUANT_SHARD_FORMATS = ("fp8-block", "gptq-int4", "gptq-int8", "awq-int4", "compressed-tensors")


def _ct_fp8_block(s: CTScheme | None) -> bool:
    """Whether compressed-tensors scheme ``s`` stores FP8 blocks (float 8-bit, strategy ``block``: vLLM's
    CompressedTensorsW8A8Fp8 / CompressedTensorsW8A8Fp8MoEMethod with ``block_structure``)."""
    return s is not None and s.type == "float" and s.num_bits == 8 and s.strategy == "block" and s.block is not None


def fp8_block_served(spec: ModelSpec, weights: str | None) -> bool:
    """Whether ``weights``, the format an engine runs ``spec`` in, stores FP8 blocks, so eq. TP5
    (``quant_block_refusal``) applies: ``fp8-block`` (quant_method fp8 with weight_block_size), or ``compressed-tensors``
    whose config has a float 8-bit ``block`` group (the same blocks under ``block_structure``)."""
    if weights == "fp8-block":
        return True
    if weights != CT_METHOD:
        return False
    cfg = ct_config(spec.name, spec.quantization_config)
    return cfg is not None and any(_ct_fp8_block(s) for s in cfg.schemes)


def fp8_block_size(spec: ModelSpec) -> tuple[int, int]:
    """(block_n, block_k) of ``spec``'s FP8 blocks: its quantization_config ``weight_block_size``, else
    ``FP8_BLOCK_DEFAULT``."""
    size = spec.quantization_config.get("weight_block_size")
    if isinstance(size, (list, tuple)) and len(size) == 2:
        return int(size[0]), int(size[1])
    return FP8_BLOCK_DEFAULT


# Group-quantized formats (one scale per ``group_size`` input columns of a row) whose shards vLLM and SGLang check
GROUP_SHARD_FORMATS = ("gptq-int4", "gptq-int8", "awq-int4")
# MoeWNA16's smallest group (it halves the checkpoint's group until the shard's experts divide by it; below: refused)
MOE_WNA16_MIN_GROUP = 32


def shard_group_size(spec: ModelSpec, weights: str | None, group_size: int | None = None) -> int | None:
    """The group a ``weights`` shard must hold whole inputs of (``quant_block_refusal``), or None where none applies:
    gptq/awq, ``group_size`` given (the workload's), else the checkpoint's own (weight_formats ``stored_format``, -1:
    one group per column) where it is that format, else ``GROUP_SIZE_DEFAULT``; compressed-tensors, its pack-quantized
    int group scheme's group_size (strategy 'group')."""
    if weights in GROUP_SHARD_FORMATS:
        if group_size is not None:
            return group_size
        stored = str(spec.quantization_config.get("quant_method", "")).lower()
        if stored in ("gptq", "awq"):
            q = spec.quantization_config
            gs = int(q.get("group_size", q.get("q_group_size", GROUP_SIZE_DEFAULT)) or GROUP_SIZE_DEFAULT)
            return gs if gs > 0 else None
        return GROUP_SIZE_DEFAULT
    if weights == "compressed-tensors" and spec.quantization_config:
        return next((int(s.group_size) for s in spec_ct_config(spec).schemes
                     if s.format == "pack-quantized" and s.type == "int" and s.strategy == "group"
                     and s.group_size and s.group_size > 0), None)
    return None


def quant_block_refusal(spec: ModelSpec, tp: int, engine: str = "vllm", weights: str = "fp8-block",
                        group_size: int | None = None, expert_tp: int | None = None,
                        components: frozenset[str] | None = None) -> str | None:
    """Why vLLM or SGLang will not load ``spec``'s ``weights`` sharded ``tp`` ways, or None (eq. TP5): each shard holds
    whole quantization blocks (fp8-block) or whole groups (gptq/awq, compressed-tensors pack-quantized groups).

    fp8-block, block_n x block_k = ``fp8_block_size``, for every sharded linear:

    - row-parallel (o_proj, down_proj; tp > 1): input columns per rank in / tp a multiple of block_k;
    - column-parallel alone (MLA's q_b_proj, kv_b_proj; tp > 1): output rows per rank out / tp a multiple of block_n;
    - merged column-parallel (gate_up_proj), SGLang only: each partition out / tp a multiple of block_n;
    - fused routed experts: the intermediate per rank I // tp a multiple of block_n (any tp), and of block_k
      (tp > 1), with experts split by tensor parallelism (no expert parallelism).

    Sources. vllm 0.19.1 (PyPI wheel): ``validate_fp8_block_shape``
    (vllm/model_executor/layers/quantization/utils/fp8_utils.py:1425-1474: "Weight input_size_per_partition = ... is
    not divisible by weight quantization block_k", "Weight output_partition_size = ... block_n"), called by
    Fp8LinearMethod.create_weights (quantization/fp8.py:323-351); a merged column-parallel layer whose partitions are
    not whole blocks is let through (layers/linear.py:470, 502-521 ``_maybe_allow_fp8_block_shape_mismatch``);
    Fp8MoEMethod.create_weights (quantization/fp8.py:610-649: "The output_size of gate's and up's weight = ... is not
    divisible by weight quantization block_n"), its intermediate_size // tp_size (fused_moe/layer.py:426).
    sglang 0.5.23 (PyPI wheel): Fp8LinearMethod.validate_block_quant_shapes (srt/layers/quantization/fp8.py:570-610:
    the same two checks, every partition of a merged layer included), Fp8MoEMethod.create_weights (fp8.py:1579-1601:
    the same experts check). Both build RowParallelLinear's input_size_per_partition with ``divide``
    (vllm layers/linear.py:1417, sglang srt/layers/linear.py:1611).
    compressed-tensors blocks, vllm 0.19.1: CompressedTensorsW8A8Fp8.create_weights calls the same
    ``validate_fp8_block_shape`` for strategy BLOCK (compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py:115-126),
    and, CompressedTensorsConfig having no ``weight_block_size``, ``_maybe_allow_fp8_block_shape_mismatch``
    (layers/linear.py:502-510) lets no merged layer through: its gate_up partitions are checked as SGLang's are;
    CompressedTensorsW8A8Fp8MoEMethod.create_weights (compressed_tensors/compressed_tensors_moe.py:725-749) the same
    experts check. sglang 0.5.23: its CompressedTensorsW8A8Fp8.create_weights calls its ``validate_fp8_block_shape``
    (compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py:79-91; fp8_utils.py:2852-2893, every merged
    partition checked), its MoE scheme the experts (compressed_tensors/schemes/compressed_tensors_w8a8_fp8_moe.py:97-121).
    So a compressed-tensors block checkpoint is checked as SGLang checks fp8-block, on both engines.

    Group formats, group g = ``shard_group_size`` (None: no rule):

    - row-parallel (tp > 1, g < in): input columns per rank in / tp a multiple of g. Marlin's check
      (``verify_marlin_supports_shape``: "input_size_per_partition ... is not divisible by group_size", with
      output % min_thread_n 64 and input % min_thread_k 128) only picks the kernel: vLLM/SGLang fall back to the
      plain AWQ/GPTQ kernels (vllm quantization/awq_marlin.py:271-278, gptq_marlin via its kernel choice), whose
      create_weights refuses the same group split: vllm 0.19.1 quantization/awq.py:185-196, gptq.py:250-255
      ("This can be caused by too large tensor parallel size"), compressed_tensors/schemes/compressed_tensors_wNa16.py
      :130 (assert), utils/marlin_utils.py:189; sglang 0.5.23 srt/layers/quantization/awq/schemes/awq_linear.py:39,
      gptq/schemes/gptq_linear.py:47, compressed_tensors/schemes/compressed_tensors_wNa16.py:128, marlin_utils.py:187.
    - fused routed experts (gptq/awq): Marlin MoE needs I/tp % max(64, g) (vllm utils/marlin_utils.py:229-246,
      sglang marlin_utils.py:227-250), else both fall back to MoeWNA16 (vllm awq_marlin.py:291-297,
      gptq_marlin.py:247-253; sglang awq/awq.py:383-388), which halves g until I/tp and hidden divide by it and
      asserts g >= 32 (vllm quantization/moe_wna16.py:241-245, sglang moe_wna16.py:276-279): refused only there.
      MiniMax-M2.7 at TP 8 (I 1536: 192 per rank) loads through MoeWNA16 at group 64. compressed-tensors' experts
      (vllm CompressedTensorsWNA16MoEMethod) state no such check: not refused here.
    The routed experts are split ``expert_tp`` ways (default ``tp``): their intermediate_size_per_partition is
    intermediate // the MoE layer's own tp (vllm fused_moe/layer.py:425-426), which expert parallelism sets to 1
    (fused_moe/config.py:1116-1131, formulas/serving_expert_parallel.py eq. EP1): whole experts per device, so no
    shard of partial blocks; and data parallelism without it to dp x tp (eq. EP1, flattened).
    Merged layers (``_merged_partitions``: gate_up, a non-MLA qkv_proj with its K/V heads per rank, Gated DeltaNet's
    in_proj_qkvz): SGLang checks every partition against block_n at any degree, tp 1 included (fp8.py:600-610:
    ``len(output_partition_sizes) > 1``; only mimo_v2 and kimi_k3 pass skip_block_quant_check); vLLM's fp8-block lets
    them through, its compressed-tensors blocks check all but the last partition at tp 1 (the same answer: the last
    partition is as wide as one before it). A recurrent mixer's out_proj is row-parallel on both (vllm
    layers/mamba/gdn_linear_attn.py:351-358, mamba_mixer2.py:456; sglang qwen3_next.py:257-266).
    MoeWNA16's halved group also changes the experts' bytes per rank (``moe_wna16_extra_bytes``, eq. TP5b).
    Not checked: Gated DeltaNet's in_proj_ba (num_v_heads / tp rows per partition, whole blocks at no degree: vLLM
    notes "ba_proj doesn't support blockwise fp8 quantization", gdn_linear_attn.py:303; the checkpoints' ignore
    lists are not modelled), column-parallel packing (gptq.py:256-262, awq: output per rank % 32 / bits, met by every
    catalog layer at the degrees the heads allow), and GPTQ act-order (desc_act): gptq_marlin keeps every row-parallel
    layer's scales whole on each rank (marlin_utils.py:272-278 ``marlin_repeat_scales_on_all_ranks``, gptq_marlin.py
    :386-397) and, where Marlin's shape check fails, has no other kernel for a partitioned g_idx (Machete, Exllama,
    AllSpark refuse it: kernels/linear/mixed_precision/machete.py:38-44, exllama.py:35-41, allspark.py:26-27);
    the catalog holds no act-order checkpoint.
    ``components``: only the linears of those components (formulas/tensors.py ``Component``) checked, fp8-block's
    rule (SGLang's attention DP splits its dense MLPs and shared experts over the whole TP group, formulas/
    serving_expert_parallel.py eq. EP1s); None: every one."""
    if engine not in FP8_BLOCK_ENGINES:
        return None
    etp = tp if expert_tp is None else expert_tp
    if not fp8_block_served(spec, weights):
        return _group_refusal(spec, tp, engine, weights, group_size, etp)
    cfg = ct_config(spec.name, spec.quantization_config) if weights == CT_METHOD else None
    who = "vLLM" if engine == "vllm" else "SGLang"
    block_n, block_k = fp8_block_size(spec)
    where = (f"{spec.name}'s FP8 weight blocks ({block_n} x {block_k}, weight_block_size): "
             f"{who} refuses to load a shard of partial blocks")
    merged = engine == "sglang"
    for t in _block_checked(spec, engine):
        if components is not None and t.component not in components:
            continue
        out_f, in_f = t.shape[0], t.shape[1]
        if cfg is not None:
            scheme = ct_scheme_of(spec, cfg, t)
            if scheme is None or not _ct_fp8_block(scheme):
                continue
            block_n, block_k = scheme.block or FP8_BLOCK_DEFAULT
            where = (f"{spec.name}'s FP8 weight blocks ({block_n} x {block_k}, compressed-tensors config group "
                     f"{scheme.group!r} block_structure): {who} refuses to load a shard of partial blocks")
            merged = True  # no mismatch allowance for a compressed-tensors config (above)
        if t.role == _EXPERT_DOWN:  # [hidden, I]: the experts' intermediate
            per = in_f // etp
            bad = [b for b in ((block_n, "block_n"),) + (((block_k, "block_k"),) if tp > 1 else ()) if per % b[0]]
            if bad or in_f % etp:
                return (f"{_expert_split_words(tp, etp)} splits the {in_f}-wide routed-expert intermediate into "
                        f"{in_f / etp:g} per device, not a multiple of {where} (fused MoE, eq. TP5); vLLM's and "
                        "SGLang's answer for such a checkpoint is expert parallelism (expert_parallel: experts whole "
                        "on each device, formulas/serving_expert_parallel.py eq. EP1): give expert_parallel (with "
                        "data_parallel), a smaller tensor_parallel, or pipeline_parallel")
        elif tp > 1 and t.role in _ROW_SPLIT and (in_f % tp or (in_f // tp) % block_k):
            return (f"tensor_parallel {tp} splits the {in_f} input columns of {t.role} into {in_f / tp:g} per device, "
                    f"not a multiple of block_k {block_k} of {where} (row-parallel, eq. TP5): give a smaller "
                    "tensor_parallel, or pipeline_parallel")
        elif tp > 1 and t.role in _MLA_COLUMN and spec.mla is not None and (out_f % tp or (out_f // tp) % block_n):
            return (f"tensor_parallel {tp} splits the {out_f} output rows of {t.role} into {out_f / tp:g} per device, "
                    f"not a multiple of block_n {block_n} of {where} (column-parallel, eq. TP5): give a smaller "
                    "tensor_parallel, or pipeline_parallel")
        elif merged:
            part = next((p for p in _merged_partitions(spec, t, tp) if p != int(p) or int(p) % block_n), None)
            if part is not None:
                hint = ("give a smaller tensor_parallel, or pipeline_parallel" if tp > 1 else
                        "no degree loads it there" + ("; vLLM lets a merged layer of partial blocks through"
                                                      if engine == "sglang" and cfg is None else ""))
                return (f"tensor_parallel {tp} leaves {t.role} of {spec.name} a merged column-parallel partition of "
                        f"{part:g} output rows per device, not a multiple of block_n {block_n} of {where} (every "
                        f"partition of a merged layer checked, eq. TP5): {hint}")
    return None


def _merged_partitions(spec: ModelSpec, t: Tensor, tp: int) -> tuple[float, ...]:
    """The output rows per device of each partition of the merged column-parallel layer ``t`` belongs to, as SGLang
    checks them against block_n at any degree (a merged layer's output_partition_sizes; ``quant_block_refusal``), or
    () where ``t`` is in none:

    - gate_up_proj (MergedColumnParallelLinear, [I, I]): out / tp for ffn_gate, ffn_up (and the shared experts');
    - qkv_proj (QKVParallelLinear) of a non-MLA attention: q out / tp; K and V one head's rows times max(1, kv / tp)
      heads (K/V heads replicated when tp >= kv): sglang 0.5.23 srt/layers/linear.py:1137-1158;
    - Gated DeltaNet's in_proj_qkvz ([key, key, value, value], Qwen3.5's in_proj_qkv + in_proj_z merged the same
      way): key_dim / tp and value_dim / tp (sglang qwen3_next.py:355-366, qwen3_5.py:635-652).

    A fraction is a degree that does not divide the layer (``divide`` asserts there)."""
    if t.role in _MERGED_COLUMN:
        return (t.shape[0] / tp,)
    if t.role in _QKV and spec.mla is None:
        if t.role == "attn_q":
            return (t.shape[0] / tp,)
        kv = spec.num_kv_heads
        return (t.shape[0] / kv * max(1.0, kv / tp),)
    r = spec.recurrent
    if t.role == _SSM_IN and r is not None and r.kind == "gated_deltanet":
        return (r.n_groups * r.d_state / tp, r.d_inner / tp)
    return ()


def _expert_split_words(tp: int, etp: int) -> str:
    """The layout that splits each routed expert ``etp`` ways, in the refusal's words."""
    return f"tensor_parallel {tp}" if etp == tp else f"tensor_parallel {tp} x data_parallel {etp // tp}"


def _group_refusal(spec: ModelSpec, tp: int, engine: str, weights: str, group_size: int | None,
                   etp: int | None = None) -> str | None:
    """``quant_block_refusal`` for a group format (its docstring: row-parallel inputs whole groups per rank; gptq/awq
    experts within MoeWNA16's halved groups)."""
    g = shard_group_size(spec, weights, group_size)
    if g is None or g <= 0:
        return None
    who = "vLLM" if engine == "vllm" else "SGLang"
    for t in _block_checked(spec, engine):
        in_f = t.shape[1]
        if t.role == _EXPERT_DOWN:
            # compressed-tensors experts take no MoeWNA16 halving (its own MoE methods), and a group of the whole
            # input (-1, one per column) splits into whole groups at any degree: neither is checked here (review41 D6)
            if weights == "compressed-tensors" or g >= in_f:
                continue
            et = tp if etp is None else etp
            k = moe_wna16_group(spec, et, engine, weights, group_size)
            if k is not None and k < min(g, MOE_WNA16_MIN_GROUP) or in_f % et:
                return (f"{_expert_split_words(tp, et)} splits the {in_f}-wide routed-expert intermediate of "
                        f"{spec.name} into {in_f / et:g} per device, whole groups of no size from its {weights} group {g} down to "
                        f"{MOE_WNA16_MIN_GROUP}: {who} refuses to load it (fused MoE Marlin, then MoeWNA16's group "
                        "halving, eq. TP5): give a smaller tensor_parallel, or pipeline_parallel")
        elif tp > 1 and t.role in _ROW_SPLIT and g < in_f and (in_f % tp or (in_f // tp) % g):
            return (f"tensor_parallel {tp} splits the {in_f} input columns of {t.role} into {in_f / tp:g} per device, "
                    f"not a multiple of {spec.name}'s {weights} group {g}: {who} refuses to load a shard of partial "
                    "groups (row-parallel, eq. TP5): give a smaller tensor_parallel, or pipeline_parallel")
    return None


# Marlin MoE's shapes and groups (vllm 0.19.1 quantization/utils/marlin_utils.py:229-245
# ``check_moe_marlin_supports_layer``; sglang 0.5.23 srt/layers/quantization/marlin_utils.py:227-250)
MARLIN_MOE_HIDDEN_MULTIPLE, MARLIN_MOE_MIN_GROUP, MARLIN_MOE_GROUPS = 128, 64, (32, 64, 128)


def moe_wna16_group(spec: ModelSpec, tp: int, engine: str, weights: str,
                    group_size: int | None = None) -> int | None:
    """The group vLLM's and SGLang's MoeWNA16 runs ``spec``'s gptq/awq routed experts at under tensor parallel ``tp``,
    or None where MoeWNA16 does not take them (Marlin MoE does, or no rule: not a gptq/awq format, another engine,
    no fused experts, a group of the whole input).

    Marlin MoE takes the experts when hidden % 128 == 0, (I / tp) % max(64, g) == 0 and g is one of 32, 64, 128
    (``MARLIN_MOE_*``); else gptq_marlin / awq_marlin fall back to MoeWNA16 (vllm awq_marlin.py:291-297,
    gptq_marlin.py:244-253; sglang awq/awq.py:383-388), whose create_weights halves g while I / tp or hidden is not a
    multiple of it (vllm moe_wna16.py:237-247, asserting g >= 32 after each halving; sglang moe_wna16.py:276-279).
    The group returned is that loop's last (below ``MOE_WNA16_MIN_GROUP`` after a halving: the assert refuses)."""
    if engine not in FP8_BLOCK_ENGINES or weights not in GROUP_SHARD_FORMATS:
        return None
    g = shard_group_size(spec, weights, group_size)
    down = next((t for t in _block_checked(spec, engine) if t.role == _EXPERT_DOWN), None)
    if g is None or g <= 0 or down is None or g >= down.shape[1]:
        return None
    hidden, per = down.shape[0], down.shape[1] // tp
    if (hidden % MARLIN_MOE_HIDDEN_MULTIPLE == 0 and per % max(MARLIN_MOE_MIN_GROUP, g) == 0
            and g in MARLIN_MOE_GROUPS):
        return None
    k = g
    while per % k or hidden % k:  # MoeWNA16.create_weights' loop: halve, then assert k >= 32
        k //= 2
        if k < MOE_WNA16_MIN_GROUP:
            break
    return k


def moe_wna16_zero_points(spec: ModelSpec, weights: str) -> bool:
    """Whether MoeWNA16 builds zero points for ``weights`` (vllm 0.19.1 moe_wna16.py:105-125 ``from_config``: gptq
    ``not sym``, awq ``zero_point``): the checkpoint's own keys where its quant_method is that format, else the
    quantizers' defaults (GPTQ sym True: no zero points; AWQ zero_point True)."""
    q = spec.quantization_config
    method = str(q.get("quant_method", "")).lower()
    if weights.startswith("gptq"):
        return method == "gptq" and q.get("sym") is False
    return not (method == "awq" and q.get("zero_point") is False)


def moe_wna16_matrix_bytes(out_features: int, in_features: int, bits: int, group: int, zero_points: bool,
                           scale_bytes: int) -> int:
    """Bytes of one expert's matrix of ``out_features`` x ``in_features`` (a rank's share) as MoeWNA16 builds it
    (vllm 0.19.1 quantization/moe_wna16.py:257-330 create_weights; sglang 0.5.23 moe_wna16.py the same): uint8
    ``qweight`` of ``bits`` per element, one ``scale_bytes`` (the model dtype) scale per ``group`` inputs of a row
    (``w13_scales`` [2 I, H / g], ``w2_scales`` [H, I / g]), uint8 zero points packed 8 / ``bits`` a byte along the
    rows where ``zero_points`` (``w13_qzeros`` [2 I / pack, H / g]); its g_idx are empty (moe_wna16.py:332-343):

        B = out x in x bits / 8 + out x (in / g) x (scale_bytes + [zero_points] bits / 8)             (TP5b)

    >>> moe_wna16_matrix_bytes(192, 3072, 4, 64, True, 2)  # MiniMax-M2.7's w1 at TP 8: 192 rows, group 128 -> 64
    317952
    """
    groups = out_features * (in_features // group)
    return out_features * in_features * bits // 8 + groups * scale_bytes + (groups * bits // 8 if zero_points else 0)


@lru_cache(maxsize=256)  # per spec and layout, like head_replica_bytes
def moe_wna16_extra_bytes(spec: ModelSpec, engine: str, fmt: str, group_size: int, other_bytes: int, tp: int,
                          fused_experts: bool = False) -> tuple[tuple[float, ...], dict[str, float], dict[str, float]]:
    """What one rank holds of ``spec``'s routed experts beyond 1 / tp of their checkpoint bytes where MoeWNA16 takes
    them (``moe_wna16_group`` not None): its own layout (eq. TP5b, at the halved group, scales and zero points in
    the model dtype ``other_bytes``, no g_idx) less ``tensor_bytes``' / tp, per decoder layer, component and
    storage label; empty where Marlin MoE (or no rule) takes them. Negative where MoeWNA16 drops what the
    checkpoint stores (GPTQ's g_idx, a symmetric checkpoint's zero points)."""
    layers = [0.0] * spec.num_layers
    comps: dict[str, float] = {}
    store: dict[str, float] = {}
    k = moe_wna16_group(spec, tp, engine, fmt, group_size) if tp > 1 else None
    if k is None or k < MOE_WNA16_MIN_GROUP:
        return tuple(layers), comps, store
    bits = 8 if fmt.endswith("8") else 4
    zp = moe_wna16_zero_points(spec, fmt)
    for t in model_tensors(spec):
        if t.component != "experts" or len(t.shape) != 2 or not t.matrix:
            continue
        out_f, in_f = t.shape
        out_r, in_r = (out_f, in_f // tp) if t.role == _EXPERT_DOWN else (out_f // tp, in_f)
        own, label = tensor_bytes(spec, fmt, t, group_size, other_bytes, fused_experts, engine)
        extra = moe_wna16_matrix_bytes(out_r, in_r, bits, k, zp, other_bytes) * t.count - own / tp
        if 0 <= t.layer < spec.num_layers:
            layers[t.layer] += extra
        comps[t.component] = comps.get(t.component, 0.0) + extra
        store[label] = store.get(label, 0.0) + extra
    return tuple(layers), comps, store


@lru_cache(maxsize=256)  # per spec, like model_tensors
def _block_checked(spec: ModelSpec, engine: str) -> tuple[Tensor, ...]:
    """One tensor of each (role, shape) of ``spec``'s decoder linears ``quant_block_refusal`` checks on ``engine``:
    quantized (weight_formats ``QUANT_COMPONENTS``) and sharded (not ``replicated_matrix``)."""
    seen: dict[tuple[str, tuple[int, ...]], Tensor] = {}
    roles = _ROW_SPLIT | _MLA_COLUMN | _MERGED_COLUMN | _QKV | {_EXPERT_DOWN, _SSM_IN}
    for t in model_tensors(spec):
        if (t.role in roles and len(t.shape) == 2 and t.component in QUANT_COMPONENTS
                and not replicated_matrix(engine, t, spec.model_type)):
            seen.setdefault((t.role, t.shape), t)
    return tuple(seen.values())


def mamba2_layout_refusal(spec: ModelSpec, tp: int, engine: str = "vllm") -> str | None:
    """formulas/recurrent_state.py ``mamba2_groups_refusal`` for ``spec``'s Mamba-2 mixers on ``engine`` (vLLM and
    SGLang shard them; transformers' plans leave the mixer whole), or None."""
    r = spec.recurrent
    if engine not in ("vllm", "sglang") or r is None or r.kind != "mamba2" or not spec.recurrent_layer_count:
        return None
    return mamba2_groups_refusal(r.n_groups, tp, spec.name)


@lru_cache(maxsize=256)  # per spec, like model_tensors
def replicated_elements(spec: ModelSpec, engine: str | None = None) -> int:
    """Elements of 1-D tensors (norms, biases of row-parallel layers, sinks) kept whole on every device (on
    transformers, all but the biases its plan shards: ``_whole_vector``)."""
    return sum(t.numel for t in model_tensors(spec) if _whole_vector(engine, t, spec.model_type))


# The 2-D weights (llmsizer tensor roles, formulas/tensors.py) a tensor-parallel serving engine builds as a
# ReplicatedLinear (or a plain nn.Linear / nn.Parameter): whole on every rank, never divided by tp. Each rank holds
# them, reads them in a decode step and multiplies them over all its tokens in full (``plan_rank_shares``, eq. TP1).
# vllm 0.19.1 (PyPI wheel), vllm/model_executor/models/ (every catalog family vLLM serves read; the families not
# named here build every matrix column-/row-/vocab-parallel: llama.py, mistral.py, qwen2.py, qwen3.py, gemma2.py,
# gemma3.py, phi3.py, phi.py, gpt_neox.py, stablelm.py, falcon.py, the vision towers at the default
# mm_encoder_tp_mode "weights", and the mixers: Qwen3-Next's Gated DeltaNet in_proj_qkvz / in_proj_ba
# MergedColumnParallelLinear and conv1d ColumnParallelLinear, layers/mamba/gdn_linear_attn.py:265-318, :370-417;
# Mamba-2's in_proj / out_proj, layers/mamba/mamba_mixer2.py; Jamba's Mamba-1 x_proj RowParallelLinear and dt_proj
# ColumnParallelLinear, layers/mamba/mamba_mixer.py:97-121):
#   attn_q_a + attn_kv_a_mqa: deepseek_v2.py:870-875 ``fused_qkv_a_proj = DeepSeekV2FusedQkvAProjLinear`` (a
#     MergedColumnParallelLinear with ``disable_tp=True``, :773-787); without a q LoRA rank (DeepSeek-V2-Lite)
#     :877-883 ``kv_a_proj_with_mqa = ReplicatedLinear`` while q_proj is a ColumnParallelLinear (:895);
#   indexer_q_b / indexer_k / indexer_proj: deepseek_v2.py:635-655 (``wq_b``, ``wk``, ``weights_proj``
#     ReplicatedLinear, DeepSeek-V3.2's DSA indexer);
#   ffn_gate_inp (the router): deepseek_v2.py:263 ``GateLinear`` (a ReplicatedLinear,
#     layers/fused_moe/router/gate_linear.py:14), qwen3_moe.py:176, qwen2_moe.py:135, mixtral.py:120,
#     qwen3_next.py:118, llama4.py:97 ReplicatedLinear, gpt_oss.py:177 GateLinear, glm4_moe.py:143 nn.Linear: every
#     MoE family's router;
#   ffn_gate_inp_shexp: qwen2_moe.py:143, qwen3_moe.py:188, qwen3_next.py:126 ``shared_expert_gate =
#     ReplicatedLinear``;
#   ffn_latent_in / ffn_latent_out: nemotron_h.py:192-206 ``fc1_latent_proj`` / ``fc2_latent_proj =
#     ReplicatedLinear`` (Nemotron-3 Super's latent MoE projections);
#   inp_gate / proj: gemma4.py:557-573 and gemma3n.py:485-500 ``per_layer_input_gate`` / ``per_layer_projection =
#     ReplicatedLinear`` (the per-layer-input gate and projection; the model-level per_layer_model_projection is a
#     ColumnParallelLinear, gemma4.py:894);
#   altup_correct_coef / altup_predict_coef / altup_router: gemma3n.py:93-115 ``correction_coefs``,
#     ``prediction_coefs``, ``modality_router = ReplicatedLinear`` (its LAuReL pair is column/row-parallel, :203-216).
# sglang 0.5.6 (PyPI wheel), sglang/srt/models/:
#   attn_q_a + attn_kv_a_mqa: deepseek_v2.py:1217-1223 ``fused_qkv_a_proj_with_mqa = ReplicatedLinear``,
#     :1244-1250 ``kv_a_proj_with_mqa = ReplicatedLinear`` without a q LoRA rank;
#   indexer_*: sglang/srt/layers/attention/nsa/nsa_indexer.py:133-155 (wq_b, wk, weights_proj ReplicatedLinear);
#   ffn_gate_inp: deepseek_v2.py:513-525 ``MoEGate.weight = nn.Parameter([n_routed_experts, hidden])``,
#     qwen3_moe.py:123, qwen2_moe.py:169, mixtral.py:81 ReplicatedLinear;
#   ffn_gate_inp_shexp: qwen2_moe.py:192 ``torch.nn.Linear(hidden, 1)`` (Qwen3-Next's MoE block is this one,
#     qwen3_next.py:42, :505); gpt_oss.py:146, llama4.py:100, nemotron_h.py:141 ReplicatedLinear routers.
#   Not as vLLM: nemotron_h.py builds no latent projections (0.5.6 has no latent MoE), gemma3n_causal.py:144-205,
#   :548-560 shards its AltUp, LAuReL and per-layer-input linears (Column/RowParallelLinear), and there is no Gemma 4.
# Both shard the rest: q_b/kv_b/q column-parallel, o_proj row-parallel, the fused experts and shared experts over
# the intermediate size, the vocabulary-parallel embedding and lm_head. Every 1-D tensor (norms) is replicated
# everywhere (``replicated_elements``), and so is the router's fp32 e_score_correction_bias, which is not in the
# inventory (``replicated_matrix_bytes`` adds weight_formats.py ``correction_bias_bytes``). transformers' TP plans
# have their own table below (``TRANSFORMERS_SPLIT``).
#
# Training frameworks (the keys ``training_tp_framework`` names), the same roles without the DSA indexer (neither
# framework's DeepSeek model here builds one):
# Megatron-Core (NVIDIA/Megatron-LM @d98e8a64, its default Transformer-Engine spec):
#   attn_q_a + attn_kv_a_mqa: megatron/core/models/gpt/gpt_layer_specs.py:302,304 ``linear_q_down_proj=
#     backend.linear()``, ``linear_kv_down_proj=backend.linear()``, TESpecProvider.linear() = TELinear
#     (megatron/core/extensions/transformer_engine_spec_provider.py:39-41); multi_latent_attention.py:526-527 and
#     :573-574 build a TELinear one with ``parallel_mode='duplicated'``, tp_group None (:548-552, :596-599), and
#     transformer_engine.py:1229-1231 then uses tp_size 1: the whole [q_lora_rank, hidden] and
#     [kv_lora_rank + qk_rope_head_dim, hidden] on every TP rank. (The local spec's ColumnParallelLinear, and the
#     non-default ``mla_down_proj_fusion`` with a TELayerNormColumnParallelLinear, :1280-1290, shard them: not modelled.)
#   ffn_gate_inp: megatron/core/transformer/moe/router.py:64-66 ``Router.weight = nn.Parameter([num_moe_experts,
#     hidden_size])``, no TP split; ffn_gate_inp_shexp: moe/shared_experts.py:139 ``gate_weight [1, hidden_size]``.
#   Gradients: each such parameter has its full gradient on every TP rank (transformer_engine.py:1310-1318 marks it
#   ``tensor_model_parallel=False`` and, under sequence parallelism, ``sequence_parallel``; router.py:85 the same), and
#   finalize_model_grads.py:416-460 ``_allreduce_non_tensor_model_parallel_grads`` sums those partial gradients over
#   the TP group; the distributed optimizer shards each TP rank's own gradient buffer over the data-parallel group only
#   (distributed/param_and_grad_buffer.py:69-77 ``shard_buffer`` over data_parallel_world_size): so weights, gradients,
#   main gradients and optimizer states of these matrices are whole per TP rank, divided by DP as the rest are.
# torchtitan (pytorch/torchtitan @b5bcd76, torchtitan/models/deepseek_v3/sharding.py): :112-116 and :131-132
#   ``wkv_a`` and ``wq_a`` (with kv_norm, q_norm) keep ``Replicate`` weights on TP, :118 and :133 ``wkv_b``/``wq_b``
#   colwise, :119 ``wo`` rowwise; the router gate Replicate (torchtitan/models/common/moe_sharding.py:89-97, :349-350);
#   Qwen's shared-expert gate: models/qwen3_5/sharding.py:225-232. The same set as Megatron-Core's.
_SERVING_REPLICATED = frozenset({"attn_q_a", "attn_kv_a_mqa", "indexer_q_b", "indexer_k", "indexer_proj",
                                 "ffn_gate_inp", "ffn_gate_inp_shexp"})
_VLLM_REPLICATED = _SERVING_REPLICATED | {"ffn_latent_in", "ffn_latent_out", "inp_gate", "proj",
                                          "altup_correct_coef", "altup_predict_coef", "altup_router"}
_TRAINING_REPLICATED = frozenset({"attn_q_a", "attn_kv_a_mqa", "ffn_gate_inp", "ffn_gate_inp_shexp"})
REPLICATED_MATRICES: dict[str, frozenset[str]] = {"vllm": _VLLM_REPLICATED, "sglang": _SERVING_REPLICATED,
                                                  "megatron-core": _TRAINING_REPLICATED,
                                                  "torchtitan": _TRAINING_REPLICATED}


# The 1-D tensors a serving engine splits tp ways with their layer (every other 1-D tensor is whole on every rank):
# the biases of column-parallel linears, built [output_size_per_partition] (vllm 0.19.1 layers/linear.py:407,
# :488-489 ColumnParallelLinear, which QKVParallelLinear and MergedColumnParallelLinear extend; sglang 0.5.6
# layers/linear.py:265, :343-344), where a row-parallel bias is whole (vllm :1456, sglang :1272); the routed experts'
# gate/up biases, w13_bias [E, 2 x intermediate_size_per_partition] (vllm layers/quantization/mxfp4.py:208-216,
# layers/fused_moe/unquantized_fused_moe_method.py:165-170; sglang layers/quantization/mxfp4.py:345-353), where
# w2_bias is [E, hidden] (vllm mxfp4.py:219-227); and gpt-oss's per-head sinks (vllm models/gpt_oss.py:102-104
# num_attention_heads // tp; sglang models/gpt_oss.py:255-257 over its local heads, :219). The mixers' per-head
# vectors (Mamba's A, D, dt_bias, conv1d bias, gated norm) are left whole with the rest.
_SERVING_SPLIT_VECTORS = frozenset({"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias", "ffn_up.bias",
                                    "ffn_gate.bias", "ffn_shexp_up.bias", "ffn_shexp_gate.bias", "ffn_exps_up.bias",
                                    "ffn_exps_gate.bias", "attn_sinks", "v_attn_q.bias", "v_attn_k.bias",
                                    "v_attn_v.bias", "v_attn_qkv.bias", "v_ffn_up.bias", "v_ffn_gate.bias"})
SPLIT_VECTORS: dict[str, frozenset[str]] = {"vllm": _SERVING_SPLIT_VECTORS, "sglang": _SERVING_SPLIT_VECTORS}


def training_tp_framework(precision: str, framework: str) -> str | None:
    """The ``REPLICATED_MATRICES`` key of a training run's tensor-parallel plan: 'megatron-core' for Megatron's own
    mixed precision (precision 'megatron-bf16' / 'megatron-fp16', the recipes of formulas/training_states.py),
    'torchtitan' under that framework profile; None (every matrix split tp ways, 1-D tensors whole) otherwise."""
    if precision.startswith("megatron-"):
        return "megatron-core"
    return "torchtitan" if framework == "torchtitan" else None

def expert_tp_ways(plan: str | None, tp: int, ep: int, etp: int | None = None) -> int:
    """Ways a training framework's TP plan splits each routed expert's matrices: the stated expert tensor-parallel
    size ``etp`` under Megatron-Core, else its default ``tp``; torchtitan under expert parallelism keeps its experts
    whole on every TP rank (1).

    Megatron-Core (NVIDIA/Megatron-LM @d98e8a64) splits the experts over expert_TP: ``expert_tensor_parallel_size``,
    which is TP when unset (megatron/training/arguments.py:587-588, megatron/core/parallel_state.py:871-872);
    Megatron-Bridge's MoE recipes set it to 1. torchtitan (pytorch/torchtitan @b5bcd76): with EP on, the
    routed-expert weights take the 'sparse' placement, ``Shard(0)`` over the EP axis and ``Replicate`` over
    DP_REPLICATE / EFSDP, no TP axis at all (torchtitan/models/common/moe_sharding.py:29-47, chosen at :208,
    :214-216); the TP ranks are folded into the experts' FSDP mesh instead, efsdp = dp_shard x cp x tp / ep
    (torchtitan/distributed/parallel_dims.py:280-282). Without EP the experts take the 'dense' placement, sharded on
    the TP axis (moe_sharding.py:50-68, :219-223). So one FSDP unit of a torchtitan MoE layer gathers its experts /
    ep, not experts / (tp x ep).

    >>> expert_tp_ways("torchtitan", 8, 8), expert_tp_ways("torchtitan", 8, 1), expert_tp_ways("megatron-core", 8, 8)
    (1, 8, 8)
    >>> expert_tp_ways("megatron-core", 2, 32, 1), expert_tp_ways("megatron-core", 2, 32, None)
    (1, 2)
    """
    if plan == "megatron-core" and etp is not None:
        return etp
    return 1 if plan == "torchtitan" and ep > 1 else max(1, tp)


def resident_expert_tp(plan: str | None, tp: int, ep: int, etp: int | None = None) -> int:
    """The TP ways llmsizer's states divide a rank's routed-expert weights, gradients and optimizer states by, and
    the ``etp`` of its expert data-parallel group (``parallelism.expert_shard_group``): :func:`expert_tp_ways`
    under Megatron-Core (its expert grid is ETP x EP x expert-DP x PP, parallel_state.py:873-880), ``tp`` otherwise.
    torchtitan's whole experts are counted as E / (tp x ep) over dp x cp / ep ranks, the same share per rank as
    E / ep over its efsdp = dp x cp x tp / ep (``expert_tp_ways``), so its FSDP units alone read the whole-expert
    split.

    >>> resident_expert_tp("megatron-core", 2, 32, 1), resident_expert_tp("torchtitan", 8, 8, None)
    (1, 8)
    """
    return expert_tp_ways(plan, tp, ep, etp) if plan == "megatron-core" else max(1, tp)


# The replicated matrices a training framework's TP rank runs on every token of the sequence (not on its 1/tp
# share): their FLOPs are not divided by tp (``full_token_replicated_elements``).
# - Megatron-Core (NVIDIA/Megatron-LM @d98e8a64): a duplicated linear sees the layer's input as it comes, [s/tp]
#   under sequence parallelism and [s] without (megatron/core/transformer/multi_latent_attention.py:641-663, the
#   down projections' output shapes); the router likewise reads the MoE layer's input (transformer/moe/router.py).
# - torchtitan (pytorch/torchtitan @b5bcd76): the MLA input x is gathered to Replicate before wq_a / wkv_a, with or
#   without sequence parallelism (models/deepseek_v3/sharding.py:96-104, :115, :131); the router gate runs on the
#   local token shard under EP and on all tokens without it (models/common/moe_sharding.py:89-123).
_MLA_DOWN = frozenset({"attn_q_a", "attn_kv_a_mqa"})
_ROUTERS = frozenset({"ffn_gate_inp", "ffn_gate_inp_shexp"})


def full_token_roles(framework: str | None, sequence_parallel: bool, ep: int) -> frozenset[str]:
    """The ``REPLICATED_MATRICES`` roles ``framework`` runs on all the sequence's tokens on each TP rank (the rules
    above); empty where none (no replicating plan, or Megatron under sequence parallelism)."""
    if framework == "megatron-core":
        return frozenset() if sequence_parallel else REPLICATED_MATRICES[framework]
    if framework == "torchtitan":
        return _MLA_DOWN if ep > 1 else _MLA_DOWN | _ROUTERS
    return frozenset()


@lru_cache(maxsize=256)  # per spec, like model_tensors
def full_token_replicated_elements(spec: ModelSpec, framework: str | None, sequence_parallel: bool, ep: int) -> int:
    """Elements of the 2-D matrices ``framework`` keeps whole on every TP rank (``replicated_matrix``) and runs on
    every token there (``full_token_roles``): each TP rank does their whole matmul work, tp times the model's."""
    roles = full_token_roles(framework, sequence_parallel, ep)
    if not roles:
        return 0
    return sum(t.numel for t in model_tensors(spec)
               if t.role in roles and replicated_matrix(framework, t, spec.model_type))


# transformers 5.24.0 (PyPI wheel) tensor parallelism, transformers/distributed/:
#   mixin.py:79-104 ``init_parallel_plans``: the plan is the model class's ``_tp_plan`` (``lm_head:
#     colwise_gather_output`` in each *ForCausalLM / *ForConditionalGeneration), the config's ``base_model_tp_plan``
#     (configuration_<model>.py; a multimodal model's text config, merged through its children at :98-100) and, at
#     :93-94, ``embed_tokens: embedding_rowwise`` whenever the base model has a plan and an ``nn.Embedding`` named so;
#   mixin.py:211-231 ``_expand_parallel_plan`` gives each parameter its own name's style or its module's
#     (parallel_utils.py:49-64 ``_get_parameter_plan``); tensor_parallel.py:639-662 ``apply_tensor_parallelism``
#     calls that style's ``shard_param`` on it. Styles that shard (tensor_parallel.py): colwise /
#     colwise_gather_output / colwise_rep (:163-171, Shard(ndim - 2): the output rows, a bias too), rowwise /
#     rowwise_split_input / rowwise_rep (:234-243, Shard(-1): the input columns; the bias Replicate),
#     embedding_rowwise / embedding_colwise (:326-333, Shard(0) / Shard(1)), packed_colwise (:498-511, the packed
#     output dim of a 2-D linear or a 3-D expert tensor, a 1-D bias Shard), packed_rowwise (:541-549, Shard(-1), a
#     1-D tensor Replicate). Every other style (sequence_parallel, replicated_with_grad_allreduce, mla_kv_a_proj,
#     all_reduce, moe_tp_experts, moe_identity_expert, local_params, replicate: :358-458, :552-622, the base
#     ``shard_param`` at :105-107 a no-op) only hooks the forward, and a parameter no rule names is never touched:
#     whole on every rank. So: the roles below are split tp ways, every other tensor of the model is replicated.
#   mixin.py:257-264: ``tp_size > 1`` with an empty plan raises ValueError ("... has no `tp_plan`"): the model types
#     in ``TRANSFORMERS_NO_PLAN`` (``transformers_tensor_parallel_refusal``).
# The table is the installed plans read through llmsizer's tensor roles (formulas/tensors.py); the test
# tests/formulas/test_transformers_tp_plan.py applies each catalog model type's real plan with transformers' own
# code to the meta-device model and compares the per-GPU bytes, and checks the no-plan set against the refusal.
_EMBED = frozenset({"token_embd"})  # embed_tokens / embed_in / embeddings: embedding_rowwise
_HEAD = frozenset({"output", "output.bias"})  # lm_head: colwise_gather_output (Phi's bias too)
_ATTN = frozenset({"attn_q", "attn_k", "attn_v", "attn_q.bias", "attn_k.bias", "attn_v.bias",  # colwise
                   "attn_output"})  # o_proj / dense: rowwise (its bias replicated)
_MLP = frozenset({"ffn_gate", "ffn_up", "ffn_gate.bias", "ffn_up.bias", "ffn_down"})  # colwise; down rowwise
_EXPERTS = frozenset({"ffn_exps_gate", "ffn_exps_up", "ffn_exps_down"})  # experts.gate_up_proj / up_proj, down_proj
_SHEXP = frozenset({"ffn_shexp_gate", "ffn_shexp_up", "ffn_shexp_down"})
_MLA = frozenset({"attn_q", "attn_q_b", "attn_kv_b", "attn_output"})  # kv_a_proj_with_mqa: mla_kv_a_proj (whole)
_LM = _EMBED | _HEAD
_DENSE = _LM | _ATTN | _MLP
TRANSFORMERS_SPLIT: dict[str, frozenset[str]] = {
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "qwen2_5_vl_text", "phi",
                     "phi3", "gpt_neox"), _DENSE),
    "mixtral": _LM | _ATTN | _EXPERTS,
    **dict.fromkeys(("qwen3_moe", "qwen3_vl_moe_text"), _DENSE | _EXPERTS),
    "glm4_moe": _DENSE | _EXPERTS | _SHEXP,
    "minimax_m2": _LM | _ATTN | _EXPERTS,
    # Gated DeltaNet in_proj_qkvz / in_proj_ba / out_proj: colwise_gather_output
    "qwen3_next": _DENSE | _EXPERTS | _SHEXP | {"ssm_in", "ssm_ba", "ssm_out"},
    # Qwen3.5: in_proj_qkv + in_proj_z (ssm_in), in_proj_b + in_proj_a (ssm_ba), out_proj: colwise_gather_output
    # (configuration_qwen3_5.py:58-72, configuration_qwen3_5_moe.py:58-75); the vision tower has no plan entry
    "qwen3_5_text": _DENSE | {"ssm_in", "ssm_ba", "ssm_out"},
    "qwen3_5_moe_text": _DENSE | _EXPERTS | _SHEXP | {"ssm_in", "ssm_ba", "ssm_out"},
    "deepseek_v2": _LM | _MLA | _MLP | _EXPERTS | _SHEXP,
    "deepseek_v32": _LM | (_MLA - {"attn_q"}) | _MLP | _EXPERTS | _SHEXP,
    "deepseek_v3": _LM | _MLP | _EXPERTS | _SHEXP,  # no attention entry: MLA whole on every rank
    # the vision encoder's attention and patch_embedding.linear too (its MLPs whole); the projector and the
    # vision adapter, split as well, are one 1-D lump in llmsizer's inventory (v_projector): counted whole
    "llama4": _DENSE | _EXPERTS | _SHEXP | {"v_attn_q", "v_attn_k", "v_attn_v", "v_attn_q.bias", "v_attn_k.bias",
                                            "v_attn_v.bias", "v_attn_o", "v_patch_embd"},
    "gemma4": _DENSE | _EXPERTS | {"v_attn_q", "v_attn_k", "v_attn_v", "v_attn_o", "v_ffn_gate", "v_ffn_up",
                                   "v_ffn_down"},
    **dict.fromkeys(("jamba", "granitemoehybrid"), _LM | _EXPERTS),
    "nemotron_h": _EMBED | _EXPERTS,  # no lm_head entry
    **dict.fromkeys(("falcon_h1", "gpt_oss", "qwen3_vl_text"), _LM),
}
# model types whose transformers model has no tensor-parallel plan at all (mixin.py:257-264 refuses them)
TRANSFORMERS_NO_PLAN = frozenset({"falcon", "gpt2", "mamba2", "mllama", "mt5", "stablelm", "t5"})


def transformers_tensor_parallel_refusal(spec: ModelSpec) -> str | None:
    """Why transformers will not load ``spec`` tensor-parallel, or None: no ``tp_plan`` for its model type
    (transformers 5.24.0 distributed/mixin.py:257-264 raises ValueError for ``tp_size > 1`` with an empty plan)."""
    if spec.model_type in TRANSFORMERS_NO_PLAN:
        return (f"engine transformers has no tensor-parallel plan for model type {spec.model_type!r} ({spec.name}): "
                "transformers 5.24 refuses tp_size > 1 for it; use vLLM/SGLang or one device")
    return None


def transformers_split_roles(model_type: str) -> frozenset[str]:
    """The tensor roles transformers' plan splits for ``model_type`` (``TRANSFORMERS_SPLIT``); a model type the
    table does not know gets the plan most families share (attention q/k/v colwise, o rowwise, MLP, experts and
    shared experts, embedding, lm_head): llama's plus the MoE blocks, the router whole."""
    return TRANSFORMERS_SPLIT.get(model_type, _DENSE | _EXPERTS | _SHEXP)


# The roles a plan names ``colwise_gather_output`` (transformers 5.24 distributed/tensor_parallel.py:603,
# ``ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())``): the weight is split (TRANSFORMERS_SPLIT),
# but its output is all-gathered back to every rank, so what follows runs on the whole width. lm_head in every
# plan; Phi-3's fused qkv_proj and gate_up_proj (configuration_phi3.py:48-53, their o_proj / down_proj
# ``rowwise_split_input``: each rank slices the whole input itself); Qwen3-Next's Gated DeltaNet in_proj_qkvz,
# in_proj_ba and out_proj (configuration_qwen3_next.py:76-78).
TRANSFORMERS_GATHERED: dict[str, frozenset[str]] = {
    "phi3": frozenset({"attn_q", "attn_k", "attn_v", "attn_q.bias", "attn_k.bias", "attn_v.bias", "ffn_gate",
                       "ffn_up", "ffn_gate.bias", "ffn_up.bias"}),
    **dict.fromkeys(("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"), frozenset({"ssm_in", "ssm_ba", "ssm_out"})),
    # MiniMax-M2's q_proj / k_proj / v_proj, three modules (configuration_minimax_m2.py base_model_tp_plan): its q/k
    # RMSNorm runs over all heads at once (modeling_minimax_m2.py L292-308), so the plan gathers the projections
    "minimax_m2": frozenset({"attn_q", "attn_k", "attn_v"}),
}


# The collectives transformers' tensor-parallel plan runs in an inference forward (no gradients), per style
# (transformers 5.24.0 (PyPI wheel) transformers/distributed/tensor_parallel.py, which
# transformers/integrations/tensor_parallel.py only re-exports, :26-43): a style hooks the forward of the MODULE its
# plan entry names (``apply_tensor_parallelism`` :639-662 installs it for a module name; a parameter name, e.g. the 3-D
# ``experts.down_proj``, is only sharded):
#   rowwise / rowwise_split_input / rowwise_rep (:607-611, RowwiseParallel): on an nn.Linear without grad, one
#     ``dist.all_reduce`` of the whole [tokens, out_features] output (:288-297; a replicated input is sliced locally, :250-270);
#   embedding_rowwise (:600, EmbeddingParallel shard_dim 0): the vocab-parallel lookups' Partial output redistributed
#     to Replicate, one all-reduce of [tokens, hidden] (:347-355);
#   moe_tp_experts (:618, MoeExpertsParallel): every rank ran its shard of every expert, one all-reduce of the experts
#     module's [tokens, hidden] output (:572-577, ``_AllReduceForward``, parallel_utils.py:100-107); the experts'
#     own gate_up / down parameters (packed_colwise, rowwise, packed_rowwise, colwise on 3-D tensors) only shard;
#   all_reduce (:617, AllReduceParallel): one all-reduce of the module's output (no catalog plan names it);
#   colwise_gather_output / colwise_rep (:602-605, ColwiseParallel with a Replicate output): the [tokens,
#     out_features / tp] shards all-gathered to the whole width (:199-214); embedding_colwise (:601) likewise;
#   colwise (:606), packed_colwise, sequence_parallel (inference: ``DTensor.from_local``, no exchange, :458-471),
#     replicated_with_grad_allreduce (a gradient hook only, :368-387), mla_kv_a_proj (``_AllReduceBackward``: the
#     backward only, :432-442), moe_identity_expert, local_params, replicate: none in the forward.
# transformers' expert parallelism (``ep_plan``: ep_dispatch_experts / grouped_gemm, distributed/expert_parallel.py
# :416-417, all-to-all or all-reduce dispatch) runs only with ep_size > 1 (mixin.py:252-253); tp_plan "auto" leaves
# it off, and the older "ep_router" style is refused (mixin.py:266-272). generate() asks the lm_head for the last
# position only (``logits_to_keep`` = 1, generation/utils.py:2952-2956; modeling_llama.py:470-471): its gather carries
# one token per sequence, in a prefill as in a decode step.
# llmsizer's tensor roles (formulas/tensors.py) of the modules those styles hook, on the plans of TRANSFORMERS_SPLIT:
_ROWWISE_MODULES = ("attn_output", "ffn_down", "ffn_shexp_down")  # o_proj / dense, down_proj / fc2, shared down_proj
_EXPERT_MODULE = frozenset({"ffn_exps_gate", "ffn_exps_up", "ffn_exps_down"})  # the ``experts`` module
# projections transformers fuses into one module (Phi-3's qkv_proj and gate_up_proj, configuration_phi3.py:48-53):
# one gather of their summed output rows
_FUSED_MODULES = (frozenset({"attn_q", "attn_k", "attn_v"}), frozenset({"ffn_gate", "ffn_up"}))


@dataclass(frozen=True)
class PlanCollective:
    """One collective of a forward under transformers' plan: ``kind`` 'all_reduce' or 'all_gather', ``width`` the
    elements per token of the whole message, ``site`` the llmsizer role(s) of the module whose style runs it,
    ``layer`` the decoder layer (-1: the embedding and the lm_head), ``head`` True for the lm_head's gather (one
    token per sequence: generate's ``logits_to_keep`` = 1)."""
    kind: str
    width: int
    site: str
    layer: int
    head: bool = False


@lru_cache(maxsize=256)  # per spec, like model_tensors
def transformers_plan_collectives(spec: ModelSpec) -> tuple[PlanCollective, ...]:
    """The collectives transformers' tensor-parallel plan (``tp_plan="auto"``) runs in one forward of ``spec``'s
    language model, in order: the embedding's all-reduce (``embedding_rowwise``), per decoder layer one all-reduce
    per row-parallel linear its plan names (o_proj, the dense MLP's and the shared experts' down_proj) and one per
    split routed-experts module (``moe_tp_experts``), one all-gather per projection its plan gathers
    (``TRANSFORMERS_GATHERED``: Phi-3's qkv_proj and gate_up_proj, Qwen3-Next's Gated DeltaNet projections), and
    the lm_head's all-gather of the vocabulary (``colwise_gather_output``). The styles and their messages: the
    comment above. A vision tower's collectives (an image prompt's encoder) are not listed.

    >>> [(c.kind, c.width) for c in transformers_plan_collectives(__import__("llmsizer").load_model("gpt-oss-20b"))]
    [('all_reduce', 2880), ('all_gather', 201088)]
    >>> sum(c.kind == "all_reduce" for c in transformers_plan_collectives(__import__("llmsizer").load_model(
    ...     "llama-2-13b-hf")))
    81
    """
    split = transformers_split_roles(spec.model_type)
    gathered = TRANSFORMERS_GATHERED.get(spec.model_type, frozenset())
    out: list[PlanCollective] = []
    if "token_embd" in split:
        out.append(PlanCollective("all_reduce", spec.hidden_size, "token_embd", -1))
    # layer -> role -> each tensor's output rows (one tensor of a count; two of a role where the model builds two
    # linears for it: Qwen3.5's in_proj_qkv + in_proj_z (ssm_in), in_proj_b + in_proj_a (ssm_ba), each gathered)
    by_layer: dict[int, dict[str, list[int]]] = {}
    for t in model_tensors(spec):
        if 0 <= t.layer and len(t.shape) >= 2 and t.role in split:
            by_layer.setdefault(t.layer, {}).setdefault(t.role, []).append(t.shape[0])
    for layer in sorted(by_layer):
        rows = by_layer[layer]
        modules: list[tuple[frozenset[str], int]] = []  # a gathered module (fused parts one module), its output rows
        fused: dict[frozenset[str], int] = {}
        for role in sorted(rows.keys() & gathered):
            flags = (spec.fused_qkv, spec.fused_gate_up)  # one module only where the model fuses them
            module = next((g for g, f in zip(_FUSED_MODULES, flags, strict=True) if f and role in g), None)
            if module is None:
                modules += [(frozenset({role}), n) for n in rows[role]]
            else:
                fused[module] = fused.get(module, 0) + sum(rows[role])
        modules += list(fused.items())
        out += [PlanCollective("all_gather", n, "+".join(sorted(m)), layer) for m, n in modules]
        for role in _ROWWISE_MODULES:
            if role in rows and role not in gathered:
                out.append(PlanCollective("all_reduce", rows[role][0], role, layer))
        if rows.keys() & _EXPERT_MODULE:
            out.append(PlanCollective("all_reduce", spec.hidden_size, "experts", layer))
    if "output" in split:
        out.append(PlanCollective("all_gather", spec.vocab_size, "output", -1, head=True))
    return tuple(out)


def plan_collective_seconds(collectives: tuple[PlanCollective, ...], tokens: int, head_tokens: int,
                            element_bytes: float, tp: int, link_bandwidth: float, latency_seconds: float) -> float:
    """Seconds of one forward's plan collectives over ``tp`` GPUs (eq. TP2): each all-reduce by formulas/speed.py
    eq. (6), each all-gather by eq. (6g), of ``tokens`` x width x ``element_bytes`` (the lm_head's gather of
    ``head_tokens``), each with the per-call latency ``latency_seconds``::

        t_plan = sum_r [alpha + 2 (n - 1) / n T w_r a / B] + sum_g [alpha + (n - 1) / n T_g w_g a / B]     (TP2)

    >>> c = (PlanCollective("all_reduce", 1000, "x", 0), PlanCollective("all_gather", 4000, "output", -1, True))
    >>> plan_collective_seconds(c, 10, 1, 2.0, 2, 1e9, 1e-5) == 1e-5 + 2e4 / 1e9 + 1e-5 + 4e3 / 1e9
    True
    """
    t = 0.0
    for c in collectives:
        nbytes = (head_tokens if c.head else tokens) * c.width * element_bytes
        if c.kind == "all_reduce":
            t += allreduce_time(nbytes, tp, link_bandwidth, latency_seconds)
        else:
            t += allgather_time(nbytes, tp, link_bandwidth, latency_seconds)
    return t


@dataclass(frozen=True)
class ActivationSplit:
    """Which blocks' activations (and caches) one tensor-parallel rank holds a 1/tp share of (True) or whole
    (False): ``attention`` q/k/v, the attention output and the scores (its heads), ``kv`` the K/V cache (its KV
    heads: ``kv_fraction_per_device``), ``mlp`` the dense MLP's intermediates, ``experts`` the routed experts',
    ``shared_experts`` the shared experts', ``mixer`` a recurrent mixer's scan and state."""
    attention: bool = True
    kv: bool = True
    mlp: bool = True
    experts: bool = True
    shared_experts: bool = True
    mixer: bool = True

    def ways(self, block: str, tp: int) -> int:
        """The divisor of ``block``'s activations on one rank: ``tp`` where split, 1 where whole."""
        return max(1, tp) if getattr(self, block) else 1


EVERY_BLOCK_SPLIT = ActivationSplit()


def activation_split(engine: str | None, model_type: str) -> ActivationSplit:
    """Which activations ``engine``'s tensor parallelism splits for ``model_type``: the one answer every activation,
    KV and recurrent-state consumer takes. On transformers a block is split where its plan shards its input
    projection without gathering the output (``transformers_split_roles`` less ``TRANSFORMERS_GATHERED``):
    attention by q (``attn_q``, MLA's ``attn_q_b``), the KV cache by the projection it caches (``attn_k``; MLA's
    latent ``attn_kv_a_mqa``, which transformers 5.24 caches before expanding it, modeling_deepseek_v2.py:386-400,
    and no plan splits: ``mla_kv_a_proj``), the MLP
    by ``ffn_up``, the experts by ``ffn_exps_up`` (or ``ffn_exps_gate``, a packed gate_up), the shared experts by
    ``ffn_shexp_up``, a mixer by its input projection ``ssm_in``. Every rank then holds the whole of a block its
    plan does not split (gpt-oss, Falcon-H1 and Qwen3-VL's dense text model: only the embedding and lm_head;
    Jamba and GraniteMoeHybrid: only the experts; DeepSeek-V3: no attention). vLLM, SGLang and llama.cpp shard
    heads, intermediates and mixers by their own rules: every block split (``EVERY_BLOCK_SPLIT``).

    >>> activation_split("transformers", "gpt_oss").attention, activation_split("transformers", "llama").kv
    (False, True)
    """
    if engine != "transformers":
        return EVERY_BLOCK_SPLIT
    live = transformers_split_roles(model_type) - TRANSFORMERS_GATHERED.get(model_type, frozenset())
    return ActivationSplit(attention=bool(live & {"attn_q", "attn_q_b"}), kv=bool(live & {"attn_k", "attn_kv_a_mqa"}),
                           mlp="ffn_up" in live, experts=bool(live & {"ffn_exps_up", "ffn_exps_gate"}),
                           shared_experts="ffn_shexp_up" in live, mixer="ssm_in" in live)


def kept_whole(engine: str | None, t: Tensor, model_type: str = "") -> bool:
    """Whether ``engine`` keeps tensor ``t`` whole on every tensor-parallel rank: the one rule of replication. On
    transformers every tensor its plan for ``model_type`` does not split (``transformers_split_roles``: a 2-D weight
    or a 1-D bias alike); on the serving engines their 2-D ``REPLICATED_MATRICES`` and every 1-D tensor (norms,
    row-parallel biases) but those they split with their layer (``SPLIT_VECTORS``: column-parallel biases, per-head
    sinks); with no engine known, the 1-D tensors."""
    if engine == "transformers":
        return t.role not in transformers_split_roles(model_type)
    if len(t.shape) == 1:
        return t.role not in SPLIT_VECTORS.get(engine or "", frozenset())
    return len(t.shape) == 2 and t.role in REPLICATED_MATRICES.get(engine or "", frozenset())


@lru_cache(maxsize=256)  # per spec, like model_tensors
def whole_elements_by_component(spec: ModelSpec, engine: str | None) -> dict[str, int]:
    """Elements of the tensors ``engine`` keeps whole on every tensor-parallel rank (``kept_whole``), per
    component (formulas/tensors.py ``Component``)."""
    out: dict[str, int] = {}
    for t in model_tensors(spec):
        if kept_whole(engine, t, spec.model_type):
            out[t.component] = out.get(t.component, 0) + t.numel
    return out


# vLLM's and SGLang's fused attention input projection gives each rank num_heads / tp query heads and, where tp
# exceeds the KV heads, one whole KV head, the same head on tp / kv ranks (``num_kv_head_replicas``): vllm 0.19.1
# (PyPI wheel) vllm/model_executor/layers/linear.py:1010-1027 ``QKVParallelLinear`` (tp_size >= total_num_kv_heads:
# num_kv_heads = 1, output_size = (num_heads + 2 x num_kv_heads) x head_size x tp_size, each rank's rows
# output_size / tp_size), sglang 0.5.6 sglang/srt/layers/linear.py:817-834 the same. So one rank holds
# max(1, kv // tp) heads of the K and V projections (their biases too): the share of the KV cache it holds
# (``kv_fraction_per_device``), 1 / kv rather than 1 / tp where tp > kv. Every GQA/MQA family of the catalog builds
# its attention so on both: vLLM llama.py:164 (Mistral and Phi-3 through it), qwen2.py:159, qwen3.py:98,
# gemma2.py:135, gemma3.py:142, gemma3n.py:312, gemma4.py:300, glm4_moe.py:269, gpt_oss.py:110, qwen3_moe.py:297,
# qwen3_next.py:235, llama4.py:225, mixtral.py:191, stablelm.py:133, falcon.py:132, falcon_h1.py:261,
# granitemoehybrid.py:255, jamba.py:218, nemotron_h.py:464, phi.py:95; SGLang llama.py:153, qwen2.py:143,
# qwen3.py:106, qwen3_moe.py:321, qwen3_next.py:617, glm4_moe.py:208, gpt_oss.py:238, mixtral.py:153, llama4.py:258,
# gemma3_causal.py:151, falcon_h1.py:153, nemotron_h.py:421. MLA has no K/V heads to replicate (kv_a is whole,
# ``REPLICATED_MATRICES``; kv_b splits by query heads). Qwen3-Next's Gated DeltaNet projections are
# MergedColumnParallelLinear / ColumnParallelLinear split tp ways (vllm layers/mamba/gdn_linear_attn.py:263-318), no
# head replication. (Vision towers' K/V, whose heads equal their query heads, are left at 1 / tp.) The training
# frameworks' plans (Megatron-Core, torchtitan) split query groups evenly: not here.
HEAD_REPLICATING_ENGINES = frozenset({"vllm", "sglang"})
KV_PROJECTIONS = frozenset({"attn_k", "attn_v", "attn_k.bias", "attn_v.bias"})


def kv_projection_share(spec: ModelSpec, engine: str | None, tp: int) -> float | None:
    """The share of each K/V projection (``KV_PROJECTIONS``) one ``engine`` rank holds where it is more than 1 / tp:
    max(1, kv // tp) / kv (``kv_fraction_per_device``) on vLLM / SGLang with tp > kv KV heads; None otherwise (the
    projections split tp ways like the rest).

    >>> kv_projection_share(__import__("llmsizer").load_model("qwen3-next-80b-a3b-thinking"), "vllm", 8)
    0.5
    >>> kv_projection_share(__import__("llmsizer").load_model("qwen3-next-80b-a3b-thinking"), "vllm", 2) is None
    True
    """
    if engine not in HEAD_REPLICATING_ENGINES or tp <= spec.num_kv_heads or spec.mla is not None:
        return None
    return kv_fraction_per_device(spec, tp, mla_latent=False, engine=engine)


# Mamba-2's B and C likewise: with n_groups not a multiple of tp (n_groups 1: Falcon-H1, Granite-4.0-H) vLLM and
# SGLang extend the groups to n_groups + extra_groups_for_head_shards = tp (one group per rank, copied), and build
# in_proj and conv1d as ColumnParallelLinear over the extended widths: in_proj out = d_inner + conv_dim + heads and
# conv1d out = conv_dim, conv_dim = d_inner + 2 x tp x d_state, each / tp per rank (vllm 0.19.1
# layers/mamba/mamba_mixer2.py:279-300, :332-348; sglang 0.5.6 layers/attention/mamba/mamba.py:185-238). A rank then
# holds 2 x d_state rows of B and C more than 1 / tp of the checkpoint's (the same extra groups the state's conv
# channels carry, formulas/recurrent_state.py eq. 4). vLLM and SGLang refuse other n_groups not a multiple of tp
# (mamba_mixer2.py:279-281 asserts n_groups % tp == 0 or n_groups == 1).
_MAMBA2_GROUP_ROWS = frozenset({"ssm_in", "ssm_conv1d"})


@lru_cache(maxsize=256)  # per spec and layout
def replica_shares(spec: ModelSpec, engine: str | None, tp: int) -> dict[str, float]:
    """The share of each tensor role one ``engine`` rank holds beyond 1 / tp, where the engine replicates heads or
    groups across ranks; empty where none. The K/V projections (``KV_PROJECTIONS``, ``kv_projection_share``)::

        s_kv - 1 / tp = max(1, kv // tp) / kv - 1 / tp                                               (TP3)

    Mamba-2's in_proj and conv1d (n_groups % tp != 0: the B/C rows of extra = tp - n_groups groups added, then / tp)::

        2 x extra x d_state / (rows x tp),  rows = d_inner + conv + heads (in_proj), conv (conv1d)   (TP4)

    >>> replica_shares(__import__("llmsizer").load_model("qwen3-next-80b-a3b-thinking"), "vllm", 8)["attn_k"]
    0.375
    """
    out: dict[str, float] = {}
    share = kv_projection_share(spec, engine, tp)
    if share is not None:
        out.update(dict.fromkeys(KV_PROJECTIONS, share - 1 / tp))
    r = spec.recurrent
    if (engine in HEAD_REPLICATING_ENGINES and r is not None and r.kind == "mamba2" and spec.recurrent_layer_count
            and tp > 1 and r.n_groups % tp):
        extra_rows = 2 * extra_groups(r.n_groups, tp, spec.name) * r.d_state  # (recurrent_state.py eq. 4's one rule)
        conv = r.conv_channels
        out["ssm_in"] = extra_rows / ((r.d_inner + conv + r.num_heads) * tp)
        out["ssm_conv1d"] = extra_rows / (conv * tp)
    return out


@lru_cache(maxsize=256)  # per spec, format and layout, like replicated_matrix_bytes
def head_replica_bytes(spec: ModelSpec, engine: str, fmt: str, group_size: int, other_bytes: int,
                       fused_experts: bool, tp: int) -> tuple[tuple[float, ...], dict[str, float], dict[str, float]]:
    """Bytes one rank holds beyond 1 / tp of the tensors whose heads or groups ``engine`` replicates
    (``replica_shares``, eqs. TP3-TP4), in format ``fmt`` (each tensor's bytes b by ``weight_formats.tensor_bytes``):
    per decoder layer, per component and per storage label, each tensor adding b x its role's share. All zero where
    every share is 1 / tp."""
    layers = [0.0] * spec.num_layers
    comps: dict[str, float] = {}
    store: dict[str, float] = {}
    shares = replica_shares(spec, engine, tp)
    if not shares:
        return tuple(layers), comps, store
    fmt = normalize_format(fmt)
    for t in model_tensors(spec):
        if t.role in shares:
            b, label = tensor_bytes(spec, fmt, t, group_size, other_bytes, fused_experts, engine)
            extra = b * shares[t.role]
            if 0 <= t.layer < spec.num_layers:
                layers[t.layer] += extra
            comps[t.component] = comps.get(t.component, 0.0) + extra
            store[label] = store.get(label, 0.0) + extra
    return tuple(layers), comps, store


@lru_cache(maxsize=256)  # per spec and layout, like whole_elements_by_component (the dict is read, never changed)
def plan_rank_shares(spec: ModelSpec, engine: str | None, tp: int) -> dict[str, float] | None:
    """The share of each component's parameters one rank multiplies (and holds) under ``engine``'s tensor
    parallelism where the engine keeps some of them whole on every rank (``replicates_matrices``: transformers'
    plan, vLLM's and SGLang's ``REPLICATED_MATRICES``), or None where every matrix is split ``tp`` ways (llama.cpp's
    row split, as the speed model divides it).

    transformers (``tp_plan="auto"``) splits only the roles its plan names, vLLM and SGLang all but their replicated
    matrices and 1-D tensors (``kept_whole``): a component of N parameters with W of them whole runs, on each rank,
    the matrix products of

        N_rank = (N - W) / tp + W                                                                  (TP1)

    parameters: every rank multiplies a whole matrix in full (its input is the whole activation, the output is
    not split). gpt-oss's plan splits its embedding and lm_head only, so each of 2 ranks does the whole layer work;
    llama's splits q/k/v/o and the MLP, so only its norms stay whole. vLLM's DeepSeek-V3 keeps its MLA
    down-projections (q_a, kv_a) and routers whole (a ReplicatedLinear runs on the rank's whole hidden state), so
    at TP 8 each rank multiplies 1.03 B whole parameters besides its 1/8 of the rest. A dense forward's matmul
    FLOPs per rank are 2 x sum_c N_rank,c per token (Kaplan et al. 2020, arXiv 2001.08361, Table 1's 2N), a decode
    step's weight bytes the rank's shards (``shard_weights``, the same ``kept_whole``).

    >>> s = plan_rank_shares(__import__("llmsizer").load_model("gpt-oss-20b"), "transformers", 2)
    >>> s["attention"], s["experts"], s["lm_head"]
    (1.0, 1.0, 0.5)
    >>> round(plan_rank_shares(__import__("llmsizer").load_model("deepseek-v3"), "vllm", 8)["attention"], 4)
    0.1958
    """
    if not replicates_matrices(engine) or tp <= 1:
        return None
    whole = whole_elements_by_component(spec, engine)
    extra = head_replica_elements(spec, engine, tp)
    return {c: ((n - whole.get(c, 0)) / tp + whole.get(c, 0) + extra.get(c, 0.0)) / n
            for c, n in count_params(spec).by_component.items() if n}


@lru_cache(maxsize=256)  # per spec and layout, like whole_elements_by_component
def head_replica_elements(spec: ModelSpec, engine: str | None, tp: int) -> dict[str, float]:
    """Elements one rank holds and multiplies beyond 1 / tp of the tensors whose heads or groups ``engine``
    replicates, per component (``replica_shares``, eqs. TP3-TP4 in elements); empty where none."""
    shares = replica_shares(spec, engine, tp)
    out: dict[str, float] = {}
    if not shares:
        return out
    for t in model_tensors(spec):
        if t.role in shares:
            out[t.component] = out.get(t.component, 0.0) + t.numel * shares[t.role]
    return out


def replicates_matrices(engine: str | None) -> bool:
    """Whether ``engine`` keeps some 2-D weights whole (``kept_whole``): transformers and the serving engines."""
    return engine == "transformers" or engine in REPLICATED_MATRICES


def replicated_matrix(engine: str | None, t: Tensor, model_type: str = "") -> bool:
    """Whether ``engine`` keeps the 2-D (or larger) tensor ``t`` whole on every tensor-parallel rank (``kept_whole``)."""
    return len(t.shape) >= 2 and kept_whole(engine, t, model_type)


def _own_dtype(engine: str | None, t: Tensor, model_type: str = "") -> bool:
    """Whether ``engine`` builds ``t`` in a dtype of its own for ``model_type`` (weight_formats.py
    ``engine_tensor_bytes``)."""
    return t.role in engine_tensor_bytes(engine, model_type)


def _whole_vector(engine: str | None, t: Tensor, model_type: str) -> bool:
    """A 1-D tensor stays whole on every rank, but on transformers one its plan shards (a colwise bias): ``kept_whole``;
    counted at the replicated element size, but one the engine builds in a dtype of its own (``_sized_whole``)."""
    return len(t.shape) == 1 and kept_whole(engine, t, model_type) and not _own_dtype(engine, t, model_type)


def _sized_whole(engine: str | None, t: Tensor, model_type: str) -> bool:
    """A whole tensor sized by its own bytes (``replicated_matrix_bytes``): a replicated matrix, or a 1-D tensor the
    engine builds in a dtype of its own (SGLang's fp32 DSA indexer k_norm)."""
    return replicated_matrix(engine, t, model_type) or (len(t.shape) == 1 and _own_dtype(engine, t, model_type)
                                                         and kept_whole(engine, t, model_type))


@lru_cache(maxsize=256)  # per spec and format, like weight_bytes
def replicated_matrix_bytes(spec: ModelSpec, engine: str, fmt: str, group_size: int, other_bytes: int,
                            fused_experts: bool, capability: int | None = None
                            ) -> tuple[tuple[int, ...], dict[str, int]]:
    """Bytes of the 2-D tensors ``engine`` replicates (``replicated_matrix``) and of the 1-D ones it builds in a dtype
    of its own (``_sized_whole``) in format ``fmt``, per decoder layer and per component: each tensor's own bytes by
    ``weight_formats.tensor_bytes``, the rule ``weight_bytes`` sums."""
    fmt = normalize_format(fmt)
    layers = [0] * spec.num_layers
    comps: dict[str, int] = {}
    for t in model_tensors(spec):
        if _sized_whole(engine, t, spec.model_type):
            b = tensor_bytes(spec, fmt, t, group_size, other_bytes, fused_experts, engine, capability)[0]
            if 0 <= t.layer < spec.num_layers:
                layers[t.layer] += b
            comps[t.component] = comps.get(t.component, 0) + b
    bias = correction_bias_bytes(spec, engine, other_bytes)  # the router's buffer, whole on every rank (weight_formats.py)
    if bias:
        for i, moe in enumerate(spec.moe_layers):
            if moe:
                layers[i] += bias
                comps["router"] = comps.get("router", 0) + bias
    return tuple(layers), comps


def shard_weights(spec: ModelSpec, wb: WeightBytes, tp: int, bytes_per_replicated: float = 4.0,
                  engine: str | None = None, group_size: int = GROUP_SIZE_DEFAULT,
                  fused_experts: bool = False, other_bytes: int | None = None,
                  capability: int | None = None) -> WeightBytes:
    """Per-device weights: (total - replicated) / tp + replicated. ``bytes_per_replicated`` = 4 (F32 in GGUF) or
    the compute dtype's size, the size of the 1-D tensors and of an unquantized replicated matrix; ``engine``: the
    serving engine whose replicated matrices (``REPLICATED_MATRICES``) stay whole too, in ``wb``'s format at
    ``group_size`` (``fused_experts`` and ``other_bytes``, default ``bytes_per_replicated``, as ``weight_bytes``
    took them, and ``capability``, the device's CUDA compute capability where the engine's dtype depends on it); a
    file's own bytes ("file") count them at their layer's bytes per element."""
    if tp == 1:
        return wb
    # memoized on the spec and weight objects themselves (both treated as immutable, as weight_bytes' cache
    # already does) and the numbers with their types
    key = (id(spec), id(wb), tp, bytes_per_replicated, type(tp), type(bytes_per_replicated), engine, group_size,
           fused_experts, other_bytes, capability)
    hit = _SHARD_MEMO.get(key)
    if hit is not None and hit[0] is spec and hit[1] is wb:
        return hit[2]
    other = int(bytes_per_replicated) if other_bytes is None else other_bytes
    out = _shard_weights(spec, wb, tp, bytes_per_replicated, engine, group_size, fused_experts, other, capability)
    if len(_SHARD_MEMO) >= 2048:
        _SHARD_MEMO.clear()
    _SHARD_MEMO[key] = (spec, wb, out)
    return out


_SHARD_MEMO: dict[tuple[object, ...], tuple[ModelSpec, WeightBytes, WeightBytes]] = {}


@lru_cache(maxsize=256)  # per spec, like model_tensors
def replicated_by_place(spec: ModelSpec, engine: str | None = None) -> tuple[tuple[int, ...], dict[str, int]]:
    """The 1-D elements of ``replicated_elements`` by where they sit: per decoder layer, and per component."""
    layers = [0] * spec.num_layers
    comps: dict[str, int] = {}
    for t in model_tensors(spec):
        if _whole_vector(engine, t, spec.model_type):
            if 0 <= t.layer < spec.num_layers:
                layers[t.layer] += t.numel
            comps[t.component] = comps.get(t.component, 0) + t.numel
    return tuple(layers), comps


def _matrix_share(spec: ModelSpec, wb: WeightBytes, engine: str | None, other_bytes: int, group_size: int,
                  fused_experts: bool, capability: int | None = None) -> tuple[tuple[int, ...], dict[str, int]]:
    """The replicated matrices' bytes per layer and component in ``wb``'s format (``replicated_matrix_bytes``); for
    a file's own bytes, their elements at their layer's bytes per element (a file gives no per-tensor split)."""
    if engine is None or not replicates_matrices(engine):
        return (0,) * spec.num_layers, {}
    if wb.format != "file":
        return replicated_matrix_bytes(spec, engine, wb.format, group_size, other_bytes, fused_experts, capability)
    n = spec.num_layers
    numel, rep = _layer_elements(spec, lambda t: t.numel if _sized_whole(engine, t, spec.model_type) else 0)
    per = wb.layer_bytes if len(wb.layer_bytes) == n else (0,) * n
    layers = tuple(int(r * b / e) if e else 0 for r, b, e in zip(rep, per, numel, strict=True))
    return layers, {"layers_and_other": sum(layers)} if sum(layers) else {}


def _layer_elements(spec: ModelSpec, part: Callable[[Tensor], float]) -> tuple[list[int], list[float]]:
    """Per decoder layer: its tensors' elements, and the sum of ``part`` over them (the elements a rule picks out;
    ints stay ints)."""
    n = spec.num_layers
    numel: list[int] = [0] * n
    picked: list[float] = [0] * n
    for t in model_tensors(spec):
        if 0 <= t.layer < n:
            numel[t.layer] += t.numel
            picked[t.layer] += part(t)
    return numel, picked


def _replica_share(spec: ModelSpec, wb: WeightBytes, engine: str | None, other_bytes: int, group_size: int,
                   fused_experts: bool, tp: int) -> tuple[tuple[float, ...], dict[str, float], dict[str, float]]:
    """The bytes one rank holds beyond 1 / tp of replicated heads and groups (``head_replica_bytes``, eqs.
    TP3-TP4) per layer, component and storage label in ``wb``'s format; for a file's own bytes, their elements at
    their layer's bytes per element, the storage labels in proportion to the file's."""
    shares = replica_shares(spec, engine, tp)
    if engine is None or not shares:
        return (0.0,) * spec.num_layers, {}, {}
    if wb.format != "file":
        return head_replica_bytes(spec, engine, wb.format, group_size, other_bytes, fused_experts, tp)
    n = spec.num_layers
    numel, kv = _layer_elements(spec, lambda t: t.numel * shares.get(t.role, 0.0))
    per = wb.layer_bytes if len(wb.layer_bytes) == n else (0,) * n
    layers = tuple(k * b / e if e else 0.0 for k, b, e in zip(kv, per, numel, strict=True))
    extra = sum(layers)
    if not extra:
        return layers, {}, {}
    stored = sum(wb.by_storage.values())
    return (layers, {"layers_and_other": extra},
            {k: extra * v / stored for k, v in wb.by_storage.items()} if stored else {})


def _shard_weights(spec: ModelSpec, wb: WeightBytes, tp: int, bytes_per_replicated: float, engine: str | None,
                   group_size: int, fused_experts: bool, other_bytes: int,
                   capability: int | None = None) -> WeightBytes:
    mat_layers, mat_comp = _matrix_share(spec, wb, engine, other_bytes, group_size, fused_experts, capability)
    kv_layers, kv_comp, kv_store = _replica_share(spec, wb, engine, other_bytes, group_size, fused_experts, tp)
    if engine in FP8_BLOCK_ENGINES and wb.format in GROUP_SHARD_FORMATS:  # MoeWNA16's experts (eq. TP5b) on top
        wl, wc, ws = moe_wna16_extra_bytes(spec, engine, wb.format, group_size, other_bytes, tp, fused_experts)
        if wc:
            kv_layers = tuple(a + b for a, b in zip(kv_layers, wl, strict=True))
            kv_comp = {k: kv_comp.get(k, 0.0) + wc.get(k, 0.0) for k in kv_comp.keys() | wc.keys()}
            kv_store = {k: kv_store.get(k, 0.0) + ws.get(k, 0.0) for k in kv_store.keys() | ws.keys()}
    rep = int(replicated_elements(spec, engine) * bytes_per_replicated) + sum(mat_comp.values())
    rep = min(rep, wb.total)

    def share(x: int) -> int:  # the 1-D share in proportion to the bytes (where their place is not known)
        frac = x / wb.total if wb.total else 0.0
        return int((x - rep * frac) / tp + rep * frac)

    def exact(x: int, elements: int, whole: int = 0) -> int:  # a part whose replicated bytes are known keeps them
        r = min(x, int(elements * bytes_per_replicated) + whole)  # whole (1-D elements + matrices), the rest / tp
        return int((x - r) / tp + r)

    per_layer, per_comp = replicated_by_place(spec, engine)
    # what a rank holds beyond 1 / tp of replicated KV heads and Mamba-2 groups (eqs. TP3-TP4: vLLM, SGLang) on top
    layers = (tuple(exact(v, e, m) + int(k) for v, e, m, k in zip(wb.layer_bytes, per_layer, mat_layers, kv_layers,
                                                                   strict=True))
              if len(wb.layer_bytes) == len(per_layer) else tuple(share(v) for v in wb.layer_bytes))
    return replace(wb, total=share(wb.total) + int(sum(kv_comp.values())),
                   by_component={k: exact(v, per_comp.get(k, 0), mat_comp.get(k, 0)) + int(kv_comp.get(k, 0))
                                 for k, v in wb.by_component.items()},
                   by_storage={k: share(v) + int(kv_store.get(k, 0)) for k, v in wb.by_storage.items()},
                   layer_bytes=layers, notes=wb.notes + (f"per device under tensor parallel {tp}",))


def kv_fraction_per_device(spec: ModelSpec, tp: int, mla_latent: bool, engine: str | None = None) -> float:
    """Share of the KV cache one device holds: ceil-free max(1, kv_heads // tp) / kv_heads; 1 for MLA latent, and 1
    where ``engine``'s plan leaves the K/V heads whole on every rank (``activation_split``: transformers' gpt-oss,
    Jamba, DeepSeek-V3 ...)."""
    if tp == 1 or (spec.mla is not None and mla_latent) or not activation_split(engine, spec.model_type).kv:
        return 1.0
    heads_here = max(1, spec.num_kv_heads // tp)
    return heads_here / spec.num_kv_heads


def per_device(nbytes: int, fraction: float) -> int:
    return int(math.ceil(nbytes * fraction))

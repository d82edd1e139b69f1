"""Which layers a ModelOpt checkpoint keeps unquantized: its ``exclude_modules`` (hf_quant_config.json) or ``ignore``
(config.json) list matched to a model's modules as vLLM matches it.

Source: vllm 0.19.1 (PyPI wheel, sha256 71a87f46cafab4489c69a5c5c83b870d0235e5694d8222303d460576293dc719).

- ``ModelOptQuantConfigBase.get_quant_method`` (model_executor/layers/quantization/modelopt.py:183-216): a linear
  layer (``LinearBase``) or fused-MoE layer whose module prefix ``is_layer_excluded`` gets
  ``UnquantizedLinearMethod``, a weight in the model dtype; any other is quantized (NVFP4: eq. N1,
  formulas/weight_formats.py).
- ``is_layer_excluded`` (modelopt.py:145-181) is true when any of three tests passes:
  1. ``is_layer_skipped(prefix, exclude_modules, packed_modules_mapping)`` (model_executor/layers/quantization/
     utils/quant_utils.py:437-491), an exact match. A fused module (``qkv_proj``, ``gate_up_proj``,
     DeepSeek's ``fused_qkv_a_proj``: the model's ``packed_modules_mapping``) is excluded when each of its
     checkpoint shards is listed. If only some are listed, vLLM raises "Detected some but not all shards of ...
     are quantized" (:474-478).
     A prefix with "experts" in it (the ``FusedMoE`` module ``...mlp.experts``) is excluded when it is a
     substring of a listed entry that contains "experts" (:479-486). Any other prefix must be listed as it is.
  2. A substring test (modelopt.py:165-175): an entry, other than the prefix itself, that occurs inside the prefix
     (or inside it less a leading ``language_model.``).
  3. ``fnmatch(prefix, entry)`` (modelopt.py:177-179): a shell wildcard such as ``model.layers.0.*`` or
     ``*.self_attn*``.
- The prefix vLLM asks about is the module's path in its own model. For the families in ``MODELOPT_FAMILIES`` that
  path is ``model.layers.{i}.`` followed by the Hugging Face module name. The fused modules are
  named as vLLM fuses them: deepseek_v2.py:1305-1337 ``packed_modules_mapping``, llama.py:509-512,
  qwen2_moe.py:540-559, glm4_moe.py:626-636, mixtral.py:486-492, nemotron_h.py:802-808; the indexer is
  ``self_attn.indexer.wq_b`` / ``.wk`` / ``.weights_proj``, at deepseek_v2.py:636-656 and :958.
- Mixtral (mixtral.py): ``self_attn.qkv_proj`` / ``.o_proj`` (:198, :205, :255) and the routed experts as one
  ``FusedMoE`` at ``block_sparse_moe.experts`` (:140, :263); its router ``block_sparse_moe.gate`` (:120-127,
  ``quant_config=None``) is kept 16-bit by the format's rule.
- Nemotron-H (nemotron_h.py): every layer's block is ``mixer`` (:317, :360, :409, :530). A Mamba-2 layer holds
  ``mixer.in_proj`` and ``mixer.out_proj`` (layers/mamba/mamba_mixer2.py:318-348, :456-462; its ``conv1d`` is built
  with ``quant_config=None``, :306-340); an attention layer ``mixer.qkv_proj`` / ``mixer.o_proj`` (:464-478); an MLP
  layer ``mixer.up_proj`` / ``mixer.down_proj`` (:101-116); an MoE layer the routed experts ``mixer.experts``
  (:213-225), the shared expert ``mixer.shared_experts.up_proj`` / ``.down_proj`` (:182-190) and, with a
  ``moe_latent_size``, ``mixer.fc1_latent_proj`` / ``mixer.fc2_latent_proj`` (:193-207). Its checkpoint names the
  model ``backbone``: the class's ``hf_to_vllm_mapper`` (:797-800: substrings ``A_log`` -> ``A``, ``embeddings``
  -> ``embed_tokens``, then the prefix ``backbone`` -> ``model``, in ``WeightsMapper._map_name``'s order, models/
  utils.py:62-91) rewrites every exclude_modules entry before matching (``apply_vllm_mapper``, modelopt.py:
  219-239, called at model_loader/utils.py:280-285 for a class with a mapper). The same call first splits an entry
  ``path*`` (not ``path.*``) into ``path`` and ``path.*``; ``exclusion_list`` repeats both steps for the families
  with a mapper (``_HF_TO_VLLM``). For the others the split alone would not change what tests 2 and 3 match.
- Qwen3.5 / Qwen3.6 (``qwen3_5_text``, ``qwen3_5_moe_text``: the text model of ``Qwen3_5ForConditionalGeneration`` /
  ``Qwen3_5MoeForConditionalGeneration``, models/qwen3_5.py, the only Qwen3.5 classes vLLM 0.19.1 registers,
  registry.py:515-518). The loader builds the class with the prefix "" (model_loader/utils.py:39-57), so the text
  model sits at ``language_model.model`` (qwen3_5.py:605-608, :829-832, :481-483) and its layers at
  ``language_model.model.layers.{i}`` (:237). A Gated DeltaNet layer holds ``linear_attn.in_proj_qkvz`` (the
  checkpoint's ``in_proj_qkv`` + ``in_proj_z``), ``linear_attn.in_proj_ba`` (``in_proj_b`` + ``in_proj_a``) and
  ``linear_attn.out_proj``, all built with the quant config (:136-142; layers/mamba/gdn_linear_attn.py:278-310,
  :351-357, :370-418; its ``conv1d`` without one, :265-270); an attention layer ``self_attn.qkv_proj`` /
  ``self_attn.o_proj`` (:144-150; qwen3_next.py:235-250); the MLP ``mlp.gate_up_proj`` / ``mlp.down_proj``
  (:162-169; qwen2_moe.py:86-99) or the MoE block (:157-160)'s FusedMoE ``mlp.experts``, shared MLP ``mlp.shared_expert.gate_up_proj`` /
  ``.down_proj`` and its router ``mlp.gate`` and ``mlp.shared_expert_gate`` (both ``quant_config=None``)
  (qwen3_next.py:118-157). The class's ``packed_modules_mapping`` is Qwen3-VL's plus the two GDN fusions
  (qwen3_5.py:578-581; qwen3_vl.py:1436-1447), and its ``hf_to_vllm_mapper`` Qwen3-VL's (qwen3_vl.py:1452-1458:
  the prefixes ``model.visual.`` -> ``visual.``, ``lm_head.`` -> ``language_model.lm_head.``,
  ``model.language_model.`` -> ``language_model.model.``), applied to the list at model_loader/utils.py:280-285
  (the class is no ``SupportsQuant``). A text-only Qwen3.5 config (no vision tower) is matched at
  ``model.layers.{i}`` with no mapper, as ``Qwen3_5ForCausalLMBase`` would build it (qwen3_5.py:481-483).
- Not applied: modelopt.py:195-201 keeps ``vision_tower`` / ``vision_model`` unquantized whatever the list says. None
  of ``MODELOPT_FAMILIES`` has one. Qwen3.5's vision tower is ``visual`` (qwen3_5.py:598-603), which vLLM quantizes
  unless the list names it (the NVIDIA releases list ``model.visual*``); llmsizer keeps every vision tensor 16-bit,
  so a Qwen3.5 list that leaves it quantized is refused (``vision_quantized``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import translate
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from ..errors import InputError
from ..specs import ModelSpec
from .tensors import model_tensors

# model types whose vLLM module paths are model.layers.{i}.<the Hugging Face module name> (module docstring), with
# the name of their shared-expert MLP (DeepSeek / GLM ``shared_experts``, Qwen-MoE ``shared_expert``). MiniMax-M2
# (vllm 0.19.1 models/minimax_m2.py): its checkpoint's ``block_sparse_moe`` is built with the prefix ``mlp``
# (:278-282), so its FusedMoE is ``mlp.experts`` (:99-110) and its router ``mlp.gate`` (:113-120, quant_config None);
# ``self_attn.qkv_proj`` (:182-190, packed_modules_mapping :498-504) and ``self_attn.o_proj`` (:192-198)
MODELOPT_FAMILIES: dict[str, str] = {
    "llama": "", "mistral": "", "qwen2": "", "qwen3": "", "minimax_m2": "",
    "qwen2_moe": "shared_expert", "qwen3_moe": "shared_expert",
    "deepseek_v2": "shared_experts", "deepseek_v3": "shared_experts", "deepseek_v32": "shared_experts",
    "glm4_moe": "shared_experts", "glm_moe_dsa": "shared_experts",
    "mixtral": "", "nemotron_h": "shared_experts",
    "qwen3_5_text": "", "qwen3_5_moe_text": "shared_expert",
}

# The model types whose checkpoint wraps the text model in a multimodal one (module docstring): text model type ->
# (the top-level model type, the vLLM module path of its decoder layers). Only with a vision tower (``spec.vision``).
_WRAPPED: dict[str, tuple[str, str]] = {
    "qwen3_5_text": ("qwen3_5", "language_model.model.layers"),
    "qwen3_5_moe_text": ("qwen3_5_moe", "language_model.model.layers"),
}

# model type -> vLLM's model-class ``hf_to_vllm_mapper`` as (``orig_to_new_substr``, ``orig_to_new_prefix``) pairs,
# for the MODELOPT_FAMILIES whose class has one (module docstring): nemotron_h.py:797-800
_HF_TO_VLLM: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "nemotron_h": ((("A_log", "A"), ("embeddings", "embed_tokens")), (("backbone", "model"),)),
    # Qwen3_5(Moe)ForConditionalGeneration: Qwen3-VL's mapper (qwen3_vl.py:1452-1458)
    **dict.fromkeys(("qwen3_5", "qwen3_5_moe"), ((), (("model.visual.", "visual."),
                                                       ("lm_head.", "language_model.lm_head."),
                                                       ("model.language_model.", "language_model.model.")))),
}

# tensor role (formulas/tensors.py) -> the module path under model.layers.{i}; "{shexp}": the family's shared MLP
_MODULE_OF_ROLE: dict[str, str] = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_a": "self_attn.q_a_proj", "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa", "attn_kv_b": "self_attn.kv_b_proj",
    "indexer_q_b": "self_attn.indexer.wq_b", "indexer_k": "self_attn.indexer.wk",
    "indexer_proj": "self_attn.indexer.weights_proj",  # vLLM builds it unquantized anyway (deepseek_v2.py:650-656)
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "ffn_exps_gate": "mlp.experts", "ffn_exps_up": "mlp.experts", "ffn_exps_down": "mlp.experts",
    "ffn_shexp_gate": "mlp.{shexp}.gate_proj", "ffn_shexp_up": "mlp.{shexp}.up_proj",
    "ffn_shexp_down": "mlp.{shexp}.down_proj",
}

# model types whose modules sit elsewhere than _MODULE_OF_ROLE's: role -> module path under model.layers.{i}
_FAMILY_MODULES: dict[str, dict[str, str]] = {
    "mixtral": {**_MODULE_OF_ROLE, "ffn_exps_gate": "block_sparse_moe.experts",
                "ffn_exps_up": "block_sparse_moe.experts", "ffn_exps_down": "block_sparse_moe.experts"},
    "nemotron_h": {
        "attn_q": "mixer.q_proj", "attn_k": "mixer.k_proj", "attn_v": "mixer.v_proj", "attn_output": "mixer.o_proj",
        "ssm_in": "mixer.in_proj", "ssm_out": "mixer.out_proj",
        "ffn_up": "mixer.up_proj", "ffn_down": "mixer.down_proj",
        "ffn_exps_up": "mixer.experts", "ffn_exps_down": "mixer.experts",
        "ffn_shexp_up": "mixer.shared_experts.up_proj", "ffn_shexp_down": "mixer.shared_experts.down_proj",
        "ffn_latent_in": "mixer.fc1_latent_proj", "ffn_latent_out": "mixer.fc2_latent_proj",
    },
    # Qwen3.5: the two ssm_in tensors (in_proj_qkv, in_proj_z) fuse into in_proj_qkvz, the two ssm_ba ones
    # (in_proj_b, in_proj_a) into in_proj_ba (packed_modules)
    **dict.fromkeys(("qwen3_5_text", "qwen3_5_moe_text"), {
        **_MODULE_OF_ROLE, "ssm_in": "linear_attn.in_proj_qkv", "ssm_ba": "linear_attn.in_proj_b",
        "ssm_out": "linear_attn.out_proj"}),
}


def packed_modules(spec: ModelSpec) -> dict[str, tuple[str, ...]]:
    """vLLM's ``packed_modules_mapping`` for ``spec``: fused module name -> its checkpoint shards (module
    docstring). DeepSeek fuses ``q_a_proj`` and ``kv_a_proj_with_mqa`` only with a q LoRA rank
    (deepseek_v2.py:1330-1337); Mixtral and Nemotron-H fuse only ``qkv_proj`` (mixtral.py:486-492,
    nemotron_h.py:802-808); Qwen3.5 adds its Gated DeltaNet pairs (qwen3_5.py:452-462, :578-581)."""
    if spec.model_type in ("mixtral", "nemotron_h"):
        return {"qkv_proj": ("q_proj", "k_proj", "v_proj")}
    out = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    if spec.model_type in _WRAPPED:  # Qwen3.5 (qwen3_5.py:452-462, :578-581): the GDN input projections
        out |= {"in_proj_qkvz": ("in_proj_qkv", "in_proj_z"), "in_proj_ba": ("in_proj_b", "in_proj_a")}
    if spec.mla is not None and spec.mla.q_lora_rank:
        out["fused_qkv_a_proj"] = ("q_a_proj", "kv_a_proj_with_mqa")
    return out


def _fused_name(module: str, packed: Mapping[str, Sequence[str]]) -> str:
    """The name vLLM gives the module holding checkpoint module ``module`` (a fused one where it fuses it)."""
    head, _, last = module.rpartition(".")
    for fused, shards in packed.items():
        if last in shards:
            return f"{head}.{fused}" if head else fused
    return module


def modelopt_excluded(prefix: str, exclude_modules: Sequence[str],
                      packed: Mapping[str, Sequence[str]] = MappingProxyType({})) -> bool:
    """Whether vLLM keeps the layer at module path ``prefix`` unquantized under a ModelOpt ``exclude_modules``
    list: ``ModelOptQuantConfigBase.is_layer_excluded`` (vllm 0.19.1 modelopt.py:145-181, with quant_utils.py:
    437-491 ``is_layer_skipped``), re-stated test by test (module docstring). ``packed``: the model's fused module
    name -> checkpoint shard names. Raises InputError (one line) where vLLM raises on a fused module only some
    of whose shards are listed."""
    if not exclude_modules:
        return False
    listed = set(exclude_modules)
    proj = prefix.split(".")[-1]
    if proj in packed:  # quant_utils.py:461-478: every shard listed, or none
        hits = {prefix.replace(proj, shard) in listed for shard in packed[proj]}
        if len(hits) > 1:
            raise InputError(f"exclude_modules lists some but not all shards of {prefix} ({', '.join(packed[proj])}); "
                             "vLLM refuses this (all shards of a fused layer must have the same precision)")
        skipped = hits.pop()
    elif "experts" in prefix:  # quant_utils.py:479-486
        skipped = any(prefix in entry for entry in exclude_modules if "experts" in entry)
    else:
        skipped = prefix in listed
    if skipped:
        return True
    bare = prefix.removeprefix("language_model.") if prefix.startswith("language_model.") else None
    for entry in exclude_modules:  # modelopt.py:165-175
        if entry != prefix and (entry in prefix or (bare is not None and entry in bare)):
            return True
    return any(_wildcard(entry).match(prefix) for entry in exclude_modules)  # modelopt.py:177-179 fnmatch


@lru_cache(maxsize=4096)
def _wildcard(pattern: str) -> re.Pattern[str]:
    """``fnmatch.fnmatch``'s compiled pattern (case-sensitive on Linux, where vLLM runs: ``os.path.normcase``
    leaves the name as it is there)."""
    return re.compile(translate(pattern))


def layer_module(spec: ModelSpec, role: str, layer: int) -> str | None:
    """The module path vLLM asks ``is_layer_excluded`` about for tensor ``role`` of decoder layer ``layer`` of
    ``spec`` (a fused module's name where vLLM fuses it), or None for a tensor that is no quantizable linear of a
    ``MODELOPT_FAMILIES`` model."""
    shexp = MODELOPT_FAMILIES.get(spec.model_type)
    module = _FAMILY_MODULES.get(spec.model_type, _MODULE_OF_ROLE).get(role)
    if shexp is None or module is None:
        return None
    layers = _WRAPPED[spec.model_type][1] if vllm_model_type(spec) != spec.model_type else "model.layers"
    return f"{layers}.{layer}." + _fused_name(module.format(shexp=shexp), packed_modules(spec))


def vllm_model_type(spec: ModelSpec) -> str:
    """The model type whose vLLM class builds ``spec`` (module docstring): the top-level (multimodal) one for a Qwen3.5
    text model read with its vision tower, else ``spec.model_type``. Keys ``_HF_TO_VLLM``."""
    wrapped = _WRAPPED.get(spec.model_type)
    return wrapped[0] if wrapped is not None and spec.vision is not None else spec.model_type


def modelopt_quant_algo(q: Mapping[str, Any]) -> str | None:
    """The ``quant_algo`` (upper case) of an NVIDIA ModelOpt quantization config, None for any other config.

    ModelOpt writes it in two shapes (vllm 0.34.0 PyPI wheel, model_executor/layers/quantization/modelopt.py:292-309
    ``_extract_modelopt_quant_algo`` and :331-350 ``from_config``): ``{"quantization": {"quant_algo": ...}}``, the
    file ``hf_quant_config.json`` that ModelOpt <= 0.29 writes beside config.json and that vLLM makes the config's
    ``quantization_config`` when config.json has none (transformers_utils/config.py:996-1009 ``get_config``); or,
    ModelOpt >= 0.31, ``{"quant_method": "modelopt", "quant_algo": ...}`` inside config.json."""
    inner = q.get("quantization")
    if isinstance(inner, dict) and "quant_algo" in inner:
        return str(inner["quant_algo"]).upper()
    if str(q.get("quant_method", "")).lower() == "modelopt" and "quant_algo" in q:
        return str(q["quant_algo"]).upper()
    return None


def modelopt_exclude_list(q: Mapping[str, object]) -> list[str]:
    """A ModelOpt quantization config's exclusion list: ``quantization.exclude_modules`` in the hf_quant_config.json
    shape, ``ignore`` in the config.json shape (vllm 0.19.1 modelopt.py:292-313 ``from_config``)."""
    inner = q.get("quantization")
    raw = inner.get("exclude_modules") if isinstance(inner, dict) else q.get("ignore")
    return [str(e) for e in raw] if isinstance(raw, list) else []


def exclusion_list(model_type: str, patterns: Sequence[str]) -> list[str]:
    """``patterns`` as vLLM holds them for a model of ``model_type`` (``vllm_model_type``) once ``apply_vllm_mapper`` (vllm 0.19.1
    modelopt.py:219-239) has run: for a family with an ``hf_to_vllm_mapper`` (``_HF_TO_VLLM``), each ``path*`` split
    into ``path`` and ``path.*``, then each entry renamed by ``WeightsMapper._map_name`` (models/utils.py:62-91:
    every substring rule, first occurrence, then every prefix rule); unchanged for any other."""
    mapper = _HF_TO_VLLM.get(model_type)
    if mapper is None:
        return list(patterns)
    split: list[str] = []
    for entry in patterns:
        if len(entry) >= 2 and entry[-1] == "*" and entry[-2] != ".":
            split += [entry[:-1], entry[:-1] + ".*"]
        else:
            split.append(entry)
    substrings, prefixes = mapper
    out = []
    for entry in split:
        for old, new in substrings:
            if old in entry:
                entry = entry.replace(old, new, 1)
        for old, new in prefixes:
            if entry.startswith(old):
                entry = entry.replace(old, new, 1)
        out.append(entry)
    return out


def vision_quantized(spec: ModelSpec) -> bool:
    """Whether vLLM quantizes the vision tower of ``spec``'s ModelOpt NVFP4 config, which llmsizer keeps 16-bit
    (module docstring): a Qwen3.5 model read with its tower (``visual``: qwen3_5.py:598-603, its linears built with
    the quant config, qwen3_vl.py:185-203) whose list does not keep the first block's ``attn.qkv`` unquantized."""
    q = spec.quantization_config
    vllm_type = vllm_model_type(spec)
    if vllm_type == spec.model_type or modelopt_quant_algo(q) != "NVFP4":
        return False
    patterns = exclusion_list(vllm_type, modelopt_exclude_list(q))
    return not modelopt_excluded("visual.blocks.0.attn.qkv", patterns, packed_modules(spec))


def quantized_vision_refusal(name: str, why: str, keep: str) -> InputError:
    """The one refusal of a checkpoint whose quantization config leaves its vision tower quantized, which vLLM then
    builds quantized (qwen3_5.py:598-603): llmsizer sizes a 16-bit tower only (ModelOpt NVFP4, ``vision_quantized``;
    compressed-tensors, formulas/compressed_tensors.py ``ct_vision_check``). ``why``: what quantizes it; ``keep``:
    the entry that keeps it 16-bit."""
    return InputError(f"{name}: {why}, so vLLM builds its vision tower quantized; only a 16-bit vision tower is "
                      f"modelled (list {keep}, as the quantized releases do)")


@lru_cache(maxsize=256)
def excluded_roles(spec: ModelSpec) -> tuple[frozenset[str], ...]:
    """Per decoder layer of ``spec``, the tensor roles its ModelOpt NVFP4 config keeps unquantized: the quantizable
    linears whose vLLM module (``layer_module``) ``modelopt_excluded`` matches. Empty (no layers) when the
    config is no ModelOpt NVFP4 one (another recipe's list says nothing of an NVFP4 sizing), lists no exclusion, or
    ``spec`` is not in ``MODELOPT_FAMILIES``. An entry that matches none of them, such
    as ``model.layers.61*`` for the MTP layer vLLM builds only when it drafts, changes nothing, as in vLLM."""
    q = spec.quantization_config
    patterns = modelopt_exclude_list(q) if modelopt_quant_algo(q) == "NVFP4" else []
    if not patterns or spec.model_type not in MODELOPT_FAMILIES:
        return ()
    patterns = exclusion_list(vllm_model_type(spec), patterns)
    packed = packed_modules(spec)
    out: list[set[str]] = [set() for _ in range(spec.num_layers)]
    seen: dict[str, bool] = {}
    for t in model_tensors(spec):
        if not (0 <= t.layer < spec.num_layers and t.matrix):
            continue
        module = layer_module(spec, t.role, t.layer)
        if module is None:
            continue
        hit = seen.get(module)
        if hit is None:
            hit = seen[module] = modelopt_excluded(module, patterns, packed)
        if hit:
            out[t.layer].add(t.role)
    if not any(out):
        return ()
    return tuple(frozenset(s) for s in out)

"""Bytes of a compressed-tensors checkpoint (quantization_config ``quant_method`` "compressed-tensors": llm-compressor
and RedHatAI releases, Moonshot's Kimi-K2-Thinking INT4) as its compressor writes each quantized linear.

Source: compressed-tensors 0.20.1 (PyPI wheel ``compressed_tensors-0.20.1-py3-none-any.whl``), the package that
writes and reads these checkpoints; tests/formulas/test_compressed_tensors.py compresses a real model with it and
compares every byte.

Which modules a config group quantizes (``ct_scheme_of``):

- ``quantization/lifecycle/apply.py`` ``apply_quantization_config`` :100-182: every module whose name or class matches
  one of a group's ``targets`` and none of ``ignore`` (``utils/match.py`` ``match_named_modules``) gets that group's
  scheme; a module several targets match takes the most specific (``match_targets`` :116-151 orders exact names,
  then ``re:`` patterns, then class names; ``_scheme_from_targets`` :245-252 takes the first). Only ``nn.Linear``
  (and ``nn.Embedding``) modules are quantized (apply.py :171-177).
- ``utils/match.py`` ``match_name`` :422-445: a target or ignore entry ``re:PATTERN`` matches a module name where
  ``re.match(PATTERN, name)`` does (anchored at the start, not the end); any other entry matches the name exactly;
  ``_match_class`` :448-466: or the module's class name (``Linear`` for every ``nn.Linear``).
- The module names are the Hugging Face checkpoint's: ``model.layers.{i}.self_attn.q_proj``, the routed experts one
  module per expert (``model.layers.{i}.mlp.experts.{j}.gate_proj``), ``lm_head`` (``_HF_MODULE``). vLLM matches
  the same entries against its fused modules shard by shard (vllm ``compressed_tensors/utils.py``
  ``find_first_name_or_class_match`` / ``_find_first_match``, ``re.match`` after ``re:``, @ aff237f9), so it loads the
  layers this rule names.

Tensors per quantized matrix of N outputs and K inputs (``ct_matrix_bytes``; s = the scale's bytes: the dtype the
weight was quantized in, ``quantization/lifecycle/initialize.py`` ``initialize_qparams`` :259-272 ``scale_dtype =
observed_dtype`` (bf16 / fp16 / fp32, else fp16), or the group's ``scale_dtype`` where the config states one):

- scales (initialize.py :213-257): strategy ``tensor`` 1, ``channel`` N, ``group`` / ``tensor_group`` N x ceil(K / g),
  ``block`` [br, bc] ceil(N / br) x ceil(K / bc) elements;
- ``pack-quantized`` (``compressors/pack_quantized/base.py`` :45-110, int, 1-8 bits b): ``weight_packed`` int32
  [N, ceil(K b / 32)], ``weight_scale``, ``weight_shape`` int64 [2] (16 B); an asymmetric group / channel scheme
  also ``weight_zero_point`` int32 packed along the rows, [ceil(N b / 32), scale columns] (:103-106);
- ``int-quantized`` / ``naive-quantized`` / ``float-quantized`` (``compressors/naive_quantized/base.py`` :35-96):
  ``weight`` in the scheme's type (``QuantizationArgs.pytorch_dtype``, quant_args.py :433-447: int8 up to 8 bits,
  float8_e4m3fn), N x K bytes at 8 bits, and ``weight_scale``; asymmetric, a ``weight_zero_point`` of the scale's
  shape in the zero-point dtype (int8 up to 8 bits, quant_args.py :415-419);
- ``nvfp4-pack-quantized`` (``compressors/nvfp4/base.py``; 4-bit float, ``tensor_group`` of 16): ``weight_packed``
  uint8 [N, K / 2], ``weight_scale`` float8_e4m3fn [N, K / 16], ``weight_global_scale`` fp32 [1], plus the activations'
  ``input_global_scale`` fp32 [1] when they are quantized too (NVFP4, not NVFP4A16): eq. N1 of
  formulas/weight_formats.py exactly for the W4A4 scheme;
- activation-order groups (``actorder`` "group"): ``weight_g_idx`` int32 [K] (4 K B), which vLLM loads too
  (vllm ``schemes/compressed_tensors_wNa16.py`` ``create_weights`` ``weight_g_idx`` @ 519b90d4);
- static input activations (``input_activations.dynamic`` false, strategy ``tensor``): ``input_scale`` [1] in s
  bytes (and ``input_zero_point`` [1] when asymmetric); dynamic ones store nothing.

Modules no group quantizes stay in the checkpoint's dtype. The routers, embeddings and norms are kept there too (the
routers vLLM builds with ``quant_config=None``, formulas/weight_formats.py ``ENGINE_TENSOR_BYTES`` notes). A vision
tower is not exempt: apply.py quantizes its ``nn.Linear`` modules like any other a target matches and no ignore
entry names, and vLLM builds Qwen3.5's / Qwen3-VL's tower with the quant config (vllm 0.19.1 models/qwen3_5.py:598-603,
models/qwen3_vl.py:190-205), so a config that leaves it quantized is refused, as the ModelOpt NVFP4 path refuses one
(``ct_vision_check``, formulas/modelopt_exclusions.py ``quantized_vision_refusal``: one rule, a 16-bit tower only);
a config that leaves the lm_head unignored under a ``Linear`` target, that targets a class other than
``Linear``, or that asks a format, strategy or bit width above is refused in one line naming the field
(``ct_config``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import InputError
from ..specs import ModelSpec
from .modelopt_exclusions import quantized_vision_refusal
from .tensors import Tensor

CT_METHOD = "compressed-tensors"
CT_FORMATS = ("pack-quantized", "int-quantized", "naive-quantized", "float-quantized", "nvfp4-pack-quantized")
CT_STRATEGIES = ("tensor", "channel", "group", "tensor_group", "block")
WEIGHT_SHAPE_BYTES = 2 * 8  # weight_shape: int64 [2]
NVFP4_GLOBAL_SCALE_BYTES = 4  # weight_global_scale / input_global_scale: fp32 [1]
_SCALE_DTYPES = {"torch.float16": 2, "torch.bfloat16": 2, "torch.float32": 4, "torch.float8_e4m3fn": 1,
                 "torch.uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class CTScheme:
    """One config group's weight scheme, as the compressor stores it."""

    group: str  # the config_groups key
    targets: tuple[str, ...]
    format: str
    num_bits: int
    type: str  # 'int' or 'float'
    symmetric: bool
    strategy: str
    group_size: int | None
    block: tuple[int, int] | None
    g_idx: bool  # actorder 'group': weight_g_idx int32 [K]
    scale_bytes: int | None  # the group's scale_dtype; None: the checkpoint's dtype
    input_static: bool  # static tensor-wise input activations: input_scale [1] in the scale dtype
    input_zero_point: bool  # and an asymmetric one's input_zero_point [1], int8
    input_global: bool  # NVFP4 W4A4: input_global_scale fp32 [1]

    @property
    def label(self) -> str:
        """The storage label ``weight_bytes`` sums by: 'int4', 'fp8', 'nvfp4'."""
        if self.format == "nvfp4-pack-quantized":
            return "nvfp4"
        return f"{'fp' if self.type == 'float' else 'int'}{self.num_bits}"


@dataclass(frozen=True)
class CTConfig:
    """A compressed-tensors quantization_config: its schemes (in config order) and ignore list."""

    schemes: tuple[CTScheme, ...]
    ignore: tuple[str, ...]


def _field(name: str, where: str, msg: str) -> InputError:
    return InputError(f"{name}: compressed-tensors {where} {msg}")


def _scheme(name: str, key: str, g: dict[str, Any], fmt: str) -> CTScheme:
    where = f"config_groups.{key}"
    w = g.get("weights")
    if not isinstance(w, dict):
        raise _field(name, f"{where}.weights", "is missing: a group without weight quantization is not modelled")
    fmt = str(g.get("format") or fmt)
    if fmt not in CT_FORMATS:
        raise _field(name, f"{where} format", f"{fmt!r} is not supported ({', '.join(CT_FORMATS)})")
    bits, kind = int(w.get("num_bits", 8)), str(w.get("type", "int")).lower()
    group_size = w.get("group_size")
    strategy = w.get("strategy")
    if strategy is None:  # quant_args.py :353-365: inferred from group_size
        strategy = "tensor" if group_size is None else "group" if int(group_size) > 0 else "channel"
    strategy = str(strategy).lower()
    if strategy not in CT_STRATEGIES:
        raise _field(name, f"{where}.weights.strategy", f"{strategy!r} is not supported ({', '.join(CT_STRATEGIES)})")
    if strategy in ("group", "tensor_group") and (group_size is None or int(group_size) <= 0):
        raise _field(name, f"{where}.weights.group_size", f"{group_size!r} is no group for strategy {strategy!r}")
    block = None
    if strategy == "block":
        block = ct_block_structure(name, where, w.get("block_structure"))
    symmetric = bool(w.get("symmetric", True))
    if fmt == "pack-quantized" and not (kind == "int" and 1 <= bits <= 8):
        raise _field(name, f"{where}.weights", f"{kind} {bits}-bit is not pack-quantized's int 1-8 bits")
    if fmt in ("int-quantized", "naive-quantized") and not (kind == "int" and bits == 8):
        raise _field(name, f"{where}.weights", f"{kind} {bits}-bit in {fmt} is not modelled (int 8-bit only)")
    if fmt == "float-quantized" and not (kind == "float" and bits == 8):
        raise _field(name, f"{where}.weights", f"{kind} {bits}-bit in float-quantized is not modelled (fp8 only)")
    if fmt == "nvfp4-pack-quantized" and not (kind == "float" and bits == 4 and strategy == "tensor_group"
                                             and int(group_size or 0) == 16):
        raise _field(name, f"{where}.weights", "of nvfp4-pack-quantized must be float 4-bit tensor_group 16")
    if kind == "float" and not symmetric:
        raise _field(name, f"{where}.weights.symmetric", "false with a float type is not modelled")
    if w.get("dynamic") not in (None, False):
        raise _field(name, f"{where}.weights.dynamic", f"{w.get('dynamic')!r} is not modelled (static weights only)")
    sd = w.get("scale_dtype")
    if sd is not None and str(sd) not in _SCALE_DTYPES:
        raise _field(name, f"{where}.weights.scale_dtype", f"{sd!r} is not known")
    a = g.get("input_activations")
    input_static = input_zp = input_global = False
    if isinstance(a, dict):
        dyn = a.get("dynamic", False)
        a_strategy = str(a.get("strategy") or "tensor").lower()
        if fmt == "nvfp4-pack-quantized":
            input_global = True  # compressors/nvfp4: input_global_scale fp32 [1] with quantized activations
        elif dyn is False:
            if a_strategy != "tensor":
                raise _field(name, f"{where}.input_activations.strategy",
                             f"{a_strategy!r} static is not modelled (tensor or dynamic only)")
            input_static, input_zp = True, not a.get("symmetric", True)
    if g.get("output_activations"):
        raise _field(name, f"{where}.output_activations", "is not modelled")
    raw_targets = g.get("targets") or []
    if not isinstance(raw_targets, list):  # quant_scheme.py :39 ``targets: list[str]``: pydantic refuses a string
        raise _field(name, f"{where}.targets", f"{raw_targets!r} is not a list of names (compressed-tensors' "
                     "QuantizationScheme refuses it: 'Input should be a valid list'); write [\"Linear\"]")
    targets = tuple(str(t) for t in raw_targets)
    for t in targets:
        if not t.startswith("re:") and "." not in t and t != "Linear" and t != "lm_head":
            raise _field(name, f"{where}.targets", f"{t!r} is not modelled (the class 'Linear' or module names)")
    return CTScheme(key, targets, fmt, bits, kind, symmetric, strategy,
                    None if group_size is None else int(group_size), block,
                    str(w.get("actorder") or "").lower() == "group",
                    None if sd is None else _SCALE_DTYPES[str(sd)], input_static, input_zp, input_global)


def ct_block_structure(name: str, where: str, bs: Any) -> tuple[int, int]:
    """A block scheme's ``block_structure`` as compressed-tensors 0.20.1 accepts it (quantization/quant_args.py
    ``validate_block_structure`` :280-303): a string "RxC", or a list of two ints, each > 0; else a one-line InputError
    naming the field (its own "Must be a list of positive ints [rows, cols]")."""
    value = bs
    if isinstance(value, str):
        try:
            value = [int(x) for x in value.split("x")]
        except ValueError:
            value = None
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        raise _field(name, f"{where}.weights.block_structure", f"{bs!r} is not a list of two positive ints [rows, "
                     "cols] (compressed-tensors' QuantizationArgs refuses it)")
    return int(value[0]), int(value[1])


def ct_config(name: str, q: dict[str, Any]) -> CTConfig | None:
    """The compressed-tensors config of quantization_config ``q`` (None for any other method); one-line InputError
    naming the field for what is not modelled (module docstring)."""
    if str(q.get("quant_method", "")).lower() != CT_METHOD:
        return None
    return _ct_config(name, json.dumps(q, sort_keys=True, default=str))


@lru_cache(maxsize=64)
def _ct_config(name: str, text: str) -> CTConfig:
    q = json.loads(text)
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise _field(name, "config_groups", "is missing or empty")
    if q.get("sparsity_config"):
        raise _field(name, "sparsity_config", "is not modelled")
    if q.get("transform_config"):
        raise _field(name, "transform_config", "is not modelled")
    fmt = str(q.get("format") or "")
    schemes = tuple(_scheme(name, str(k), g, fmt) for k, g in groups.items() if isinstance(g, dict))
    ignore = tuple(str(e) for e in q.get("ignore") or ())
    return CTConfig(schemes, ignore)


# Hugging Face module names (under model.layers.{i}.) of the tensor roles (formulas/tensors.py), as the checkpoint
# names them: each routed expert its own module; "{shexp}" the family's shared MLP (DeepSeek/GLM/Kimi
# ``shared_experts``, Qwen-MoE ``shared_expert``)
_HF_MODULE: dict[str, str] = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_a": "self_attn.q_a_proj", "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa", "attn_kv_b": "self_attn.kv_b_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "ffn_exps_gate": "mlp.experts.{j}.gate_proj", "ffn_exps_up": "mlp.experts.{j}.up_proj",
    "ffn_exps_down": "mlp.experts.{j}.down_proj",
    "ffn_shexp_gate": "mlp.{shexp}.gate_proj", "ffn_shexp_up": "mlp.{shexp}.up_proj",
    "ffn_shexp_down": "mlp.{shexp}.down_proj",
}
# model types whose checkpoints name their modules as _HF_MODULE, with their shared-expert MLP's name
CT_FAMILIES: dict[str, str] = {
    "llama": "", "mistral": "", "qwen2": "", "qwen3": "",
    "qwen2_moe": "shared_expert", "qwen3_moe": "shared_expert",
    "deepseek_v2": "shared_experts", "deepseek_v3": "shared_experts", "glm4_moe": "shared_experts",
}
# the components no group quantizes whatever it targets (module docstring): kept in the checkpoint's dtype
CT_KEPT = frozenset({"embedding", "router", "norm", "per_layer_embedding"})
# the checkpoint module name of the vision tower's first block's fused QKV linear, per (text) model type whose tower
# transformers 5.24 names so (models/qwen3_5/modeling_qwen3_5.py :1302 ``self.visual``, :1144 ``self.blocks``, :1011
# ``self.qkv = nn.Linear``, under ``self.model`` :1744; qwen3_5_moe :1412/:1254/:1121/:1960; qwen3_vl
# :860/:647/:252/:1259; qwen3_vl_moe :979/:702/:509/:1450): the module ``ct_vision_check`` asks the config about, as
# modelopt_exclusions.vision_quantized asks the ModelOpt list about ``visual.blocks.0.attn.qkv``
CT_VISION_PROBE: dict[str, str] = {t: "model.visual.blocks.0.attn.qkv" for t in (
    "qwen3_5_text", "qwen3_5_moe_text", "qwen3_vl_text", "qwen3_vl_moe_text")}


def ct_vision_check(spec: ModelSpec, cfg: CTConfig) -> None:
    """One-line InputError where ``cfg`` quantizes ``spec``'s vision tower (module docstring): its first block's QKV
    (``CT_VISION_PROBE``) resolved to a group, or, for a tower whose module names are not mapped, any ``Linear`` class
    or ``re:`` target (which may match its linears)."""
    probe = CT_VISION_PROBE.get(spec.model_type)
    if probe is None:
        if any(tg == "Linear" or tg.startswith("re:") for s in cfg.schemes for tg in s.targets):
            raise InputError(f"{spec.name}: compressed-tensors targets may quantize its vision tower, whose module "
                             f"names are not mapped for {spec.model_type} (modelled for "
                             f"{', '.join(sorted(CT_VISION_PROBE))}); only a 16-bit vision tower is modelled")
        return
    found = _resolve(cfg, probe)
    if found is not None:
        raise quantized_vision_refusal(spec.name, f"compressed-tensors config group {found.group!r} quantizes "
                                       f"{probe} (no ignore entry names it)", "an ignore entry 're:.*visual.*'")


def ct_module(spec: ModelSpec, t: Tensor, expert: int = 0) -> str | None:
    """The checkpoint module name of tensor ``t`` of ``spec`` (routed experts: expert ``expert``'s), or None where
    its family's names are not known (``CT_FAMILIES``)."""
    if t.component == "lm_head":
        return "lm_head"
    shexp = CT_FAMILIES.get(spec.model_type)
    path = _HF_MODULE.get(t.role)
    if shexp is None or path is None or t.layer < 0:
        return None
    return f"model.layers.{t.layer}." + path.format(j=expert, shexp=shexp)


def _matches(name: str, entry: str) -> bool:
    """compressed-tensors ``match_name`` (utils/match.py :422-445): ``re:`` + re.match, else the exact name."""
    if entry.startswith("re:"):
        return re.match(entry[3:], name) is not None
    return entry == name


def _match_rank(name: str, target: str) -> int | None:
    """``match_targets``' order (utils/match.py :116-151): 0 an exact name, 1 a ``re:`` pattern, 2 the class
    ``Linear`` (every quantizable matrix here is an ``nn.Linear``); None: no match."""
    if target == "Linear":
        return 2
    if _matches(name, target):
        return 1 if target.startswith("re:") else 0
    return None


def ct_scheme_of(spec: ModelSpec, cfg: CTConfig, t: Tensor) -> CTScheme | None:
    """The scheme that quantizes tensor ``t`` of ``spec`` under ``cfg``, or None where it stays in the checkpoint's
    dtype (module docstring). Raises a one-line InputError where the config names modules this model's tensors cannot
    be matched to (a family outside ``CT_FAMILIES`` with name targets or ignore entries), or quantizes the lm_head.
    Routed experts: every expert alike (expert 0 and the last matched; differing, refused)."""
    if not t.matrix or t.component in CT_KEPT:
        return None
    if t.component == "vision":
        ct_vision_check(spec, cfg)
        return None
    name = ct_module(spec, t)
    if name is None:
        only_class = all(tg == "Linear" for s in cfg.schemes for tg in s.targets)
        plain = all(e == "lm_head" for e in cfg.ignore)
        if only_class and plain and t.component != "lm_head":
            return _best(cfg, t.role)
        raise InputError(f"{spec.name}: compressed-tensors targets/ignore name modules, and the checkpoint names of "
                         f"{spec.model_type} tensor {t.role!r} are not known (modelled for "
                         f"{', '.join(sorted(CT_FAMILIES))})")
    found = _resolve(cfg, name)
    if t.component == "experts" and t.count > 1:
        last = _resolve(cfg, ct_module(spec, t, t.count - 1) or name)
        if last != found:
            raise InputError(f"{spec.name}: compressed-tensors quantizes the routed experts of layer {t.layer} "
                             "differently from one another: not modelled")
    if found is not None and t.component == "lm_head":
        raise InputError(f"{spec.name}: compressed-tensors ignore does not list lm_head, which config group "
                         f"{found.group!r} would quantize: a quantized lm_head is not modelled")
    return found


def _best(cfg: CTConfig, role: str) -> CTScheme | None:
    del role
    for s in cfg.schemes:
        if "Linear" in s.targets:
            return s
    return None


def _resolve(cfg: CTConfig, name: str) -> CTScheme | None:
    if any(_matches(name, e) for e in cfg.ignore):
        return None
    best: tuple[int, str, int] | None = None
    for i, s in enumerate(cfg.schemes):
        for tg in s.targets:
            r = _match_rank(name, tg)
            if r is not None and (best is None or (r, tg) < best[:2]):
                best = (r, tg, i)
    return None if best is None else cfg.schemes[best[2]]


def ct_matrix_bytes(s: CTScheme, out_f: int, in_f: int, scale_bytes: int) -> int:
    """Bytes the compressor stores for one N x K matrix (``out_f`` x ``in_f``) under scheme ``s`` (module docstring);
    ``scale_bytes``: the checkpoint dtype's element size, the scales' unless the scheme states a ``scale_dtype``.

    >>> w4 = CTScheme("g", ("Linear",), "pack-quantized", 4, "int", True, "group", 128, None, False, None, False, False,
    ...              False)
    >>> ct_matrix_bytes(w4, 4096, 4096, 2)  # 4096 * 512 * 4 + 4096 * 32 * 2 + 16
    8650768
    """
    n, k = out_f, in_f
    sb = s.scale_bytes or scale_bytes
    if s.strategy == "tensor":
        scales = 1
    elif s.strategy == "channel":
        scales = n
    elif s.strategy in ("group", "tensor_group"):
        scales = n * math.ceil(k / int(s.group_size or 1))
    else:
        br, bc = s.block or (1, 1)
        scales = math.ceil(n / br) * math.ceil(k / bc)
    if s.format == "nvfp4-pack-quantized":
        return (n * math.ceil(k / 2) + scales * (s.scale_bytes or 1) + NVFP4_GLOBAL_SCALE_BYTES
                + (NVFP4_GLOBAL_SCALE_BYTES if s.input_global else 0) + 4 * k * s.g_idx)
    total = scales * sb + s.input_static * sb + s.input_zero_point + 4 * k * s.g_idx
    if s.format == "pack-quantized":
        total += n * math.ceil(k * s.num_bits / 32) * 4 + WEIGHT_SHAPE_BYTES
        if not s.symmetric and s.strategy in ("group", "channel"):
            total += math.ceil(n * s.num_bits / 32) * 4 * (scales // n)
    else:
        total += n * k
        if not s.symmetric:
            total += scales
    return total

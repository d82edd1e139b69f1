"""LoRA / DoRA trainable parameters, exactly as PEFT creates them.

LoRA (Hu et al. 2021, arXiv 2106.09685, section 4.1, eq. 3) replaces W x by W x + (alpha/r) B A x with
A [r, in] and B [out, r]; only A and B are trained. PEFT's ``lora.Linear`` stores ``lora_A.weight`` [r, in]
and ``lora_B.weight`` [out, r] (peft/tuners/lora/layer.py ``update_layer``), so one adapted linear adds

    r x (in_features + out_features)                                                          (1)

parameters. An adapted embedding (``lora.Embedding``) stores ``lora_embedding_A`` [r, num_embeddings] and
``lora_embedding_B`` [embedding_dim, r]: r x (vocab + hidden). DoRA (Liu et al. 2024, arXiv 2402.09353, eq. 5)
adds a trained magnitude vector m with one entry per output feature (``lora_magnitude_vector``: out_features
for a linear, embedding_dim for an embedding). The alpha scaling has no memory effect.

Target names map onto tensor roles of ``formulas/tensors.py`` (``specs.training.LORA_TARGETS``): q/k/v/o ->
attn_q/attn_k/attn_v/attn_output; gate/up/down -> the dense MLP and shared-expert projections; embed ->
token_embd; lm_head -> output; in_proj -> a recurrent mixer's ssm_in; 'linear' -> every other nn.Linear PEFT's
'all-linear' adapts (routers, MLA and indexer projections, recurrent x/dt/out projections, the vision tower and
Qwen2.5-VL's patch merger). 'all-linear' names them all (``specs.training.ALL_LINEAR``); PEFT refuses it on the
Mamba model types of :data:`PEFT_MAMBA_REFUSED`, and so do we, naming the targets that work. A named target
also adapts the vision tower's linears whose module name is the one it names in the decoder (PEFT matches by
name suffix: :data:`VISION_MODULES`), e.g. Qwen2.5-VL's tower gate/up/down_proj, SigLIP's q/k/v_proj.

Routed experts: transformers 5 stores them as fused 3-D parameters (``gate_up_proj`` [E, 2I, H], ``down_proj``
[E, H, I]). For the model types transformers converts with the 'qwen2_moe' or 'mixtral' pattern
(``transformers.conversion_mapping._MODEL_TO_CONVERSION_PATTERN``: qwen3_moe, deepseek_v2/v3, olmoe, glm4_moe,
mixtral, ...) PEFT rewrites the gate/up/down targets into ``target_parameters`` on those experts
(peft/utils/transformers_weight_conversion.py ``_convert_peft_config_moe``): gate and up must be targeted
together and share one adapter of rank 2r on ``gate_up_proj``, down gets rank r, and each ``lora.ParamWrapper``
stores lora_A [r' E, in] and lora_B [out, r' E]:

    r' x E x (in_features + out_features)                                                    (2)

The rewritten names no longer match the dense MLP layers or shared experts of those models, which then stay
frozen; DoRA is not available on experts (``ParamWrapper`` rejects use_dora).

What such an adapter costs is not eq. (1)'s per-token x A B. ``ParamWrapper.forward`` (peft 0.21.2
tuners/lora/layer.py lines 2698-2712) runs the experts inside ``_activate_lora`` (lines 2572-2601), which registers
a torch parametrization W + (alpha/r) B A on the 3-D parameter (``_LoraFactorsProxy``, lines 2306-2324: one
``baddbmm`` over the E experts, the whole stack materialised) and removes it afterwards. So, per micro-step:

- the materialisation runs twice per forward: ``nn.utils.parametrize.register_parametrization`` (torch 2.13.0
  @cf30153c, torch/nn/utils/parametrize.py lines 643-645) builds a ``ParametrizationList`` whose consistency
  check evaluates the parametrization once (line 233, ``Z = self()``, unsafe=False: PEFT's call, layer.py line
  2594), then the experts read it once (cached); backward: two bmm for the gradients of B and A. A checkpointed
  layer's recomputed forward registers it again (two more evaluations). Per ParamWrapper of rank r'::

      D = (2 + 2 c + 2) x 2 E r' in out   FLOPs per micro-step   (c = 1 for a recomputed layer)       (3)

- per token, the k routed experts multiply by W + delta W, a tensor that requires grad, so autograd computes its
  weight gradient: 2 x (k / E) x E in out FLOPs per token and ParamWrapper on top of the frozen base's 4 per weight
  (formulas/training_time.py eq. (4')), while the adapters' own parameters do no per-token work.

Both measured on a real PEFT model of a tiny Qwen3-MoE on the CPU (tests/training/test_moe_lora_flops.py).

Fused linears (``ModelSpec.fused_qkv``: Falcon's and GPT-NeoX's ``query_key_value``, Phi-3's ``qkv_proj``,
GPT-BigCode's ``c_attn``; ``ModelSpec.fused_gate_up``: Phi-3's ``gate_up_proj``, Granite-4.0-H's
``shared_mlp.input_linear``): PEFT can only wrap the whole nn.Linear (peft 0.21.2 tuners/lora/model.py
``_create_new_module``, lines 499-560, hands the matched module to its dispatchers and raises "Target module ... is
not supported" for one none takes; tuners/lora/layer.py ``dispatch_default``, lines 2724-2767, wraps a torch.nn.Linear
whole in ``lora.Linear``), so targeting any of its parts adapts it once, with in = hidden and out = the sum of its
parts' out features in eq. (1): (heads + 2 kv_heads) x head_dim for q/k/v, 2 I for gate/up (roles ``attn_qkv``,
``ffn_gate_up``, ``ffn_shexp_gate_up``; each stands for its parts in :func:`adapted_roles`). Our target names are
roles: q, k, v (and gate, up) name the fused linear that holds them on such a model, as
``target_modules=['qkv_proj']`` (``['gate_up_proj']``) does in PEFT; the default q,k,v,o,gate,up,down therefore
adapts Phi-3's qkv_proj, o_proj, gate_up_proj and down_proj (:func:`fused_targets` names them in the estimate).

Granite-4.0-H's routed experts (transformers v5.24.0 modeling_granitemoehybrid.py ``GraniteMoeHybridExperts``,
lines 842-851: 3-D nn.Parameters ``gate_up_proj`` / ``down_proj``, no ParallelExperts module any more) are not
nn.Linear, so no dispatcher takes them (an explicit 'input_linear' suffix-matches only the shared MLP's, the experts
holding no such module), and PEFT's v5 conversion (peft utils/transformers_weight_conversion.py
``_MOE_TARGET_MODULE_MAPPING``, lines 332-345) knows only the 'mixtral' and 'qwen2_moe' patterns, not transformers'
'granitemoe' one: they stay frozen under every target list, 'all-linear' included.
"""


from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache, cached_property, lru_cache
from itertools import chain

from ..errors import FieldError, InputError
from ..specs import ModelSpec
from ..specs.training import LORA_TARGETS, normalize_targets
from .params import routed_share
from .tensors import Tensor, expand, layer_groups, model_tensors

# model types whose experts PEFT targets through the transformers v5 conversion (see module docstring)
# (transformers v5.24.0 conversion_mapping.py ``_MODEL_TO_CONVERSION_PATTERN``, lines 48-78: the model types mapped to
# 'mixtral' or 'qwen2_moe', deepseek_v32 among them; mixtral itself)
PEFT_EXPERT_CONVERSION = frozenset({
    "qwen3_moe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "olmoe", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa",
    "glm4v_moe", "ernie4_5_moe", "dots1", "hunyuan_v1_moe", "qwen3_next", "flex_olmo", "mixtral", "minimax",
    "minimax_m2", "afmoe", "longcat_flash", "solar_open", "mellum", "beam", "qwen3_omni_moe", "qwen3_omni_moe_thinker",
    "qwen3_omni_moe_text", "sarvam_mla", "exaone_moe", "cohere2_moe",
})


# model types whose MoE router is an nn.Parameter, not an nn.Linear, so 'all-linear' leaves it alone
# (transformers v5.24.0 modeling_gpt_oss.py GptOssTopKRouter line 123, modeling_qwen2_moe.py Qwen2MoeTopKRouter
# line 318, modeling_jamba.py JambaTopKRouter line 692, modeling_granitemoehybrid.py GraniteMoeHybridTopKRouter
# line 832, modeling_qwen3_vl_moe.py Qwen3VLMoeTextTopKRouter line 159, modeling_qwen3_5_moe.py Qwen3_5MoeTopKRouter
# line 900: ``self.weight = nn.Parameter(...)``)
PARAMETER_ROUTERS = frozenset({"gpt_oss", "qwen2_moe", "jamba", "granitemoehybrid", "qwen3_vl_moe", "qwen3_vl_moe_text",
                               "qwen3_5_moe_text"})
# model types on which PEFT refuses LoRA on a Mamba layer's out_proj and conv1d, so on 'all-linear' (peft 0.21.2
# tuners/tuners_utils.py ``_check_lora_target_modules_mamba``, lines 145-165: ``mamba_model_types``)
PEFT_MAMBA_REFUSED = frozenset({"falcon_h1", "mamba", "mamba2", "falcon_mamba", "nemotron_h"})


def _refuse_mamba_all_linear(spec: ModelSpec) -> None:
    """InputError for 'all-linear' on a model type PEFT refuses it for (:data:`PEFT_MAMBA_REFUSED`), naming the
    targets that work: the attention/MLP projections the model has and the Mamba layers' in_proj."""
    if spec.model_type not in PEFT_MAMBA_REFUSED:
        return
    roles = {t.role for t in model_tensors(spec)}
    works = [n for n in ("q", "k", "v", "o", "gate", "up", "down", "in_proj") if roles & set(LORA_TARGETS[n])]
    raise FieldError("targets", f"{spec.name}: PEFT refuses target_modules='all-linear' on {spec.model_type} (a "
                     f"Mamba layer's out_proj cannot take LoRA: peft tuners_utils.py "
                     f"_check_lora_target_modules_mamba); name the modules instead, e.g. targets "
                     f"{','.join(works)}")


@dataclass(frozen=True)
class AdaptedModule:
    """``count`` adapted modules of one role in one layer: in/out features of the frozen base weight."""

    role: str
    layer: int
    in_features: int
    out_features: int
    count: int = 1
    embedding: bool = False
    experts: int = 1  # > 1: a ParamWrapper adapter over a fused 3-D expert parameter (eq. 2)
    rank_mult: int = 1  # 2 for the fused gate_up_proj

    def at(self, layer: int) -> AdaptedModule:
        """The same module in layer ``layer`` (a layer of the same kind: formulas/tensors.py layer_groups): a copy
        with only ``layer`` changed, made without re-running ``__init__`` (a model has hundreds of these)."""
        new = object.__new__(AdaptedModule)
        new.__dict__.update(self.__dict__, layer=layer)
        return new


@dataclass(frozen=True)
class LoraParams:
    rank: int
    dora: bool
    layout: AdaptedLayout  # the adapted modules, grouped as the inventory is (adapted_layout)
    total: int  # trainable parameters (A + B [+ magnitude])
    by_target: dict[str, int] = field(default_factory=dict)
    experts_total: int = 0  # of total: the fused-expert ParamWrapper adapters' (eq. 2), no per-token work (eq. 3)

    @property
    def modules(self) -> tuple[AdaptedModule, ...]:
        """Every adapted module, layer by layer (:func:`adapted_modules`: the layout's, :attr:`AdaptedLayout.modules`)."""
        return self.layout.modules

    def module_shapes(self, m: AdaptedModule) -> list[tuple[int, ...]]:
        """Shapes of the tensors PEFT creates for one adapted module: lora_A, lora_B (and DoRA's magnitude)."""
        r = self.rank * m.rank_mult * m.experts
        out: list[tuple[int, ...]] = [(r, m.in_features), (m.out_features, r)]
        if self.dora and m.experts == 1:
            out.append((m.out_features,))
        return out

    def shapes(self) -> list[tuple[int, ...]]:
        """The shape of every trainable tensor PEFT creates (for exact optimizer-state counts)."""
        out: list[tuple[int, ...]] = []
        for m in self.modules:
            for _ in range(m.count):
                out += self.module_shapes(m)
        return out


FUSED_QKV_ROLES = ("attn_q", "attn_k", "attn_v")


@dataclass(frozen=True)
class FusedLinear:
    """One nn.Linear of transformers' module holding several tensor roles of ``formulas/tensors.py`` (module
    docstring, 'Fused linears'): its adapter's role, the roles it holds (their out features add up) and the module
    name PEFT matches."""

    role: str
    parts: tuple[str, ...]
    module: str


# the module name of each model type's fused linears (transformers v5.24.0: modeling_phi3.py Phi3Attention /
# Phi3MLP, modeling_gpt_bigcode.py GPTBigCodeAttention, modeling_gpt2.py GPT2Attention (Conv1D c_attn), modeling_falcon.py / modeling_gpt_neox.py / modeling_bloom.py
# query_key_value, modeling_granitemoehybrid.py GraniteMoeHybridMLP lines 762-763)
_QKV_MODULE = {"phi3": "qkv_proj", "gpt_bigcode": "c_attn", "gpt2": "c_attn"}  # else query_key_value
_GATE_UP_MODULE = {"phi3": "gate_up_proj", "granitemoehybrid": "shared_mlp.input_linear"}


def fused_linears(spec: ModelSpec) -> tuple[FusedLinear, ...]:
    """The fused linears of ``spec`` (``ModelSpec.fused_qkv`` / ``fused_gate_up``) that PEFT adapts whole."""
    out: list[FusedLinear] = []
    if spec.fused_qkv:
        out.append(FusedLinear("attn_qkv", FUSED_QKV_ROLES, _QKV_MODULE.get(spec.model_type, "query_key_value")))
    if spec.fused_gate_up:
        name = _GATE_UP_MODULE.get(spec.model_type, "gate_up_proj")
        out += [FusedLinear("ffn_gate_up", ("ffn_gate", "ffn_up"), name),
                FusedLinear("ffn_shexp_gate_up", ("ffn_shexp_gate", "ffn_shexp_up"), name)]
    return tuple(out)


FUSED_PARTS = {"attn_qkv": FUSED_QKV_ROLES, "ffn_gate_up": ("ffn_gate", "ffn_up"),
               "ffn_shexp_gate_up": ("ffn_shexp_gate", "ffn_shexp_up")}


def fused_targets(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[tuple[str, str], ...]:
    """(target names, module name) of each fused linear ``targets`` adapt whole on ``spec`` (('q,k,v', 'qkv_proj'),
    ...): what the estimate's LoRA assumption says about them."""
    roles = {m.role for m, _ in _alike_modules(spec, targets)}
    seen: dict[str, str] = {}
    for f in fused_linears(spec):
        if f.role in roles:
            seen.setdefault(f.module, _role_target(f.role) or f.role)
    return tuple((t, mod) for mod, t in seen.items())


# The vision tower under a named target list. PEFT matches a listed target against every module of the model, the
# vision tower's included: a module is adapted when its name equals the target or ends with "." + the target (peft
# 0.21.2 tuners/tuners_utils.py ``check_target_module_exists``, lines 2372-2376). Our target names are roles; on the
# multimodal models' decoders each names the module ``DECODER_MODULES`` gives (q_proj ... down_proj: the text models
# of Gemma 3, Qwen2.5-VL, Qwen3-VL, Mllama and Llama 4), so the tower's linears of that same name are adapted too.
# ``VISION_MODULES``: the module name of each tower linear role of formulas/tensors.py, per ``VisionSpec.encoder``
# (transformers v5.24.0): SigLIP modeling_siglip.py SiglipAttention lines 268-271 (q/k/v_proj, out_proj), SiglipMLP
# lines 315-316 (fc1, fc2); Qwen2.5-VL modeling_qwen2_5_vl.py Qwen2_5_VLVisionAttention lines 266-267 (qkv, proj),
# Qwen2_5_VLMLP lines 90-92 (gate/up/down_proj); Qwen3-VL modeling_qwen3_vl.py Qwen3VLVisionAttention lines
# 252-253 (qkv, proj), Qwen3VLVisionMLP lines 83-84 (linear_fc1, linear_fc2); Mllama modeling_mllama.py
# MllamaVisionAttention lines 246-249 (q/k/v/o_proj), MllamaVisionMLP lines 186-187 (fc1, fc2); Llama 4
# modeling_llama4.py Llama4VisionAttention lines 763-766 (q/k/v/o_proj), Llama4VisionMLP lines 816-817 (fc1, fc2).
# The projectors' linears (Qwen's merger mlp.0 / mlp.2 and linear_fc1/2, Mllama's multi_modal_projector, Llama 4's
# vision_adapter fc1/fc2 and linear_1) are held in ``v_projector`` and answer to 'linear' only: none is named as a
# decoder module is (Qwen3-VL's merger linear_fc1/2 share the tower MLP's names, which no decoder module has).
DECODER_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
                   "down": "down_proj"}
_QKV_O = {"v_attn_q": "q_proj", "v_attn_k": "k_proj", "v_attn_v": "v_proj"}
VISION_MODULES: dict[str, dict[str, str]] = {
    "siglip": {**_QKV_O, "v_attn_o": "out_proj", "v_ffn_up": "fc1", "v_ffn_down": "fc2"},
    "qwen2_5_vl": {"v_attn_qkv": "qkv", "v_attn_o": "proj", "v_ffn_gate": "gate_proj", "v_ffn_up": "up_proj",
                   "v_ffn_down": "down_proj"},
    "qwen3_vl": {"v_attn_qkv": "qkv", "v_attn_o": "proj", "v_ffn_up": "linear_fc1", "v_ffn_down": "linear_fc2"},
    "mllama": {**_QKV_O, "v_attn_o": "o_proj", "v_ffn_up": "fc1", "v_ffn_down": "fc2"},
    "llama4": {**_QKV_O, "v_attn_o": "o_proj", "v_ffn_up": "fc1", "v_ffn_down": "fc2"},
}
_TARGET_OF_MODULE = {m: t for t, m in DECODER_MODULES.items()}


@cache
def vision_role_targets(encoder: str) -> dict[str, str]:
    """Vision tower role -> the target name whose decoder module it shares a name with (PEFT adapts it under that
    target: ``VISION_MODULES``); the tower's other linears answer to 'linear' only."""
    return {role: _TARGET_OF_MODULE[mod] for role, mod in VISION_MODULES.get(encoder, {}).items()
            if mod in _TARGET_OF_MODULE}


def vision_targets(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[str, ...]:
    """The vision tower's module names that the named ``targets`` adapt on ``spec`` as well (PEFT's suffix match,
    ``VISION_MODULES``), in target order: what the estimate's LoRA assumption says about the tower. Empty under
    'all-linear' (which names the whole tower) and for a model without one."""
    wanted = normalize_targets(targets)
    if spec.vision is None or "linear" in wanted:
        return ()
    roles = vision_role_targets(spec.vision.encoder)
    return tuple(DECODER_MODULES[t] for t in wanted if t in roles.values())


# Gemma 4's towers wrap these projections in ``Gemma4ClippableLinear`` (an nn.Module holding an nn.Linear ``linear``:
# transformers v5.24.0 modeling_gemma4.py lines 167-176): vision q/k/v/o_proj (Gemma4VisionAttention, lines 905-908)
# and gate/up/down_proj (Gemma4VisionMLP, lines 693-695), audio q/k/v_proj (Gemma4AudioAttention, lines 266-268).
# A named target list matches them by suffix and PEFT refuses the module ("Target module Gemma4ClippableLinear ...
# is not supported": peft 0.21.2 tuners/lora/model.py ``_create_new_module``); its own default for gemma4 is a regex
# restricted to the language model (utils/constants.py line 102), which is what the count here is.
_GEMMA4_CLIPPABLE = {"vision": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                     "audio": ("q_proj", "k_proj", "v_proj")}


def peft_refused_towers(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[str, ...]:
    """The module names among the named ``targets`` that PEFT cannot wrap in Gemma 4's towers
    (``_GEMMA4_CLIPPABLE``): PEFT raises on such a target list; the count is the language model's."""
    g = spec.gemma4
    wanted = normalize_targets(targets)
    if g is None or "linear" in wanted:
        return ()
    names = {n for tower in ("vision", "audio") if getattr(g, tower) is not None for n in _GEMMA4_CLIPPABLE[tower]}
    return tuple(DECODER_MODULES[t] for t in wanted if DECODER_MODULES.get(t) in names)


# a T5 decoder layer's cross-attention (EncDecAttention) has modules named q, k, v, o like its self-attention: PEFT
# matches a target by the module name's last part (peft tuners/tuners_utils.py ``check_target_module_exists``; T5's
# default targets q and v, utils/constants.py), so it adapts both attentions (measured, PEFT 0.21.2:
# tests/training/test_t5_saved_tensors.py). Llama-3.2-Vision's cross-attention layers name theirs q_proj, k_proj,
# v_proj, o_proj as its self-attention does (transformers v5.24.0 modeling_mllama.py MllamaTextCrossAttention,
# lines 419-422), so the same targets adapt them (measured: tests/training/test_lora_vision_tower.py).
T5_CROSS_TARGET = {"cross_attn_q": "q", "cross_attn_k": "k", "cross_attn_v": "v", "cross_attn_o": "o"}


@cache
def _role_target(role: str) -> str | None:
    if role in ("ffn_exps_gate_up", "ffn_exps_down"):  # the fused-expert adapters of eq. (2)
        return "gate_up" if role.endswith("gate_up") else "down"
    if role in FUSED_PARTS:  # a fused linear's adapter (module docstring): the targets of its parts
        return ",".join(dict.fromkeys(t for p in FUSED_PARTS[role] if (t := _role_target(p)) is not None))
    for name, roles in LORA_TARGETS.items():
        if role in roles:
            return name
    return None


@dataclass(frozen=True)
class AdaptedLayout:
    """:func:`adapted_modules` grouped as the inventory is (formulas/tensors.py layer_groups): ``experts[i]`` and
    ``layers[i]`` are decoder layer i's fused-expert adapters and other adapted modules, one tuple object shared by
    the layers alike and holding the modules as the first of them has them (``layer`` = that layer's index; the
    other layers' are the same re-stamped, :meth:`AdaptedModule.at`); ``head`` / ``tail`` the modules before and
    after the decoder layers (the tied lm_head last)."""

    experts: tuple[tuple[AdaptedModule, ...], ...]
    head: tuple[AdaptedModule, ...]
    layers: tuple[tuple[AdaptedModule, ...], ...]
    tail: tuple[AdaptedModule, ...]

    @cached_property
    def modules(self) -> tuple[AdaptedModule, ...]:
        """:meth:`flat` as a tuple, expanded when first asked and kept with the layout (one per model and target
        set, ``adapted_layout``'s memo): not once per rank (``lora_params``, a settings memo)."""
        return tuple(self.flat())

    @cached_property
    def roles(self) -> frozenset[str]:
        """The roles of the adapted modules (kept with the layout, as :attr:`modules`)."""
        return frozenset(m.role for m in self.modules)

    @cached_property
    def first_layer(self) -> int | None:
        """The lowest decoder layer index holding an adapter (None: no decoder layer holds one)."""
        return min((m.layer for m in self.modules if m.layer >= 0), default=None)

    def flat(self) -> list[AdaptedModule]:
        """Every module in inventory order (the fused experts first, layer by layer), each with its own layer."""
        out: list[AdaptedModule] = []
        for part in (self.experts, self.layers):
            if part is self.layers:
                out += self.head
            for i, mods in enumerate(part):
                out += mods if not mods or mods[0].layer == i else [m.at(i) for m in mods]
        out += self.tail
        return out


@lru_cache(maxsize=256)
def adapted_layout(spec: ModelSpec, targets: tuple[str, ...] | str) -> AdaptedLayout:
    """The base weights LoRA adapts for ``targets`` (each a 2-D weight: out x in), grouped (:class:`AdaptedLayout`):
    a layer's modules depend on it only through its kind (tensors.layer_groups), so each kind is matched once."""
    wanted = set(normalize_targets(targets))
    experts: list[tuple[AdaptedModule, ...]] = [()] * len(spec.moe_layers)
    if spec.is_moe and spec.moe is not None and spec.model_type in PEFT_EXPERT_CONVERSION:
        exp = wanted & {"gate", "up", "down"}
        if spec.moe.expert_gated and len(exp & {"gate", "up"}) == 1:
            raise InputError(f"{spec.name}: PEFT fuses the experts' gate and up projections into gate_up_proj; "
                             "target both gate and up, or neither")
        e, h, i_e = spec.moe.num_experts, spec.hidden_size, spec.moe.expert_intermediate_size
        first: tuple[AdaptedModule, ...] | None = None
        for layer, is_moe in enumerate(spec.moe_layers):
            if not is_moe:
                continue
            if first is None:
                mods: list[AdaptedModule] = []
                if exp & {"gate", "up"}:
                    mods.append(AdaptedModule("ffn_exps_gate_up", layer, h, 2 * i_e, experts=e, rank_mult=2))
                if "down" in exp:
                    mods.append(AdaptedModule("ffn_exps_down", layer, i_e, h, experts=e))
                first = tuple(mods)
            experts[layer] = first
        wanted -= exp  # PEFT moves these names to target_parameters: dense MLPs / shared experts stay frozen
    # one adapter on each fused linear a target names (module docstring)
    fused = tuple(f for f in fused_linears(spec) if any(_role_target(p) in wanted for p in f.parts))
    if "linear" in wanted:
        _refuse_mamba_all_linear(spec)
        if spec.model_type in PARAMETER_ROUTERS:
            wanted = wanted - {"linear"} | {"linear-no-router"}
    head, groups, tail = layer_groups(spec)
    layers: list[tuple[AdaptedModule, ...]] = [()] * spec.num_layers
    for _kind, tensors, idx in groups:
        mods_k = tuple(_matched(tensors, wanted, fused, cross=True))
        for i in idx:
            layers[i] = mods_k
    after = _matched(expand(tail), wanted, vision=vision_role_targets(spec.vision.encoder) if spec.vision else None)
    v = spec.vision
    if wanted & {"linear", "linear-no-router"} and v is not None and v.encoder in ("qwen2_5_vl", "qwen3_vl"):
        # Qwen2.5-VL's patch merger (modeling_qwen2_5_vl.py Qwen2_5_VLPatchMerger): Linear(d m^2, d m^2), GELU,
        # Linear(d m^2, H); Qwen3-VL's merger and its DeepStack mergers, one per deepstack_visual_indexes entry
        # (transformers v5.24.0 modeling_qwen3_vl.py Qwen3VLVisionPatchMerger lines 171-179: linear_fc1 and
        # linear_fc2 of the same shapes; Qwen3VLVisionModel lines 648-660); held as one count in the inventory's
        # v_projector
        dm = v.hidden_size * v.spatial_merge_size ** 2
        # (deepstack_features counts the indexes before the last block: every one in the published configs)
        n = 1 + (v.deepstack_features if v.encoder == "qwen3_vl" else 0)
        after += [AdaptedModule("v_projector", -1, dm, dm, n), AdaptedModule("v_projector", -1, dm, spec.hidden_size, n)]
    if wanted & {"linear", "linear-no-router"} and v is not None and v.encoder == "mllama":
        # Mllama's multi_modal_projector: Linear(vision_output_dim, H) over the last hidden state and the
        # intermediate_features local-layer outputs concatenated (modeling_mllama.py lines 1285-1289; readers/
        # hf_llama_vision.py); held in the inventory's v_projector
        after.append(AdaptedModule("v_projector", -1, v.hidden_size * (1 + v.intermediate_features), spec.hidden_size))
    if "lm_head" in wanted and spec.tie_word_embeddings:
        # a tied lm_head is still a Linear module PEFT can wrap (its weight is the embedding)
        after.append(AdaptedModule("output", -1, spec.hidden_size, spec.vocab_size))
    return AdaptedLayout(tuple(experts), tuple(_matched(head, wanted)), tuple(layers), tuple(after))


@lru_cache(maxsize=256)
def adapted_modules(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[AdaptedModule, ...]:
    """The base weights LoRA adapts for ``targets`` (each a 2-D weight: out x in), in inventory order: the fused
    experts' adapters layer by layer, then the modules of the tensors before the decoder layers, each layer's, those
    after them (``formulas/tensors.py`` model_tensors); :func:`adapted_layout` expanded."""
    return adapted_layout(spec, targets).modules


def _matched(tensors: Iterable[Tensor], wanted: set[str], fused: tuple[FusedLinear, ...] = (),
             cross: bool = False, vision: dict[str, str] | None = None) -> list[AdaptedModule]:
    """The adapted modules of ``tensors`` whose target name is in ``wanted`` (2-D weights outside the fused
    experts); ``fused``: the fused linears a target names, one adapter each in place of their parts (in = their
    shared input, out = the sum of theirs); ``cross``: a T5 decoder's cross-attention answers to q/k/v/o
    (``T5_CROSS_TARGET``: T5's and Mllama's); ``vision``: the vision tower roles that answer to a named target as well as to 'linear'
    (:func:`vision_role_targets`)."""
    part_of = {p: f for f in fused for p in f.parts}
    if part_of:  # the out features of each fused linear, per layer: its parts' summed
        tensors = list(tensors)
        width: Counter[tuple[str, int]] = Counter()
        for role, comp, shape, _, layer, _ in tensors:
            if role in part_of and len(shape) == 2 and comp != "experts":
                width[part_of[role].role, layer] += shape[0]
        done: set[tuple[str, int]] = set()
    out: list[AdaptedModule] = []
    for role, comp, shape, count, layer, _ in tensors:
        if len(shape) != 2 or comp == "experts" or role.endswith(".bias"):
            continue
        if "linear-no-router" in wanted and role == "ffn_gate_inp":
            continue
        f = part_of.get(role)
        if f is not None:  # one adapter on the fused linear, where its first part is met (module docstring)
            if (f.role, layer) not in done:
                done.add((f.role, layer))
                out.append(AdaptedModule(f.role, layer, shape[1], width[f.role, layer], count))
            continue
        name = _role_target(role) or (T5_CROSS_TARGET.get(role) if cross else None)
        if vision and vision.get(role) in wanted:  # a tower linear named as a decoder module (VISION_MODULES)
            name = vision[role]
        if name == "linear" and "linear-no-router" in wanted:
            name = "linear-no-router"
        if name is None or name not in wanted:
            continue
        if role == "token_embd":  # nn.Embedding(V, h): weight [V, h] = (num_embeddings, embedding_dim)
            out.append(AdaptedModule(role, layer, shape[0], shape[1], count, embedding=True))
        else:
            out.append(AdaptedModule(role, layer, shape[1], shape[0], count))
    return out


@lru_cache(maxsize=256, typed=True)
def lora_params(spec: ModelSpec, rank: int, targets: tuple[str, ...] | str, dora: bool = False) -> LoraParams:
    """Exact trainable parameters of LoRA (or DoRA) with rank ``rank`` on ``targets`` (eq. 1 per module); memoized
    (the result is shared: read only).

    >>> from llmsizer.models import load_model
    >>> lora_params(load_model("llama-3.1-8b"), 16, "q,v").total
    6815744
    """
    if rank < 1:
        raise InputError(f"LoRA rank must be a positive integer, got {rank}")
    alike = _alike_modules(spec, targets)  # every adapted module has a kind: none when no module matches
    if not alike:
        raise InputError(f"{spec.name}: no module matches the LoRA targets {', '.join(normalize_targets(targets))}")
    if dora and any(m.experts > 1 for m, _ in alike):
        raise InputError(f"{spec.name}: DoRA cannot adapt routed experts (PEFT lora.ParamWrapper does not support "
                         "use_dora); target attention projections only")
    by: dict[str, int] = {}
    total = experts = 0
    vision = vision_role_targets(spec.vision.encoder) if spec.vision is not None else {}
    wanted = normalize_targets(targets)
    for m, k in alike:  # eq. (1) once per kind of module, times the modules of that kind (integers: exact)
        r = rank * m.rank_mult * m.experts
        n = k * m.count * (r * (m.in_features + m.out_features) + (m.out_features if dora else 0))
        name = _role_target(m.role) or T5_CROSS_TARGET.get(m.role, m.role)
        if vision.get(m.role) in wanted:  # a tower linear named as a decoder module (VISION_MODULES)
            name = vision[m.role]
        by[name] = by.get(name, 0) + n
        total += n
        experts += n if m.experts > 1 else 0
    return LoraParams(rank=rank, dora=dora, layout=adapted_layout(spec, targets), total=total, by_target=by,
                      experts_total=experts)


@dataclass(frozen=True)
class ExpertAdapterWork:
    """What the fused-expert adapters (ParamWrapper, eq. 2) of a LoRA run cost (eq. 3): ``grad_params`` base
    elements per token whose weight gradient autograd computes (k/E of each adapted expert stack:
    :func:`params.routed_share`), ``delta_flops`` FLOPs of one evaluation of every stack's W + B A per layer
    (``delta_by_layer[i]``: decoder layer i's, 0 where none)."""

    grad_params: float
    delta_by_layer: tuple[int, ...]

    def delta_flops_per_micro_step(self, recomputed: frozenset[int] | set[int] = frozenset()) -> int:
        """Eq. (3): two forward evaluations, two more in a ``recomputed`` layer, two backward bmm of the same
        size."""
        return sum(d * (6 if i in recomputed else 4) for i, d in enumerate(self.delta_by_layer) if d)


@lru_cache(maxsize=256, typed=True)
def expert_adapter_work(spec: ModelSpec, rank: int, targets: tuple[str, ...] | str) -> ExpertAdapterWork:
    """Eq. (3) for LoRA of rank ``rank`` on ``targets``: none for a model whose experts take no adapter."""
    lay = adapted_layout(spec, targets)
    elements = 0
    by_layer: list[int] = []
    for mods in lay.experts:
        d = 0
        for m in mods:
            elements += m.count * m.experts * m.in_features * m.out_features
            d += m.count * 2 * m.experts * rank * m.rank_mult * m.in_features * m.out_features
        by_layer.append(d)
    return ExpertAdapterWork(elements * routed_share(spec), tuple(by_layer))


def rank_ceiling(layout: AdaptedLayout) -> tuple[int, str] | None:
    """(ceiling, target) of the adapted module of ``layout`` whose update saturates first, or None for none. The update of
    one module is delta W = B A with B [out, r] and A [r, in] (eq. 1), so rank(delta W) <= min(r, in, out) (Hu et
    al. 2021, arXiv 2106.09685, sec. 4.1: r << min(in, out) is the method's premise): a rank above min(in, out) is
    capped in effect and its extra rows of A and columns of B are trained parameters that add nothing. The ceiling
    is in units of the LoRA rank r: the fused experts' gate_up adapter has rank 2 r (``rank_mult``, eq. 2), so its
    ceiling is min(in, out) // 2; each expert's own matrix bounds its share (eq. 2 stacks E adapters of rank r')."""
    best: tuple[int, str] | None = None
    # each group once (the layers alike share one tuple, taken once by its identity: no hash of its modules; an equal
    # tuple met again cannot lower the ceiling found): the layer index does not change a module's features
    for m in chain(*layout.experts, layout.head, *dict(zip(map(id, layout.layers), layout.layers, strict=True)).values(),
                   layout.tail):
        ceiling = min(m.in_features, m.out_features) // m.rank_mult
        if best is None or ceiling < best[0]:
            best = (ceiling, _role_target(m.role) or T5_CROSS_TARGET.get(m.role, m.role))
    return best


@lru_cache(maxsize=256, typed=True)
def _alike_modules(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[tuple[AdaptedModule, int], ...]:
    """The modules of :func:`adapted_modules` that eq. (1) counts alike (role, features, count, experts, rank
    multiple: the layer apart), each once with how many there are, in first-seen order (a model's L identical layers
    give one entry per role). Per model: independent of the rank (read only). Counted on :func:`adapted_layout`:
    each shared tuple of modules once, times the layers holding it (the same first-seen order: a tuple's first
    layer is where its modules are first seen)."""
    lay = adapted_layout(spec, targets)
    parts = (*lay.experts, lay.head, *lay.layers, lay.tail)
    times = Counter(map(id, parts))  # layers holding each shared tuple, in the order the tuples first appear
    shared = dict(zip(map(id, parts), parts, strict=True))
    out: dict[tuple[object, ...], list[object]] = {}
    for key, n in times.items():
        for m in shared[key]:
            sig = (m.role, m.in_features, m.out_features, m.count, m.experts, m.rank_mult)
            hit = out.get(sig)
            if hit is None:
                out[sig] = [m, n]
            else:
                hit[1] += n  # type: ignore[operator]
    return tuple((m, k) for m, k in out.values())  # type: ignore[misc]


@lru_cache(maxsize=256, typed=True)
def adapted_roles(spec: ModelSpec, targets: tuple[str, ...] | str) -> frozenset[str]:
    """The roles of the modules LoRA adapts for ``targets`` (:func:`adapted_modules`; per model and target set); a
    fused linear's adapter stands for the roles it covers (``FUSED_PARTS``)."""
    roles = {m.role for m, _ in _alike_modules(spec, targets)}
    for fused, parts in FUSED_PARTS.items():
        if fused in roles:
            roles = (roles - {fused}) | set(parts)
    return frozenset(roles)


def adapted_roles_by_layer(mods: tuple[AdaptedModule, ...]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for m in mods:
        out.setdefault(m.layer, set()).add(m.role)
    return out


def any_quantizable(spec: ModelSpec) -> bool:
    """Whether :func:`quantizable_tensors` is non-empty (stops at the first match): the inventory's tensors before
    the layers, one layer of each kind (tensors.layer_groups: the others hold the same tensors) and those after."""
    head, groups, tail = layer_groups(spec)
    return any(t.matrix and t.component not in ("embedding", "lm_head", "vision", "per_layer_embedding") and not t.role.endswith(".bias")
               for t in chain(head, chain.from_iterable(g[1] for g in groups), chain.from_iterable(s[0] for s in tail)))


def quantizable_tensors(spec: ModelSpec) -> list[Tensor]:
    """The linears bitsandbytes 4-bit quantizes for QLoRA: every decoder/projection matrix except embeddings and
    lm_head (transformers ``get_keys_to_not_convert`` keeps lm_head; embeddings are not nn.Linear)."""
    return [t for t in model_tensors(spec)
            if t.matrix and t.component not in ("embedding", "lm_head", "vision", "per_layer_embedding") and not t.role.endswith(".bias")]


# ---- a serving engine's adapter slots on one tensor-parallel rank (eq. 4) ----
# Row-parallel linears (input split over the TP ranks, output whole): attention output and the MLP / expert down
# projections; every other adapted linear of the decoder is column-parallel (output split, input whole).
ROW_PARALLEL_ROLES = frozenset({"attn_output", "cross_attn_o", "v_attn_o", "ffn_down", "ffn_exps_down",
                                "ffn_shexp_down", "v_ffn_down"})
_KV_ROLES = frozenset({"attn_k", "attn_v", "cross_attn_k", "cross_attn_v", "v_attn_k", "v_attn_v"})


def serving_slot_params(modules: Iterable[AdaptedModule], rank: int, tp: int, kv_heads: int, heads: int,
                        replicate_kv_heads: bool = True, fully_sharded: bool = False) -> Fraction:
    """Elements of one adapter slot that one of ``tp`` tensor-parallel ranks holds for ``modules`` (eq. 4).

    vLLM 0.19.1 (vllm/lora/layers/base_linear.py ``create_lora_weights``, lines 43-86;
    column_parallel_linear.py ``MergedColumnParallelLinearWithLoRA.create_lora_weights``, lines 209-236;
    row_parallel_linear.py lines 27-28; fused_moe.py ``_create_lora_a_weights`` / ``_create_lora_b_weights``,
    lines 353-411) stacks, per slot, lora_a [rank, input] and lora_b [output, rank] per slice, sized by the base
    layer's kind on the rank:

        column-parallel (q, k, v, gate, up; fused qkv / gate_up):  A = s r in        B = r out / TP
        row-parallel (o, down):                                    A = r in / TP     B = r out            (4)

    times the module's experts (all ``local_num_experts`` of a rank without expert parallelism). ``s`` is the
    slices sharing one input (``rank_mult``: 2 for the fused experts' gate and up, whose two lora_a each span the
    hidden size). K and V keep max(1, kv_heads / TP) heads per rank (vllm/model_executor/layers/linear.py
    ``QKVParallelLinear``, lines 1011-1017: heads replicated when TP exceeds them; ``replicate_kv_heads``). vLLM's
    ``--fully-sharded-loras`` (vllm/config/lora.py line 36, default False) also splits a column layer's lora_a over
    the rank (r / TP) and a row layer's lora_b over the output (out / TP) (the ``*WithShardedLoRA`` layers, S-LoRA,
    Sheng et al. 2023, arXiv 2311.03285). SGLang 0.5.23 (srt/lora/mem_pool.py ``get_lora_A_shape`` /
    ``get_lora_B_shape``, lines 111-152; utils.py line 134 ``ROW_PARALLELISM_LINEAR_LORA_NAMES = ["o_proj",
    "down_proj"]``) follows the same two rows and divides the whole qkv output by TP (``replicate_kv_heads`` False);
    it has no fully sharded option. Exact (a Fraction: the engines' own divisions are exact on a served layout).

    >>> from llmsizer.models import load_model
    >>> from llmsizer.specs.training import DECODER_LINEAR
    >>> s = load_model("llama-3.1-8b")
    >>> serving_slot_params(adapted_modules(s, DECODER_LINEAR), 16, 1, s.num_kv_heads, s.num_heads) \\
    ...     == lora_params(s, 16, DECODER_LINEAR).total
    True
    """
    total = Fraction(0)
    kv_rank = Fraction(max(1, kv_heads // tp)) if replicate_kv_heads and tp > kv_heads else Fraction(kv_heads, tp)
    for m in modules:
        a_in, b_out = Fraction(m.rank_mult * rank * m.in_features), Fraction(rank * m.out_features)
        if m.role in ROW_PARALLEL_ROLES:
            a_in /= tp
            if fully_sharded:
                b_out /= tp
        else:
            if fully_sharded:
                a_in /= tp
            if m.role in _KV_ROLES:  # out = kv_heads x head_dim: the rank's kv heads
                b_out = b_out / kv_heads * kv_rank
            elif m.role == "attn_qkv":  # (heads + 2 kv_heads) x head_dim: the rank's q heads + 2 x its kv heads
                per_head = b_out / (heads + 2 * kv_heads)
                b_out = per_head * (Fraction(heads, tp) + 2 * kv_rank)
            else:
                b_out /= tp
        total += m.count * m.experts * (a_in + b_out)
    return total

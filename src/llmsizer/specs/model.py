"""ModelSpec: the architecture of a model, as typed numbers. No I/O, no defaults guessed here.

Readers (``llmsizer.readers``) build a ModelSpec from a config.json, a GGUF header or manual fields;
formulas only ever see this object. Field names follow ``docs/nomenclature.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import InputError
from ..numbers import (
    EXPERTS,
    EXPERTS_OR_ZERO,
    HEADS,
    LAYERS,
    PIXELS,
    TOKENS,
    TOKENS_OR_ZERO,
    VOCAB,
    WIDTH,
    WIDTH_OR_ZERO,
    Range,
    check_number,
)

LayerKind = Literal["full", "sliding"]
NormKind = Literal["rmsnorm", "layernorm"]


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1, eqs. 9-19)."""

    q_lora_rank: int | None  # None: queries use a full q_proj (DeepSeek-V2-Lite)
    kv_lora_rank: int  # d_c, the compressed KV latent
    qk_nope_head_dim: int
    qk_rope_head_dim: int  # d_h^R, the decoupled rotary key shared by all heads
    v_head_dim: int


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts feed-forward blocks (Shazeer et al. 2017; DeepSeekMoE arXiv 2401.06066)."""

    num_experts: int  # routed experts per MoE layer
    experts_per_token: int  # top-k routed experts each token visits
    expert_intermediate_size: int
    shared_intermediate_size: int = 0  # total intermediate size of the always-active shared MLP (0: none)
    shared_expert_gate: bool = False  # Qwen2-MoE: sigmoid gate H -> 1 on the shared expert
    router_bias: bool = False  # gpt-oss router has a bias
    expert_bias: bool = False  # gpt-oss experts carry biases
    expert_gated: bool = True  # SwiGLU experts (gate + up + down)


@dataclass(frozen=True)
class VisionSpec:
    """A ViT/SigLIP-style image encoder attached to a multimodal LM (Dosovitskiy et al. 2021)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    image_size: int
    patch_size: int
    num_channels: int = 3
    projector_params: int = 0  # parameters of the vision->text projector (computed by the reader)


@dataclass(frozen=True)
class FileWeights:
    """Exact weight storage read from files (safetensors headers or a GGUF tensor table).

    ``by_dtype`` maps the stored dtype/type name ('BF16', 'F8_E4M3', 'Q4_K', ...) to bytes;
    ``layer_bytes`` gives the bytes of each decoder layer when the tensor names reveal it; of these,
    ``layer_expert_bytes`` are routed-expert tensors (GGUF ``ffn_*_exps``, which ``--n-cpu-moe`` keeps in host
    memory) and ``layer_matrix_bytes`` other 2-D matrices (what llama.cpp's row split spreads over GPUs).
    """

    path: str
    total_bytes: int
    params: int  # elements as stored (packed formats count stored elements; see ``note``)
    by_dtype: tuple[tuple[str, int], ...]
    layer_bytes: tuple[int, ...] = ()
    embedding_bytes: int = 0
    layer_expert_bytes: tuple[int, ...] = ()
    layer_matrix_bytes: tuple[int, ...] = ()
    output_bytes: int = 0
    note: str = ""


# ModelSpec fields that are numbers, and their documented ranges (llmsizer.numbers)
_FIELD_RANGES: tuple[tuple[str, Range], ...] = (
    ("vocab_size", VOCAB), ("hidden_size", WIDTH), ("num_layers", LAYERS), ("num_heads", HEADS),
    ("num_kv_heads", HEADS), ("head_dim", WIDTH), ("intermediate_size", WIDTH_OR_ZERO),
    ("position_embeddings", TOKENS_OR_ZERO), ("norms_per_layer", Range(0, 16, True, "norms in one decoder layer")),
    ("sliding_window", TOKENS_OR_ZERO), ("max_position_embeddings", TOKENS),
)
_OPTIONAL = {"sliding_window", "max_position_embeddings"}
_SUB_RANGES: dict[str, Range] = {
    "num_experts": EXPERTS_OR_ZERO, "experts_per_token": EXPERTS, "expert_intermediate_size": WIDTH_OR_ZERO,
    "shared_intermediate_size": WIDTH_OR_ZERO,
    "q_lora_rank": WIDTH, "kv_lora_rank": WIDTH, "qk_nope_head_dim": WIDTH, "qk_rope_head_dim": WIDTH_OR_ZERO,
    "v_head_dim": WIDTH,
    "hidden_size": WIDTH, "intermediate_size": WIDTH, "num_layers": LAYERS, "image_size": PIXELS,
    "patch_size": PIXELS, "num_channels": PIXELS,
}


def _check_sub(sub: MoESpec | MLASpec | VisionSpec, where: str) -> None:
    """The numeric fields of an MoE / MLA / vision part through ``check_number`` (None: absent, e.g. q_lora_rank)."""
    for fname, rng in _SUB_RANGES.items():
        v = getattr(sub, fname, None)
        if v is not None:
            check_number(v, f"{type(sub).__name__}.{fname}", rng, where)


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """Decoder-only transformer architecture.

    ``layer_types[i]`` says whether layer *i* attends globally ("full") or within ``sliding_window``
    tokens ("sliding"); ``moe_layers[i]`` says whether layer *i* has an MoE feed-forward block.
    Identity-hashed (``eq=False``) so derived results can be cached per spec.
    """

    name: str
    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tie_word_embeddings: bool = False
    mlp_gated: bool = True
    mlp_bias: bool = False
    attention_qkv_bias: bool = False
    attention_out_bias: bool = False
    qk_norm: Literal["none", "per_head", "full"] = "none"  # RMSNorm on q and k: over head_dim, or over all heads
    position_embeddings: int = 0  # learned absolute position table rows (GPT-2 style); 0 for rotary models
    norm_kind: NormKind = "rmsnorm"
    norms_per_layer: int = 2
    attention_sinks: bool = False
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    moe_layers: tuple[bool, ...] = ()
    layer_types: tuple[LayerKind, ...] = ()
    sliding_window: int | None = None
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None
    quantization: tuple[tuple[str, Any], ...] = ()
    vision: VisionSpec | None = None
    file_weights: FileWeights | None = None
    published_params: int | None = None
    published_active_params: int | None = None
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # every size through the one number-validation layer (llmsizer.numbers), before any per-layer tuple exists
        where = f"model {self.name!r}"
        for fname, rng in _FIELD_RANGES:
            v = getattr(self, fname)
            if v is None and fname in _OPTIONAL:
                continue
            object.__setattr__(self, fname, check_number(v, fname, rng, where))
        if self.num_heads % self.num_kv_heads != 0:
            raise InputError(
                f"model {self.name!r}: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        for sub in (self.moe, self.mla, self.vision):
            if sub is not None:
                _check_sub(sub, where)
        if self.moe is not None and self.moe.num_experts and self.moe.experts_per_token > self.moe.num_experts:
            raise InputError(f"model {self.name!r}: experts_per_token ({self.moe.experts_per_token}) exceeds "
                             f"num_experts ({self.moe.num_experts})")
        for fname in ("layer_types", "moe_layers"):
            v = getattr(self, fname)
            if not isinstance(v, tuple) or len(v) not in (0, self.num_layers):
                raise InputError(f"model {self.name!r}: {fname} must have one entry per layer ({self.num_layers})")
        if not self.layer_types:
            object.__setattr__(self, "layer_types", ("full",) * self.num_layers)
        if not self.moe_layers:
            object.__setattr__(self, "moe_layers", (self.moe is not None,) * self.num_layers)
        if len(self.layer_types) != self.num_layers or len(self.moe_layers) != self.num_layers:
            raise InputError(
                f"model {self.name!r}: layer_types/moe_layers must have one entry per layer ({self.num_layers})"
            )
        if "sliding" in self.layer_types and not self.sliding_window:
            raise InputError(f"model {self.name!r}: sliding layers need a sliding_window")

    @property
    def quantization_config(self) -> dict[str, Any]:
        return dict(self.quantization)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(self.moe_layers)

    @property
    def attention_kind(self) -> str:
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"

"""ModelSpec: the architecture of a model, as typed numbers. No I/O, no defaults guessed here.

Readers (``llmsizer.readers``) build a ModelSpec from a config.json, a GGUF header or manual fields;
formulas only ever see this object. Field names follow ``docs/nomenclature.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import InputError

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
    ``layer_bytes`` gives the bytes of each decoder layer when the tensor names reveal it.
    """

    path: str
    total_bytes: int
    params: int  # elements as stored (packed formats count stored elements; see ``note``)
    by_dtype: tuple[tuple[str, int], ...]
    layer_bytes: tuple[int, ...] = ()
    embedding_bytes: int = 0
    output_bytes: int = 0
    note: str = ""


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
        for fname in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            v = getattr(self, fname)
            if not isinstance(v, int) or v <= 0:
                raise InputError(f"model {self.name!r}: {fname} must be a positive integer, got {v!r}")
        if self.num_layers > 10_000 or self.hidden_size > 1_000_000 or self.vocab_size > 100_000_000:
            raise InputError(f"model {self.name!r}: implausible size (layers {self.num_layers}, hidden "
                             f"{self.hidden_size}, vocab {self.vocab_size}); is the config corrupt?")
        if self.intermediate_size < 0:
            raise InputError(f"model {self.name!r}: intermediate_size must not be negative")
        if self.num_heads % self.num_kv_heads != 0:
            raise InputError(
                f"model {self.name!r}: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
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

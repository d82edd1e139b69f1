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
attn_q/attn_k/attn_v/attn_output; gate/up/down -> the dense MLP and shared-expert projections (PEFT matches
``*.gate_proj`` etc.; transformers 5 stores routed experts as fused 3-D parameters that ``target_modules`` does
not match, so routed experts stay frozen); embed -> token_embd; lm_head -> output. Vision-tower linears are
never matched by these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..specs import ModelSpec
from ..specs.training import LORA_TARGETS, normalize_targets
from .tensors import Tensor, model_tensors


@dataclass(frozen=True)
class AdaptedModule:
    """``count`` adapted modules of one role in one layer: in/out features of the frozen base weight."""

    role: str
    layer: int
    in_features: int
    out_features: int
    count: int = 1
    embedding: bool = False


@dataclass(frozen=True)
class LoraParams:
    rank: int
    dora: bool
    modules: tuple[AdaptedModule, ...]
    total: int  # trainable parameters (A + B [+ magnitude])
    by_target: dict[str, int] = field(default_factory=dict)

    def shapes(self) -> list[tuple[int, ...]]:
        """The shape of every trainable tensor PEFT creates (for exact optimizer-state counts)."""
        out: list[tuple[int, ...]] = []
        for m in self.modules:
            for _ in range(m.count):
                out += [(self.rank, m.in_features), (m.out_features, self.rank)]
                if self.dora:
                    out.append((m.out_features,))
        return out


def _role_target(role: str) -> str | None:
    for name, roles in LORA_TARGETS.items():
        if role in roles:
            return name
    return None


def adapted_modules(spec: ModelSpec, targets: tuple[str, ...] | str) -> tuple[AdaptedModule, ...]:
    """The base weights LoRA adapts for ``targets`` (each a 2-D weight: out x in)."""
    wanted = set(normalize_targets(targets))
    out: list[AdaptedModule] = []
    for t in model_tensors(spec):
        if t.role.endswith(".bias") or len(t.shape) != 2 or t.component == "vision":
            continue
        name = _role_target(t.role)
        if name is None or name not in wanted:
            continue
        if t.role == "token_embd":  # nn.Embedding(V, h): weight [V, h] = (num_embeddings, embedding_dim)
            out.append(AdaptedModule(t.role, t.layer, t.shape[0], t.shape[1], t.count, embedding=True))
        else:
            out.append(AdaptedModule(t.role, t.layer, t.shape[1], t.shape[0], t.count))
    if "lm_head" in wanted and spec.tie_word_embeddings:
        # a tied lm_head is still a Linear module PEFT can wrap (its weight is the embedding)
        out.append(AdaptedModule("output", -1, spec.hidden_size, spec.vocab_size))
    return tuple(out)


def lora_params(spec: ModelSpec, rank: int, targets: tuple[str, ...] | str, dora: bool = False) -> LoraParams:
    """Exact trainable parameters of LoRA (or DoRA) with rank ``rank`` on ``targets`` (eq. 1 per module).

    >>> from llmsizer.models import load_model
    >>> lora_params(load_model("llama-3.1-8b"), 16, "q,v").total
    6815744
    """
    if rank < 1:
        raise InputError(f"LoRA rank must be a positive integer, got {rank}")
    mods = adapted_modules(spec, targets)
    if not mods:
        raise InputError(f"{spec.name}: no module matches the LoRA targets {', '.join(normalize_targets(targets))}")
    by: dict[str, int] = {}
    total = 0
    for m in mods:
        n = m.count * (rank * (m.in_features + m.out_features) + (m.out_features if dora else 0))
        name = _role_target(m.role) or m.role
        by[name] = by.get(name, 0) + n
        total += n
    return LoraParams(rank=rank, dora=dora, modules=mods, total=total, by_target=by)


def adapted_roles_by_layer(mods: tuple[AdaptedModule, ...]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for m in mods:
        out.setdefault(m.layer, set()).add(m.role)
    return out


def quantizable_tensors(spec: ModelSpec) -> list[Tensor]:
    """The linears bitsandbytes 4-bit quantizes for QLoRA: every decoder/projection matrix except embeddings and
    lm_head (transformers ``get_keys_to_not_convert`` keeps lm_head; embeddings are not nn.Linear)."""
    return [t for t in model_tensors(spec)
            if t.matrix and t.component not in ("embedding", "lm_head", "vision") and not t.role.endswith(".bias")]

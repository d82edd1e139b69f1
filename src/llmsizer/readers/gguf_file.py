"""A GGUF file -> ModelSpec with the exact bytes of every stored tensor (metadata and tensor table only).

GGUF layout (ggml ``docs/gguf.md``, versions 2 and 3): magic ``GGUF``, version (u32), tensor count and
metadata count (u64), metadata key/value pairs, tensor infos (name, dims in ggml order with ``ne[0]``
innermost, ggml type id, offset), padding to ``general.alignment`` (default 32), then the tensor data.
:func:`gguf_header.read_gguf_header` parses it in pure Python over a memory map.

Metadata keys are gguf-py ``constants.Keys`` (``{arch}.block_count``, ``{arch}.attention.head_count_kv``
...); tensor names are ``constants.TENSOR_NAMES`` (``token_embd``, ``blk.{N}.attn_q``, ``output``). A
value the metadata lacks is derived from tensor shapes and named in ``spec.notes``. Layer patterns
follow llama.cpp ``llama_hparams::set_swa_pattern`` (layer *i* slides when ``i % n < n - 1``) with the
per-architecture ``n`` of ``src/llama-model.cpp`` (gemma2: 2, gemma3: 6, gpt-oss: 2). Split files
(``name-00001-of-00003.gguf``, gguf-split) are read part by part; the metadata is in part 1.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelFileError, UnsupportedArchitectureError
from ..formulas.params import count_params
from ..numbers import (
    EXPERTS,
    EXPERTS_OR_ZERO,
    HEADS,
    LAYERS,
    TOKENS,
    TOKENS_OR_ZERO,
    VOCAB,
    WIDTH,
    WIDTH_OR_ZERO,
    Range,
    check_number,
)
from ..specs import MLASpec, ModelSpec, MoESpec
from . import gguf_parallel
from .gguf_header import GGUFHeader, LongArray, StringArray, read_gguf_header
from .hf_config import TRANSFORMERS_LAYOUT
from .hf_parallel import parallel_spec
from .safe_io import shown
from .safetensors_header import Role, TensorInfo, summarize

# GGUF general.architecture -> the transformers model_type the spec follows
ARCHITECTURES: dict[str, str] = {
    "llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe",
    "gemma2": "gemma2", "gemma3": "gemma3_text", "phi3": "phi3", "deepseek2": "deepseek_v2", "gpt-oss": "gpt_oss",
    **gguf_parallel.ARCHITECTURES,  # falcon, phi2, gptneox: read through readers/hf_parallel.py
}
SUPPORTED_ARCHITECTURES = tuple(sorted(ARCHITECTURES))
SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}  # llama.cpp src/llama-model.cpp load_hparams
NORM_ROLES = ("attn_norm", "attn_norm_2", "ffn_norm", "post_attention_norm", "post_ffw_norm", "layer_output_norm")
NON_PARAMETER = ("rope_freqs", "rope_factors_long", "rope_factors_short", "exp_probs_b")
# Tensors named without a layer that llama.cpp creates inside its layer loop, layer 0's as the tensor and every
# other layer's TENSOR_DUPLICATED (src/models/llama.cpp:62-66 at ggml-org/llama.cpp@0c1e57098, as vendored by
# llama-cpp-python 0.3.36; the same in llama4, exaone4, granite-hybrid, deci, minicpm...): LLM_TENSOR_LAYER_REPEATING
# (src/llama-arch.cpp:743-745), so each goes to its layer's buffer type (src/llama-model.cpp:1963-1966, dev_layer.at(bid))
# and a duplicate is skipped only when that buffer type already holds one (src/llama-model-loader.cpp:1370-1376):
# one copy on each device holding layers
PER_LAYER_DEVICE = ("rope_freqs", "rope_factors_long", "rope_factors_short")
FILE_TYPE_DTYPE = {0: "float32", 1: "float16", 32: "bfloat16"}  # llama_ftype ALL_F32, MOSTLY_F16, MOSTLY_BF16
_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_BLK = re.compile(r"^blk\.(\d+)\.")
MAX_SPLIT_PARTS = 99_999  # gguf-split numbers the parts with five digits ('-00001-of-00003')
# Every integer metadata key the reader uses and its documented range (llmsizer.numbers), checked when read.
KEY_RANGES: dict[str, Range] = {
    "{arch}.block_count": LAYERS, "{arch}.embedding_length": WIDTH, "{arch}.feed_forward_length": WIDTH_OR_ZERO,
    "{arch}.attention.head_count": HEADS, "{arch}.attention.head_count_kv": HEADS,
    "{arch}.attention.key_length": WIDTH, "{arch}.attention.value_length": WIDTH,
    "{arch}.attention.key_length_mla": WIDTH, "{arch}.attention.value_length_mla": WIDTH,
    "{arch}.attention.q_lora_rank": WIDTH_OR_ZERO, "{arch}.attention.kv_lora_rank": WIDTH,
    "{arch}.attention.sliding_window": TOKENS_OR_ZERO, "{arch}.context_length": TOKENS,
    "{arch}.rope.dimension_count": WIDTH, "{arch}.vocab_size": VOCAB,
    "{arch}.expert_count": EXPERTS_OR_ZERO, "{arch}.expert_used_count": EXPERTS,
    "{arch}.expert_feed_forward_length": WIDTH_OR_ZERO, "{arch}.expert_shared_count": EXPERTS_OR_ZERO,
    "{arch}.expert_shared_feed_forward_length": WIDTH_OR_ZERO,
    "{arch}.expert_gating_func": Range(0, 255, True, "llama_expert_gating_func_type id"),
    "general.file_type": Range(0, 1023, True, "llama_ftype id"),
    "split.count": Range(1, MAX_SPLIT_PARTS, True, "gguf-split numbers its parts with five digits"),
    "split.tensors.count": Range(0, 2**20, True, "tensors of all parts (gguf_header.MAX_TENSORS per part)"),
}


class _Meta:
    """Typed access to the metadata of the first part; every miss names the file and the key."""

    def __init__(self, header: GGUFHeader) -> None:
        self.path, self.values = header.path, header.metadata
        arch = self.values.get("general.architecture")
        self.arch = arch if isinstance(arch, str) else ""

    def key(self, key: str) -> str:
        return key.replace("{arch}", self.arch)

    def get(self, key: str, required: bool = False) -> Any:
        full = self.key(key)
        if full not in self.values:
            if required:
                raise ModelFileError(f"{self.path}: missing metadata key '{full}'")
            return None
        return self.values[full]

    def length(self, key: str) -> int | None:
        """Number of elements of an array value."""
        v = self.values.get(self.key(key))
        if isinstance(v, (StringArray, LongArray)):
            return v.count
        return len(v) if isinstance(v, list) else None

    def int_(self, key: str, required: bool = False) -> int | None:
        """An integer value in the key's range (KEY_RANGES); a per-layer array is accepted when all entries agree."""
        v = self.get(key, required)
        try:
            return self._int(key, v, required)
        except InputError as e:  # a number out of its documented range: a corrupt or hostile file
            raise ModelFileError(str(e)) from None

    def _int(self, key: str, v: Any, required: bool) -> int | None:
        rng = KEY_RANGES[key]
        name, where = self.key(key), str(self.path)
        if isinstance(v, list):
            if not all(isinstance(x, (int, float)) for x in v):
                raise ModelFileError(f"{self.path}: metadata '{name}' must hold numbers, got {shown(v)}")
            values = {check_number(x, name, rng, where) for x in v}
            if len(values) > 1:
                raise UnsupportedArchitectureError(
                    f"{self.path}: '{self.key(key)}' differs between layers ({min(values)}..{max(values)}); "
                    "llmsizer models one value for every layer")
            v = values.pop() if values else None
        if v is None:
            if required:
                raise ModelFileError(f"{self.path}: missing metadata key '{self.key(key)}'")
            return None
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ModelFileError(f"{self.path}: metadata '{name}' must be an integer, got {type(v).__name__}")
        return int(check_number(v, name, rng, where))


@dataclass
class _Table:
    """The tensor table of all parts: records for FileWeights, ggml shapes (``ne``) by name without '.weight'."""

    records: list[TensorInfo] = field(default_factory=list)
    ne: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def add(self, header: GGUFHeader) -> None:
        for t in header.tensors:
            base = t.name.removesuffix(".weight")
            if base in self.ne:
                raise ModelFileError(f"{header.path}: tensor {shown(t.name)} appears in two parts")
            self.records.append(TensorInfo(t.name, t.ggml_type, t.shape, t.nbytes, str(header.path)))
            self.ne[base] = t.shape

    def has(self, name: str) -> bool:
        return name in self.ne

    def dim(self, name: str, i: int) -> int | None:
        """``ne[i]`` of a tensor (``i = -1``: outermost), or None if the tensor or that dimension is absent."""
        shape = self.ne.get(name)
        return shape[i] if shape and -len(shape) <= i < len(shape) else None


def _part_paths(path: Path, meta: _Meta) -> list[Path]:
    """All parts of a split GGUF (gguf-split naming ``<prefix>-00001-of-0000N.gguf``), or just ``path``."""
    count = meta.int_("split.count") or 1
    if count <= 1:
        return [path]
    m = _SPLIT.match(path.name)
    if not m or int(m["count"]) != count:
        raise ModelFileError(f"{path}: split.count is {count} but the name does not follow "
                             f"'<name>-00001-of-{count:05d}.gguf'")
    parts = [path.with_name(f"{m['prefix']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    for p in parts:
        if not p.exists():
            raise ModelFileError(f"{path}: part {p.name} of the split GGUF is missing")
    return parts


def _read(path: Path) -> tuple[_Meta, _Table, list[Path]]:
    """Metadata (from the first part) and the tensor table of every part."""
    header = read_gguf_header(path)
    meta = _Meta(header)
    parts = _part_paths(path, meta)
    first = header if parts[0] == path else read_gguf_header(parts[0])  # gguf-split: metadata in part 1
    meta = _Meta(first)
    if not meta.arch:
        raise ModelFileError(f"{first.path}: missing metadata key 'general.architecture'")
    table = _Table()
    for p in parts:
        table.add(header if p == path else first if p == first.path else read_gguf_header(p))
    expected = meta.int_("split.tensors.count")
    if expected is not None and len(parts) > 1 and expected != len(table.records):
        raise ModelFileError(f"{path}: split.tensors.count is {expected} but the parts hold {len(table.records)}")
    return meta, table, parts


def _layer_kinds(meta: _Meta, n_layers: int, context: int | None,
                 notes: list[str]) -> tuple[tuple[str, ...], int | None, bool]:
    """(layer kinds, sliding window, whether a llama file is Mistral-style all-sliding)."""
    arch = meta.arch
    window = meta.int_("{arch}.attention.sliding_window")
    pattern = meta.get("{arch}.attention.sliding_window_pattern")
    if arch in ("gemma3", "gpt-oss") and not window:
        raise ModelFileError(f"{meta.path}: missing metadata key '{meta.key('{arch}.attention.sliding_window')}'")
    if arch == "gemma2" and not window:
        window = 4096
        notes.append("sliding_window=4096 (llama.cpp default for gemma2; absent from the metadata)")
    if isinstance(pattern, list) and len(pattern) == n_layers and window:
        return tuple("sliding" if bool(x) else "full" for x in pattern), window, False
    n = pattern if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0 else SWA_PATTERN.get(arch)
    if n and window:
        return tuple("sliding" if i % n < n - 1 else "full" for i in range(n_layers)), window, False
    if window and arch in ("llama", "phi3"):
        if context and window >= context:
            return ("full",) * n_layers, None, False
        if arch == "phi3":
            notes.append("llama.cpp disables Phi-3 sliding-window attention (llama-model.cpp, PR 13676): it keeps "
                         "the full context in the KV cache")
        return ("sliding",) * n_layers, window, arch == "llama"
    if window:
        notes.append(f"sliding_window {window} ignored: {arch} attends over the full context in llama.cpp")
    return ("full",) * n_layers, None, False


def _moe(meta: _Meta, t: _Table, n_layers: int, notes: list[str]) -> tuple[MoESpec | None, tuple[bool, ...]]:
    """MoE blocks are the layers with a router (``ffn_gate_inp``); sizes from metadata, else shapes."""
    layers = tuple(t.has(f"blk.{i}.ffn_gate_inp") for i in range(n_layers))
    if not any(layers):
        return None, (False,) * n_layers
    b = f"blk.{layers.index(True)}."
    n_exp = meta.int_("{arch}.expert_count")
    if not n_exp:
        n_exp = t.dim(b + "ffn_gate_inp", 1)
        notes.append(f"expert_count={n_exp} from the {b}ffn_gate_inp shape")
    if not n_exp:
        raise ModelFileError(f"{meta.path}: missing metadata key '{meta.key('{arch}.expert_count')}'")
    k = meta.int_("{arch}.expert_used_count", required=True) or 0
    inter = meta.int_("{arch}.expert_feed_forward_length")
    if not inter:
        fused = t.dim(b + "ffn_gate_up_exps", 1)
        inter = t.dim(b + "ffn_up_exps", 1) or (fused // 2 if fused else 0)
        notes.append(f"expert_feed_forward_length={inter} from the {b}ffn_up_exps shape")
    if meta.arch == "deepseek2":
        shared = (meta.int_("{arch}.expert_shared_count") or 0) * inter
    else:
        shared = meta.int_("{arch}.expert_shared_feed_forward_length") or 0
    sh = t.dim(b + "ffn_up_shexp", 1)
    if sh and not shared:
        shared = sh
        notes.append(f"shared expert size {shared} from the {b}ffn_up_shexp shape")
    moe = MoESpec(
        num_experts=n_exp, experts_per_token=k, expert_intermediate_size=inter,
        shared_intermediate_size=shared, shared_expert_gate=t.has(b + "ffn_gate_inp_shexp"),
        router_bias=t.has(b + "ffn_gate_inp.bias"),
        expert_bias=t.has(b + "ffn_up_exps.bias") or t.has(b + "ffn_down_exps.bias"),
        expert_gated=t.has(b + "ffn_gate_exps") or t.has(b + "ffn_gate_up_exps"),
        score_correction_bias=t.has(b + "exp_probs_b.bias"),  # the converted e_score_correction_bias
        # LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (2) of llama-hparams.h; a converted correction bias routes a sigmoid
        router_score="sigmoid" if meta.int_("{arch}.expert_gating_func") == 2 or t.has(b + "exp_probs_b.bias")
        else "softmax",
    )
    return moe, layers


def _mla(meta: _Meta, t: _Table) -> MLASpec:
    """DeepSeek-V2/V3 MLA sizes. Newer converters store the absorbed MQA form in key/value_length and the
    per-head sizes in key_length_mla/value_length_mla (convert_hf_to_gguf.py DeepseekV2Model)."""
    rope = meta.int_("{arch}.rope.dimension_count", required=True) or 0
    qk = meta.int_("{arch}.attention.key_length_mla") or meta.int_("{arch}.attention.key_length", required=True) or 0
    v = meta.int_("{arch}.attention.value_length_mla") or meta.int_("{arch}.attention.value_length", required=True)
    q_lora = meta.int_("{arch}.attention.q_lora_rank") or None
    if q_lora is None:
        q_lora = t.dim("blk.0.attn_q_a", 1)
    if qk <= rope:
        raise ModelFileError(f"{meta.path}: MLA key length {qk} is not larger than the rope dimension {rope}")
    return MLASpec(q_lora_rank=q_lora, kv_lora_rank=meta.int_("{arch}.attention.kv_lora_rank", required=True) or 0,
                   qk_nope_head_dim=qk - rope, qk_rope_head_dim=rope, v_head_dim=v or 0)


def _dense_ffn(meta: _Meta, t: _Table, moe_layers: tuple[bool, ...], notes: list[str]) -> tuple[int, bool, bool]:
    """(intermediate_size, gated, bias) of the dense feed-forward layers."""
    inter = meta.int_("{arch}.feed_forward_length")
    dense = [i for i, m in enumerate(moe_layers) if not m]
    if not dense:
        return inter or 0, True, False
    b = f"blk.{dense[0]}."
    up = t.dim(b + "ffn_up", 1)
    fused = meta.arch == "phi3" and not t.has(b + "ffn_gate")  # Phi-3 stores gate_up_proj as one ffn_up
    gated = t.has(b + "ffn_gate") or fused
    bias = t.has(b + "ffn_up.bias") or t.has(b + "ffn_down.bias")
    if up is None:
        return inter or 0, gated, bias
    from_shape = up // 2 if fused else up
    if inter is None:
        notes.append(f"intermediate_size={from_shape} from the {b}ffn_up shape (no feed_forward_length)")
        inter = from_shape
    elif inter != from_shape:
        notes.append(f"feed_forward_length {inter} disagrees with the {b}ffn_up shape; {from_shape} used")
        inter = from_shape
    return inter, gated, bias


def _vocab(meta: _Meta, t: _Table, hidden: int, notes: list[str]) -> int:
    """Rows of token_embd (exact for the parameter count); else the tokenizer list length."""
    rows, width = t.dim("token_embd", 1), t.dim("token_embd", 0)
    n_tokens = meta.length("tokenizer.ggml.tokens")
    if rows:
        if n_tokens and n_tokens != rows:
            notes.append(f"tokenizer has {n_tokens} tokens; token_embd has {rows} rows (used as vocab_size)")
        if width != hidden:
            raise ModelFileError(f"{meta.path}: token_embd width {width} != embedding_length {hidden}")
        return rows
    vocab = n_tokens or meta.int_("{arch}.vocab_size")
    if not vocab:
        raise ModelFileError(f"{meta.path}: missing metadata key 'tokenizer.ggml.tokens' and no token_embd tensor")
    return vocab


def _qk_norm(t: _Table, head_dim: int, n_heads: int) -> str:
    width = t.dim("blk.0.attn_q_norm", 0)
    if width is None:
        return "none"
    return "full" if width == head_dim * n_heads and n_heads > 1 else "per_head"


def _model_type(meta: _Meta, t: _Table, moe: MoESpec | None, mistral: bool) -> str:
    if meta.arch == "llama":
        return "mixtral" if moe else ("mistral" if mistral else "llama")
    if meta.arch == "deepseek2":
        sigmoid = meta.int_("{arch}.expert_gating_func") == 2  # LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (V3)
        return "deepseek_v3" if sigmoid or any(_base(k) == "exp_probs_b" for k in t.ne) else "deepseek_v2"
    return ARCHITECTURES[meta.arch]


def _block_count(path: Path, meta: _Meta, t: _Table) -> int:
    n_layers = meta.int_("{arch}.block_count", required=True) or 0
    blocks = {i for i in map(_layer_of, t.ne) if i is not None}
    if not 0 < n_layers <= len(blocks):
        raise ModelFileError(f"{path}: block_count is {n_layers} but the tensor table has {len(blocks)} blocks")
    return n_layers


def _parallel_spec(path: Path, meta: _Meta, t: _Table) -> ModelSpec:
    """falcon / phi2 / gptneox: the config.json fields the file encodes (readers/gguf_parallel.py), read by the
    family's config.json reader (readers/hf_parallel.py), so both files of one model give one spec."""
    notes: list[str] = []
    n_layers = _block_count(path, meta, t)
    hidden = meta.int_("{arch}.embedding_length", required=True) or 0
    heads = meta.int_("{arch}.attention.head_count", required=True) or 0
    kv = meta.int_("{arch}.attention.head_count_kv") or heads  # llama.cpp's default: head_count
    ftype = meta.int_("general.file_type")
    try:
        cfg = gguf_parallel.config_from_gguf(meta, t, vocab=_vocab(meta, t, hidden, notes), hidden=hidden,
                                             layers=n_layers, heads=heads, kv=kv,
                                             context=meta.int_("{arch}.context_length"), notes=notes)
        model_type = ARCHITECTURES[meta.arch]
        spec = parallel_spec(cfg, model_type, name=path.stem, where=str(path), source=str(path))
    except InputError as e:
        raise ModelFileError(f"{path}: inconsistent metadata ({e})") from None
    if spec.num_kv_heads != kv:
        raise ModelFileError(f"{path}: head_count_kv {kv} does not fit {meta.arch}'s attention "
                             f"({spec.num_kv_heads} kv heads)")
    return replace(spec, torch_dtype=FILE_TYPE_DTYPE.get(ftype) if ftype is not None else None,
                   notes=tuple(notes) + spec.notes)


def _build_spec(path: Path, meta: _Meta, t: _Table) -> ModelSpec:
    notes: list[str] = []
    n_layers = _block_count(path, meta, t)
    hidden = meta.int_("{arch}.embedding_length", required=True) or 0
    n_heads = meta.int_("{arch}.attention.head_count", required=True) or 0
    n_kv = meta.int_("{arch}.attention.head_count_kv") or n_heads
    head_dim = meta.int_("{arch}.attention.key_length")
    if not head_dim:
        head_dim = hidden // max(n_heads, 1)
        notes.append(f"head_dim={head_dim} = embedding_length / head_count (no attention.key_length)")
    value_len = meta.int_("{arch}.attention.value_length")
    context = meta.int_("{arch}.context_length")
    kinds, window, mistral = _layer_kinds(meta, n_layers, context, notes)
    moe, moe_layers = _moe(meta, t, n_layers, notes)
    inter, gated, mlp_bias = _dense_ffn(meta, t, moe_layers, notes)
    mla = None
    if meta.arch == "deepseek2":
        mla = _mla(meta, t)
        head_dim, n_kv = mla.qk_nope_head_dim + mla.qk_rope_head_dim, n_heads  # MLA expands the latent per head
    elif value_len and value_len != head_dim:
        notes.append(f"value_length {value_len} differs from key_length {head_dim}; head_dim taken as key_length")
    tie = not t.has("output")
    if tie:
        notes.append("tie_word_embeddings=True (no output.weight tensor)")
    ftype = meta.int_("general.file_type")
    arch_type = _model_type(meta, t, moe, mistral)
    try:
        return ModelSpec(
            name=path.stem, model_type=arch_type,
            vocab_size=_vocab(meta, t, hidden, notes), hidden_size=hidden, num_layers=n_layers,
            num_heads=n_heads, num_kv_heads=n_kv, head_dim=head_dim, intermediate_size=inter,
            tie_word_embeddings=tie, mlp_gated=gated, mlp_bias=mlp_bias,
            attention_qkv_bias=t.has("blk.0.attn_q.bias") or t.has("blk.0.attn_qkv.bias")
            or t.has("blk.0.attn_q_a.bias") or t.has("blk.0.attn_kv_a_mqa.bias"),
            attention_out_bias=t.has("blk.0.attn_output.bias"),
            qk_norm=_qk_norm(t, head_dim, n_heads),  # type: ignore[arg-type]
            norm_kind="layernorm" if t.has("blk.0.attn_norm.bias") else "rmsnorm",
            norms_per_layer=sum(t.has(f"blk.0.{r}") for r in NORM_ROLES) or 2,
            attention_sinks=t.has("blk.0.attn_sinks"),
            mla=mla, moe=moe, moe_layers=moe_layers,
            layer_types=kinds, sliding_window=window,  # type: ignore[arg-type]
            max_position_embeddings=context, torch_dtype=FILE_TYPE_DTYPE.get(ftype) if ftype is not None else None,
            source=str(path), notes=tuple(notes), **TRANSFORMERS_LAYOUT.get(arch_type, {}),
        )
    except InputError as e:
        raise ModelFileError(f"{path}: inconsistent metadata ({e})") from None


def _layer_of(name: str) -> int | None:
    m = _BLK.match(name)
    return int(m.group(1)) if m else None


def _role_of(name: str) -> Role:
    if name.startswith("token_embd."):
        return "embedding"
    if name.startswith("output."):
        return "output"
    if _BLK.match(name) is None and _base(name) in PER_LAYER_DEVICE:
        return "per_layer"
    return "other"


def _base(name: str) -> str:
    """The tensor's role: 'blk.3.attn_q.weight' -> 'attn_q', 'blk.1.exp_probs_b.bias' -> 'exp_probs_b'."""
    m = _BLK.match(name)
    role = name[m.end():] if m else name
    return role.removesuffix(".weight").removesuffix(".bias")


def _weights_note(spec: ModelSpec, t: _Table) -> list[str]:
    stored = sum(r.numel for r in t.records)
    arch = count_params(spec).total
    if stored == arch:
        return []
    extra = sorted({_base(r.name) for r in t.records if _base(r.name) in NON_PARAMETER})
    why = f"; non-parameter tensors stored: {', '.join(extra)}" if extra else ""
    return [f"stored elements ({stored:,}) differ from the architecture's {arch:,} parameters{why}"]


def spec_from_gguf(path: str | os.PathLike[str]) -> ModelSpec:
    """ModelSpec of a GGUF file (any part of a split GGUF) with exact per-tensor bytes as FileWeights.

    Unknown ``general.architecture`` -> UnsupportedArchitectureError listing the supported ones;
    a truncated or corrupt file, or a missing metadata key -> ModelFileError.
    """
    p = Path(path)
    meta, table, parts = _read(p)
    return _spec(p, meta, table, parts)


def spec_from_gguf_header(header: GGUFHeader) -> ModelSpec:
    """ModelSpec of one GGUF header already parsed (:func:`~llmsizer.readers.gguf_header.parse_gguf_header`: the
    web page sends only the header bytes). A part of a split GGUF is refused: its other parts are not here."""
    meta = _Meta(header)
    count = meta.int_("split.count") or 1
    if count > 1:
        raise ModelFileError(f"{header.path}: one part of a split GGUF ({count} parts); the other parts' tensors are "
                             "not here: run `llmsizer inspect` on the first part, next to the others")
    if not meta.arch:
        raise ModelFileError(f"{header.path}: missing metadata key 'general.architecture'")
    table = _Table()
    table.add(header)
    return _spec(header.path, meta, table, [header.path])


def _spec(p: Path, meta: _Meta, table: _Table, parts: list[Path]) -> ModelSpec:
    if meta.arch not in ARCHITECTURES:
        raise UnsupportedArchitectureError(f"{p}: GGUF architecture {shown(meta.arch)} is not supported; supported: "
                                           f"{', '.join(SUPPORTED_ARCHITECTURES)}")
    spec = (_parallel_spec if meta.arch in gguf_parallel.ARCHITECTURES else _build_spec)(p, meta, table)
    label = str(p) if len(parts) == 1 else f"{parts[0]} (+{len(parts) - 1} parts)"
    fw = summarize(label, table.records, spec.num_layers, _layer_of, _role_of, _weights_note(spec, table))
    return replace(spec, file_weights=fw)

"""Builders of tiny but real model files (safetensors folders, GGUF files) for the reader tests.

Byte counts here are computed independently of llmsizer: from numpy itemsizes, the safetensors length
prefix, and gguf-py's ``GGML_QUANT_SIZES`` (elements per block, bytes per block).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

LLAMA_CONFIG = {
    "model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
}


def llama_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of transformers' LlamaForCausalLM for ``cfg`` (nn.Linear weight = [out, in])."""
    h, v, i = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    hd = h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
        })
    if not cfg.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (v, h)
    return shapes


def random_arrays(shapes: dict[str, tuple[int, ...]], dtype: type = np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}


def write_folder(folder: Path, cfg: dict, arrays: dict[str, np.ndarray], shards: int = 1) -> list[Path]:
    """config.json + model.safetensors (or ``shards`` files and model.safetensors.index.json)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    if shards == 1:
        path = folder / "model.safetensors"
        save_file(arrays, str(path))
        return [path]
    names = sorted(arrays)
    files, weight_map = [], {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: arrays[n] for n in names[s::shards]}
        save_file(part, str(folder / fname))
        weight_map.update({n: fname for n in part})
        files.append(folder / fname)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return files


def safetensors_data_size(path: Path) -> int:
    """File size - 8 - header length: the byte buffer that holds the tensors."""
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return path.stat().st_size - 8 - n


# ---------------------------------------------------------------------------------------------- GGUF

def ggml_nbytes(qtype: object, numel: int) -> int:
    """Bytes of ``numel`` elements of a ggml type, from gguf-py's (block size, type size) table."""
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[qtype]
    assert numel % block == 0
    return numel // block * size


class GGUFModel:
    """A GGUF file description: metadata and tensors as (name, numpy shape, ggml type)."""

    def __init__(self, arch: str, meta: dict, tensors: list[tuple[str, tuple[int, ...], object]]):
        self.arch, self.meta, self.tensors = arch, meta, tensors

    def with_meta(self, key: str, value: object) -> GGUFModel:
        """A copy with the metadata value ``key`` set to ``value``."""
        return GGUFModel(self.arch, {**self.meta, key: value}, self.tensors)

    def _add_metadata(self, w: Any) -> None:
        for key, val in self.meta.items():
            if isinstance(val, U64):
                w.add_uint64(key, int(val))
            elif isinstance(val, bool):
                w.add_bool(key, val)
            elif isinstance(val, int):
                w.add_uint32(key, val)
            elif isinstance(val, float):
                w.add_float32(key, val)
            elif isinstance(val, str):
                w.add_string(key, val)
            else:
                w.add_array(key, val)

    def write(self, path: Path, seed: int = 0, **writer_kw: object) -> list[Path]:
        import gguf

        rng = np.random.default_rng(seed)
        w = gguf.GGUFWriter(str(path), self.arch, **writer_kw)
        self._add_metadata(w)
        for name, shape, qtype in self.tensors:
            data = rng.standard_normal(shape).astype(np.float32)
            if qtype == gguf.GGMLQuantizationType.F32:
                w.add_tensor(name, data)
            elif qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(name, data.astype(np.float16))
            else:
                w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        n = len(w.tensors)
        return [path] if n == 1 else [path.with_name(f"{path.stem}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]

    def write_header(self, path: Path) -> int:
        """Only the start of the file (metadata and tensor table, no tensor data; F16 and F32 tensors): a full-size
        model's header. Returns the bytes the data section would take (each tensor padded to 32 bytes)."""
        import gguf

        Q = gguf.GGMLQuantizationType
        w = gguf.GGUFWriter(str(path), self.arch)
        self._add_metadata(w)
        data_bytes = 0
        for name, shape, qtype in self.tensors:
            assert qtype in (Q.F16, Q.F32), qtype
            nbytes = ggml_nbytes(qtype, math.prod(shape))
            w.add_tensor_info(name, shape, np.dtype(np.float16 if qtype == Q.F16 else np.float32), nbytes)
            data_bytes += -(-nbytes // 32) * 32
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        return data_bytes

    def expected_bytes(self) -> dict[str, int]:
        """name -> bytes, independently of the reader."""
        return {n: ggml_nbytes(q, math.prod(s)) for n, s, q in self.tensors}

    def by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (_, s, q) in self.tensors:
            out[q.name] = out.get(q.name, 0) + ggml_nbytes(q, math.prod(s))  # type: ignore[attr-defined]
        return out

    def numel(self, roles: tuple[str, ...] = ()) -> int:
        """Elements of all tensors, or of the tensors whose name contains one of ``roles``."""
        return sum(math.prod(s) for n, s, _ in self.tensors if not roles or any(r in n for r in roles))


def _q():
    import gguf

    return gguf.GGMLQuantizationType


def llama_gguf(layers: int = 2, hidden: int = 64, heads: int = 4, kv: int = 2, ffn: int = 96, vocab: int = 128,
               sliding_window: int | None = None, rope_freqs: bool = True) -> GGUFModel:
    """A llama.cpp 'llama' model with Q8_0/Q4_0/Q4_1/Q5_0 matrices, F32 norms and a rope_freqs table."""
    Q = _q()
    hd = hidden // heads
    a = "llama"
    meta: dict = {
        f"{a}.block_count": layers, f"{a}.context_length": 256, f"{a}.embedding_length": hidden,
        f"{a}.feed_forward_length": ffn, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": kv,
        f"{a}.rope.dimension_count": hd, f"{a}.attention.layer_norm_rms_epsilon": 1e-5,
        "general.file_type": 7, "general.name": "tiny llama", "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    if sliding_window:
        meta[f"{a}.attention.sliding_window"] = sliding_window
    t = [("token_embd.weight", (vocab, hidden), Q.Q8_0), ("output_norm.weight", (hidden,), Q.F32),
         ("output.weight", (vocab, hidden), Q.Q8_0)]
    if rope_freqs:
        t.append(("rope_freqs.weight", (hd // 2,), Q.F32))
    for i in range(layers):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (hidden,), Q.F32), (b + "ffn_norm.weight", (hidden,), Q.F32),
              (b + "attn_q.weight", (heads * hd, hidden), Q.Q4_0), (b + "attn_k.weight", (kv * hd, hidden), Q.Q4_0),
              (b + "attn_v.weight", (kv * hd, hidden), Q.Q8_0), (b + "attn_output.weight", (hidden, heads * hd), Q.Q4_0),
              (b + "ffn_gate.weight", (ffn, hidden), Q.Q4_0), (b + "ffn_up.weight", (ffn, hidden), Q.Q4_1),
              (b + "ffn_down.weight", (hidden, ffn), Q.Q5_0)]
    return GGUFModel(a, meta, t)


def qwen3moe_gguf() -> GGUFModel:
    """qwen3moe: head_dim (key_length 32) != hidden/heads, per-head q/k norms, 4 experts top-2, tied."""
    Q = _q()
    a, h, heads, kv, hd, e, ei, vocab = "qwen3moe", 64, 4, 2, 32, 4, 32, 128
    meta = {
        f"{a}.block_count": 2, f"{a}.context_length": 512, f"{a}.embedding_length": h,
        f"{a}.feed_forward_length": 96, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": kv,
        f"{a}.attention.key_length": hd, f"{a}.attention.value_length": hd, f"{a}.expert_count": e,
        f"{a}.expert_used_count": 2, f"{a}.expert_feed_forward_length": ei, "general.file_type": 2,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    t = [("token_embd.weight", (vocab, h), Q.Q8_0), ("output_norm.weight", (h,), Q.F32)]
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (h,), Q.F32), (b + "ffn_norm.weight", (h,), Q.F32),
              (b + "attn_q.weight", (heads * hd, h), Q.Q4_0), (b + "attn_k.weight", (kv * hd, h), Q.Q4_0),
              (b + "attn_v.weight", (kv * hd, h), Q.Q8_0), (b + "attn_output.weight", (h, heads * hd), Q.Q4_0),
              (b + "attn_q_norm.weight", (hd,), Q.F32), (b + "attn_k_norm.weight", (hd,), Q.F32),
              (b + "ffn_gate_inp.weight", (e, h), Q.F32),
              (b + "ffn_gate_exps.weight", (e, ei, h), Q.Q4_0), (b + "ffn_up_exps.weight", (e, ei, h), Q.Q4_0),
              (b + "ffn_down_exps.weight", (e, h, ei), Q.Q8_0)]
    return GGUFModel(a, meta, t)


def deepseek2_gguf() -> GGUFModel:
    """deepseek2 (V3-style): MLA with q_lora, split attn_k_b/attn_v_b, 1 dense + 1 MoE layer, shared expert,
    sigmoid gating with an exp_probs_b bias (a buffer, not a parameter)."""
    Q = _q()
    a, h, heads, vocab = "deepseek2", 64, 4, 128
    q_lora, kv_lora, nope, rope, v = 32, 32, 16, 8, 16
    e, ei = 4, 32
    meta = {
        f"{a}.block_count": 2, f"{a}.context_length": 512, f"{a}.embedding_length": h,
        f"{a}.feed_forward_length": 96, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": 1,
        f"{a}.attention.key_length": kv_lora + rope, f"{a}.attention.value_length": kv_lora,
        f"{a}.attention.key_length_mla": nope + rope, f"{a}.attention.value_length_mla": v,
        f"{a}.attention.q_lora_rank": q_lora, f"{a}.attention.kv_lora_rank": kv_lora,
        f"{a}.rope.dimension_count": rope, f"{a}.leading_dense_block_count": 1, f"{a}.expert_count": e,
        f"{a}.expert_used_count": 2, f"{a}.expert_shared_count": 1, f"{a}.expert_feed_forward_length": ei,
        f"{a}.expert_gating_func": 2, "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    t = [("token_embd.weight", (vocab, h), Q.Q8_0), ("output_norm.weight", (h,), Q.F32),
         ("output.weight", (vocab, h), Q.Q4_0)]
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (h,), Q.F32), (b + "ffn_norm.weight", (h,), Q.F32),
              (b + "attn_q_a.weight", (q_lora, h), Q.Q8_0), (b + "attn_q_a_norm.weight", (q_lora,), Q.F32),
              (b + "attn_q_b.weight", (heads * (nope + rope), q_lora), Q.Q8_0),
              (b + "attn_kv_a_mqa.weight", (kv_lora + rope, h), Q.Q8_0),
              (b + "attn_kv_a_norm.weight", (kv_lora,), Q.F32),
              (b + "attn_k_b.weight", (heads, kv_lora, nope), Q.F16),
              (b + "attn_v_b.weight", (heads, v, kv_lora), Q.F16),
              (b + "attn_output.weight", (h, heads * v), Q.Q4_0)]
        if i == 0:
            t += [(b + "ffn_gate.weight", (96, h), Q.Q4_0), (b + "ffn_up.weight", (96, h), Q.Q4_0),
                  (b + "ffn_down.weight", (h, 96), Q.Q8_0)]
        else:
            t += [(b + "ffn_gate_inp.weight", (e, h), Q.F32), (b + "exp_probs_b.bias", (e,), Q.F32),
                  (b + "ffn_gate_exps.weight", (e, ei, h), Q.Q4_0), (b + "ffn_up_exps.weight", (e, ei, h), Q.Q4_0),
                  (b + "ffn_down_exps.weight", (e, h, ei), Q.Q8_0),
                  (b + "ffn_gate_shexp.weight", (ei, h), Q.Q8_0), (b + "ffn_up_shexp.weight", (ei, h), Q.Q8_0),
                  (b + "ffn_down_shexp.weight", (h, ei), Q.Q8_0)]
    return GGUFModel(a, meta, t)


def gpt_oss_gguf() -> GGUFModel:
    """gpt-oss: MXFP4 experts with biases, router bias, attention biases and sinks, alternating SWA."""
    Q = _q()
    a, h, heads, kv, hd, e, ei, vocab = "gpt-oss", 64, 4, 2, 16, 4, 64, 128
    meta = {
        f"{a}.block_count": 2, f"{a}.context_length": 512, f"{a}.embedding_length": h,
        f"{a}.feed_forward_length": ei, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": kv,
        f"{a}.attention.key_length": hd, f"{a}.attention.value_length": hd, f"{a}.attention.sliding_window": 32,
        f"{a}.expert_count": e, f"{a}.expert_used_count": 2, f"{a}.expert_feed_forward_length": ei,
        "general.file_type": 38, "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    t = [("token_embd.weight", (vocab, h), Q.Q8_0), ("output_norm.weight", (h,), Q.F32),
         ("output.weight", (vocab, h), Q.Q8_0)]
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (h,), Q.F32), (b + "post_attention_norm.weight", (h,), Q.F32),
              (b + "attn_q.weight", (heads * hd, h), Q.Q8_0), (b + "attn_q.bias", (heads * hd,), Q.F32),
              (b + "attn_k.weight", (kv * hd, h), Q.Q8_0), (b + "attn_k.bias", (kv * hd,), Q.F32),
              (b + "attn_v.weight", (kv * hd, h), Q.Q8_0), (b + "attn_v.bias", (kv * hd,), Q.F32),
              (b + "attn_output.weight", (h, heads * hd), Q.Q8_0), (b + "attn_output.bias", (h,), Q.F32),
              (b + "attn_sinks.weight", (heads,), Q.F32),
              (b + "ffn_gate_inp.weight", (e, h), Q.F32), (b + "ffn_gate_inp.bias", (e,), Q.F32),
              (b + "ffn_gate_exps.weight", (e, ei, h), Q.MXFP4), (b + "ffn_gate_exps.bias", (e, ei), Q.F32),
              (b + "ffn_up_exps.weight", (e, ei, h), Q.MXFP4), (b + "ffn_up_exps.bias", (e, ei), Q.F32),
              (b + "ffn_down_exps.weight", (e, h, ei), Q.MXFP4), (b + "ffn_down_exps.bias", (e, h), Q.F32)]
    return GGUFModel(a, meta, t)


def gemma3_gguf() -> GGUFModel:
    """gemma3 text: 6 layers (5 sliding + 1 full), MQA, head_dim 32, 4 norms per layer, tied, F16 matrices."""
    Q = _q()
    a, h, heads, kv, hd, ffn, vocab, n = "gemma3", 64, 4, 1, 32, 64, 128, 6
    meta = {
        f"{a}.block_count": n, f"{a}.context_length": 1024, f"{a}.embedding_length": h,
        f"{a}.feed_forward_length": ffn, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": kv,
        f"{a}.attention.key_length": hd, f"{a}.attention.value_length": hd, f"{a}.attention.sliding_window": 16,
        "general.file_type": 1, "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    t = [("token_embd.weight", (vocab, h), Q.F16), ("output_norm.weight", (h,), Q.F32)]
    for i in range(n):
        b = f"blk.{i}."
        t += [(b + r + ".weight", (h,), Q.F32) for r in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")]
        t += [(b + "attn_q.weight", (heads * hd, h), Q.F16), (b + "attn_k.weight", (kv * hd, h), Q.F16),
              (b + "attn_v.weight", (kv * hd, h), Q.F16), (b + "attn_output.weight", (h, heads * hd), Q.F16),
              (b + "attn_q_norm.weight", (hd,), Q.F32), (b + "attn_k_norm.weight", (hd,), Q.F32),
              (b + "ffn_gate.weight", (ffn, h), Q.F16), (b + "ffn_up.weight", (ffn, h), Q.F16),
              (b + "ffn_down.weight", (h, ffn), Q.F16)]
    return GGUFModel(a, meta, t)


def phi3_gguf() -> GGUFModel:
    """phi3: fused attn_qkv and gate+up stored as one ffn_up, sliding_window < context (all layers slide)."""
    Q = _q()
    a, h, heads, kv, ffn, vocab = "phi3", 64, 4, 2, 96, 128
    hd = h // heads
    meta = {
        f"{a}.block_count": 2, f"{a}.context_length": 256, f"{a}.embedding_length": h,
        f"{a}.feed_forward_length": ffn, f"{a}.attention.head_count": heads, f"{a}.attention.head_count_kv": kv,
        f"{a}.attention.sliding_window": 64, f"{a}.rope.dimension_count": hd,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    t = [("token_embd.weight", (vocab, h), Q.Q8_0), ("output_norm.weight", (h,), Q.F32),
         ("output.weight", (vocab, h), Q.Q8_0)]
    for i in range(2):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", (h,), Q.F32), (b + "ffn_norm.weight", (h,), Q.F32),
              (b + "attn_qkv.weight", ((heads + 2 * kv) * hd, h), Q.Q8_0),
              (b + "attn_output.weight", (h, heads * hd), Q.Q8_0),
              (b + "ffn_up.weight", (2 * ffn, h), Q.Q4_0), (b + "ffn_down.weight", (h, ffn), Q.Q8_0)]
    return GGUFModel(a, meta, t)


class U64(int):
    """A metadata integer GGUFModel.write stores as uint64 (plain ints are written as uint32)."""

"""GGUF files of the parallel-block families (llama.cpp ``falcon``, ``phi2``, ``gptneox``, ``stablelm``) against the
transformers model they were converted from.

Independent truth. Each tiny GGUF is what llama.cpp's converter would write for the tiny transformers model:
- tensors: the real model's parameters (built on the meta device), renamed by gguf-py's ``TensorNameMap`` -- the
  table ``convert_hf_to_gguf.py`` maps names with (``ModelBase.map_tensor_name``) -- with the model's own shapes
  (the Falcon and GPT-NeoX converters reorder the fused query_key_value rows, the shape is unchanged);
- metadata: the keys each converter's ``set_gguf_parameters`` writes, computed as it computes them from config.json
  (ggml-org/llama.cpp @0024aa74 convert_hf_to_gguf.py ``FalconModel``: context_length 2048, feed_forward_length
  4 x hidden_size, head_count_kv = num_kv_heads or n_head_kv or 1; ``Phi2Model``: feed_forward_length 4 x hidden_size,
  head_count_kv = head_count, rope.dimension_count = int(partial_rotary_factor x hidden_size) // heads;
  ``GPTNeoXModel``: feed_forward_length = intermediate_size, rope.dimension_count = int(rotary_pct x head_dim),
  use_parallel_residual, no head_count_kv; ``StableLMModel``: the same with partial_rotary_factor, and head_count_kv).
The parameter count read from the GGUF must equal the real model's parameter count (and the config.json reader's);
the KV bytes per token must follow llama.cpp's rule: every layer caches n_embd_k_gqa + n_embd_v_gqa elements per token,
n_embd_head x n_head_kv each, n_head_kv = head_count_kv or head_count when absent (src/llama-hparams.h n_embd_k_gqa,
src/llama-model.cpp load_hparams).
"""

from __future__ import annotations

from typing import Any

import pytest
import readers_helpers as H

from llmsizer import estimate_inference
from llmsizer.errors import ModelFileError
from llmsizer.formulas.params import count_params
from llmsizer.readers.gguf_file import spec_from_gguf
from llmsizer.readers.hf_config import spec_from_config

gguf = pytest.importorskip("gguf")
oracle = pytest.importorskip("oracle_utils")
pytestmark = pytest.mark.slow  # transformers models on the meta device

_BASE = oracle._BASE
CONFIGS: dict[str, dict[str, Any]] = {
    **{n: oracle.TINY_CONFIGS[n] for n in ("falcon-mqa", "falcon-new-arch", "phi-partial-rotary",
                                           "gpt-neox-parallel")},
    # Falcon new architecture with one norm per layer (num_ln_in_parallel_attn 1): no attn_norm_2, 2 of 4 kv heads
    "falcon-new-arch-1ln": {**_BASE, "model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_kv_heads": 2, "new_decoder_architecture": True, "num_ln_in_parallel_attn": 1,
                            "alibi": False},
    # GPT-NeoX sequential residual, no attention biases, full rotary
    "gpt-neox-sequential": {**_BASE, "model_type": "gpt_neox", "num_hidden_layers": 3, "num_attention_heads": 4,
                            "rotary_pct": 1.0, "use_parallel_residual": False, "attention_bias": False},
    # StableLM-2-1.6B layout: sequential, q/k/v biases, grouped K/V, a quarter of each head rotary
    "stablelm-2-like": {**_BASE, "model_type": "stablelm", "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "use_qkv_bias": True, "use_parallel_residual": False,
                        "partial_rotary_factor": 0.25},
    # parallel residual (one norm per layer), no biases, half rotary
    "stablelm-parallel": {**_BASE, "model_type": "stablelm", "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 4, "use_parallel_residual": True, "partial_rotary_factor": 0.5},
    # StableLM-2-12B layout: qk_layernorm (per-head q/k LayerNorms, stacked into attn_q_norm / attn_k_norm of
    # [n_head, head_dim] by the converter), parallel residual, grouped K/V
    "stablelm-2-12b-like": {**_BASE, "model_type": "stablelm", "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "qk_layernorm": True, "use_parallel_residual": True,
                            "partial_rotary_factor": 0.25},
}
ARCH = {"falcon": "falcon", "phi": "phi2", "gpt_neox": "gptneox", "stablelm": "stablelm"}


def _converter_metadata(cfg: dict[str, Any]) -> dict[str, Any]:
    """The keys convert_hf_to_gguf.py's set_gguf_parameters writes for ``cfg`` (module docstring)."""
    arch, h, heads = ARCH[cfg["model_type"]], cfg["hidden_size"], cfg["num_attention_heads"]
    cfg = {"max_position_embeddings": 2048, "partial_rotary_factor": 0.5, "rotary_pct": 0.25, **cfg}  # class defaults
    meta: dict[str, Any] = {f"{arch}.embedding_length": h, f"{arch}.block_count": cfg["num_hidden_layers"],
                            f"{arch}.attention.head_count": heads, f"{arch}.attention.layer_norm_epsilon": 1e-5,
                            "general.file_type": 1, "tokenizer.ggml.tokens": [f"t{i}" for i in range(cfg["vocab_size"])]}
    if arch == "falcon":
        meta.update({f"{arch}.context_length": 2048, f"{arch}.feed_forward_length": 4 * h,
                     f"{arch}.attention.head_count_kv": cfg.get("num_kv_heads") or cfg.get("n_head_kv", 1)})
    elif arch == "phi2":
        meta.update({f"{arch}.context_length": cfg["max_position_embeddings"], f"{arch}.feed_forward_length": 4 * h,
                     f"{arch}.attention.head_count_kv": heads,
                     f"{arch}.rope.dimension_count": int(cfg["partial_rotary_factor"] * h) // heads})
    elif arch == "stablelm":
        meta.update({f"{arch}.context_length": cfg["max_position_embeddings"],
                     f"{arch}.feed_forward_length": cfg["intermediate_size"],
                     f"{arch}.rope.dimension_count": int(cfg["partial_rotary_factor"] * (h // heads)),
                     f"{arch}.attention.head_count_kv": cfg["num_key_value_heads"],
                     f"{arch}.use_parallel_residual": cfg.get("use_parallel_residual", True)})
    else:
        meta.update({f"{arch}.context_length": cfg["max_position_embeddings"],
                     f"{arch}.feed_forward_length": cfg["intermediate_size"],
                     f"{arch}.rope.dimension_count": int(cfg["rotary_pct"] * (h // heads)),
                     f"{arch}.use_parallel_residual": cfg.get("use_parallel_residual", True)})
    return meta


def converted(name: str, cfg: dict[str, Any] | None = None) -> tuple[H.GGUFModel, int]:
    """(the GGUF llama.cpp's converter writes for CONFIGS[name] or ``cfg``, the real model's parameter count)."""
    cfg = cfg or CONFIGS[name]
    model = oracle.build(cfg)  # meta device
    arch = ARCH[cfg["model_type"]]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg["num_hidden_layers"])
    Q = gguf.GGMLQuantizationType
    tensors = []
    per_head: dict[str, list[int]] = {}  # StableLM q/k_layernorm.norms.{head}: stacked as the converter does
    for hf_name, p in model.named_parameters():  # tied weights once, as save_pretrained stores them
        if ".q_layernorm.norms." in hf_name or ".k_layernorm.norms." in hf_name:
            per_head.setdefault(hf_name.split(".norms.")[0], []).append(p.shape[0])
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert new is not None, hf_name
        tensors.append((new, tuple(p.shape), Q.F16 if p.dim() == 2 else Q.F32))  # converter: matrices F16
    for prefix, dims in per_head.items():
        # convert_hf_to_gguf.py StableLMModel._stack_qk_norm: torch.stack of the heads' weights (dim 0) named
        # model.layers.{bid}.self_attn.{q,k}_layernorm.weight -> blk.{bid}.attn_{q,k}_norm of [n_head, head_dim]
        new = names.get_name(prefix + ".weight", try_suffixes=(".weight",))
        assert new is not None, prefix
        tensors.append((new, (len(dims), dims[0]), Q.F32))
    return H.GGUFModel(arch, _converter_metadata(cfg), tensors), oracle.real_param_count(model)


@pytest.fixture(params=list(CONFIGS))
def written(request, tmp_path):
    model, real = converted(request.param)
    path = tmp_path / f"{request.param}.gguf"
    model.write(path)
    return request.param, model, real, path


def test_params_equal_the_transformers_model_and_the_config_reader(written):
    name, model, real, path = written
    spec = spec_from_gguf(path)
    assert spec.model_type == CONFIGS[name]["model_type"]
    assert count_params(spec).total == real == model.numel()
    assert count_params(spec_from_config(CONFIGS[name], name=name)).total == real
    assert spec.file_weights.params == real and not spec.file_weights.note


def test_same_architecture_as_the_config_reader(written):
    """The fields that size memory and speed agree with config.json's reading of the same model."""
    name, _, _, path = written
    g, c = spec_from_gguf(path), spec_from_config(CONFIGS[name], name=name)
    for f in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size",
              "tie_word_embeddings", "norm_kind", "norms_per_layer", "parallel_block", "rotary_dim", "mlp_gated",
              "mlp_bias", "attention_qkv_bias", "attention_out_bias", "lm_head_bias", "kv_repeated_in_transformers",
              "qk_norm"):
        assert getattr(g, f) == getattr(c, f), f


def test_llamacpp_kv_bytes_per_token_follow_llamacpp(written):
    """llama.cpp caches n_layer x (n_embd_k_gqa + n_embd_v_gqa) elements per token at the cache type (F16 here)."""
    _, model, _, path = written
    arch, meta = model.arch, model.meta
    heads = meta[f"{arch}.attention.head_count"]
    n_head_kv = meta.get(f"{arch}.attention.head_count_kv", heads)
    n_embd_head = meta[f"{arch}.embedding_length"] // heads
    expected = meta[f"{arch}.block_count"] * 2 * n_embd_head * n_head_kv * 2
    est = estimate_inference(spec_from_gguf(path), engine="llamacpp", context=256, kv_dtype="f16")
    assert est.details["kv_bytes_per_token"] == expected


@pytest.mark.parametrize(("name", "key", "value", "says"), [
    ("falcon-new-arch", "falcon.attention.head_count_kv", 3, "not a multiple of num_kv_heads"),
    ("phi-partial-rotary", "phi2.rope.dimension_count", 32, "exceeds the head size 16"),
    ("gpt-neox-parallel", "gptneox.attention.head_count_kv", 2, "head_count_kv 2 does not fit gptneox"),
])
def test_inconsistent_metadata_is_one_line_naming_the_file(tmp_path, name, key, value, says):
    model, _ = converted(name)
    path = tmp_path / "bad.gguf"
    model.with_meta(key, value).write(path)
    with pytest.raises(ModelFileError) as e:
        spec_from_gguf(path)
    msg = str(e.value)
    assert says in msg and str(path) in msg and "\n" not in msg


CATALOG = ["falcon-7b-instruct", "falcon-40b", "phi-2", "stablelm-base-alpha-3b", "stablelm-2-12b", "pythia-12b"]


@pytest.mark.parametrize("name", CATALOG)
def test_full_size_header_reads_the_real_model(tmp_path, name):
    """The catalog models at full size: only the header a converted file would start with (metadata and tensor
    table, F16 matrices), read as the web page reads an uploaded header (parse_gguf_header)."""
    from llmsizer.catalog.models import entries
    from llmsizer.readers.gguf_file import spec_from_gguf_header
    from llmsizer.readers.gguf_header import parse_gguf_header

    cfg = entries()[name].config
    model, real = converted(name, cfg)
    path = tmp_path / f"{name}.gguf"
    data_bytes = model.write_header(path)
    head = path.read_bytes()
    spec = spec_from_gguf_header(parse_gguf_header(head, path.name, -(-len(head) // 32) * 32 + data_bytes))
    assert count_params(spec).total == real
    assert spec.file_weights.params == real
    c = spec_from_config(cfg, name=name)
    assert (spec.num_kv_heads, spec.rotary_dim, spec.intermediate_size, spec.norms_per_layer) == \
        (c.num_kv_heads, c.rotary_dim, c.intermediate_size, c.norms_per_layer)


def test_stablelm_qk_layernorm_reads_as_one_norm_per_head():
    """StableLM-2-12B's per-head q/k LayerNorms (refused before): config.json and the converted GGUF (attn_q_norm /
    attn_k_norm of [n_head, head_dim]) both read as ``qk_norm`` 'each_head'."""
    model, real = converted("stablelm-2-12b-like")
    assert any(n.endswith("attn_q_norm.weight") for n, _, _ in model.tensors)
    assert spec_from_config(CONFIGS["stablelm-2-12b-like"], name="x").qk_norm == "each_head"


def test_phi2_with_a_fused_qkv_reads_the_same_model(tmp_path):
    """Phi-2 GGUFs converted from Microsoft's first checkpoint format (``mixer.Wqkv``) hold one attn_qkv (+ bias)
    per layer instead of attn_q/k/v (gguf-py MODEL_TENSORS[PHI2] lists both; llama.cpp loads either)."""
    model, real = converted("phi-partial-rotary")
    fused: list = []
    for name, shape, q in model.tensors:
        role = name.split(".")[2] if name.startswith("blk.") else ""
        if role in ("attn_k", "attn_v"):
            continue
        if role == "attn_q":
            name, shape = name.replace("attn_q", "attn_qkv"), (3 * shape[0], *shape[1:])
        fused.append((name, shape, q))
    path = tmp_path / "phi2-fused.gguf"
    H.GGUFModel(model.arch, model.meta, fused).write(path)
    spec = spec_from_gguf(path)
    assert count_params(spec).total == real == H.GGUFModel(model.arch, model.meta, fused).numel()

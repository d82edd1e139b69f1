"""spec_from_gguf on tiny real GGUF files written by gguf-py's GGUFWriter (quantized with gguf.quants)."""

import pytest
import readers_helpers as H
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmsizer.errors import LlmsizerError, ModelFileError, UnsupportedArchitectureError
from llmsizer.formulas.params import count_params
from llmsizer.readers.gguf_file import StringArray, read_gguf_header, spec_from_gguf

gguf = pytest.importorskip("gguf")

BUILDERS = [H.llama_gguf, H.qwen3moe_gguf, H.deepseek2_gguf, H.gpt_oss_gguf, H.gemma3_gguf, H.phi3_gguf]
NON_PARAMETER = ("rope_freqs", "exp_probs_b")


def _write(tmp_path, model: H.GGUFModel, name: str = "model.gguf", **kw):
    path = tmp_path / name
    model.write(path, **kw)
    return path


@pytest.fixture(params=BUILDERS, ids=lambda b: b.__name__)
def built(request, tmp_path):
    model = request.param()
    return model, _write(tmp_path, model)


def test_bytes_by_type_equal_what_the_writer_wrote(built):
    model, path = built
    fw = spec_from_gguf(path).file_weights
    expected = model.expected_bytes()  # from gguf.GGML_QUANT_SIZES, not from llmsizer's table
    assert fw.total_bytes == sum(expected.values())
    assert dict(fw.by_dtype) == model.by_type()
    assert fw.params == model.numel()
    # the data section holds exactly these tensors, each padded to the 32-byte alignment
    data = path.stat().st_size - gguf.GGUFReader(path).data_offset
    assert data == sum(-(-b // 32) * 32 for b in expected.values())


def test_per_layer_embedding_and_output_bytes(built):
    model, path = built
    spec = spec_from_gguf(path)
    fw = spec.file_weights
    expected = model.expected_bytes()
    assert fw.layer_bytes == tuple(sum(b for n, b in expected.items() if n.startswith(f"blk.{i}."))
                                   for i in range(spec.num_layers))
    assert fw.embedding_bytes == expected["token_embd.weight"]
    assert fw.output_bytes == expected.get("output.weight", 0)


def test_parameter_count_equals_the_stored_elements(built):
    model, path = built
    spec = spec_from_gguf(path)
    assert count_params(spec).total == model.numel() - model.numel(NON_PARAMETER)
    if model.numel(NON_PARAMETER):
        assert "non-parameter tensors" in spec.file_weights.note


def test_header_parser_agrees_with_gguf_py(built):
    """read_gguf_header is pure Python; gguf-py's GGUFReader is the reference implementation."""
    _, path = built
    mine = read_gguf_header(path)
    ref = gguf.GGUFReader(path)
    assert mine.data_offset == ref.data_offset
    assert [(t.name, t.ggml_type, t.shape, t.nbytes, t.data_offset) for t in mine.tensors] == \
        [(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.n_bytes), int(t.data_offset))
         for t in ref.tensors]
    for key, fld in ref.fields.items():
        if key.startswith("GGUF."):
            continue
        value = mine.metadata[key]
        if isinstance(value, StringArray):
            assert value.count == len(fld.data)
        elif isinstance(value, float):
            assert value == pytest.approx(fld.contents())
        else:
            assert value == fld.contents(), key


def test_llama(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.llama_gguf()))
    assert (spec.model_type, spec.num_layers, spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim,
            spec.intermediate_size, spec.vocab_size) == ("llama", 2, 64, 4, 2, 16, 96, 128)
    assert spec.max_position_embeddings == 256 and not spec.tie_word_embeddings
    assert spec.layer_types == ("full", "full") and spec.attention_kind == "GQA"
    assert spec.name == "model" and spec.source.endswith("model.gguf")
    assert any("head_dim=16" in n for n in spec.notes)  # derived, so it is named
    assert "rope_freqs" in spec.file_weights.note


def test_qwen3moe(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.qwen3moe_gguf()))
    assert spec.model_type == "qwen3_moe" and spec.head_dim == 32 and spec.qk_norm == "per_head"
    assert spec.tie_word_embeddings and spec.file_weights.output_bytes == 0
    assert spec.moe is not None and spec.moe_layers == (True, True)
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.expert_intermediate_size) == (4, 2, 32)
    assert spec.moe.shared_intermediate_size == 0 and not spec.moe.router_bias
    pc = count_params(spec)
    assert pc.active < pc.total


def test_deepseek2_mla_shared_experts_and_dense_lead(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.deepseek2_gguf()))
    assert spec.model_type == "deepseek_v3"  # sigmoid gating / exp_probs_b
    m = spec.mla
    assert (m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim) == (32, 32, 16, 8, 16)
    assert spec.head_dim == 24 and spec.num_kv_heads == spec.num_heads == 4 and spec.attention_kind == "MLA"
    assert spec.moe_layers == (False, True) and spec.intermediate_size == 96
    assert spec.moe.shared_intermediate_size == 32 and not spec.moe.shared_expert_gate


def test_gpt_oss_sinks_biases_and_alternating_window(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.gpt_oss_gguf()))
    assert spec.model_type == "gpt_oss" and spec.attention_sinks
    assert spec.attention_qkv_bias and spec.attention_out_bias
    assert spec.moe.router_bias and spec.moe.expert_bias
    assert spec.layer_types == ("sliding", "full") and spec.sliding_window == 32
    assert "MXFP4" in dict(spec.file_weights.by_dtype)


def test_gemma3_pattern_norms_and_mqa(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.gemma3_gguf()))
    assert spec.model_type == "gemma3_text" and spec.norms_per_layer == 4 and spec.attention_kind == "MQA"
    assert spec.layer_types == ("sliding",) * 5 + ("full",) and spec.sliding_window == 16
    assert spec.torch_dtype == "float16"  # general.file_type 1 = MOSTLY_F16


def test_phi3_fused_projections(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.phi3_gguf()))
    assert spec.intermediate_size == 96 and spec.mlp_gated
    assert spec.layer_types == ("sliding", "sliding") and spec.sliding_window == 64


def test_mistral_style_llama_with_sliding_window(tmp_path):
    spec = spec_from_gguf(_write(tmp_path, H.llama_gguf(sliding_window=128)))
    assert spec.model_type == "mistral" and spec.layer_types == ("sliding", "sliding")
    spec = spec_from_gguf(_write(tmp_path, H.llama_gguf(sliding_window=4096), "wide.gguf"))
    assert spec.layer_types == ("full", "full") and spec.sliding_window is None  # window >= context


def test_head_count_kv_per_layer_array(tmp_path):
    model = H.llama_gguf()
    model.meta["llama.attention.head_count_kv"] = [2, 2]
    assert spec_from_gguf(_write(tmp_path, model)).num_kv_heads == 2
    model.meta["llama.attention.head_count_kv"] = [2, 4]
    with pytest.raises(UnsupportedArchitectureError, match="differs between layers"):
        spec_from_gguf(_write(tmp_path, model, "varied.gguf"))


def test_intermediate_size_from_tensor_shapes_when_the_key_is_absent(tmp_path):
    model = H.llama_gguf()
    del model.meta["llama.feed_forward_length"]
    spec = spec_from_gguf(_write(tmp_path, model))
    assert spec.intermediate_size == 96
    assert any("ffn_up shape" in n for n in spec.notes)


def test_missing_metadata_key(tmp_path):
    model = H.llama_gguf()
    del model.meta["llama.block_count"]
    path = _write(tmp_path, model)
    with pytest.raises(ModelFileError) as e:
        spec_from_gguf(path)
    assert str(path) in str(e.value) and "llama.block_count" in str(e.value)


def test_block_count_beyond_the_tensor_table(tmp_path):
    model = H.llama_gguf()
    model.meta["llama.block_count"] = 10**9  # would otherwise build per-layer tuples of a billion entries
    with pytest.raises(ModelFileError, match="block_count"):
        spec_from_gguf(_write(tmp_path, model))


def test_unknown_architecture_lists_the_supported_ones(tmp_path):
    model = H.llama_gguf()
    model.arch = "mamba"
    model.meta = {k.replace("llama.", "mamba."): v for k, v in model.meta.items()}
    path = _write(tmp_path, model)
    with pytest.raises(UnsupportedArchitectureError) as e:
        spec_from_gguf(path)
    assert "mamba" in str(e.value) and "llama" in str(e.value) and "qwen3moe" in str(e.value)


def test_truncated_files(tmp_path):
    path = _write(tmp_path, H.llama_gguf())
    full = path.read_bytes()
    header_end = read_gguf_header(path).data_offset
    for cut in (3, 10, 30, header_end // 2, header_end - 5, header_end + 100, len(full) - 1):
        damaged = tmp_path / f"cut{cut}.gguf"
        damaged.write_bytes(full[:cut])
        with pytest.raises(ModelFileError) as e:
            spec_from_gguf(damaged)
        msg = str(e.value)
        assert str(damaged) in msg and "\n" not in msg, cut


def test_not_a_gguf_and_empty_files(tmp_path):
    for name, data in (("empty.gguf", b""), ("text.gguf", b"hello world, this is not a model file at all")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ModelFileError) as e:
            spec_from_gguf(path)
        assert str(path) in str(e.value)


def test_corrupt_counts_do_not_hang_or_leak(tmp_path):
    path = _write(tmp_path, H.llama_gguf())
    raw = bytearray(path.read_bytes())
    raw[16:24] = (2**62).to_bytes(8, "little")  # metadata count
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError):
        spec_from_gguf(path)


def test_split_gguf_reads_every_part(tmp_path):
    model = H.llama_gguf()
    whole = spec_from_gguf(_write(tmp_path, model, "whole.gguf")).file_weights
    parts = model.write(tmp_path / "split.gguf", split_max_tensors=8)
    assert len(parts) > 2
    for part in (parts[0], parts[-1]):
        fw = spec_from_gguf(part).file_weights
        assert (fw.total_bytes, fw.by_dtype, fw.layer_bytes, fw.params) == \
            (whole.total_bytes, whole.by_dtype, whole.layer_bytes, whole.params)
    parts[1].unlink()
    with pytest.raises(ModelFileError, match="missing"):
        spec_from_gguf(parts[0])


def test_tokenizer_strings_are_counted_not_decoded(tmp_path):
    model = H.llama_gguf()
    model.meta["tokenizer.ggml.merges"] = [f"a{i} b{i}" for i in range(5000)]
    header = read_gguf_header(_write(tmp_path, model))
    assert header.metadata["tokenizer.ggml.tokens"] == StringArray(128)
    assert header.metadata["tokenizer.ggml.merges"] == StringArray(5000)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A valid MoE + MLA GGUF (the richest metadata) and where its header ends."""
    path = tmp_path_factory.mktemp("pristine") / "deepseek2.gguf"
    H.deepseek2_gguf().write(path)
    return path.read_bytes(), read_gguf_header(path).data_offset


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_headers_raise_only_library_errors(tmp_path, pristine, data):
    """Flipped, truncated or spliced header bytes: either a spec or a one-line LlmsizerError, never a traceback."""
    raw, header_end = pristine
    blob = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, header_end - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        blob = blob[:data.draw(st.integers(0, len(blob)))]
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(bytes(blob))
    try:
        spec_from_gguf(path)
    except LlmsizerError as e:
        assert "\n" not in str(e) and str(path) in str(e)

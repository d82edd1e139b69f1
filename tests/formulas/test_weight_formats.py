"""Weight formats against independent truth: the gguf package's block table, real bitsandbytes quantization,
the QLoRA paper's bits-per-parameter equation, and the GPTQ/AWQ tensor shapes of their reference kernels."""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.formulas.tensors import Tensor
from llmsizer.formulas.weight_formats import (
    _bnb4,
    _tensor_bytes_simple,
    ggml_types,
    normalize_format,
    weight_bytes,
)


def test_ggml_block_table_matches_the_gguf_package():
    gguf = pytest.importorskip("gguf")
    ours = ggml_types()
    for qtype, (block, nbytes) in gguf.GGML_QUANT_SIZES.items():
        if qtype.name in ours:
            assert (ours[qtype.name]["block"], ours[qtype.name]["bytes"]) == (block, nbytes), qtype.name
    for name in ("Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0", "Q3_K", "Q2_K", "IQ4_XS", "MXFP4"):
        assert name in ours


@pytest.mark.parametrize("quant_type", ["nf4", "fp4"])
@pytest.mark.parametrize("double_quant", [False, True])
def test_bnb_4bit_bytes_equal_real_bitsandbytes_quantization(quant_type, double_quant):
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("bitsandbytes.functional")
    for shape in ((512, 768), (1000, 333)):
        w = torch.randn(*shape, dtype=torch.bfloat16)
        packed, state = F.quantize_4bit(w, quant_type=quant_type, compress_statistics=double_quant, blocksize=64)
        real = packed.numel() * packed.element_size()
        for key, v in state.as_dict(packed=False).items():
            if torch.is_tensor(v):
                real += v.numel() * v.element_size()
            elif key == "nested_offset":
                real += 4  # the fp32 offset subtracted before nested quantization
        assert _bnb4(w.numel(), double_quant) == real


def test_bnb_double_quant_matches_the_qlora_paper_equation():
    # QLoRA (arXiv 2305.14314) section 3: absmax costs 32/64 = 0.5 bits/param, double quantization
    # 8/64 + 32/(64*256) = 0.127 bits/param.
    n = 64 * 256 * 4096
    assert (8 * _bnb4(n, False)) / n - 4 == pytest.approx(0.5, abs=1e-3)
    assert (8 * _bnb4(n, True)) / n - 4 == pytest.approx(8 / 64 + 32 / (64 * 256), abs=1e-3)


def test_llm_int8_bytes_equal_real_bitsandbytes_vectorwise_quantization():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("bitsandbytes.functional")
    w = torch.randn(384, 512, dtype=torch.float16)
    cb, scb, _ = F.int8_vectorwise_quant(w)
    real = cb.numel() * cb.element_size() + scb.numel() * scb.element_size()
    t = Tensor("ffn_up", "mlp", (384, 512))
    assert _tensor_bytes_simple("llm.int8", t, 128)[0] == real


@pytest.mark.parametrize("fmt,bits", [("gptq-int4", 4), ("gptq-int8", 8), ("awq-int4", 4)])
def test_gptq_awq_bytes_follow_the_reference_kernel_shapes(fmt, bits):
    # AutoGPTQ qlinear (QuantLinear.__init__): qweight int32 [in*bits/32, out], qzeros int32
    # [ceil(in/g), out*bits/32], scales fp16 [ceil(in/g), out], g_idx int32 [in].
    # AutoAWQ WQLinear_GEMM: qweight int32 [in, out/8], qzeros int32 [ceil(in/g), out/8], scales fp16 [ceil(in/g), out].
    out_f, in_f, g = 4096, 11008, 128
    groups = math.ceil(in_f / g)
    if fmt.startswith("gptq"):
        expected = 4 * (in_f * bits // 32) * out_f + 4 * groups * (out_f * bits // 32) + 2 * groups * out_f + 4 * in_f
    else:
        expected = 4 * in_f * (out_f // 8) + 4 * groups * (out_f // 8) + 2 * groups * out_f
    t = Tensor("ffn_down", "mlp", (out_f, in_f))
    assert _tensor_bytes_simple(fmt, t, g)[0] == expected


def test_formats_leave_embeddings_norms_and_lm_head_unquantized():
    spec = find("llama-3.1-8b").spec()
    emb = spec.vocab_size * spec.hidden_size
    for fmt in ("gptq-int4", "awq-int4", "nf4", "fp8", "int8", "llm.int8"):
        wb = weight_bytes(spec, fmt)
        assert wb.by_component["embedding"] == 2 * emb, fmt
        assert wb.by_component["lm_head"] == 2 * emb, fmt
        assert wb.by_component["norm"] == 2 * (2 * spec.num_layers + 1) * spec.hidden_size, fmt


def test_gguf_output_tensor_gets_q6_k_in_q4_k_m_and_tied_models_quantize_token_embd_like_output():
    untied = weight_bytes(find("llama-3.1-8b").spec(), "q4_k_m")
    tied = weight_bytes(find("llama-3.2-1b").spec(), "q4_k_m")
    spec = find("llama-3.2-1b").spec()
    # llama-quant.cpp: the output tensor (or token_embd when tied) -> Q6_K = 210 B per 256
    assert tied.by_component["embedding"] == spec.vocab_size * spec.hidden_size // 256 * 210
    s8 = find("llama-3.1-8b").spec()
    assert untied.by_component["lm_head"] == s8.vocab_size * s8.hidden_size // 256 * 210
    assert untied.by_component["embedding"] == s8.vocab_size * s8.hidden_size // 256 * 144  # Q4_K


def test_gguf_q4_k_m_size_matches_a_published_file():
    # runyard.dev blog "Q4_K_M vs Q5_K_M vs Q6_K vs Q8_0" (2026): "A 16-bit Llama-3.1-8B weighs 14.96 GB. The
    # Q4_K_M build of the exact same model is 4.57 GB" (the figures are GiB: 8.03e9 x 2 B = 14.96 GiB).
    spec = find("llama-3.1-8b").spec()
    assert weight_bytes(spec, "bf16").total / 2**30 == pytest.approx(14.96, abs=0.01)
    assert weight_bytes(spec, "q4_k_m").total / 2**30 == pytest.approx(4.57, rel=0.01)


@pytest.mark.parametrize("alias,canonical", [("Q4_K_M", "gguf:q4_k_m"), ("int4", "gptq-int4"),
                                              ("bfloat16", "bf16"), ("gguf-q8_0", "gguf:q8_0")])
def test_format_aliases(alias, canonical):
    assert normalize_format(alias) == canonical


def test_unknown_format_lists_the_known_ones():
    with pytest.raises(InputError, match="known: .*nf4"):
        normalize_format("q9_z")


# gpt-oss GGUF files, measured by others. llama-bench prints the model's tensor bytes in GiB ("size" column):
# community.frame.work/t/will-the-ai-max-395-128gb-be-able-to-run-gpt-oss-120b/73280/26 (2025): ggml-org
# gpt-oss-120b-mxfp4 "59.02 GiB", unsloth gpt-oss-120b-F16.gguf "60.87 GiB" (F16 attention/embeddings, MXFP4
# experts). ailocalcheck.com/model/unsloth/gpt-oss-120b-GGUF lists the unsloth files' weights as Q8_0 59.03,
# Q4_K_M 58.46 (its F16 row reads 60.88, the llama-bench 60.87 GiB: the unit is GiB). bartowski's
# openai_gpt-oss-20b-GGUF card (llama.cpp b6096; mirror mygguf.com/models/bartowski_openai_gpt-oss-20b-GGUF.html):
# MXFP4 "12.1GB", Q6_K "12.04GB", "All quants keep the feed forward networks at mxfp4".
@pytest.mark.parametrize("model,fmt,published,unit,tol", [
    ("gpt-oss-120b", "gguf:mxfp4_moe", 59.02, 2**30, 0.005),
    ("gpt-oss-120b", "gguf:f16", 60.87, 2**30, 0.005),
    ("gpt-oss-120b", "gguf:q8_0", 59.03, 2**30, 0.02),  # file sizes: + metadata and tokenizer (~10 MiB)
    ("gpt-oss-120b", "gguf:q4_k_m", 58.46, 2**30, 0.02),
    ("gpt-oss-20b", "gguf:mxfp4_moe", 12.1, 1e9, 0.05),
    ("gpt-oss-20b", "gguf:q6_k", 12.04, 1e9, 0.02),
])
def test_gpt_oss_gguf_sizes_match_published_files(model, fmt, published, unit, tol):
    assert weight_bytes(find(model).spec(), fmt).total / unit == pytest.approx(published, abs=tol)


def test_mxfp4_experts_stay_mxfp4_in_every_gguf_type_and_dense_models_do_not_move():
    # conversion/gpt_oss.py writes the experts as raw MXFP4 whatever --outtype; llama-quantize will not requantize
    # them. Every other tensor follows the file type: F16 attention in gguf:f16, Q8_0 in q8_0, F32 1-D tensors.
    spec = find("gpt-oss-20b").spec()
    experts = weight_bytes(spec, "mxfp4").by_storage["mxfp4"]  # the checkpoint's own MXFP4 expert bytes
    for fmt in ("gguf:f32", "gguf:f16", "gguf:bf16", "gguf:q8_0", "gguf:q6_k", "gguf:q4_k_m", "gguf:q2_k"):
        wb = weight_bytes(spec, fmt)
        assert wb.by_storage["MXFP4"] == experts, fmt
    f16 = weight_bytes(spec, "gguf:f16").by_storage
    assert set(f16) == {"F16", "F32", "MXFP4"}
    # a dense bf16 checkpoint has nothing pre-quantized: its GGUF F16 is 2 B per matrix element
    dense = find("llama-3.1-8b").spec()
    assert "MXFP4" not in weight_bytes(dense, "gguf:q4_k_m").by_storage
    assert weight_bytes(dense, "gguf:f16").total == pytest.approx(weight_bytes(dense, "bf16").total, rel=1e-4)


# Fused-QKV families (Phi-3/Phi-4: one blk.N.attn_qkv tensor in the GGUF). bartowski's phi-4-GGUF card (llama.cpp
# release b4456; mirror huggingface.yyhnxgf.workers.dev/bartowski/phi-4-GGUF): "phi-4-Q4_K_M.gguf Q4_K_M 9.05GB",
# "phi-4-Q5_K_M.gguf Q5_K_M 10.60GB", "phi-4-Q8_0.gguf Q8_0 15.58GB", "phi-4-f16.gguf f16 29.32GB" (file sizes in
# GB, two decimals: the tokenizer and metadata add a few MB). With q, k and v typed as separate tensors (attn_v's
# use_more_bits rule) the K-quants came out 8.89 and 10.41 GB.
@pytest.mark.parametrize("fmt,published", [("gguf:q4_k_m", 9.05), ("gguf:q5_k_m", 10.60), ("gguf:q8_0", 15.58),
                                           ("gguf:f16", 29.32)])
def test_phi_4_gguf_sizes_match_published_files(fmt, published):
    assert weight_bytes(find("phi-4").spec(), fmt).total / 1e9 == pytest.approx(published, abs=0.01)


@pytest.mark.parametrize("ftype,qkv", [("q3_k_m", "Q4_K"), ("q3_k_l", "Q4_K"), ("iq3_m", "Q4_K"), ("q4_k_m", "Q5_K"),
                                       ("q5_k_m", "Q6_K"), ("q4_k_s", "Q4_K"), ("q6_k", "Q6_K")])
def test_the_fused_qkv_tensor_takes_llama_cpps_attn_qkv_rule_on_every_layer(ftype, qkv):
    # llama-quant.cpp ATTENTION_QKV: Q3_K_M/Q3_K_L/IQ3_M -> Q4_K, Q4_K_M -> Q5_K, Q5_K_M -> Q6_K, else the file
    # type's default; q, k and v rows of one layer share one type (they are one tensor in the file)
    from llmsizer.formulas.tensors import model_tensors
    from llmsizer.formulas.weight_formats import gguf_tensor_type
    spec = find("phi-3-mini-4k-instruct").spec()
    types = {gguf_tensor_type(spec, ftype, t) for t in model_tensors(spec) if t.role in ("attn_q", "attn_k", "attn_v")}
    assert types == {qkv}
    llama = find("llama-3.1-8b").spec()  # separate q/k/v in its GGUF: attn_v keeps its use_more_bits rule
    v_types = {gguf_tensor_type(llama, "q4_k_m", t) for t in model_tensors(llama) if t.role == "attn_v"}
    assert v_types == {"Q4_K", "Q6_K"}

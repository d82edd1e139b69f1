"""TransformerEngine's MXFP8 training recipe ('transformer-engine-mxfp8', formulas/float8_training.py eqs. T1m, F3m).

TE does not run on a CPU. The independent truth for the bytes is torchao's own MX tensor (torchao 0.18.0
``torchao/prototype/mx_formats/mx_tensor.py`` ``MXTensor.to_mx``, run here on the CPU), which implements the same OCP
MX format: e4m3 data, one E8M0 scale per 32 consecutive elements along the last dimension. With
``is_swizzled_scales=True`` it pads its scales to the 128 x 4 tiles Blackwell's block-scaled MMA reads, the same
alignment TE's ``MXFP8Quantizer::get_scale_shape`` applies (NVIDIA/TransformerEngine @d0067d0d
pytorch/csrc/quantizer.cpp lines 1852-1879: rowwise [roundup(rows, 128), roundup(cols / 32, 4)], columnwise
[roundup(rows / 32, 4), roundup(cols, 128)], i.e. the rowwise rule of the transpose). TE's columnwise copy is the
rowwise quantization of the transpose (scales along the other dimension), so torchao's MX tensor of ``x.t()`` is its
size. The element counts for the whole-model checks come from Llama-3.1-8B's config.json numbers written out here.
"""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.float8_training import (
    float8_cast_bytes,
    mxfp8_supported,
    mxfp8_tensor_bytes,
    te_weight_copy_bytes,
)
from llmsizer.readers.hf_config import spec_from_config

# meta-llama/Llama-3.1-8B config.json
H, HEADS, KV, HEAD_DIM, FFN, LAYERS, V = 4096, 32, 8, 128, 14336, 32, 128256
LLAMA_8B = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, num_attention_heads=HEADS,
                num_key_value_heads=KV, intermediate_size=FFN, num_hidden_layers=LAYERS, vocab_size=V,
                max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
                torch_dtype="bfloat16", hidden_act="silu", rope_theta=500000.0)
# te.Linear weights of one layer: q [H, H], k and v [KV*d, H], o [H, H], gate and up [I, H], down [H, I]
LAYER_SHAPES = [(H, H), (KV * HEAD_DIM, H), (KV * HEAD_DIM, H), (H, H), (FFN, H), (FFN, H), (H, FFN)]
LAYER_ELEMENTS = sum(r * c for r, c in LAYER_SHAPES)


def _torchao_mx_bytes(rows: int, cols: int, columnwise: bool) -> int:
    torch = pytest.importorskip("torch")
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    x = torch.randn(rows, cols, dtype=torch.bfloat16)
    t = mx.MXTensor.to_mx(x.t().contiguous() if columnwise else x, torch.float8_e4m3fn, 32, is_swizzled_scales=True)
    assert t.qdata.element_size() == 1 and t.scale.element_size() == 1  # e4m3 data, E8M0 scales
    return t.qdata.numel() + t.scale.numel()


@pytest.mark.parametrize(("rows", "cols"), [(256, 4096), (96, 160), (32, 32), (1024, 448)])
def test_tensor_bytes_against_torchao_mx_tensor(rows, cols):
    row = _torchao_mx_bytes(rows, cols, columnwise=False)
    col = _torchao_mx_bytes(rows, cols, columnwise=True)
    assert mxfp8_tensor_bytes(rows, cols, rowwise=True, columnwise=False) == row
    assert mxfp8_tensor_bytes(rows, cols, rowwise=False, columnwise=True) == col
    assert mxfp8_tensor_bytes(rows, cols) == row + col


def test_tensor_dims_must_be_blocks():
    with pytest.raises(ValueError, match="multiples of 32"):
        mxfp8_tensor_bytes(48, 64)


def test_weight_copy_is_both_copies_with_scales_on_every_gpu():
    # Llama-3.1-8B's dimensions are multiples of 128: no scale padding, so the element rule is TE's exact layout
    exact = sum(mxfp8_tensor_bytes(r, c) for r, c in LAYER_SHAPES)
    hand = 2 * (LAYER_ELEMENTS + LAYER_ELEMENTS // 32)  # rowwise + columnwise, 1 B each + 1 B per 32 elements
    assert exact == hand
    for cc in (100, 103, 90):  # unlike tensor scaling (eq. T1), Blackwell's non-TN GEMMs do not drop a copy
        assert te_weight_copy_bytes(LAYER_ELEMENTS, cc, recipe="transformer-engine-mxfp8") == hand
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 100, columnwise=False, recipe="transformer-engine-mxfp8") == hand // 2
    assert te_weight_copy_bytes(LAYER_ELEMENTS, 100) == LAYER_ELEMENTS  # tensor scaling on B200: one 1-B buffer


def test_supported_capabilities():
    # TE _compute_mxfp8_support (quantization.py lines 162-168): 10.x and 11.x; not 9.0, 8.9, 12.x, unknown
    assert [mxfp8_supported(c) for c in (89, 90, 100, 103, 110, 120, 121, None)] == [
        False, False, True, True, True, False, False, False]


def test_cast_bytes_one_pass_two_copies():
    # one kernel reads the 16-bit tensor (c B) and writes two 1-B copies and two E8M0 scale arrays (1/32 B each):
    # input and weight in the forward, grad_output in the backward; no amax pass (the block amax is in-kernel)
    t, i, o, c = 4096, 4096, 14336, 2
    per = c + 2 + 2 / 32
    fwd, bwd = float8_cast_bytes(t, i, o, c, "transformer-engine-mxfp8")
    assert fwd == pytest.approx(per * (t * i + i * o)) and bwd == pytest.approx(per * t * o)


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(LLAMA_8B, name="llama-3.1-8b-hand")


def test_estimate_holds_every_layers_copy(spec):
    est = estimate_training(spec, precision="bf16", float8=True, float8_recipe="transformer-engine-mxfp8",
                            grad_checkpointing="none", seq_len=2048, gpu_capability=100)
    held = next(i.bytes for i in est.items if i.name == "fp8_weight_copies")
    assert held == LAYERS * 2 * (LAYER_ELEMENTS + LAYER_ELEMENTS // 32)


def _one_line_refusal(*argv: str) -> str:
    code, out, err = run(*argv)
    assert code == 2, (code, out[-300:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    return lines[0]


MX = ("--precision", "megatron-bf16", "--zero", "1", "--gpus", "8", "--float8", "--float8-recipe",
      "transformer-engine-mxfp8")


@pytest.mark.parametrize(("device", "cc"), [("h100-sxm", "9.0"), ("rtx-5090", "12.0")])
def test_cli_refuses_off_datacenter_blackwell(device, cc):
    line = _one_line_refusal("train", "llama-3.1-8b", "--device", device, *MX)
    assert "transformer-engine-mxfp8" in line and f"compute capability {cc}" in line


def test_cli_refuses_mxfp8_param_gather():
    line = _one_line_refusal("train", "llama-3.1-8b", "--device", "b200", *MX, "--fp8-param-gather")
    assert "reuse_grad_buf_for_mxfp8_param_ag" in line


def test_cli_sizes_it_on_b200():
    code, out, err = run("train", "llama-3.1-8b", "--device", "b200", *MX, "--tokens", "1B")
    assert code == 0, err
    assert "float8_recipe=transformer-engine-mxfp8" in out and "eq. T1m" in out
    code, d = run_json("train", "llama-3.1-8b", "--device", "b200", *MX, "--tokens", "1B")
    why = {a["name"]: a["why"] for a in d["duration"]["assumptions"]}
    assert "MXFP8's block-scaled GEMMs taken at the catalog's dense FP8 rate" in why["float8_gemm_flops_per_token"]
    assert "eq. (F3m)" in why["float8_cast_bytes_per_token"]


def test_request_field_accepts_it():
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    def job(device: str) -> str:
        return ("version: 1\njobs:\n  - name: pt\n    kind: training\n    model: {name: llama-3.1-8b}\n"
                "    method: full\n    settings: {micro_batch: 1, seq_len: 4096, precision: megatron-bf16, zero: 1, "
                "float8: true, float8_recipe: transformer-engine-mxfp8}\n    dataset: {tokens: 1B tokens}\n"
                f"    resources: {{device: {device}, count: 8}}\n")
    plan = make_plan(parse_request(job("b200"), source="t.yaml"), alternatives=False)
    assert plan.jobs[0].section("duration").value("seconds") > 0
    with pytest.raises(ValueError, match="datacenter Blackwell only"):
        make_plan(parse_request(job("h100-sxm"), source="t.yaml"), alternatives=False)

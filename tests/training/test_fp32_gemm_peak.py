"""A precision 'fp32' training run's GEMMs are fp32 matmuls: timed at the device's FP32 peak, or its TF32 tensor peak
with ``tf32`` (#12 speed: every GPU run was timed at the dense BF16 peak whatever its precision, an fp32 run on an
A100 16x too fast).

Independent truth: NVIDIA's A100 datasheet (A100 Tensor Core GPU datasheet, "Peak FP32 19.5 TF, Peak TF32 Tensor
Core 156 TF, Peak BFLOAT16 Tensor Core 312 TF", dense) written here, not read from the catalog or the estimate;
torch's own defaults (``torch.backends.cuda.matmul.allow_tf32`` False, ``get_float32_matmul_precision()``
'highest' since 1.12) read from the installed torch; the compute capability below which no TF32 tensor cores exist
(8.0, NVIDIA Ampere architecture whitepaper)."""

from __future__ import annotations

from typing import Any

import pytest

from cli_capture import run, run_json
from llmsizer import fit_training
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.device import fp32_matmul_peak
from llmsizer.estimate.duration import Duration, training_duration_for
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

# NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB), dense, FLOP/s
A100_FP32, A100_TF32, A100_BF16 = 19.5e12, 156e12, 312e12
V100_SXM2_FP32 = 15.7e12  # NVIDIA Tesla V100 datasheet, SXM2: 15.7 TFLOPS single precision
# NVIDIA H200 datasheet (H200 SXM): 'FP32 67 TFLOPS', 'TF32 Tensor Core 989 TFLOPS', 'BFLOAT16 Tensor Core 1,979
# TFLOPS' (the tensor figures with sparsity)
H200_FP32, H200_TF32_SPARSE, H200_BF16_SPARSE = 67e12, 989e12, 1979e12
MI300X_TF32 = 653.7e12  # AMD ROCm docs, MI300 microarchitecture, MI300X peak table: TF32 653.7 TFLOPS

RUN = {"method": "full", "seq_len": 2048, "micro_batch": 4}


def _duration(device: str, model: str = "llama-3.1-8b", **fields: Any) -> Duration:
    dev = builtin_catalog().devices[device]
    return training_duration_for(load_model(model), dev, 1, 1e9, {**RUN, **fields})


def _gemm_seconds(d: Duration) -> float:
    """The GEMMs' seconds per micro-step at shape efficiency 1: the compute less the kernels timed apart
    (memory-bound kernels, the fused attention kernel; no QLoRA dequantization, no float8 here)."""
    st = d.step
    assert st is not None and st.dequant_seconds == 0 and st.float8_cast_seconds == 0
    assert st.compute_seconds > st.launch_seconds  # the device's work, not the host's launches, sets the micro-step
    return (st.compute_seconds - st.elementwise_seconds - st.attention_seconds) * st.shape_efficiency


def test_torch_runs_fp32_matmuls_without_tf32_by_default() -> None:
    torch = pytest.importorskip("torch")
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"


def test_fp32_gemms_take_the_datasheet_ratio_longer_than_bf16() -> None:
    """The same FLOPs at the same utilisation: an fp32 run's GEMM time over a bf16-mixed run's is the A100's BF16 /
    FP32 peak ratio, 16 (before: 1, both at the BF16 peak); with tf32 the BF16 / TF32 ratio, 2."""
    bf16 = _duration("a100-sxm-80gb")
    fp32 = _duration("a100-sxm-80gb", precision="fp32")
    tf32 = _duration("a100-sxm-80gb", precision="fp32", tf32=True)
    assert (bf16.peak_key, fp32.peak_key, tf32.peak_key) == ("bf16", "fp32", "tf32")
    assert fp32.peak_flops == A100_FP32 and tf32.peak_flops == A100_TF32 and bf16.peak_flops == A100_BF16
    assert _gemm_seconds(fp32) / _gemm_seconds(bf16) == pytest.approx(A100_BF16 / A100_FP32, rel=1e-9)
    assert _gemm_seconds(tf32) / _gemm_seconds(bf16) == pytest.approx(A100_BF16 / A100_TF32, rel=1e-9)
    assert fp32.seconds is not None and tf32.seconds is not None and bf16.seconds is not None
    assert fp32.seconds > tf32.seconds > bf16.seconds
    notes = {a.name: a for a in fp32.assumptions}
    assert notes["tf32"].value is False and notes["tf32"].default and "1.12" in notes["tf32"].why
    assert notes["gemm_peak_dtype"].value == "fp32" and "uncalibrated" in notes["gemm_peak_dtype"].why
    assert {a.name: a for a in tf32.assumptions}["tf32"].default is False  # given


def test_tf32_changes_nothing_for_16_bit_gemms() -> None:
    assert _duration("a100-sxm-80gb", tf32=True).seconds == _duration("a100-sxm-80gb").seconds


def test_fp32_memory_efficient_attention_runs_3xtf32_on_ampere() -> None:
    """SDPA on fp32 q/k/v runs the memory-efficient kernel, whose matmuls are 3xTF32 on sm >= 80 (three TF32 MMAs
    per product): a third of the TF32 peak, with or without tf32."""
    for tf32 in (False, True):
        d = _duration("a100-sxm-80gb", precision="fp32", tf32=tf32)
        notes = {a.name: a.value for a in d.assumptions}
        assert notes["attention_kernel_timed"] == "mem-efficient"
        assert notes["fp32_attention_peak"] == pytest.approx(A100_TF32 / 3)


def test_devices_without_a_tf32_or_fp32_peak_are_warned_or_refused() -> None:
    v100 = _duration("v100-sxm2-32gb", model="qwen2.5-0.5b", precision="fp32", tf32=True)  # no TF32 below sm 8.0
    assert v100.peak_key == "fp32" and v100.peak_flops == V100_SXM2_FP32
    assert any("no TF32 tensor cores" in w for w in v100.warnings)
    # TF32 tensor cores (DGX Spark GB10, sm 12.1) but no sourced TF32 figure: refused, not timed at a stand-in rate
    pro_ws = _duration("dgx-spark", model="qwen2.5-0.5b", precision="fp32", tf32=True)
    assert pro_ws.seconds is None and pro_ws.peak_flops is None and pro_ws.peak_key == "tf32"
    assert any("no sourced TF32 peak" in w and "not timed" in w for w in pro_ws.warnings)
    assert _duration("dgx-spark", model="qwen2.5-0.5b", precision="fp32").seconds is not None  # tf32 off: FP32 peak
    mi250x = _duration("mi250x", model="qwen2.5-0.5b", precision="fp32")  # no sourced FP32 figure: not timed
    assert mi250x.seconds is None and any("no sourced fp32 peak" in w for w in mi250x.warnings)
    # the RTX PRO 6000 Server Edition, the device here until devsrc38, now has NVIDIA's datasheet '120 FP32 TFLOPS'
    rtx_pro = _duration("rtx-pro-6000-server", model="qwen2.5-0.5b", precision="fp32")
    assert rtx_pro.seconds is not None and rtx_pro.peak_key == "fp32" and rtx_pro.peak_flops == 120e12


def test_tf32_on_any_catalog_gpu_is_its_tf32_peak_or_said() -> None:
    """No silent stand-in rate: on every catalog GPU, tf32 gives the sourced TF32 peak, or a warning that says why
    it does not (no TF32 units: the FP32 peak; TF32 units but no figure: not timed)."""
    gpus = [d for d in builtin_catalog().devices.values() if d.kind == "gpu"]
    assert len(gpus) >= 25
    for d in gpus:
        p, key, warning = fp32_matmul_peak(d, tf32=True)
        tf32_figure = d.peak_flops("tf32")[0]
        if tf32_figure is not None:
            assert (p, key) == (tf32_figure, "tf32"), d.id
        elif key == "tf32":  # TF32 units, no figure: refused
            assert p is None and warning is not None and "not timed" in warning, d.id
        else:  # no TF32 units: the FP32 peak (None where unsourced: the caller says it cannot time it)
            assert key == "fp32" and p == d.peak_flops("fp32")[0], d.id
            assert warning is not None and "changes nothing" in warning, d.id


def test_cdna2_and_cdna4_have_no_tf32_units() -> None:
    """AMD's datatype table (rocprofiler-compute performance-model.rst: TF32 GEMM ❌ on CDNA2 and CDNA4) is the
    catalog's null flops.tf32: tf32 changes nothing there, said as such (not 'unsourced')."""
    for dev in ("mi250x", "mi355x"):
        p, key, warning = fp32_matmul_peak(builtin_catalog().devices[dev], tf32=True)
        assert key == "fp32" and warning is not None and "no TF32 matrix units" in warning, dev


def test_rocm_tf32_names_the_environment_switch() -> None:
    """ROCm torch ignores allow_tf32 unless HIPBLASLT_ALLOW_TF32=1 (pytorch ATen/Context.cpp setAllowTF32CuBLAS under
    USE_ROCM): an MI300X run with tf32 is timed at its TF32 peak (AMD MI300 microarchitecture doc: 653.7) and says so."""
    p, key, warning = fp32_matmul_peak(builtin_catalog().devices["mi300x"], tf32=True)
    assert (p, key) == (MI300X_TF32, "tf32")
    assert warning is not None and "HIPBLASLT_ALLOW_TF32=1" in warning


def test_h200_tf32_sits_between_fp32_and_bf16_at_the_datasheet_ratio() -> None:
    """--tf32 on an H200 (#12 tf32cat: the catalog had no H200 TF32 figure, so tf32 fell back to the FP32 peak): its
    fp32 GEMMs run faster than without tf32 and slower than bf16, by NVIDIA's H200 datasheet ratios (sparse
    figures, 'TF32 Tensor Core 989 TFLOPS', 'BFLOAT16 Tensor Core 1,979 TFLOPS', 'FP32 67 TFLOPS'; the dense
    rates are half the sparse ones, so the tensor ratio is the same)."""
    bf16 = _duration("h200")
    fp32 = _duration("h200", precision="fp32")
    tf32 = _duration("h200", precision="fp32", tf32=True)
    assert (bf16.peak_key, fp32.peak_key, tf32.peak_key) == ("bf16", "fp32", "tf32")
    assert not any("TF32" in w for w in tf32.warnings)
    assert fp32.seconds is not None and tf32.seconds is not None and bf16.seconds is not None
    assert fp32.seconds > tf32.seconds > bf16.seconds
    assert tf32.peak_flops == pytest.approx(H200_TF32_SPARSE / 2, rel=1e-3)
    tf32_over_bf16 = _gemm_seconds(tf32) / _gemm_seconds(bf16)
    assert tf32_over_bf16 == pytest.approx(H200_BF16_SPARSE / H200_TF32_SPARSE, rel=2e-3)
    assert _gemm_seconds(fp32) / _gemm_seconds(tf32) == pytest.approx(H200_TF32_SPARSE / 2 / H200_FP32, rel=2e-3)


def test_the_cli_the_python_api_and_a_request_file_take_tf32() -> None:
    args = ("train", "qwen2.5-0.5b", "--method", "full", "--precision", "fp32", "--batch", "1", "--seq", "2048",
            "--device", "a100-sxm-80gb", "--tokens", "10M")
    code, off = run_json(*args)
    code_on, on = run_json(*args, "--tf32")
    assert code == code_on == 0
    assert (off["duration"]["peak_key"], on["duration"]["peak_key"]) == ("fp32", "tf32")
    assert on["duration"]["peak_flops"] == A100_TF32
    py = fit_training("qwen2.5-0.5b", "a100-sxm-80gb", method="full", precision="fp32", tf32=True, micro_batch=1,
                      seq_len=2048, tokens=10e6)
    assert py.duration is not None
    assert py.duration.seconds == pytest.approx(on["duration"]["seconds"], rel=1e-12)
    req = parse_request("""version: 1
title: fp32 with tf32
jobs:
  - name: training
    kind: training
    model:
      name: qwen2.5-0.5b
    method: full
    settings:
      precision: fp32
      tf32: true
      micro_batch: 1
      seq_len: 2048
      train_tokens: 10M
    dataset:
      tokens: 10M tokens
    resources:
      device: a100-sxm-80gb
      count: 1
""", source="request.yaml")
    (job,) = make_plan(req).jobs
    sec = next(s for s in job.sections if s.key == "duration")
    assert next(f.value for f in sec.figures if f.key == "seconds") == pytest.approx(on["duration"]["seconds"],
                                                                                   rel=1e-12)
    assert run("train", "qwen2.5-0.5b", "--tf32", "--precision", "fp32", "--memory", "80GiB")[0] == 0


def test_sdpa_math_kernel_reads_the_same_rule() -> None:
    """Falcon-7B's SDPA call runs the math kernel, whose score bmm are fp32 matmuls (test_math_kernel_rate.py): with
    tf32 they run at the TF32 tensor peak, the same rule as the GEMMs of precision fp32."""
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    fields = {"method": "lora", "seq_len": 2048, "micro_batch": 1}
    off, on = (training_duration_for(load_model("falcon-7b"), dev, 1, 1e9, {**fields, "tf32": t}) for t in (False, True))
    peak = {d: {a.name: a.value for a in d.assumptions}["math_kernel_matmul_peak"] for d in (off, on)}
    assert (peak[off], peak[on]) == (A100_FP32, A100_TF32)
    assert off.step is not None and on.step is not None and on.step.attention_seconds < off.step.attention_seconds


def test_an_unsourced_tf32_peak_leaves_a_16_bit_run_without_the_math_kernel_timed() -> None:
    """tf32 on a bf16 run reaches only SDPA's math kernel: on a card with TF32 units but no sourced TF32 figure (DGX
    Spark's GB10, sm 12.1) a model whose SDPA call takes a fused kernel (Llama 3.2 1B) is still timed at the
    16-bit peak; Falcon-7B's, which runs the math kernel, is not timed (tests/training/test_math_kernel_rate.py: the
    fp32 GEMMs' rule; it was timed at the BF16 peak before)."""
    dev = builtin_catalog().devices["dgx-spark"]
    run = {"method": "lora", "seq_len": 2048, "micro_batch": 1, "tf32": True}
    d = training_duration_for(load_model("llama-3.2-1b"), dev, 1, 1e9, run)
    assert d.seconds is not None and d.peak_key in ("bf16", "fp16")
    assert training_duration_for(load_model("falcon-7b"), dev, 1, 1e9, run).seconds is None


def test_an_fp32_prefill_is_timed_at_the_fp32_peak_tf32_off() -> None:
    code, out = run_json("fit", "qwen2.5-0.5b", "--device", "a100-sxm-80gb", "--weights", "fp32")
    assert code == 0 and out["speed"]["details"]["peak_flops"] == A100_FP32
    tf32 = [a for a in out["speed"]["assumptions"] if a["name"] == "tf32"]
    assert len(tf32) == 1 and tf32[0]["value"] is False and tf32[0]["default"] is True

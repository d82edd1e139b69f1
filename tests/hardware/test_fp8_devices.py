"""probe17 D1: a device that runs FP8 GEMMs is treated as one, whether or not its catalog row lists an FP8 figure.
One rule (estimate/device.py ``fp8_tensor_cores`` / ``fp8_peak``) feeds the serving format ladder
(estimate/format_search.py), the prefill's matmul dtype (estimate/speed.py) and float8 training's GEMM rate
(estimate/duration.py).

Independent truth:
- NVIDIA's compute capabilities (developer.nvidia.com/cuda-gpus, written out by hand here, not read from the
  catalog) and the PTX ISA's line for FP8 (e4m3/e5m2) MMA at sm_89; AMD's FP8 matrix cores on CDNA3/CDNA4 (MI300X,
  MI325X, MI355X).
- The datasheet figures themselves: NVIDIA's H100 NVL column 'FP8 Tensor Core* 3,341 teraFLOPS' and
  'BFLOAT16 Tensor Core* 1,671' (with sparsity), the L40 datasheet's 'FP8 Tensor Core 362 | 724*', and the FP8:16-bit
  ratio of every catalog NVIDIA row whose two figures both come from a datasheet.
- The probe's own comparison: the H100 NVL (94 GB) keeps fp8 where the smaller H100 SXM (80 GB) does.
"""

from __future__ import annotations

import pytest

from llmsizer import fit
from llmsizer.catalog.hardware import builtin_catalog, load_catalog
from llmsizer.estimate.device import FP8_TENSOR_RATIO, float8_refusal, fp8_peak, fp8_tensor_cores
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

CAT = builtin_catalog().devices

# NVIDIA's compute capability table (developer.nvidia.com/cuda-gpus), by hand: the FP8 generations (>= 8.9) and
# those before them
FP8_NVIDIA = {"l4": 8.9, "l40": 8.9, "l40s": 8.9, "rtx-4090": 8.9, "rtx-4080-super": 8.9, "rtx-6000-ada": 8.9,
              "h100-sxm": 9.0, "h100-pcie": 9.0, "h100-nvl": 9.0, "h200": 9.0, "h20": 9.0, "gh200": 9.0,
              "b200": 10.0, "gb200": 10.0, "b300": 10.3, "gb300": 10.3, "rtx-5090": 12.0, "rtx-5080": 12.0,
              "rtx-pro-6000-server": 12.0, "rtx-pro-6000-workstation": 12.0, "dgx-spark": 12.1}
NO_FP8_NVIDIA = {"a100-sxm-80gb": 8.0, "a100-pcie-40gb": 8.0, "a40": 8.6, "a10": 8.6, "a10g": 8.6, "rtx-3090": 8.6,
                 "rtx-a6000": 8.6, "t4": 7.5, "v100-sxm2-32gb": 7.0}
FP8_AMD = ("mi300x", "mi325x", "mi355x")  # CDNA3, CDNA4


def _fp8_capable_rows() -> list[str]:
    """Every catalog GPU the hardware says runs FP8: NVIDIA at capability >= 8.9, AMD CDNA3/CDNA4."""
    out = []
    for d in CAT.values():
        if d.kind != "gpu":
            continue
        cc = d.compute_capability.base if d.compute_capability is not None else None
        if (d.vendor == "NVIDIA" and cc is not None and float(cc) >= 8.9) or d.architecture in ("cdna3", "cdna4"):
            out.append(d.id)
    return out


def test_the_hand_lists_agree_with_the_catalog_capabilities() -> None:
    for name, cc in {**FP8_NVIDIA, **NO_FP8_NVIDIA}.items():
        assert CAT[name].capability == round(cc * 10), name
    assert set(FP8_NVIDIA) | set(FP8_AMD) <= set(_fp8_capable_rows())


@pytest.mark.parametrize("name", sorted({*FP8_NVIDIA, *FP8_AMD} | set(_fp8_capable_rows())))
def test_every_fp8_device_has_a_figure_or_the_named_assumption(name: str) -> None:
    """Each catalog GPU with FP8 tensor cores is timed at an FP8 rate: its sourced dense figure (with source and date),
    or 2 x its 16-bit peak named as ``fp8_peak``, and then its row says why it has no figure (an explicit null with a
    note, shown by `hardware show`), so no row is left silently without one."""
    d = CAT[name]
    assert fp8_tensor_cores(d)
    peak, stand_in = fp8_peak(d)
    assert peak is not None and peak > 0
    if "fp8" in d.flops:
        v = d.flops["fp8"]
        assert stand_in is None and v.source and v.date
        assert peak == float(v.base)
    else:
        assert stand_in is not None and stand_in.name == "fp8_peak"
        assert "flops.fp8" in d.missing and d.missing["flops.fp8"] != "no source", d.missing
        p16, _ = d.peak_flops("bf16")
        assert p16 is not None and peak == pytest.approx(FP8_TENSOR_RATIO * p16, rel=1e-12)


@pytest.mark.parametrize("name", sorted(NO_FP8_NVIDIA) + ["mi250x"])
def test_devices_without_fp8_tensor_cores_keep_the_16_bit_path(name: str) -> None:
    """A100, A10, RTX 3090, T4, V100 (capability < 8.9) and MI250X (CDNA2): no FP8 GEMM, no FP8 rate. vLLM serves FP8
    weights there weight-only (FP8 Marlin, 16-bit matmuls), and float8 training is refused (test_float8 tests)."""
    d = CAT[name]
    assert not fp8_tensor_cores(d)
    assert fp8_peak(d) == (None, None)


def test_fp8_to_16bit_ratio_of_every_datasheet_pair_is_the_assumed_one() -> None:
    """FP8_TENSOR_RATIO against the datasheets: every NVIDIA row with both a sourced FP8 and a sourced 16-bit
    (bf16, else fp16 at FP32 accumulate) dense figure gives 2 within 2% (L40S 733 / 362 is the widest)."""
    pairs, derived = {}, set()
    for d in CAT.values():
        if d.vendor != "NVIDIA" or "fp8" not in d.flops:
            continue
        p16, key16 = d.peak_flops("bf16")
        if p16 is None:
            continue
        # a figure the catalog derived (with this very ratio, or from another figure) is no datasheet's: left out,
        # or the test would check the ratio against itself (review18 D6: rtx-6000-ada, rtx-5080 ... rtx-5050)
        if "derived" in (d.flops["fp8"].source, d.flops[key16].source if key16 in d.flops else None):
            derived.add(d.id)
            continue
        pairs[d.id] = float(d.flops["fp8"].base) / p16
    assert "rtx-6000-ada" in derived and not derived & set(pairs)
    assert len(pairs) >= 15, pairs
    assert all(r == pytest.approx(FP8_TENSOR_RATIO, rel=0.02) for r in pairs.values()), pairs


def test_datasheet_figures_of_the_probe_devices() -> None:
    """H100 NVL: 'FP8 Tensor Core* 3,341 teraFLOPS' with sparsity -> 1,670.5 dense, twice the row's dense BF16 835
    (the datasheet's 1,671 with sparsity / 2); L40: 'FP8 Tensor Core 362 | 724*'."""
    nvl = CAT["h100-nvl"]
    assert float(nvl.flops["fp8"].base) == pytest.approx(3341e12 / 2)
    assert float(nvl.flops_sparse["fp8"].base) == pytest.approx(3341e12)
    assert float(nvl.flops["fp8"].base) == pytest.approx(2 * 1671e12 / 2, rel=1e-3)
    assert float(CAT["l40"].flops["fp8"].base) == pytest.approx(362e12)
    assert float(CAT["l40"].flops_sparse["fp8"].base) == pytest.approx(724e12)


def test_probe17_h100_nvl_keeps_fp8_as_h100_sxm_does() -> None:
    """fit qwen2.5-32b --engine vllm --context 8k --concurrency 16: bf16 fits neither; the 80 GB H100 SXM was told
    fp8 and the larger 94 GB H100 NVL awq-int4. Both now name fp8, and the NVL's fp8 prefill runs at its own FP8 peak:
    its ratio to the SXM's is the datasheets' 1,670.5 / 1,978.9 (both compute-bound prompts)."""
    kw = dict(engine="vllm", context=8192, concurrency=16)
    sxm = fit("qwen2.5-32b", "h100-sxm", 1, **kw)
    nvl = fit("qwen2.5-32b", "h100-nvl", 1, **kw)
    assert sxm.fits_at is not None and nvl.fits_at is not None
    assert sxm.fits_at["weights"] == "fp8"
    assert nvl.fits_at["weights"] == "fp8"
    a = fit("qwen2.5-32b", "h100-sxm", 1, engine="vllm", weights="fp8", context=4096)
    b = fit("qwen2.5-32b", "h100-nvl", 1, engine="vllm", weights="fp8", context=4096)
    assert a.speed is not None and b.speed is not None
    ratio = b.speed.prefill_tokens_per_second / a.speed.prefill_tokens_per_second
    assert ratio == pytest.approx(1670.5 / 1978.9, rel=1e-6)


def test_fp8_prefill_without_a_figure_names_the_assumption() -> None:
    """RTX 4080 SUPER (Ada, 8.9; NVIDIA publishes no FP8 figure for it): an fp8 prefill is timed at 2 x its FP16
    tensor peak, named, not at the FP16 rate silently."""
    r = fit("qwen2.5-7b", "rtx-4080-super", 1, engine="vllm", weights="fp8", context=4096)
    assert r.speed is not None
    names = {a.name: a for a in r.speed.assumptions}
    assert "fp8_peak" in names and "compute capability 8.9" in names["fp8_peak"].why


SETUP = dict(method="full", precision="fsdp-bf16-mixed", fsdp="full", micro_batch=1, seq_len=4096,
             grad_checkpointing="full", compile=True)


@pytest.mark.parametrize("name", ["h100-nvl", "h20"])
def test_float8_training_on_fp8_devices_is_faster_than_bf16(name: str) -> None:
    """probe17 D1.3: `train llama-3.1-8b ... --device h100-nvl --float8` was timed without FP8 tensor cores (slower
    than bf16, 23,544 s against 22,463 s compiled). With the FP8 peak the compiled float8 run is faster than bf16, as
    on the H100 SXM; on the H20 (no FP8 figure) by the named assumption."""
    spec = load_model("llama-3.1-8b")
    speedups = {}
    for d in ("h100-sxm", name):
        bf16 = training_duration_for(spec, CAT[d], 8, 1e9, SETUP)
        f8 = training_duration_for(spec, CAT[d], 8, 1e9, dict(SETUP, float8=True))
        assert bf16.seconds is not None and f8.seconds is not None
        speedups[d] = bf16.seconds / f8.seconds
        named = {a.name for a in f8.assumptions}
        assert ("fp8_peak" in named) == ("fp8" not in CAT[d].flops)
        assert not any("FP8 peak" in w for w in f8.warnings)
    assert speedups[name] > 1.0, speedups


def test_float8_training_and_serving_read_one_fp8_rule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """review18 D3: ``float8_refusal`` asks ``fp8_tensor_cores`` (one rule), so float8 training and the serving
    ladder / prefill give one answer for every GPU. Before, a hardware-file GPU at capability 8.0 with a stated
    ``flops.fp8`` was FP8-capable to serving (figure first) and refused by ``--float8`` (capability below 8.9); now
    the capability decides for both (review20 D5).
    Independent truth for the capability-only GPUs: torch's ``_scaled_mm_allowed_device`` (ScaledBlas.cpp @2bec3bdf
    lines 90-111) allows major >= 9 or 8.9, so 8.0 and 8.6 refused, 8.9 and 9.0 taken; AMD: gfx942 (CDNA3) taken,
    CDNA2 refused."""
    f = tmp_path / "hw.json"
    # a stated FP8 figure does not give a capability-8.0 GPU FP8 tensor cores: the capability decides where it is
    # known (review20 D5), as torch's gate does
    gpus = {"stated-fp8-cc80": ('"compute_capability": 8.0, "flops": {"fp16": "100 TFLOP/s", "fp8": "200 TFLOP/s"}',
                                False),
            "cc80": ('"compute_capability": 8.0, "flops": {"fp16": "100 TFLOP/s"}', False),
            "cc86": ('"compute_capability": 8.6, "flops": {"fp16": "100 TFLOP/s"}', False),
            "cc89": ('"compute_capability": 8.9, "flops": {"fp16": "100 TFLOP/s"}', True),
            "cc90": ('"compute_capability": 9.0, "flops": {"fp16": "100 TFLOP/s"}', True)}
    rows = [f'{{"id": "{k}", "name": "{k}", "vendor": "NVIDIA", "kind": "gpu", "memory": "24GiB", {v}}}'
            for k, (v, _) in gpus.items()]
    rows += ['{"id": "amd-cdna3", "name": "a", "vendor": "AMD", "kind": "gpu", "architecture": "cdna3", '
             '"memory": "192GiB", "flops": {"bf16": "1000 TFLOP/s"}}',
             '{"id": "amd-cdna2", "name": "b", "vendor": "AMD", "kind": "gpu", "architecture": "cdna2", '
             '"memory": "128GiB", "flops": {"bf16": "383 TFLOP/s"}}']
    f.write_text('{"devices": [' + ", ".join(rows) + "]}")
    devices = load_catalog([f]).devices
    expected = {**{k: fp8 for k, (_, fp8) in gpus.items()}, "amd-cdna3": True, "amd-cdna2": False}
    for name, fp8 in expected.items():
        d = devices[name]
        assert fp8_tensor_cores(d) is fp8, name
        assert (float8_refusal(d) is None) is fp8, (name, float8_refusal(d))
    # and every catalog GPU whose capability or architecture is known: the two paths agree
    for d in CAT.values():
        if d.kind == "gpu" and (d.capability is not None or d.architecture):
            assert (float8_refusal(d) is None) == fp8_tensor_cores(d), d.id

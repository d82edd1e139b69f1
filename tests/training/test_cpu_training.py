"""Training on a CPU: host-memory fit without a CUDA context, and a duration from the CPU's own peak (not a GPU's
calibrated utilisation), so that "CPU training is limited by speed, GPU training by memory" holds with numbers."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import elementwise_bytes_per_token, training_duration_for
from llmsizer.estimate.engines import CUDA_CONTEXT_TRAINING, TORCH_HOST_RUNTIME
from llmsizer.estimate.fit import fit_training
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model
from llmsizer.specs import TrainingWorkload
from llmsizer.units import parse_bytes
from training_surfaces import run_json, same_training_seconds_everywhere

CPU = "intel-xeon-spr-8ch"
HOST_RAM = parse_bytes("256GB")
LORA = {"method": "lora", "rank": 16, "micro_batch": 1, "seq_len": 2048}


def _names(est):  # type: ignore[no-untyped-def]
    return {i.name: i for i in est.items}


def test_cpu_training_has_no_cuda_context_and_counts_its_runtime_in_the_same_ram() -> None:
    gpu = estimate_training("qwen2.5-0.5b", **LORA)
    cpu = estimate_training("qwen2.5-0.5b", device="cpu", **LORA)
    g, c = _names(gpu), _names(cpu)
    assert "cuda_context" in g and "allocator_reserve" in g
    assert "cuda_context" not in c and "allocator_reserve" not in c
    assert g["host_runtime"].location == "host" and c["host_runtime"].location == "device"
    # the same tensors; the CPU total swaps the CUDA context and the caching allocator's reserve for the process
    # runtime in that memory
    assert cpu.total("device")[1] - gpu.total("device")[1] == (TORCH_HOST_RUNTIME.expected
                                                               - CUDA_CONTEXT_TRAINING.expected
                                                               - g["allocator_reserve"].bytes)
    assert any(a.name == "device" and a.value == "cpu" for a in cpu.assumptions)


def test_fit_train_on_a_catalog_cpu_is_a_host_memory_fit() -> None:
    r = fit_training("qwen2.5-0.5b", CPU, 1, memory=HOST_RAM, **LORA)
    assert r.fits and "cuda_context" not in _names(r.estimate)
    assert r.details["usable_memory_per_device"] == HOST_RAM


def test_a_training_device_outside_the_closed_set_is_refused() -> None:
    with pytest.raises(InputError, match=r"unknown device 'tpu'; did you mean 'gpu' or 'cpu'\? \(choose one of: gpu, cpu\)"):
        TrainingWorkload(device="tpu")


def test_cpu_duration_uses_the_cpu_peak_not_a_gpu_utilisation() -> None:
    """A CPU with a sourced AMX BF16 peak takes the CPU utilisation calibrated on PM0600 for a bf16 recipe; one
    without it (or an fp32 recipe) is timed on its FP32 vector peak at the utilisation calibrated on PM0602 (Ice Lake,
    AVX-512). Never the GPU's, and never the whole peak."""
    spec = load_model("qwen2.5-0.5b")
    cat = builtin_catalog().devices
    amx = training_duration_for(spec, cat["intel-xeon-platinum-8488c"], 1, 1e6, LORA)
    assert amx.peak_key == "bf16" and amx.utilization == E.TRAINING_UTILIZATION_CPU_AMX.expected
    assert amx.peak_flops == pytest.approx(48 * 3.2e9 * 1024)  # 48 cores x 3.2 GHz x 1,024 BF16 FLOP/cycle (AMX)
    fp32 = training_duration_for(spec, cat["intel-xeon-platinum-8488c"], 1, 1e6, dict(LORA, precision="fp32"))
    assert fp32.peak_key == "fp32" and fp32.utilization == E.TRAINING_UTILIZATION_CPU_VECTOR.expected
    vec = "xeon-icl-aws-m6i-4xlarge"  # Ice Lake: AVX-512, no BF16 matrix unit (intel-xeon-spr-8ch has AMX since
    # it names the 8488C's cores and clock, review21 D6)
    d = training_duration_for(spec, cat[vec], 1, 1e6, LORA)
    assert d.utilization == E.TRAINING_UTILIZATION_CPU_VECTOR.expected != E.TRAINING_DEVICE_UTILIZATION.expected
    assert d.peak_flops == cat[vec].peak_flops("fp32")[0] and d.peak_key == "fp32"
    assert d.seconds_range is None  # the GPU runs' calibrated band does not apply
    assert any(a.name == "utilization" and "PM0602" in a.why for a in d.assumptions)
    # eq. (6) at the calibrated share of the fp32 peak, plus the memory-bound kernels (eq. E7 bytes) at 0.46 x the
    # host's bandwidth and one optimizer update per 2048-token step: the GPU rule's terms on the CPU's own RAM
    gemm = 1e6 * d.flops.per_token / (d.peak_flops * d.utilization)
    ew_bytes = elementwise_bytes_per_token(spec, TrainingWorkload(device="cpu", **LORA))
    bw = cat[vec].bandwidth
    assert bw is not None and E.memory_bound_bandwidth("cpu").expected == E.DECODE_BANDWIDTH_CPU.expected == 0.46
    ew = 1e6 * ew_bytes / (0.46 * bw)
    assert d.step is not None and d.step.optimizer_seconds > 0
    assert d.seconds == pytest.approx(gemm + ew + 1e6 / 2048 * d.step.optimizer_seconds, rel=1e-9)
    assert ew / d.seconds > 0.01


def test_amx_is_worth_its_calibrated_speedup_per_core() -> None:
    """The two ICOM rows run the same recipe (GPT-2 small, bf16 autocast + IPEX, 32 x 1024): 4 Sapphire Rapids cores
    with AMX at 803.9 tokens/s (PM0600), 8 Ice Lake cores without it at 275.5 tokens/s (PM0602). The duration rule
    reproduces both from their peaks (calibration rows, so exactly), hence the per-core ratio of the measurements."""
    from llmsizer.validation_cases import (
        CPU_GPT2_FIELDS,
        CPU_TRAINING_DEVICE,
        TRAINING_SPEED_CALIBRATION,
        cpu_gpt2_spec,
        public_rows,
    )

    rows = public_rows()
    cat = builtin_catalog().devices
    tps = {rid: training_duration_for(cpu_gpt2_spec(), cat[dev], 1, 1e6, CPU_GPT2_FIELDS).tokens_per_second
           for rid, dev in CPU_TRAINING_DEVICE.items() if rid in TRAINING_SPEED_CALIBRATION}
    assert set(tps) == {"PM0600", "PM0602"}
    for rid, t in tps.items():
        assert t == pytest.approx(float(rows[rid]["value"]), rel=0.002)
    per_core = (tps["PM0600"] / 4) / (tps["PM0602"] / 8)
    assert per_core == pytest.approx((803.9 / 4) / (275.5 / 8), rel=0.003)  # 5.84x


def test_cpu_training_is_limited_by_speed_gpu_training_by_memory() -> None:
    """The seed's claim with numbers. Memory: full fine-tuning of an 8B model needs far more than a 24 GB card and
    fits in a 256 GB host. Speed: the same small LoRA fits both, but a 48-core Sapphire Rapids Xeon with AMX at the
    CPU utilisation calibrated on PM0600 takes more than 5x the RTX 4090's time: 157 TFLOP/s x 0.0563 = 8.9 TFLOP/s
    against 165 TFLOP/s x 0.922 = 152 TFLOP/s for the GEMMs, but on the GPU the eager memory-bound kernels are timed
    apart (formulas/elementwise_traffic.py: the fp32 loss over Qwen's 151,936 logits alone is 6.7 MB per token), while
    the CPU's calibrated utilisation holds them inside (its calibration device has no sourced memory bandwidth)."""
    xeon = "intel-xeon-platinum-8488c"
    full = {"method": "full", "micro_batch": 1, "seq_len": 2048}
    assert not fit_training("llama-3.1-8b", "rtx-4090", 1, **full).fits
    assert fit_training("llama-3.1-8b", xeon, 1, memory=HOST_RAM, **full).fits

    assert fit_training("qwen2.5-0.5b", "rtx-4090", 1, **LORA).fits
    assert fit_training("qwen2.5-0.5b", xeon, 1, memory=HOST_RAM, **LORA).fits
    spec = load_model("qwen2.5-0.5b")
    cat = builtin_catalog().devices
    t_gpu = training_duration_for(spec, cat["rtx-4090"], 1, 10e6, LORA).seconds
    t_cpu = training_duration_for(spec, cat[xeon], 1, 10e6, LORA).seconds
    assert t_gpu is not None and t_cpu is not None
    assert t_cpu > 5 * t_gpu


def test_device_cpu_is_a_generic_cpu_host_for_train_and_fit() -> None:
    """`--device cpu` with --memory: a host-memory fit without a CUDA context; no peak is known, so the duration
    is not estimated (rather than borrowed from another device); without --memory it asks for one."""
    import contextlib
    import io

    from llmsizer.cli.main import main

    r = fit_training("qwen2.5-0.5b", "cpu", 1, memory=HOST_RAM, **LORA)
    assert r.fits and "cuda_context" not in _names(r.estimate)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["train", "qwen2.5-0.5b", "--device", "cpu", "--memory", "256GB", "--method", "lora",
                     "--tokens", "10M"])
    assert code == 0 and "cuda_context" not in out.getvalue()
    assert "cpu has no sourced fp32 peak FLOP/s: duration not estimated" in out.getvalue()
    # the message names what to pass: a catalog CPU that exists, or a hardware-file entry with a peak
    assert "--device intel-xeon-platinum-8488c --memory 256GiB" in out.getvalue() and "--hardware-file" in out.getvalue()
    # the advised command runs and times (probe25 C3: without --memory a catalog CPU exits 2, no memory size)
    out2 = io.StringIO()
    with contextlib.redirect_stdout(out2), contextlib.redirect_stderr(io.StringIO()):
        code = main(["train", "qwen2.5-0.5b", "--device", "intel-xeon-platinum-8488c", "--memory", "256GiB",
                     "--method", "lora", "--tokens", "10M"])
    assert code == 0 and "duration not estimated" not in out2.getvalue()
    from llmsizer.estimate.duration import CPU_EXAMPLES

    for ex in CPU_EXAMPLES:  # each named example is a catalog CPU with a peak to time on
        dev = builtin_catalog().devices[ex]
        assert dev.kind == "cpu" and dev.peak_flops("fp32")[0]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["fit", "qwen2.5-0.5b", "--device", "cpu", "--train"])
    assert code == 2 and "give one with --memory" in err.getvalue()


def test_recommend_times_a_cpu_without_amx_at_its_calibrated_vector_share() -> None:
    """An AMD EPYC instance (no BF16 matrix peak) is timed on its FP32 peak at the share calibrated on PM0602, no
    longer at the whole peak with a 'lower bound' caveat; the option's time equals fit --train's on that instance."""
    from llmsizer.estimate.duration import training_time_on
    from llmsizer.recommend import recommend_training

    rec = recommend_training("qwen2.5-0.5b", tokens=10e6, training_fields=LORA)
    opts = {o.target: o for o in (*rec.options, *rec.rejected)}
    m7a = opts["aws-m7a.8xlarge"]
    assert not any("lower bound" in r for r in m7a.reasons)
    dur, _, _ = training_time_on(load_model("qwen2.5-0.5b"), "aws-m7a.8xlarge", 1, 10e6, LORA)
    assert dur.utilization == E.TRAINING_UTILIZATION_CPU_VECTOR.expected
    assert m7a.training_seconds == pytest.approx(dur.seconds, rel=1e-9)


def test_gpu_only_training_options_are_refused_or_replaced_on_a_cpu() -> None:
    """Offload (GPU -> host RAM) and bitsandbytes' paged optimizers (CUDA unified memory) mean nothing on a CPU:
    given, they are refused with one line; QLoRA's default paged AdamW becomes AdamW there, and says why."""
    with pytest.raises(InputError, match="offload optimizer moves states from a GPU to host RAM"):
        TrainingWorkload(device="cpu", offload="optimizer")
    with pytest.raises(InputError, match="optimizer paged-adamw-8bit pages CUDA unified memory, which device cpu "
                                         "lacks: .* size the run as optimizer adamw-8bit$"):
        TrainingWorkload(device="cpu", method="qlora", optimizer="paged-adamw-8bit")
    est = estimate_training("qwen2.5-0.5b", device="cpu", method="qlora", micro_batch=1, seq_len=1024)
    opt = next(a for a in est.assumptions if a.name == "optimizer")
    assert opt.value == "adamw" and "CUDA unified memory" in opt.why
    assert not any(i.name == "paged_optimizer_states" for i in est.items)


def test_recommend_rejects_a_cpu_that_cannot_run_the_settings_instead_of_failing() -> None:
    from llmsizer.recommend import recommend_training

    rec = recommend_training("qwen2.5-0.5b", tokens=10e6, training_fields=dict(LORA, method="qlora",
                                                                               optimizer="paged-adamw"))
    cpu = [o for o in rec.rejected if o.device_kind == "cpu" and o.target.startswith("aws-m7i")]
    assert cpu and all("pages CUDA unified memory" in o.reasons[0] for o in cpu)
    assert rec.chosen is not None and rec.chosen.device_kind != "cpu"


def test_cpu_time_is_the_binding_limit_in_every_command() -> None:
    """A Qwen2.5-0.5B LoRA (10M tokens) on an AWS m7a.8xlarge (32 EPYC cores, no AMX) against one RTX 4090: train,
    fit --train, recommend --train and the plan give the CPU the same time, on its FP32 peak share (32/96 of the
    9654's 96 cores x 2.4 GHz x 32 FP32 FLOP per Zen 4 cycle = 32 x 2.4 GHz x 32) at the vector utilisation of PM0602, with the memory-bound kernels at the VM's 32/96 of
    460.8 GB/s; the same model fits both, and the CPU takes more than 50x the GPU's time."""
    cpu = same_training_seconds_everywhere("qwen2.5-0.5b", "aws-m7a.8xlarge", "lora", 2048, "10M")
    tt = cpu.training_time
    assert tt["peak_key"] == "fp32" and tt["peak_flops"] == pytest.approx(32 * 2.4e9 * 2 * 8 * 2)
    assert tt["utilization"] == E.TRAINING_UTILIZATION_CPU_VECTOR.expected
    ew = tt["step"]["elementwise_seconds"]
    assert ew == pytest.approx(2048 * next(a["value"] for a in tt["assumptions"]
                                           if a["name"] == "elementwise_bytes_per_token")
                               / (0.46 * 460.8e9 * 32 / 96), rel=1e-3)  # the per-token bytes are rounded
    code, gdata = run_json("fit", "qwen2.5-0.5b", "--train", "--device", "rtx-4090", "--method", "lora", "--seq",
                           "2048", "--tokens", "10M")
    assert code == 0 and gdata["fits"] is True and cpu.fit["fits"] is True
    assert cpu.seconds > 50 * gdata["training_time"]["seconds"]


def test_qlora_on_a_cpu_pays_no_paging_and_on_a_gpu_pages_its_adamw_states_only_when_they_do_not_fit() -> None:
    """bitsandbytes' paged optimizers put their states in CUDA unified memory (functional.get_paged,
    cudaMallocManaged), which pages between a GPU and its host; a CPU run has no such memory, its AdamW states stay
    in RAM (estimate/training/setup.py), so its step has no paging term (formulas/training_time.py t_page). On a GPU
    only the states of tensors of 1e5 elements and more are paged (get_state_buffer, optim/optimizer.py @0.43.1
    line 320): at rank 16 every LoRA matrix of Qwen2.5-0.5B is smaller (the largest 16 x 4864 = 77,824), so nothing
    is paged; at rank 32 the MLP's 4864-wide matrices (155,648) are, two fp32 moments each (8 B). Eq. (12): they
    stay resident when they fit in what the step leaves free and move nothing after the first step; when they do
    not, every byte moves in and out each step: t_page = 2 S_paged / B_pcie. Shapes from Qwen2.5-0.5B's config.json
    (24 layers, hidden 896, intermediate 4864)."""
    spec = load_model("qwen2.5-0.5b")
    cat = builtin_catalog().devices
    qlora = dict(LORA, method="qlora")
    h, i, kv = 896, 4864, 2 * 64
    assert max(16 * i, 16 * h) < 100_000 <= 32 * i and 32 * h < 100_000
    r16_states = 24 * 16 * ((h + h) * 2 + (h + kv) * 2 + (h + i) * 3) * 8  # q, o; k, v; gate, up, down: 8 B each
    assert r16_states == 70_385_664
    small = estimate_training(spec, TrainingWorkload(**qlora, device="gpu"))
    assert "paged_optimizer_states" not in _names(small)
    assert training_duration_for(spec, cat["rtx-4090"], 1, 1e6, qlora).step.paging_seconds == 0.0  # type: ignore[union-attr]

    r32 = dict(qlora, rank=32)
    paged_bytes = 24 * 3 * 32 * i * 8  # gate B, up B, down A per layer
    assert paged_bytes == 89_653_248
    big = estimate_training(spec, TrainingWorkload(**r32, device="gpu"))
    assert big.item("paged_optimizer_states").bytes == paged_bytes
    gpu = training_duration_for(spec, cat["rtx-4090"], 1, 1e6, r32)  # 86 MiB of states beside ~2 GiB: they fit
    assert gpu.step is not None and gpu.step.paging_seconds == 0.0
    notes = {a.name: a.value for a in gpu.assumptions}
    assert notes["paged_bytes_per_step"] == 0 and "host_link_bandwidth" not in notes
    device_total = big.total("device")[1]
    for room, moved in ((paged_bytes, 0), (paged_bytes - 1, 2 * paged_bytes)):  # free = memory - the step's tensors
        tight = training_duration_for(spec, cat["rtx-4090"], 1, 1e6, dict(r32, memory=device_total + room))
        assert tight.step is not None
        assert tight.step.paging_seconds == pytest.approx(moved / E.HOST_LINK_BANDWIDTH, rel=1e-12)
        assert {a.name: a.value for a in tight.assumptions}["paged_bytes_per_step"] == moved

    for name in ("intel-xeon-spr-8ch", "intel-xeon-platinum-8488c"):
        d = training_duration_for(spec, cat[name], 1, 1e6, qlora)
        assert d.step is not None and d.step.paging_seconds == 0.0
        assert not any(a.name == "host_link_bandwidth" for a in d.assumptions)
        # the wall clock is the step without t_page: n k T / (t_step + t_opt + (k - 1) t_acc), one micro-step here
        st = d.step
        assert st.micro_steps == 1
        assert d.seconds == pytest.approx(1e6 / 2048 * (st.compute_seconds + st.optimizer_seconds), rel=1e-9)
        # and the CPU's own memory estimate agrees: torch AdamW's states in RAM, nothing paged (the same two fp32
        # states, plus torch's fp32 scalar `step` tensor per parameter: 24 layers x 7 linears x A and B)
        names = _names(estimate_training(spec, TrainingWorkload(device="cpu", **qlora)))
        assert "paged_optimizer_states" not in names
        assert names["optimizer_states"].bytes == r16_states + 24 * 7 * 2 * 4

"""One estimator, one answer (#11): the same question asked through different commands gets the same numbers.

Property-based over catalog models x workloads x devices x counts (hypothesis): ``infer --memory`` = ``fit`` =
the matching ``recommend`` option = the ``plan`` service for memory, verdict and speed; ``train --memory`` =
``fit --train`` = the matching ``recommend --train`` option = the ``plan`` training job for per-device memory,
verdict and duration; the same exit code for the same verdict. Each numbered test below reproduces one item of
the issue and failed before the fix.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_capture import run, run_json
from llmsizer.catalog.hardware import builtin_catalog, load_catalog
from llmsizer.cli.main import main
from llmsizer.estimate.device import cuda_memory
from llmsizer.estimate.duration import training_duration, training_duration_for
from llmsizer.estimate.efficiency import READING_RATE_TOKENS_PER_SECOND
from llmsizer.estimate.fit import fit, fit_training, vm_share_device
from llmsizer.estimate.inference import estimate_inference
from llmsizer.estimate.training import estimate_training
from llmsizer.estimate.verdict import DEFAULT_HEADROOM
from llmsizer.models import load_model
from llmsizer.recommend import Constraints, recommend_inference, recommend_training
from training_surfaces import same_training_seconds_everywhere

GiB = 2**30
DENSE = ["qwen2.5-0.5b", "llama-3.2-1b", "qwen3-4b", "llama-3.1-8b", "mistral-7b-v0.1", "gemma-2-2b-it"]
MOE = ["qwen3-30b-a3b", "mixtral-8x7b-v0.1"]
GPUS = ["h100-sxm", "a100-sxm-80gb", "rtx-4090", "l4", "l40s"]
PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------------- inference

@PROPS
@given(model=st.sampled_from(DENSE + MOE), device=st.sampled_from(GPUS),
       engine=st.sampled_from(["transformers", "vllm", "llamacpp"]),
       context=st.sampled_from([512, 4096, 32768]), concurrency=st.sampled_from([1, 4, 32]))
def test_infer_with_the_devices_memory_is_fit(model: str, device: str, engine: str, context: int,
                                               concurrency: int) -> None:
    weights = "q4_k_m" if engine == "llamacpp" else None
    r = fit(model, device, 1, engine=engine, weights=weights, context=context, concurrency=concurrency, speed=False)
    dev = builtin_catalog().devices[device]
    # the device's memory and, where the catalog sources it, CUDA's total of it (what vLLM's pool reads: probe23 D2)
    est = estimate_inference(model, engine=engine, weights=weights, context=context, concurrency=concurrency,
                             memory=dev.memory_bytes, cuda_memory=cuda_memory(dev, None))
    assert r.fits == est.details["fits"]
    assert r.budget_per_device == est.details["memory_budget"]
    assert r.memory_per_device == est.total("device")[1]
    assert r.weights_format == est.details["weights_format"]


@PROPS
@given(model=st.sampled_from(DENSE), device=st.sampled_from(GPUS), engine=st.sampled_from(["transformers", "vllm"]),
       context=st.sampled_from([2048, 65536]), concurrency=st.sampled_from([1, 64]))
def test_infer_and_fit_exit_with_the_same_code_for_the_same_verdict(model: str, device: str, engine: str,
                                                                     context: int, concurrency: int) -> None:
    memory = builtin_catalog().devices[device].memory_bytes
    wl = ("--engine", engine, "--context", str(context), "--concurrency", str(concurrency))
    code_infer, data = run_json("infer", model, *wl, "--memory", f"{memory}B")
    code_fit, fdata = run_json("fit", model, "--device", device, *wl)
    assert code_infer == code_fit == (0 if data["details"]["fits"] else 1)
    assert fdata["fits"] == data["details"]["fits"]


def test_recommend_options_are_what_fit_says_on_the_same_target() -> None:
    rec = recommend_inference("llama-3.1-8b", context=8192, concurrency=16, constraints=Constraints(providers=("aws",)))
    assert rec.options
    for o in list(rec.options)[:6]:
        r = fit("llama-3.1-8b", o.target, engine=o.engine, weights=o.weights_format, context=8192,
                concurrency=16)
        assert r.fits and r.memory_per_device == o.memory_per_device
        assert r.speed is not None and r.speed.tokens_per_second_per_user == o.tokens_per_second_per_user


# ----------------------------------------------------------------------------------------------------- training

@PROPS
@given(model=st.sampled_from(DENSE), method=st.sampled_from(["full", "lora", "qlora"]),
       seq=st.sampled_from([512, 4096, 16384]), batch=st.sampled_from([1, 4]), device=st.sampled_from(GPUS),
       ckpt=st.sampled_from(["none", "full"]))
def test_train_with_the_devices_memory_is_fit_train(model: str, method: str, seq: int, batch: int, device: str,
                                                    ckpt: str) -> None:
    fields = dict(method=method, seq_len=seq, micro_batch=batch, grad_checkpointing=ckpt)
    r = fit_training(model, device, 1, **fields)
    est = estimate_training(model, memory=builtin_catalog().devices[device].memory_bytes, **fields)
    assert r.fits == est.details["fits"]
    assert r.memory_per_device == est.total("device")[1]
    assert r.budget_per_device == est.details["memory_budget"]


def test_cli_train_on_a_device_equals_fit_train() -> None:
    wl = ("--method", "lora", "--batch", "4", "--seq", "4096", "--grad-checkpointing", "full")
    code_t, t = run_json("train", "llama-3.1-8b", *wl, "--device", "h100-sxm", "--tokens", "1B")
    code_f, f = run_json("fit", "llama-3.1-8b", "--device", "h100-sxm", "--train", *wl, "--tokens", "1B")
    assert code_t == code_f == 0
    assert f["memory"]["details"]["fits"] is t["details"]["fits"] is True
    assert f["memory"]["items"] == t["items"]
    assert f["training_time"]["seconds"] == pytest.approx(t["duration"]["seconds"])


def test_recommend_training_options_are_fit_train_and_the_duration_rule() -> None:
    fields = dict(method="lora", seq_len=4096, micro_batch=2)
    rec = recommend_training("llama-3.1-8b", tokens=1e9, constraints=Constraints(providers=("aws",)),
                             training_fields=fields)
    assert rec.options
    cat = load_catalog()
    # a type one instance of which is short of memory is grown to the fewest instances that hold the run
    # (recscale): fit --train --count says so for each such option
    grown = [o for o in rec.options if any("the workload's layout fits" in r for r in o.reasons)]
    assert grown  # aws-p5.4xlarge: 81.00 GiB of 71.68 on one H100, 67.26 GiB on two
    for o in grown:
        r = fit_training("llama-3.1-8b", o.target, o.count, **fields)
        assert r.fits and r.memory_per_device == o.memory_per_device
        assert not fit_training("llama-3.1-8b", o.target, o.count // 2, **fields).fits
    for o in [o for o in rec.options if o.instances == 1][:5]:
        r = fit_training("llama-3.1-8b", o.target, **fields)
        assert r.fits
        inst = cat.instances[o.target]
        assert o.instances == 1 and o.replicas == r.replicas  # no deadline: one instance, fit's data parallelism
        # every field reaches the duration (micro_batch=2 included: it was timed at the default batch before), and
        # the ZeRO stage the memory took on several devices is the run that is timed (as the plan times it)
        zero = [a.value for a in r.assumptions if a.name == "zero"]
        d = training_duration_for(load_model("llama-3.1-8b"), vm_share_device(inst.device, inst), inst.device_count,
                                  1e9, dict(fields, zero=zero[0]) if zero else fields)
        assert o.training_seconds == d.seconds


def test_plan_training_job_is_fit_train_and_the_duration_rule() -> None:
    """examples/lora-finetune-and-chat.yaml's training job, its settings written out from the request file."""
    from llmsizer.plan import plan_file

    plan = plan_file(Path(__file__).resolve().parents[2] / "examples" / "lora-finetune-and-chat.yaml")
    job = plan.job("ticket-lora")
    settings = dict(method="lora", rank=16, targets="all-linear", precision="bf16-mixed", optimizer="adamw",
                    micro_batch=4, seq_len=4096, grad_accumulation=8, grad_checkpointing="full")
    r = fit_training("llama-3.1-8b", "h100-sxm", 1, **settings)
    mem = job.section("memory")
    assert mem.value("need") == r.memory_per_device and mem.value("fits") is r.fits
    assert mem.value("budget") == r.budget_per_device
    d = training_duration_for(load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"], 1, 3 * 240e6,
                              settings)  # the same settings: micro-batch x sequence sets the GEMM shapes
    assert job.section("duration").value("seconds") == pytest.approx(d.seconds)


def test_plan_service_is_fit_on_its_device() -> None:
    """examples/cpu-internal-tool.yaml's service (llama.cpp on a 64 GiB CPU server; traffic written out)."""
    from llmsizer.plan import plan_file

    plan = plan_file(Path(__file__).resolve().parents[2] / "examples" / "cpu-internal-tool.yaml")
    job = plan.job("drafting-helper")
    hw = job.hardware
    assert hw.device is not None and hw.memory_per_device is not None
    # the request: q4_k_m on llama.cpp, bf16 compute, peak traffic 6 x 4k tokens with 500 generated
    r = fit(job.model, hw.device, 1, engine="llamacpp", weights="q4_k_m", dtype="bf16", context=4096,
            concurrency=6, output_tokens=500, memory=hw.memory_per_device)
    mem = job.section("memory")
    assert mem.value("need_peak") == r.memory_per_device
    assert mem.value("budget") == r.budget_per_device and mem.value("fits") is r.fits


# ------------------------------------------------------------------------------------- the items 1-9

def test_item1_fit_train_reads_the_sequence_length() -> None:
    short = fit_training("llama-3.1-8b", "h100-sxm", seq_len=4096)
    long = fit_training("llama-3.1-8b", "h100-sxm", seq_len=65536)
    assert long.memory_per_device > short.memory_per_device
    code, data = run_json("fit", "llama-3.1-8b", "--device", "h100-sxm", "--train", "--seq-len", "4096")
    _, train = run_json("train", "llama-3.1-8b", "--seq", "4096", "--memory", f"{data['details']['usable_memory_per_device']}B")
    assert data["memory"]["items"] == train["items"] and code == 1  # 8B full fine-tune: 140 GiB > 80 GiB


def test_item2_one_format_rule_for_infer_and_fit() -> None:
    code, data = run_json("infer", "gpt-oss-20b", "--engine", "llamacpp")
    assert code == 0 and data["details"]["weights_format"] == "gguf:mxfp4_moe"
    r = fit("gpt-oss-20b", "rtx-4090", engine="llamacpp", speed=False)
    assert r.weights_format == "gguf:mxfp4_moe"
    v = fit("llama-3.1-8b", "h100-sxm", engine="vllm", weights="q4_k_m", speed=False)  # vLLM keeps GGUF quantized
    assert v.weights_format == "gguf:q4_k_m" and not any("dequantizes GGUF" in w for w in v.warnings)
    t = fit("llama-3.1-8b", "h100-sxm", engine="transformers", weights="q4_k_m", speed=False)
    assert t.weights_format == "bf16" and any("dequantizes GGUF" in w for w in t.warnings)


def test_item3_one_fit_verdict_and_exit_code() -> None:
    code, data = run_json("infer", "llama-3.3-70b-instruct", "--engine", "vllm", "--tp", "2", "--memory", "80GiB")
    assert data["details"]["max_concurrency_at_context"] == 0 and data["details"]["fits"] is False and code == 1
    # transformers at the boundary: fits in 80 GiB without headroom, not with the default 10 % (train/infer kept none)
    need = estimate_inference("llama-3.1-8b", context=4096).total("device")[1]
    memory = int(need / (1 - DEFAULT_HEADROOM / 2))
    code, data = run_json("infer", "llama-3.1-8b", "--memory", f"{memory}B")
    assert code == 1 and data["details"]["memory_budget"] == int(memory * (1 - DEFAULT_HEADROOM))
    code0, _ = run_json("infer", "llama-3.1-8b", "--memory", f"{memory}B", "--headroom", "0")
    assert code0 == 0


def test_item4_a_cpu_vm_gets_its_share_of_compute_and_recommend_agrees_with_fit() -> None:
    cat = load_catalog()
    inst = cat.instances["gcp-c3d-standard-8"]
    vm = vm_share_device(inst.device, inst)
    share = float(vm.memory_bandwidth.base) / float(inst.device.memory_bandwidth.base)  # type: ignore[union-attr]
    assert share < 1
    for k, v in inst.device.flops.items():
        assert float(vm.flops[k].base) == pytest.approx(float(v.base) * share)
    rec = recommend_inference("qwen2.5-0.5b", context=2048, concurrency=64)
    opts = {o.target: o for o in (*rec.options, *rec.rejected)}
    o = opts["gcp-c3d-standard-8"]
    r = fit("qwen2.5-0.5b", "gcp-c3d-standard-8", weights=o.weights_format or None, context=2048, concurrency=64)
    assert r.speed is not None and o.tokens_per_second == pytest.approx(r.speed.tokens_per_second)
    # The chosen option is what fit answers for it, and fit says it meets the reading-speed floor. It is a CPU VM
    # (aws-m7i.2xlarge, 4 Sapphire Rapids cores) since the 8488C's FP32 peak is its cores x clock x 64 (9.83 TFLOP/s,
    # two AVX-512 FMA units per core: catalog avx512-dual-fma, test_xeon_8488c_fp32_peak_is_cores_x_clock_x_64)
    # and no longer huggingface.js's 7.6x lower 1.3 TFLOP/s: 64 sequences of this 0.5B model then decode
    # memory-bound on the VM's 25.6 GB/s share (~2.5 GB of weights and K/V per step), not compute-bound. This line
    # used to assert "a GPU", which only the low peak made true.
    chosen = rec.chosen
    assert chosen is not None and chosen.tokens_per_second is not None
    rf = fit("qwen2.5-0.5b", chosen.target, weights=chosen.weights_format or None, context=2048, concurrency=64)
    assert rf.speed is not None and chosen.tokens_per_second == pytest.approx(rf.speed.tokens_per_second)
    assert rf.speed.tokens_per_second / 64 >= READING_RATE_TOKENS_PER_SECOND


def test_item6_adapter_training_is_faster_than_full_and_train_prints_a_duration() -> None:
    spec, dev = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    full = training_duration(spec, dev, 1, 1e9, method="full", seq_len=2048)
    lora = training_duration(spec, dev, 1, 1e9, method="lora", seq_len=2048)
    assert full.seconds and lora.seconds
    # frozen base: no weight-gradient GEMMs, so the GEMM time is at most (4N + 6N_a) / 6N of full fine-tuning's; the
    # rank-r adapter GEMMs are memory-bound and give part of it back. Hu et al. 2021 (arXiv 2106.09685) section 4.2
    # measured a 25 % speedup (time x 0.8) on GPT-3 175B. (The memory-bound kernels and the optimizer step, which
    # full fine-tuning runs over all 8B parameters, are outside the GEMM time.)
    assert lora.step is not None and full.step is not None
    gemm_lora = lora.step.compute_seconds - lora.step.elementwise_seconds
    gemm_full = full.step.compute_seconds - full.step.elementwise_seconds
    assert lora.flops.per_token / full.flops.per_token < gemm_lora / gemm_full
    assert lora.seconds / full.seconds < 0.85
    code, text, _ = run("train", "llama-3.1-8b", "--method", "lora", "--device", "h100-sxm", "--tokens", "1B")
    assert code == 0 and "duration:" in text and " wall clock" in text


def test_item7_the_output_says_what_is_live_at_the_peak() -> None:
    est = estimate_training("llama-3.1-8b")
    recipe = next(a for a in est.assumptions if a.name == "bytes_per_param")
    live = next(a for a in est.assumptions if a.name == "model_state_bytes_per_param_at_peak")
    assert str(recipe.value).startswith("18 B") and float(live.value) < 18
    assert "never is live at once" in live.why and est.details["peak_phase"] in live.why


def test_item8_the_built_in_data_centre_cards_are_not_local_options(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"devices": []}', "utf-8")
    a = recommend_inference("qwen2.5-0.5b")
    b = recommend_inference("qwen2.5-0.5b", hardware_files=[empty])
    assert {o.target for o in (*a.options, *a.rejected)} == {o.target for o in (*b.options, *b.rejected)}
    assert not any(o.target == "h100-sxm" for o in (*a.options, *a.rejected))


def test_item9_reverse_questions_say_when_nothing_fits_and_help_states_no_unapplied_default() -> None:
    code, text, _ = run("train", "llama-3.1-8b", "--memory", "40GiB", "--max-batch")
    assert code == 1 and "batch 1 does not fit" in text
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["infer", "--help"])
    help_text = out.getvalue()
    assert "--max-num-batched-tokens" in help_text and "(default 8192)" not in help_text


def test_item9_validate_never_calls_a_miss_of_more_than_100_percent_within_tolerance() -> None:
    """Prefill rows 105-328 % off were reported "within tolerance: yes"; no tolerance may pass a miss that large."""
    from llmsizer.validation_cases import speed_cases

    cases, _ = speed_cases()
    big = [c for c in cases if c.error is not None and abs(c.error) > 1.0 and c.within is not None]
    assert big, "the prefill rows that miss by 2-4x are expected here"
    assert all(c.within is False for c in big if c.kind != "batched decode throughput"), \
        [(c.id, c.error) for c in big if c.within]


def test_models_fits_on_is_fit_with_the_format_it_names() -> None:
    """`models --fits-on` (which models fit my machine, #16) answers with recommend's evaluation of that hardware:
    every model it lists as fitting fits by `fit` at the format it names, and the next larger format on the ladder
    of the one engine does not."""
    from llmsizer.estimate.formats import format_ladder

    code, data = run_json("models", "--fits-on", "rtx-4090", "--context", "8k")
    assert code == 0
    fitting = [m for m in data["models"] if m["status"] == "meets"]
    assert fitting and len(fitting) < len(data["models"])  # a 70B does not fit a 24 GiB card
    for m in fitting[:8]:
        r = fit(m["id"], "rtx-4090", engine=m["engine"], weights=m["weights_format"], context=8192, speed=False)
        assert r.fits and r.memory_per_device == m["memory_per_device"]
        ladder = format_ladder(load_model(m["id"]), m["engine"])
        i = ladder.index(m["weights_format"])
        if i > 0:
            bigger = fit(m["id"], "rtx-4090", engine=m["engine"], weights=ladder[i - 1], context=8192)
            # the larger format either does not fit or is slower than reading speed (the floor recommend applies)
            assert not bigger.fits or (bigger.speed is not None and bigger.speed.tokens_per_second_per_user is not None
                                       and bigger.speed.tokens_per_second_per_user < 5.3)


def test_plan_vllm_service_need_is_what_fit_says_the_workload_needs() -> None:
    """The example's chat service (vLLM, 40 x 8k, 800 output tokens on an A100 80GB PCIe): the plan's need at peak
    equals the workload's share of the pool in fit's estimate (vLLM's batch defaults depend on the GPU memory, so a
    need computed without the device used other ones: 57.17 vs 60.73 GiB before)."""
    from llmsizer.plan import plan_file

    plan = plan_file(Path(__file__).resolve().parents[2] / "examples" / "lora-finetune-and-chat.yaml")
    job = plan.job("support-chat")
    r = fit("llama-3.1-8b", "a100-pcie-80gb", engine="vllm", context=8192, concurrency=40, output_tokens=800)
    assert r.estimate is not None
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]
    budget = next(f for f in job.section("memory").figures if f.key == "budget")
    # the pool's share decides, as fit says (no headroom): vLLM's pool 0.9 x 80 GiB + the CUDA context outside it
    assert budget.value == r.estimate.details["workload_budget_bytes"]
    assert 0.9 * 80 * GiB < budget.value < 0.9 * 80 * GiB + 1.1 * GiB
    assert "headroom)" not in budget.formula  # it read "device memory x (1 - 0.1 headroom)" before


def test_a_reader_that_stops_early_does_not_change_the_exit_code() -> None:
    """`llmsizer fit ... | head -1` where `head` has gone before the answer is printed: "does not fit" keeps exit
    code 1 (it returned 0 on BrokenPipeError before), and nothing is printed about the closed pipe."""
    import subprocess
    import sys

    code = ("import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-m', 'llmsizer.cli.main', ARGS], "
            "stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
            "p.stdout.close()\n"  # the reader is gone before the command prints anything
            "err = p.stderr.read(); print(p.wait(), len(err))\n")
    for args, expected in (("'fit', 'llama-3.1-8b', '--device', 'h100-sxm', '--train', '--seq', '65536'", "1"),
                           ("'fit', 'llama-3.1-8b', '--device', 'h100-sxm'", "0")):
        out = subprocess.run([sys.executable, "-c", code.replace("ARGS", args)], capture_output=True, text=True,
                             timeout=120).stdout.split()
        assert out == [expected, "0"], (args, out)


def test_plan_llamacpp_service_on_two_gpus_is_the_split_fit_says() -> None:
    """A llama.cpp service on 2 x RTX 3090 (Llama-3.3-70B Q4_K_M, 8k): llama-server splits the layers over both
    cards (llama.cpp's default -sm layer; the 39.6 GiB GGUF is widely run on 2 x 24 GB), as ``fit --count 2`` and
    ``infer --gpus 2`` answer. The plan asked the fit for ONE card per replica (2 replicas of 42.3 GiB: DOES NOT
    FIT) before the fix."""
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.3-70b-instruct}\n"
            "    quantization: q4_k_m\n    engine: llamacpp\n    traffic:\n      concurrency: {typical: 1, peak: 1}\n"
            "      context: {typical: 8k, peak: 8k}\n      output: {typical: 256, peak: 256}\n"
            "    resources: {device: rtx-3090, count: 2}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    r = fit("llama-3.3-70b-instruct", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=8192,
            concurrency=1, output_tokens=256)
    mem = job.section("memory")
    assert r.fits and r.memory_per_device < 24 * GiB
    assert mem.value("fits") is True and mem.value("need_peak") == r.memory_per_device
    assert mem.value("need_typical") == r.memory_per_device
    assert job.section("speed").value("tps_user_peak") == pytest.approx(r.speed.tokens_per_second_per_user)
    code, data = run_json("infer", "llama-3.3-70b-instruct", "--engine", "llamacpp", "--weights", "q4_k_m",
                          "--gpus", "2", "--context", "8k", "--output-tokens", "256", "--memory", "24GiB")
    gpus = [d["total"] for d in data["details"]["split"]["devices"] if d["device"] != "host"]
    assert code == 0 and max(gpus) == r.memory_per_device


def test_plan_sglang_service_need_is_what_fit_says_the_workload_needs() -> None:
    """SGLang on an RTX 4090 (Llama-3.1-8B bf16, 4k x 1): the plan's need at peak is fit's workload need (weights +
    the KV of the load + the (1 - mem_fraction_static) share SGLang leaves for activations and CUDA graphs + the
    CUDA context), as for vLLM. Before: the plan said 15.95 GiB (weights + KV + context, no activations at all) and
    fit 22.90 GiB; both said 'vLLM' for SGLang's pool."""
    from llmsizer.plan import make_plan
    from llmsizer.render.plan_text import render_plan_text
    from llmsizer.request import parse_request

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            "    precision: bf16\n    engine: sglang\n    traffic:\n      concurrency: {typical: 1, peak: 1}\n"
            "      context: {typical: 4k, peak: 4k}\n      output: {typical: 256, peak: 256}\n"
            "    resources: {device: rtx-4090, count: 1}\n")
    plan = make_plan(parse_request(text, source="t.yaml"), alternatives=False)
    job = plan.jobs[0]
    r = fit("llama-3.1-8b", "rtx-4090", 1, engine="sglang", weights="bf16", dtype="bf16", context=4096,
            concurrency=1, output_tokens=256)
    assert r.estimate is not None
    need = r.estimate.details["workload_bytes"]
    weights = r.estimate.item("weights").bytes
    assert need > weights + r.estimate.details["kv_needed_bytes"] + 2 * GiB  # SGLang leaves ~7 GiB beside the pool
    assert job.section("memory").value("need_peak") == need
    assert job.section("memory").value("need_typical") == need
    code, out, _ = run("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "sglang")
    assert code == 0 and "SGLang takes its pool" in out and "vLLM takes its pool" not in out
    assert "vLLM admits" not in render_plan_text(plan)


def _plan_job(engine_lines: str, model: str, quant: str, device: str, count: int, context: str = "8k"):  # type: ignore[no-untyped-def]
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = (f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n"
            f"    quantization: {quant}\n{engine_lines}    traffic:\n      concurrency: {{typical: 1, peak: 1}}\n"
            f"      context: {{typical: {context}, peak: {context}}}\n      output: {{typical: 256, peak: 256}}\n"
            f"    resources: {{device: {device}, count: {count}}}\n")
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


def test_request_engine_settings_are_the_cli_flags_llamacpp_split() -> None:
    """engine_settings.split_mode/tensor_split in a request = -sm/-ts on the CLI = fit(split_mode, tensor_split):
    Llama-3.1-8B Q4_K_M on 2 x RTX 3090, row split 3:1 (the first GPU holds three quarters of each matrix)."""
    job = _plan_job("    engine: llamacpp\n    engine_settings: {split_mode: row, tensor_split: [3, 1]}\n",
                    "llama-3.1-8b", "q4_k_m", "rtx-3090", 2)
    r = fit("llama-3.1-8b", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=8192, concurrency=1,
            output_tokens=256, split_mode="row", tensor_split=(3.0, 1.0))
    even = fit("llama-3.1-8b", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=8192, concurrency=1,
               output_tokens=256)
    assert r.memory_per_device > even.memory_per_device  # the setting is used: 3:1 loads the first GPU more
    assert job.section("memory").value("need_peak") == r.memory_per_device
    code, data = run_json("infer", "llama-3.1-8b", "--engine", "llamacpp", "--weights", "q4_k_m", "--gpus", "2",
                          "-sm", "row", "-ts", "3,1", "--context", "8k", "--output-tokens", "256", "--memory", "24GiB")
    gpus = [d["total"] for d in data["details"]["split"]["devices"] if d["device"] != "host"]
    assert code == 0 and max(gpus) == r.memory_per_device


def test_request_engine_settings_are_the_cli_flags_n_cpu_moe() -> None:
    """engine_settings.n_cpu_moe = --n-cpu-moe: Qwen3-30B-A3B Q4_K_M on one RTX 3090 with the experts of the first
    24 layers in host memory."""
    job = _plan_job("    engine: llamacpp\n    engine_settings: {n_cpu_moe: 24}\n", "qwen3-30b-a3b", "q4_k_m",
                    "rtx-3090", 1)
    r = fit("qwen3-30b-a3b", "rtx-3090", 1, engine="llamacpp", weights="q4_k_m", context=8192, concurrency=1,
            output_tokens=256, n_cpu_moe=24)
    plain = fit("qwen3-30b-a3b", "rtx-3090", 1, engine="llamacpp", weights="q4_k_m", context=8192, concurrency=1,
                output_tokens=256)
    assert r.memory_per_device < plain.memory_per_device
    assert job.section("memory").value("need_peak") == r.memory_per_device
    code, out, _ = run("fit", "qwen3-30b-a3b", "--device", "rtx-3090", "--engine", "llamacpp", "--weights", "q4_k_m",
                    "--n-cpu-moe", "24", "--context", "8k", "--output-tokens", "256")
    assert code == 0 and f"{r.memory_per_device / GiB:.2f} GiB" in out


def test_request_engine_settings_are_the_cli_flags_sglang_mem_fraction_static() -> None:
    """engine_settings.mem_fraction_static = --mem-fraction-static: Llama-3.1-8B bf16 on an RTX 4090 at 0.8."""
    job = _plan_job("    engine: sglang\n    engine_settings: {mem_fraction_static: 0.8}\n", "llama-3.1-8b", "none",
                    "rtx-4090", 1, "4k")
    r = fit("llama-3.1-8b", "rtx-4090", 1, engine="sglang", context=4096, concurrency=1, output_tokens=256,
            mem_fraction_static=0.8)
    assert r.estimate is not None and r.estimate.details["mem_fraction_static"] == 0.8
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]
    code, data = run_json("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "sglang",
                          "--mem-fraction-static", "0.8", "--context", "4k", "--output-tokens", "256")
    d = data["memory"]["details"]
    assert code == 0 and d["mem_fraction_static"] == 0.8
    assert d["max_total_num_tokens"] == r.estimate.details["max_total_num_tokens"]
    assert d["workload_bytes"] == job.section("memory").value("need_peak")


def test_cpu_instance_training_is_timed_on_the_vms_cores_everywhere() -> None:
    """A LoRA on an AWS m7i.4xlarge (16 vCPUs = 8 of the 8488C's 48 cores): fit --train, train --device, recommend
    --train and the plan all time it on the VM's share of the AMX peak (8 x 3.2 GHz x 1,024 FLOP/cycle) and size it
    against the instance's 64 GiB. Before: the CLI and recommend timed it on the whole 48-core socket, and the plan
    had no memory budget for it."""
    cpu = same_training_seconds_everywhere("qwen2.5-0.5b", "aws-m7i.4xlarge", "lora", 2048, "10M")
    tt = cpu.training_time
    assert tt["peak_flops"] == pytest.approx(8 * 3.2e9 * 1024) and tt["peak_key"] == "bf16"
    assert cpu.plan_job.section("memory").value("usable") == 64 * GiB


def test_recommend_replicas_for_a_throughput_target_run_at_fits_speed() -> None:
    """Replicas added to reach a tokens/s target are sized by ``fit`` at the per-replica concurrency, with the
    option's engine and format: the link bandwidth of a multi-GPU instance (tensor parallel) and every other
    workload setting ``fit`` reads are the same. Before, a bare speed estimate without the link was used."""
    import math

    rec = recommend_inference("llama-3.1-70b-instruct", context=4096, concurrency=256,
                              constraints=Constraints(providers=("aws",), tokens_per_second=10000))
    replicated = [o for o in rec.options if o.instances > 1]
    assert any(o.tensor_parallel > 1 for o in replicated)  # 256 users' KV: more than the weights' TP
    for o in replicated[:4]:
        per = max(1, math.ceil(256 / o.instances))
        r = fit("llama-3.1-70b-instruct", o.target, engine=o.engine, weights=o.weights_format, context=4096,
                concurrency=per)
        assert r.speed is not None and r.speed.tokens_per_second is not None
        # the users there are produce tokens: instances beyond 256 / per add none (fit's own rule inside one)
        assert r.tokens_per_second_total is not None
        assert o.tokens_per_second == pytest.approx(r.tokens_per_second_total * min(o.instances, 256 / per),
                                                    rel=1e-12)
        assert o.tokens_per_second_per_user == r.speed.tokens_per_second_per_user


def test_plan_alternatives_are_searched_on_the_jobs_engine() -> None:
    """A job that names its engine gets alternatives sized on that engine, as ``recommend --engine`` gives them.
    Before, the plan's search used each candidate's default engine unless llama.cpp settings were present."""
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen2.5-0.5b}\n"
            "    precision: bf16\n    engine: vllm\n    traffic:\n      concurrency: {typical: 2, peak: 2}\n"
            "      context: {typical: 2k, peak: 2k}\n      output: {typical: 128, peak: 128}\n")
    plan = make_plan(parse_request(text, source="t.yaml"), alternatives=True)
    got = [(o["target"], o["weights_format"], o["tokens_per_second"]) for o in plan.jobs[0].options]
    rec = recommend_inference("qwen2.5-0.5b", context=2048, concurrency=2, output_tokens=128, engine="vllm",
                              quantization_advice=False)
    assert got and got == [(o.target, o.weights_format, o.tokens_per_second) for o in rec.options[:6]]
    default = recommend_inference("qwen2.5-0.5b", context=2048, concurrency=2, output_tokens=128,
                                  quantization_advice=False)
    assert got != [(o.target, o.weights_format, o.tokens_per_second) for o in default.options[:6]]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_stated_running_cap_below_the_concurrency_queues_the_rest_on_either_pool_engine(engine: str) -> None:
    """--max-num-seqs 4 with 8 sequences requested: that server runs 4 at once and the other 4 wait in its queue (vLLM
    max_num_seqs, SGLang max_running_requests), one rule for both engines. Before it was 'does not fit' (exit 1);
    the KV is now sized for the 4 running (8 x 8192 tokens of Llama-3.1-8B's 128 KiB per token would be 8 GiB)."""
    base = ("infer", "llama-3.1-8b", "--memory", "80GiB", "--engine", engine, "--concurrency", "8", "--context", "8192")
    code, out = run_json(*base, "--max-num-seqs", "4")
    assert code == 0 and out["details"]["fits"] is True
    assert out["details"]["running_sequences"] == 4
    queue = [a for a in out["assumptions"] if a["name"] == "running_sequences"]
    assert queue and queue[0]["value"] == 4 and "4 of the 8 requests wait in its queue" in queue[0]["why"]
    # 4 sequences x 8192 tokens x (2 x 8 KV heads x 128 x 2 B x 32 layers): the model's config, not our output
    assert out["details"]["kv_needed_bytes"] == 4 * 8192 * 2 * 8 * 128 * 2 * 32
    code, out = run_json(*base, "--max-num-seqs", "16")
    assert code == 0 and out["details"]["running_sequences"] == 8
    assert not [a for a in out["assumptions"] if a["name"] == "running_sequences"]


def _service(model: str, resources: str, engine: str, quant: str, context: int, concurrency: int,
             output: int = 256):  # type: ignore[no-untyped-def]
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = (f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n"
            f"    quantization: {quant}\n    engine: {engine}\n    traffic:\n"
            f"      concurrency: {{typical: {concurrency}, peak: {concurrency}}}\n"
            f"      context: {{typical: {context}, peak: {context}}}\n      output: {{typical: {output}, peak: {output}}}\n"
            f"    resources: {resources}\n")
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


def test_a_service_on_a_cpu_instance_is_planned_as_fit_answers() -> None:
    """Qwen2.5-0.5B Q8_0 on llama.cpp on an AWS m7i.4xlarge (a CPU VM: 64 GiB of RAM, 8 of the socket's 48 cores):
    ``fit --device aws-m7i.4xlarge``, ``recommend`` and ``models --fits-on`` size it against the instance's RAM and
    time it on the VM's share of the socket. The plan fitted the bare CPU instead: an ERROR check "has no sourced
    memory size", no verdict and no speed (exit 1) before the fix."""
    job = _service("qwen2.5-0.5b", "{instance: aws-m7i.4xlarge}", "llamacpp", "q8_0", 4096, 2)
    r = fit("qwen2.5-0.5b", "aws-m7i.4xlarge", engine="llamacpp", weights="q8_0", context=4096, concurrency=2,
            output_tokens=256)
    assert r.fits and r.speed is not None
    assert any(a.name == "cpu_vm_bandwidth_share" and float(a.value) < 1 for a in r.assumptions)
    mem, spd = job.section("memory"), job.section("speed")
    assert mem.value("usable") == 64 * GiB and mem.value("budget") == r.budget_per_device
    assert mem.value("fits") is True and mem.value("need_peak") == r.memory_per_device
    assert spd.value("tps_user_peak") == pytest.approx(r.speed.tokens_per_second_per_user, rel=1e-12)
    assert spd.value("ttft_peak") == pytest.approx(r.speed.ttft_seconds, rel=1e-12)
    rec = recommend_inference("qwen2.5-0.5b", context=4096, concurrency=2, output_tokens=256, engine="llamacpp",
                              weights="q8_0", quantization_advice=False)
    o = next(o for o in (*rec.options, *rec.rejected) if o.target == "aws-m7i.4xlarge")
    assert o.memory_per_device == r.memory_per_device and o.tokens_per_second_per_user == pytest.approx(
        r.speed.tokens_per_second_per_user, rel=1e-12)


def test_replicas_of_one_machine_share_the_load_in_fit_recommend_and_plan() -> None:
    """Qwen2.5-7B (28 heads) on an AWS p5.48xlarge (8 x H100): vLLM runs 2 replicas of TP 4, and 5 users are spread
    over them, so the fullest replica serves ceil(5 / 2) = 3 (the rule ``recommend`` already used for replicas it
    adds, and the plan). ``fit`` sized each replica's memory for all 5 sequences and its speed for 5 // 2 = 2 (710
    vs the plan's 688 tokens/s per user; 64 users: a workload need of 17.63 vs 14.13 GiB) before the fix."""
    spec = load_model("qwen2.5-7b")
    r = fit(spec, "aws-p5.48xlarge", engine="vllm", context=8192, concurrency=5, output_tokens=256)
    assert (r.tensor_parallel, r.replicas) == (4, 2) and r.estimate is not None and r.speed is not None
    one_replica = estimate_inference(spec, engine="vllm", context=8192, concurrency=3, output_tokens=256,
                                     tensor_parallel=4, memory=r.details["usable_memory_per_device"])
    assert r.estimate.details["workload_bytes"] == one_replica.details["workload_bytes"]
    assert r.speed.concurrency == 3
    job = _service("qwen2.5-7b", "{instance: aws-p5.48xlarge}", "vllm", "none", 8192, 5)
    assert job.hardware.tensor_parallel == 4 and job.hardware.replicas == 2
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]
    assert job.section("speed").value("tps_user_peak") == pytest.approx(r.speed.tokens_per_second_per_user,
                                                                        rel=1e-12)
    rec = recommend_inference(spec, context=8192, concurrency=5, output_tokens=256, engine="vllm", weights="bf16",
                              quantization_advice=False)
    o = next(o for o in (*rec.options, *rec.rejected) if o.target == "aws-p5.48xlarge")
    assert o.tokens_per_second_per_user == pytest.approx(r.speed.tokens_per_second_per_user, rel=1e-12)


def test_the_cost_per_million_tokens_of_an_instance_is_the_same_in_fit_recommend_and_plan() -> None:
    """An instance's price buys every replica's tokens: Qwen2.5-7B on an AWS p5.48xlarge runs 2 replicas of TP 4,
    64 users. ``fit`` divided the whole instance's $55.04/h by one replica's tokens/s ($1.31 per million output
    tokens) where ``recommend`` said $0.66 before the fix; the web's fits-on grid showed one replica's tokens/s."""
    from llmsizer.formulas.cost import cost_per_million_tokens

    r = fit("qwen2.5-7b", "aws-p5.48xlarge", engine="vllm", context=8192, concurrency=64, output_tokens=256)
    assert r.replicas == 2 and r.speed is not None and r.speed.tokens_per_second is not None
    assert r.tokens_per_second_total == pytest.approx(2 * r.speed.tokens_per_second, rel=1e-12)
    price = load_catalog().instances["aws-p5.48xlarge"].price_per_hour
    assert price is not None
    code, data = run_json("fit", "qwen2.5-7b", "--device", "aws-p5.48xlarge", "--context", "8k", "--concurrency",
                          "64", "--output-tokens", "256")
    assert code == 0 and data["tokens_per_second_total"] == pytest.approx(r.tokens_per_second_total, rel=1e-12)
    assert data["cost"]["per_million_tokens"] == pytest.approx(
        cost_per_million_tokens(price, r.tokens_per_second_total), rel=1e-12)
    rec = recommend_inference("qwen2.5-7b", context=8192, concurrency=64, output_tokens=256, engine="vllm",
                              weights="bf16", quantization_advice=False)
    o = next(o for o in (*rec.options, *rec.rejected) if o.target == "aws-p5.48xlarge")
    assert o.tokens_per_second == pytest.approx(r.tokens_per_second_total, rel=1e-12)
    assert o.cost_per_million_tokens == pytest.approx(data["cost"]["per_million_tokens"], rel=1e-12)
    job = _service("qwen2.5-7b", "{instance: aws-p5.48xlarge}", "vllm", "none", 8192, 64)
    assert job.section("speed").value("tps_total_typical") == pytest.approx(r.tokens_per_second_total, rel=1e-12)
    _, text, _ = run("fit", "qwen2.5-7b", "--device", "aws-p5.48xlarge", "--context", "8k", "--concurrency", "64",
                  "--output-tokens", "256")
    assert f"all 2 replicas: {r.tokens_per_second_total:,.1f} tokens/s" in text  # the table is one replica's


def test_owned_hardware_is_priced_by_one_rule_for_serving_and_training() -> None:
    """An RTX 4090 of your own at $0.30/kWh (its 450 W TDP: $0.135/h): ``recommend --train --kwh-price`` priced the
    LoRA run at that power price, ``fit --kwh-price`` priced serving at it, but ``fit --train --kwh-price`` gave no
    cost at all (it read an instance's price only) before the fix. estimate/fit.py hourly_price is the one rule."""
    from llmsizer.formulas.cost import power_price_per_hour, run_cost

    tdp = builtin_catalog().devices["rtx-4090"].tdp
    assert tdp is not None
    price = power_price_per_hour(float(tdp.base), 0.3, 1)
    wl = ("--method", "lora", "--seq", "2048", "--tokens", "10M")
    code, data = run_json("fit", "llama-3.2-1b", "--device", "rtx-4090", "--train", *wl, "--kwh-price", "0.3")
    tt = data["training_time"]
    assert code == 0 and tt["price_per_hour"] == pytest.approx(price, rel=1e-12)
    assert tt["cost"] == pytest.approx(run_cost(price, tt["seconds"]), rel=1e-12)
    rec = recommend_training("llama-3.2-1b", tokens=10e6, constraints=Constraints(kwh_price=0.3),
                             training_fields={"method": "lora", "seq_len": 2048})
    o = next(o for o in (*rec.options, *rec.rejected) if o.target == "rtx-4090")
    assert o.price_per_hour == pytest.approx(price, rel=1e-12) and o.cost_basis == "power"
    assert o.training_seconds == pytest.approx(tt["seconds"], rel=1e-12)
    assert o.run_cost == pytest.approx(tt["cost"], rel=1e-12)
    _, serving = run_json("fit", "llama-3.2-1b", "--device", "rtx-4090", "--kwh-price", "0.3")
    assert serving["cost"]["price_per_hour"] == pytest.approx(price, rel=1e-12)


def test_the_python_api_fits_a_training_run_with_its_duration_as_the_cli_does() -> None:
    """``llmsizer.fit_training(..., tokens=...)`` is ``fit --train --tokens``: the same per-device memory, verdict and
    training_time (wall clock, price, cost), and ``train --device --tokens`` prints the same duration. Before, the
    duration and its price were composed in the two CLI commands and the Python API had no training fit."""
    import llmsizer

    assert "fit_training" in llmsizer.__all__
    r = llmsizer.fit_training("qwen2.5-0.5b", "aws-m7i.4xlarge", method="lora", seq_len=2048, tokens=10e6)
    code, data = run_json("fit", "qwen2.5-0.5b", "--device", "aws-m7i.4xlarge", "--train", "--method", "lora",
                          "--seq", "2048", "--tokens", "10M")
    assert code == 0 and json.loads(json.dumps(r.to_dict(), default=str)) == data
    tt = data["training_time"]
    price = load_catalog().instances["aws-m7i.4xlarge"].price_per_hour
    assert tt["price_per_hour"] == price and tt["cost"] == pytest.approx(price * tt["seconds"] / 3600, rel=1e-12)
    _, train = run_json("train", "qwen2.5-0.5b", "--device", "aws-m7i.4xlarge", "--method", "lora", "--seq", "2048",
                        "--tokens", "10M")
    assert train["duration"]["seconds"] == tt["seconds"] and train["totals"] == data["memory"]["totals"]


def test_fit_train_times_the_zero_stage_its_memory_takes() -> None:
    """Several devices, no sharding named: the least-sharded ZeRO stage that fits is the run that is sized *and*
    timed (its collectives: formulas/training_time.py eqs. (7c), (7e)), as the plan does; the memory said ZeRO-k
    while the duration timed DDP before."""
    r = fit_training("llama-3.1-8b", "aws-p4d.24xlarge", tokens=1e9)
    zero = [a.value for a in r.assumptions if a.name == "zero"]
    assert zero and zero[0] >= 1
    assert r.duration is not None and r.duration.step is not None
    assert r.duration.step.sharding == ("full" if zero[0] == 3 else f"zero{zero[0]}")


def test_train_says_its_wall_clock_as_the_plan_does() -> None:
    """`train --device --tokens` and `fit --train` say a run's wall clock and its calibrated range in the plan's
    words (units.format_seconds: days past 2 days; the range in its low end's unit, units.format_seconds_range),
    from the seconds their --json gives."""
    from llmsizer.units import format_seconds, format_seconds_range

    args = ("train", "llama-3.1-8b", "--device", "h100-sxm", "--tokens", "10B")
    code, text, _ = run(*args)
    _, out, _ = run(*args, "--json")
    d = json.loads(out)["duration"]
    lo, hi = d["calibrated_seconds_range"]
    assert d["seconds"] > 2 * 86400
    assert (f"= {format_seconds(d['seconds'])} wall clock ({format_seconds_range(lo, hi)} calibrated "
            "range)") in text

"""One answer across surfaces, from a new user's probe (newuser6): the same question asked through `models --fits-on`
/ `recommend` and `fit` gets the same numbers. The truth each test compares with is `fit` on the same hardware with
the format the other surface reported (the command a user runs next), never a number copied from our output; each
test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run, run_json

ROOT = Path(__file__).resolve().parents[2]

# a GPU as `hardware detect` writes one that is not in the catalog: memory from the driver, no form_factor (so the
# engine rule, estimate/device.py engine_rule, has no form factor to choose vLLM or llama.cpp by), no bandwidth
DETECTED = {"devices": [{"id": "detected-gpu", "name": "A GPU (detected)", "kind": "gpu", "vendor": "NVIDIA",
                         "memory_usable": {"value": 16376, "unit": "MiB", "source": "detected"}, "owned": True}]}


@pytest.fixture
def detected(tmp_path: Path) -> Path:
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(DETECTED), encoding="utf-8")
    return path


WORKLOAD = ("--context", "8k", "--concurrency", "2")
MODELS = ("deepseek-v2-lite", "falcon-7b-instruct", "gemma-2-9b-it", "gpt-oss-20b", "llama-3.1-8b", "qwen2.5-7b")


@pytest.mark.parametrize("where", ["hardware file", "gpu --memory"])
def test_fits_on_a_gpu_without_form_factor_is_fits_answer_for_the_format_it_names(detected: Path,
                                                                                   where: str) -> None:
    """Before, a smaller rung of the format ladder (awq-int4) was sized on the engine the device's rule gives the
    unquantized checkpoint (transformers), while `fit --weights awq-int4` runs AWQ on vLLM (the rule: a quantized
    format's engine): `models --fits-on` said gpt-oss-20b fits at awq-int4 (transformers, 15.44 GB) on a 16 GiB
    detected card where `fit --weights awq-int4` said it does not (vLLM), and DeepSeek-V2-Lite 11.15 GB vs 15.98 GB."""
    dev = (["--fits-on", "detected-gpu", "--hardware-file", str(detected)] if where == "hardware file"
           else ["--fits-on", "gpu", "--memory", "10GiB"])
    fit_dev = ["--device", *dev[1:]]
    compared = 0
    for model in MODELS:
        code, data = run_json("models", model, *dev, *WORKLOAD)
        assert code in (0, 1)
        (opt,) = data["models"]
        if opt["status"] == "rejected":
            tried = opt["reasons"][0].partition("smallest format tried (")[2].partition(")")[0]
            if tried and opt["memory_per_device"] is not None:  # fit's numbers at that format, and its engine
                code, f = run_json("fit", model, *fit_dev, *WORKLOAD, "--weights", tried.lower())
                assert code == 1 and (f["engine"], f["memory_per_device"]) == (opt["engine"],
                                                                               opt["memory_per_device"]), model
                compared += 1
            continue
        code, f = run_json("fit", model, *fit_dev, *WORKLOAD, "--weights", opt["weights_format"])
        assert code == 0 and f["fits"], (model, opt)
        assert (f["engine"], f["weights_format"]) == (opt["engine"], opt["weights_format"]), model
        assert f["memory_per_device"] == opt["memory_per_device"], model
        assert f["budget_per_device"] == opt["budget_per_device"], model
        compared += 1
    assert compared >= 2  # the comparison ran (else the test could not fail)


def test_fit_names_every_media_part_infer_names() -> None:
    """An image and a video in one prompt are two ``media`` assumptions of the estimate; `fit` printed only the
    first (its one-per-name merge dropped the video: 6,398 media tokens, of them 2,394 the video's, and no word of a
    video in `fit`'s text), while `infer` printed both."""
    media = ["--images", "4", "--image-size", "1024x768", "--video-frames", "16", "--video-size", "640x360"]
    code, infer_out, _ = run("infer", "qwen2.5-vl-7b-instruct", "--device", "l40s", *media)
    assert code == 0
    code, fit_out, _ = run("fit", "qwen2.5-vl-7b-instruct", "--device", "l40s", *media)
    assert code == 0

    def parts(text: str) -> list[str]:
        line = next(ln for ln in text.splitlines() if ln.startswith("assumptions: "))
        return [a for a in line.removeprefix("assumptions: ").split("; ") if a.startswith("media=")]

    assert len(parts(infer_out)) == 2  # the images and the video
    assert parts(fit_out) == parts(infer_out)


def test_the_python_output_tokens_range_names_output_tokens() -> None:
    """estimate_inference(output_tokens=-1) said '... [0, 2,147,483,648] (tokens; 0 means no sliding window)': the
    range's words were a sliding window's, shared by every token count that may be 0."""
    from llmsizer.errors import InputError
    from llmsizer.estimate.inference import estimate_inference

    with pytest.raises(InputError) as e:
        estimate_inference("llama-3.1-8b", context=4096, output_tokens=-1)
    assert str(e.value).startswith("output_tokens: -1 is out of range") and "sliding window" not in str(e.value)


LORA_REQUEST = """\
version: 1
title: t
jobs:
  - name: ft
    kind: training
    model: {{name: llama-3.1-8b}}
    method: lora
    resources: {{device: h100-sxm, count: 1}}
    dataset: {{size: 1 GB, tokens: 1M tokens}}
    peft: {{{field}: {value}}}
"""


@pytest.mark.parametrize(("field", "value"), [("rank", "0"), ("rank", "2.5"), ("alpha", "0.5"), ("alpha", "-1"),
                                              ("alpha", "0"), ("rank", "64")])
def test_lora_rank_and_alpha_take_one_range_everywhere(tmp_path: Path, field: str, value: str) -> None:
    """Before, LoRA alpha had three rules: `train --alpha` an integer >= 1 (described as a hidden width), a request's
    peft.alpha any number >= 0, and TrainingWorkload(alpha=...) anything at all ('x', -1); rank 0 got three
    messages. Each surface now accepts the same values and refuses the others with the same words."""
    from llmsizer.errors import InputError
    from llmsizer.estimate.training import estimate_training

    code, _, err = run("train", "llama-3.1-8b", "--method", "lora", f"--{field}", value)
    cli_ok = code == 0
    req = tmp_path / "req.yaml"
    req.write_text(LORA_REQUEST.format(field=field, value=value))
    rcode, _, rerr = run("request", "check", str(req))
    try:
        estimate_training("llama-3.1-8b", method="lora", **{field: float(value) if "." in value else int(value)})
        py_ok, py_err = True, ""
    except InputError as e:
        py_ok, py_err = False, str(e)
    assert cli_ok == (rcode == 0) == py_ok, (err, rerr, py_err)
    if not cli_ok:  # one message: the CLI's (after 'argument --rank: '), the request's and Python's range words
        words = err.strip().split(" is out of range; ")[-1].split("; expected ")[-1].removesuffix(" (see --help)")
        assert words in rerr and words in py_err, (err, rerr, py_err)


def test_group_size_is_described_as_a_group_size_by_the_flag_and_by_python() -> None:
    """`infer --group-size 0` explained its range as '(hidden / intermediate / head width ...)' and
    estimate_inference(group_size=0) as '(devices, nodes, batch or steps)': one range, one description."""
    from llmsizer.errors import InputError
    from llmsizer.estimate.inference import estimate_inference

    code, _, err = run("infer", "llama-3.1-8b", "--weights", "awq-int4", "--group-size", "0")
    assert code == 2
    with pytest.raises(InputError) as e:
        estimate_inference("llama-3.1-8b", weights="awq-int4", group_size=0)
    words = str(e.value).removeprefix("group_size: ")
    assert words in err and "quantization" in words


def test_when_no_zero_stage_fits_the_chosen_one_is_the_closest_and_says_so() -> None:
    """Several devices, a budget, no stage fits: the run shown was ZeRO-3 with the words 'least-sharded ZeRO stage
    that fits', though nothing fit and ZeRO-3 needs more than ZeRO-1 for QLoRA of Llama-3.1-8B on 2 x 24 GiB
    (23,980,649,408 B vs 23,831,919,488 B: its gathered layers add more than it shards). The truth: each stage
    asked for explicitly (`train --zero K`)."""
    # base_dtype bf16 for every stage alike: by default ZeRO-3 (sharded QLoRA, not prepared by PEFT) keeps the
    # unquantized tensors bf16 while ZeRO-0..2 take PEFT's fp32 upcast, which would make ZeRO-3 the smallest
    flags = ("llama-3.1-8b", "--method", "qlora", "--grad-checkpointing", "none", "--memory", "24GiB", "--gpus", "2",
             "--base-dtype", "bf16")
    need = {}
    for k in range(4):
        code, d = run_json("train", *flags, "--zero", str(k))
        assert code == 1 and d["details"]["fits"] is False  # none fits (else the test could not fail)
        need[k] = d["totals"]["device"]["bytes"]
    assert min(need.values()) < need[3]  # the premise: ZeRO-3 is not the smallest here
    code, d = run_json("train", *flags)
    zero = next(a for a in d["assumptions"] if a["name"] == "zero")
    assert d["totals"]["device"]["bytes"] == min(need.values()) == need[zero["value"]]
    assert zero["value"] == min(k for k in need if need[k] == min(need.values()))  # the least sharded of equals
    assert "no ZeRO stage fits" in zero["why"]
    code, f = run_json("fit", *flags[:-4], *flags[-2:], "--train", "--device", "gpu", "--count", "2")
    assert f["memory_per_device"] == d["totals"]["device"]["bytes"]


CPU_PAIR = """\
version: 1
title: two CPU servers
jobs:
  - name: c
    kind: inference
    model: {{name: qwen2.5-7b}}
    {quantization}
    engine: {engine}
    resources: {{device: {device}, count: 2{memory}}}
    traffic:
      concurrency: {{typical: 4, peak: 4}}
      context: {{typical: 2k, peak: 2k}}
      output: {{typical: 256, peak: 256}}
    service: {{duration: 1 month}}
"""


@pytest.mark.parametrize(("device", "engine", "weights"), [("intel-xeon-platinum-8488c", "llamacpp", "q4_k_m"),
                                                           ("intel-xeon-platinum-8488c", "transformers", None),
                                                           ("apple-m3-max-48gb", "llamacpp", "q4_k_m")])
def test_two_cpus_are_two_replicas_in_fit_as_in_the_plan(tmp_path: Path, device: str, engine: str,
                                                         weights: str | None) -> None:
    """A plan serves on 2 CPUs (or 2 Apple chips) as 2 replicas, one model each; `fit --count 2` refused llama.cpp
    there ('llama.cpp splits a model over several GPUs ... use --count 1') and ran transformers as TP 2 (8.10 GiB
    per device where each replica holds the whole model, 15.10 GiB)."""
    memory = ", memory: 64GiB" if device.startswith("intel") else ""
    req = tmp_path / "req.yaml"
    req.write_text(CPU_PAIR.format(device=device, engine=engine, memory=memory,
                                   quantization=f"quantization: {weights}" if weights else ""))
    code, plan = run_json("plan", str(req))
    figures = {f["key"]: f["value"] for s in plan["jobs"][0]["sections"] for f in s["figures"]}
    flags = ["--device", device, "--count", "2", "--engine", engine, "--context", "2k", "--concurrency", "4",
             "--output-tokens", "256", *(["--weights", weights] if weights else []),
             *(["--memory", "64GiB"] if memory else [])]
    code, f = run_json("fit", "qwen2.5-7b", *flags)
    assert code == 0 and f["fits"] and (f["tensor_parallel"], f["replicas"]) == (1, 2)
    assert f["memory_per_device"] == figures["need_peak"]
    assert f["speed"]["ttft_seconds"] == figures["ttft_peak"]
    assert f["speed"]["tokens_per_second_per_user"] == figures["tps_user_peak"]
    assert f["tokens_per_second_total"] == pytest.approx(figures["tps_total_typical"], rel=1e-12)
    # each replica is the whole model on one device at half the load
    one = ["--count", "1", "--concurrency", "2"]
    code, single = run_json("fit", "qwen2.5-7b", *flags, *one)
    assert single["memory_per_device"] == f["memory_per_device"]
    assert f["tokens_per_second_total"] == pytest.approx(2 * single["tokens_per_second_total"], rel=1e-12)


INSTANCES = """\
version: 1
title: several instances
jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    resources: {{instance: {instance}, count: {count}}}
    quantization: {weights}
    traffic:
      concurrency: {{typical: {concurrency}, peak: {concurrency}}}
      context: {{typical: 4k, peak: 4k}}
      output: {{typical: 256, peak: 256}}
    service: {{duration: 1 month}}
"""


@pytest.mark.parametrize(("instance", "count", "weights", "concurrency"), [("aws-g6e.xlarge", 4, "awq-int4", 64),
                                                                           ("aws-g5.12xlarge", 8, "none", 64)])
def test_fit_on_several_instances_is_the_plans_answer(tmp_path: Path, instance: str, count: int, weights: str,
                                                      concurrency: int) -> None:
    """A request may name N instances (resources.instance + count, a whole multiple of its devices: N machines, each
    a replica) and `recommend` adds instances as replicas; `fit --device INSTANCE --count N` refused it for serving
    ('aws-g6e.xlarge has 1 devices; drop --count or use the device name') while `fit --train` took it."""
    req = tmp_path / "req.yaml"
    req.write_text(INSTANCES.format(instance=instance, count=count, weights=weights, concurrency=concurrency))
    _, plan = run_json("plan", str(req))
    job = plan["jobs"][0]
    figures = {f["key"]: f["value"] for s in job["sections"] for f in s["figures"]}
    flags = ["--device", instance, "--count", str(count), "--context", "4k", "--concurrency", str(concurrency),
             "--output-tokens", "256", *(["--weights", weights] if weights != "none" else [])]
    code, f = run_json("fit", "llama-3.1-8b", *flags)
    assert code == 0 and f["fits"]
    assert f["replicas"] == job["hardware"]["replicas"] and f["tensor_parallel"] == job["hardware"]["tensor_parallel"]
    assert f["memory_per_device"] == figures["reserved"]
    assert f["speed"]["tokens_per_second_per_user"] == figures["tps_user_peak"]
    assert f["tokens_per_second_total"] == pytest.approx(figures["tps_total_typical"], rel=1e-12)
    assert f["cost"]["price_per_hour"] == pytest.approx(figures["price_per_hour"], rel=1e-12)
    assert f["cost"]["price_per_hour"] == pytest.approx(count // {"aws-g6e.xlarge": 1, "aws-g5.12xlarge": 4}[instance]
                                                        * next(r["price"]["value"] for r in json.loads(
                                                            (ROOT / "src/llmsizer/catalog/data/hardware/"
                                                             "instances_aws.json").read_text())["instances"]
                                                            if r["id"] == instance), rel=1e-12)


@pytest.mark.parametrize("device", ["h100-sxm", "aws-m7i.4xlarge", "rtx-4090"])
def test_train_device_json_is_the_python_estimate(device: str) -> None:
    """`train --device` printed the estimate without the device and its memory (fit_training's estimate), while
    estimate_training(device=...) and `infer --device` name both first: the same question, two assumption lists."""
    from llmsizer.estimate.training import estimate_training

    code, d = run_json("train", "llama-3.1-8b", "--method", "lora", "--device", device)
    py = json.loads(json.dumps(estimate_training("llama-3.1-8b", method="lora", device=device).to_dict(),
                               default=str))
    assert d == py
    assert [a["name"] for a in d["assumptions"][:2]] == ["device", "device_memory"]

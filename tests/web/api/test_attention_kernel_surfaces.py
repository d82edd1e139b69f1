"""``attention_kernel`` (specs/training.py; estimate/efficiency.py attention_kernel_share) reaches the one duration the
same way from the CLI, the Python API and the web API, is named as an assumption in every training estimate (the
memory estimate: the kernel; the duration: the kernel timed after torch SDPA's dispatch and its share of the peak),
and a kernel the attention does not run is one line (exit 2, a 4xx on the web)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

RUN = {"method": "lora", "seq_len": 8192, "micro_batch": 1, "grad_checkpointing": "full"}
FLAGS = ["--method", "lora", "--grad-checkpointing", "full", "--seq", "8192", "--batch", "1", "--device", "h100-sxm", "--tokens", "1B"]


def _named(assumptions: list[dict]) -> dict[str, dict]:
    return {a["name"]: a for a in assumptions}


def test_the_kernel_through_cli_api_and_web(client) -> None:
    spec = load_model("llama-3.1-8b")
    dev = builtin_catalog().devices["h100-sxm"]
    seconds = {}
    for kernel in (None, "cudnn", "flash-attn-2"):
        fields = dict(RUN, **({} if kernel is None else {"attention_kernel": kernel}))
        api = training_duration_for(spec, dev, 1, 1e9, fields).seconds
        cli = run_cli_json("train", "llama-3.1-8b", *FLAGS, *(() if kernel is None else ("--attention-kernel", kernel)))
        web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", **RUN, "device": "h100-sxm", "tokens": "1B",
                                                 **({} if kernel is None else {"attention_kernel": kernel})})
        assert web.status_code == 200, web.text
        assert api == pytest.approx(cli["duration"]["seconds"], rel=1e-12) == web.json()["duration"]["seconds"]
        seconds[kernel] = api
        memory = _named(cli["assumptions"])["attention_kernel"]
        assert memory["value"] == (kernel or "sdpa") and memory["default"] == (kernel is None)
        assert _named(cli["duration"]["assumptions"])["attention_kernel_timed"]["value"] == (kernel or "flash-attn-2")
    # SDPA on an H100 runs its FlashAttention-2 backend (the torch of the validation rows): the same seconds as naming
    # it; cuDNN's wgmma kernel is faster (pytorch/pytorch#142132)
    assert seconds[None] == pytest.approx(seconds["flash-attn-2"], rel=1e-12)
    assert seconds["cudnn"] < seconds[None]


def test_the_duration_names_the_timed_kernel() -> None:
    spec = load_model("llama-3.1-8b")
    devs = builtin_catalog().devices
    # V100 in fp16: torch SDPA's mem-efficient backend (sdp_utils.cpp less_than_sm80_mem_efficient_dtypes: fp16/fp32)
    for device, kernel, timed in (("h100-sxm", None, "flash-attn-2"), ("v100-sxm2-16gb", None, "mem-efficient"),
                                  ("a100-sxm-80gb", "flash-attn-3", "flash-attn-2")):
        if device not in devs:
            pytest.skip(f"{device} not in the catalog")
        d = training_duration_for(spec, devs[device], 1, 1e9,
                                  dict(RUN, seq_len=2048, precision="fp16-mixed",
                                       **({} if kernel is None else {"attention_kernel": kernel, "attention": "flash"})))
        named = {a.name: a for a in d.assumptions}
        assert named["attention_kernel_timed"].value == timed
        assert 0 < named["attention_kernel_share"].value < 1
        if kernel == "flash-attn-3":
            assert any("sm90" in w for w in d.warnings)


def test_every_training_estimate_names_the_kernel() -> None:
    for attention, kernel in (("sdpa", "sdpa"), ("flash", "flash-attn-2"), ("eager", "eager")):
        named = {a.name: a for a in estimate_training("llama-3.2-1b", attention=attention).assumptions}
        assert named["attention_kernel"].value == kernel and named["attention_kernel"].default


def test_a_kernel_the_attention_does_not_run_is_one_line(client) -> None:
    done = run_cli("train", "llama-3.1-8b", "--attention", "flash", "--attention-kernel", "cudnn")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--attention-kernel 'cudnn' does not run --attention 'flash'" in done.stderr
    web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "attention": "flash",
                                             "attention_kernel": "cudnn"})
    assert 400 <= web.status_code < 500 and web.json()["detail"] == done.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")
    done = run_cli("train", "llama-3.1-8b", "--attention-kernel", "fa9")
    assert done.returncode == 2 and "--attention-kernel" in done.stderr


def test_a_kernel_that_cannot_run_on_the_gpu_is_refused_everywhere(client) -> None:
    """flash-attn's mha_fwd: 'FlashAttention only supports Ampere GPUs or newer.' (csrc/flash_attn/flash_api.cpp); torch
    forcing its cuDNN backend on sm70 finds no available kernel (sdp_utils.cpp check_cudnn_hardware_support sm80-sm121):
    neither is timed (as anything faster) on a V100; one line, exit 2, the same 4xx on the web, InputError in Python."""
    spec = load_model("llama-3.1-8b")
    v100 = builtin_catalog().devices["v100-sxm2-32gb"]
    for extra, flags, needle in (({"attention_kernel": "cudnn"}, ("--attention-kernel", "cudnn"), "sm80-sm121"),
                                 ({"attention": "flash"}, ("--attention", "flash"), "Ampere GPUs or newer")):
        with pytest.raises(ValueError, match=needle):
            training_duration_for(spec, v100, 1, 1e9, dict(RUN, **extra))
        done = run_cli("train", "llama-3.1-8b", "--method", "lora", "--device", "v100-sxm2-32gb", "--tokens", "1B",
                       *flags)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr
        web = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "method": "lora", "device": "v100-sxm2-32gb",
                                                 "tokens": "1B", **extra})
        assert 400 <= web.status_code < 500 and needle in web.text


def test_a_swapped_or_named_kernel_says_so() -> None:
    """cuDNN on an A100 runs (sm80+) but has no published speed there: the duration says it times FlashAttention-2
    instead; a named 'sdpa' is the user's choice, not a default."""
    spec = load_model("llama-3.1-8b")
    a100 = builtin_catalog().devices["a100-sxm-80gb"]
    named = {a.name: a for a in training_duration_for(spec, a100, 1, 1e9,
                                                      dict(RUN, attention_kernel="cudnn")).assumptions}
    timed = named["attention_kernel_timed"]
    assert timed.value == "flash-attn-2" and timed.why.startswith("cudnn given; timed as flash-attn-2")
    named = {a.name: a for a in training_duration_for(spec, a100, 1, 1e9,
                                                      dict(RUN, attention_kernel="sdpa")).assumptions}
    assert named["attention_kernel_timed"].value == "flash-attn-2" and not named["attention_kernel_timed"].default


def test_a_search_rejects_the_gpus_that_cannot_run_the_kernel() -> None:
    """recommend --train tries every catalog GPU: one the named attention cannot run on (flash-attn on sm75) is a
    rejected option with the reason, not an error for the whole search, and not a faster option."""
    out = run_cli_json("recommend", "llama-3.1-8b", "--train", "--method", "lora", "--attention", "flash",
                       "--tokens", "1B")
    rejected = {o["device"]: o["reasons"] for o in out["rejected"]}
    assert "t4" in rejected and any("Ampere GPUs or newer" in r for r in rejected["t4"])
    assert all(o["device"] != "t4" for o in out["options"])


@pytest.mark.parametrize(("device", "extra", "words"), [
    ("v100-sxm2-32gb", {"attention": "flash"}, "FlashAttention only supports Ampere GPUs or newer."),
    ("h100-sxm", {"attention": "flash", "precision": "fp32"}, "takes fp16/bf16 only"),
    ("v100-sxm2-32gb", {"attention_kernel": "cudnn"}, "check_cudnn_hardware_support"),
])
def test_a_kernel_the_gpu_cannot_run_is_the_same_4xx_on_every_form(client, device: str, extra: dict,
                                                                   words: str) -> None:
    """The web's training form (memory only, and with tokens), fit with train, a request file's plan and check: the
    same 400 whose detail is the CLI's line (the Python API's message with the flags; API.md "Errors"), as the
    CLI's exit 2 (tests/consistency/test_attention_kernel_refused_everywhere.py); before, only the duration refused
    it."""
    from llmsizer import fit_training
    from llmsizer.errors import DeviceCannotRunError

    with pytest.raises(DeviceCannotRunError) as e:
        fit_training("llama-3.2-1b", device, method="lora", **extra)
    message = str(e.value)
    assert words in message
    body = {"model": "llama-3.2-1b", "method": "lora", "device": device, **extra}
    flags = [w for k, v in extra.items() for w in ("--" + k.replace("_", "-"), v)]
    done = run_cli("train", "llama-3.2-1b", "--method", "lora", "--device", device, *flags)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    line = done.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")
    assert line.startswith("--") and line.endswith(message[len(e.value.field):]), (line, message)
    for path, fields in (("/api/v1/train", body), ("/api/v1/train", {**body, "tokens": "1B"}),
                         ("/api/v1/fit", {**body, "train": True}), ("/api/v1/fit", {**body, "train": True,
                                                                                     "tokens": "1B"})):
        r = client.post(path, json=fields)
        assert r.status_code == 400 and r.json()["detail"] == line, (path, r.text[:300])
        assert r.json()["field"] == e.value.field
    settings = "".join(f"\n      {k}: {v}" for k, v in extra.items())
    text = (f"version: 1\njobs:\n  - name: tune\n    kind: training\n    model: {{name: llama-3.2-1b}}\n"
            f"    method: lora\n    settings:{settings}\n    dataset: {{location: /data}}\n"
            f"    resources: {{device: {device}, count: 1}}\n")
    for path in ("/api/v1/plan", "/api/v1/request/check"):
        r = client.post(path, json={"request": text, "filename": "req.yaml"})
        assert r.status_code == 400 and r.json()["detail"].endswith(
            f"settings.{e.value.field}{message[len(e.value.field):]}" if message.startswith(e.value.field + " ")
            else f"settings.{e.value.field}: {message}"), r.text  # the key path once (plan/compose.py _about)

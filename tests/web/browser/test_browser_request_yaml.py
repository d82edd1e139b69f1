"""The calculator's "Download as request YAML", planned: the downloaded request, given to ``llmsizer plan FILE``
(a separate CLI process) and to the web's /plan, reproduces the calculator's answer: the same engine, weight format,
device or memory budget, memory per device, budget and verdict, which are also the CLI's ``infer`` answer for the
same input. Before, the YAML left out the engine and the device (the plan searched the catalog, on another engine
and format), wrote ``quantization: none`` which the plan read as "choose a format" (awq-int4), and the plan ignored
a memory budget given without a device."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).parent))
from test_browser_pages import api, cli, ready, wait_attr  # noqa: E402

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def figure(job: dict[str, Any], section: str, key: str) -> Any:
    sec = next(s for s in job["sections"] if s["key"] == section)
    return next(f["value"] for f in sec["figures"] if f["key"] == key)


def download_yaml(page: Page, tmp_path: Path) -> Path:
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    out = tmp_path / "request.yaml"
    out.write_text(Path(dl.value.path()).read_text(), "utf-8")
    return out


@pytest.mark.parametrize(("query", "args", "engine", "fmt", "device"), [
    # a memory budget alone (the page's default 24GiB), the engine's default: infer --memory
    ("model=qwen2.5-7b&context=4k&concurrency=2&output_tokens=256&memory=24GiB",
     ("--memory", "24GiB"), "transformers", "bf16", "gpu"),
    # a GGUF format on llama.cpp, the device kind named (infer --device gpu --memory)
    ("model=qwen2.5-7b&context=8k&concurrency=4&output_tokens=512&memory=20GiB&device=gpu&engine=llamacpp&"
     "weights=q4_k_m", ("--memory", "20GiB", "--device", "gpu", "--engine", "llamacpp", "--weights", "q4_k_m"),
     "llamacpp", "gguf:q4_k_m", "gpu"),
    # does not fit: the verdict travels too
    ("model=qwen2.5-7b&context=32k&concurrency=8&output_tokens=256&memory=24GiB",
     ("--memory", "24GiB"), "transformers", "bf16", "gpu"),
])
def test_the_downloaded_request_plans_to_the_calculators_answer(page: Page, server: str, tmp_path: Path, query: str,
                                                                args: tuple[str, ...], engine: str, fmt: str,
                                                                device: str) -> None:
    params = dict(p.split("=") for p in query.split("&"))
    by_cli = cli("infer", params["model"], "--context", params["context"], "--concurrency", params["concurrency"],
                 "--output-tokens", params["output_tokens"], *args, "--max-context", "--max-concurrency")
    ready(page, f"/?{query}")
    wait_attr(page, "#total", "bytes", by_cli["totals"]["device"]["bytes"], "the calculator's answer")
    shown_bytes = int(page.locator("#total").get_attribute("data-bytes") or 0)
    shown_fits = page.locator("#fits").inner_text() == "fits"
    assert shown_fits is by_cli["details"]["fits"]
    yaml_file = download_yaml(page, tmp_path)
    text = yaml_file.read_text()
    assert f"engine: {engine}" in text and "resources:" in text, text

    planned = cli("plan", str(yaml_file))
    by_web = api(server, "/plan", {"request": text, "filename": "request.yaml"})
    for answer in (planned, by_web):
        (job,) = answer["jobs"]
        assert job["hardware"]["device"] == device, text
        assert job["hardware"]["engine"] == engine
        assert f", {fmt}, {engine})" in job["summary"]
        assert figure(job, "memory", "need_peak") == shown_bytes == by_cli["totals"]["device"]["bytes"]
        assert figure(job, "memory", "budget") == by_cli["details"]["memory_budget"]
        assert figure(job, "memory", "fits") is shown_fits
    assert json.dumps(by_web["jobs"], sort_keys=True) == json.dumps(planned["jobs"], sort_keys=True)


@pytest.mark.parametrize(("query", "args", "device"), [
    ("tab=train&model=qwen2.5-0.5b&method=lora&rank=16&micro_batch=2&seq_len=2048&train_device=l4&memory=",
     ("--method", "lora", "--rank", "16", "--batch", "2", "--seq", "2048", "--device", "l4"), "l4"),
    ("tab=train&model=qwen2.5-1.5b&method=full&micro_batch=4&seq_len=4096&memory=16GiB",
     ("--method", "full", "--batch", "4", "--seq", "4096", "--memory", "16GiB"), "gpu"),
    # two machines over a stated network, DDP reducing every micro-step: the plan's duration is train's
    ("tab=train&model=qwen2.5-0.5b&method=full&micro_batch=1&seq_len=2048&grad_accumulation=2&gpus=16"
     "&gpus_per_node=8&network=100%20Gb%2Fs&grad_sync=micro-step&train_device=h100-sxm&tokens=10M&memory=",
     ("--method", "full", "--batch", "1", "--seq", "2048", "--grad-accumulation", "2", "--gpus", "16",
      "--gpus-per-node", "8", "--network", "100 Gb/s", "--grad-sync", "micro-step", "--device", "h100-sxm",
      "--tokens", "10M"), "h100-sxm"),
    # fp32 with TF32 on (the checkbox): the request's settings.tf32, timed at the TF32 peak as train --tf32
    ("tab=train&model=qwen2.5-0.5b&method=full&precision=fp32&tf32=1&micro_batch=1&seq_len=2048"
     "&train_device=a100-sxm-80gb&tokens=10M&memory=",
     ("--method", "full", "--precision", "fp32", "--tf32", "--batch", "1", "--seq", "2048", "--device",
      "a100-sxm-80gb", "--tokens", "10M"), "a100-sxm-80gb"),
    # flex picked on the training tab (its own select, train_attention): the request's settings.attention
    ("tab=train&model=qwen2.5-0.5b&train_attention=flex&seq_len=4096&train_device=h100-sxm&tokens=10M&memory=",
     ("--attention", "flex", "--seq", "4096", "--device", "h100-sxm", "--tokens", "10M"), "h100-sxm"),
    # settings of the Advanced section (generated from train's parser): the request's settings of the same names
    ("tab=train&model=qwen2.5-0.5b&loss=cut-ce&compile=1&zero_grad=zeros&checkpoint_impl=reentrant"
     "&grad_checkpointing=full&train_device=l4&tokens=10M&memory=",
     ("--loss", "cut-ce", "--compile", "--zero-grad", "zeros", "--checkpoint-impl", "reentrant",
      "--grad-checkpointing", "full", "--device", "l4", "--tokens", "10M"), "l4"),
])
def test_the_downloaded_training_request_plans_to_the_calculators_answer(page: Page, server: str, tmp_path: Path,
                                                                         query: str, args: tuple[str, ...],
                                                                         device: str) -> None:
    params = dict(p.split("=") for p in query.split("&"))
    by_cli = cli("train", params["model"], *args, "--max-batch", "--max-seq")
    ready(page, f"/?{query}")
    wait_attr(page, "#total", "bytes", by_cli["totals"]["device"]["bytes"], "the calculator's answer")
    shown_fits = page.locator("#fits").inner_text() == "fits"
    assert shown_fits is by_cli["details"]["fits"]
    text = download_yaml(page, tmp_path).read_text()
    for answer in (cli("plan", str(tmp_path / "request.yaml")),
                   api(server, "/plan", {"request": text, "filename": "request.yaml"})):
        (job,) = answer["jobs"]
        assert job["hardware"]["device"] == device, text
        assert figure(job, "memory", "need") == by_cli["totals"]["device"]["bytes"]
        assert figure(job, "memory", "budget") == by_cli["details"]["memory_budget"]
        assert figure(job, "memory", "fits") is shown_fits
        if "--tokens" in args:
            assert figure(job, "duration", "seconds") == pytest.approx(by_cli["duration"]["seconds"], rel=1e-9)
            if "--gpus" in args:  # one device: no collectives, the plan's network section has no comm_seconds
                assert figure(job, "network", "comm_seconds") == pytest.approx(
                    by_cli["duration"]["step"]["comm_seconds_per_step"], rel=1e-9)


@pytest.mark.parametrize(("query", "args"), [
    # vLLM reserves its pool whatever the load: the page shows the reservation and this workload's need, labelled, and
    # the plan of its request carries both (before: the page showed only the reservation, the plan only the need)
    ("model=llama-3.1-8b&context=8k&concurrency=4&memory=80GiB&engine=vllm", ("--memory", "80GiB", "--engine", "vllm")),
    # output tokens left empty: the page and the request take the one default (specs/workload.py
    # default_output_tokens; before, the page took 0 and the plan min(256, context / 2): another transformers total)
    ("model=llama-3.1-8b&context=8k&concurrency=4&memory=80GiB&engine=transformers",
     ("--memory", "80GiB", "--engine", "transformers")),
])
def test_the_pool_and_the_need_and_the_output_default_are_the_plans(page: Page, server: str, tmp_path: Path,
                                                                   query: str, args: tuple[str, ...]) -> None:
    by_cli = cli("infer", "llama-3.1-8b", "--context", "8k", "--concurrency", "4", *args)
    ready(page, f"/?{query}")
    wait_attr(page, "#total", "bytes", by_cli["totals"]["device"]["bytes"], "the calculator's answer")
    need = by_cli["details"].get("workload_bytes")
    if need is not None:
        wait_attr(page, "#need-bytes", "bytes", need, "the workload's need")
        assert page.locator("#reserved-bytes").get_attribute("data-bytes") == str(by_cli["totals"]["device"]["bytes"])
        assert "vLLM takes its pool whatever the load" in page.locator("#pool-need").inner_text()
    else:
        assert page.locator("#pool-need").is_hidden()
    text = download_yaml(page, tmp_path).read_text()
    (job,) = cli("plan", str(tmp_path / "request.yaml"))["jobs"]
    assert figure(job, "memory", "need_peak") == (need if need is not None else by_cli["totals"]["device"]["bytes"]), text
    if need is not None:
        assert figure(job, "memory", "reserved") == by_cli["totals"]["device"]["bytes"]

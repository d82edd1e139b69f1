"""Session 10's "noticed, not fixed" list: what the JSON said and the text did not, words that meant two things, and
bad input accepted. Each case through the real CLI (exit code and message), its JSON and, where the command is served,
the web API (a 400 whose detail is the CLI's line, or the same body). Each failed before its fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from web_api_helpers import cli_error_line, run_cli, run_cli_json

from llmsizer.errors import InputError

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[3]
NEWER = "0.99.0"  # a vLLM release newer than any with data (estimate/engines.py CURRENT_VERSION)


# ------------------------------------------------------------------------------------- 1. plan text and warnings

def _newer_release_request(tmp_path: Path) -> Path:
    text = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()
    assert "    engine: vllm\n" in text
    req = tmp_path / "newer.yaml"
    req.write_text(text.replace("    engine: vllm\n", f"    engine: vllm\n    engine_version: \"{NEWER}\"\n"))
    return req


def test_plan_text_prints_the_warnings_its_json_has(tmp_path: Path, client) -> None:
    """Before, `plan` printed the job's notes but not its warnings: the newer-release warning was in --json only."""
    req = _newer_release_request(tmp_path)
    args = ("plan", str(req), "--no-alternatives", "--today", "2025-08-01")
    data = run_cli_json(*args)
    chat = next(j for j in data["jobs"] if j["name"] == "support-chat")
    newer = [w for w in chat["warnings"] if f"vLLM {NEWER} is newer" in w]
    assert len(newer) == 1  # each warning once, though the memory and the speed estimate both carry it
    text = run_cli(*args)
    assert text.returncode == 0
    for job in data["jobs"]:
        for w in job["warnings"]:
            if w.startswith("sized with inference numbers"):
                # session 12: the training job's memory line states this ratio, so the text says it there, once
                ratio = re.search(r"\(([0-9.]+)x\)$", w)
                assert ratio and text.stdout.count(f"{ratio.group(1)}x") == 1, w
                assert text.stdout.count(f"  warning: {w}\n") == 0, w
                continue
            assert text.stdout.count(f"  warning: {w}\n") == 1, w
    # the web's report of the same request says it too (its Markdown is the CLI's -o report.md)
    r = client.post("/api/v1/plan", json={"request": req.read_text(), "today": "2025-08-01", "format": "md"})
    assert r.status_code == 200 and r.text.count(newer[0]) == 1


# ---------------------------------------------------------------------------------- 2. fit text and assumptions

@pytest.mark.parametrize("args", [
    ("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "vllm"),
    ("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q4_k_m"),
    ("fit", "llama-3.1-8b", "--device", "h100-sxm", "--train", "--method", "lora"),
])
def test_fit_text_names_every_assumption_its_json_has(args: tuple[str, ...], client) -> None:
    """Before, `fit` printed its own assumptions and the speed's but not the memory estimate's (vLLM's
    gpu_memory_utilization and max_num_seqs, the KV dtype; for --train every training default: micro_batch,
    seq_len, precision...), which only the JSON's memory.assumptions held."""
    data = run_cli_json(*args)
    text = run_cli(*args).stdout
    line = next(x for x in text.splitlines() if x.startswith("assumptions: "))
    shown = {part.split("=", 1)[0] for part in line.removeprefix("assumptions: ").split("; ")}
    names = {a["name"] for part in ("memory", "speed") if data.get(part) for a in data[part]["assumptions"]}
    names |= {a["name"] for a in data["assumptions"]}
    assert len(names) > 10 and names <= shown, names - shown
    body = {"model": args[1], **{a[2:].replace("-", "_"): v for a, v in zip(args[2::2], args[3::2], strict=False)}}
    if "--train" in args:
        body = {"model": "llama-3.1-8b", "device": "h100-sxm", "train": True, "method": "lora"}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200 and r.json() == data  # the web's body is the JSON the text now matches


# ---------------------------------------------------------------------------------------- 3. one word: budget

def test_budget_means_one_thing_in_fit_and_plan(tmp_path: Path) -> None:
    """Before, `fit` under vLLM called the device memory its "budget" (23.99 GiB on an RTX 4090) while `plan` called
    what vLLM's pool offers the workload its "budget" (0.9 x memory + the CUDA context). Now "budget" is the glossary's
    (docs/nomenclature.md): device memory x (1 - headroom), or what a pool engine's pool offers; fit under vLLM names
    the device memory as such."""
    data = run_cli_json("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "vllm")
    text = run_cli("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "vllm").stdout
    line = next(x for x in text.splitlines() if x.startswith("  memory per device"))
    smi = 24564 * 2**20  # the RTX 4090's driver-reported memory.total (nvidia-smi), the catalog's source
    assert data["budget_per_device"] == smi
    assert "memory per device 22.26 GiB of 23.99 GiB device memory, 1.73 GiB left" in line and "budget" not in line
    # eq. (1) engines keep the word, with device memory x (1 - 0.1)
    hf = run_cli_json("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "transformers")
    assert hf["budget_per_device"] == int(smi * 0.9)
    hf_text = run_cli("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "transformers").stdout
    assert "of a 21.59 GiB budget, " in hf_text
    # plan: the pool engine's budget is what its pool offers, and the text says so
    req = ROOT / "examples" / "lora-finetune-and-chat.yaml"
    plan = run_cli_json("plan", str(req), "--no-alternatives", "--today", "2025-08-01")
    chat = next(j for j in plan["jobs"] if j["name"] == "support-chat")
    mem = next(s for s in chat["sections"] if s["key"] == "memory")
    budget = next(f for f in mem["figures"] if f["key"] == "budget")
    usable = next(f for f in mem["figures"] if f["key"] == "usable")["value"]
    # vLLM's pool, gpu_memory_utilization 0.9 of the device, and the CUDA context outside it: not 0.9 x memory alone
    assert 0.9 * usable < budget["value"] < 0.9 * usable + 1.1 * 2**30
    out = run_cli("plan", str(req), "--no-alternatives", "--today", "2025-08-01").stdout
    assert "budget = what vLLM's pool offers the workload, with the CUDA context" in out
    assert "budget = device memory x (1 - 0.1 headroom)" in out  # the training job's


# ------------------------------------------------------------------------ 4. --free above the device's memory

def test_free_memory_above_the_device_memory_is_refused(client) -> None:
    """Before, `fit --auto --free 30GiB` on a 24 GiB card answered (exit 0, 8.35 GiB 'left' on a card that does not
    have it). A GPU's free memory is at most its memory (nvidia-smi: memory.free <= memory.total); with mixed cards
    the device named is the largest, or --memory gives the card's."""
    base = ("fit", "qwen3-30b-a3b", "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q4_k_m", "--auto")
    line = cli_error_line(*base, "--free", "30GiB")
    assert line == ("free memory of GPU0 (30.00 GiB) is more than the 23.99 GiB rtx-4090 has; with mixed cards name "
                    "the largest (--device)")
    assert "GPU1 (25.00 GiB)" in cli_error_line(*base, "--count", "2", "--free", "20GiB,25GiB")
    r = client.post("/api/v1/fit", json={"model": "qwen3-30b-a3b", "device": "rtx-4090", "engine": "llamacpp",
                                         "weights": "q4_k_m", "auto": True, "free": "30GiB"})
    assert r.status_code == 400 and r.json()["detail"] == line
    # a card of that memory, given: accepted; at most the memory: accepted
    assert run_cli(*base, "--free", "30GiB", "--memory", "48GiB", "--json").returncode == 0
    assert run_cli(*base, "--free", "23GiB", "--json").returncode == 0
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.estimate.llamacpp_fit import gpu_free
    dev = load_catalog().find("rtx-4090")
    with pytest.raises(InputError):
        gpu_free(dev, 1, [30 * 2**30])
    assert gpu_free(dev, 2) == [24564 * 2**20] * 2


# ----------------------------------------------------------------------------------- 6. help names own flags

def test_headroom_help_names_only_flags_the_command_has() -> None:
    """Before, `models --headroom` (and `train --headroom`) told the user to "use --mem-fraction-static", a flag
    neither command has."""
    import argparse

    from llmsizer.cli.main import build_parser
    sub = next(a for a in build_parser(all_commands=True)._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, parser in sub.choices.items():
        act = parser._option_string_actions.get("--headroom")
        if act is None:
            continue
        checked += 1
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", act.help or ""):
            assert flag in parser._option_string_actions, (name, flag)
    assert checked >= 5  # infer, fit, recommend, models, train


# ---------------------------------------------------------------------- 7. context parallelism over recurrences

@pytest.mark.parametrize("model,layers", [("nemotron-h-56b-base-8k", "54 recurrent (mamba2)"),
                                          ("qwen3-next-80b-a3b-thinking", "36 recurrent (gated_deltanet)")])
def test_context_parallelism_over_recurrent_layers_is_refused(model: str, layers: str, client) -> None:
    """Before, --cp 2 over Nemotron-H's Mamba-2 or Qwen3-Next's Gated DeltaNet layers answered (exit 0): torchtitan's
    context parallelism replaces SDPA with ring attention and nothing else, so a recurrent scan over a shard has no
    source (Megatron-Core's all-to-all Mamba CP is another scheme, not modelled)."""
    args = ("train", model, "--gpus", "8", "--fsdp", "full", "--cp", "2", "--seq", "8192")
    line = cli_error_line(*args)
    assert line.startswith("context_parallel 2: ") and layers in line and "torchtitan" in line
    r = client.post("/api/v1/train", json={"model": model, "gpus": 8, "fsdp": "full", "context_parallel": 2,
                                           "seq": 8192})
    assert r.status_code == 400 and r.json()["detail"] == line
    # an attention-only model keeps its context parallelism
    assert run_cli("train", "llama-3.1-8b", "--gpus", "8", "--fsdp", "full", "--cp", "2", "--seq", "8192",
                   "--json").returncode == 0


# ------------------------------------------------------------------------------------- 8. no -ts when no split

def test_auto_fit_with_no_layer_on_the_gpus_prints_no_tensor_split(client) -> None:
    """Before, an auto-fit that put no layer on two GPUs printed `-ngl 0 -sm layer -ts 0,0`: an all-zero -ts means
    llama.cpp's default split by free memory (src/llama-model.cpp load_tensors), and with -ngl 0 nothing is split."""
    args = ("fit", "llama-3.1-8b", "--device", "rtx-3090", "--count", "2", "--engine", "llamacpp", "--weights",
            "q4_k_m", "--auto", "--free", "1.5GiB,1.5GiB", "--context", "4096")
    data = run_cli_json(*args)
    assert data["n_gpu_layers"] == 0 and data["tensor_split"] == [0, 0]
    assert "-ts" not in data["flags"] and "-sm" not in data["flags"] and data["command"] == "-c 4096 -ngl 0 -fit off"
    assert "flags: -c 4096 -ngl 0 -fit off" in run_cli(*args).stdout
    r = client.post("/api/v1/fit", json={"model": "llama-3.1-8b", "device": "rtx-3090", "count": 2,
                                         "engine": "llamacpp", "weights": "q4_k_m", "auto": True,
                                         "free": "1.5GiB,1.5GiB", "context": 4096})
    assert r.status_code == 200 and r.json() == data
    # a split that holds layers keeps its -ts
    split = run_cli_json("fit", "llama-3.3-70b-instruct", "--device", "rtx-3090", "--count", "2", "--engine",
                         "llamacpp", "--weights", "q4_k_m", "--auto", "--free", "23GiB,11GiB")
    assert split["n_gpu_layers"] > 0 and "-ts" in split["flags"]
    assert json.loads(json.dumps(split["tensor_split"])) == [int(x) for x in split["flags"][
        split["flags"].index("-ts") + 1].split(",")]

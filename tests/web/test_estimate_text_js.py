"""The calculator's calibrated range and Duration card (static/js/estimate_text.js) say what the CLI says, word for
word and digit for digit, from the answer's JSON: `infer` / `train`'s "calibrated range: ..." line with its coverage
and warning (render/text.py estimate_facts), and `train --tokens`'s duration line with its GEMM-shape efficiency,
per-micro-step breakdown, calibrated range and coverage (cli/train_cmd.py render_duration), so the card's factors
reproduce its total. The answers are real ones (the CLI's own answer functions, the JSON the API serves); the JS runs
in node as the browser imports it; skipped where node is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from llmsizer.cli.common import json_text, resolve_model
from llmsizer.cli.infer_cmd import infer_answer
from llmsizer.cli.main import build_parser
from llmsizer.cli.train_cmd import render_duration, train_answer
from llmsizer.render.text import estimate_facts

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

JS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "web" / "static" / "js" / "estimate_text.js"

# each branch of render_duration (context parallelism included): one GPU with its memory-bound kernels and attention; QLoRA's dequantization; a
# data-parallel run over several nodes; tensor + pipeline parallelism; FSDP with parameters offloaded; eager
# attention; probe17 F3's run at a given utilisation (the MFU it implies below it); a catalog CPU (timed, no
# calibrated range); two runs that cannot be timed (no sourced peak FLOP/s): the cpu kind (one warning) and the gpu
# kind (its uncalibrated-architecture warning too: the warnings joined)
TRAIN_RUNS = [
    "qwen2.5-7b --method lora --rank 16 --batch 4 --seq 2048 --device a100-sxm-80gb --count 1 --tokens 100M",
    "llama-3.1-70b-instruct --method full --batch 1 --seq 4096 --gpus 64 --zero 3 --device h100-sxm --count 64 "
    "--tokens 10B",
    "llama-3.1-8b --method qlora --rank 64 --batch 2 --seq 4096 --device rtx-4090 --tokens 50M",
    "llama-3.1-70b-instruct --gpus 16 --tp 4 --pp 2 --precision megatron-bf16 --grad-accumulation 8 "
    "--device h100-sxm --count 16 --tokens 1B",
    "llama-3.1-8b --fsdp full --offload params --gpus 4 --device a100-sxm-80gb --count 4 --tokens 100M",
    "qwen2.5-0.5b --method full --attention eager --batch 2 --seq 1024 --device l4 --tokens 10M",
    "llama-3.1-8b --method full --batch 1 --seq 4096 --grad-checkpointing none --device h100-sxm --tokens 1B "
    "--utilization 0.4",
    # context parallelism across machines: ring attention's exchange (probe25 D3)
    "llama-3.1-8b --method full --gpus 16 --gpus-per-node 8 --network ib-ndr --fsdp full --precision fsdp-bf16-mixed "
    "--context-parallel 16 --grad-checkpointing full --batch 1 --seq 131072 --device h100-sxm --count 16 --tokens 1B",
    "qwen2.5-0.5b --method lora --batch 1 --seq 512 --device amd-epyc-9654 --memory 64GiB --tokens 1M",
    "qwen2.5-0.5b --method lora --batch 1 --seq 512 --device cpu --count 1 --tokens 1M",
    "qwen2.5-0.5b --method lora --batch 1 --seq 512 --device gpu --memory 24GiB --tokens 1M",
]
UNTIMED = 2  # the last runs of TRAIN_RUNS, answered with no seconds

INFER_RUNS = [
    "llama-3.1-8b --context 8k --concurrency 1 --memory 24GiB",
    "deepseek-v3 --engine vllm --context 8k --concurrency 16 --memory 141GiB --tp 8",
    "qwen2.5-7b --engine transformers --context 4k --concurrency 4 --memory 40GiB",
]


def _node(function: str, inputs: list) -> list:
    script = (f"import {{ {function} }} from {json.dumps(JS.as_uri())};\n"
              "let s = ''; process.stdin.on('data', (c) => { s += c; });\n"
              f"process.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(s).map((x) => {function}(x)))));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(inputs), capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out)


def _answer(command: str, argv: str):  # type: ignore[no-untyped-def]
    words = [command, *argv.split()]
    args = build_parser(words).parse_args(words)  # the command's own parser (not sys.argv's: pytest's there)
    spec = resolve_model(args)
    return (train_answer if command == "train" else infer_answer)(spec, args)


def test_duration_card_says_the_cli_duration() -> None:
    expected, answers = [], []
    for argv in TRAIN_RUNS:
        data, _, _, duration, _ = _answer("train", argv)
        assert duration is not None, argv
        expected.append(render_duration(duration).split("\n"))
        answers.append(json.loads(json_text(data))["duration"])  # the bytes the API serves
    said = _node("durationLines", answers)
    assert said == expected
    # the branches the runs are there for are met: the shape efficiency, a calibrated range, none on the CPU
    assert " x GEMM shape efficiency " in said[0][0] and "calibrated range)" in said[0][0]
    assert "tensor-parallel" in said[3][0] and "dequantization" in said[2][0]
    assert ", ring attention 80.53 GB K/V exchange per micro-step (" in said[7][0]  # decimal, as the plan's
    # the MFU the answer carries (Duration.mfu; tests/training/test_mfu_line.py checks it against PaLM's count) on
    # every timed run, the card reading it rather than computing it; none on an untimed one
    assert all("; MFU " in lines[0] and " on the GEMMs" in lines[0] for lines in said[:-UNTIMED])
    assert not any("MFU" in lines[0] for lines in said[-UNTIMED:])
    cpu = -UNTIMED - 1
    assert answers[cpu]["seconds"] and " wall clock" in said[cpu][0] and "calibrated range)" not in said[cpu][0]
    # the runs that cannot be timed: no seconds in the JSON, one line of the warnings (two of them joined on the gpu)
    for du, lines in zip(answers[-UNTIMED:], said[-UNTIMED:], strict=True):
        assert du["seconds"] is None and len(lines) == 1 and "duration not estimated" in lines[0], lines
        assert "FLOP/token" not in lines[0]
    assert len(answers[-1]["warnings"]) >= 2 and lines[0] == "duration: " + "; ".join(answers[-1]["warnings"])


def test_calculator_says_the_cli_calibrated_range() -> None:
    ranges, facts = [], []
    for command, argv in [*(("infer", a) for a in INFER_RUNS), ("train", TRAIN_RUNS[0])]:
        data, _, est, *_ = _answer(command, argv)
        c = json.loads(json_text(data))["details"].get("calibrated_range")
        assert c is not None, argv
        ranges.append(c)
        facts.append(estimate_facts(est))
    said = _node("calibratedLines", ranges)
    for lines, cli in zip(said, facts, strict=True):
        start = cli.index(lines[0])  # the CLI's "calibrated range:" line, then its coverage and warning
        assert cli[start:start + len(lines)] == lines
    assert any(line.startswith("  warning: ") for lines in said for line in lines)  # a range less sure than 90 %

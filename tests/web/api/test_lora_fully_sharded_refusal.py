"""vLLM --fully-sharded-loras with a rank the TP degree does not divide (vLLM 0.19.1 vllm/lora/layers/base_linear.py
lines 47-52: ``divide(max_lora_rank, tp_size)`` asserts it; tests/plan/test_lora_fully_sharded_divisibility.py writes
the rule out): the CLI's plan exits 2 with one line, the web's /api/v1/plan answers 400 with the same refusal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REQUEST = "\n".join([
    "version: 1", "title: t", "jobs:", "  - name: chat", "    kind: inference", "    model: {name: llama-3.1-70b}",
    "    engine: vllm", "    quantization: none", "    tensor_parallel: 4",
    "    adapters: {mode: dynamic, count: 8, max_loaded: 4, rank: 6, fully_sharded: true}",
    "    traffic: {concurrency: 16, context: 4k, output: 256}", "    resources: {device: h100-sxm, count: 4}"])


def test_cli_exit_2_one_line_and_web_the_same(tmp_path: Path, client) -> None:
    path = tmp_path / "req.yaml"
    path.write_text(REQUEST, "utf-8")
    done = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "plan", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "rank 6 is not a multiple of 4" in lines[0]
    said = lines[0].split("job 'chat' (inference): ", 1)[1]
    r = client.post("/api/v1/plan", json={"request": REQUEST, "filename": "req.yaml"})
    assert r.status_code == 400 and said in r.json()["detail"], r.text[:400]

"""probe33 D3: eq. TP5's refusal (formulas/tensor_parallel.py ``quant_block_refusal``) is about the tensor-parallel
degree: the web's 400 names the body's ``tp`` as the field at fault (the page marks the TP box, not Device), the
pipeline stages it offers instead in ``also``, and its detail is the CLI's line for the same input (a separate
``llmsizer`` process). MiniMax-M2.7: 1536-wide experts, 128 x 128 FP8 blocks, so TP 8 leaves 192 per device."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SRC = str(pathlib.Path(__file__).resolve().parents[3] / "src")


def _cli_line(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    r = subprocess.run([sys.executable, "-m", "llmsizer", *args], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 2, r.stderr
    return r.stderr.strip().removeprefix("llmsizer: error: ")


def test_the_tp5_refusal_blames_tp(client) -> None:
    r = client.post("/api/v1/fit", json={"model": "minimax-m2.7", "device": "h100", "count": 8, "tp": 8})
    assert r.status_code == 400
    p = r.json()
    # (epdp: the hint also names expert parallelism and its ranks, --enable-expert-parallel with --dp)
    assert p["field"] == "tp" and p["also"] == ["pipeline_parallel", "expert_parallel", "data_parallel"]
    line = _cli_line("fit", "minimax-m2.7", "--device", "h100", "--count", "8", "--tp", "8")
    assert p["detail"] == line and line.startswith("--tp 8 splits") and line.endswith("a smaller --tp, or --pp")

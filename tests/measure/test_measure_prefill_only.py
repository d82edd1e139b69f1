"""`measure infer --output-tokens 0` measures prefill only, as `infer --output-tokens 0` sizes it (embeddings,
scoring): the whole context is the prompt, the cache holds its KV, no decode step runs or is timed, and the output
says so. Through the command on the tiny model (tests/measure/conftest.py TINY)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.measure.render import render_record

from .conftest import TINY

pytestmark = pytest.mark.slow


def test_output_zero_measures_prefill_only(tiny_config: Path) -> None:
    pytest.importorskip("transformers")
    p = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "measure", "infer", str(tiny_config), "--device",
                        "cpu", "--threads", "1", "--context", "256", "--concurrency", "2", "--output-tokens", "0",
                        "--no-store", "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["status"] == "ok" and rec["settings"]["output_tokens"] == 0
    # the prompt's KV, all 256 tokens: 2 (K, V) x layers x sequences x tokens x kv_heads x head_dim x 4 B (fp32)
    kv_heads, head_dim = TINY["num_key_value_heads"], TINY["hidden_size"] // TINY["num_attention_heads"]
    assert rec["measured"]["kv_cache_bytes_end"] == 2 * TINY["num_hidden_layers"] * 2 * 256 * kv_heads * head_dim * 4
    t = rec["timing"]
    assert t["prefill_seconds"] > 0 and t["prefill_tokens_per_second"] == pytest.approx(2 * 256 / t["prefill_seconds"])
    assert t["decode_seconds"] is None and t["decode_tokens_per_second"] is None
    assert "decode not timed (output tokens 0: prefill only)" in render_record(rec)


def test_the_range_is_infers() -> None:
    """The flag takes infer's range (specs/workload.py OUTPUT_TOKENS): 0 is accepted, -1 refused in one line."""
    p = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "measure", "infer", "qwen2.5-0.5b",
                        "--output-tokens", "-1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--output-tokens" in p.stderr, p.stderr

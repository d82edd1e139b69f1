"""Shared fixtures: one tiny Llama-style config (hidden 128, 2 layers) and the CPU measurements made on it once per
test session (each ``llmsizer measure`` run starts a worker process that imports torch: a few seconds each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "rms_norm_eps": 1e-6}
INFER = dict(context=1024, concurrency=4, output_tokens=8)
TRAIN = dict(micro_batch=2, seq_len=256)


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tiny-llama")
    (d / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    return d / "config.json"


def _independent(kind: str, extra: dict[str, Any]) -> subprocess.Popen[str]:
    case = {"kind": kind, "config": TINY, **extra}
    return subprocess.Popen([sys.executable, str(HERE / "independent_peak.py"), json.dumps(case)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(p: subprocess.Popen[str]) -> int:
    out, err = p.communicate(timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"independent measurement failed: {err[-2000:]}")
    return int(json.loads(out.strip().splitlines()[-1])["peak_bytes"])


@pytest.fixture(scope="session")
def measured(tiny_config: Path) -> dict[str, Any]:
    """CPU inference and full-training records of the tiny model, each with the independent peak (the CPU allocator's)
    measured at the same time in another process."""
    pytest.importorskip("transformers")
    from llmsizer.measure import MeasureSettings, measure

    out: dict[str, Any] = {}
    p = _independent("inference", INFER)
    out["inference"] = measure(MeasureSettings("inference", str(tiny_config), device="cpu", threads=1, **INFER),
                               progress=False, timeout=300)
    out["inference_independent"] = _finish(p)
    p = _independent("training", TRAIN)
    out["training"] = measure(MeasureSettings("training", str(tiny_config), device="cpu", threads=1, method="full",
                                              optimizer="adamw", optimizer_impl="for-loop", **TRAIN),
                              progress=False, timeout=300)
    out["training_independent"] = _finish(p)
    return out

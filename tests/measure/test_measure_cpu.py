"""The CPU path of `llmsizer measure` on a tiny model (hidden 128, 2 layers) against independent measurements.

Independent checks, and the tolerances they are held to:
- PyTorch's CPU allocator, read on the same workload in a *separate process* (tests/measure/independent_peak.py,
  no llmsizer code: torch.profiler's allocation records, no dispatch mode): the peak of live tensor bytes must
  agree within 0.05 % (measured: to the byte, both kinds, 2026-12-02, torch 2.13.0). ``llmsizer measure`` follows
  tensor storages through a TorchDispatchMode, which sees no kernel-internal workspace and makes autograd's
  in-place gradient sums out of place; neither is at these peaks.
- The kernel's accounting of the measuring process: with ``MALLOC_MMAP_THRESHOLD_=65536`` the growth of the
  peak RSS during the workload must match the growth of live tensors over the loaded weights within
  20 % + 24 MiB (allocator headers, oneDNN scratch buffers and Python objects are RSS but not tensors).
- The weights: parameter count from the config by hand, x 4 B (fp32), plus the rotary buffers, exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.units import MiB

from .conftest import TINY

pytestmark = pytest.mark.slow


def _params(cfg: dict[str, Any]) -> int:
    h, i, L, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    per_layer = h * h * 2 + 2 * h * kv + 3 * h * i + 2 * h
    return v * h * 2 + L * per_layer + h


@pytest.mark.parametrize("kind", ["inference", "training"])
def test_peak_matches_the_allocator_in_another_process(measured: dict[str, Any], kind: str) -> None:
    rec = measured[kind]
    assert rec["status"] == "ok", rec.get("error")
    ours, theirs = rec["measured"]["peak_tensor_bytes"], measured[f"{kind}_independent"]
    print(f"{kind} peak: llmsizer measure {ours:,} B, CPU allocator {theirs:,} B ({ours / theirs - 1:+.3%})")
    assert abs(ours - theirs) <= 0.0005 * theirs


def test_rss_growth_follows_live_tensors(measured: dict[str, Any]) -> None:
    for kind in ("inference", "training"):
        m = measured[kind]["measured"]
        assert m["rss_malloc_settings"] is True
        assert m["hwm_reset"] is True
        rss_growth = m["workload_peak_rss_bytes"] - m["rss_after_load_bytes"]
        tensor_growth = m["peak_tensor_bytes"] - m["weights_bytes"]
        print(f"{kind}: RSS grew {rss_growth / MiB:.1f} MiB, live tensors {tensor_growth / MiB:.1f} MiB")
        assert abs(rss_growth - tensor_growth) <= 0.2 * tensor_growth + 24 * MiB


def test_weights_and_split(measured: dict[str, Any]) -> None:
    m = measured["inference"]["measured"]
    assert m["params"] == _params(TINY)
    assert m["weights_bytes"] == 4 * m["params"] + m["buffer_bytes"]
    assert 0 < m["buffer_bytes"] <= 1024  # the rotary inv_freq buffers
    split = m["peak_split"]
    assert split["weights"] == m["weights_bytes"]
    assert sum(split.values()) <= m["peak_tensor_bytes"]
    # KV of the whole context at the end: 2 (K, V) x layers x seqs x tokens x kv_heads x head_dim x 4 B
    kv_heads, head_dim = TINY["num_key_value_heads"], TINY["hidden_size"] // TINY["num_attention_heads"]
    assert m["kv_cache_bytes_end"] == 2 * 2 * 4 * 1024 * kv_heads * head_dim * 4
    t = measured["inference"]["timing"]
    assert t["prefill_tokens_per_second"] > 0 and t["decode_tokens_per_second"] > 0
    assert measured["training"]["timing"]["step_seconds"] > 0


def test_record_has_settings_device_versions_and_comparison(measured: dict[str, Any]) -> None:
    rec = measured["inference"]
    assert rec["settings"]["device"] == "cpu" and rec["settings"]["dtype"] == "fp32"
    assert {d["name"] for d in rec["defaults"]} >= {"dtype", "steps"}
    assert rec["device"]["type"] == "cpu"
    assert {"python", "torch", "transformers", "llmsizer"} <= set(rec["versions"])
    assert rec["date"].endswith("Z")
    rows = {r["component"]: r for r in rec["comparison"]}
    assert {"weights", "kv_cache", "activations", "peak tensors", "process RSS"} <= set(rows)
    assert abs(rows["weights"]["error"]) < 1e-5  # the same fp32 parameters (the estimate leaves out 128 B of buffers)
    assert rows["peak tensors"]["kind"] == "inference memory"
    training_rows = {r["component"] for r in measured["training"]["comparison"]}
    assert {"weights", "gradients", "optimizer_state", "activations", "peak tensors"} <= training_rows


def test_text_rendering(measured: dict[str, Any]) -> None:
    from llmsizer.measure.render import render_record

    text = render_record(measured["inference"])
    assert "measured inference" in text and "peak tensors" in text and "error" in text

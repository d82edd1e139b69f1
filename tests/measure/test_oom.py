"""Out of memory: a real cap on the CPU worker (RLIMIT_DATA) and a mocked CUDA OOM both give a record with status
'oom', the step it happened at, and the one-line message "OOM at ... - estimate said X"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmsizer.measure import MeasureSettings, measure, oom_message, runner


@pytest.mark.slow
def test_real_memory_cap_on_cpu(tiny_config: Path, tmp_path: Path) -> None:
    """Through the command: the worker runs out of its 40 MiB data-segment cap; exit code 3, clean message."""
    store = tmp_path / "r.sqlite"
    p = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "measure", "infer", str(tiny_config), "--device", "cpu",
                        "--context", "1024", "--memory-cap", "40MiB", "--json", "--store", str(store)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    rec = json.loads(p.stdout)
    assert rec["status"] == "oom"
    assert rec["oom_at"]
    assert "Traceback" not in p.stderr
    msg = [line for line in p.stderr.splitlines() if line.startswith("llmsizer: OOM at ")]
    assert msg and "estimate said" in msg[0] and "the cap was 40.00 MiB" in msg[0]
    from llmsizer.measure import ResultStore

    assert [r["status"] for r in ResultStore(store).records()] == ["oom"]


def test_mocked_cuda_oom_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_worker(job: dict[str, Any], **kw: Any) -> dict[str, Any]:
        s = dict(job["settings"], device="cuda", dtype="bf16", steps=1)
        return {"status": "oom", "oom_at": "step 1 (prefill)",
                "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "settings": s, "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3",
                                          "total_memory_bytes": 80 * 2**30},
                "measured": {}, "timing": {}, "warnings": []}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    rec = measure(MeasureSettings("inference", "llama-3.1-8b", device="cuda", context=131072, concurrency=8),
                  progress=False)
    assert rec["status"] == "oom"
    msg = oom_message(rec)
    assert msg.startswith("OOM at step 1 (prefill) \u2014 estimate said ")
    assert "GiB" in msg and "device has 80.00 GiB" in msg
    assert rec["estimate_total"]["bytes"] > 80 * 2**30  # the estimate also said it would not fit


def test_killed_worker_is_reported_as_oom(tmp_path: Path) -> None:
    """A worker killed by SIGKILL (the kernel's OOM killer) becomes an 'oom' record, not a crash."""
    fake = tmp_path / "python"  # stands in for the interpreter: the kernel kills it, as the OOM killer would
    fake.write_text("#!/bin/sh\nkill -9 $$\n")
    fake.chmod(0o755)
    res = runner.run_worker({"settings": {"device": "cpu"}}, python=str(fake))
    assert res["status"] == "oom" and "signal 9" in res["error"]


@pytest.mark.parametrize(("sig", "name"), [(6, "SIGABRT"), (11, "SIGSEGV")])
def test_aborted_worker_under_a_cap_is_oom_and_without_a_cap_an_error(tmp_path: Path, sig: int, name: str) -> None:
    """SIGABRT or SIGSEGV is how native code ends when an allocation fails under RLIMIT_DATA and it aborts, or uses
    the NULL malloc returned (both seen here: the real-cap test above aborted instead of raising on an Intel
    Sapphire Rapids guest, and was killed by SIGSEGV in one CI run); without a cap either stays an error."""
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nkill -{sig} $$\n")
    fake.chmod(0o755)
    capped = runner.run_worker({"settings": {"device": "cpu", "memory_cap": 40 * 2**20}}, python=str(fake))
    assert capped["status"] == "oom" and f"signal {sig} ({name} under the memory cap" in capped["error"]
    free = runner.run_worker({"settings": {"device": "cpu"}}, python=str(fake))
    assert free["status"] == "error" and free["oom_at"] is None and f"signal {sig}" in free["error"]


def test_mocked_cuda_record_is_compared_per_component(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA half of the comparison (no GPU here): a worker record with the fields worker.py writes on CUDA
    becomes rows for allocated, allocator cache (reserved - allocated), CUDA context and device total, each
    against the estimate's matching items; the row arithmetic is checked, not the figures (invented)."""
    gib = 2**30
    measured = {"weights_bytes": 15 * gib, "peak_tensor_bytes": 17 * gib, "max_memory_allocated": 17 * gib,
                "max_memory_reserved": 18 * gib, "cuda_context_bytes": gib // 2,
                "device_peak_bytes": gib // 2 + 18 * gib,
                "peak_split": {"weights": 15 * gib, "kv_cache": gib, "activations": gib}}

    def fake_worker(job: dict[str, Any], **kw: Any) -> dict[str, Any]:
        s = dict(job["settings"], device="cuda", dtype="bf16", steps=1)
        return {"status": "ok", "settings": s, "measured": measured, "timing": {}, "warnings": [],
                "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "total_memory_bytes": 80 * gib}}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    rec = measure(MeasureSettings("inference", "llama-3.1-8b", device="cuda", context=4096), progress=False)
    assert rec["status"] == "ok"
    rows = {c["component"]: c for c in rec["comparison"]}
    assert rows["allocator cache"]["measured"] == gib  # reserved - allocated
    assert rows["cuda_context"]["measured"] == gib // 2
    assert rows["device total"]["measured"] == gib // 2 + 18 * gib
    assert rows["peak allocated"]["kind"] == "inference memory" and rows["device total"]["kind"] == "inference memory"
    for name in ("peak allocated", "device total", "cuda_context"):
        r = rows[name]
        assert r["estimated"] and r["error"] == pytest.approx((r["estimated"] - r["measured"]) / r["measured"])

"""bench/gpu_moe_gemm.py's CUDA-only code paths, run here without a GPU: the 4-stream fan-out (``group_fn``) and the
sleep-prefilled device timing (``Timer.time``) against a fake ``torch.cuda`` layer, and the FP8 path (``operands``,
``torch._scaled_mm``) on the CPU at a tiny shape.

Independent truth: the fan-out is TransformerEngine's ``multi_stream_cublas_gemm`` (TransformerEngine @d0067d0d
common/gemm/cublaslt_gemm.cu lines 970-1021: an event recorded on the main stream, every compute stream waits on it,
GEMM i on stream i % num_streams, then the main stream waits on every compute stream); the fake device below is a
queue model written here (an operation starts when the device is free and the host has issued it), with the host's
issue cost and the device's cost per call set by the test, so the device time and whether the sleep outlasted the
host's issuing are known without reading the script's numbers."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import pytest
from tests.measure.test_gpu_moe_gemm_plan import _bench


class FakeCuda:
    """A one-queue device on the host's clock: an operation issued at host time h starts at max(h, device free)."""

    def __init__(self, cycles_per_s: float) -> None:
        self.free = 0.0
        self.rate = cycles_per_s  # the clock ``_sleep``'s cycles really run at
        self.log: list[tuple[str, Any]] = []
        self.current: Any = "main"
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = 0.0

            def record(self, stream: Any = None) -> None:
                self.at = fake.launch(0.0)
                fake.log.append(("record", stream.name if stream is not None else fake.current))

            def elapsed_time(self, other: Any) -> float:
                return (other.at - self.at) * 1e3

        class Stream:
            def __init__(self, name: str) -> None:
                self.name = name

            def wait_event(self, ev: Any) -> None:
                fake.log.append(("wait_event", self.name))

            def wait_stream(self, s: Any) -> None:
                fake.log.append(("wait_stream", self.name, s.name))

        self.Event, self.Stream = Event, Stream

    def launch(self, seconds: float) -> float:
        self.free = max(self.free, time.perf_counter()) + seconds
        return self.free

    def _sleep(self, cycles: int) -> None:
        self.launch(cycles / self.rate)

    def synchronize(self) -> None:
        time.sleep(max(0.0, self.free - time.perf_counter()))

    def current_stream(self) -> Any:
        return self.Stream("main")

    @contextmanager
    def stream(self, s: Any) -> Any:
        before, self.current = self.current, s.name
        try:
            yield
        finally:
            self.current = before


class FakeTorch:
    def __init__(self, cycles_per_s: float) -> None:
        self.cuda = FakeCuda(cycles_per_s)


def test_group_fn_fans_the_gemms_over_the_streams_as_transformer_engine() -> None:
    mod = _bench()
    torch = FakeTorch(1e9)
    streams = [torch.cuda.Stream(f"s{i}") for i in range(4)]
    ran: list[tuple[int, str]] = []
    pairs = [(i, None) for i in range(6)]
    mod.group_fn(torch, pairs, lambda a, b: ran.append((a, torch.cuda.current)), streams)()
    log = torch.cuda.log
    assert log[0] == ("record", "main")  # the event on the main stream first
    assert log[1:5] == [("wait_event", f"s{i}") for i in range(4)]  # every compute stream waits on it
    assert ran == [(i, f"s{i % 4}") for i in range(6)]  # GEMM i on stream i % 4
    assert log[5:] == [("wait_stream", "main", f"s{i}") for i in range(4)]  # then the main stream waits on all
    serial: list[str] = []
    mod.group_fn(torch, pairs, lambda a, b: serial.append(torch.cuda.current), [])()
    assert serial == ["main"] * 6  # no streams: one after another on the current one


def _host_bound(torch: FakeTorch, host_s: float, device_s: float) -> Any:
    def fn() -> None:
        time.sleep(host_s)  # the host's issue cost per call
        torch.cuda.launch(device_s)
    return fn


def test_a_sleep_calibrated_at_a_lower_clock_is_caught_and_redone() -> None:
    """Calibrated at 1/5.7 of the clock the sleeps then run at (an idle GPU's), the first sleep ends ~5.7x early: the
    host is still issuing, so the queue was not prefilled; the timer sees it by events, recalibrates and times again,
    and the device time is then the device's own (0.5 ms a call, not the host's 2 ms)."""
    mod = _bench()
    torch = FakeTorch(5.7e9)
    timer = mod.Timer(torch, False)
    timer.cuda, timer.cycles_per_s = True, 1e9
    t = timer.time(_host_bound(torch, 0.002, 0.0005), 1.0, 10)
    assert t["reps"] == 10 and t["sleep_tries"] == 2 and t["queue_prefilled"] is True
    assert timer.cycles_per_s == pytest.approx(5.7e9, rel=0.05)
    assert t["sleep_seconds"] > t["issue_seconds"]
    assert t["device_seconds"] == pytest.approx(0.0005, rel=0.2)
    assert t["eager_seconds"] >= 0.0019  # the eager pass holds the host's gaps


def test_a_sleep_the_host_still_outruns_is_recorded_not_prefilled() -> None:
    """Sleeps are capped at 0.5 s: a host that needs 0.6 s to issue the calls (10 x 60 ms) outruns both tries even at
    the right calibration, and the record says the queue was not prefilled."""
    mod = _bench()
    torch = FakeTorch(1e9)
    timer = mod.Timer(torch, False)
    timer.cuda, timer.cycles_per_s = True, 1e9
    t = timer.time(_host_bound(torch, 0.06, 0.001), 2.0, 10)
    assert t["reps"] == 10 and t["sleep_tries"] == 2 and t["queue_prefilled"] is False
    assert t["sleep_target_seconds"] == 0.5 and t["sleep_seconds"] < t["issue_seconds"]


def test_fp8_smoke_case_runs_scaled_mm_on_the_cpu() -> None:
    """The FP8 operands (E4M3 forward, E5M2 gradients, TN layout) through ``torch._scaled_mm`` at a tiny shape."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("this torch has no _scaled_mm")
    mod = _bench()
    case = mod.fp8_smoke_case()
    assert all(g.n % 16 == 0 and g.k % 16 == 0 for g in case.gemms)  # torch's FP8 shape rule
    dev = torch.device("cpu")
    for g in case.gemms:
        pairs, op, note = mod.operands(torch, g, "fp8", dev)
        a, b = pairs[0]
        want = torch.float8_e4m3fn if g.role.endswith("fwd") or note else torch.float8_e5m2
        assert (a.dtype, b.dtype, tuple(a.shape), tuple(b.shape)) == (want, torch.float8_e4m3fn, (g.m, g.k),
                                                                      (g.k, g.n))
        assert b.stride() == (1, g.k)  # B column-major: [n, k] row-major transposed (TN)
        out = op(a, b)
        assert out.dtype == torch.bfloat16 and tuple(out.shape) == (g.m, g.n)
        assert torch.allclose(out.float(), a.float() @ b.float(), rtol=0.02, atol=0.5)
    rec = mod.measure_case(torch, mod.Timer(torch, False), case, "fp8", mod.rates(mod.builtin_catalog().devices[
        "h100-sxm"]), dev, 0.001)
    assert [g["role"] for g in rec["gemms"]] == ["fc1.fwd", "fc1.dgrad", "fc1.wgrad"]
    assert rec["total"]["not_prefilled"] == [] and rec["dtype"] == "fp8"

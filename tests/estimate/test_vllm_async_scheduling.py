"""vLLM's --async-scheduling as a stated engine setting (InferenceWorkload.async_scheduling, infer/fit
--async-scheduling, a request's engine_settings.async_scheduling, the web's field of the same name).

Truth, from vLLM's own wheels (PyPI):
- 0.9.2: no such flag (vllm/engine/arg_utils.py has no "async-scheduling"); 0.10.0 adds it, opt-in
  (vllm/config.py:2358 ``async_scheduling: bool = False``; arg_utils.py:821); 0.11.0 still opt-in
  (vllm/config/scheduler.py:138); 0.14.1 on by default (config/scheduler.py:133 ``Field(default=None)``,
  config/vllm.py:588-628 resolves None to True).
- Given, the executor keeps two batches in flight (0.11.0 v1/executor/multiproc_executor.py:329-333
  ``max_concurrent_batches`` 2) and EngineCore schedules the next step while the device runs this one (v1/engine/
  core.py:145-167, 300-328), so a decode step takes max(device step, host step) (formulas/speed.py eq. 14).
- With pipeline stages it stops at start on 0.10.0 (arg_utils.py:1144-1146), 0.11.0 (:1295-1297) and 0.14.1
  (config/vllm.py:562-568); 0.15.1's explicit-flag check (config/vllm.py:568-588) has no pipeline condition.
Without the flag 0.11.0's EngineCore.step runs schedule -> execute -> update_from_output one after the other
  (v1/engine/core.py:272-291; v1/executor/abstract.py:116-117 max_concurrent_batches 1): a step is device + host
  (eq. 7). The flag changes the composition, not the host code's time: the same host seconds h feed both, so the
  flagged step max(device, h) is never above the unflagged device + h. On 0.10-0.13 h is not established (the 2.39 ms
  of vLLM 0.19.0, VS07, is refuted as 0.11.0's serial step by VS17-VS20: estimate/engines.py VLLM_ASYNC_OPT_IN), so
  the two answers are equal there; the mechanism is checked with a host step put into the release's row by hand,
  against the device step read off the estimate without any host term (not against the flagged answer itself)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.speed import estimate_speed
from llmsizer.models import load_model
from llmsizer.specs.workload import InferenceWorkload

SYNC_ROW = "vLLM 0.8-0.13 (V1 engine, synchronous scheduling)"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def _with_host(seconds: float | None) -> tuple:
    """engines.STEP_HOST with the 0.8-0.13 row's host seconds set to ``seconds``."""
    rows = tuple(replace(r, seconds=seconds) if r.versions == SYNC_ROW else r for r in ENG.STEP_HOST)
    assert rows != ENG.STEP_HOST or seconds is None
    return rows


@pytest.mark.parametrize(("model", "concurrency"), [("qwen3-0.6b", 1), ("qwen3-0.6b", 64), ("llama-3.1-8b", 1)])
@pytest.mark.parametrize("version", ["0.10.0", "0.11.0", "0.13.0"])
def test_flag_overlaps_the_release_host_step(model: str, concurrency: int, version: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Unflagged: device + h (core.py step, serial); flagged: max(device, h); both with the release's one h."""
    spec, dev = load_model(model), builtin_catalog().devices["h100-sxm"]
    kw = {"engine": "vllm", "engine_version": version, "concurrency": concurrency}
    device = estimate_speed(spec, dev, **kw).decode.seconds  # h not established: the device step alone
    for h in (0.2e-3, 2.39e-3, 20e-3):  # below, near and above the device steps of these models
        monkeypatch.setattr(ENG, "STEP_HOST", _with_host(h))
        plain = estimate_speed(spec, dev, **kw).decode.seconds
        flagged = estimate_speed(spec, dev, **kw, async_scheduling=True).decode.seconds
        assert plain == pytest.approx(device + h, rel=1e-9)
        assert flagged == pytest.approx(max(device, h), rel=1e-9)
        assert flagged <= plain


def test_flag_never_slower_as_shipped() -> None:
    """As shipped, 0.10-0.13's host step is not established: the flag leaves the step as it is (the asyncs branch
    gave the flag 0.19.0's 2.39 ms while the unflagged row counted none: 1,277 -> 418 tokens/s on Qwen3-0.6B) and
    says so in its assumption and warning."""
    spec, dev = load_model("qwen3-0.6b"), builtin_catalog().devices["h100-sxm"]
    for version in ("0.10.0", "0.11.0", "0.13.0"):
        plain = estimate_speed(spec, dev, engine="vllm", engine_version=version)
        flagged = estimate_speed(spec, dev, engine="vllm", engine_version=version, async_scheduling=True)
        assert flagged.decode.seconds == plain.decode.seconds and flagged.decode.host_seconds == 0.0
        host = next(a for a in flagged.assumptions if a.name == "vllm_host_seconds_per_step")
        assert host.value == "not established (0 s used)" and "--async-scheduling" in host.why
        assert any("with --async-scheduling" in w and "not established" in w for w in flagged.warnings)


def test_default_from_0_14_nothing_moves() -> None:
    spec, dev = load_model("qwen3-0.6b"), builtin_catalog().devices["h100-sxm"]
    for version in ("0.14.1", "0.19.1", None):
        plain = estimate_speed(spec, dev, engine="vllm", engine_version=version)
        flagged = estimate_speed(spec, dev, engine="vllm", engine_version=version, async_scheduling=True)
        assert flagged.decode.seconds == plain.decode.seconds


@pytest.mark.parametrize(("version", "pp", "refused"), [
    ("0.9.2", 1, "has no --async-scheduling"), ("0.8", 1, "has no --async-scheduling"), ("0.10.0", 1, None),
    ("0.11.0", 1, None), ("0.10.0", 2, "pipeline_parallel above 1"), ("0.14.1", 2, "pipeline_parallel above 1"),
    ("0.15.1", 2, None), ("0.19.1", 2, None), (None, 2, None)])
def test_releases_and_stages(version: str | None, pp: int, refused: str | None) -> None:
    kw = {"engine": "vllm", "engine_version": version, "pipeline_parallel": pp, "async_scheduling": True}
    if refused is None:
        InferenceWorkload(**kw)
        return
    with pytest.raises(InputError, match=refused):
        InferenceWorkload(**kw)


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "transformers"])
def test_refused_on_engines_without_it(engine: str) -> None:
    with pytest.raises(InputError, match="async_scheduling applies to engine vllm, not " + engine):
        InferenceWorkload(engine=engine, async_scheduling=True)


@pytest.mark.parametrize("argv", [
    ("fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "sglang", "--async-scheduling"),
    ("infer", "qwen3-0.6b", "--engine", "vllm", "--engine-version", "0.9.2", "--async-scheduling"),
    ("infer", "llama-3.1-8b", "--engine", "vllm", "--engine-version", "0.11", "--async-scheduling", "--tp", "2",
     "--pp", "2"),
])
def test_cli_one_line_exit_2(argv: tuple[str, ...]) -> None:
    r = _cli(*argv)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "--async-scheduling" in r.stderr


def test_fit_reads_the_flag() -> None:
    """fit at 0.11.0 reads the flag (its host-step assumption is the flagged row) and is never slower with it."""
    import json
    base = ("fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.11.0", "--json")
    plain, flagged = (json.loads(_cli(*base, *extra).stdout) for extra in ((), ("--async-scheduling",)))
    tps = [d["speed"]["single_stream_tokens_per_second"] for d in (plain, flagged)]
    assert tps[1] >= tps[0]
    host = [next(a for a in d["speed"]["assumptions"] if a["name"] == "vllm_host_seconds_per_step")
            for d in (plain, flagged)]
    assert "synchronous scheduling" in host[0]["why"] and "with --async-scheduling" in host[1]["why"]

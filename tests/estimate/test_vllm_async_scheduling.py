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
The host step is the one calibrated value (efficiency.VLLM_V1_HOST_STEP_SECONDS, 2.39 ms, VS07): the step with the
flag is checked against max(the device step without it, 2.39 ms), the device step read off the same release's
estimate without the flag (0.8-0.13 sync: no host term), not against the flagged answer itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.speed import estimate_speed
from llmsizer.models import load_model
from llmsizer.specs.workload import InferenceWorkload

HOST_STEP = 2.39e-3  # VS07: vLLM 0.19.0 Qwen3-0.6B on one H100, 2.39 ms per output token


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("model", "concurrency"), [("qwen3-0.6b", 1), ("qwen3-0.6b", 64), ("llama-3.1-8b", 1)])
def test_opt_in_overlaps_the_host_step(model: str, concurrency: int) -> None:
    spec, dev = load_model(model), builtin_catalog().devices["h100-sxm"]
    sync = estimate_speed(spec, dev, engine="vllm", engine_version="0.11.0", concurrency=concurrency)
    flagged = estimate_speed(spec, dev, engine="vllm", engine_version="0.11.0", concurrency=concurrency,
                             async_scheduling=True)
    assert sync.decode.host_seconds == 0.0  # 0.8-0.13 synchronous: no host term established
    assert flagged.decode.seconds == pytest.approx(max(sync.decode.seconds, HOST_STEP), rel=1e-9)
    names = {a.name for a in flagged.assumptions}
    assert "vllm_host_seconds_per_step" in names


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
    """fit's decode at 0.11.0: the flag lifts the 0.8 ms device step to the 2.39 ms host step (one request)."""
    import json
    base = ("fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.11.0", "--json")
    plain, flagged = (json.loads(_cli(*base, *extra).stdout) for extra in ((), ("--async-scheduling",)))
    tps = [d["speed"]["single_stream_tokens_per_second"] for d in (plain, flagged)]
    assert tps[1] == pytest.approx(1 / HOST_STEP, rel=1e-3) and tps[0] > 2 * tps[1]

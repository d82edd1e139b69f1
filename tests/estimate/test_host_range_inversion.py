"""vLLM 0.8-0.13's host step is not established (estimate/engines.py HOST_RANGE_STAND_IN, review40 D8): a small
model's one-stream decode on those releases is estimated from the device alone, faster than on vLLM >= 0.14, whose
step is at least the 2.39 ms host step measured on 0.19.0 (VS07). The estimate must state that inversion and quote a
range that holds the newer release's answer, while a release with an established host step keeps its band alone."""

from __future__ import annotations

import pytest

from llmsizer import fit
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import engines as ENG
from llmsizer.estimate import ranges as R

H = E.VLLM_V1_HOST_STEP_SECONDS.expected


def _speed(version: str, model: str = "qwen3-0.6b", **kw):  # type: ignore[no-untyped-def]
    sp = fit(model, "h100-sxm", engine="vllm", engine_version=version, **kw).speed
    assert sp is not None and sp.decode is not None and sp.decode_range is not None
    return sp


def test_the_unestablished_row_is_bounded_by_the_one_measured_host_step() -> None:
    row = ENG.step_host("vllm", "0.11")
    assert row is not None and not row.established and row.mode == "serial"
    assert row.range_seconds == H and ENG.HOST_RANGE_STAND_IN is E.VLLM_V1_HOST_STEP_SECONDS
    flagged = ENG.step_host("vllm", "0.11", async_scheduling=True)
    assert flagged is not None and flagged.mode == "overlapped" and flagged.range_seconds == H
    newer = ENG.step_host("vllm", "0.14")
    assert newer is not None and newer.seconds == H  # the figure the bound stands in for
    sglang = ENG.step_host("sglang", None)
    assert sglang is not None and sglang.range_seconds is None  # no measured SGLang host step to bound with


@pytest.mark.parametrize("version", ["0.9", "0.11", "0.13"])
def test_a_small_model_on_an_older_release_states_the_inversion_and_its_range_holds_the_newer_answer(version) -> None:
    old, new = _speed(version), _speed("0.14")
    # the inversion itself: the device-only step of the older release is shorter than the newer one's host floor
    assert old.decode.seconds < H <= new.decode.seconds
    assert old.decode_tokens_per_second > new.decode_tokens_per_second
    said = [w for w in old.warnings if "inversion is the missing measurement's" in w]
    assert len(said) == 1 and f"{H * 1e3:.2f} ms" in said[0]
    assert f"{H / old.decode.seconds:.1f}x slower" in said[0]
    # the range: the band's low x the rate with the host step added to the step (eq. 7, serial)
    band = old.decode_band
    assert band is not None
    low, high = old.decode_range
    t = old.decode.seconds
    assert low == pytest.approx(band.low / (t + H)) and high == pytest.approx(band.high / t)
    assert low <= new.decode_tokens_per_second <= high  # the newer release's expected value is inside
    assert new.decode_range is not None and low <= new.decode_range[0]
    named = {a.name: a for a in old.assumptions}
    assert named["decode_range_host_seconds"].value == H and "not an estimate" in named["decode_range_host_seconds"].why
    assert old.details["host_range_seconds"] == H and old.details["host_range_mode"] == "serial"


def test_async_scheduling_opt_in_composes_the_bound_overlapped() -> None:
    sp = _speed("0.11", async_scheduling=True)
    t, band = sp.decode.seconds, sp.decode_band
    assert band is not None and sp.details["host_range_mode"] == "overlapped"
    assert sp.decode_range[0] == pytest.approx(band.low / max(t, H))  # eq. 14: max(device, host)


def test_a_device_bound_step_takes_the_bound_without_an_inversion_warning() -> None:
    """Qwen3-8B on 0.11 (VS17's setup): the step (7 ms) is longer than the bound, no newer release is estimated
    slower, so no inversion is stated; the range's low end still adds the unestablished host step."""
    sp = _speed("0.11", "qwen3-8b")
    assert sp.decode.seconds > H
    assert not any("inversion" in w for w in sp.warnings)
    b = sp.decode_band
    assert b is not None and sp.decode_range[0] == pytest.approx(b.low / (sp.decode.seconds + H))


def test_an_established_release_keeps_its_band_alone() -> None:
    for version in ("0.14", "0.7"):
        sp = _speed(version)
        b = sp.decode_band
        assert "host_range_seconds" not in sp.details and b is not None
        assert sp.decode_range == R.band_range(b, sp.decode_tokens_per_second)
        assert not any("inversion" in w for w in sp.warnings)

"""review11 #4: fit --auto's "fits at" hint is not timed where its speed cannot be known."""

from __future__ import annotations


def test_the_auto_fit_hint_is_not_timed_where_its_speed_cannot_be_known(monkeypatch) -> None:  # noqa: ANN001
    """review11 #4: without --host-device beside a GPU, a rung with layers on the CPU has no speed (fit's split
    decode needs the host's bandwidth), so auto_fits_at names it unchecked without timing it: one timing fit per call
    (the answer's own), not two; the hint is the same (q3_k_m, unchecked)."""
    from llmsizer.estimate import llamacpp_fit as LF

    calls: list[int] = []
    real = LF.with_speed

    def counted(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(LF, "with_speed", counted)
    r = LF.fit_llamacpp("qwen2.5-72b", ["24GiB"], device="rtx-4090", host_memory=16 * 2**30)
    assert r.fits_at is not None and r.fits_at["weights"] == "gguf:q3_k_m"
    assert r.fits_at["meets_reading_speed"] is None and r.fits_at["tokens_per_second_per_user"] is None
    assert len(calls) == 1
    # a named host CPU: the rungs are timed, and the first meeting the reading floor is named
    calls.clear()
    timed = LF.fit_llamacpp("qwen2.5-72b", ["24GiB"], device="rtx-4090", host_memory=64 * 2**30,
                            host_device="amd-epyc-9654")
    assert timed.fits_at is not None and timed.fits_at["meets_reading_speed"] is True and len(calls) >= 2

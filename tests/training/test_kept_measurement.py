"""A ZeRO-stage search keeps the measurement of the stage it took (compose.py ``_keep``, ``_MEASURED``) and composes
its words only when the estimate is asked for (``_memoized``): a need-only caller (the not-fitting ladder's steps,
``training_needs``) never finishes it. The estimate finished late is the one made from scratch, word for word; the
kept measurements are cleared with the estimates (``clear_caches``)."""

from __future__ import annotations

import json

from llmsizer.catalog.models import find
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit_training
from llmsizer.estimate.training import compose


def _dump(est: object) -> str:
    return json.dumps(est.to_dict(), sort_keys=True, default=str)  # type: ignore[attr-defined]


def test_the_ladder_step_is_kept_unfinished_and_finishes_as_a_fresh_estimate() -> None:
    spec = find("llama-3.1-8b").spec()
    clear_caches()
    fr = fit_training(spec, "h100-sxm", 1, method="full", grad_checkpointing="full")
    assert not fr.fits and fr.fits_at is not None and fr.fits_at["changes"] == {"offload": "optimizer"}
    # the ladder's step (optimizer offload: its ZeRO stage chosen) measured for its need, not finished
    assert len(compose._MEASURED) == 1
    (key, (kept_spec, kept_w, _)), = compose._MEASURED.items()
    assert kept_spec is spec and key not in compose._MEMO
    late = compose.estimate_training(spec, kept_w)  # finished from the kept measurement
    assert not compose._MEASURED and key in compose._MEMO
    clear_caches()
    fresh = compose.estimate_training(spec, kept_w)  # measured and finished anew
    assert _dump(late) == _dump(fresh)
    assert late.total("device") == fresh.total("device")


def test_clear_caches_drops_the_kept_measurements() -> None:
    spec = find("llama-3.1-8b").spec()
    clear_caches()
    fit_training(spec, "h100-sxm", 1, method="full", grad_checkpointing="full")
    assert compose._MEASURED
    clear_caches(estimates_only=True)
    assert not compose._MEASURED

"""review35 D1: recommend --request-rate answers each option "as `fit --count N --request-rate` answers the
option's devices", but `fit` with no --tensor-parallel on those devices took another layout: on N single-GPU
instances (aws-g6e.xlarge x 8, azure-standard_nc40ads_h100_v5 x 2; llama-3.1-8b, vLLM, 20 requests/s) its climb to
eq. Q10c's fixed point passed to TP 2..8 across instances wherever TP 1 did not fit at an iterate, and answered DOES
NOT FIT with an in-flight count carried from that other layout ("concurrency given as 472"). The layout at a rate is
now one rule (estimate/fit.py ``rate_layout_seconds``): the layouts within a machine, each timed at its own fixed
point, so N one-GPU instances are N replicas. The truth here is fit pinned to TP 1 (``fit --tp 1``), which never
passes through another layout, and recommend's option for the same devices."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import HardwareCatalog, load_catalog
from llmsizer.estimate.fit import fit
from llmsizer.recommend import recommend_inference

MODEL = "llama-3.1-8b"
# single-GPU instances (the review's two) and an 8-GPU one (layouts within it ranked)
INSTANCES = ("aws-g6e.xlarge", "azure-standard_nc40ads_h100_v5", "aws-p4d.24xlarge")


def _catalog(ids: tuple[str, ...]) -> HardwareCatalog:
    cat = load_catalog()
    insts = {i: cat.instances[i] for i in ids}
    return HardwareCatalog({v.device.id: v.device for v in insts.values()}, insts, dict(cat.interconnects),
                           dict(cat.sources))


def test_review_case_fits_as_tp_one() -> None:
    """The review's case: fit with no degree answers what `fit --tp 1` answers (8 replicas, one in-flight count)."""
    kw = dict(engine="vllm", weights="fp8", request_rate=20)
    free = fit(MODEL, "aws-g6e.xlarge", 8, **kw)
    pinned = fit(MODEL, "aws-g6e.xlarge", 8, tensor_parallel=1, **kw)
    assert pinned.fits and free.fits
    assert (free.tensor_parallel, free.replicas) == (1, 8)
    assert free.details["concurrency"] == pinned.details["concurrency"]
    assert free.details["running_sequences"] == pinned.details["running_sequences"]
    assert free.speed.ttft_seconds == pinned.speed.ttft_seconds
    assert not any("given as" in a.why for a in free.assumptions if a.name == "concurrency")


@pytest.mark.parametrize("engine, rate", [("vllm", 20), ("llamacpp", 2)])
def test_recommend_rate_options_are_fit_unpinned(engine: str, rate: float) -> None:
    rec = recommend_inference(MODEL, engine=engine, request_rate=rate, catalog=_catalog(INSTANCES),
                              quantization_advice=False)
    meets = [o for o in rec.options if o.status in ("chosen", "meets")]
    # every instance meets: one-GPU ones (copies of TP 1) and the 8-GPU one (its layouts within ranked)
    assert {o.target for o in meets} == set(INSTANCES), [(o.target, o.reasons[:1]) for o in rec.options]
    for o in meets:
        r = fit(MODEL, o.target, o.count, engine=o.engine, weights=o.weights_format, request_rate=rate)
        assert r.fits, (o.target, r.reasons)
        assert (r.tensor_parallel, r.replicas) == (o.tensor_parallel, o.replicas), o.target
        assert r.details["running_sequences"] == o.running_sequences, o.target
        assert r.speed is not None and r.speed.ttft_seconds == o.ttft_seconds, o.target

"""The web API's calibrated ranges carry their band's coverage, as the CLI's JSON does (the body is the CLI's): the
training duration's range (`/train` with tokens: `duration.calibrated_seconds_range_coverage`) and fit's speed ranges
(`/fit`: `speed.calibrated_ranges.coverage`), each with the numbers counted from the band's validation rows and a
warning exactly when the leave-one-setup-out coverage is below the 90 % target."""

from __future__ import annotations

import pytest

from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import BATCHED, PYTORCH_TRAINING, TRAINING_SPEED, band_rows, repo_cases
from validation.test_ranges import _by_hand

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def _is_the_bands(cov: dict, rows: list) -> None:
    inside, loso = _by_hand(rows)
    assert (cov["target"], cov["in_sample"], cov["leave_one_setup_out"]) == (0.9, inside, loso)
    assert (cov["warning"] is not None) == (loso is not None and loso < 0.9)


def test_web_api_ranges_carry_their_coverage(client) -> None:
    rows = band_rows(repo_cases())
    r = client.post("/api/v1/train", json={"model": "llama-3.1-8b", "device": "h100-sxm", "method": "lora",
                                           "tokens": "1e8"})
    assert r.status_code == 200, r.text
    du = r.json()["duration"]
    assert du["calibrated_seconds_range"] is not None
    _is_the_bands(du["calibrated_seconds_range_coverage"], rows[(TRAINING_SPEED, PYTORCH_TRAINING)])
    r = client.post("/api/v1/fit", json={"model": "llama-3.1-70b-instruct", "device": "h100-sxm", "count": 8,
                                         "engine": "vllm", "concurrency": 8})
    assert r.status_code == 200, r.text
    ranges = r.json()["speed"]["calibrated_ranges"]
    assert ranges["tokens_per_second"] is not None
    _is_the_bands(ranges["coverage"]["tokens_per_second"], rows[(BATCHED, R.SERVING_POOLED)])

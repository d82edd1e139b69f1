"""The web API refuses to size an encoder-decoder (T5 / mT5) in one problem, HTTP 400, as the CLI does (exit 2):
estimate/model_warnings.py ``refuse_unmodelled``; tests/estimate/test_encoder_decoder_refused.py for the CLI."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.mark.parametrize(("route", "body"), [
    ("/api/v1/infer", {"model": "t0_3b"}),
    ("/api/v1/train", {"model": "mt0-xxl", "method": "lora"}),
    ("/api/v1/fit", {"model": "t0_3b", "device": "a100"}),
])
def test_encoder_decoder_is_a_400_problem_naming_the_model(client, route, body):
    r = client.post(route, json=body)
    assert r.status_code == 400
    p = r.json()
    assert "encoder-decoder" in p["detail"] and "bigscience/" in p["detail"] and "Traceback" not in r.text

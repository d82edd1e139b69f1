"""Eq. TP6's refusal (formulas/tensor_parallel.py ``width_refusal``) over HTTP: the 400 names the body's ``tp`` as
the field at fault, like eq. TP5's (test_tp5_refusal_field_web.py). Qwen2.5-1.5B-Instruct's 8960-wide MLP at TP 6."""

from __future__ import annotations


def test_the_tp6_refusal_blames_tp(client) -> None:
    r = client.post("/api/v1/infer", json={"model": "qwen2.5-1.5b-instruct", "device": "h100-sxm", "tp": 6})
    assert r.status_code == 400
    p = r.json()
    assert p["field"] == "tp" and "8960-wide dense MLP" in p["detail"] and p["detail"].startswith("--tp 6")

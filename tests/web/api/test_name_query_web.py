"""The web's model and hardware searches match name words by the CLI's rule (``suggest.matches_name``, probe24 C3):
``?query=7b`` lists no 27b or 1.7b model, ``?query=m3`` no HBM3 device."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def test_models_query_matches_words(client) -> None:
    r = client.get("/api/v1/models", params={"query": "7b"})
    ids = {m["id"] for m in r.json()["models"]}
    assert r.status_code == 200 and "Qwen/Qwen2.5-7B" in ids
    assert not ids & {"google/gemma-2-27b-it", "Qwen/Qwen3-1.7B", "meta-llama/Llama-4-Scout-17B-16E-Instruct"}


def test_hardware_query_matches_words(client) -> None:
    r = client.get("/api/v1/hardware", params={"query": "m3"})
    ids = {d["id"] for d in r.json()["devices"]}
    assert r.status_code == 200 and "apple-m3-pro-18gb" in ids and "gh200" not in ids

"""``fits_if_changed`` is in the API contract (probe6 defect 9): the OpenAPI document's /fit answer describes it and
``fits_at`` with the keys a real training answer carries, and API.md / docs/nomenclature.md name it. The answer is
the web's own for LoRA of Llama-3.3-70B on 2 x A100 80GB with checkpointing and offload stated none (nothing keeping
them fits: the first alternative changes a setting given)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[3]


def test_openapi_fit_answer_describes_fits_if_changed(client) -> None:
    doc = client.get("/api/v1/openapi.json").json()
    schema = doc["paths"]["/api/v1/fit"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert {"fits_at", "fits_if_changed"} <= set(schema["properties"])
    item = schema["properties"]["fits_if_changed"]["items"]
    body = {"model": "llama-3.3-70b-instruct", "device": "a100-sxm-80gb", "count": 2, "train": True,
            "method": "lora", "grad_checkpointing": "none", "offload": "none"}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200 and r.headers["X-Llmsizer-Exit-Code"] == "1", r.text
    d = r.json()
    assert d["fits_at"] is None and d["fits_if_changed"]
    for alt in d["fits_if_changed"]:  # every key the answer writes is described, every required one written
        assert set(item["required"]) <= set(alt) <= set(item["properties"])
        assert set(alt["changes_given"]) <= set(alt["changes"])
    assert any(alt["changes_given"] for alt in d["fits_if_changed"])


def test_the_prose_contract_names_it() -> None:
    api = (ROOT / "src" / "llmsizer" / "web" / "API.md").read_text("utf-8")
    assert '"fits_if_changed"' in api and '"changes_given"' in api
    assert '"method": "lora"}, "memory_per_device"' not in api  # the old sentence: training changes in fits_at
    assert "| `fits_if_changed` |" in (ROOT / "docs" / "nomenclature.md").read_text("utf-8")

"""``moe_router_fusion`` true on a dense model (no MoE router to fuse: review33 N3) is one line: exit 2 from the CLI,
a 400 naming the field on the web, an InputError (FieldError) from the Python API; false on a dense model changes
nothing (Megatron-Core's default)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line

from llmsizer.catalog.models import entries
from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

DENSE = "qwen2.5-0.5b"
RUN = {"method": "full", "precision": "megatron-bf16", "micro_batch": 1, "seq_len": 2048}


def test_dense_model_has_no_router() -> None:
    cfg = entries()[DENSE].config  # Qwen2.5-0.5B's config.json: a dense Qwen2 (no experts)
    assert cfg["model_type"] == "qwen2" and not any(k.endswith("experts") for k in cfg)


def test_fusion_on_a_dense_model_is_refused_on_every_surface(client) -> None:
    line = cli_error_line("train", DENSE, "--method", "full", "--precision", "megatron-bf16", "--moe-router-fusion")
    assert "moe-router-fusion" in line and "dense" in line and "\n" not in line.strip()
    web = client.post("/api/v1/train", json={"model": DENSE, **RUN, "moe_router_fusion": True})
    assert web.status_code == 400 and web.json()["field"] == "moe_router_fusion", web.text
    with pytest.raises(InputError, match="dense"):
        estimate_training(DENSE, moe_router_fusion=True, **RUN)
    off = client.post("/api/v1/train", json={"model": DENSE, **RUN, "moe_router_fusion": False})
    assert off.status_code == 200, off.text

"""`models --fits-on D --images N` answers "which vision models fit my machine with N images per prompt", each row
equal to `fit MODEL --device D --images N --weights FORMAT` (the session-16 probe: --images was an unrecognized
argument of `models`). Text-only models are left out and counted (images do not apply to them: `infer
llama-3.1-8b --images 2` is refused), and the web's GET /models/fits-on gives the CLI's bytes."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json

DEVICE = "rtx-4090"


def test_each_vision_model_row_is_fit_s_answer_with_the_images() -> None:
    code, rows = run_json("models", "gemma-3", "--fits-on", DEVICE, "--images", "2")
    assert code == 0 and rows["images"] == 2
    assert rows["models"], rows
    for m in rows["models"]:
        assert m["status"] == "meets", m
        _, f = run_json("fit", m["id"], "--device", DEVICE, "--images", "2", "--weights", m["weights_format"])
        assert f["memory_per_device"] == m["memory_per_device"], m["id"]
        _, plain = run_json("fit", m["id"], "--device", DEVICE, "--weights", m["weights_format"])
        assert f["memory_per_device"] > plain["memory_per_device"]  # the images' tokens were counted
    # gemma-3-1b-it is text-only (no vision tower in its config.json): left out, and said so
    assert rows["text_only_left_out"] >= 1
    assert all("1b" not in m["id"] for m in rows["models"])


def test_images_without_fits_on_is_refused() -> None:
    code, _, err = run("models", "--images", "2")
    assert code == 2 and "--images needs --fits-on" in err


def test_the_web_says_what_the_cli_says() -> None:
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    _, cli = run_json("models", "gemma-3", "--fits-on", DEVICE, "--images", "2")
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        web = client.get("/api/v1/models/fits-on", params={"fits_on": DEVICE, "query": "gemma-3",
                                                           "images": 2}).json()
    assert web == cli

"""``--framework`` (catalog/data/frameworks.json, applied by estimate/framework.py) reaches the one estimate the same
way from the CLI, the Python API, the web API and the calculator's training select (its choices from the same file);
a bad name is one line (exit 2, a 4xx on the web) with the closest names."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from web_api_helpers import run_cli, run_cli_json

from llmsizer.catalog.frameworks import framework_profiles
from llmsizer.estimate.training import estimate_training

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "stablelm-base-alpha-3b"  # GPT-NeoX: LayerNorm, so llm-foundry's low-precision norm changes the answer


def _device(d: dict) -> int:
    return int(d["totals"]["device"]["bytes"])


def test_the_profile_through_cli_api_and_web(client) -> None:
    api = estimate_training(MODEL, framework="llm-foundry", micro_batch=4, seq_len=1024).to_dict()
    cli = run_cli_json("train", MODEL, "--framework", "llm-foundry", "--batch", "4", "--seq", "1024")
    web = client.post("/api/v1/train", json={"model": MODEL, "framework": "llm-foundry", "micro_batch": 4,
                                             "seq_len": 1024})
    assert web.status_code == 200, web.text
    assert _device(api) == _device(cli) == _device(web.json())
    named = {a["name"]: a for a in web.json()["assumptions"]}
    assert named["layernorm"]["value"] == "low-precision" and named["layernorm"]["default"]
    assert named["layernorm"]["why"].startswith("from framework profile llm-foundry (mosaicml/llm-foundry @")
    # the settings stated by hand: the same answer, each named as given
    hand = estimate_training(MODEL, micro_batch=4, seq_len=1024, loss="fused-xentropy", layernorm="low-precision",
                             train_metric_passes=2, attention="flash", attention_kernel="triton-flash").to_dict()
    assert _device(hand) == _device(api)
    plain = estimate_training(MODEL, micro_batch=4, seq_len=1024).to_dict()
    assert _device(api) < _device(plain)


def test_the_select_offers_the_profiles(client) -> None:
    choices = client.get("/pages/choices.json").json()["choices"]
    assert choices["frameworks"] == list(framework_profiles())
    assert 'data-choices="frameworks"' in client.get("/").text


def test_the_cli_help_and_the_select_name_each_profiles_pinned_version(client) -> None:
    """The version is the data file's 'pinned' (repository @ commit), read raw here, not through the loader."""
    raw = json.loads((resources.files("llmsizer.catalog.data") / "frameworks.json").read_text("utf-8"))
    pinned = {n: p["pinned"] for n, p in raw.items() if not n.startswith("_") and "pinned" in p}
    assert pinned["llm-foundry"] == "mosaicml/llm-foundry @b2a43a147"  # the commit its sources name
    labels = client.get("/pages/choices.json").json()["choices"]["frameworks_labels"]
    assert labels["none"] == "none"
    helptext = " ".join(run_cli("train", "--help").stdout.split())
    for name, pin in pinned.items():
        assert labels[name] == f"{name} ({pin})"
        assert f"{name} ({pin})" in helptext


def test_a_bad_name_is_one_line(client) -> None:
    done = run_cli("train", MODEL, "--framework", "llmfoundry")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--framework" in done.stderr and "did you mean 'llm-foundry'" in done.stderr
    web = client.post("/api/v1/train", json={"model": MODEL, "framework": "llmfoundry"})
    assert 400 <= web.status_code < 500 and "llm-foundry" in web.text
    with pytest.raises(Exception, match="unknown framework 'llmfoundry'; did you mean 'llm-foundry'"):
        estimate_training(MODEL, framework="llmfoundry")

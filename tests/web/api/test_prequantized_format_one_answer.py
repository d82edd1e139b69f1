"""One answer for a checkpoint that ships quantized (gpt-oss: MXFP4 experts): `fit`, `infer`, `recommend` and
`models --fits-on` run the same default weight format, through the CLI, the Python API and the web API. Before
the format ladder had one home (estimate/formats.py format_ladder), `recommend` and `models --fits-on` climbed to
`gguf:f16` (41.9 GB, sized as if the experts were dequantized) on an M3 Max while `fit` and `infer` took
`gguf:mxfp4_moe` (12.1 GB)."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli_json as _cli

import llmsizer
from llmsizer.estimate.formats import format_ladder
from llmsizer.formulas.weight_formats import weight_bytes

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL, DEVICE, WANT = "gpt-oss-20b", "apple-m3-max-64gb", "gguf:mxfp4_moe"


def _option(rec: dict) -> str:
    return next(o["weights_format"] for o in rec["options"] if o["target"] == DEVICE)


def _fits_on(models: dict) -> str:
    return next(m["weights_format"] for m in models["models"] if m["id"].endswith("/" + MODEL))


def _weights(est: dict) -> str:
    return next(a["value"] for a in est["assumptions"] if a["name"] == "weights")


def test_every_face_runs_the_shipped_format(client) -> None:
    cli = {"fit": _cli("fit", MODEL, "--device", DEVICE)["weights_format"],
           "infer": _weights(_cli("infer", MODEL, "--engine", "llamacpp")),
           "recommend": _option(_cli("recommend", MODEL, "--laptop")),
           "models --fits-on": _fits_on(_cli("models", "--fits-on", DEVICE))}
    py = {"fit": llmsizer.fit(MODEL, DEVICE).weights_format,
          "infer": llmsizer.estimate_inference(MODEL, engine="llamacpp").details["weights_format"],
          "recommend": next(o.weights_format for o in llmsizer.recommend_inference(
              MODEL, constraints=llmsizer.Constraints(laptop=True)).options if o.target == DEVICE)}
    web = {"fit": client.post("/api/v1/fit", json={"model": MODEL, "device": DEVICE}).json()["weights_format"],
           "infer": _weights(client.post("/api/v1/infer", json={"model": MODEL, "engine": "llamacpp"}).json()),
           "recommend": _option(client.post("/api/v1/recommend", json={"model": MODEL, "laptop": True}).json()),
           "models --fits-on": _fits_on(client.get("/api/v1/models/fits-on", params={"fits_on": DEVICE}).json())}
    assert set(cli.values()) == set(py.values()) == set(web.values()) == {WANT}, (cli, py, web)


@pytest.mark.parametrize("model,engine,shipped", [
    ("gpt-oss-20b", "llamacpp", "mxfp4"), ("gpt-oss-20b", "vllm", "mxfp4"),
    ("deepseek-v3", "vllm", "fp8-block"), ("deepseek-v3", "llamacpp", "fp8-block"),
])
def test_a_prequantized_ladder_never_starts_above_the_shipped_checkpoint(model, engine, shipped) -> None:
    spec = llmsizer.load_model(model)
    ladder = format_ladder(spec, engine)
    limit = weight_bytes(spec, shipped).total
    sizes = [weight_bytes(spec, f).total for f in ladder]
    assert ladder and max(sizes) <= limit, list(zip(ladder, sizes, strict=True))
    assert "bf16" not in ladder and "gguf:f16" not in ladder

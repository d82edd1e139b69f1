"""The web API's side of tests/consistency/test_one_parse.py: a number written with a suffix is the number the CLI,
a request file and Python read (the body's fields are parsed by the CLI's own parser), a word for an integer field
is the CLI's one message in a 400 naming the field, and the engine refusal of a model an engine's serving is not
modelled for (an encoder-decoder on SGLang) names the body's field ``engine`` (not the CLI's ``--engine``)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, web_line

from llmsizer import TrainingWorkload, estimate_inference
from llmsizer.errors import FieldError

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "qwen2.5-0.5b"
T5 = "t0_3b"  # an encoder-decoder: modelled on transformers only


def test_a_suffix_on_the_web_is_the_number_python_reads(client) -> None:
    r = client.post("/api/v1/train", json={"model": MODEL, "grad_accumulation": "4k", "seq_len": "2k"})
    assert r.status_code == 200, r.text
    given = {a["name"]: a["value"] for a in r.json()["assumptions"]}
    py = TrainingWorkload(grad_accumulation="4k", seq_len="2k")
    assert (given["grad_accumulation"], given["seq_len"]) == (py.grad_accumulation, py.seq_len) == (4000, 2048)


def test_a_word_for_an_integer_is_the_clis_message(client) -> None:
    r = client.post("/api/v1/train", json={"model": MODEL, "grad_accumulation": "yes"})
    assert r.status_code == 400 and r.json()["field"] == "grad_accumulation", r.text
    assert r.json()["detail"] == web_line(cli_error_line("train", MODEL, "--grad-accumulation", "yes"), r.json()["field"])


def test_the_engine_refusal_names_the_bodys_field(client) -> None:
    with pytest.raises(FieldError) as e:
        estimate_inference(T5, engine="sglang")
    r = client.post("/api/v1/infer", json={"model": T5, "engine": "sglang"})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "engine" and "modelled on engine transformers" in str(e.value), r.text
    # the CLI's line on the web (API.md "Errors"; task webwords), Python's names in Python
    line = cli_error_line("infer", T5, "--engine", "sglang")
    assert r.json()["detail"] == line == str(e.value).replace("engine transformers", "--engine transformers").replace(
        "weights fp32", "--weights fp32")


def test_a_comma_is_a_thousands_separator_or_a_400(client) -> None:
    """tests/consistency/test_thousands_commas.py on the web: '32,768' is 32768; '8,5k' is no number (it was 85k)."""
    ok = client.post("/api/v1/infer", json={"model": MODEL, "context": "32,768"})
    plain = client.post("/api/v1/infer", json={"model": MODEL, "context": 32768})
    assert ok.status_code == plain.status_code == 200 and ok.json() == plain.json()
    bad = client.post("/api/v1/infer", json={"model": MODEL, "context": "8,5k"})
    assert bad.status_code == 400 and "cannot read '8,5k'" in bad.text

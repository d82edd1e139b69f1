"""A T5-style encoder-decoder's source longer than its config states or its family was pre-trained on is said
(estimate/model_warnings.py ``source_length_warning``), not refused. Before, `infer t0_3b` sized the default
context of 4096 (a 3840-token source) without a word. The truth compared with: the T5 paper (Raffel et al. 2020,
sec. 3.1.2, maximum sequence length 512), the mT5 paper (Xue et al. 2021, sec. 3, length-1024 inputs), and the
original T5 configs' n_positions (google-t5/t5-small config.json: 512)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer import estimate_inference, estimate_training
from llmsizer.readers.hf_t5 import t5_spec

T5_PAPER, MT5_PAPER = 512, 1024

# google-t5/t5-small config.json (the keys t5_spec reads), which states n_positions
T5_SMALL = {"model_type": "t5", "d_model": 512, "d_ff": 2048, "d_kv": 64, "num_heads": 8, "num_layers": 6,
            "vocab_size": 32128, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
            "feed_forward_proj": "relu", "dropout_rate": 0.1, "n_positions": 512, "tie_word_embeddings": True}


def said(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith("encoder_decoder_source_length:")]


def infer_warnings(*argv: str) -> tuple[str, list[str]]:
    code, out, err = run("infer", *argv, "--json")
    assert code in (0, 1), err
    code_text, text, _ = run("infer", *argv)
    assert code_text == code
    return text, said(json.loads(out)["warnings"])


@pytest.mark.parametrize("model, limit", [("t0_3b", T5_PAPER), ("mt0-xxl", MT5_PAPER)])
def test_the_default_context_is_said_not_refused(model: str, limit: int) -> None:
    text, warnings = infer_warnings(model)  # context 4096 - 256 output tokens = a 3840-token source
    assert len(warnings) == 1 and "the source (encoder input) is 3840 tokens" in warnings[0]
    assert f"more than the {limit} tokens its family was pre-trained on" in warnings[0]
    assert ("Raffel et al. 2020" if limit == T5_PAPER else "Xue et al. 2021") in warnings[0]
    assert "warning: " + warnings[0] in text


@pytest.mark.parametrize("model, limit", [("t0_3b", T5_PAPER), ("mt0-xxl", MT5_PAPER)])
def test_the_limit_is_the_papers(model: str, limit: int) -> None:
    # the source is context - output tokens
    assert not infer_warnings(model, "--context", str(limit + 64), "--output-tokens", "64")[1]
    assert infer_warnings(model, "--context", str(limit + 65), "--output-tokens", "64")[1]


def test_the_configs_n_positions_wins() -> None:
    spec = t5_spec(dict(T5_SMALL, n_positions=300), name="t5-small-300", where="test")
    assert said(list(estimate_inference(spec, context=400, output_tokens=100).warnings)) == []
    (w,) = said(list(estimate_inference(spec, context=401, output_tokens=100).warnings))
    assert "more than the 300 tokens its config states (n_positions)" in w
    small = t5_spec(T5_SMALL, name="t5-small", where="test")
    assert small.encoder_decoder is not None and small.encoder_decoder.n_positions == 512


def test_training_says_it_for_its_source() -> None:
    kw = {"precision": "fp32", "attention": "eager"}
    assert said(list(estimate_training("t0_3b", seq_len=T5_PAPER, **kw).warnings)) == []
    (w,) = said(list(estimate_training("t0_3b", seq_len=T5_PAPER + 1, **kw).warnings))
    assert f"is {T5_PAPER + 1} tokens" in w


def test_the_web_api_says_it_too() -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/infer", json={"model": "t0_3b"})
        assert r.status_code == 200, r.text
        assert len(said(r.json()["warnings"])) == 1
        code, out, _ = run("infer", "t0_3b", "--json")
        assert code == 0 and r.json() == json.loads(out)

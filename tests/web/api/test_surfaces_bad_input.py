"""Bad input says the same one line on every surface (session 8 probe): the CLI (exit 2, no traceback), the web API
(a 4xx whose detail is the CLI's line) and the Python API (an InputError naming the field, not a TypeError from
inside a formula). Each case failed on at least one surface before its fix."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli, web_line

import llmsizer
from llmsizer.errors import InputError

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def test_a_gpu_serving_engine_on_apple_is_refused_by_infer_as_by_fit(client) -> None:
    """Before, `infer --engine vllm --device apple-m3-max-64gb` answered (exit 0, a CUDA context and a vLLM pool on a
    Mac) while `fit` refused the same question; vLLM and SGLang serve on CUDA/ROCm GPUs only."""
    args = ("llama-3.1-8b", "--engine", "vllm", "--device", "apple-m3-max-64gb")
    line = cli_error_line("infer", *args)
    assert line == cli_error_line("fit", *args)
    assert "vllm" in line and "apple-m3-max-64gb" in line
    for route in ("infer", "fit"):
        r = client.post(f"/api/v1/{route}", json={"model": "llama-3.1-8b", "engine": "vllm",
                                                   "device": "apple-m3-max-64gb"})
        assert r.status_code == 400 and r.json()["detail"] == web_line(line, r.json()["field"])
    with pytest.raises(InputError) as e:
        llmsizer.estimate_inference("llama-3.1-8b", engine="vllm", device="apple-m3-max-64gb")
    assert str(e.value) == line
    # the same rule, by kind, for a CPU
    assert "device cpu" in cli_error_line("infer", "llama-3.1-8b", "--engine", "sglang", "--device", "cpu")


@pytest.mark.parametrize("flag,value", [("--deadline", "3 days"), ("--deadline", "2 weeks"), ("--max-ttft", "500 ms")])
def test_recommend_reads_durations_as_request_files_do(flag: str, value: str, client) -> None:
    """Before, recommend had its own duration parser: '3 days' (a request file's example) was refused, and the
    message named no flag."""
    train = ["--train", "--tokens", "1B"] if flag == "--deadline" else []
    done = run_cli("recommend", "llama-3.1-8b", flag, value, *train, "--top", "1", "--json")
    assert done.returncode in (0, 1), done.stderr
    body = {"model": "llama-3.1-8b", flag[2:].replace("-", "_"): value, "top": 1}
    if train:
        body.update(train=True, tokens="1B")
    assert client.post("/api/v1/recommend", json=body).status_code == 200


@pytest.mark.parametrize("flag,value,words", [("--deadline", "90m", "minutes or months"), ("--max-ttft", "-3", "positive"),
                                              ("--deadline", "soon", "cannot read")])
def test_a_bad_duration_names_its_flag(flag: str, value: str, words: str, client) -> None:
    line = cli_error_line("recommend", "llama-3.1-8b", flag, value)
    assert line.startswith(f"argument {flag}: ") and words in line
    r = client.post("/api/v1/recommend", json={"model": "llama-3.1-8b", flag[2:].replace("-", "_"): value})
    assert r.status_code == 400 and r.json()["detail"] == web_line(line, r.json()["field"])


@pytest.mark.parametrize("call,field", [
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", context="eight"), "context"),
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", concurrency=2.5), "concurrency"),
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", context=float("nan")), "context"),
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", context=10**40), "context"),
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", memory="24"), "memory"),
    (lambda: llmsizer.estimate_inference("llama-3.1-8b", memory=24 * 2**30, headroom="lots"), "headroom"),
    (lambda: llmsizer.estimate_training("llama-3.1-8b", memory="80"), "memory"),
    (lambda: llmsizer.fit("llama-3.1-8b", "h100-sxm", "two"), "count"),
    (lambda: llmsizer.fit("llama-3.1-8b", "h100-sxm", context="eight"), "context"),
    (lambda: llmsizer.max_context("qwen2.5-7b", "24"), "memory"),
    (lambda: llmsizer.fit_training("llama-3.1-8b", "h100-sxm", tokens="lots"), "tokens"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_python_api_bad_numbers_name_the_field(call, field: str) -> None:
    """Before: TypeError ('<=' not supported between 'str' and 'int'), ValueError (could not convert string to
    float), or an answer (10^40 tokens, 2.5 sequences). Text the CLI reads ('8k', '24GiB') is read since probe4a;
    text it refuses (no unit, no number) is refused with the field's name."""
    with pytest.raises(InputError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(f"{field}: ") and "\n" not in msg


def test_a_request_file_given_as_the_model_says_where_it_goes(tmp_path) -> None:
    """Before: '<file>: the file is not valid JSON (line 1, column 1: Expecting value)' for a new user's request file
    given to `infer` / `fit` / `train`."""
    req = tmp_path / "my-request.yaml"
    req.write_text("version: 1\ntitle: x\njobs: []\n")
    for cmd in (("infer",), ("train",), ("fit", "--device", "h100-sxm")):
        line = cli_error_line(cmd[0], str(req), *cmd[1:])
        assert "a YAML file is not a model" in line and "llmsizer plan" in line


@pytest.mark.parametrize("body,words", [
    ({"context": [1024, 65536]}, "one value expected, got a list"),  # answered for context 65536 before
    ({"images": [1]}, "one value expected, got a list"),
    # said 'argument --context: expected one argument' before; a numeric option names its range (numbers.py)
    ({"context": True}, "field 'context': expected an integer in [1, "),
    ({"context": False}, "got the boolean false"),  # before, false was left out and the default context answered
    ({"engine": True}, "field 'engine': a value expected"),  # not a number: what the option takes
    # said "argument --max-context: ignored explicit argument 'yes'" (argparse's words for a command line) before
    ({"max_context": "yes"}, "field 'max_context': must be true or false, got 'yes'"),
    ({"max_context": 1}, "field 'max_context': must be true or false, got 1"),
])
def test_the_web_api_refuses_a_field_shaped_for_another_option(body: dict, words: str, client) -> None:
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert words in problem["detail"] and problem["field"] == next(iter(body))


def test_a_comma_separated_option_takes_a_json_list(client) -> None:
    """--free 22GiB,11GiB is one value of comma-separated parts; a JSON list of them means the same (before, the
    list was sent as --free given twice and the last, 11GiB alone, was one GPU)."""
    base = {"model": "llama-3.3-70b-instruct", "device": "rtx-3090", "count": 2, "auto": True, "weights": "q4_k_m"}
    as_list = client.post("/api/v1/fit", json={**base, "free": ["22GiB", "11GiB"]})
    as_text = client.post("/api/v1/fit", json={**base, "free": "22GiB,11GiB"})
    assert as_list.status_code == as_text.status_code == 200
    assert as_list.json() == as_text.json()
    done = run_cli("fit", "llama-3.3-70b-instruct", "--device", "rtx-3090", "--count", "2", "--auto", "--weights",
                   "q4_k_m", "--free", "22GiB,11GiB", "--json")
    import json
    assert json.loads(done.stdout) == as_list.json()


def test_python_fit_reads_the_clis_spellings() -> None:
    """fit(context='8k') raised TypeError (str // int in prompt_and_output) where estimate_inference read it: the
    same answer as context=8192, as the CLI's --context 8k."""
    a = llmsizer.fit("llama-3.1-8b", "h100-sxm", context="8k", memory="80GB", speed=False)
    b = llmsizer.fit("llama-3.1-8b", "h100-sxm", context=8192, memory=80 * 10**9, speed=False)
    assert a.to_dict() == b.to_dict()


def test_python_reads_the_clis_spellings_everywhere() -> None:
    """review19: fit(count='2', concurrency='4'), estimate_training(seq_len='4k') and fit_training(tokens='1B') were
    refused where the CLI (and estimate_inference) read them: each now gives the answer of the number."""
    import dataclasses
    a = llmsizer.fit("llama-3.1-8b", "h100-sxm", "2", concurrency="4", speed=False)
    b = llmsizer.fit("llama-3.1-8b", "h100-sxm", 2, concurrency=4, speed=False)
    assert a.to_dict() == b.to_dict()
    t1 = llmsizer.estimate_training("llama-3.1-8b", seq_len="4k", micro_batch="2")
    t2 = llmsizer.estimate_training("llama-3.1-8b", seq_len=4096, micro_batch=2)
    assert t1.total("device") == t2.total("device")
    f1 = llmsizer.fit_training("llama-3.1-8b", "h100-sxm", tokens="1B")
    f2 = llmsizer.fit_training("llama-3.1-8b", "h100-sxm", tokens=10**9)
    assert repr(f1) == repr(f2) and dataclasses.is_dataclass(f1)


def test_pefts_all_linear_refusal_names_the_field() -> None:
    """PEFT refuses all-linear on Mamba model types: a FieldError on 'targets', so the CLI says --targets, a request
    file its own key at its line, the web the body's key."""
    from llmsizer.errors import FieldError
    with pytest.raises(FieldError) as e:
        llmsizer.estimate_training("nemotron-h-56b-base-8k", method="lora", targets="all-linear")
    assert e.value.field == "targets" and "e.g. targets q,k,v,o,up,down,in_proj" in str(e.value)

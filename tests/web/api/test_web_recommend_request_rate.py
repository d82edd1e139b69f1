"""recommend at a request rate (open arrivals, formulas/serving_queue.py eq. Q10): each option is the fewest copies
of a candidate whose each copy carries an equal share of the rate below its capacity and within the limits, each copy
answered by fit's rate path. Checked by hand against the API server's capacity 1 / H = 44.5/s a copy and what the
sequences the engine admits serve (test_copies_by_hand); the option's TTFT is `fit --count K --request-rate`'s for its K copies (probe23 D1); the web's body is the CLI's; a rate with a concurrency or
a tokens/s target is one line, exit 2; a rate no candidate carries is answered with no option, exit 1."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli

from llmsizer.estimate.engines import API_SERVER_SECONDS
from llmsizer.estimate.fit import fit
from llmsizer.recommend import recommend_inference

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def client():
    """The API with a longer time limit than the server's 30 s default: these tests compare answers, not the limit
    (test_web_api_endpoints.py tests the 503); a rate search past capacity takes ~15 s of CPU, near 30 s of wall
    time on a loaded 2-core machine."""
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(time_limit=300.0), raise_server_exceptions=False) as c:
        yield c

H = API_SERVER_SECONDS["vllm"]
ARGV = ("recommend qwen3-0.6b --context 640 --output-tokens 128 --provider aws --engine vllm "
        "--request-rate 100").split()
TARGET = "aws-g6.xlarge"  # one L4


def test_copies_by_hand() -> None:
    """A copy carries rate / k below both its API server's capacity 1 / H (eq. Q10a) and what the sequences its
    engine admits serve: an L4 runs at most max_num_seqs 256 at once, which serve the closed model's requests/s at
    256 (eq. Q7, fit at concurrency 256, an independent path), 22.4/s; 100/s needs the fewest k with 100 / k below
    both: 5 (3 copies at 33.3/s each would keep about 400 in flight, more than the 256 admitted; review7 defect 2)."""
    rec = recommend_inference("qwen3-0.6b", context=640, output_tokens=128, engine="vllm", request_rate=100)
    (opt,) = [o for o in rec.options if o.target == TARGET]
    kw = dict(engine="vllm", weights=opt.weights_format, context=640, output_tokens=128)
    full = fit("qwen3-0.6b", TARGET, concurrency=4096, **kw)
    assert full.estimate is not None
    admitted = int(full.estimate.details["running_sequences"])
    closed = fit("qwen3-0.6b", TARGET, concurrency=admitted, **kw)
    assert closed.speed is not None and closed.speed.load is not None
    served = float(closed.speed.load["requests_per_second"])
    copies = next(k for k in range(1, 64) if 100 / k < min(1 / H, served))
    assert copies == 5
    one = fit("qwen3-0.6b", TARGET, request_rate=100 / copies, **kw)
    assert one.speed is not None and one.speed.load is not None and one.speed.load["in_flight"] <= admitted
    assert (opt.count, opt.instances, opt.replicas) == (copies, copies, copies)
    # the option is fit's answer for those copies at the whole rate, its busiest replica timed (probe23 D1)
    whole = fit("qwen3-0.6b", TARGET, copies, request_rate=100, tensor_parallel=1, **kw)
    assert whole.speed is not None and opt.ttft_seconds == whole.speed.ttft_seconds
    assert opt.running_sequences == whole.details["running_sequences"]
    assert opt.tokens_per_second == pytest.approx(100 * 128, rel=1e-9)  # every request's output, all copies
    assert opt.price_per_hour == pytest.approx(copies * next(
        o for o in recommend_inference("qwen3-0.6b", context=640, output_tokens=128, engine="vllm",
                                       request_rate=1).options if o.target == TARGET).price_per_hour)


def test_the_web_answer_is_the_clis(client) -> None:
    cli = run_cli(*ARGV, "--json")
    assert cli.returncode == 0, cli.stderr
    body = {"model": "qwen3-0.6b", "context": "640", "output_tokens": "128", "provider": ["aws"], "engine": "vllm",
            "request_rate": "100"}
    web = client.post("/api/v1/recommend", json=body)
    assert web.status_code == 200, web.text
    assert json.loads(web.text) == json.loads(cli.stdout)


@pytest.mark.parametrize("extra, words", [
    (("--concurrency", "4"), "give --request-rate or --concurrency, not both"),
    (("--tokens-per-second", "4000"), "give --request-rate or --tokens-per-second, not both"),
])
def test_refusals(extra, words) -> None:
    line = cli_error_line(*ARGV, *extra)
    assert words in line
    fit_line = cli_error_line("fit", "qwen3-0.6b", "--device", "h100-sxm", "--request-rate", "3", "--concurrency",
                              "4") if "concurrency" in extra[0] else None
    assert fit_line is None or fit_line == line


def test_a_rate_no_candidate_carries_is_answered_with_no_option_at_once(client) -> None:
    """Past what MAX_REPLICAS copies of the largest candidate could carry (recommend.py ``rate_ceiling``), the CLI and
    the web answer with no option and the reason before sizing any candidate (probe22 C8: 1e9 requests/s took 24 s):
    a constraint that fails, exit 1 as fit's answer at that rate (probe23 C3), the web's 200 with the exit code in
    its header, the CLI's JSON body."""
    argv = ("recommend", "llama-3.1-8b", "--request-rate", "1000000000")
    fit_cli = run_cli("fit", "llama-3.1-8b", "--device", "h100-sxm", "--request-rate", "1000000000")
    assert fit_cli.returncode == 1, fit_cli.stderr
    text = run_cli(*argv)
    assert text.returncode == 1 and not text.stderr.strip(), text.stderr
    assert "no option: request_rate: 1e+09 requests/s is past what any candidate carries" in text.stdout
    cli = run_cli(*argv, "--json")
    assert cli.returncode == 1, cli.stderr
    data = json.loads(cli.stdout)
    assert data["chosen"] is None and data["options"] == [] == data["rejected"]
    assert "past what any candidate carries" in data["refusal"]
    web = client.post("/api/v1/recommend", json={"model": "llama-3.1-8b", "request_rate": "1000000000"})
    assert web.status_code == 200 and web.headers["X-Llmsizer-Exit-Code"] == "1", web.text
    assert json.loads(web.text) == data


@pytest.mark.parametrize("rate", ["5", "1000000000"])
def test_a_rate_on_an_engine_that_serves_none_is_one_line_at_once(client, rate) -> None:
    """An engine that does not batch continuously serves no request rate on any candidate: recommend refuses it once,
    exit 2, in fit's words (review30 D3: at 1e9/s it blamed the API server's serial time, a continuous batcher's; at
    5/s it rejected 178 candidates with exit 1), and the web with a 4xx."""
    fit_line = cli_error_line("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "transformers",
                              "--request-rate", rate)
    line = cli_error_line("recommend", "llama-3.1-8b", "--engine", "transformers", "--request-rate", rate)
    said = "--request-rate needs an engine that batches continuously (vllm, sglang, llamacpp)"
    assert fit_line.startswith(said) and line.startswith(said) and "transformers" in line
    web = client.post("/api/v1/recommend", json={"model": "llama-3.1-8b", "engine": "transformers",
                                                 "request_rate": rate})
    assert 400 <= web.status_code < 500 and "batches continuously" in web.text

"""recommend at a request rate (open arrivals, formulas/serving_queue.py eq. Q10): each option is the fewest copies
of a candidate whose each copy carries an equal share of the rate below its capacity and within the limits, each copy
answered by fit's rate path. Checked by hand where the capacity is the API server's alone (qwen3-0.6b's 512-token
prefill is far shorter than its H): 1 / H = 44.5/s a copy, so 100/s takes 3 copies (2 would carry 50/s each); the
option's TTFT is `fit --request-rate 33.3`'s on that copy; the web's body is the CLI's; a rate with a concurrency or
a tokens/s target is one line, exit 2."""

from __future__ import annotations

import json
import math

import pytest
from web_api_helpers import cli_error_line, run_cli

from llmsizer.estimate.engines import API_SERVER_SECONDS
from llmsizer.estimate.fit import fit
from llmsizer.recommend import recommend_inference

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

H = API_SERVER_SECONDS["vllm"]
ARGV = ("recommend qwen3-0.6b --context 640 --output-tokens 128 --provider aws --engine vllm "
        "--request-rate 100").split()
TARGET = "aws-g6.xlarge"  # one L4


def test_copies_by_hand() -> None:
    rec = recommend_inference("qwen3-0.6b", context=640, output_tokens=128, engine="vllm", request_rate=100)
    (opt,) = [o for o in rec.options if o.target == TARGET]
    one = fit("qwen3-0.6b", TARGET, engine="vllm", weights=opt.weights_format, context=640, output_tokens=128,
              request_rate=100 / 3)
    assert one.speed is not None and one.speed.ttft_idle_seconds < H  # the server, not the prefill, bounds a copy
    copies = math.floor(100 * H) + 1  # the fewest k with 100 / k < 1 / H
    assert copies == 3
    assert (opt.count, opt.instances, opt.replicas) == (copies, copies, copies)
    assert opt.ttft_seconds == one.speed.ttft_seconds
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

"""ratedp: the web's fit at a request rate answers as `fit --request-rate` does where fit takes a data-parallel
(expert-parallel) layout: MiniMax-M2.7 on 8 x H100, vLLM, 10 requests/s (eq. TP5 refuses TP 8; at this load the
expert-parallel layout is the fastest: at 1 request/s TP 4 x 2 replicas is, sglep2's exchange latency counted), the body the CLI's
JSON."""

from __future__ import annotations

import json

from cli_capture import run_json

BODY = {"model": "minimax-m2.7", "device": "h100-sxm", "count": 8, "engine": "vllm", "request_rate": 10}
ARGV = ("fit", "minimax-m2.7", "--device", "h100-sxm", "--count", "8", "--engine", "vllm", "--request-rate", "10",
        "--json")


def test_web_fit_at_a_rate_takes_the_cli_data_parallel_layout(client) -> None:
    r = client.post("/api/v1/fit", json=BODY)
    assert r.status_code == 200
    d = r.json()
    assert d["fits"] and d["data_parallel"] > 1 and d["expert_parallel"]
    code, cli = run_json(*ARGV)
    assert code == 0 and json.loads(json.dumps(cli)) == d

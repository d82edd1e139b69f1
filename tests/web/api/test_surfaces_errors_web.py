"""The web's side of task `surfaces` (tests/cli/test_surfaces_errors.py): the web's detail is the CLI's line (task
webwords: one rule for every error, API.md "Errors"; surfaces had the web write its keys for some errors only), its
``field`` the body's key, and a request's refusal has one shape whether its engine was named or not."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, web_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def test_a_money_reader_says_the_clis_line(client) -> None:
    """The total budget given a rate: the CLI's reader points at --max-cost-per-hour, and so does the web's detail
    (the field at fault is ``field``)."""
    line = cli_error_line("recommend", "qwen2.5-0.5b", "--max-cost", "$5/h")
    assert "(the hourly limit is --max-cost-per-hour)" in line
    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-0.5b", "max_cost": "$5/h"})
    assert r.status_code == 400 and r.json()["field"] == "max_cost"
    assert r.json()["detail"] == web_line(line, r.json()["field"])


@pytest.mark.parametrize("path, extra", [("/api/v1/infer", ()), ("/api/v1/recommend", ())])
def test_a_setting_two_engines_read_says_the_clis_line(client, path, extra) -> None:
    command = path.rsplit("/", 1)[-1]
    line = cli_error_line(command, "llama-3.1-8b", "--max-num-seqs", "64", *extra)
    r = client.post(path, json={"model": "llama-3.1-8b", "max_num_seqs": 64})
    assert r.status_code == 400 and r.json()["field"] == "max_num_seqs"
    assert r.json()["detail"] == web_line(line, r.json()["field"]) and "give --engine vllm or --engine sglang" in line


def _kv_request(engine: str) -> str:
    return f"""jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
{engine}    kv_cache_dtype: q4_0
    resources: {{device: h100}}
    traffic:
      concurrency: 4
      context: 2k
"""


def test_a_refused_kv_dtype_has_one_shape_named_or_implied(client) -> None:
    """vLLM refuses q4_0: named (checked before planning, errors[]) or the H100's default (found while planning:
    before, a detail without errors[])."""
    shapes = []
    for engine in ("    engine: vllm\n", ""):
        r = client.post("/api/v1/plan", json={"request": _kv_request(engine), "filename": "kv.yaml"})
        assert r.status_code == 400, r.text
        p = r.json()
        assert p["errors"] == [p["detail"]] and "engine vllm has no 'q4_0' KV cache" in p["detail"], p
        shapes.append(sorted(p))
    assert shapes[0] == shapes[1]

"""One reason, a where-prefix per surface (probe24 C4): the CLI says `argument --memory: '24' has no unit ...`
(the flag typed), the web's 400 says `field 'memory': '24' has no unit ...` (the field the request gave), the reason
after it word for word (web/problems.py web_detail). A message with no where-prefix (an unknown model) is the CLI's
line on both. The CLI's lines come from a separate `llmsizer` process."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

CASES = [  # (body field, value, the flag the CLI types)
    ("memory", "24", "--memory"),
    ("context", "abc", "--context"),
    ("concurrency", 0, "--concurrency"),
    ("engine", "vlm", "--engine"),
    ("max_running_requests", 0, "--max-running-requests"),  # argparse names both spellings on the CLI
]


@pytest.mark.parametrize(("field", "value", "flag"), CASES)
def test_the_cli_names_the_flag_the_web_names_the_field(client, field: str, value: object, flag: str) -> None:
    line = cli_error_line("infer", "llama-3.1-8b", flag, str(value))
    assert line.startswith("argument " + flag) or line.startswith("argument --max-num-seqs/" + flag), line
    reason = line.split(": ", 1)[1]
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", field: value})
    assert r.status_code == 400
    assert r.json()["field"] == field
    assert r.json()["detail"] == f"field '{field}': {reason}"


def test_a_query_parameter_is_named_as_the_request_gave_it(client) -> None:
    line = cli_error_line("models", "qwen3", "--fits-on", "rtx-4090", "--context", "abc")
    r = client.get("/api/v1/models", params={"query": "qwen3", "fits_on": "rtx-4090", "context": "abc"})
    assert r.status_code == 400 and r.json()["field"] == "context"
    assert r.json()["detail"] == "field 'context': " + line.removeprefix("argument --context: ")


def test_a_line_without_a_where_prefix_is_the_clis(client) -> None:
    line = cli_error_line("infer", "no-such-model-zz")
    r = client.post("/api/v1/infer", json={"model": "no-such-model-zz"})
    assert r.status_code == 400 and r.json()["field"] == "model" and r.json()["detail"] == line
    assert not line.startswith("argument ")

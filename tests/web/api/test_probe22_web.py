"""probe22 C5 and D2 on the web: a missing query parameter is said in the words of the other 400s ("field 'fits_on':
..."), not the validator's "fits_on: Field required"; `/fit` with auto on a GPU of no catalog memory takes the memory
given, as `fit --auto --memory` does."""

from __future__ import annotations

import json

import pytest

from cli_capture import run

pytest.importorskip("fastapi")


@pytest.mark.parametrize("url, field", [("/api/v1/models/fits-on", "fits_on"),
                                        ("/api/v1/capacity/export/x", "format")])
def test_a_missing_query_parameter_is_one_line(client, url, field) -> None:
    r = client.get(url)
    body = r.json()
    assert r.status_code == 400 and body["field"] == field, body
    assert body["detail"] == f"field '{field}': required (give ?{field}=... in the URL)", body


def test_auto_fit_takes_the_memory_given_on_the_web(client) -> None:
    r = client.post("/api/v1/fit", json={"model": "qwen3-30b-a3b", "device": "gpu", "memory": "8GiB",
                                         "engine": "llamacpp", "auto": True})
    code, out, err = run("fit", "qwen3-30b-a3b", "--device", "gpu", "--memory", "8GiB", "--engine", "llamacpp",
                         "--auto", "--json")
    assert code == 0, err
    assert r.status_code == 200 and r.json() == json.loads(out)

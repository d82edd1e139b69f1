"""A web request that gives one field twice is refused with a 400 naming the field (issue #12/#16): two names of one
option (``batch`` and ``micro_batch``, the CLI's --batch/--micro-batch), a JSON key twice, a query parameter
repeated. Before, each was resolved silently by taking the last one. A repeatable option (``hardware_file``, which the
CLI takes twice) still gathers its repeats. (The CLI itself keeps argparse's last-one-wins: it has no message for
the equivalent command line to copy.)"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")


def _problem(r) -> dict:  # type: ignore[no-untyped-def]
    assert r.status_code == 400, (r.status_code, r.text[:300])
    p = r.json()
    assert "\n" not in p["detail"], p
    return p


def test_two_names_of_one_option(client) -> None:  # type: ignore[no-untyped-def]
    body = {"model": "qwen2.5-0.5b", "batch": 2, "micro_batch": 3}
    p = _problem(client.post("/api/v1/train", json=body))
    assert p["field"] == "micro_batch"
    assert p["detail"] == ("field 'micro_batch': the same option as field 'batch' (--batch/--micro-batch); give one "
                           "of them"), p
    # one name alone answers, as the CLI does
    for key in ("batch", "micro_batch"):
        r = client.post("/api/v1/train", json={"model": "qwen2.5-0.5b", key: 3})
        assert r.status_code == 200, r.text[:300]
        assert [a["value"] for a in r.json()["assumptions"] if a["name"] == "micro_batch"] == [3]


def test_a_json_key_twice(client) -> None:  # type: ignore[no-untyped-def]
    raw = b'{"model": "qwen2.5-0.5b", "context": 1024, "context": 8192}'
    p = _problem(client.post("/api/v1/infer", content=raw, headers={"content-type": "application/json"}))
    assert p["field"] == "context" and p["detail"] == "field 'context' given twice; give it once", p


def test_a_query_parameter_twice(client) -> None:  # type: ignore[no-untyped-def]
    p = _problem(client.get("/api/v1/models?fits_on=h100-sxm&context=1024&context=8192"))
    assert p["field"] == "context" and p["detail"] == "field 'context' given twice; give it once", p
    p = _problem(client.get("/api/v1/hardware/h100-sxm?json=1&json=1"))
    assert p["field"] == "json", p


def test_a_repeatable_option_gathers_its_repeats() -> None:
    """``fit --hardware-file A --hardware-file B`` is a repeatable option (argparse append): repeated in a query it is
    one list (the API then refuses that field as a server path, as it refuses it once)."""
    from llmsizer.web.bridge import query_fields

    fields = query_fields(("fit",), [("hardware_file", "a.json"), ("hardware_file", "b.json"), ("count", "2")])
    assert fields == {"hardware_file": ["a.json", "b.json"], "count": "2"}

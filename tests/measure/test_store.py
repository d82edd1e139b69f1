"""The results store (SQLite) and the JSON-lines files round-trip records; settings round-trip and validate."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.measure import MeasureSettings, ResultStore, append_jsonl, read_jsonl
from llmsizer.measure.store import SCHEMA_VERSION, default_store_path

RECORD = {"schema": 1, "date": "2026-01-01T00:00:00Z", "kind": "inference", "status": "ok",
          "model": {"name": "org/tiny", "source": "x", "config": {"model_type": "llama"}},
          "settings": {"kind": "inference", "context": 8}, "device": {"type": "cpu", "name": "EPYC"},
          "versions": {"python": "3.11"}, "measured": {"peak_tensor_bytes": 123}, "comparison": []}


def test_sqlite_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "sub" / "results.sqlite")
    assert store.records() == []
    first = store.append(RECORD)
    second = store.append({**RECORD, "status": "oom"})
    assert (first, second) == (1, 2)
    recs = store.records()
    assert [r["store_id"] for r in recs] == [1, 2]
    assert {k: v for k, v in recs[0].items() if k != "store_id"} == RECORD
    assert [r["status"] for r in store.records(status="oom")] == ["oom"]
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("SELECT model, device_name FROM results WHERE id = 1").fetchone() == ("org/tiny", "EPYC")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="newer"):
        ResultStore(path).append(RECORD)


def test_default_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "llmsizer" / "results.sqlite"


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    append_jsonl(path, RECORD)
    append_jsonl(path, RECORD)
    recs = list(read_jsonl([path]))
    assert [r["source_line"] for r in recs] == [1, 2]
    assert {k: v for k, v in recs[0].items() if not k.startswith("source_")} == RECORD


def test_settings_round_trip_and_defaults() -> None:
    s = MeasureSettings("training", "qwen2.5-0.5b", method="lora", targets=("q", "v_proj"), seq_len=128)
    assert s.targets == ("q", "v_proj")
    again = MeasureSettings.from_dict(s.to_dict())
    assert again == MeasureSettings.from_dict(again.to_dict())
    assert again.targets == ("q_proj", "v_proj")
    r, defaults = again.resolved("cuda")
    assert (r.precision, r.base_dtype, r.optimizer_impl, r.steps) == ("bf16-mixed", "bf16", "foreach", 2)
    assert {d[0] for d in defaults} == {"device", "precision", "base_dtype", "optimizer_impl", "steps"}
    r, _ = MeasureSettings("inference", "x").resolved("cpu")
    assert (r.dtype, r.steps) == ("fp32", 1)


@pytest.mark.parametrize("kw, match", [
    (dict(kind="inference", context=8, output_tokens=8), "output_tokens"),
    (dict(kind="training", optimizer="rmsprop"), "unknown optimizer"),
    (dict(kind="training", precision="deepspeed-bf16"), "choose one of"),
    (dict(kind="training", method="qlora", device="cpu"), "needs CUDA"),
    (dict(kind="inference", weights="nf4", device="cpu"), "need CUDA"),
    (dict(kind="training", method="full", base_dtype="bf16"), "base_dtype"),
])
def test_settings_refuse_what_cannot_run(kw: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        MeasureSettings(model="x", **kw)


def test_unknown_settings_key() -> None:
    with pytest.raises(InputError, match="unknown measure settings"):
        MeasureSettings.from_dict({"kind": "inference", "model": "x", "contxt": 4})

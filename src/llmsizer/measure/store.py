"""The local results store: every measurement record, in SQLite (stdlib ``sqlite3``), plus JSON-lines files.

Default path ``$XDG_CACHE_HOME/llmsizer/results.sqlite`` (``~/.cache/llmsizer/results.sqlite``); the schema is
created on first use and versioned with ``PRAGMA user_version``. A row keeps the searchable fields in columns
and the whole record as JSON, so records written by a newer llmsizer keep every field.

JSON-lines files (one record per line) are the committed form: ``validation/measured/*.jsonl``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    date TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    device_type TEXT,
    device_name TEXT,
    settings_json TEXT NOT NULL,
    record_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_model ON results (model);
"""


def default_store_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmsizer" / "results.sqlite"


class ResultStore:
    """Append and read measurement records in one SQLite file."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            con.close()
            raise InputError(f"results store {self.path} has schema {version}, newer than this llmsizer's "
                             f"{SCHEMA_VERSION}; upgrade llmsizer or use --store with another file")
        if version < SCHEMA_VERSION:
            con.executescript(_SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.commit()
        return con

    def append(self, record: dict[str, Any]) -> int:
        """Store ``record``; returns its row id."""
        con = self._connect()
        try:
            dev = record.get("device") or {}
            cur = con.execute(
                "INSERT INTO results (date, kind, status, model, device_type, device_name, settings_json, "
                "record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.get("date", ""), record.get("kind", ""), record.get("status", ""),
                 (record.get("model") or {}).get("name", ""), dev.get("type"), dev.get("name"),
                 json.dumps(record.get("settings", {}), sort_keys=True), json.dumps(record, default=str)))
            con.commit()
            return int(cur.lastrowid or 0)
        finally:
            con.close()

    def records(self, *, status: str | None = None) -> list[dict[str, Any]]:
        """Every record, oldest first (only those with ``status`` when given)."""
        if not self.path.exists():
            return []
        con = self._connect()
        try:
            q = "SELECT id, record_json FROM results" + (" WHERE status = ?" if status else "") + " ORDER BY id"
            rows = con.execute(q, (status,) if status else ()).fetchall()
        finally:
            con.close()
        out = []
        for rid, text in rows:
            rec = json.loads(text)
            rec["store_id"] = rid
            out.append(rec)
        return out


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str, sort_keys=True) + "\n")


def read_jsonl(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Records of JSON-lines files; each gets ``source_file`` and ``source_line``. Blank lines are skipped."""
    for path in paths:
        p = Path(path)
        with p.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise InputError(f"{p}:{n}: not a JSON record ({e})") from None
                    rec["source_file"], rec["source_line"] = str(p), n
                    yield rec

"""provider9 #3-#5: `capacity show` renders one record per reservation from one read of the store. Each row carries
the maintenance its job agreed to, as stored with the booking (schema 5's maintenance_agreed: the request's
`service.maintenance_windows`), and the plan's numbers it was booked for (schema 4), in the text, --json and --html
alike; the store is opened once, warnings included. On a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from .test_cli_capacity import run  # noqa: E402
from .test_service_agreed_windows import _book, _db, _sql  # noqa: E402


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_show_rows_carry_the_agreement_and_the_plan_in_every_form(kind, tmp_path, capsys, request, monkeypatch):
    from llmsizer.cli import capacity_cmd
    db = _db(kind, tmp_path, request)
    b, agreed, later = _book(kind, tmp_path, db, capsys)
    words = "agreed maintenance windows: Sundays 02:00-04:00 UTC"  # the request file's own text
    opened = []
    real = capacity_cmd._store
    monkeypatch.setattr(capacity_cmd, "_store", lambda *a, **k: opened.append(1) or real(*a, **k))
    # the later inventory: a window the booking did not agree to, so show warns (before: a second read for it)
    html = tmp_path / "show.html"
    assert run("capacity", "show", "--inventory", str(later), "--db", db, "--html", str(html)) == 0
    assert len(opened) == 1, opened
    out = capsys.readouterr()
    assert "added-later" in out.err  # the warning, from the same read
    (line,) = [x for x in out.out.splitlines() if b["id"] in x]
    assert line.endswith(f"({words})"), line
    figures = line.split("  ")[-2]  # the plan's numbers as the text words them: '1 x 2.3 GiB/device, 3 days'
    assert figures.startswith(f"{b['devices']} x ") and "/device" in figures, line
    # --html: the same figures and the same agreement, from the same record
    page = unescape(html.read_text())
    (row,) = re.findall(rf"<tr class=\"state-confirmed\">.*?{b['id']}.*?</tr>", page)
    assert f'<td class="plan">{figures}</td>' in row and f"<td class=\"how\">{words}</td>" in row, row
    # --json: the agreement as data and in words, the plan's numbers as booked
    opened.clear()
    assert run("capacity", "show", "--inventory", str(later), "--db", db, "--json") == 0
    assert len(opened) == 1
    (r,) = json.loads(capsys.readouterr().out)["reservations"]
    assert r["agreement"] == {"accepts": True, "windows": ["Sundays 02:00-04:00 UTC"]}
    assert (r["agreement_text"], r["figures_text"]) == (words, figures)
    assert {k: r[k] for k in ("memory_per_device", "devices", "seconds")} == {
        k: b[k] for k in ("memory_per_device", "devices", "seconds")}
    # a store from before schema 5: the agreement unknown, said so
    _sql(kind, db, "ALTER TABLE reservations DROP COLUMN maintenance_agreed",
         "UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert run("capacity", "show", "--inventory", str(agreed), "--db", db, "--json") == 0
    (r,) = json.loads(capsys.readouterr().out)["reservations"]
    assert r["agreement"] is None and "unknown" in r["agreement_text"]

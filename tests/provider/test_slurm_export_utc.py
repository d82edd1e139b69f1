"""probe21 D4: the Slurm hand-over's StartTime is the booking's UTC instant however the login node's clock is set.

Bookings are UTC. scontrol's documented StartTime forms carry no zone (scontrol(1), StartTime=<time_spec>) and
scontrol reads them on the client: src/scontrol/create_res.c:212 ``parse_time(val, 0)`` -> src/common/parse_time.c
-> ``slurm_mktime`` (src/common/slurm_time.c:44-49: ``tm_isdst = -1; mktime(tp)``) @ SchedMD/slurm 284c3b95, i.e.
C ``mktime`` in the process's time zone (its ``TZ``). The independent truth below is that: the exported line is
split as a POSIX shell splits it (``shlex``, its ``NAME=value`` prefix put in the command's environment), and its
StartTime is turned into an instant by the C library's own ``mktime`` (Python's ``time.mktime``, isdst -1) under
that environment's TZ, from a login node in Berlin, New York and UTC, in winter and summer time. Before, the line
had no TZ and Berlin read 2027-01-10T00:00:00 as 2027-01-09 23:00 UTC."""

from __future__ import annotations

import calendar
import datetime as dt
import math
import os
import re
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer.provider.scheduler_export import Handover, slurm

ZONES = ("Europe/Berlin", "America/New_York", "UTC", "CET-1CEST,M3.5.0,M10.5.0/3")


@contextmanager
def _tz(zone: str | None) -> Iterator[None]:
    before = os.environ.get("TZ")
    try:
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        time.tzset()
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def scontrol_window(text: str, login_tz: str) -> tuple[float, float]:
    """(start, end) as Unix time of the `scontrol create reservation` line of ``text``, as scontrol run by a shell
    on a login node whose TZ is ``login_tz`` reads it: the command's own ``NAME=value`` prefixes override the
    environment; StartTime (the documented YYYY-MM-DDTHH:MM:SS form) through mktime in that TZ; Duration minutes."""
    (line,) = [ln for ln in text.splitlines() if "scontrol create reservation" in ln]
    words = shlex.split(line, comments=True)
    env = {"TZ": login_tz}
    while "=" in words[0] and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[0].split("=")[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[:3] == ["scontrol", "create", "reservation"]
    tags = dict(w.split("=", 1) for w in words[3:])
    y, mo, d, h, mi, s = map(int, re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)",
                                               tags["StartTime"]).groups())  # type: ignore[union-attr]
    with _tz(env["TZ"]):
        start = time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    return start, start + 60 * int(tags["Duration"])


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("start", [dt.datetime(2027, 1, 10), dt.datetime(2027, 7, 10, 6, 30)])
def test_scontrol_reads_the_booked_instant(zone: str, start: dt.datetime) -> None:
    end = start + dt.timedelta(hours=36, minutes=30, seconds=39)
    h = Handover("870d69bb513b", "moe", start, end, ("mi-node-01", "mi-node-02"), 8, "mi300x", user="moe")
    got_start, got_end = scontrol_window(slurm(h), zone)
    assert got_start == calendar.timegm(start.timetuple())  # the booking's UTC instant, to the second
    assert got_end == calendar.timegm(start.timetuple()) + 60 * math.ceil((end - start).total_seconds() / 60)
    assert got_end >= calendar.timegm(end.timetuple())  # the reservation covers the whole booked run


def test_the_line_without_tz_would_be_read_an_hour_early_in_berlin() -> None:
    """The premise, with the same reader: the bare line of before, read in Berlin in January, starts at 23:00 UTC."""
    bare = "scontrol create reservation ReservationName=x StartTime=2027-01-10T00:00:00 Duration=60 Nodes=n1"
    got, _ = scontrol_window(bare, "Europe/Berlin")
    assert calendar.timegm(dt.datetime(2027, 1, 10).timetuple()) - got == 3600


def booked(tmp_path: Path) -> tuple[Path, str, str]:
    """A one-node inventory, a request of one training job on it, booked: (inventory, store, reservation id)."""
    pytest.importorskip("sqlalchemy")
    inv = tmp_path / "inv.yaml"
    inv.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                   "nodes: [{id: n1, site: s1, device: h100-sxm, devices: 8, cpus: 224, ram: 2 TiB, pools: [training]}]\n")
    req = tmp_path / "req.yaml"
    req.write_text("version: 1\ntitle: t\njobs:\n  - name: ft\n    kind: training\n    model: {name: qwen2.5-0.5b}\n"
                   "    method: full\n    purpose: style\n    baseline_tried: true\n    start: 2030-01-10\n"
                   "    dataset: {tokens: 10M tokens, sensitivity: internal}\n"
                   "    resources: {device: h100-sxm, count: 1}\n")
    db = str(tmp_path / "b.db")
    code, out, err = run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--now", "2030-01-01")
    assert code == 0, err
    return inv, db, out.split("booked ")[1].split(":")[0]


def test_cli_and_web_export_the_same_utc_line(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    inv, db, rid = booked(tmp_path)
    code, text, _ = run("capacity", "export", rid, "--format", "slurm", "--db", db, "--user", "ft")
    assert code == 0
    with TestClient(create_app(provider=ProviderConfig(inventory=str(inv), db=db))) as c:
        web = c.get(f"/api/v1/capacity/export/{rid}", params={"format": "slurm", "user": "ft"})
    assert web.status_code == 200 and web.text == text
    start, _ = scontrol_window(text, "Europe/Berlin")
    assert start == calendar.timegm(dt.datetime(2030, 1, 10).timetuple())

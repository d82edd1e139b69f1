"""probe33 D4: every --json answer opens with the same envelope, ``{"schema_version", "kind"}`` (result.envelope),
``kind`` the answer's type; a device's own kind is ``device_kind`` (``kind`` kept in ``hardware list``'s entries one
release, as docs/hardware.md says). The answers that were bare lists (``models`` without --fits-on, ``formats``,
``capacity check``/``book`` and the lifecycle steps) carry it too, the list under a named key. Truth: the command
lines themselves, read through the real entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.cli_run import answer
from llmsizer.result import SCHEMA_VERSION


@pytest.mark.parametrize(("argv", "kind"), [
    (["models", "llama-3.1-8b", "--fits-on", "h100"], "models-fits-on"),
    (["inspect", "llama-3.1-8b"], "inspect"),
    (["hardware", "list", "h100"], "hardware-list"),
    (["hardware", "show", "h100"], "hardware"),
    (["infer", "llama-3.1-8b", "--device", "h100"], "inference"),
    (["fit", "llama-3.1-8b", "--device", "h100"], "fit-inference"),
    (["models", "llama-3.1-8b"], "models"),
    (["formats"], "formats"),
])
def test_every_answer_has_the_envelope(argv: list[str], kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer([*argv, ], capsys)
    assert code == 0 and list(data)[:2] == ["schema_version", "kind"]
    assert (data["schema_version"], data["kind"]) == (SCHEMA_VERSION, kind)


def test_a_device_kind_is_device_kind(capsys: pytest.CaptureFixture[str]) -> None:
    _, show = answer(["hardware", "show", "h100", ], capsys)
    assert show["device_kind"] == "gpu" and show["kind"] == "hardware"
    _, listed = answer(["hardware", "list", "epyc", ], capsys)
    assert listed["devices"] and all(d["device_kind"] == d["kind"] == "cpu" for d in listed["devices"])


@pytest.mark.parametrize(("argv", "kind", "key"), [
    (["models", "llama"], "models", "models"),
    (["formats"], "formats", "formats"),
])
def test_a_list_is_under_its_key(argv: list[str], kind: str, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the catalog itself is the truth for the list: every entry the query names, none other
    from llmsizer.catalog import models
    from llmsizer.formulas.weight_formats import format_names
    _, data = answer(argv, capsys)
    assert list(data) == ["schema_version", "kind", key] and data["kind"] == kind
    want = [e.id for e in models.search("llama")] if key == "models" else format_names()
    got = [m["id"] for m in data[key]] if key == "models" else data[key]
    assert got == want and got


ROOT = Path(__file__).resolve().parents[2]


def test_capacity_answers_have_the_envelope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check, book and a lifecycle step on the example inventory and request (a real SQLite store): each answer is
    ``{schema_version, kind, <its list>}``, the list's entries those of the store (the booking's id is release's)."""
    pytest.importorskip("sqlalchemy")
    common = ["--inventory", str(ROOT / "examples" / "provider" / "inventory.yaml"), "--db", str(tmp_path / "b.db"),
              "--now", "2025-09-01"]
    pre = str(ROOT / "examples" / "pretraining-multinode.yaml")
    _, check = answer(["capacity", "check", pre, *common], capsys)
    _, book = answer(["capacity", "book", pre, *common], capsys)
    (booked,) = book["reservations"]
    _, release = answer(["capacity", "release", booked["id"], "--db", str(tmp_path / "b.db")], capsys)
    for data, kind, key in ((check, "capacity-check", "jobs"), (book, "capacity-book", "reservations"),
                            (release, "capacity-release", "transitions")):
        assert list(data) == ["schema_version", "kind", key], data
        assert (data["schema_version"], data["kind"]) == (SCHEMA_VERSION, kind)
    (job,) = check["jobs"]
    assert job["job"] == booked["job"] and job["fits"] and not job["existing"]
    assert release["transitions"] == [{"id": booked["id"], "before": "confirmed", "after": "released"}]

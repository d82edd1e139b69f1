"""probe13 D5: every file a command writes follows one rule (cli/common.py refuse_overwrite): an existing file is
refused without --force, exit 2, one line, left as it was; with --force it is replaced (atomically). Before, `plan -o`,
`request schema -o`, `capacity show --svg/--html` and `validate --markdown` replaced an unrelated file silently while
`request new`, `hardware detect` and `capacity import` refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "cpu-internal-tool.yaml")
INVENTORY = str(ROOT / "examples" / "provider" / "inventory.yaml")

KEEP = "KEEP: a file the user wrote\n"

# (argv before the output path, the option naming it, argv after): each command that writes a file
WRITERS = {
    "plan -o": (["plan", EXAMPLE, "--no-alternatives", "-q", "-o"], "r.md"),
    "request schema -o": (["request", "schema", "-o"], "s.json"),
    "request new -o": (["request", "new", "-o"], "req.yaml"),
    "capacity show --svg": (["capacity", "show", "--inventory", INVENTORY, "--db", "{db}", "--svg"], "t.svg"),
    "capacity show --html": (["capacity", "show", "--inventory", INVENTORY, "--db", "{db}", "--html"], "t.html"),
    "validate --markdown": (["validate", "--no-store", "--markdown"], "acc.md"),
}


def _argv(name: str, tmp_path: Path) -> tuple[list[str], Path]:
    head, file = WRITERS[name]
    out = tmp_path / file
    return [w.replace("{db}", str(tmp_path / "none.db")) for w in head] + [str(out)], out


@pytest.mark.parametrize("name", list(WRITERS))
def test_an_existing_file_is_refused_without_force(name, tmp_path, capsys) -> None:
    argv, out = _argv(name, tmp_path)
    out.write_text(KEEP)
    code, _, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"{out} exists" in lines[0] and "--force" in lines[0], (code, err)
    assert out.read_text() == KEEP
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # nothing else written (no temporary file)


@pytest.mark.parametrize("name", [n for n in WRITERS if not n.startswith("validate")])  # validate runs every case
def test_force_replaces_it(name, tmp_path, capsys) -> None:
    argv, out = _argv(name, tmp_path)
    out.write_text(KEEP)
    code, _, err = run([*argv, "--force"], capsys)
    assert code in (0, 1), err
    assert out.read_text() != KEEP and out.stat().st_size > 100


@pytest.mark.parametrize("name", [n for n in WRITERS if not n.startswith("validate")])
def test_a_dash_is_refused_not_written_as_a_file_named_dash(name, tmp_path, capsys, monkeypatch) -> None:
    """review13: `-o -` wrote a file literally named '-' in the working folder (the commands read '-' as standard
    input, so a user takes it for standard output): refused in one line, nothing written."""
    monkeypatch.chdir(tmp_path)
    argv, _ = _argv(name, tmp_path)
    code, _, err = run([*argv[:-1], "-"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'-'" in err, err
    assert "standard output" in err or name == "plan -o", err  # plan: no report format from '-' (its own refusal)
    assert not (tmp_path / "-").exists()


def test_svg_and_html_on_one_path_are_refused_before_either_is_written(tmp_path, capsys) -> None:
    """review13: `capacity show --svg F --html F` wrote the SVG, then refused the HTML (or with --force replaced the
    SVG by it): the same file named twice is refused up front."""
    out = tmp_path / "t.out"
    code, _, err = run(["capacity", "show", "--inventory", INVENTORY, "--db", str(tmp_path / "none.db"), "--svg",
                        str(out), "--html", str(tmp_path / "." / "t.out"), "--force"], capsys)
    assert code == 2 and "name the same file" in err and not out.exists(), err

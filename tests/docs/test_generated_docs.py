"""docs/cli.md and the README's example outputs are program output: regenerated here and compared, so neither can
go stale (run ``python scripts/gen_docs.py`` after a change that alters them)."""

from __future__ import annotations

from pathlib import Path

from gen_docs_loader import gen_docs

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_and_readme_examples_are_current() -> None:
    for path, text in gen_docs().generate().items():
        assert path.read_text("utf-8") == text, f"{path.relative_to(ROOT)} is stale: run scripts/gen_docs.py"


def test_the_cli_reference_covers_every_command() -> None:
    gen = gen_docs()
    text = (ROOT / "docs" / "cli.md").read_text("utf-8")
    for argv in gen._commands():
        assert f"## `{' '.join(['llmsizer', *argv])}`" in text
    assert "## `llmsizer capacity book`" in text and "## `llmsizer hardware show`" in text


def test_the_accuracy_page_is_what_validate_writes_now() -> None:
    """docs/accuracy.md is `llmsizer validate`'s report on the committed rows: a change that moves a prediction must
    regenerate it (its ``Generated <date>`` line aside). It went stale once unnoticed: the serving rows' medians in
    the page were 37.1 / 20.0 % while validate printed 38.3 / 24.9 %."""
    assert not gen_docs().accuracy_is_stale(), "docs/accuracy.md is stale: run scripts/gen_docs.py"

"""An option is named in full on every surface: argparse's default prefix matching read ``infer --contex 8192`` as
``--context 8192`` (and ``--dev``, ``--conc``) while the web API refuses the field ``contex``; now the CLI refuses
it too, one line, exit 2, with the flag it probably meant."""

from __future__ import annotations

import pytest

from cli_capture import run


@pytest.mark.parametrize(("typed", "meant"), [("--contex", "--context"), ("--dev", "--device"),
                                              ("--conc", "--concurrency")])
def test_a_prefix_of_a_flag_is_refused_with_the_flag(typed: str, meant: str) -> None:
    value = {"--dev": "h100-sxm"}.get(typed, "8")
    code, out, err = run("infer", "qwen2.5-0.5b", typed, value)
    assert code == 2 and out == ""
    line, = err.strip().splitlines()
    assert f"unrecognized arguments: {typed} {value}" in line and f"did you mean '{meant}'" in line


def test_the_full_flag_still_answers() -> None:
    code, out, _ = run("infer", "qwen2.5-0.5b", "--context", "8192", "--concurrency", "8")
    assert code == 0 and "Qwen2.5-0.5B" in out


def test_an_ambiguous_prefix_names_every_flag_it_starts() -> None:
    code, _, err = run("infer", "qwen2.5-0.5b", "--con", "8192")
    assert code == 2 and "did you mean '--context' or '--concurrency'?" in err

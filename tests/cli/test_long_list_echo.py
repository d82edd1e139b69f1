"""probe18 F3: a refused comma-separated list (``--free``, ``--tensor-split``) was echoed cut at 80 characters,
mid-value ('24GiB,...,24GiB,24'), which reads as a mangled input. It is echoed whole up to units.LIST_SHOWN
characters, else cut after a separator, with the count of values given; on the CLI and in the web's detail alike
(one reader, units.comma_values)."""

from __future__ import annotations

import pytest

from llmsizer.cli.main import main
from llmsizer.units import LIST_SHOWN


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.count("\n") == 0, err
    return err


@pytest.mark.parametrize("flag", ["--free", "--tensor-split"])
def test_a_list_one_value_too_long_is_echoed_whole(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    values = ",".join(["23.99GiB" if flag == "--free" else "1"] * 16)  # llama.cpp takes at most 15 shares
    err = _error(["fit", "llama-3.1-8b", "--device", "rtx-4090", "--auto" if flag == "--free" else "--count=1",
                  flag, values], capsys)
    assert f"got 16 values: {values!r}" in err


def test_a_long_list_is_cut_after_a_separator_never_inside_a_value(capsys: pytest.CaptureFixture[str]) -> None:
    values = ",".join(["24GiB"] * 40)
    assert len(values) > LIST_SHOWN
    err = _error(["fit", "llama-3.1-8b", "--device", "rtx-4090", "--auto", "--free", values], capsys)
    shown = err.split("got 40 values: '", 1)[1].split("'", 1)[0]
    assert shown.endswith(",...") and len(shown) <= LIST_SHOWN + 3
    assert all(v == "24GiB" for v in shown[:-4].split(","))  # every value shown whole

"""``zero`` is read by the CLI's rule from Python too (probe finding): ``estimate_training(zero=4)`` said "zero must be
a ZeRO stage 0, 1, 2 or 3, got 4" where ``train --zero 4`` (and the web's ``zero``) say the range and why, and
``zero='2'`` was refused where every other count of the run reads text as the CLI does (specs/training.py
``_COUNTS``). DeepSpeed's stages are 0-3 (deepspeed/runtime/zero/config.py ``ZeroStageEnum``)."""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run


@pytest.mark.parametrize("value", ["4", "-1", "1.5"])
def test_a_stage_out_of_range_is_the_clis_line_in_python(value: str) -> None:
    code, _, err = run("train", "llama-3.1-8b", "--zero", value)
    assert code == 2
    cli = err.strip().removeprefix("llmsizer: error: argument --zero: ").removesuffix(" (see --help)")
    with pytest.raises(llmsizer.InputError) as e:
        llmsizer.estimate_training("llama-3.1-8b", zero=float(value) if "." in value else int(value))
    assert str(e.value) == "zero: " + cli


def test_a_stage_given_as_text_is_read_as_the_cli_reads_it() -> None:
    py = llmsizer.estimate_training("llama-3.1-8b", zero="2", gpus=2)
    assert py.total("device") == llmsizer.estimate_training("llama-3.1-8b", zero=2, gpus=2).total("device")
    with pytest.raises(llmsizer.InputError):
        llmsizer.estimate_training("llama-3.1-8b", zero=True)


@pytest.mark.parametrize("value", [True, False])
def test_a_stage_given_as_a_boolean_is_the_clis_range_line(value: bool) -> None:
    """``zero=True`` said "zero must be a ZeRO stage 0, 1, 2 or 3, got True", a wording of its own, where every
    other bad stage gets the CLI's --zero line (the range and why, numbers.ZERO_STAGE)."""
    code, _, err = run("train", "llama-3.1-8b", "--zero", "4")
    assert code == 2
    expected = err.strip().removesuffix(" (see --help)").split("is out of range; ", 1)[1]  # "expected ... (why)"
    with pytest.raises(llmsizer.InputError) as e:
        llmsizer.estimate_training("llama-3.1-8b", zero=value)
    assert str(e.value) == f"zero: {expected}, got the boolean {str(value).lower()}"

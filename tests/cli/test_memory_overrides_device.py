"""A memory given beside a named device overrides the device's own memory, and every answer says so in its
device_memory assumption (``given; overrides h100-sxm's own 79.65 GiB ...``; the text answer's
``device_memory=24.00 GiB (overrides h100-sxm's own 79.65 GiB)``), so a chosen device is never silently sized by
another figure (probe26 D1: the web page's default 24GiB sized an H100 as a 24 GiB card without a word).

Independent truth: the device's own memory is the hardware catalog's figure (``hardware show h100-sxm --json``
memory_bytes), written in GiB with two decimals here, not by the code under test.
"""

from __future__ import annotations

import pytest
from cli_run import answer, run

MODEL = "llama-3.2-1b"


def _device_memory(d: dict) -> dict:
    return next(a for a in d["assumptions"] if a["name"] == "device_memory")


def _own_gib(device: str, capsys: pytest.CaptureFixture[str]) -> str:
    _, hw = answer(["hardware", "show", device], capsys)
    return f"{hw['memory_bytes'] / 2**30:.2f} GiB"


@pytest.mark.parametrize("argv", [["infer", MODEL], ["train", MODEL, "--method", "lora"], ["fit", MODEL]])
def test_a_memory_beside_a_device_is_said_to_override_it(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    own = _own_gib("h100-sxm", capsys)
    _, d = answer([*argv, "--device", "h100", "--memory", "24GiB"], capsys)
    dm = _device_memory(d)
    assert dm["value"] == "24.00 GiB" and dm["default"] is False  # the user's figure, used
    assert dm["why"].startswith(f"given; overrides h100-sxm's own {own}"), dm["why"]
    _, plain = answer([*argv, "--device", "h100"], capsys)  # without it: the device's own, no override said
    assert "overrides" not in _device_memory(plain)["why"]
    assert _device_memory(plain)["value"] == own


def test_the_text_answer_marks_the_override(capsys: pytest.CaptureFixture[str]) -> None:
    own = _own_gib("h100-sxm", capsys)
    code, out, _ = run(["infer", MODEL, "--device", "h100", "--memory", "24GiB"], capsys)
    assert code in (0, 1)
    assert f"device_memory=24.00 GiB (overrides h100-sxm's own {own})" in out


def test_no_override_without_a_device_memory_or_at_the_same_figure(capsys: pytest.CaptureFixture[str]) -> None:
    _, kind = answer(["infer", MODEL, "--device", "gpu", "--memory", "24GiB"], capsys)  # a kind: no memory of its own
    assert not any("overrides" in a["why"] for a in kind["assumptions"])
    _, hw = answer(["hardware", "show", "h100-sxm"], capsys)
    _, same = answer(["infer", MODEL, "--device", "h100", "--memory", str(hw["memory_bytes"])], capsys)
    assert _device_memory(same)["why"] == "given"

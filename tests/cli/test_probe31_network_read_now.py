"""probe31 section 3: ``train ... --network garbage`` answered (exit 0) without ``--tokens``, because the value was
read only where the duration used it. Every value is read when the flags are: the same one line and exit 2 with or
without the option that uses it, on every command that takes the training flags, and the web's 400."""

from __future__ import annotations

import pytest

from cli_capture import run

MODEL = "llama-3.1-8b"
LINE = "network 'garbage': not a catalog interconnect"


@pytest.mark.parametrize("argv", [
    ("train", MODEL, "--gpus", "16", "--network", "garbage"),
    ("train", MODEL, "--gpus", "16", "--network", "garbage", "--device", "h100"),
    ("train", MODEL, "--gpus", "16", "--network", "garbage", "--device", "h100", "--tokens", "1B"),
    ("fit", MODEL, "--train", "--device", "h100", "--count", "16", "--network", "garbage"),
    ("train", MODEL, "--gpus", "16", "--network", "nvlink4"),  # a link inside a machine, not between machines
])
def test_bad_network_refused_whether_or_not_timed(argv: tuple[str, ...]) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert LINE in err or "link inside a machine" in err


@pytest.mark.parametrize("network", ["8x400Gb/s", "ib-ndr", "1600 Gb/s"])
def test_good_network_still_answered_without_tokens(network: str) -> None:
    code, _, err = run("train", MODEL, "--gpus", "16", "--network", network)
    assert code == 0, err


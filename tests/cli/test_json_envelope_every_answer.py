"""probe33 D4: every --json answer opens with the same envelope, ``{"schema_version", "kind"}`` (result.envelope),
``kind`` the answer's type; a device's own kind is ``device_kind`` (``kind`` kept in ``hardware list``'s entries one
release, as docs/hardware.md says). Truth: the command lines themselves, read through the real entry point."""

from __future__ import annotations

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

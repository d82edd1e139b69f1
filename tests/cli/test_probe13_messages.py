"""probe13 D7, D8, D9: answers and one-line messages on hostile input.

D7: `fit --auto` with an unchecked host part larger than any machine of the catalog holds does not read FITS.
D8: messages name what the user gave (--count, not the Python name gpus; the hardware file and device of a bad
memory), echo integers as typed (99999999, not 1e+08), refuse ids with control characters, and a 5,000-digit JSON
number on the web gets the CLI's line, not "(ValueError)".
D9: a key given twice in a hardware file is refused, as request files and web bodies refuse it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import run

from llmsizer.catalog.hardware import builtin_catalog


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("llmsizer: error: ")


def test_auto_fit_with_a_host_part_no_machine_holds_does_not_fit(capsys) -> None:
    code, out, err = run(["fit", "llama-3.1-8b", "--auto", "--device", "rtx-4090", "--context", "2147483647",
                          "--json"], capsys)
    data = json.loads(out)
    # the truth: the host part (256 TiB of KV at fp16: 2^31 tokens x 32 layers x 2 x 8 heads x 128 x 2 B) against
    # the largest RAM of the catalog's machines
    largest = max(int(i.memory.base) for i in builtin_catalog().instances.values() if i.memory is not None)
    assert 2**31 * 32 * 2 * 8 * 128 * 2 > largest
    assert code == 1 and data["fits"] is False, (code, data.get("fits"))


def test_auto_fit_with_an_ordinary_host_part_still_fits(capsys) -> None:
    code, out, _ = run(["fit", "llama-3.1-8b", "--auto", "--device", "rtx-4090", "--context", "128k", "--json"], capsys)
    assert code == 0 and json.loads(out)["fits"] is True


def test_count_is_named_as_typed(capsys) -> None:
    code, _, err = run(["fit", "llama-3.1-8b", "--auto", "--device", "rtx-4090", "--count", "1048577"], capsys)
    line = one_line(err)
    assert code == 2 and "--count: 1048577 is out of range" in line and "gpus" not in line, line
    # 2^20 bare GPUs are machines of 8, each its own llama.cpp copy (specs/training.py llamacpp_split_gpus): the
    # auto-fit sizes one of them, not one split over a million GPUs
    code, out, err = run(["fit", "llama-3.1-8b", "--auto", "--device", "rtx-4090", "--count", "1048576"], capsys)
    assert code == 0 and "(131072 machines of 8 GPUs)" in out.splitlines()[0], err


@pytest.mark.parametrize("flag, typed", [("--count", "99999999"), ("--concurrency", "2147483648")])
def test_integers_are_echoed_as_typed(capsys, flag, typed) -> None:
    argv = ["fit", "llama-3.1-8b", "--device", "rtx-4090", flag, typed]
    code, _, err = run(argv, capsys)
    line = one_line(err)
    assert code == 2 and f"{flag}: {typed} is out of range" in line and "e+" not in line, line


def _hardware(tmp_path: Path, text: str, suffix: str = ".json") -> str:
    f = tmp_path / f"hw{suffix}"
    f.write_text(text)
    return str(f)


def test_a_tiny_device_memory_names_the_file_and_device(tmp_path, capsys) -> None:
    hw = _hardware(tmp_path, '{"devices": [{"id": "h100-sxm", "memory": "1KiB"}]}')
    code, _, err = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", "--hardware-file", hw], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith(f"hardware file {hw}: devices[h100-sxm].memory: 1024 is out of range"), line


def test_an_id_with_control_characters_is_refused(tmp_path, capsys) -> None:
    hw = _hardware(tmp_path, '{"devices": [{"id": "bx\\u0000\\n\\u202e", "name": "BX", "kind": "gpu", '
                             '"memory": "24GiB"}]}')
    code, _, err = run(["hardware", "show", "bx", "--hardware-file", hw], capsys)
    line = one_line(err)
    assert code == 2 and "devices[0].id" in line and "control character" in line, line


@pytest.mark.parametrize("suffix, text", [
    (".json", '{"devices": [{"id": "bx", "name": "BX", "kind": "gpu", "memory": "24GiB", "memory": "48GiB"}]}'),
    (".yaml", "devices:\n  - id: bx\n    name: BX\n    kind: gpu\n    memory: 24GiB\n    memory: 48GiB\n"),
])
def test_a_key_given_twice_in_a_hardware_file_is_refused(tmp_path, capsys, suffix, text) -> None:
    hw = _hardware(tmp_path, text, suffix)
    code, _, err = run(["hardware", "show", "bx", "--hardware-file", hw], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith(f"hardware file {hw}: key 'memory' given twice"), line


def test_a_5000_digit_web_number_gets_the_cli_line() -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    body = '{"model": "llama-3.1-8b", "context": ' + "9" * 5000 + "}"
    r = TestClient(create_app()).post("/api/v1/infer", content=body, headers={"Content-Type": "application/json"})
    p = r.json()
    assert r.status_code == 400 and p["field"] == "context", p
    # the CLI's reason; the web names the field the request gave (web/problems.py web_detail)
    assert p["detail"] == "field 'context': a value of 5,000 characters is not a number", p

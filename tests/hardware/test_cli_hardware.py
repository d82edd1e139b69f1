"""`llmsizer hardware`, `fit` and `recommend` through the CLI entry point (main.main)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.cli import main


@pytest.fixture()
def cli():
    return main.main


def test_hardware_list_and_show(cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["hardware", "list", "--kind", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "h100-sxm" in out and "devices" in out
    assert cli(["hardware", "show", "H100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["id"] == "h100-sxm" and data["values"]["memory_bandwidth"]["source"] in data["sources"]
    assert cli(["hardware", "show", "p5.48xlarge"]) == 0
    assert "us-east-1" in capsys.readouterr().out


def test_unknown_hardware_is_one_line_exit_2(cli, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["hardware", "show", "h100-sxn"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "h100-sxm" in err


def test_fit_text_and_json(cli, capsys: pytest.CaptureFixture[str], hw_file: Path) -> None:
    assert cli(["fit", "qwen2.5-0.5b", "--device", "test-gpu", "--hardware-file", str(hw_file)]) == 0
    out = capsys.readouterr().out
    # vLLM at one request: the idle prompt's row and the TTFT with the server's time (eq. Q9) on its own row
    assert "FITS" in out and "prefill (one prompt, idle)" in out and "at 1 request " in out and "roofline" in out
    assert cli(["fit", "llama-3.1-8b", "--device", "test-gpu", "--headroom", "0.9", "--engine", "transformers",
                "--hardware-file", str(hw_file), "--json"]) == 1  # answered: does not fit
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["budget_per_device"] < data["memory_per_device"]


def test_recommend_text_and_json(cli, capsys: pytest.CaptureFixture[str], hw_file: Path) -> None:
    assert cli(["recommend", "qwen2.5-0.5b", "--provider", "test", "--hardware-file", str(hw_file)]) == 0
    out = capsys.readouterr().out
    assert "chosen: test-cpu-64" in out and "advice: CPU is enough" in out
    assert cli(["recommend", "llama-3.1-8b", "--train", "--tokens", "1B", "--deadline", "1d", "--provider", "test",
                "--hardware-file", str(hw_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "recommend-training" and data["chosen"]["training_seconds"] <= 86400


def test_recommend_help_has_examples(cli, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli(["recommend", "--help"])
    assert "examples:" in capsys.readouterr().out


def test_bare_number_in_a_hardware_file_takes_the_fields_unit(cli, capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    """docs/hardware.md: in a hardware file ``"memory": 24`` is 24 GiB (the field's unit), while ``--memory 24`` on
    the command line has no field unit and is refused as a forgotten unit."""
    p = tmp_path / "hw.json"
    p.write_text(json.dumps({"devices": [{"id": "bare-box", "name": "Bare box", "kind": "gpu", "memory": 24,
                                          "memory_bandwidth": 1000}]}), "utf-8")
    assert cli(["hardware", "show", "bare-box", "--hardware-file", str(p), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["values"]["memory"]["base"] == 24 * 2**30
    assert shown["values"]["memory_bandwidth"]["base"] == 1000e9
    with pytest.raises(SystemExit) as refused:  # argparse's type check: exit 2 with one line
        cli(["infer", "qwen2.5-0.5b", "--memory", "24"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no unit" in err


@pytest.mark.parametrize(("kind", "provider"), [("cpu", "aws"), ("gpu", "aws"), ("tpu", "gcp")])
def test_hardware_list_kind_and_provider_both_apply(cli, capsys: pytest.CaptureFixture[str], kind: str,
                                                     provider: str) -> None:
    """`--kind K --provider P` is the intersection: P's instances whose accelerator is of kind K (it once kept only
    --provider). Truth: the catalog's data files read as plain JSON here, not through llmsizer's search."""
    data_dir = Path(main.__file__).parents[1] / "catalog" / "data" / "hardware"
    device_kind = {d["id"]: d["kind"] for f in ("accelerators.json", "apple.json", "cpus.json")
                   for d in json.loads((data_dir / f).read_text())["devices"]}
    rows = json.loads((data_dir / f"instances_{provider}.json").read_text())["instances"]
    expected = sorted(r["id"] for r in rows if device_kind[r["device"]] == kind)
    assert 0 < len(expected) < len(rows)  # the pair filters something out, and leaves something
    assert cli(["hardware", "list", "--kind", kind, "--provider", provider, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["devices"] == [] and sorted(i["id"] for i in answer["instances"]) == expected

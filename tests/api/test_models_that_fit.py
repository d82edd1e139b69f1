"""``llmsizer.models_that_fit`` and ``llmsizer.detect_hardware`` (audit16 B4/B5): "what fits my machine" is one
function of the core (``fits_on.py``) that ``models --fits-on --json`` prints and the Python API returns, the same
answer; the machine detected in-process (``--fits-on detected``, ``fit --device detected``) is the one ``hardware
detect -o FILE`` writes, from the REAL recorded outputs of tests/fixtures/real_outputs/ (their sources in its README;
the expected sizes below read by eye from those files)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

import llmsizer
from cli_capture import run, run_json
from llmsizer.catalog import detect as detect_module
from llmsizer.catalog.detect import read_outputs
from llmsizer.errors import InputError, UnknownNameError

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
MiB, KiB = 2**20, 2**10


@pytest.fixture
def h100_server(tmp_path: Path) -> Path:
    """A saved machine: one H100 80GB HBM3 (nvidia-smi --query-gpu csv), 2 x Xeon 8488C (lscpu), 566 GiB RAM."""
    folder = tmp_path / "out"
    folder.mkdir()
    for name, rel in {"nvidia-smi-query-gpu.csv": "nvidia-smi-query-gpu/h100-80gb-hbm3-allfields.csv",
                      "lscpu.txt": "lscpu/intel-xeon-platinum-8488c-2s-c7i-metal-truncated.txt",
                      "proc-meminfo": "proc-meminfo/566gib-server-hugepages-htop-truncated.txt"}.items():
        shutil.copyfile(REAL / rel, folder / name)
    return folder


@pytest.fixture
def this_machine_is(monkeypatch: pytest.MonkeyPatch, h100_server: Path) -> Path:
    """Detection of "this machine" reads the saved outputs instead of running the commands (catalog/detect.py
    ``run_commands`` is where the live outputs come from)."""
    monkeypatch.setattr(detect_module, "run_commands", lambda: (read_outputs(h100_server), []))
    return h100_server


def test_the_python_answer_is_the_cli_json() -> None:
    args = ("qwen3", "--fits-on", "rtx-4090", "--context", "8k", "--concurrency", "2", "--headroom", "0.15")
    code, cli = run_json("models", *args)
    res = llmsizer.models_that_fit("rtx-4090", "qwen3", context=8192, concurrency=2, headroom=0.15)
    assert isinstance(res, llmsizer.ModelsThatFit)
    assert json.loads(json.dumps(res.to_dict(), default=str)) == cli
    assert code == (0 if res.fitting else 1) and res.fitting == cli["fitting"]
    assert [e.id for e, _ in res.options] == [m["id"] for m in cli["models"]]
    # a 24 GiB card holds a 4B model at 8k x 2, not a 235B one (sizes from the models' own configs, not our output)
    assert "Qwen/Qwen3-4B" in res.fitting and "Qwen/Qwen3-235B-A22B" not in res.fitting


def test_print_is_the_cli_table() -> None:
    """``str(models_that_fit(...))`` is the text ``models --fits-on`` prints (one renderer, render/fits_on_text.py;
    the CLI adds the ``fit ... --auto`` command to a row that fits with experts in host memory, none here)."""
    code, out, err = run("models", "qwen2.5-7", "--fits-on", "rtx-4090", "--context", "8k", "--headroom", "0.15")
    assert code == 0, err
    res = llmsizer.models_that_fit("rtx-4090", "qwen2.5-7", context=8192, headroom=0.15)
    assert str(res) + "\n" == out and len(res.options) >= 2
    assert out.startswith("models on rtx-4090, headroom 0.15: 8,192 tokens x 1 sequence(s)")


def test_python_arguments_are_checked_as_the_cli_checks_them() -> None:
    with pytest.raises(InputError):
        llmsizer.models_that_fit("rtx-4090", "qwen3-0.6b", headroom=1.5)
    with pytest.raises(UnknownNameError, match="unknown hardware 'no-such-card'"):
        llmsizer.models_that_fit("no-such-card", "qwen3-0.6b")


def test_detect_hardware_reads_the_saved_outputs(h100_server: Path) -> None:
    det = llmsizer.detect_hardware(h100_server)
    assert isinstance(det, llmsizer.Detection)
    # nvidia-smi csv: 'NVIDIA H100 80GB HBM3, ..., 81559 MiB'; lscpu: 'Intel(R) Xeon(R) Platinum 8488C'
    assert [d.id for d in det.devices] == ["detected-h100-sxm", "detected-intel-xeon-platinum-8488c"]
    assert det.target.id == "detected-h100-sxm" and det.target.memory_bytes == 81559 * MiB
    gpu = next(d for d in det.document["devices"] if d["id"] == "detected-h100-sxm")
    assert gpu["memory_usable"] == {"value": 81559, "unit": "MiB", "source": "detected:nvidia-smi-query-gpu",
                                    "where": "NVIDIA H100 80GB HBM3: 81559 MiB (GPU 0)"}
    # /proc/meminfo MemTotal: 593026380 kB
    cpu = next(d for d in det.devices if d.kind == "cpu")
    assert cpu.memory_bytes == 593026380 * KiB
    # the text hands the same entry to load_catalog without a file
    cat = llmsizer.load_catalog([det.hardware_text()])
    assert cat.devices["detected-h100-sxm"].memory_bytes == 81559 * MiB


def test_detect_hardware_is_the_file_hardware_detect_writes(h100_server: Path, tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    code, _, err = run("hardware", "detect", "--from", str(h100_server), "-o", str(f))
    assert code == 0, err
    written = json.loads(f.read_text("utf-8"))
    assert json.loads(llmsizer.detect_hardware(h100_server).hardware_text().text) == written


def _without_file_names(data: dict) -> dict:
    """The answer with the hardware file's name taken out (a file's path vs the detected text's name)."""
    text = json.dumps(data)
    return json.loads(text.replace("hw.json", "detected.json"))


def test_fits_on_detected_is_the_two_command_answer(this_machine_is: Path, tmp_path: Path) -> None:
    f = tmp_path / "hw.json"
    assert run("hardware", "detect", "--from", str(this_machine_is), "-o", str(f))[0] == 0
    two = run_json("models", "qwen3", "--fits-on", "detected-h100-sxm", "--hardware-file", str(f),
                   "--context", "8k", "--concurrency", "4")
    one = run_json("models", "qwen3", "--fits-on", "detected", "--context", "8k", "--concurrency", "4")
    assert one[0] == two[0] == 0
    assert one[1]["hardware"] == "detected" and one[1]["device"] == "detected-h100-sxm"
    assert {**_without_file_names(two[1]), "hardware": "detected"} == _without_file_names(one[1])
    py = llmsizer.models_that_fit("detected", "qwen3", context=8192, concurrency=4).to_dict()
    assert json.loads(json.dumps(py, default=str)) == one[1]
    # the table says the same devices
    code, out, err = run("models", "qwen3-0.6b", "--fits-on", "detected")
    assert code == 0, err
    assert out.startswith("models on detected-h100-sxm")


def test_fit_device_detected(this_machine_is: Path) -> None:
    code, data = run_json("fit", "qwen2.5-0.5b", "--device", "detected")
    assert code == 0
    # fit's budget: the driver's 81559 MiB (nvidia-smi csv), as with the written file
    assert data["device"] == "detected-h100-sxm" and data["budget_per_device"] == 81559 * MiB
    code, data = run_json("infer", "qwen2.5-0.5b", "--device", "detected")
    assert code == 0 and data["assumptions"]
    code, out, err = run("train", "qwen2.5-0.5b", "--device", "detected")
    assert code == 0, err
    assert "detected-h100-sxm" in out


def test_python_fit_on_the_detected_machine(this_machine_is: Path, h100_server: Path) -> None:
    """``fit`` and ``fit_training`` take the detection (or "detected") as their hardware, as the CLI's --device."""
    det = llmsizer.detect_hardware(h100_server)
    r = llmsizer.fit("qwen2.5-0.5b", det)
    assert r.device == "detected-h100-sxm" and r.budget_per_device == 81559 * MiB  # the driver's, by eye
    assert llmsizer.fit("qwen2.5-0.5b", "detected").to_dict() == r.to_dict()
    t = llmsizer.fit_training("qwen2.5-0.5b", det, seq_len=1024)
    # training keeps the default 10 % headroom of the driver's 81559 MiB
    assert t.device == "detected-h100-sxm" and t.budget_per_device == int(81559 * MiB * 0.9)


def test_python_estimates_on_the_detected_machine_are_the_cli_json(this_machine_is: Path) -> None:
    """review23b D6: ``estimate_inference(device='detected')`` and ``estimate_training(device='detected')`` size this
    machine as `infer` / `train --device detected` do (one resolution: estimate/device.py ``detect_named``,
    ``detected_machine``): the same JSON, on the machine the recorded outputs describe (one H100 80GB HBM3 whose
    driver reports 81559 MiB, by eye from the csv)."""
    code, cli = run_json("infer", "qwen2.5-0.5b", "--device", "detected", "--context", "4096")
    py = llmsizer.estimate_inference("qwen2.5-0.5b", device="detected", context=4096)
    assert code == 0 and json.loads(json.dumps(py.to_dict(), default=str)) == cli
    assert py.details["memory_budget"] == 81559 * MiB  # the driver's memory (vLLM's pool share is its own)
    code, cli = run_json("train", "qwen2.5-0.5b", "--device", "detected", "--seq-len", "1024")
    py = llmsizer.estimate_training("qwen2.5-0.5b", device="detected", seq_len=1024)
    assert code == 0 and json.loads(json.dumps(py.to_dict(), default=str)) == cli
    assert ("device", "detected-h100-sxm") in {(a.name, a.value) for a in py.assumptions}
    # "Detected" in any case is the same name, as on the CLI
    assert llmsizer.estimate_inference("qwen2.5-0.5b", device=" Detected ", context=4096).to_dict() == \
        llmsizer.estimate_inference("qwen2.5-0.5b", device="detected", context=4096).to_dict()


def test_the_fit_auto_command_printed_for_detected_runs(this_machine_is: Path) -> None:
    """A model that fits the detected machine only with experts in host memory is printed with its ``fit ... --device
    detected --auto`` command; that command detects the machine again and gives the same llama.cpp flags."""
    code, out, err = run("models", "qwen3-coder-480b", "--fits-on", "detected", "--host-memory", "600GB",
                         "--context", "8k")
    assert code == 0, err
    m = re.search(r": (llmsizer fit .*? --auto)  \(llama\.cpp (.*?)\)", out)
    assert m and "--device detected" in m.group(1), out
    code, fit_out, err = run(*shlex.split(m.group(1))[1:])
    assert code == 0, err
    assert f"flags: {m.group(2)}" in fit_out


def test_nothing_detected_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect_module, "run_commands", lambda: ([], ["lscpu: not installed"]))
    code, out, err = run("models", "--fits-on", "detected")
    assert code == 2 and "nothing detected" in err and len(err.strip().splitlines()) == 1


def test_fits_on_detected_with_a_hardware_file_says_the_file_is_not_sized(this_machine_is: Path, tmp_path: Path
                                                                          ) -> None:
    """probe27 N3: `models --fits-on detected --hardware-file F` sizes this machine, not F's devices (as documented);
    the answer says so in one line (warnings: the CLI, --json and Python alike). Without a file, no such line."""
    f = tmp_path / "mix.json"
    f.write_text(json.dumps({"devices": [{"id": "my-gpu", "name": "My GPU", "kind": "gpu",
                                          "memory": {"value": 24, "unit": "GiB"}}]}))
    code, out, err = run("models", "qwen3-0.6b", "--fits-on", "detected", "--hardware-file", str(f))
    assert code == 0, err
    assert out.startswith("models on detected-h100-sxm")  # this machine, as before
    said = ("warning: 'detected' sizes this machine (detected now), not a device of the hardware file(s) given, which "
            "only add entries: name the file's device to size it")
    assert out.splitlines().count(said) == 1, out
    code, data = run_json("models", "qwen3-0.6b", "--fits-on", "detected", "--hardware-file", str(f))
    assert said.removeprefix("warning: ") in data["warnings"]
    py = llmsizer.models_that_fit("detected", "qwen3-0.6b", hardware_files=[f]).to_dict()
    assert said.removeprefix("warning: ") in py["warnings"]
    assert not any("sizes this machine" in w for w in run_json("models", "qwen3-0.6b", "--fits-on", "detected")[1][
        "warnings"])

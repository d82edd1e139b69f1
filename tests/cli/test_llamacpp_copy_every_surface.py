"""Every llama.cpp path reads one machine rule (specs/training.py ``llamacpp_split_gpus``: one copy over one
machine's GPUs, the machines replicas; estimate/fit.py ``llamacpp_copy``), checked through the CLI's text and a
request file, as a user meets them (review20 D1, D2, D4: the Python API alone missed them).

The independent truth is the CLI itself run on what it printed: every command or flag set that fit's host-memory
hint, ``models --fits-on --host-memory`` and ``fit --auto`` tell the user to run is parsed by the CLI's own parser
and run, and must give FITS (exit 0), never an exit 2 about a flag the user did not give. Before, fit --auto on 16
bare GPUs exited 2 ("--tensor-split has 16 shares for 8 GPUs"), and the hint's flags on 4 GPUs in machines of 2
gave DOES NOT FIT (81.97 GiB on GPU1).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from cli_capture import run, run_json

HOST = ["--engine", "llamacpp", "--host-memory", "256GB", "--context", "8k"]
MOE = "qwen3-235b-a22b"  # no format fits 4 x 24 GB on the GPUs alone: the routed experts of some layers to host RAM

# (device, count, machine size given): 4 GPUs within one machine, 4 in machines of 2, and 16 bare GPUs (the default
# machine of 8: 2 x 8)
SHAPES = [("rtx-5060-ti-8gb", "4", None), ("rtx-4090", "4", "2"), ("rtx-5060-ti-8gb", "16", None)]


def _shape_args(device: str, count: str, per_node: str | None) -> list[str]:
    return ["--device", device, "--count", count] + (["--gpus-per-node", per_node] if per_node else [])


def _fits(argv: list[str]) -> str:
    code, out, err = run(*argv)
    assert code == 0 and "FITS" in out.splitlines()[0] and "DOES NOT FIT" not in out.splitlines()[0], (argv, err,
                                                                                                        out[:400])
    return out


@pytest.mark.parametrize("device, count, per_node", SHAPES, ids=["one-machine", "machines-of-2", "16-bare"])
def test_fits_host_hint_rerun_as_printed_fits(device: str, count: str, per_node: str | None) -> None:
    base = ["fit", MOE, *_shape_args(device, count, per_node), *HOST]
    code, out, err = run(*base)
    assert code == 1, err
    hint = re.search(r"\(rerun with ([^)]*)\)", out)
    assert hint is not None and "in host memory" in out, out
    _fits(base + shlex.split(hint.group(1)))


@pytest.mark.parametrize("device, count, per_node", SHAPES, ids=["one-machine", "machines-of-2", "16-bare"])
def test_fits_on_host_memory_prints_an_auto_command_that_fits(device: str, count: str, per_node: str | None) -> None:
    code, out, err = run("models", MOE, "--fits-on", device, "--count", count, *HOST,
                         *(["--gpus-per-node", per_node] if per_node else []))
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "fits with experts in host memory" in ln)
    command = re.search(r": (llmsizer fit .*? --auto)", line)
    assert command is not None, line
    words = shlex.split(command.group(1))[1:]  # the printed command, through the CLI's own parser
    auto = _fits(words)
    # the auto-fit's own flags, given to fit on the same GPUs, give its verdict too (fit's aliases -ngl/-sm/-ts)
    flags = shlex.split(auto.splitlines()[1].removeprefix("flags: "))
    placement = [w for k, v in zip(flags, flags[1:], strict=False) if k in ("-ngl", "-sm", "-ts", "--n-cpu-moe")
                 for w in (k, v)]
    _fits([w for w in words if w != "--auto"] + placement)
    if int(count) > 8 or per_node:  # past one machine: the answer says it is one copy and the machines replicas
        assert "of one machine, each machine a replica" in auto.splitlines()[0]


def test_fit_auto_past_one_machine_fits_or_names_the_count() -> None:
    # 16 bare GPUs: 2 machines of 8, one copy each (before: exit 2 about a --tensor-split never given)
    out = _fits(["fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "16", "--engine", "llamacpp", "--auto",
                 "--context", "8k"])
    assert out.splitlines()[0].endswith("auto-fit on 8 GPU(s) of one machine, each machine a replica (2 machines of "
                                        "8 GPUs): FITS")
    assert len(out.splitlines()[1].split("-ts ")[1].split()[0].split(",")) == 8
    # 10 bare GPUs are not whole machines of 8: one line naming --count and --gpus-per-node, never --tensor-split
    code, out, err = run("fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "10", "--engine", "llamacpp",
                         "--auto", "--context", "8k")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--count" in err and "--gpus-per-node" in err and "tensor-split" not in err
    # given the machines (5 GPUs each), the same 10 are 2 copies of 5
    out = _fits(["fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "10", "--gpus-per-node", "5", "--engine",
                 "llamacpp", "--auto", "--context", "8k"])
    assert "(2 machines of 5 GPUs)" in out.splitlines()[0]
    # --free lists one machine's GPUs: 3 sizes for 6 GPUs in machines of 3 are one copy's; 2 for machines of 8 are
    # refused in one line naming --count and --gpus-per-node
    out = _fits(["fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "6", "--gpus-per-node", "3", "--engine",
                 "llamacpp", "--auto", "--context", "8k", "--free", "20GiB,20GiB,20GiB"])
    assert "auto-fit on 3 GPU(s) of one machine" in out.splitlines()[0]
    code, out, err = run("fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "16", "--engine", "llamacpp",
                         "--auto", "--context", "8k", "--free", "20GiB,20GiB")
    assert code == 2 and err.count("\n") == 1 and "one machine's 8" in err and "--gpus-per-node" in err


@pytest.mark.parametrize("per_node", [None, "2"], ids=["one-machine", "machines-of-2"])
def test_fit_autos_own_hint_rerun_as_printed_fits(per_node: str | None) -> None:
    # host RAM too small for the default format's CPU share: --auto names a format, its flags rerun through --auto
    # and through plain fit both give FITS
    base = ["fit", MOE, *_shape_args("rtx-4090", "4", per_node), "--engine", "llamacpp", "--auto", "--context", "8k",
            "--host-memory", "128GB"]
    code, out, err = run(*base)
    assert code == 1 and "DOES NOT FIT" in out.splitlines()[0], err
    hint = re.search(r"\(rerun with ([^)]*)\)", out)
    assert hint is not None, out
    auto = _fits(base + shlex.split(hint.group(1)))
    flags = shlex.split(auto.splitlines()[1].removeprefix("flags: "))
    placement = [w for k, v in zip(flags, flags[1:], strict=False) if k in ("-ngl", "-sm", "-ts", "--n-cpu-moe")
                 for w in (k, v)]
    _fits([w for w in base if w != "--auto"] + shlex.split(hint.group(1)) + placement)


def test_fit_headline_names_one_copys_gpus() -> None:
    code, out, _ = run("fit", "llama-3.1-70b", "--device", "rtx-4090", "--count", "4", "--gpus-per-node", "2",
                       "--engine", "llamacpp", "--weights", "gguf:q4_k_m", "--context", "8k", "--concurrency", "2")
    assert code == 0 and out.splitlines()[0].endswith("[llamacpp, gguf:q4_k_m, layer split over 2 GPUs, 2 replicas]")


def test_a_tensor_split_gives_one_share_per_gpu_of_one_machine_on_the_cli() -> None:
    base = ["fit", "llama-3.1-8b", "--device", "rtx-4090", "--count", "4", "--gpus-per-node", "2", "--engine",
            "llamacpp", "--context", "8k"]
    _fits(base + ["--tensor-split", "3,1"])
    code, out, err = run(*base, "--tensor-split", "1,1,1,1")
    assert code == 2 and err.strip().endswith("--tensor-split has 4 shares; give one share per GPU of one machine "
                                              "(2 GPUs; the 2 machines are replicas)")


def _request(resources: str, ts: str) -> str:
    return ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            f"    engine: llamacpp\n    engine_settings: {{tensor_split: \"{ts}\"}}\n"
            "    traffic:\n      concurrency: {typical: 2, peak: 4}\n      context: {typical: 4k, peak: 8k}\n"
            f"      output: {{typical: 200, peak: 500}}\n    resources: {resources}\n")


@pytest.mark.parametrize("resources, machine, machines", [
    ("{device: rtx-4090, count: 4, nodes: 2}", 2, 2),
    ("{instance: aws-g5.12xlarge, count: 8}", 4, 2),
])
def test_a_requests_tensor_split_reads_the_same_rule(tmp_path: Path, resources: str, machine: int,
                                                    machines: int) -> None:
    """One rule for a request's engine_settings.tensor_split and fit's: one share per GPU of one machine. Before,
    the reader wanted one per device (4) and fit one per machine's GPU (2): no value passed both."""
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(_request(resources, ",".join(["1"] * machine)))
    bad.write_text(_request(resources, ",".join(["1"] * machine * machines)))
    code, plan = run_json("plan", str(good))
    job = plan["jobs"][0]
    assert code == 0 and job["hardware"]["replicas"] == machines and job["facts"]["fits"]
    code, out, err = run("plan", str(bad))
    assert code == 2 and err.count("\n") == 1
    assert err.strip().endswith(f"engine_settings.tensor_split: has {machine * machines} shares; give one share "
                                f"per GPU of one machine ({machine} GPUs; the {machines} machines are replicas)")

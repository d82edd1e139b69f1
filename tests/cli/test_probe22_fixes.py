"""probe22 D1, D2, D5, D6, C1, C2, C3, C10: flags that were ignored, a refusal of the memory given, an internal name in
a message, and texts that did not add up.

D1: ``--hardware-file`` without ``--device`` (infer, train) was ignored unread (a missing file answered, exit 0).
D2: ``fit --auto`` on a GPU of no catalog memory refused the ``--memory``/``--free`` given ("gpu has no sourced memory
size; give one with --memory"): the speed stage's fit did not get the memory.
D5: ``train --utilization`` with no ``--device`` (or no ``--tokens``) was ignored; ``--tokens`` alone is refused.
D6: a request rate the deployment does not carry, on so many replicas that its ceilings need more requests in flight
than llmsizer sizes, said "concurrency: 134217728 is out of range", a flag the user never gave.
C1: llama.cpp's weights text listed the whole file's tensors (4.57 GiB) beside a 4.30 GiB device item.
C2: vLLM's recurrent-state text under TP 4 showed the unsharded dimensions beside the sharded page.
C3: the size range said "2^60 B = 1 EiB", a unit the size parser does not read.
C10: ``--device h100`` resolved to h100-sxm silently (PCIe and NVL exist too)."""

from __future__ import annotations

import json
import re

import pytest
from cli_run import run

from llmsizer.units import parse_bytes


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("llmsizer: error: ")


@pytest.mark.parametrize("argv", [
    ["infer", "llama-3.1-8b", "--hardware-file", "nonexist.yaml"],
    ["train", "llama-3.1-8b", "--hardware-file", "nonexist.yaml"],
    ["infer", "llama-3.1-8b", "--hardware-file", "."],
])
def test_hardware_file_without_device_is_refused(capsys, argv) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and not out and "--hardware-file needs --device" in one_line(err), (code, err)


def test_hardware_file_with_device_is_still_read(capsys) -> None:
    code, _, err = run(["infer", "llama-3.1-8b", "--device", "h100-sxm", "--hardware-file", "nonexist.yaml"], capsys)
    assert code == 2 and "hardware file nonexist.yaml: cannot read" in one_line(err)


@pytest.mark.parametrize("argv, needs", [
    (["train", "llama-3.1-8b", "--utilization", "0.5"], "--device and --tokens"),
    (["train", "llama-3.1-8b", "--device", "h100-sxm", "--utilization", "0.5"], "--tokens"),
    (["fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--utilization", "0.5"], "--tokens"),
])
def test_utilization_without_a_duration_is_refused(capsys, argv, needs) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and one_line(err).startswith(f"--utilization needs {needs} "), err


def test_utilization_with_tokens_is_the_durations(capsys) -> None:
    code, out, err = run(["train", "qwen2.5-0.5b", "--device", "h100-sxm", "--tokens", "1B", "--utilization", "0.4",
                          "--json"], capsys)
    assert code in (0, 1), err
    assert json.loads(out)["duration"]["utilization"] == 0.4


@pytest.mark.parametrize("budget, free", [(["--memory", "8GiB"], 8 * 2**30), (["--free", "7GiB"], 7 * 2**30)])
def test_auto_fit_on_a_gpu_of_no_catalog_memory_takes_the_memory_given(capsys, budget, free) -> None:
    code, out, err = run(["fit", "qwen3-30b-a3b", "--device", "gpu", *budget, "--engine", "llamacpp", "--auto",
                          "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    # the auto-fit filled the one GPU it was told of (its margin, llama.cpp's --fit-target, kept apart)
    assert data["fits"] is True and data["free"] == [free], data["free"]


def test_a_rate_whose_ceilings_are_past_the_range_names_the_rate(capsys) -> None:
    code, _, err = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "1048576", "--request-rate",
                        "1000000000"], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith("--request-rate: 1e+09 requests/s is not carried"), line
    assert "concurrency" not in line and "lower --request-rate" in line, line


def _item(argv: list[str], name: str, capsys) -> dict:
    code, out, err = run([*argv, "--json"], capsys)
    assert code in (0, 1), err
    return next(i for i in json.loads(out)["items"] if i["name"] == name)


def _sizes(text: str) -> list[int]:
    return [parse_bytes(m) for m in re.findall(r"\d+(?:\.\d+)? [KMGT]iB", text)]


@pytest.mark.parametrize("extra", [[], ["--n-gpu-layers", "20"]])
def test_llamacpp_weights_text_adds_up_to_its_item(capsys, extra) -> None:
    argv = ["infer", "llama-3.1-8b", "--engine", "llamacpp", "--weights", "q4_k_m", *extra]
    dev, host = _item(argv, "weights", capsys), _item(argv, "weights_host", capsys)
    parts = dev["formula"].split("(", 1)[1].split(")", 1)[0]  # "Q4_K 3.40 GiB, Q6_K 1.17 GiB, F32 1.02 MiB"
    total, less = _sizes(dev["formula"].split(")", 1)[1])[:2]  # "= 4.58 GiB, less 281.81 MiB kept in host memory"
    assert abs(sum(_sizes(parts)) - total) <= 0.01 * 2**30  # the parts add up to the total (2 decimals each)
    assert abs(less - host["bytes"]) <= 0.01 * 2**20 * 1024  # the part said to stay on the host is weights_host
    assert abs(total - less - dev["bytes"]) <= 0.02 * 2**30, dev["formula"]  # and the rest is the device item


def test_recurrent_state_text_shows_the_tp_shard(capsys) -> None:
    item = _item(["infer", "qwen3-next-80b-a3b", "--engine", "vllm", "--tp", "4"], "recurrent_state", capsys)
    # Qwen3-Next-80B-A3B config.json: 36 linear-attention layers; conv channels 2 x 16 key heads x 128 + 32 value heads
    # x 128 = 8192, kernel 4 (3 cached); SSM state 32 value heads x 128 x 128 = 4096 x 128; bf16 (2 B)
    shard = (8192 * 3 * 2 + 4096 * 128 * 2) / 4
    assert "/ 4 (TP shard" in item["formula"], item["formula"]
    stated = _sizes(item["formula"].split("/ 4 (TP shard", 1)[1])[0]
    assert abs(stated - shard) < 0.01 * 2**10, (stated, shard)
    page = _sizes(item["formula"].split("padded to a", 1)[1])[0]
    assert page >= shard and item["bytes"] == 36 * page


def test_recurrent_state_text_adds_up_with_replicated_groups(capsys) -> None:
    """review31 D1: a Mamba-2 model with one B/C group at TP 4 carries 3 replicated groups per shard (vLLM
    extra_groups_for_head_shards); the printed terms must multiply and add up to the stated shard."""
    item = _item(["infer", "granite-4.0-h-tiny", "--engine", "vllm", "--tp", "4"], "recurrent_state", capsys)
    text = item["formula"]
    m = re.search(r"\(conv (\d+) ch \(incl\. (\d+) replicated group channels, eq\. 4\) x (\d+) x ([\d.]+) B "
                  r"\(\w+\) \+ ssm (\d+) x (\d+) x ([\d.]+) B \(\w+\)\) / (\d+) \(TP shard", text)
    assert m, text
    ch, rep, klen, cb, d_inner, d_state, sb, tp = (float(g) for g in m.groups())
    # granite-4.0-h-tiny config.json: hidden 1536 x mamba_expand 2 = d_inner 3072, mamba_d_state 128, mamba_n_groups 1,
    # mamba_d_conv 4 (3 cached), bf16; TP 4 adds 4 - 1 = 3 groups of B and C: 2 x 3 x 128 = 768 channels
    assert (ch, rep, klen, d_inner, d_state, tp) == (3072 + 2 * 128 + 768, 768, 3, 3072, 128, 4), text
    shard = (ch * klen * cb + d_inner * d_state * sb) / tp
    stated = _sizes(text.split("/ 4 (TP shard", 1)[1])[0]
    assert abs(stated - shard) < 0.01 * 2**10, (stated, shard)
    assert abs(shard - ((3328 + 768) * 3 * 2 + 3072 * 128 * 2) / 4) < 1e-9


def test_size_limit_is_stated_in_a_unit_the_parser_reads(capsys) -> None:
    code, _, err = run(["infer", "llama-3.1-8b", "--memory", "1025PiB"], capsys)
    line = one_line(err)
    assert code == 2 and "1024 PiB" in line and "EiB" not in line, line
    assert parse_bytes("1024PiB") == 2**60  # the limit, written as the message says it, is read back


@pytest.mark.parametrize("command", [["fit"], ["infer"], ["train", "--method", "lora"]])
def test_an_alias_resolution_is_said(capsys, command) -> None:
    argv = [command[0], "llama-3.1-8b", "--device", "h100", *command[1:], "--json"]
    code, out, err = run(argv, capsys)
    assert code in (0, 1), err
    data = json.loads(out)
    assumptions = data["memory"]["assumptions"] if command == ["fit"] else data["assumptions"]  # fit: its estimate's
    (dev,) = [a for a in assumptions if a["name"] == "device"]
    assert dev["value"] == "h100-sxm" and dev["why"].startswith("alias 'h100' -> h100-sxm"), dev
    code, out, _ = run([*argv[:3], "h100-sxm", *argv[4:]], capsys)  # the id itself: no alias said
    data = json.loads(out)
    assumptions = data["memory"]["assumptions"] if command == ["fit"] else data["assumptions"]
    assert not any(a["why"].startswith("alias") for a in assumptions if a["name"] == "device")

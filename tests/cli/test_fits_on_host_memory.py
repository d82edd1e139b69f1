"""`models --fits-on` and host RAM (issue #16): it had no --host-memory, so a model that fits only with experts in
host memory was always named at its smallest format with host RAM "unchecked", and the `fit --auto` command it
printed carried --memory as raw bytes (25769803776). Now --host-memory (the quantity reader: "64GiB" and "64 GB")
reaches fit --auto's own rule (recommend.experts_in_host), and the printed command reads back to the same answer.
The truth each claim is checked against is `fit --auto` itself, run on the named format."""

from __future__ import annotations

import shlex

from cli_capture import run, run_json
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on, experts_in_host

MODEL = "qwen3-next-80b-a3b-thinking"
ASKED = ("--context", "32k", "--memory", "24GiB")


def _printed_command(*argv: str) -> list[str]:
    _, out, _ = run("models", "--fits-on", "rtx-4090", "qwen3-next", *argv)
    (line,) = [ln for ln in out.splitlines() if "fits with experts in host memory" in ln]
    return shlex.split(line[line.index("llmsizer fit "):line.index(" --auto") + len(" --auto")])


def test_host_memory_names_the_best_format_whose_host_share_fits() -> None:
    for text in ("64GiB", "64 GB"):
        code, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED, "--host-memory", text)
        assert data["host_memory"] in (64 * 2**30, 64 * 10**9)
        h = data["models"][0]["experts_in_host"]
        assert h is not None and h["host_memory_checked"] is True
        assert h["format_rule"] == "highest-quality format that fits both sides"
        # fit --auto with that host RAM fits the named format, and refuses the next better one
        _, auto = run_json("fit", MODEL, "--device", "rtx-4090", "--engine", "llamacpp", "--weights", h["weights"],
                           *ASKED, "--host-memory", text, "--auto")
        assert auto["fits"] is True and auto["flags"] == h["flags"] and h["host_bytes"] <= data["host_memory"]
    # without it: the smallest format, unchecked (unchanged)
    _, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED)
    assert data["models"][0]["experts_in_host"]["host_memory_checked"] is False


def test_too_little_host_memory_is_no_claim() -> None:
    _, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED, "--host-memory", "4GiB")
    assert data["models"][0]["experts_in_host"] is None
    code, auto = run_json("fit", MODEL, "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q2_k",
                          *ASKED, "--host-memory", "4GiB", "--auto")
    assert code == 1 and auto["fits"] is False  # not even the smallest format fits 8 GiB of host RAM


def test_the_printed_command_carries_sizes_as_given_and_reads_back() -> None:
    # before: --memory 25769803776
    words = _printed_command(*ASKED, "--host-memory", "64 GB", "--fit-target", "512MiB", "--engine", "llamacpp")
    assert words[words.index("--memory") + 1] == "24GiB"
    assert words[words.index("--host-memory") + 1] == "64GB"
    assert words[words.index("--fit-target") + 1] == "512MiB"
    _, data = run_json("models", "--fits-on", "rtx-4090", "qwen3-next", *ASKED, "--host-memory", "64 GB",
                       "--fit-target", "512MiB", "--engine", "llamacpp")
    h = data["models"][0]["experts_in_host"]
    code, auto = run_json(*words[1:])
    assert code == 0 and auto["flags"] == h["flags"] and auto["host_memory"] == 64 * 10**9


def test_bad_host_memory_is_one_line_exit_2() -> None:
    code, out, err = run("models", "--fits-on", "rtx-4090", "--host-memory", "lots")
    assert code == 2 and "--host-memory" in err and len(err.strip().splitlines()) == 1
    code, _, err = run("models", "--host-memory", "64GiB")  # without --fits-on: refused, not ignored
    assert code == 2 and "--host-memory needs --fits-on" in err
    code, _, err = run("models", "--fits-on", "desktop-ddr5-4800-2ch", "--host-memory", "64GiB")
    assert code == 2 and "--memory" in err and len(err.strip().splitlines()) == 1


def test_python_reads_host_memory_as_text() -> None:
    spec = load_model(MODEL)
    opt = best_option_on(spec, "rtx-4090", context=32768, memory=24 * 2**30)
    as_text = experts_in_host(spec, opt, "rtx-4090", context=32768, memory=24 * 2**30, host_memory="64 GB")
    as_bytes = experts_in_host(spec, opt, "rtx-4090", context=32768, memory=24 * 2**30, host_memory=64 * 10**9)
    assert as_text is not None and as_text == as_bytes and as_text["host_memory_checked"] is True

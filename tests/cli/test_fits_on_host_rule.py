"""probe3 #6: `models --fits-on` with experts in host memory whose host RAM was checked counts as fitting.

`models gpt-oss-120b --fits-on rtx-4090 --context 32k --host-memory 64GiB` said "fits with experts in host memory
... checked", then "0 of 1 models fit", exit 1, while `fit --auto` with the same host memory says FITS, exit 0. A
row whose host RAM was checked now counts as fitting (exit 0; the answer's ``fitting``), as fit --auto counts it;
unchecked, it does not."""

from __future__ import annotations

from cli_capture import run, run_json

ASKED = ("--fits-on", "rtx-4090", "--context", "32k")


def test_a_host_checked_row_fits_as_fit_auto_says() -> None:
    code, out, _ = run("models", "gpt-oss-120b", *ASKED, "--host-memory", "64GiB")
    assert code == 0 and "1 of 1 model fits (1 with experts in host memory" in out, out
    code_json, data = run_json("models", "gpt-oss-120b", *ASKED, "--host-memory", "64GiB")
    h = data["models"][0]["experts_in_host"]
    assert code_json == 0 and h["host_memory_checked"] is True and data["fitting"] == [data["models"][0]["id"]]
    # the independent surface: fit --auto on the same device and host memory
    code, auto = run_json("fit", "gpt-oss-120b", "--device", "rtx-4090", "--context", "32k", "--host-memory",
                          "64GiB", "--auto")
    assert code == 0 and auto["fits"] is True and auto["flags"] == h["flags"]


def test_an_unchecked_row_does_not_count() -> None:
    code, out, _ = run("models", "gpt-oss-120b", *ASKED)
    assert code == 1 and "0 of 1 model fits" in out and "unchecked" in out, out

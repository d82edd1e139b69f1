"""Python reads a quantity written as text as the CLI and request files read it (issue #16 probe finding 3:
``estimate_inference(memory="24GiB")`` and ``context="128K"`` were refused while ``image_size="WxH"`` was taken).

Truth: the CLI's own answer for the same spellings (``infer --json``), and the CLI's own error text.
"""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer import InferenceWorkload, TrainingWorkload, estimate_inference
from llmsizer.errors import InputError


def test_estimate_inference_reads_the_cli_spellings() -> None:
    code, cli = run_json("infer", "llama-3.1-8b", "--context", "128K", "--memory", "24GiB", "--headroom", "10%",
                         "--concurrency", "2", "--json")
    est = estimate_inference("llama-3.1-8b", context="128K", memory="24GiB", headroom="10%", concurrency="2")
    assert est.to_dict()["totals"] == cli["totals"]
    assert est.to_dict()["items"] == cli["items"]


def test_workloads_hold_the_numbers_the_text_means() -> None:
    w = InferenceWorkload(context="128K", memory="24GiB", headroom="10%", output_tokens="1k", concurrency="4")
    assert (w.context, w.memory, w.headroom, w.output_tokens, w.concurrency) == (131072, 24 * 2**30, 0.1, 1024, 4)
    assert TrainingWorkload(memory="80GB", headroom="5%").memory == 80 * 10**9


@pytest.mark.parametrize(("field", "flag", "text"), [("context", "--context", "lots"), ("memory", "--memory", "24"),
                                                      ("headroom", "--headroom", "x")])
def test_the_same_one_line_error(field: str, flag: str, text: str) -> None:
    code, out, err = run("infer", "llama-3.1-8b", flag, text)
    assert code == 2
    cli_reason = err.strip().splitlines()[-1].split(f"argument {flag}: ", 1)[1].removesuffix(" (see --help)")
    with pytest.raises(InputError) as e:
        estimate_inference("llama-3.1-8b", **{field: text})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{field}: ") and cli_reason in msg

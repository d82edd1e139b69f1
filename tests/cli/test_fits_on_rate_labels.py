"""probe20 C1: ``models --fits-on apple-m3-max-64gb`` read "tok/s/user 7.4, tok/s total 2.7" for Llama 3.3 70B, a
total below the rate of its one user. Both are right: the total is the output tokens over each whole request, its
TTFT included (a 61 s prefill of the 3,840-token prompt here), the per-user rate is the decode's. The columns now say
so: "decode tok/s/user", then "tok/s total incl. TTFT"."""

from __future__ import annotations

import re

import pytest

from cli_capture import run, run_json

ARGV = ("models", "--fits-on", "apple-m3-max-64gb")


def test_the_total_column_names_the_ttft_that_puts_it_below_the_decode_rate() -> None:
    code, text, _ = run(*ARGV)
    assert code == 0
    _, data = run_json(*ARGV)
    header = next(line for line in text.splitlines() if line.startswith("name "))
    columns = re.split(r"\s{2,}", header.strip())
    user, total = columns.index("decode tok/s/user"), columns.index("tok/s total incl. TTFT")
    assert user < total
    m = next(x for x in data["models"] if x["id"] == "meta-llama/Llama-3.3-70B-Instruct")
    assert data["concurrency"] == 1 and m["status"] == "meets"
    # one request in flight (Little's law): N output tokens over its TTFT plus N at the decode rate; N is fit's
    # default, min(256, context / 2) (specs/workload.py default_output_tokens)
    n = min(256, data["context"] // 2)
    assert n / m["tokens_per_second"] == pytest.approx(m["ttft_seconds"] + n / m["tokens_per_second_per_user"],
                                                       rel=1e-9)
    assert m["tokens_per_second"] < m["tokens_per_second_per_user"]
    row = next(re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.startswith("llama-3.3-70b"))
    assert row[user] == f"{m['tokens_per_second_per_user']:,.1f}" and row[total] == f"{m['tokens_per_second']:,.1f}"

"""probe20 C3: infer said "SGLang ... admits 4 sequences of this length at once" where fit said "token pool ... holds 5
sequence(s) ...; it runs 4" for the same pool: two quantities under one verb. infer's line now names both where they
differ, as fit's does. Truth, by hand: the token pool holds floor(max_total_num_tokens / context) whole sequences (364,532 // 65,536
= 5), and SGLang runs at most max_running_requests of them (a hybrid model's max_mamba_cache_size 12 // 3 = 4: SGLang
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, cited at estimate/inference/sglang.py)."""

from __future__ import annotations

import re

from cli_capture import run

ARGS = ("nemotron-h-56b-base-8k", "--engine", "sglang", "--context", "64k", "--concurrency", "8",
        "--allow-long-context")


def test_infer_names_the_cap_and_the_pool_as_fit_does():
    code, out, err = run("infer", *ARGS, "--device", "h100-sxm", "--tp", "2")
    assert code in (0, 1), err
    m = re.search(r"max_total_num_tokens ([\d,]+) .*max_running_requests (\d+); admits (\d+) sequences of this "
                  r"length at once \(its running cap; the token pool holds (\d+)\)", out)
    assert m, out
    tokens, cap, admits, holds = (int(g.replace(",", "")) for g in m.groups())
    assert holds == tokens // 65536 and admits == min(cap, holds) < holds  # (the verdict on the cap: D1's change)


def test_one_number_when_the_pool_binds():
    code, out, _ = run("infer", "llama-3.3-70b-instruct", "--device", "h100-sxm", "--engine", "sglang", "--weights",
                       "awq-int4", "--context", "16k", "--concurrency", "8")
    m = re.search(r"max_total_num_tokens ([\d,]+) .*; admits (\d+) sequences of this length at once\n", out)
    assert code == 1 and m, out
    assert int(m.group(2)) == int(m.group(1).replace(",", "")) // 16384

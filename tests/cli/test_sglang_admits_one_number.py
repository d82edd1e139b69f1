"""probe20 C3: infer said "SGLang ... admits 4 sequences of this length at once" where fit said "token pool ... holds 5
sequence(s) ...; it runs 4" for the same pool: two quantities under one verb. infer's line now names both where they
differ, and which bound admits fewer (sglcap: the MambaPool's room is memory, judged as the token pool's; a given
--max-running-requests is a running cap). Truth, by hand: the token pool holds floor(max_total_num_tokens / context)
whole sequences (364,532 // 65,536 = 5); a hybrid model's MambaPool admits max_mamba_cache_size 12 // 5 = 2 (SGLang
0.5.23's extra_buffer strategy for Nemotron-H: 3 + 2 tracking slots per running request, cited at
estimate/inference/sglang.py); a given cap of 2 runs 2 of the 93,431 // 16,384 = 5 the pool holds."""

from __future__ import annotations

import re

from cli_capture import run

ARGS = ("nemotron-h-56b-base-8k", "--engine", "sglang", "--context", "64k", "--concurrency", "8",
        "--allow-long-context")
LINE = (r"max_total_num_tokens ([\d,]+) .*max_running_requests ([\d,]+); admits (\d+) sequences of this length at "
        r"once \((its running cap|the MambaPool's room); the token pool holds (\d+)\)")


def test_infer_names_the_mamba_pool_and_the_token_pool_as_fit_does():
    code, out, err = run("infer", *ARGS, "--device", "h100-sxm", "--tp", "2")
    assert code == 1, err  # 8 requested, the MambaPool admits 2: does not fit (sglcap)
    m = re.search(LINE, out)
    assert m, out
    tokens, admits, why, holds = int(m[1].replace(",", "")), int(m[3]), m[4], int(m[5])
    assert re.search(r"max_mamba_cache_size 12 requests'", out), out
    assert holds == tokens // 65536 == 5 and admits == 12 // 5 and why == "the MambaPool's room"


def test_infer_names_a_given_running_cap_and_the_token_pool():
    code, out, err = run("infer", "llama-3.3-70b-instruct", "--device", "h100-sxm", "--engine", "sglang", "--weights",
                         "awq-int4", "--context", "16k", "--concurrency", "8", "--max-num-seqs", "2")
    assert code == 0, err  # a configured cap queues the rest and still fits
    m = re.search(LINE, out)
    assert m, out
    tokens, admits, why, holds = int(m[1].replace(",", "")), int(m[3]), m[4], int(m[5])
    assert holds == tokens // 16384 and admits == 2 < holds and why == "its running cap"


def test_one_number_when_the_pool_binds():
    code, out, _ = run("infer", "llama-3.3-70b-instruct", "--device", "h100-sxm", "--engine", "sglang", "--weights",
                       "awq-int4", "--context", "16k", "--concurrency", "8")
    m = re.search(r"max_total_num_tokens ([\d,]+) .*; admits (\d+) sequences of this length at once\n", out)
    assert code == 1 and m, out
    assert int(m.group(2)) == int(m.group(1).replace(",", "")) // 16384

"""One user's decode rate with no prompt competing is the core's (SpeedEstimate.decode_tokens_per_second_per_user,
1 / t_d: one token per decode step), which fit's text reads (review32 N2: render/fit_text.py computed
``1.0 / s.decode.seconds`` itself). The truth: the decode step's own seconds, inverted here."""

from __future__ import annotations

import re

import llmsizer
from cli_capture import run
from llmsizer.units import format_rate


def test_the_idle_per_user_rate_is_one_token_per_decode_step() -> None:
    s = llmsizer.fit("llama-3.1-8b", "h100-sxm", context=4096, concurrency=8).speed
    assert s is not None and s.decode is not None
    assert s.decode_tokens_per_second_per_user == 1.0 / s.decode.seconds
    # the loaded rate (decode steps stretched by the other prompts' prefill, eq. Q5) is at most the idle one
    assert s.load is not None and s.tokens_per_second_per_user is not None
    assert s.tokens_per_second_per_user <= s.decode_tokens_per_second_per_user
    assert s.decode_tokens_per_second == s.concurrency * s.decode_tokens_per_second_per_user


def test_fit_text_says_the_cores_rate() -> None:
    code, out, err = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--concurrency", "8", "--context", "4096")
    assert code == 0, err
    said = re.search(r"\(([\d.,]+) per user\)", out)
    s = llmsizer.fit("llama-3.1-8b", "h100-sxm", context=4096, concurrency=8).speed
    assert said and s is not None and said.group(1) == format_rate(1.0 / s.decode.seconds), (said, out)

"""`infer --max-context` states the largest context as a number --context reads back (s7probe): it printed
"largest context that fits: 40.19K tokens (40,192)", a decimal K, while --context 40k means 40 x 1024 = 40,960
tokens (units.parse_tokens: k = 1024 for tokens), more than fits."""

from __future__ import annotations

import re

from cli_capture import run


def test_the_stated_context_fits_when_read_back() -> None:
    args = ("llama-3.1-8b", "--engine", "vllm", "--memory", "24GiB")
    code, out, _ = run("infer", *args, "--max-context")
    m = re.search(r"largest context that fits: (\S+) tokens at concurrency 1", out)
    assert code == 0 and m is not None, out
    stated = m.group(1).replace(",", "")
    assert run("infer", *args, "--context", stated)[0] == 0  # what the line says fits, fits
    assert run("infer", *args, "--context", str(int(stated) + 16))[0] == 1  # the next block of 16 does not


def test_the_answer_is_memorys_limit_not_a_search_ceiling() -> None:
    """The search used to stop at 2^20 tokens, so 1000 TiB answered "1,048,576" as if memory ended there. Llama-3.1-8B's
    bf16 KV is 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token, so 2^31 tokens hold 256 TiB,
    well inside 1000 TiB: the answer is the largest context an input may state, and the line says so."""
    code, out, _ = run("infer", "llama-3.1-8b", "--memory", "1000TiB", "--max-context")
    assert code == 0 and "largest context that fits: 2,147,483,648 tokens" in out, out
    assert "largest context an input may state" in out
    # between the old ceiling and 2^31: 80 GiB x 0.9 holds 242,797 tokens (above 131,072 = max_position_embeddings),
    # and 400 GiB holds about 400/80 times the KV share (less the allocator reserve the default expects): past 2^20,
    # which the old ceiling cut to 1,048,576
    code, out, _ = run("infer", "llama-3.1-8b", "--memory", "400GiB", "--max-context")
    m = re.search(r"largest context that fits: (\S+) tokens", out)
    assert code == 0 and m is not None and int(m.group(1).replace(",", "")) > 1 << 20, out
    assert "largest context an input may state" not in out

"""`infer --max-context` states the largest context as a number --context reads back (s7probe): it printed
"largest context that fits: 40.19K tokens (40,192)", a decimal K, while --context 40k means 40 x 1024 = 40,960
tokens (units.parse_tokens: k = 1024 for tokens), more than fits."""

from __future__ import annotations

import contextlib
import io
import re

from llmsizer.cli.main import main


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def test_the_stated_context_fits_when_read_back() -> None:
    args = ("llama-3.1-8b", "--engine", "vllm", "--memory", "24GiB")
    code, out = _run("infer", *args, "--max-context")
    m = re.search(r"largest context that fits: (\S+) tokens at concurrency 1", out)
    assert code == 0 and m is not None, out
    stated = m.group(1).replace(",", "")
    assert _run("infer", *args, "--context", stated)[0] == 0  # what the line says fits, fits
    assert _run("infer", *args, "--context", str(int(stated) + 16))[0] == 1  # the next block of 16 does not

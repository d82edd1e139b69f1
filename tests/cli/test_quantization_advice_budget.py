"""The quantization advice states the budget it compared against (render7 #3): it said "needs 6.74 GiB of 7.96 GiB
with 10% headroom kept", the card's memory, while the fit compared the need with 7.96 GiB x (1 - 0.1) = 7.16 GiB,
a number the reader had to work out. The truth each line is checked against: the smallest card of that label in the
catalog and eq. (1) of estimate/verdict.py worked by hand; with no --headroom, llama.cpp's own margin (issue #16):
1024 MiB per GPU, llama.cpp common/common.h:483 (ggml-org/llama.cpp@0c1e57098) ``fit_params_target``."""

from __future__ import annotations

import re

import pytest

from cli_capture import run
from llmsizer.catalog.hardware import load_catalog
from llmsizer.units import format_bytes

LINE = re.compile(r"^quantization: fits a (\d+) GB card at \S+ on llama\.cpp with \S+ context x 1 \(needs ([\d.]+) GiB "
                  r"of a (\S+ \S+) budget: (\S+ \S+) (?:x \(1 - ([\d.]+) headroom\)|- (\S+ \S+) fit_target)\)$")
LLAMACPP_FIT_TARGET = 1024 * 2**20  # llama.cpp common/common.h:483: 1024 * 1024*1024 bytes per device


@pytest.mark.parametrize("headroom", [None, "0.2"])
def test_each_line_names_the_budget_of_its_card(headroom: str | None) -> None:
    args = ["recommend", "llama-3.1-8b", "--context", "8192"] + (["--headroom", headroom] if headroom else [])
    code, out, err = run(*args)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("quantization:")]
    assert lines
    cat = load_catalog()
    for ln in lines:
        m = LINE.match(ln)
        assert m is not None, ln
        gb, need, budget, card, hr, target = m.groups()
        smallest = min(d.memory_bytes for d in cat.devices.values() if d.kind == "gpu" and d.memory is not None
                       and d.memory.unit == "GB" and not d.chip and d.memory_bytes and int(d.memory.raw) == int(gb))
        assert card == format_bytes(smallest)
        if headroom is None:  # llama.cpp's margin, not a share
            assert hr is None and target == format_bytes(LLAMACPP_FIT_TARGET)
            assert budget == format_bytes(smallest - LLAMACPP_FIT_TARGET)
        else:
            assert float(hr) == float(headroom)
            assert budget == format_bytes(int(smallest * (1 - float(headroom))))
        assert float(need) <= float(budget.split()[0])

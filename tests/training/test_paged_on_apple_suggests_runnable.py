"""A paged bitsandbytes optimizer on an Apple chip is refused naming an optimizer that runs there.

bitsandbytes pages its states in CUDA unified memory (cudaMallocManaged), which Metal lacks, and its 8-bit blockwise
step is registered for cpu, cuda and xpu only (bitsandbytes/backends/*/ops.py @37d2a93, tag 0.50.1; none in
backends/mps): the refusal of paged-adamw-8bit suggested adamw-8bit, which the estimate then warns has no MPS step
(probe15fixb). Each suggestion must itself be accepted on the same Apple chip without the 8-bit warning."""

from __future__ import annotations

import re

import pytest

from cli_capture import run

APPLE = ("--device", "apple-m4-max-128gb")


@pytest.mark.parametrize("optimizer", ["paged-adamw-8bit", "paged-lion-8bit", "paged-adamw", "paged-lion"])
def test_the_suggested_optimizer_runs_on_the_apple_chip(optimizer: str) -> None:
    code, _, err = run("train", "llama-3.2-1b", "--method", "lora", "--optimizer", optimizer, *APPLE)
    assert code == 2, err
    named = re.search(r"use (\S+)", err)
    assert named is not None, err
    suggested = named.group(1)
    assert not suggested.endswith("-8bit")
    code, out, err = run("train", "llama-3.2-1b", "--method", "lora", "--optimizer", suggested, *APPLE, "--json")
    assert code == 0, err
    assert "8-bit optimizer step for MPS" not in out

"""Metal's recommendedMaxWorkingSetSize, the Apple GPU's budget (estimate/efficiency.py apple_gpu_working_set), against
the figures real llama.cpp / ollama logs print (efficiency.APPLE_WORKING_SET_LOGS, each with its address): every cited
figure is reproduced to the printed 0.01 MB from the Mac's memory alone. Before (probe9 #1) the share was 0.75 at
every size, 12.00 GiB on a 16 GB Mac whose logs say 10922.67 MiB = 10.67 GiB."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.device import usable_memory

CLASSIC = [log for log in E.APPLE_WORKING_SET_LOGS if not log.newer_macos]


@pytest.mark.parametrize("log", CLASSIC, ids=lambda g: f"{g.memory_gib}GB-{g.source.split('/')[-1]}")
def test_each_cited_log_figure_is_reproduced(log: E.MetalWorkingSetLog) -> None:
    memory = log.memory_gib * 2**30  # Apple's "16GB" is 16 GiB (sysctl hw.memsize 17179869184)
    predicted = memory * E.apple_gpu_working_set(memory)
    assert round(predicted / log.unit, 2) == pytest.approx(log.figure_mb, abs=0.011)


def test_newer_macos_figures_lie_above_the_rule_and_within_the_stated_high() -> None:
    """macOS 26 reports more (M5 Max 128 GB: 107.52 GiB = 0.84): never counted on, but named as the high."""
    for log in E.APPLE_WORKING_SET_LOGS:
        if log.newer_macos:
            share = log.figure_mb * log.unit / (log.memory_gib * 2**30)
            assert E.apple_gpu_working_set(log.memory_gib * 2**30) < share
            assert share == pytest.approx(E.APPLE_WORKING_SET_NEWER_MACOS_HIGH, abs=0.005)


def test_a_16gb_mac_budgets_from_two_thirds() -> None:
    """The catalog's apple-m1-16gb: 10922.67 MiB (llama-cpp-python #687), not the 12 GiB of a 0.75 share."""
    dev = load_catalog().find("apple-m1-16gb")
    usable, notes = usable_memory(dev)
    assert usable is not None and round(usable / 2**20, 2) == pytest.approx(10922.67, abs=0.01)
    assert any(a.name == "apple_gpu_working_set" and a.value == round(2 / 3, 4) for a in notes)
    big = load_catalog().find("apple-m3-max-64gb")
    assert usable_memory(big, record=False)[0] == 49152 * 2**20  # llama.cpp #1870: 49152.00 MiB on 64 GB

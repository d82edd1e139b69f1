"""One answer says vLLM's pool one way (probe32 D8): recommend's weights-alone line said "the 71.68 GiB pool (79.65 GiB x
(1 - 0.1 headroom))" while fit's said "gpu_memory_utilization 0.90 x 79.18 GiB = 71.26 GiB" for the same H100.

Truth: vLLM reserves ceil(total_memory x gpu_memory_utilization) (vllm 0.19.1 vllm/v1/worker/utils.py:408-410
``request_memory``), total_memory being torch.cuda.mem_get_info's total (vllm/utils/mem_utils.py:104), "the fraction
of GPU memory to be used for the model executor" (vllm/config/cache.py:41-48): the catalog's sourced CUDA total
(``memory_cuda``, below nvidia-smi's memory.total by the driver's reserve), times 1 - headroom (0.9 by default).
"""

from __future__ import annotations

import math
import re

import pytest

from cli.cli_run import answer
from llmsizer.catalog.hardware import load_catalog
from llmsizer.units import format_bytes

POOL = re.compile(r"gpu_memory_utilization ([\d.]+) x ([\d.]+ [KMGT]?i?B) \(CUDA's total\) = ([\d.]+ [KMGT]?i?B)")


@pytest.mark.parametrize("headroom", [None, "0.2"])
def test_every_vllm_pool_is_utilization_x_cuda_total(headroom: str | None,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["recommend", "qwen3.5-122b-a10b", "--context", "32k", "--concurrency", "8", "--engine", "vllm",
            "--weights", "fp8"] + (["--headroom", headroom] if headroom else [])
    _, data = answer(argv, capsys)
    devices = load_catalog().devices
    util = 1 - float(headroom or 0.1)
    checked = 0
    for row in data["options"] + data["rejected"]:
        for reason in row["reasons"]:
            if devices[row["device"]].kind == "gpu":  # the pool is vLLM's, not eq. (1)'s budget
                assert "headroom)" not in reason, reason
            for u, total, pool in POOL.findall(reason):
                dev = devices[row["device"]]
                sourced = dev.memory_cuda is not None and dev.memory_cuda.base
                cuda = int(dev.memory_cuda.base) if sourced else dev.memory_bytes  # (else the memory, taken as it)
                assert dev.kind == "gpu" and cuda, row
                assert float(u) == pytest.approx(util)
                assert total == format_bytes(cuda)
                assert pool == format_bytes(math.ceil(cuda * util))
                checked += 1
    assert checked  # the single-H100 rows: the fp8 weights alone (116 GiB) are more than the pool


@pytest.mark.parametrize("tp", ["1", "2"])
def test_fit_says_the_pool_one_way_whether_it_admits_too_few_or_none(tp: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """review40 D5: with --tp 2 the admission line said "(gpu_memory_utilization 0.90 of 79.65 GiB)" (nvidia-smi's
    memory.total) where --tp 1's start-up line said "0.90 x 79.18 GiB (CUDA's total) = 71.26 GiB"."""
    _, data = answer(["fit", "qwen3.5-122b-a10b", "--device", "h100-sxm", "--count", "2", "--engine", "vllm",
                      "--weights", "fp8", "--context", "32k", "--concurrency", "8", "--tp", tp], capsys)
    dev = load_catalog().devices["h100-sxm"]
    assert dev.memory_cuda is not None
    cuda = int(dev.memory_cuda.base)
    said = [w for w in data["warnings"] if w.startswith("does not fit")]
    assert said and not data["fits"]
    for line in said:
        assert "utilization 0.90 of" not in line, line
        found = POOL.findall(line)
        assert found and all(t == format_bytes(cuda) and p == format_bytes(math.ceil(cuda * 0.9))
                             for _, t, p in found), line

"""A pool engine's need and budget say the same as its verdict (s7probe).

Llama-3.1-70B (80 layers, 8 KV heads of 128, config.json) served by vLLM on 4 x H100 SXM at 32k x 16: each GPU
holds 1/4 of 70.55B bf16 weights (32.9 GiB) and 1/4 of 16 x 32768 tokens x 80 x 2 x 8 x 128 x 2 B of KV (40 GiB),
more than vLLM's pool of gpu_memory_utilization 0.9 x 81559 MiB (nvidia-smi) = 71.7 GiB: it does not fit. The plan
printed "79.05 GiB per device at peak, budget 79.65 GiB (DOES NOT FIT)" and `capacity check` "needs 79.05 GiB per
device, over the 79.65 GiB budget": a need below its budget reported as not fitting, because the budget was the
device memory while vLLM leaves 10 % of it unused whatever the load.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from llmsizer.cli.main import main
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

GiB, MiB = 2**30, 2**20
H100_SMI = 81559 * MiB  # nvidia-smi memory.total of an H100 80GB HBM3
REQUEST = ("version: 1\njobs:\n  - name: chat70\n    kind: inference\n    model: {name: llama-3.1-70b}\n"
           "    quantization: none\n    engine: vllm\n    resources: {device: h100-sxm, count: 4}\n"
           "    traffic:\n      concurrency: {typical: 16, peak: 16}\n      context: {typical: 32k, peak: 32k}\n"
           "      output: {typical: 500, peak: 500}\n    service: {duration: 3 months}\n")


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_plan_vllm_need_over_budget_when_it_does_not_fit() -> None:
    job = make_plan(parse_request(REQUEST, source="t.yaml"), alternatives=False).jobs[0]
    mem = job.section("memory")
    kv_per_gpu = 16 * 32768 * 80 * 2 * 8 * 128 * 2 / 4
    weights_per_gpu = 70_553_706_496 * 2 / 4
    assert mem.value("fits") is False
    assert weights_per_gpu + kv_per_gpu > 0.9 * H100_SMI  # the independent verdict
    need, budget = mem.value("need_peak"), mem.value("budget")
    assert need > weights_per_gpu + kv_per_gpu
    # the budget is vLLM's pool (0.9 x memory) and the CUDA context outside it, not the whole device
    assert 0.9 * H100_SMI < budget < 0.9 * H100_SMI + 1.1 * GiB < H100_SMI
    assert need > budget


def test_capacity_check_does_not_call_a_smaller_need_over_budget(tmp_path: Path) -> None:
    req = tmp_path / "r.yaml"
    req.write_text(REQUEST)
    inv = Path(__file__).resolve().parents[2] / "examples" / "provider" / "inventory.yaml"
    code, out = _run("capacity", "check", str(req), "--inventory", str(inv), "--no-db")
    # the capacity check's memory verdict prints fit's own memory line (probe16 D-F: one quantity on every surface)
    m = re.search(r"\[memory\].*this workload needs ([\d.]+) GiB of the ([\d.]+) GiB it offers", out)
    assert code == 1 and m is not None, out
    assert float(m.group(1)) > float(m.group(2))


def test_fit_says_how_much_of_the_pool_the_workload_needs() -> None:
    code, out = _run("fit", "llama-3.1-70b", "--engine", "vllm", "--device", "h100-sxm", "--count", "4",
                     "--context", "32k", "--concurrency", "16")
    m = re.search(r"this workload needs ([\d.]+) GiB of the ([\d.]+) GiB it offers", out)
    assert code == 1 and m is not None, out
    assert float(m.group(1)) > float(m.group(2))

"""A serving plan renders the fit's own estimate: the sequences vLLM's KV pool has room for and the sequences it runs
at once are ``infer --json``'s ``details`` for the same workload (one answer), and they are two numbers, not one:
vLLM's scheduler runs at most ``max_num_seqs`` (vllm/v1/core/sched/scheduler.py ``Scheduler.schedule``), whatever
room its pool has (estimate/inference/common.py eq. R1).

A prefill-only plan (output 0) serves as many requests per second as its prefill can take: the prompts in service
share the device's FLOP/s, so the rate is bounded by the device's peak over the FLOPs of one prompt (Kaplan et al.
2020, arXiv 2001.08361, Table 1: C_forward >= 2 N per token, N the non-embedding parameters).

Qwen3-0.6B (Qwen/Qwen3-0.6B config.json): 28 layers, 8 KV heads of head_dim 128, bf16 KV: 28 x 2 x 8 x 128 x 2 B
= 114,688 B per token; 0.44B non-embedding parameters (its Hugging Face model card).
"""

from __future__ import annotations

import math

import pytest

from cli.cli_run import answer, run
from llmsizer.estimate import efficiency as E
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

KV_BYTES_PER_TOKEN = 28 * 2 * 8 * 128 * 2  # Qwen3-0.6B config.json, bf16
NON_EMBEDDING_PARAMS = 0.44e9  # Qwen/Qwen3-0.6B model card: "Number of Paramaters (Non-Embedding): 0.44B"
L4_BF16_DENSE = 242.5e12 / 2  # NVIDIA L4 datasheet: BF16 Tensor Core 242.5 TFLOPS with sparsity, half dense
VLLM_BIG_GPU_MAX_NUM_SEQS = 1024  # vllm/engine/arg_utils.py EngineArgs batch defaults, GPUs >= 70 GiB (not A100)


def _job(body: str):
    return make_plan(parse_request(job_yaml("inference", body), source="t.yaml"), alternatives=False).jobs[0]


def _pool_plan_and_infer(device: str, context: int, concurrency: int, output: int,
                         capsys: pytest.CaptureFixture[str]) -> tuple:
    j = _job(f"""\
    model: {{name: qwen3-0.6b}}
    engine: vllm
    traffic: {{concurrency: {{typical: {concurrency}, peak: {concurrency}}}, context: {{typical: {context}, peak: {context}}}, output: {{typical: {output}, peak: {output}}}}}
    resources: {{device: {device}, count: 1}}
    """)
    _, est = answer(["infer", "qwen3-0.6b", "--engine", "vllm", "--device", device, "--context", str(context),
                     "--concurrency", str(concurrency), "--output-tokens", str(output)], capsys)
    return j, j.section("memory"), est["details"]


def test_pool_room_above_max_num_seqs(capsys: pytest.CaptureFixture[str]) -> None:
    """A 0.6B model on an H200 at 1k tokens: the pool has room for more sequences than vLLM runs (its
    max_num_seqs, 1024 on a card of >= 70 GiB), so the plan shows both, as ``infer --json`` does."""
    j, mem, d = _pool_plan_and_infer("h200", 1024, 2000, 200, capsys)
    room, running = mem.value("kv_room"), mem.value("running")
    assert room == d["max_concurrency_at_context"]
    assert running == d["running_sequences"]
    # independent: the pool's bytes over one sequence's KV (1024 tokens, whole 16-token blocks), and vLLM's cap
    assert room == d["kv_pool_bytes"] // (1024 * KV_BYTES_PER_TOKEN)
    assert room > VLLM_BIG_GPU_MAX_NUM_SEQS
    assert running == min(2000, VLLM_BIG_GPU_MAX_NUM_SEQS, room) == VLLM_BIG_GPU_MAX_NUM_SEQS
    assert "976 of 2000 wait in its queue" in mem.get("running").label
    # the need beside the reservation is the workload's share of the pool that infer reports
    assert mem.value("need_peak") == d["workload_bytes"]
    assert "memory for the 1024 run at once" in mem.get("need_peak").label


def test_pool_is_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    """The same model on an H100 at 4k tokens x 400: the pool holds fewer sequences than are in flight and fewer
    than max_num_seqs, so it bounds what runs (and the peak does not fit)."""
    j, mem, d = _pool_plan_and_infer("h100-sxm", 4096, 400, 500, capsys)
    room, running = mem.value("kv_room"), mem.value("running")
    assert (room, running) == (d["max_concurrency_at_context"], d["running_sequences"])
    assert room == d["kv_pool_bytes"] // (4096 * KV_BYTES_PER_TOKEN)
    assert running == room < 400 < VLLM_BIG_GPU_MAX_NUM_SEQS
    assert mem.value("fits") is False


def test_plan_text_says_both_counts(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    req = tmp_path / "r.yaml"
    req.write_text(job_yaml("inference", """\
    model: {name: qwen3-0.6b}
    engine: vllm
    traffic: {concurrency: {typical: 2000, peak: 2000}, context: {typical: 1k, peak: 1k}, output: {typical: 200, peak: 200}}
    resources: {device: h200, count: 1}
    """))
    _, est = answer(["infer", "qwen3-0.6b", "--engine", "vllm", "--device", "h200", "--context", "1024",
                     "--concurrency", "2000", "--output-tokens", "200"], capsys)
    d = est["details"]
    code, out, err = run(["plan", str(req), "--no-alternatives"], capsys)
    assert code in (0, 1), err
    assert (f"vLLM runs {d['running_sequences']} sequences at once per replica (KV pool room for "
            f"{d['max_concurrency_at_context']} of the peak context)") in out


@pytest.mark.parametrize("output", [0, 1])
@pytest.mark.parametrize("level, concurrency, context", [("typical", 8, 2048), ("peak", 16, 4096)])
def test_prefill_only_rate_is_bounded_by_prefill(level: str, concurrency: int, context: int, output: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Output 0 on an L4: the requests in service are prefilled together, so a request is held for the batch's
    prefill, not for one prompt's TTFT on an idle replica (which made 8 in service / 25 ms = 318 requests/s, more
    FLOP/s than the L4 has: 2.3 TB of request logs a year). One output token changes little: the prefill of the
    prompts in service still bounds the time each is held (it made 8 / (25 ms + 14 ms) = 205 requests/s)."""
    j = _job(f"""\
    model: {{name: qwen3-0.6b}}
    engine: vllm
    traffic: {{concurrency: {{typical: 8, peak: 16}}, context: {{typical: 2k, peak: 4k}}, output: {{typical: {output}, peak: {output}}}}}
    resources: {{device: l4, count: 1}}
    operations: {{logs: {{retention: 30 days}}}}
    """)
    rate = j.section("network").value(f"requests_{level}")
    # independent bound: every prompt token costs at least 2 N FLOPs (Kaplan Table 1), at most the L4's dense peak
    assert rate * context * 2 * NON_EMBEDDING_PARAMS <= L4_BF16_DENSE
    # the same fit's speed (fit --json): the batch's prefill throughput (eq. 3 over the prompts in service) / prompt
    _, f = answer(["fit", "qwen3-0.6b", "--device", "l4", "--engine", "vllm", "--context", str(context),
                   "--concurrency", str(concurrency), "--output-tokens", str(output)], capsys)
    p, b = f["speed"]["prefill"], f["speed"]["concurrency"]
    assert b == f["running_sequences"] == concurrency
    batch = max(b * p["compute_seconds"], p["memory_seconds"]) + b * p["comm_seconds"] + p["overhead_seconds"]
    prefill_tokens_per_second = b * context / batch
    bound = prefill_tokens_per_second / context
    assert p["bound"] == "compute"  # so batching adds no throughput: the rate is one prompt's TTFT, b times over
    assert bound == pytest.approx(1 / f["speed"]["ttft_idle_seconds"], rel=1e-12)  # one prompt's, on an idle replica
    # a request is held for its (loaded, formulas/serving_queue.py Q6', Q9a) TTFT, and with one token one decode step
    # more; the server's own time per request (eq. Q9's H, efficiency.VLLM_API_SERVER_SECONDS) is spent off the device
    # while the other requests in flight are prefilled: at most H / concurrency more per request (output 0 too: the
    # prefill-only service is loaded, its requests cycling through the server and the prefill)
    held = 1 / bound + E.VLLM_API_SERVER_SECONDS.expected / concurrency
    assert 0.9 / held <= rate <= bound
    if level == "typical":  # the logs kept: the typical rate x 30 days x 1024 B per request (formulas/storage.py)
        assert j.section("storage").value("logs") == math.ceil(rate * 30 * 86400 * 1024)


@pytest.mark.parametrize("model, resources, fit_args, engine, machines", [
    ("qwen3-0.6b", "{device: l4, count: 1}", ["--device", "l4"], "vllm", 1),  # 600 in flight: 344 queue
    ("llama-3.1-8b", "{device: l4, count: 2}", ["--device", "l4", "--count", "2"], "llamacpp", 1),  # layer split
    ("llama-3.1-8b", "{device: h100-sxm, count: 8, nodes: 2}", ["--device", "h100-sxm", "--count", "4"], "vllm", 2),
])
def test_plan_figures_are_fits(model: str, resources: str, fit_args: list[str], engine: str, machines: int,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """Each figure a serving plan shares with ``fit --json`` (one machine at its share of the load) is fit's: the
    layout, memory, speeds, the queue's wait, and the request rate by Little's law over the requests fit runs at once
    (formulas/network.py eq. 9, formulas/serving_queue.py eq. Q1)."""
    ct, cp, xt, xp, ot, op = (64, 600, 512, 512, 100, 200) if engine == "vllm" and machines == 1 else \
        (2, 4, 2048, 4096, 200, 400) if engine == "llamacpp" else (64, 128, 2048, 4096, 256, 512)
    j = _job(f"""\
    model: {{name: {model}}}
    engine: {engine}
    traffic: {{concurrency: {{typical: {ct}, peak: {cp}}}, context: {{typical: {xt}, peak: {xp}}}, output: {{typical: {ot}, peak: {op}}}}}
    resources: {resources}
    """)
    mem, spd, net = j.section("memory"), j.section("speed"), j.section("network")
    fits = {}
    for level, c, x, o in (("typical", ct, xt, ot), ("peak", cp, xp, op)):
        _, fits[level] = answer(["fit", model, *fit_args, "--engine", engine, "--context", str(x), "--concurrency",
                                 str(-(-c // machines)), "--output-tokens", str(o)], capsys)
    fp, ft = fits["peak"], fits["typical"]
    assert j.hardware.engine == fp["engine"] and j.hardware.tensor_parallel == fp["tensor_parallel"]
    assert j.hardware.replicas == fp["replicas"] * machines
    assert mem.value("fits") == fp["fits"]
    assert mem.value("reserved") == (fp["memory_per_device"] if engine == "vllm" else None)
    assert mem.value("need_peak") == fp["memory"]["details"].get("workload_bytes", fp["memory_per_device"])
    for level, f, c, o in (("typical", ft, ct, ot), ("peak", fp, cp, op)):
        sp = f["speed"]
        assert spd.value(f"ttft_{level}") == sp["ttft_seconds"]
        assert spd.value(f"tps_user_{level}") == sp["tokens_per_second_per_user"]
        in_service = min(c, f["running_sequences"] * machines)
        held = sp["ttft_seconds"] + o / sp["tokens_per_second_per_user"]
        assert net.value(f"requests_{level}") == pytest.approx(in_service / held, rel=1e-12)
    assert spd.value("tps_total_typical") == pytest.approx(ft["tokens_per_second_total"] * machines, rel=1e-12)
    assert spd.value("queue_wait_peak") == (fp["details"]["queue_wait_seconds"] if fp["details"]["queued_sequences"]
                                            else None)
    if engine == "vllm" and machines == 1:  # the case is the one with a queue: 600 in flight, max_num_seqs 256
        assert fp["details"]["queued_sequences"] == 600 - 256 and spd.value("queue_wait_peak") > 0

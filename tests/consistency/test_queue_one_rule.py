"""The serving queue says one thing everywhere (issue #16): the sequences a pool engine runs at once are
estimate/inference/common.py eq. R1, running = min(concurrency, its running cap, its KV pool's room), and the
requests it does not run wait in its queue, queued = concurrency - running: in `infer --json`, `fit --json`, the
plan and the web API, whether the cap or the pool is the limit.

What the engines do: vLLM's Scheduler.schedule (vllm/v1/core/sched/scheduler.py @00024d31) stops taking waiting
requests once ``len(self.running) == self.max_num_running_reqs`` (max_num_seqs) and at the first waiting request
whose ``kv_cache_manager.allocate_slots`` returns None ("The request cannot be scheduled"; it stays in
``self.waiting``). Before this test `infer qwen3-0.6b --device h100-sxm --engine vllm --concurrency 2000 --context
1024` said running 588 (the pool) but queued 976 (= 2000 - max_num_seqs 1024) and a running_sequences assumption of
1024: running + queued was 1564, not 2000.

The pool's room is counted by hand: Qwen3-0.6B's config.json (the catalog's verbatim copy) gives 2 (K and V) x
num_hidden_layers x num_key_value_heads x head_dim x 2 B (bf16) of KV per token; a sequence of 1024 tokens is 64
whole vLLM blocks of 16, so the pool holds kv_pool_bytes // (1024 x that) sequences (SGLang: max_total_num_tokens =
pool // bytes per token, over 1024 tokens per sequence).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cli.cli_run import answer
from llmsizer.estimate.inference.common import running_and_queued
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

CONFIG = json.loads((Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"
                     / "qwen3-0.6b.json").read_text())["config"]
KV_PER_TOKEN = 2 * CONFIG["num_hidden_layers"] * CONFIG["num_key_value_heads"] * CONFIG["head_dim"] * 2  # bf16
VLLM_BIG_GPU_MAX_NUM_SEQS = 1024  # vllm/engine/arg_utils.py EngineArgs batch defaults, GPUs >= 70 GiB (not A100)
CONTEXT, CONCURRENCY, OUTPUT = 1024, 2000, 200

# (engine, device, which bound is the limit)
CASES = [("vllm", "h100-sxm", "pool"), ("vllm", "h200", "cap"), ("sglang", "h100-sxm", "pool")]


def _flags(engine: str, device: str) -> list[str]:
    return ["qwen3-0.6b", "--engine", engine, "--device", device, "--context", str(CONTEXT), "--concurrency",
            str(CONCURRENCY), "--output-tokens", str(OUTPUT)]


def _pool_room(engine: str, d: dict) -> int:
    """The sequences of CONTEXT tokens the pool holds, counted from config.json and the pool's bytes."""
    assert CONTEXT % 16 == 0  # whole vLLM blocks: no rounding up to a block
    if engine == "vllm":
        return int(d["kv_pool_bytes"]) // (CONTEXT * KV_PER_TOKEN)
    return int(d["kv_pool_bytes"]) // KV_PER_TOKEN // CONTEXT


@pytest.mark.parametrize("engine, device, limit", CASES)
def test_infer_running_plus_queued_is_the_concurrency(engine: str, device: str, limit: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _, out = answer(["infer", *_flags(engine, device), "--json"], capsys)
    d = out["details"]
    room = _pool_room(engine, d)
    assert d["max_concurrency_at_context"] == room
    cap = d["running_cap"]
    if engine == "vllm":
        assert cap == VLLM_BIG_GPU_MAX_NUM_SEQS
    running = min(CONCURRENCY, cap, room)
    assert (room < cap) == (limit == "pool") and running < CONCURRENCY  # the premise: which bound binds
    assert d["running_sequences"] == running
    assert d["queued_sequences"] == CONCURRENCY - running
    named = [a for a in out["assumptions"] if a["name"] == "running_sequences"]
    assert len(named) == 1 and named[0]["value"] == running
    assert f"{CONCURRENCY - running} of the {CONCURRENCY} requests wait in its queue" in named[0]["why"]
    # the need is sized for what the engine would run with room (min(concurrency, cap)); the pool's shortfall there
    # is the verdict
    assert d["need_sequences"] == min(CONCURRENCY, cap)
    assert d["fits"] is (limit == "cap")


@pytest.mark.parametrize("engine, device, limit", CASES)
def test_fit_and_infer_give_one_queue(engine: str, device: str, limit: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _, i = answer(["infer", *_flags(engine, device), "--json"], capsys)
    _, f = answer(["fit", *_flags(engine, device), "--json"], capsys)
    assert f["replicas"] == 1
    running = i["details"]["running_sequences"]
    assert f["running_sequences"] == f["details"]["running_sequences"] == running
    assert f["details"]["queued_sequences"] == i["details"]["queued_sequences"] == CONCURRENCY - running
    assert f["speed"]["concurrency"] == running  # the decode batch is the running sequences
    # eq. Q3 over the running slots, each held one request's time (its TTFT + its output at the decode speed)
    sp = f["speed"]
    held = sp["ttft_seconds"] + OUTPUT / sp["tokens_per_second_per_user"]
    assert f["details"]["queue_wait_seconds"] == pytest.approx(held * (CONCURRENCY / running - 1), rel=1e-9)
    assert f["fits"] == i["details"]["fits"]


@pytest.mark.parametrize("engine, device, limit", CASES[:2])
def test_plan_runs_what_infer_runs(engine: str, device: str, limit: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = (f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: qwen3-0.6b}}\n"
            f"    quantization: none\n    engine: {engine}\n    traffic:\n"
            f"      concurrency: {{typical: {CONCURRENCY}, peak: {CONCURRENCY}}}\n"
            f"      context: {{typical: {CONTEXT}, peak: {CONTEXT}}}\n"
            f"      output: {{typical: {OUTPUT}, peak: {OUTPUT}}}\n    resources: {{device: {device}, count: 1}}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    _, i = answer(["infer", *_flags(engine, device), "--json"], capsys)
    d = i["details"]
    mem = job.section("memory")
    running = mem.value("running")
    assert running == d["running_sequences"] == min(CONCURRENCY, d["running_cap"], _pool_room(engine, d))
    assert f"the other {CONCURRENCY - running} of {CONCURRENCY} wait in its queue" in mem.get("running").label
    assert mem.value("kv_room") == _pool_room(engine, d)


@pytest.mark.parametrize("engine, device, limit", CASES)
def test_web_api_says_what_the_cli_says(engine: str, device: str, limit: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    body = {"model": "qwen3-0.6b", "engine": engine, "device": device, "context": CONTEXT,
            "concurrency": CONCURRENCY, "output_tokens": OUTPUT}
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        wi = client.post("/api/v1/infer", json=body).json()
        wf = client.post("/api/v1/fit", json=body).json()
    _, i = answer(["infer", *_flags(engine, device), "--json"], capsys)
    _, f = answer(["fit", *_flags(engine, device), "--json"], capsys)
    for key in ("running_sequences", "queued_sequences"):
        assert wi["details"][key] == i["details"][key] == wf["details"][key] == f["details"][key]
    assert wi["details"]["running_sequences"] + wi["details"]["queued_sequences"] == CONCURRENCY
    assert wf["details"]["queue_wait_seconds"] == f["details"]["queue_wait_seconds"]


def _name(node: ast.expr) -> str:
    """The last name of ``node`` (``w.concurrency`` -> concurrency, ``int(running)`` -> running), '' for others."""
    while isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    if isinstance(node, ast.BinOp):
        return _name(node.left)
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def test_eqs_r1_r2_have_one_home() -> None:
    """running = min(concurrency, bounds) and queued = concurrency - running are computed only in
    estimate/inference/common.py ``running_and_queued``: fit's queue, the estimate's queued_sequences and
    running_sequences assumption, the plan's running figures and recommend's replicas all call it (before, fit.py,
    compose.py, plan/inference.py and recommend.py each spelled one or both)."""
    src = Path(__file__).resolve().parents[2] / "src" / "llmsizer"
    in_flight = {"concurrency", "in_flight"}
    spelled = []
    for f in sorted(src.rglob("*.py")):
        if f == src / "estimate" / "inference" / "common.py":  # the home
            continue
        for node in ast.walk(ast.parse(f.read_text("utf-8"))):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _name(node.left) in in_flight
                    and any(k in _name(node.right) for k in ("running", "total"))):
                spelled.append(f"{f.relative_to(src)}:{node.lineno} {ast.unparse(node)}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min"
                    and len(node.args) > 1 and _name(node.args[0]) in in_flight
                    and any("running" in ast.unparse(a) for a in node.args[1:])):
                spelled.append(f"{f.relative_to(src)}:{node.lineno} {ast.unparse(node)}")
    assert spelled == [], spelled
    assert running_and_queued(10, 4, None) == (4, 6) and running_and_queued(3, 4) == (3, 0)
    assert running_and_queued(5, None) == (5, 0) and running_and_queued(5, 0) == (0, 5)

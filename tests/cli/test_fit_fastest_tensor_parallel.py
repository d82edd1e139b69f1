"""Serving on one machine's N devices, fit takes the tensor-parallel layout with the most output tokens/s at the
stated concurrency, among the degrees vLLM can shard that fit (estimate/fit.py ``fit_memory``, ``fastest_first``):
at a low load the largest degree (each sequence's step reads 1/t of the weights), at a high load a smaller degree
whose replicas run more sequences in parallel can deliver more; a tie goes to the smaller degree.

Truth, computed here apart from fit: the candidates are vLLM's sharding rule restated (vllm 0.19.1:
vllm/config/model.py:1110-1116, heads divide by tp; vllm/distributed/utils.py:53-64, KV heads split or replicated:
as tests/cli/test_fit_tensor_parallel_choice.py), each candidate's speed is the public speed API
(``llmsizer.estimate_speed``) at its replica's share of the load (ceil(c / replicas)) with the instance's
interconnect read from the catalog, loaded as fit reports its total (estimate/serving_load.py under_load: the
replica's requests' prompts compete with its decode, formulas/serving_queue.py eqs. Q5b, Q7), its total counts only the replicas the sequences occupy (min(replicas,
c / per replica) replicas' worth), and its memory verdict is ``llmsizer.estimate_inference`` on the catalog's device
memory. fit's answer must be the maximum of those totals: its tokens/s, its degree (the smallest of equals).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from cli.cli_run import answer
from llmsizer import estimate_inference, estimate_speed, fit, load_catalog, load_model
from llmsizer.estimate.fit import fastest_first
from llmsizer.estimate.serving_load import under_load

CONTEXT, OUTPUT = 4096, 256  # fit's defaults: a 4,096-token context, min(256, context / 2) of it generated


def vllm_shards(heads: int, kv: int, tp: int) -> bool:
    return heads % tp == 0 and (kv % tp == 0 if tp < kv else tp % kv == 0)


def layouts(model: str, target: str, concurrency: int, count: int | None = None,
            context: int = CONTEXT) -> dict[int, tuple[float, bool]]:
    """{degree: (total output tokens/s, fits)} for every degree vLLM shards ``model`` over within one machine:
    an instance, or ``count`` (at most 8) of a device."""
    cat = load_catalog()
    hw = cat.find(target)
    inst = hw if count is None else None
    spec, n, dev = load_model(model), count or hw.device_count, hw.device if inst is not None else hw
    link = cat.interconnect(inst.interconnect if inst is not None else dev.interconnect)
    out: dict[int, tuple[float, bool]] = {}
    for t in range(1, n + 1):
        if n % t or not vllm_shards(spec.num_heads, spec.num_kv_heads, t):
            continue
        replicas = n // t
        per = math.ceil(concurrency / replicas)
        sp = estimate_speed(spec, dev, t, weights_format="bf16", prompt_tokens=context - OUTPUT,
                            output_tokens=OUTPUT, concurrency=per, engine="vllm",
                            link_bandwidth=float(link.bandwidth.base) if t > 1 else None,
                            nvlink_mesh=(link.kind == "nvlink") if t > 1 else None)
        mem = estimate_inference(spec, engine="vllm", tensor_parallel=t, context=context, concurrency=per,
                                 memory=dev.memory_bytes, device="gpu")
        # the output at this load: every request's prompt competes with the decode (the speed's load, eqs. Q5b, Q7)
        chunk = next(a.value for a in mem.assumptions if a.name == "max_num_batched_tokens")
        sp = under_load(sp, "vllm", chunk)
        assert sp is not None and sp.load is not None and sp.tokens_per_second is not None
        total = sp.tokens_per_second * min(replicas, concurrency / per)
        out[t] = (total, bool(mem.details["fits"]))
    return out


def fastest(cands: dict[int, tuple[float, bool]]) -> int:
    best = max(total for total, fits in cands.values() if fits)
    return min(t for t, (total, fits) in cands.items() if fits and total == pytest.approx(best, rel=1e-9))


def check(model: str, instance: str, concurrency: int) -> tuple[Any, dict[int, tuple[float, bool]]]:
    cands = layouts(model, instance, concurrency)
    r = fit(model, instance, concurrency=concurrency)
    assert r.fits and r.tokens_per_second_total is not None
    best = max(total for total, fits in cands.values() if fits)
    assert r.tokens_per_second_total == pytest.approx(best, rel=1e-9), (r.tensor_parallel, cands)
    assert r.tensor_parallel == fastest(cands) and r.replicas * r.tensor_parallel == 8
    return r, cands


def test_low_load_the_largest_degree_is_fastest() -> None:
    """Llama-3.1-8B (32 heads, 8 KV heads) on 8 x A100 over NVLink (aws-p4d.24xlarge), 4 users: TP 8 (one replica)
    beats 4 x 2. (On 8 x L40S over PCIe, aws-g6e.48xlarge, TP 8's NCCL all-reduces cross two PCIe islands, 63.8 us
    each against 22.3 us within four GPUs (estimate/engines.py PCIE_ONE_SWITCH_GPUS, review25 D4), so 4 x 2 is the
    faster already at 4 users.)"""
    r, cands = check("llama-3.1-8b", "aws-p4d.24xlarge", 4)
    assert r.tensor_parallel == 8 == max(cands) and all(fits for _, fits in cands.values())


def test_high_load_a_smaller_degree_with_replicas_is_fastest() -> None:
    """The same model and machine at 256 users: TP 4 x 2 replicas (128 sequences each) outrun TP 8 x 1 (256)."""
    r, cands = check("llama-3.1-8b", "aws-g6e.48xlarge", 256)
    assert r.tensor_parallel < 8 and r.replicas > 1
    assert cands[r.tensor_parallel][0] > cands[8][0] and cands[8][1]  # TP 8 fits, and is slower


def test_a_tie_goes_to_the_smaller_degree() -> None:
    """Equal tokens/s: the smaller degree first (fit takes the first that fits). No catalog case ties at a load any
    more: one user on 8 x H100 tied in decode (vLLM's overlapped host step bounds TP 4 and TP 8 alike, estimate/
    engines.py STEP_HOST) but TP 8 prefills the prompt faster, and the loaded total counts the TTFT; fit takes it."""
    assert fastest_first({8: 100.0, 4: 100.0, 2: 50.0, 1: None}) == [8, 4, 2, 1]  # a degree unknown: largest first
    assert fastest_first({8: 100.0, 4: 100.0, 2: 50.0}) == [4, 8, 2]
    r, cands = check("llama-3.1-8b", "aws-p5.48xlarge", 1)
    assert cands[8][0] > cands[4][0] and r.tensor_parallel == 8


def test_a_smaller_degree_that_fits_where_the_largest_does_not() -> None:
    """Qwen3-30B-A3B (32 heads, 4 KV heads) on 8 x H100, 96 users of 32k tokens: at TP 8 each device holds a copy of
    one of the 4 KV heads for all 96 sequences (vLLM replicates KV heads beyond their count) and the pool is short;
    at TP 4 x 2 each device holds one KV head of 48 sequences and fits. fit took TP 8 and said DOES NOT FIT before."""
    cands = layouts("qwen3-30b-a3b", "h100", 96, count=8, context=32768)
    assert not cands[8][1] and any(fits for t, (_, fits) in cands.items() if t < 8)  # the premise
    r = fit("qwen3-30b-a3b", "h100", 8, context=32768, concurrency=96)
    assert r.fits and r.tensor_parallel == fastest(cands)
    assert r.tokens_per_second_total == pytest.approx(max(tot for tot, fits in cands.values() if fits), rel=1e-9)


def test_the_choice_and_the_runner_up_are_stated() -> None:
    r, cands = check("llama-3.1-8b", "aws-g6e.48xlarge", 256)
    why = next(a.why for a in r.assumptions if a.name == "tensor_parallel")
    assert why.startswith(f"TP {r.tensor_parallel} x {r.replicas}: {cands[r.tensor_parallel][0]:,.0f} output tokens/s "
                          "at 256 sequences, the fastest that fits")
    assert f"TP 8 x 1: {cands[8][0]:,.0f} tokens/s" in why
    ranked = [d["tensor_parallel"] for d in r.details["tensor_parallel_layouts"]]
    assert ranked == sorted(cands, key=lambda t: (-cands[t][0], t))


def test_cli_and_python_give_the_same_layout(capsys: pytest.CaptureFixture[str]) -> None:
    for conc in (16, 256):
        r = fit("llama-3.1-8b", "aws-g6e.48xlarge", concurrency=conc)
        code, data = answer(["fit", "llama-3.1-8b", "--device", "aws-g6e.48xlarge", "--concurrency", str(conc)],
                            capsys)
        assert code == 0
        assert (data["tensor_parallel"], data["replicas"]) == (r.tensor_parallel, r.replicas)
        assert data["tokens_per_second_total"] == pytest.approx(r.tokens_per_second_total, rel=1e-12)


def test_a_degree_given_to_the_python_api_is_kept() -> None:
    """fit(..., tensor_parallel=t) sizes and times that degree only (a plan times its typical load on the layout fit
    chose for the peak); a degree that does not divide the count is one line, not a TypeError."""
    from llmsizer.errors import InputError

    cands = layouts("llama-3.1-8b", "aws-g6e.48xlarge", 256)
    r = fit("llama-3.1-8b", "aws-g6e.48xlarge", concurrency=256, tensor_parallel=8)
    assert (r.tensor_parallel, r.replicas) == (8, 1)
    assert r.tokens_per_second_total == pytest.approx(cands[8][0], rel=1e-9)
    with pytest.raises(InputError, match="tensor_parallel 3 does not divide the 8 devices"):
        fit("llama-3.1-8b", "aws-g6e.48xlarge", tensor_parallel=3)

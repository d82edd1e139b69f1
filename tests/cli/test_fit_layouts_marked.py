"""fit's list of the tensor-parallel layouts it considered (``details.tensor_parallel_layouts``, the text's 'tensor
parallel layouts' line) marks each one fits / does not fit with its memory per device against the budget, and the
choice states its rule; each layout's ``memory_per_device`` / ``budget_per_device`` mean what the answer's top-level
keys mean (a pool engine's: the pool reserved and the device memory) and ``verdict_need_per_device`` /
``verdict_budget_per_device`` are what its verdict compared (a pool engine's: the workload's share, the pool's offer); a degree pinned with --tp answers that layout (estimate/fit.py ``fit_memory``,
``verdict_need``; render/fit_text.py ``layouts_line``).

Truth, apart from fit: each layout's memory per device and verdict are ``infer --tp t --json`` on the same device at
that layout's share of the load (ceil(c / replicas) sequences on the fullest replica); the weights of
Llama-3.1-70B come from its config.json (meta-llama/Llama-3.1-70B-Instruct: hidden 8192, 80 layers, intermediate
28672, 64 heads and 8 KV heads of 128, vocabulary 128256, untied embeddings): at TP 1 the bf16 weights alone are
larger than an H100 SXM's 80 GB, so TP 1 cannot fit and must be marked so.
"""

from __future__ import annotations

import math

import pytest

from cli.cli_run import answer, run
from llmsizer.units import format_bytes

MODEL, DEVICE = "llama-3.1-70b-instruct", "h100-sxm"
H, LAYERS, FF, KV_DIM, VOCAB = 8192, 80, 28672, 8 * 128, 128256
WEIGHT_BYTES = 2 * (LAYERS * (2 * H * H + 2 * H * KV_DIM + 3 * H * FF) + 2 * VOCAB * H)  # bf16, norms left out
H100_SXM_BYTES = 80 * 10**9  # NVIDIA H100 SXM5 datasheet: 80 GB


def fit_json(capsys: pytest.CaptureFixture[str], *extra: str, engine: str = "transformers") -> dict:
    code, data = answer(["fit", MODEL, "--device", DEVICE, "--count", "8", "--engine", engine, *extra], capsys)
    assert code in (0, 1)
    return data


def infer_at(capsys: pytest.CaptureFixture[str], tp: int, concurrency: int, engine: str) -> dict:
    _, data = answer(["infer", MODEL, "--device", DEVICE, "--engine", engine, "--tp", str(tp), "--concurrency",
                      str(concurrency)], capsys)
    return data


@pytest.mark.parametrize("engine,concurrency", [("transformers", 1), ("transformers", 8), ("vllm", 64)])
def test_each_layout_is_marked_with_infer_s_memory_and_verdict(capsys: pytest.CaptureFixture[str], engine: str,
                                                               concurrency: int) -> None:
    data = fit_json(capsys, "--concurrency", str(concurrency), engine=engine)
    layouts = data["details"]["tensor_parallel_layouts"]
    assert sorted(d["tensor_parallel"] for d in layouts) == [1, 2, 4, 8]  # 64 heads, 8 KV heads: every divisor of 8
    for d in layouts:
        t = d["tensor_parallel"]
        inf = infer_at(capsys, t, math.ceil(concurrency / (8 // t)), engine)
        det = inf["details"]
        assert d["fits"] is bool(det["fits"]), t
        # memory_per_device and budget_per_device mean what the answer's own keys mean: the device total (a pool
        # engine's: the pool it reserves whatever the load) and the budget (a pool engine's: the device memory)
        assert (d["memory_per_device"], d["budget_per_device"]) == (inf["totals"]["device"]["bytes"],
                                                                   det["memory_budget"]), t
        verdict = (d["verdict_need_per_device"], d["verdict_budget_per_device"])
        if engine == "vllm":  # the pool is reserved whatever the load: the verdict compares the workload's share
            assert verdict == (det["workload_bytes"], det["workload_budget_bytes"]), t
            assert d["verdict_need_per_device"] < d["memory_per_device"] or not d["fits"], t  # two meanings, apart
        else:
            assert verdict == (d["memory_per_device"], d["budget_per_device"]), t
        if WEIGHT_BYTES / t > H100_SXM_BYTES:  # the weights alone are larger than the device
            assert d["fits"] is False, t
    assert next(d for d in layouts if d["tensor_parallel"] == 1)["fits"] is False  # the premise: 141 GB of weights
    taken = next(d for d in layouts if d["tensor_parallel"] == data["tensor_parallel"])
    assert (taken["memory_per_device"], taken["budget_per_device"]) == (data["memory_per_device"],
                                                                       data["budget_per_device"])


def test_a_pool_engine_s_text_says_the_workload_share_and_the_pool(capsys: pytest.CaptureFixture[str]) -> None:
    """Under vLLM each layout's words say what its verdict compared (the workload's share of what the pool offers)
    beside the pool it reserves, in the memory line's units (infer's numbers at that layout)."""
    code, out, _ = run(["fit", MODEL, "--device", DEVICE, "--count", "8", "--engine", "vllm"], capsys)
    line = next(ln for ln in out.splitlines() if ln.startswith("tensor parallel layouts"))
    det = infer_at(capsys, 8, 1, "vllm")
    words = (f"TP 8 x 1: {{}}needs {format_bytes(det['details']['workload_bytes'])} of the "
             f"{format_bytes(det['details']['workload_budget_bytes'])} its pool offers per device "
             f"({format_bytes(det['totals']['device']['bytes'])} reserved), fits (taken)")
    part = next(p for p in line.split(": ", 1)[1].split("; ") if p.startswith("TP 8 x 1"))
    tps = part.split(": ", 1)[1].split("needs", 1)[0]
    assert part == words.format(tps), part


def test_the_text_marks_every_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fit", MODEL, "--device", DEVICE, "--count", "8", "--engine", "transformers"], capsys)
    line = next(ln for ln in out.splitlines() if ln.startswith("tensor parallel layouts"))
    assert "the most output tokens/s of all replicas together among those that fit" in line
    parts = line.split(": ", 1)[1].split("; ")
    assert [p.split(":")[0] for p in parts] == ["TP 1 x 8", "TP 2 x 4", "TP 4 x 2", "TP 8 x 1"]  # a tie: smaller first
    assert parts[0].endswith("does not fit")
    assert all(p.endswith("fits") or p.endswith("fits (taken)") for p in parts[1:])
    assert sum(p.endswith("(taken)") for p in parts) == 1


def test_the_choice_states_its_rule_and_tp8_s_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """Transformers' decode is host-bound (the step's kernel launches, not the weights read): every degree delivers
    the same tokens/s at one sequence, so the rule's tie goes to the smallest degree that fits at its high end too
    (TP 1 does not fit, above). Which that is comes from ``infer --tp t`` apart from fit: the first degree whose
    verdict's high end (``verdict_high``: the components' or the calibrated high end) is within the budget. The why
    says the rule and TP 8's tokens/s and verdict."""
    data = fit_json(capsys)
    by_t = {d["tensor_parallel"]: d for d in data["details"]["tensor_parallel_layouts"]}
    assert len({d["tokens_per_second"] for d in by_t.values()}) == 1  # the premise: a four-way tie
    high_fits = {}
    for t in (2, 4, 8):
        det = infer_at(capsys, t, 1, "transformers")["details"]
        high_fits[t] = bool(det["fits"]) and det["verdict_high"] <= det["memory_budget"]
    want = min(t for t, ok in high_fits.items() if ok)
    assert (data["tensor_parallel"], data["replicas"]) == (want, 8 // want)
    why = next(a["why"] for a in data["assumptions"] if a["name"] == "tensor_parallel")
    assert "the most output tokens/s of all replicas together among the layouts that fit" in why
    assert f"TP 8 x 1: {by_t[8]['tokens_per_second']:,.0f} tokens/s, fits (a tie: the smaller degree taken)" in why
    assert why.startswith(f"TP {want} x {8 // want}: {by_t[want]['tokens_per_second']:,.0f} output tokens/s at 1 "
                          "sequence")
    for t in (t for t in sorted(by_t) if 1 < t < want):  # a smaller tied degree passed over says why
        assert f"TP {t} x {8 // t}: {by_t[t]['tokens_per_second']:,.0f} tokens/s, fits (a tie: fits at the expected " \
               "need only" in why


def test_a_pinned_degree_answers_that_layout(capsys: pytest.CaptureFixture[str]) -> None:
    listed = {d["tensor_parallel"]: d for d in fit_json(capsys)["details"]["tensor_parallel_layouts"]}
    for t in (4, 8):
        pinned = fit_json(capsys, "--tp", str(t))
        assert (pinned["tensor_parallel"], pinned["replicas"]) == (t, 8 // t)
        assert pinned["memory_per_device"] == listed[t]["memory_per_device"]
        assert pinned["budget_per_device"] == listed[t]["budget_per_device"]
        assert pinned["fits"] is listed[t]["fits"]
        tp_note = next(a for a in pinned["assumptions"] if a["name"] == "tensor_parallel")
        assert tp_note["default"] is False and tp_note["why"].startswith("given")

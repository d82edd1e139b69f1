"""fitpp (probe32 D2, D7): `fit`, `recommend`, `models --fits-on`, `plan` and `capacity check` give one answer where
tensor parallelism alone does not fit a deployment and a pipeline layout does.

Before, the hardware searches took `fit --tp 1 --pp 2` through fit's ``with_pipeline_layouts`` while `fit` itself
(no --tp, no --pp) answered only tensor-parallel layouts: Qwen3.5-122B-A10B FP8 on 2 x H100, vLLM, 32k x 8, was
"fits with --tp 1 --pp 2" in `models --fits-on` and `recommend` and DOES NOT FIT (exit 1, no hint) in `fit`; a plan
on 3 x H100 of Qwen3.5-35B-A3B bf16 was an ERROR advising "more devices (tensor parallel)" (16 heads: TP 3 does not
divide them) while `fit --pp 3` fits. The truth here is `fit` asked by the test at the layouts written by hand
(`--pp 1`: tensor parallelism only, and `--pp P`), compared with what each surface answers; no number is copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer import fit
from llmsizer.recommend import best_option_on

M122 = "qwen3.5-122b-a10b"  # 48 layers, 32 attention heads, 2 KV heads
M35 = "qwen3.5-35b-a3b"  # 40 layers, 16 attention heads: TP 3 does not divide them
LOAD = dict(engine="vllm", context=32768, concurrency=8)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def staged() -> dict[str, object]:
    """The hand-written layouts: TP only (`--pp 1`) and `--pp 2`, fp8 on 2 x h100-sxm."""
    return {"tp": fit(M122, "h100-sxm", 2, weights="fp8", pipeline_parallel=1, **LOAD),
            "pp2": fit(M122, "h100-sxm", 2, weights="fp8", pipeline_parallel=2, **LOAD)}


def test_premise_tp_does_not_fit_pp_does(staged) -> None:
    assert not staged["tp"].fits and staged["tp"].tensor_parallel == 2
    assert staged["pp2"].fits and (staged["pp2"].tensor_parallel, staged["pp2"].pipeline_parallel) == (1, 2)


def test_fit_answers_the_pipeline_layout(staged) -> None:
    """fit with no layout given is `fit --pp 2`'s answer (the search's rule), its stages said as fit's choice."""
    r, want = fit(M122, "h100-sxm", 2, weights="fp8", **LOAD), staged["pp2"]
    assert r.fits and r.fits_at is None
    assert (r.tensor_parallel, r.pipeline_parallel, r.replicas, r.memory_per_device) == (
        want.tensor_parallel, want.pipeline_parallel, want.replicas, want.memory_per_device)
    assert r.tokens_per_second_total == want.tokens_per_second_total
    (a,) = [a for a in r.estimate.assumptions if a.name == "pipeline_parallel"]
    assert a.default and "fit's choice" in a.why


def test_cli_fit_rc0_and_pp1_keeps_tp_only(staged) -> None:
    argv = ("fit", M122, "--device", "h100-sxm", "--count", "2", "--engine", "vllm", "--context", "32k",
            "--concurrency", "8", "--weights", "fp8")
    code, out, _ = run(*argv)
    assert code == 0 and "FITS  [vllm, fp8, TP 1 x PP 2]" in out.splitlines()[0]
    code, data = run_json(*argv, "--pp", "1")  # tensor parallelism pinned: fit's answer at it, as before
    assert code == 1 and not data["fits"] and data["memory_per_device"] == staged["tp"].memory_per_device


def test_fits_on_and_recommend_say_what_fit_says(staged) -> None:
    """`models --fits-on`'s row and recommend's 2 x h100-sxm option are fit's answer (memory, layout, tokens/s)."""
    want = staged["pp2"]
    opt = best_option_on(M122, "h100-sxm", 2, **LOAD)
    assert (opt.status, opt.weights_format) == ("meets", "fp8")
    assert (opt.tensor_parallel, opt.pipeline_parallel, opt.memory_per_device, opt.tokens_per_second) == (
        want.tensor_parallel, want.pipeline_parallel, want.memory_per_device, want.tokens_per_second_total)
    code, data = run_json("models", M122, "--fits-on", "h100-sxm", "--count", "2", "--context", "32k",
                          "--concurrency", "8", "--engine", "vllm", "--json")
    (row,) = data["models"]
    assert (row["tensor_parallel"], row["pipeline_parallel"], row["memory_per_device"]) == (
        want.tensor_parallel, want.pipeline_parallel, want.memory_per_device)
    code, rec = run_json("recommend", M122, "--engine", "vllm", "--context", "32k", "--concurrency", "8",
                         "--weights", "fp8", "--json")
    two = [o for o in rec["options"] if o["device"] == "h100-sxm" and o["count"] == 2 and o["instances"] == 1]
    assert two and all((o["tensor_parallel"], o["pipeline_parallel"], o["memory_per_device"]) == (
        want.tensor_parallel, want.pipeline_parallel, want.memory_per_device) for o in two)


def test_fits_on_engine_column_prints_every_layout() -> None:
    """D7: the engine column names `--tp T` whenever the row is not TP 1 (the layout fit takes there), so the row
    copied starts what was sized; TP 1 x PP 2 with both flags."""
    code, out, _ = run("models", "qwen3.5", "--fits-on", "h100-sxm", "--count", "2", "--context", "32k",
                       "--concurrency", "8", "--engine", "vllm")
    rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("qwen3.5-")}
    r35 = fit(M35, "h100-sxm", 2, **LOAD)
    assert r35.fits and r35.tensor_parallel == 2 and r35.pipeline_parallel == 1
    assert f"vllm --tp {r35.tensor_parallel} " in rows[M35]
    assert "vllm --tp 1 --pp 2 " in rows[M122]


REQ3 = """\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {name: qwen3.5-35b-a3b}
    precision: bf16
    quantization: none
    engine: vllm
    traffic:
      concurrency: {typical: 1, peak: 1}
      context: {typical: 4k, peak: 4k}
      output: {typical: 256, peak: 256}
    service: {duration: 1 month}
    resources: {device: h100-sxm, count: 3, pool: training-cluster}
"""


def test_plan_and_capacity_check_on_three_devices(tmp_path: Path) -> None:
    """3 x H100, Qwen3.5-35B-A3B bf16: TP 3 does not divide the 16 heads, so fit's tensor-parallel answer is TP 1
    (3 replicas), which does not hold the weights and the profile in vLLM's pool; `fit --pp 3` fits. The plan and
    the capacity check are that answer: no error, layout TP 1 x PP 3, fit's memory."""
    tp_only = fit(M35, "h100-sxm", 3, weights="bf16", engine="vllm", context=4096, concurrency=1, output_tokens=256,
                  pipeline_parallel=1)
    pp3 = fit(M35, "h100-sxm", 3, weights="bf16", engine="vllm", context=4096, concurrency=1, output_tokens=256,
              pipeline_parallel=3)
    assert not tp_only.fits and tp_only.tensor_parallel == 1 and pp3.fits
    r = fit(M35, "h100-sxm", 3, weights="bf16", engine="vllm", context=4096, concurrency=1, output_tokens=256)
    assert (r.fits, r.tensor_parallel, r.pipeline_parallel, r.memory_per_device) == (
        True, 1, 3, pp3.memory_per_device)
    req = tmp_path / "req.yaml"
    req.write_text(REQ3)
    _, plan = run_json("plan", str(req), "--json")
    (job,) = plan["jobs"]
    assert (job["hardware"]["tensor_parallel"], job["hardware"]["pipeline_parallel"]) == (1, 3)
    assert job["memory_estimate"]["totals"]["device"]["bytes"] == pp3.estimate.total_bytes
    assert not [c for c in plan["checks"] if c["severity"] == "error"]
    # the example inventory with its H100 nodes in the serving pool too (the request names pool serving)
    inv = tmp_path / "inv.yaml"
    inv.write_text((ROOT / "examples/provider/inventory.yaml").read_text().replace(
        "pools: [training, training-cluster]", "pools: [training, training-cluster, serving]"))
    req.write_text(REQ3.replace("pool: training-cluster", "pool: serving"))
    code, checks = run_json("capacity", "check", str(req), "--inventory", str(inv), "--now", "2026-12-01",
                            "--no-db", "--json")
    checks = checks["jobs"]
    (c,) = checks
    assert code == 0 and c["fits"] and c["binding"] is None
    assert c["need"]["memory_per_device"] == pp3.memory_per_device


def test_memory_advice_names_pipeline_stages_and_the_heads() -> None:
    """Where nothing fits, the advice names a tensor-parallel degree dividing the heads or pipeline stages, never
    bare 'tensor parallel' (TP 3 on 16 heads is no layout vLLM starts)."""
    r = fit(M35, "h100-sxm", 1, weights="bf16", engine="vllm", context=4096, concurrency=1)
    assert not r.fits
    said = " ".join((*r.reasons, *r.warnings))
    assert "dividing the 16 attention heads, or pipeline stages" in said
    assert "more devices (tensor parallel)" not in said


def test_plan_without_quantization_takes_the_staged_rung(tmp_path: Path) -> None:
    """No quantization key, 2 x H100, Qwen3.5-122B-A10B at 32k x 8: bf16 fits no layout, and fit's hint is FP8 at
    --tp 1 --pp 2. The plan takes that format as it takes any rung fit names (fit given no layout takes the stages
    itself), so its layout and memory are `fit --weights fp8`'s, and no error is left."""
    want = fit(M122, "h100-sxm", 2, weights="fp8", output_tokens=256, **LOAD)
    hint = fit(M122, "h100-sxm", 2, output_tokens=256, **LOAD).fits_at
    assert hint is not None and (hint["weights"], hint.get("pipeline_parallel")) == ("fp8", 2)
    req = tmp_path / "req.yaml"
    req.write_text(REQ3.replace("qwen3.5-35b-a3b", M122).replace("    precision: bf16\n    quantization: none\n", "")
                   .replace("{typical: 1, peak: 1}", "{typical: 8, peak: 8}")
                   .replace("{typical: 4k, peak: 4k}", "{typical: 32k, peak: 32k}").replace("count: 3", "count: 2"))
    _, plan = run_json("plan", str(req), "--json")
    (job,) = plan["jobs"]
    assert (job["hardware"]["tensor_parallel"], job["hardware"]["pipeline_parallel"]) == (
        want.tensor_parallel, want.pipeline_parallel) == (1, 2)
    assert job["memory_estimate"]["totals"]["device"]["bytes"] == want.estimate.total_bytes
    assert not [c for c in plan["checks"] if c["severity"] == "error"]

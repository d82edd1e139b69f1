"""pplists 1: vLLM 0.10-0.14 stop at start with --async-scheduling and pipeline stages (specs/workload.py
``async_pipeline_refusal``, cited there). `fit` names the pipeline layouts the flag leaves out (review40 D7); the
searches skipped them silently. Now recommend (text and JSON) and the plan's search state them in fit's words (one
home: estimate/fit.py ``stages_left_line``). `models --fits-on` takes no --async-scheduling (its parser refuses it),
so it leaves no layout out. The truth is `fit` on the same deployment, and a release that takes both (0.15.1)."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run, run_json
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

M = "qwen3.5-122b-a10b"  # fp8 on 2 x H100 at 32k x 8: TP 2 does not fit, TP 1 x PP 2 does (test_fit_pipeline_one_answer)
LOAD = ("--engine", "vllm", "--context", "32k", "--concurrency", "8", "--weights", "fp8")
A3 = "gcp-a3-highgpu-2g"  # 2 x h100-sxm, a catalog instance recommend searches


def _fit_line(version: str) -> str:
    """fit's own line on the 2 x H100 instance (without its ', without it ... fits' tail)."""
    code, data = run_json("fit", M, "--device", A3, *LOAD, "--engine-version", version, "--async-scheduling")
    assert code == 1 and not data["fits"]
    (line,) = [w for w in data["warnings"] if w.startswith("pipeline layouts not tried (PP 2)")]
    return line.split("; without it")[0]


def test_recommend_states_the_layouts_left_out_in_fits_words() -> None:
    want = _fit_line("0.13")
    argv = ("recommend", M, *LOAD, "--engine-version", "0.13", "--async-scheduling")
    code, data = run_json(*argv)
    (opt,) = [o for o in data["rejected"] if o["target"] == A3]
    assert want in opt["reasons"]  # the option's own reasons (JSON), fit's words
    assert f"{A3}: {want}" in data["warnings"]  # the answer's warnings (JSON), naming the option
    code, out, _ = run(*argv)  # the text's warnings (its rejections list shows a few only)
    assert f"warning: {A3}: {want}" in out.splitlines()


def test_recommend_on_a_release_that_takes_both_says_nothing_and_takes_the_stages() -> None:
    code, data = run_json("recommend", M, *LOAD, "--engine-version", "0.15.1", "--async-scheduling")
    assert not any("pipeline layouts not tried" in w for w in data["warnings"])
    (opt,) = [o for o in data["options"] if o["target"] == A3]
    assert (opt["tensor_parallel"], opt["pipeline_parallel"]) == (1, 2)


def test_models_fits_on_takes_no_async_scheduling() -> None:
    code, _, err = run("models", M, "--fits-on", "h100-sxm", "--count", "2", "--async-scheduling")
    assert code == 2 and "--async-scheduling" in err


REQ = """\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: {m}}}
    quantization: fp8
    engine: vllm
    engine_version: "{v}"
    engine_settings: {{async_scheduling: true}}
    traffic:
      concurrency: {{typical: 8, peak: 8}}
      context: {{typical: 32k, peak: 32k}}
      output: {{typical: 256, peak: 256}}
    service: {{duration: 1 month}}
"""


def test_plan_search_states_them(tmp_path: Path) -> None:
    want = _fit_line("0.13")
    path = tmp_path / "r.yaml"
    path.write_text(REQ.format(m=M, v="0.13"))
    plan = make_plan(parse_request(path.read_text(), source=str(path)), alternatives=False)
    said = plan.jobs[0].to_dict()["warnings"]
    assert f"{A3}: {want}" in said
    code, out, _ = run("plan", str(path))  # the text: the plan's warnings, one line each
    assert any(ln.strip() == f"warning: {A3}: {want}" for ln in out.splitlines())


def test_the_line_is_carried_as_a_field_not_found_by_its_text() -> None:
    """review41 D8: each option carries the lines as a typed field (``Option.stages_left``, from the format search's
    ``FormatPick.stages_left``), the answer-level warnings are built from it and the plan reads the answer's field;
    a reason that merely opens with the same words is not gathered."""
    from dataclasses import replace

    from llmsizer.recommend import recommend_inference, stages_left_warnings
    want = _fit_line("0.13")
    rec = recommend_inference(M, engine="vllm", context=32768, concurrency=8, weights="fp8", engine_version="0.13",
                              async_scheduling=True)
    (opt,) = [o for o in rec.rejected if o.target == A3]
    assert opt.stages_left and opt.stages_left[0].startswith(want)
    assert f"{A3}: {opt.stages_left[0]}" in rec.stages_left and set(rec.stages_left) <= set(rec.warnings)
    lookalike = replace(opt, stages_left=(), reasons=(*opt.reasons, "pipeline layouts not tried (PP 9): x"))
    assert stages_left_warnings([lookalike]) == []

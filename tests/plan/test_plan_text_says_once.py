"""`plan` text says the training / inference memory ratio once (session 12). Its memory line states it ("2.30x the
inference estimate (19.03 GiB)") and the training estimate's warning repeated it ("sized with inference numbers ...
this would be 19.03 GiB; training needs 43.81 GiB per device (2.30x)"). The JSON keeps the warning; the text's one
statement carries the JSON's own numbers (training need / inference need)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_capture import run

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "lora-finetune-and-chat.yaml")


def test_the_inference_ratio_is_said_once_in_text_and_kept_in_json() -> None:
    code, out, err = run("plan", EXAMPLE, "--json")
    assert code == 0, err
    job = next(j for j in json.loads(out)["jobs"] if j["kind"] == "training")
    warned = [w for w in job["warnings"] if w.startswith("sized with inference numbers")]
    assert len(warned) == 1  # the JSON keeps it
    mem = {f["key"]: f["value"] for f in next(s for s in job["sections"] if s["key"] == "memory")["figures"]}
    ratio = f"{mem['need'] / mem['inference_need']:.2f}x"
    code, text, _ = run("plan", EXAMPLE)
    assert code == 0
    block = text[text.index(f"{job['name']} (training)"):]
    block = block[:block.index("\n\n")]
    assert block.count(ratio) == 1 and f"{ratio} the inference estimate" in block, block
    assert "sized with inference numbers" not in block


def test_the_plan_marks_the_warning_by_kind_and_the_text_reads_the_mark() -> None:
    """The plan decides which warning its memory line states (by the warning's kind, not its words); the text face
    reads that mark: the same warning unmarked is printed, a marked warning with other words is left out."""
    from dataclasses import replace

    from llmsizer.plan import plan_file
    from llmsizer.render.plan_text import render_plan_text

    plan = plan_file(EXAMPLE)
    job = next(j for j in plan.jobs if j.kind == "training")
    said = [w for w in job.warnings if w.startswith("sized with inference numbers")]
    assert len(said) == 1 and tuple(said) == job.said_in_figures
    unmarked = replace(plan, jobs=tuple(replace(j, said_in_figures=()) for j in plan.jobs))
    assert f"warning: {said[0]}" in render_plan_text(unmarked)
    other = "a warning in other words"
    marked = replace(plan, jobs=tuple(replace(j, warnings=(*j.warnings, other), said_in_figures=(other,)) if j is job
                                      else j for j in plan.jobs))
    text = render_plan_text(marked)
    assert f"warning: {other}" not in text and f"warning: {said[0]}" in text

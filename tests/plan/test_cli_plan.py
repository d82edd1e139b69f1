"""`llmsizer plan` and `llmsizer request` through the CLI entry point (main's parser and error handling)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.request.schema import published_schema_text

from .cli_helpers import build_parser, run_cli

ROOT = Path(__file__).resolve().parents[2]
LORA = str(ROOT / "examples" / "lora-finetune-and-chat.yaml")

BAD = """\
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-0.5b}
    traffic: {concurrency: {typical: 2, peak: lots}}
    servcie: {duration: 1 year}
"""

TRIPS = """\
jobs:
  - name: ft
    kind: training
    model: {name: qwen2.5-0.5b}
    method: lora
    dataset: {tokens: 1M tokens}
    resources: {device: l4}
"""


def test_plan_prints_a_summary(monkeypatch, capsys):
    assert run_cli(["plan", LORA, "--no-alternatives"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert out.startswith("Plan: Support assistant")
    for word in ("ticket-lora (training)", "support-chat (inference)", "memory", "storage", "duration", "cost",
                 "totals:"):
        assert word in out


@pytest.mark.parametrize("name, marker", [("report.html", "<!DOCTYPE html>"), ("plan.md", "# Plan: "),
                                          ("plan.json", '"schema_version": 1')])
def test_plan_writes_reports(tmp_path, monkeypatch, capsys, name, marker):
    out = tmp_path / name
    assert run_cli(["plan", LORA, "-o", str(out), "--no-alternatives"], monkeypatch) == 0
    text = out.read_text()
    assert marker in text
    assert f"report written to {out}" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left behind
    if name.endswith(".json"):
        data = json.loads(text)
        assert data["ok"] is True and [j["name"] for j in data["jobs"]] == ["ticket-lora", "support-chat"]


def test_plan_json_to_stdout(monkeypatch, capsys):
    assert run_cli(["plan", LORA, "--json", "--no-alternatives"], monkeypatch) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "plan" and data["check_counts"]["error"] == 0


def test_invalid_request_writes_nothing(tmp_path, monkeypatch, capsys):
    req = tmp_path / "bad.yaml"
    req.write_text(BAD)
    out = tmp_path / "report.html"
    out.write_text("previous report")
    assert run_cli(["plan", str(req), "-o", str(out), "--force"], monkeypatch) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"llmsizer: error: {req}:5: job 'chat' (inference): traffic.concurrency.peak: cannot read "
                      "'lots' as a number; expected an integer in [1, 16,777,216] (sequences at once); decimal suffixes are read: "
                      "'40k' = 40,000, '7B' = 7 x 10^9")
    assert err[1].startswith(f"llmsizer: error: {req}:6: job 'chat' (inference): servcie: unknown key")
    assert len(err) == 2
    assert out.read_text() == "previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "report.html"]


def test_a_failed_render_leaves_no_file(tmp_path, monkeypatch):
    from llmsizer.cli import plan_cmd

    def boom(plan, fmt):
        raise RuntimeError("renderer crashed")
    monkeypatch.setattr(plan_cmd, "render", boom)
    with pytest.raises(RuntimeError):
        run_cli(["plan", LORA, "-o", str(tmp_path / "r.html"), "--no-alternatives"], monkeypatch)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_cleans_up_on_error(tmp_path, monkeypatch):
    from llmsizer.cli.plan_cmd import write_atomic

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr("os.replace", fail)
    from llmsizer.errors import InputError
    with pytest.raises(InputError, match="disk full"):  # one line for the CLI, not an OSError traceback
        write_atomic(tmp_path / "x.md", "text", force=False)
    assert list(tmp_path.iterdir()) == []


def test_errors_in_the_plan_exit_1_but_still_report(tmp_path, monkeypatch, capsys):
    req = tmp_path / "trips.yaml"
    req.write_text(TRIPS)
    out = tmp_path / "r.md"
    assert run_cli(["plan", str(req), "-o", str(out), "--no-alternatives"], monkeypatch) == 1
    text = capsys.readouterr().out
    assert "ERROR" in text and "No hand-over at the end of training" in text
    assert out.exists()


def test_unknown_report_extension(tmp_path, monkeypatch, capsys):
    assert run_cli(["plan", LORA, "-o", str(tmp_path / "r.pdf")], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".html, .md or .json" in err


def test_request_new_check_schema(tmp_path, monkeypatch, capsys):
    f = tmp_path / "req.yaml"
    assert run_cli(["request", "new", "-o", str(f)], monkeypatch) == 0
    assert f.read_text().startswith("# llmsizer request")
    assert run_cli(["request", "new", "-o", str(f)], monkeypatch) == 2  # exists: refuse
    assert "--force" in capsys.readouterr().err
    assert run_cli(["request", "check", str(f)], monkeypatch) == 0
    assert "valid request with 2 job(s): 1 training, 1 inference" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    assert run_cli(["request", "check", str(bad)], monkeypatch) == 2  # bad input, as plan (README exit codes)
    assert capsys.readouterr().err.count("llmsizer: error: ") == 2
    assert run_cli(["request", "check", str(bad), "--json"], monkeypatch) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("llmsizer: error: ") == 2  # bad input: nothing half-written
    assert run_cli(["request", "schema"], monkeypatch) == 0
    assert capsys.readouterr().out == published_schema_text()
    assert run_cli(["request", "new"], monkeypatch) == 0
    assert "kind: inference" in capsys.readouterr().out


def test_help_has_examples(capsys):
    p = build_parser()
    for argv in (["plan", "--help"], ["request", "--help"], ["request", "check", "--help"]):
        with pytest.raises(SystemExit):
            p.parse_args(argv)
        assert "examples:" in capsys.readouterr().out


def test_missing_request_file(monkeypatch, capsys):
    assert run_cli(["plan", "/nonexistent/req.yaml"], monkeypatch) == 2
    assert "cannot read" in capsys.readouterr().err


def test_model_dependent_errors_name_the_job(tmp_path, monkeypatch, capsys):
    """TP must divide the heads: known only once the model is read, at plan time; still one line with the job, at
    the line of the key that sets it, which the message writes as the file does ('tp', not the Python name)."""
    req = tmp_path / "tp.yaml"
    req.write_text("jobs:\n  - name: big\n    kind: training\n    model: {name: qwen2.5-0.5b}\n    method: full\n"
                   "    settings: {tp: 4}\n    dataset: {tokens: 1M}\n    resources: {instance: aws-p5.48xlarge}\n")
    assert run_cli(["plan", str(req), "--no-alternatives"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err == (f"llmsizer: error: {req}:6: job 'big' (training): settings.tp 4 does not divide the 14 "
                   "attention heads of Qwen/Qwen2.5-0.5B\n")  # the key path once, where the message names the key

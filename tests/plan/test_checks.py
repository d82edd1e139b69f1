"""Each check fires on a request built to trip it, names the job and the line of the field, and stays quiet on the
clean requests and the examples."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from llmsizer.plan import make_plan, plan_file
from llmsizer.request import parse_request

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

CLEAN_TRAIN = {
    "name": "ft", "kind": "training", "model": {"name": "qwen2.5-0.5b", "size": "0.5B"}, "method": "lora",
    "purpose": "style", "baseline_tried": True,
    "settings": {"micro_batch": 4, "seq_len": 1024, "epochs": 1},
    "dataset": {"size": "50 MB", "tokens": "10M tokens", "format": "jsonl", "location": "NAS /data",
                "sensitivity": "internal", "access": "team account", "offsite_allowed": False,
                "read_speed": "1 GB/s"},
    "expected_duration": "1 h",
    "checkpoints": {"resume": True, "interval": "10 min", "keep": 2, "storage": "10 GB"},
    "handover": {"model_destination": "s3://models/ft", "logs_destination": "s3://logs/ft",
                 "data_disposal": "deleted", "cleanup": "scratch wiped"},
    "resources": {"device": "h100-sxm", "count": 1, "storage": "100 GB", "pool": "train", "price_per_hour": "$4/h"},
    "pricing": {"model": "hourly"},
}
CLEAN_INFER = {
    "name": "chat", "kind": "inference", "model": {"name": "qwen2.5-0.5b"}, "precision": "bf16", "engine": "vllm",
    "traffic": {"concurrency": {"typical": 2, "peak": 8}, "context": {"typical": "2k", "peak": "4k"},
                "output": {"typical": 200, "peak": 500}},
    "service": {"duration": "6 months", "maintenance_windows": ["Sundays 02:00-04:00"]},
    "access": {"method": "intranet", "isolation": "vpc", "fixed_address": False},
    "operations": {"monitoring": "Prometheus", "incident_contacts": ["oncall@example.com"]},
    "resources": {"device": "l4", "count": 1, "pool": "serve", "price_per_hour": "$1/h"},
    "pricing": {"model": "hourly"},
}


def request(*jobs: dict, top: dict | None = None) -> str:
    return yaml.safe_dump({"version": 1, **(top or {}), "jobs": list(jobs)}, sort_keys=False)


def edit(base: dict, **changes) -> dict:
    """A copy of ``base`` with dotted-path changes; a value of None deletes the key."""
    job = copy.deepcopy(base)
    for path, value in changes.items():
        keys = path.split("__")
        d = job
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        if value is None:
            d.pop(keys[-1], None)
        else:
            d[keys[-1]] = value
    return job


def checks_of(text: str, alternatives: bool = False):
    req = parse_request(text, source="r.yaml")
    return req, make_plan(req, alternatives=alternatives).checks


def test_clean_requests_raise_nothing_but_notes():
    _, checks = checks_of(request(CLEAN_TRAIN, CLEAN_INFER))
    assert [c for c in checks if c.severity != "info"] == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_are_clean(path):
    plan = plan_file(path)
    loud = [(c.id, c.message) for c in plan.checks if c.severity in ("error", "warning")]
    assert loud == []
    assert plan.ok


TRN, INF = CLEAN_TRAIN, CLEAN_INFER
CASES = [
    # id, severity, field whose line the check points at (None: the job), jobs
    ("training-sized-with-inference-numbers", "error", "resources.memory",
     [edit(TRN, method="full", resources__memory="4GiB")]),
    ("training-memory-does-not-fit", "error", "resources.memory", [edit(TRN, resources__memory="1GiB")]),
    ("no-checkpoints", "warning", "checkpoints", [edit(TRN, checkpoints__interval=None)]),
    ("checkpoint-storage-missing", "error", "checkpoints",
     [edit(TRN, checkpoints__storage=None, resources__storage=None)]),
    ("checkpoint-storage-too-small", "error", "checkpoints.storage", [edit(TRN, checkpoints__storage="100 MB")]),
    ("disk-fills", "error", "checkpoints",
     [edit(TRN, method="full", checkpoints__keep=None, checkpoints__interval="10 s", checkpoints__storage="20 GB")]),
    ("storage-too-small", "error", "resources.storage", [edit(TRN, resources__storage="1 GB")]),
    ("training-and-serving-share-resources", "error", "resources.pool",
     [edit(TRN, resources__pool="gpu-1"), edit(INF, resources__pool="GPU-1")]),
    ("no-handover", "error", "handover", [edit(TRN, handover=None)]),
    ("handover-incomplete", "warning", "handover", [edit(TRN, handover={"model_destination": "s3://m"})]),
    ("dataset-sensitivity-missing", "warning", "dataset", [edit(TRN, dataset__sensitivity=None)]),
    ("sensitive-data-unplaced", "error", "dataset",
     [edit(TRN, dataset__sensitivity="confidential", dataset__location=None)]),
    ("sensitive-data-unplaced", "error", "dataset", [edit(TRN, dataset__personal_data=True, dataset__access=None)]),
    ("offsite-unconfirmed", "warning", "dataset",
     [edit(TRN, dataset__sensitivity="restricted", dataset__offsite_allowed=None)]),
    ("sensitive-data-disposal", "warning", "handover",
     [edit(TRN, dataset__sensitivity="confidential", handover__data_disposal=None)]),
    ("no-maintenance-window", "warning", "service", [edit(INF, service__maintenance_windows=None)]),
    ("no-maintenance-window", "warning", "service",
     [edit(INF, service={"ongoing": True})]),
    ("service-duration-missing", "warning", "service", [edit(INF, service__duration=None)]),
    ("peak-concurrency-missing", "warning", "traffic.concurrency", [edit(INF, traffic__concurrency=2)]),
    ("peak-context-missing", "warning", "traffic.context", [edit(INF, traffic__context="2k")]),
    ("output-length-missing", "info", "traffic", [edit(INF, traffic__output=None)]),
    ("service-does-not-fit", "error", "resources", [edit(INF, resources__memory="1GiB")]),
    ("cannot-fit", "error", "resources", [edit(INF, engine=None, resources={"device": "intel-xeon-spr-8ch"})]),
    ("latency-ttft", "warning", "latency.ttft", [edit(INF, latency={"ttft": "1 ms"})]),
    ("latency-speed", "warning", "latency.tokens_per_second_per_user",
     [edit(INF, latency={"tokens_per_second_per_user": 100000})]),
    ("no-incident-contacts", "warning", "operations", [edit(INF, operations__incident_contacts=None)]),
    ("no-monitoring", "warning", "operations", [edit(INF, operations__monitoring=None)]),
    ("access-method-missing", "warning", "access", [edit(INF, access__method=None)]),
    ("fixed-address-unstated", "info", "access", [edit(INF, access__fixed_address=None)]),
    ("deadline-missed", "error", "deadline", [edit(TRN, deadline="1 s")]),
    ("deadline-missed", "error", "deadline",
     [TRN, edit(INF, model={"from_job": "ft"}, adapters={"mode": "merged"}, deadline="10 s")]),
    ("expected-duration-short", "warning", "expected_duration", [edit(TRN, expected_duration="1 s")]),
    ("budget-exceeded", "error", "budget.total", [edit(TRN, budget={"total": "$0.001"})]),
    ("budget-exceeded", "error", "budget.per_month", [edit(INF, budget={"per_month": "$1/month"})]),
    ("budget-exceeded", "error", "budget.per_hour", [edit(INF, budget={"per_hour": "$0.5/h"})]),
    ("price-unknown", "warning", "resources", [edit(INF, resources__price_per_hour=None, budget={"total": "$100"})]),
    ("resume-unstated", "warning", "checkpoints", [edit(TRN, checkpoints__resume=None)]),
    ("no-resume", "warning", "checkpoints.resume",
     [edit(TRN, checkpoints__resume=False, settings__train_tokens="100B tokens", checkpoints__storage="1 TB",
           resources__storage="5 TB", expected_duration="30 days")]),
    ("checkpoint-interval-long", "warning", "checkpoints.interval",
     [edit(TRN, checkpoints__interval="5 h", settings__train_tokens="100B tokens", expected_duration="30 days")]),
    ("dataset-size-missing", "error", "dataset", [edit(TRN, dataset={"location": "x", "sensitivity": "public"})]),
    ("network-bound", "warning", "resources",
     [edit(TRN, method="full", resources={"device": "h100-sxm", "count": 8, "nodes": 2, "network": "1 Gb/s",
                                        "storage": "1 TB", "price_per_hour": "$32/h"},
           checkpoints__storage="100 GB")]),
    ("network-unknown", "warning", "resources",
     [edit(TRN, resources={"device": "h100-sxm", "count": 8, "nodes": 2, "storage": "1 TB",
                         "price_per_hour": "$32/h"})]),
    ("data-read-slow", "warning", "dataset.read_speed", [edit(TRN, dataset__read_speed="1 kB/s")]),
    ("model-size-mismatch", "warning", "model.size", [edit(TRN, model={"name": "qwen2.5-0.5b", "size": "7B"})]),
    ("training-may-not-be-needed", "warning", "purpose", [edit(TRN, purpose="knowledge", baseline_tried=False)]),
    ("lora-deployment-undecided", "info", "adapters", [TRN, edit(INF, model={"from_job": "ft"})]),
    # on the catalog's price: owned hardware (a bare device at the team's own price_per_hour) gets no provider
    # advice (docs/plans.md; probe10 #12)
    ("pricing-undecided", "info", "pricing", [edit(TRN, pricing=None, resources__price_per_hour=None)]),
]


@pytest.mark.parametrize("check_id, severity, field, jobs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_check_fires(check_id, severity, field, jobs):
    text = request(*jobs)
    req, checks = checks_of(text)
    hits = [c for c in checks if c.id == check_id]
    assert hits, [c.id for c in checks]
    c = hits[0]
    assert c.severity == severity
    assert c.message and c.title
    job = req.job(c.job)
    assert c.line == req.line_of(job, field), (c.line, field)
    assert c.line is not None and c.line > 1


def test_request_budget_over_all_jobs():
    text = request(TRN, INF, top={"budget": {"total": "$10"}})
    req, checks = checks_of(text)
    c = next(c for c in checks if c.id == "budget-exceeded")
    assert c.job is None and c.line == req.lines["budget.total"] and "all jobs together" in c.message


def test_no_hardware_when_nothing_fits_the_constraints():
    train = edit(TRN, resources=None, deadline="1 ms", checkpoints__storage=None)
    serve = edit(INF, resources=None, latency={"ttft": "0.001 ms"})
    _, checks = checks_of(request(train, serve), alternatives=True)
    assert {(c.job, c.id) for c in checks if c.id == "no-hardware"} == {("ft", "no-hardware"),
                                                                        ("chat", "no-hardware")}


def test_checks_come_errors_first():
    _, checks = checks_of(request(edit(TRN, handover=None, pricing=None, dataset__sensitivity=None)))
    sev = [c.severity for c in checks]
    assert sev == sorted(sev, key=["error", "warning", "info"].index)


def test_suggested_hardware_when_none_is_named():
    req = parse_request(request(edit(INF, resources={"pool": "serve"})), source="r.yaml")
    plan = make_plan(req)
    hw = plan.jobs[0].hardware
    assert hw.origin == "suggested" and hw.device and hw.price_per_hour is not None
    assert any("no resources named" in n for n in plan.jobs[0].notes)


def test_every_check_is_documented():
    import re
    src = (ROOT / "src" / "llmsizer" / "plan" / "checks.py").read_text()
    ids = set(re.findall(r'c\.check\(\s*"([a-z0-9-]+)"', src))
    docs = (ROOT / "docs" / "plans.md").read_text()
    assert ids and {i for i in ids if f"`{i}`" not in docs} == set()


def test_the_template_plans():
    from llmsizer.request.template import template
    plan = make_plan(parse_request(template(), source="template.yaml"), alternatives=False)
    assert [j.kind for j in plan.jobs] == ["training", "inference"]


@pytest.mark.parametrize("jobs", [
    [edit(TRN, deadline="1 s", expected_duration="2 s")],  # below 90 s: "1.0 s" in the tables, not "1 s"
    [edit(TRN, checkpoints__resume=False, settings__train_tokens="2T tokens", checkpoints__storage="1 TB",
          resources__storage="5 TB", deadline="30 days", expected_duration="30 days")],  # past 120 days: days
], ids=["seconds", "months"])  # (months until probe20 C4: a 730 h month is no calendar month)
def test_checks_say_a_duration_as_the_report_does(jobs):
    """A check's message and the plan's duration table (every renderer: text, Markdown, HTML) show the same
    duration in the same words: units.format_seconds is the one formatter."""
    from llmsizer.render.markdown import format_value

    req = parse_request(request(*jobs), source="r.yaml")
    plan = make_plan(req, alternatives=False)
    dur = plan.jobs[0].section("duration")
    run, left = (format_value(dur.value(k), "s") for k in ("seconds", "deadline"))
    missed = next(c for c in plan.checks if c.id == "deadline-missed")
    assert missed.message == f"the run is estimated at {run} but the deadline leaves {left}"
    short = next(c for c in plan.checks if c.id == "expected-duration-short")
    assert short.message.endswith(f"the estimate is {run}")


def test_checks_say_money_as_the_report_does():
    """A budget under $100 keeps its cents in a check, as in the plan's cost table (units.format_usd): a $0.50/h
    budget is not '$0/h'."""
    _, checks = checks_of(request(edit(INF, budget={"per_hour": "$0.5/h"})))
    c = next(c for c in checks if c.id == "budget-exceeded")
    assert c.message == "$1.00/h against $0.50/h"


def test_no_hardware_names_the_practical_limit_and_no_duration_shows_no_question_mark():
    """No deadline, no resources, a run no option finishes within 90 days (8B full on 2000T tokens): the no-hardware
    check names the practical limit that stood in for the deadline (probe4 defect 2), and the no-checkpoints
    check, with no duration known, says so in words (defect 12)."""
    train = edit(TRN, model={"name": "llama-3.1-8b"}, method="full", resources=None, expected_duration=None,
                 checkpoints__interval=None, dataset__tokens="2000T tokens", settings__seq_len=4096)
    _, checks = checks_of(request(train))
    nh = next(c for c in checks if c.id == "no-hardware")
    assert "practical limit" in nh.message and "90.0 days" in nh.message
    nc = next(c for c in checks if c.id == "no-checkpoints")
    assert "?" not in nc.message and "at any point" in nc.message


def test_network_bound_without_its_remedy_fact_takes_the_durations_rule():
    """review36 N6: the check reads ``comm_bound_remedy`` safely: a plan whose facts carry the warning without the
    remedy (a job planned by other code than plan/training.py) gets duration.comm_bound_remedy's words for an
    unknown step, not a KeyError."""
    from llmsizer.estimate.duration import COMM_BOUND_REMEDY
    from llmsizer.plan import run_checks

    job = edit(TRN, method="full", resources={"device": "h100-sxm", "count": 8, "nodes": 2, "network": "1 Gb/s",
                                              "storage": "1 TB", "price_per_hour": "$32/h"},
               checkpoints__storage="100 GB")
    req = parse_request(request(job), source="r.yaml")
    plan = make_plan(req)
    plans = {p.name: p for p in plan.jobs}
    facts = plans[job["name"]].facts
    assert facts["comm_bound"] and facts["comm_bound_remedy"].startswith("fewer machines, ")  # 2 machines
    with_fact = [c for c in run_checks(req, plans) if c.id == "network-bound"]
    assert [c.advice for c in with_fact] == [facts["comm_bound_remedy"]]
    del facts["comm_bound_remedy"]
    without = [c for c in run_checks(req, plans) if c.id == "network-bound"]
    assert [c.advice for c in without] == [COMM_BOUND_REMEDY]

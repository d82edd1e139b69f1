"""The request reader: every seed item representable, each bad field its own one-line message naming the job, the
field and the line, unknown keys rejected with the closest allowed key."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from llmsizer.request import InferenceJob, RequestError, TrainingJob, parse_request
from llmsizer.request.fields import JOB_FIELDS, SEED_ITEMS, TOP, job_fields
from llmsizer.request.quantities import parse_network
from llmsizer.request.reader import JOB_SECTIONS, TOP_SECTIONS
from llmsizer.request.spec import Request
from llmsizer.request.template import template

from .helpers import job_yaml, marked_line

# Every item the seed asks teams to state, in one request (values chosen so each parsed number is easy to check).
FULL = """\
version: 1
title: Support assistant
team: Support ML
contact: ml@example.com
budget: {total: $60k}
jobs:
  - name: ft
    kind: training
    model: {name: llama-3.1-8b, size: 8B}
    method: lora
    peft: {rank: 16, alpha: 32, targets: [q_proj, v_proj]}
    settings: {micro_batch: 2, seq_len: 4k, grad_accumulation: 8, epochs: 2}
    dataset:
      size: 2 TB
      tokens: 500k tokens
      examples: 1k
      format: parquet
      location: on-prem NAS /data/tickets
      sensitivity: confidential
      personal_data: true
      access: ML team service account
      offsite_allowed: false
      read_speed: 10 Gb/s
    expected_duration: 3 days
    checkpoints: {resume: true, interval: 500 steps, keep: 3, storage: 80GiB, location: /scratch/ckpt}
    handover:
      model_destination: s3://models/ft/
      artifacts: [adapter, logs]
      logs_destination: s3://logs/ft/
      data_disposal: scratch copy deleted
      cleanup: disks wiped, credentials revoked
      owner: team lead
    resources: {instance: aws-p5.48xlarge, nodes: 2, storage: 4 TB, pool: train-a, network: 3200 Gb/s}
    start: 2025-09-01
    deadline: 2025-09-10
    budget: {total: $20k}
    pricing: {model: reserved, reserved_discount: 35%, reserved_term: 1 month}
  - name: chat
    kind: inference
    model: {from_job: ft}
    precision: bf16
    quantization: awq-int4
    engine: vllm
    adapters: {mode: dynamic, count: 3, max_loaded: 2, rank: 16}
    traffic:
      concurrency: {typical: 8, peak: 32}
      context: {typical: 2k, peak: 8k}
      output: {typical: 300, peak: 1k}
      requests_per_second: {typical: 300/min, peak: 20/s}
      users: 200
    latency: {ttft: 1500 ms, tokens_per_second_per_user: 20}
    service:
      duration: 12 months
      hours_per_day: 24
      days_per_week: 7
      interruptible: weekdays 01:00-05:00 UTC
      maintenance_windows: [Sundays 02:00-04:00 UTC]
      availability: 99.9%
    access: {method: private-api, clients: support app, isolation: dedicated-network, fixed_address: true,
             allowlist: [10.0.0.0/8], stream: true}
    operations:
      monitoring: Prometheus + Grafana
      logs: {location: Loki, retention: 30 days, content: false}
      incident_contacts: [oncall@example.com, "+1 555 0100"]
    resources: {device: h100-sxm, count: 1, pool: serve-a}
"""

EXPECTED = {  # hand-converted values of FULL
    "model.name": "llama-3.1-8b", "model.size": 8_000_000_000, "method": "lora", "peft.rank": 16,
    "peft.targets": ("q", "v"), "dataset.size": 2 * 10**12, "dataset.tokens": 500_000, "dataset.format": "parquet",
    "dataset.location": "on-prem NAS /data/tickets", "dataset.sensitivity": "confidential",
    "dataset.access": "ML team service account", "dataset.offsite_allowed": False,
    "dataset.read_speed": 10e9 / 8, "expected_duration": 3 * 86400.0, "checkpoints.resume": True,
    "checkpoints.keep": 3, "checkpoints.storage": 80 * 2**30, "handover.model_destination": "s3://models/ft/",
    "handover.cleanup": "disks wiped, credentials revoked", "handover.data_disposal": "scratch copy deleted",
    "handover.logs_destination": "s3://logs/ft/", "precision": "bf16", "quantization": "awq-int4",
    "traffic.concurrency.typical": 8, "traffic.concurrency.peak": 32, "traffic.context.typical": 2048,
    "traffic.context.peak": 8192, "traffic.output.typical": 300, "traffic.output.peak": 1024,
    "service.duration": 12 * 730 * 3600.0, "service.interruptible": ("weekdays 01:00-05:00 UTC",),
    "service.maintenance_windows": ("Sundays 02:00-04:00 UTC",), "access.method": "private-api",
    "access.isolation": "dedicated-network", "access.fixed_address": True, "operations.monitoring":
    "Prometheus + Grafana", "operations.logs.retention": 30 * 86400.0,
    "operations.incident_contacts": ("oncall@example.com", "+1 555 0100"), "resources.device": "h100-sxm",
    "resources.count": 1, "resources.instance": "aws-p5.48xlarge", "budget.total": 20000.0,
    "pricing.model": "reserved",
}


def get(obj, path):
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


@pytest.fixture(scope="module")
def full() -> Request:
    return parse_request(FULL, source="full.yaml")


def test_every_seed_item_is_representable(full):
    train, serve = full.jobs
    assert isinstance(train, TrainingJob) and isinstance(serve, InferenceJob)
    assert train.checkpoints.interval.steps == 500
    assert train.deadline.date == dt.date(2025, 9, 10)
    for item, paths in SEED_ITEMS.items():
        for path in paths:
            if path in ("deadline",):
                continue
            jobs = [j for j in (train, serve) if any(f.name == path.split(".")[0] for f in job_fields(j.kind))]
            values = [get(j, path) for j in jobs]
            assert any(v is not None for v in values), (item, path)
            if path in EXPECTED:
                assert EXPECTED[path] in values, (path, values)


def test_other_values_of_the_full_request(full):
    train, serve = full.jobs
    assert serve.model.name == "llama-3.1-8b"  # taken from the training job it serves
    assert serve.traffic.requests_per_second.typical == pytest.approx(5.0)  # 300/min
    assert serve.latency.ttft == pytest.approx(1.5)
    assert serve.adapters.mode == "dynamic" and serve.adapters.max_loaded == 2
    assert train.pricing.reserved_discount == pytest.approx(0.35)
    assert train.pricing.reserved_term == pytest.approx(730 * 3600)
    # kept as written, read by fit --network's reader (request/quantities.py parse_network): 3200 Gb/s = 400 GB/s
    assert train.resources.network == "3200 Gb/s"
    assert parse_network(train.resources.network, 8)[0] == pytest.approx(400e9)
    assert full.budget.total == 60000.0
    assert full.line_of(train, "dataset.size") == 14  # counted in FULL above
    assert full.line_of(serve, "traffic.concurrency.peak") == 46
    assert full.line_of(serve, "no.such.field") == serve.line


def test_specs_mirror_the_field_table():
    """One source of truth: each spec class has exactly the fields of its section in the table."""
    def section(path, fields):
        for part in path.split("."):
            f = next(x for x in fields if x.name == part)
            fields = f.fields
        return fields
    for path, cls in JOB_SECTIONS.items():
        names = {f.name for f in section(path, JOB_FIELDS)}
        assert names == {f.name for f in dataclasses.fields(cls)}, path
    for path, cls in TOP_SECTIONS.items():
        assert {f.name for f in section(path, TOP)} == {f.name for f in dataclasses.fields(cls)}, path
    for cls, kind in ((TrainingJob, "training"), (InferenceJob, "inference")):
        assert {f.name for f in job_fields(kind)} | {"line"} == {f.name for f in dataclasses.fields(cls)}
    assert {f.name for f in TOP} | {"source", "base_dir", "lines"} == {f.name for f in dataclasses.fields(Request)}


def test_training_settings_mirror_the_training_workload():
    from llmsizer.specs.training import METHODS, OPTIMIZERS, PRECISIONS, TrainingWorkload
    settings = next(f for f in JOB_FIELDS if f.name == "settings")
    workload = {f.name for f in dataclasses.fields(TrainingWorkload)}
    for f in settings.fields:
        assert f.name in workload or f.name in ("epochs", "train_tokens", "utilization"), f.name
    assert settings.child("precision").choices == PRECISIONS
    assert settings.child("optimizer").choices == OPTIMIZERS
    assert next(f for f in JOB_FIELDS if f.name == "method").choices == METHODS


def test_template_validates_and_lists_every_field():
    text = template()
    req = parse_request(text, source="template.yaml")
    assert [j.kind for j in req.jobs] == ["training", "inference"]

    def walk(fields):
        for f in fields:
            yield f
            yield from walk(f.fields)
    for f in walk(TOP + JOB_FIELDS):
        assert f"{f.name}:" in text, f.name


# --------------------------------------------------------------------------------------------- bad fields

TRAINING_CASES = [
    ("model.size", "model: {name: qwen2.5-0.5b, size: eight}  #<", "cannot read 'eight' as a number"),
    ("model.name", "model: {name: llama-9.9-8b}  #<", "llama"),
    ("method", "method: lorra  #<", "did you mean 'lora'"),
    ("peft.rank", "peft: {rank: -4}  #<", "expected an integer in [1, "),
    ("peft.targets", "peft: {targets: [q, bogus]}  #<", "unknown LoRA target 'bogus'"),
    ("settings.seq_len", "settings: {seq_len: long}  #<", "token length"),
    ("settings.precision", "settings: {precision: bf17}  #<", "choose one of"),
    ("settings.zero", "settings: {zero: 5}  #<", "expected an integer in [0, 3]"),
    ("settings.epochs", "settings: {epochs: many}  #<", "cannot read 'many' as a number; expected a number in [0, "),
    ("settings", "settings: {tp: 3}  #<\nresources: {device: h100-sxm, count: 4}", "multiple of tp"),
    ("dataset.size", "dataset: {tokens: 1M, size: 2 TX}  #<", "cannot read '2 TX' as a size"),
    ("dataset.tokens", "dataset: {tokens: heaps}  #<", "token count"),
    ("dataset.format", "dataset: {tokens: 1M, format: xlsx}  #<", "choose one of: jsonl"),
    ("dataset.sensitivity", "dataset: {tokens: 1M, sensitivity: secret}  #<", "public, internal, confidential"),
    ("dataset.offsite_allowed", "dataset: {tokens: 1M, offsite_allowed: maybe}  #<", "true or false"),
    ("dataset.read_speed", "dataset: {tokens: 1M, read_speed: 10 Gb}  #<", "bandwidth"),
    ("expected_duration", "expected_duration: 3  #<", "no unit"),
    ("checkpoints.interval", "checkpoints: {interval: often}  #<", "interval"),
    ("checkpoints.keep", "checkpoints: {keep: -1}  #<", "expected an integer in [0, "),
    ("checkpoints.storage", "checkpoints: {storage: big}  #<", "as a size"),
    ("handover.artifacts", "handover: {artifacts: [adapter, {x: 1}]}  #<", "non-empty text"),
    ("resources.device", "resources: {device: h100-sxmm}  #<", "h100-sxm"),
    ("resources.instance", "resources: {instance: h100-sxm}  #<", "is a device, not an instance"),
    ("resources.count", "resources: {instance: aws-p5.48xlarge, count: 4}  #<", "give nodes instead"),
    ("resources.nodes", "resources: {device: h100-sxm, nodes: 0}  #<", "expected an integer in [1, "),
    ("resources.network", "resources: {device: h100-sxm, network: 400}  #<", "no unit"),
    ("resources.interconnect", "resources: {device: h100-sxm, interconnect: nvlink9}  #<", "unknown interconnect"),
    ("resources.price_per_hour", "resources: {device: h100-sxm, price_per_hour: cheap}  #<", "per hour"),
    ("budget.total", "budget: {total: 5000 EUR}  #<", "US dollars"),
    ("deadline", "deadline: soon  #<", "a date"),
    ("start", "start: tomorrow  #<", "YYYY-MM-DD"),
    # probe10 defect 3: an unquoted YAML timestamp had its time dropped (the booking covered another window); refused
    # with the quoted form's line, start and deadline alike
    ("start", "start: 2027-01-10T10:30:00+02:00  #<", "'2027-01-10T10:30:00+02:00' as a date (a request's start"),
    ("start", "start: '2027-01-10 18:00'  #<", "'2027-01-10 18:00' as a date (a request's start"),
    ("deadline", "start: 2027-01-10\ndeadline: 2027-01-12T02:00:00  #<", "'2027-01-12T02:00:00' as a date (a request"),
    ("deadline", "start: 2025-09-10\ndeadline: 2025-09-01  #<", "is not after the start"),
    ("pricing.model", "pricing: {model: spot}  #<", "hourly, reserved, undecided"),
    ("pricing.reserved_discount", "pricing: {reserved_discount: 140%}  #<", "between 0 and 1"),
    ("peft", "method: full\npeft: {rank: 8}  #<", "method is 'full'"),
    ("purpose", "purpose: fun  #<", "choose one of"),
]

INFERENCE_CASES = [
    ("traffic.concurrency.peak", "traffic:\n      concurrency: {typical: 2, peak: lots}  #<", "cannot read 'lots'"),
    ("traffic.concurrency.peak", "traffic:\n      concurrency: {typical: 10, peak: 5}  #<", "below typical"),
    ("traffic.context.typical", "traffic:\n      concurrency: 2\n      context: {typical: long}  #<",
     "token length"),
    ("traffic.output.peak", "traffic:\n      concurrency: 2\n      context: {peak: 4k}\n"
     "      output: {peak: 5000}  #<", "do not fit in a context"),
    ("traffic.requests_per_second", "traffic:\n      concurrency: 2\n"
     "      requests_per_second: 5 per fortnight  #<", "unknown period"),
    ("traffic.concurrency", "traffic: {context: 4k}  #<", "how many requests are served at once"),
    ("quantization", "quantization: q9_z  #<", "q9_z"),
    ("precision", "precision: int3  #<", "bf16, fp16, fp32"),
    ("engine", "engine: tgi  #<", "transformers, vllm, llamacpp"),
    ("kv_cache_dtype", "kv_cache_dtype: fp3  #<", "fp3"),
    ("latency.ttft", "latency: {ttft: fast}  #<", "duration"),
    ("latency.tokens_per_second_per_user", "latency: {tokens_per_second_per_user: -5}  #<", "expected a number in [0, "),
    ("service.hours_per_day", "service: {hours_per_day: 25}  #<", "expected a number in (0, 24]"),
    ("service.duration", "service: {duration: forever}  #<", "duration"),
    ("service.ongoing", "service: {duration: 1 year, ongoing: true}  #<", "not both"),
    ("service.maintenance_windows", "service:\n      maintenance_windows: {sunday: 2}  #<", "not a mapping"),
    ("access.method", "access: {method: carrier-pigeon}  #<", "public-api, private-api"),
    ("access.isolation", "access: {isolation: total}  #<", "air-gapped"),
    ("access.fixed_address", "access: {fixed_address: sometimes}  #<", "true or false"),
    ("operations.logs.retention", "operations: {logs: {retention: 30}}  #<", "no unit"),
    ("adapters.mode", "adapters: {mode: fused, rank: 8}  #<", "merged, dynamic"),
    ("adapters.rank", "adapters: {mode: dynamic}  #<", "adapters.rank: is required"),
    ("model.from_job", "model: {from_job: nothere}  #<", "no training job named 'nothere'"),
]


@pytest.mark.parametrize("kind, path, body, fragment",
                         [("training", *c) for c in TRAINING_CASES] + [("inference", *c) for c in INFERENCE_CASES],
                         ids=[f"training-{c[0]}" for c in TRAINING_CASES] + [f"inference-{c[0]}" for c in
                                                                             INFERENCE_CASES])
def test_each_bad_field_has_its_own_message(kind, path, body, fragment):
    text = job_yaml(kind, body)
    line = marked_line(text)
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="req.yaml")
    errors = exc.value.errors
    assert len(errors) == 1, errors
    msg = errors[0]
    name = "ft" if kind == "training" else "chat"
    assert msg.startswith(f"req.yaml:{line}: job '{name}' ({kind}): {path}: "), msg
    assert fragment in msg, msg
    assert "\n" not in msg


@pytest.mark.parametrize("kind, body, fragment", [
    ("training", "checkpoint: {keep: 3}  #<", "did you mean 'checkpoints'?"),
    ("training", "dataset: {sise: 2 TB}  #<", "did you mean 'size'?"),
    ("training", "settings: {microbatch: 2}  #<", "did you mean 'micro_batch'?"),
    ("inference", "traffic: {concurrency: {typ: 2}}  #<", "did you mean 'typical'?"),
    ("inference", "service: {maintenance_window: [sun]}  #<", "did you mean 'maintenance_windows'?"),
    ("training", "traffic: {concurrency: 2}  #<", "'traffic' applies to inference jobs"),
    ("inference", "checkpoints: {keep: 2}  #<", "'checkpoints' applies to training jobs"),
])
def test_unknown_keys_are_rejected_with_the_closest_key(kind, body, fragment):
    text = job_yaml(kind, body)
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="r.yaml")
    assert len(exc.value.errors) == 1, exc.value.errors
    assert f"r.yaml:{marked_line(text)}:" in exc.value.errors[0]
    assert fragment in exc.value.errors[0]


def test_unknown_top_level_keys():
    with pytest.raises(RequestError) as exc:
        parse_request("titel: x\nmethod: lora\njobs:\n  - {name: a, kind: training, model: {name: qwen2.5-0.5b}, "
                      "method: lora, dataset: {tokens: 1M}}\n", source="t.yaml")
    e = exc.value.errors
    assert e[0].startswith("t.yaml:1: titel: ") and "did you mean 'title'?" in e[0]
    assert e[1].startswith("t.yaml:2: method: ") and "belongs inside a job" in e[1]


def test_all_problems_are_reported_at_once_in_line_order():
    text = job_yaml("inference", """\
    traffic:
      concurrency: {typical: 2, peak: lots}
      context: 8q
    engine: tgi
    """)
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="r.yaml")
    lines = [int(e.split(":")[1]) for e in exc.value.errors]
    assert len(lines) == 3 and lines == sorted(lines)


@pytest.mark.parametrize("text, fragment, line", [
    ("jobs:\n  - name: a\n    kind: inference\n    model: {name: qwen2.5-0.5b}\n    traffic: {concurrency: 1}\n"
     "    traffic: {concurrency: 2}\n", "traffic: given twice (first on line 5)", 6),
    ("jobs: [\n", "not valid YAML", 2),
    ("jobs: []\n", "non-empty list", 1),
    ("title: x\n", "jobs: is required", 1),
    ("", "the file is empty", 1),
    ("- a\n- b\n", "top level must be a mapping", 1),
    ("jobs:\n  - {name: a, kind: training, method: lora, dataset: {tokens: 1M}}\n", "model: is required", 2),
    ("jobs:\n  - {name: a, model: {name: qwen2.5-0.5b}}\n", "kind: is required", 2),
    ("jobs:\n  - {name: a, kind: training, model: {name: qwen2.5-0.5b}, dataset: {tokens: 1M}}\n",
     "method: is required", 2),
    ("jobs:\n  - {name: a, kind: training, model: {name: qwen2.5-0.5b}, method: full}\n", "dataset: is required", 2),
    ("jobs:\n  - {name: 'a b', kind: inference, model: {name: qwen2.5-0.5b}, traffic: {concurrency: 1}}\n",
     "not a valid name", 2),
])
def test_structural_errors(text, fragment, line):
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="s.yaml")
    first = exc.value.errors[0]
    assert fragment in first, exc.value.errors
    assert first.startswith(f"s.yaml:{line}:"), first


def test_duplicate_job_names_and_references():
    text = ("jobs:\n"
            "  - {name: a, kind: inference, model: {name: qwen2.5-0.5b}, traffic: {concurrency: 1}}\n"
            "  - {name: a, kind: inference, model: {name: qwen2.5-0.5b}, traffic: {concurrency: 1}}\n")
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="d.yaml")
    assert exc.value.errors == ["d.yaml:3: job 'a' (inference): name: another job is also named 'a'; job names must "
                                "be unique"]


def test_a_model_path_is_relative_to_the_request(tmp_path):
    cfg = tmp_path / "my-model" / "config.json"
    cfg.parent.mkdir()
    import json
    cfg.write_text(json.dumps({"model_type": "llama", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
                               "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
                               "max_position_embeddings": 2048}))
    req_file = tmp_path / "req.yaml"
    req_file.write_text(job_yaml("inference", "model: {name: my-model/config.json}"))
    from llmsizer.request import load_request
    req = load_request(req_file)
    assert req.jobs[0].model.name == str(cfg)


def test_json_requests_are_yaml_too():
    req = parse_request('{"jobs": [{"name": "c", "kind": "inference", "model": {"name": "qwen2.5-0.5b"}, '
                        '"traffic": {"concurrency": {"typical": 1, "peak": 4}}}]}')
    assert req.jobs[0].traffic.concurrency.peak == 4


def test_import_llmsizer_does_not_import_yaml():
    import subprocess
    import sys
    code = "import sys, llmsizer, llmsizer.request; print('yaml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[2] / "src")})
    assert out.stdout.strip() == "False"


def test_parallel_settings_are_checked_against_the_instance_devices():
    ok = job_yaml("training", "settings: {tp: 2}\nresources: {instance: aws-p5.48xlarge, nodes: 2}")
    assert parse_request(ok).jobs[0].settings.tp == 2  # 16 devices: a multiple of TP 2
    bad = job_yaml("training", "settings: {tp: 3}  #<\nresources: {instance: aws-p5.48xlarge}")
    with pytest.raises(RequestError) as exc:
        parse_request(bad, source="r.yaml")
    assert exc.value.errors[0].startswith(f"r.yaml:{marked_line(bad)}: job 'ft' (training): settings: gpus (8)")


def test_engine_settings_are_read_as_the_cli_flags_read_them():
    text = job_yaml("inference", """\
    engine: llama.cpp
    engine_settings:
      split_mode: row
      tensor_split: "3, 1"
      n_cpu_moe: 0
    resources: {device: rtx-3090, count: 2}
    """)
    job = parse_request(text, source="r.yaml").jobs[0]
    assert isinstance(job, InferenceJob) and job.engine == "llamacpp"
    assert job.engine_settings.fields() == {"split_mode": "row", "tensor_split": (3.0, 1.0), "n_cpu_moe": 0}
    text = job_yaml("inference", """\
    engine: sglang
    engine_settings: {mem_fraction_static: 0.8}
    """)
    assert parse_request(text, source="r.yaml").jobs[0].engine_settings.mem_fraction_static == 0.8


@pytest.mark.parametrize("body, fragment", [
    # the CLI's ranges (numbers.py SPLIT_SHARE, CPU_MOE_LAYERS, UTILIZATION) and choices (specs/workload.py)
    ("engine: llamacpp\nengine_settings:\n  tensor_split: [3, -1]  #<\nresources: {device: rtx-3090, count: 2}",
     "engine_settings.tensor_split: -1 is out of range"),
    ("engine: llamacpp\nengine_settings:\n  tensor_split: [0, 0]  #<\nresources: {device: rtx-3090, count: 2}",
     "must not all be 0"),
    ("engine: llamacpp\nengine_settings:\n  tensor_split: [3, a]  #<\nresources: {device: rtx-3090, count: 2}",
     "must be numbers, one share per GPU"),
    ("engine: llamacpp\nengine_settings:\n  tensor_split: [3, 1, 1]  #<\nresources: {device: rtx-3090, count: 2}",
     "has 3 shares; give one share per GPU of one machine (2 GPUs; one copy of the model)"),
    ("engine: llamacpp\nengine_settings:\n  split_mode: diagonal  #<", "unknown value 'diagonal'; choose one of: "
     "none, layer, row"),
    ("engine: llamacpp\nengine_settings:\n  n_cpu_moe: -1  #<", "engine_settings.n_cpu_moe: -1 is out of range"),
    ("engine: sglang\nengine_settings:\n  mem_fraction_static: 1.5  #<", "1.5 is out of range"),
    ("engine: vllm\nengine_settings:\n  mem_fraction_static: 0.8  #<", "applies to engine sglang, not vllm"),
    # no engine: a setting only llama.cpp reads implies it (specs/workload.py implied_engine); one of each engine's
    # is refused once, at the first's line, naming both
    ("engine_settings:\n  n_cpu_moe: 4\n  mem_fraction_static: 0.8  #<", "engine_settings.mem_fraction_static: "
     "applies to engine sglang and n_cpu_moe to engine llamacpp: no engine reads both"),
    # (max_num_seqs with no engine: vLLM's or SGLang's, the devices' default decides at plan time, as on the CLI:
    # tests/cli/test_webwords_errors.py)
])
def test_engine_settings_errors_name_the_field_and_its_line(body, fragment):
    text = job_yaml("inference", body)
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="r.yaml")
    first = exc.value.errors[0]
    assert fragment in first and first.startswith(f"r.yaml:{marked_line(text)}: job 'chat' (inference): "), first
    assert len(exc.value.errors) == 1


@pytest.mark.parametrize(("kind", "value", "hint"), [
    ("inference", "awq-int4", True), ("inference", "q4_k_m", True), ("inference", "bf17", False),
    ("training", "awq-int4", False),
])
def test_a_weight_format_as_an_inference_precision_points_to_quantization(kind, value, hint):
    """probe20 D6: `precision: awq-int4` meant serving AWQ, which the request file takes in `quantization:` (the
    field's own description, request/fields.py, and the template); the error names that key for a weight format's
    name (AWQ int4 and llama.cpp's Q4_K_M: formulas/weight_formats.py's names), not for a typo or a training job
    (a training job's precision, settings.precision, is a mixed-precision recipe: no hint there)."""
    text = job_yaml(kind, f"precision: {value}  #<" if kind == "inference" else f"settings: {{precision: {value}}}  #<")
    with pytest.raises(RequestError) as exc:
        parse_request(text, source="r.yaml")
    first = exc.value.errors[0]
    assert first.startswith(f"r.yaml:{marked_line(text)}: ") and f"precision: unknown value '{value}'" in first
    assert ("a weight format goes in `quantization:` (e.g. quantization: " + value + ")" in first) is hint, first
    assert len(first.splitlines()) == 1
    if kind == "inference":
        assert next(f for f in job_fields("inference") if f.name == "quantization").doc.startswith(
            "the weight format served")

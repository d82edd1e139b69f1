"""probe25 C4: a plan of a continued-pretraining job with ``model: {name: llama-3.1-70b}`` named
meta-llama/Llama-3.1-70B-Instruct throughout, the catalog having no base 70B entry. The base's config.json
(xiaowanCN/aiconfigurator model_configs/meta-llama--Meta-Llama-3.1-70B_config.json @5f2e6bb0, verbatim) is now its
own entry, as llama-3.1-8b is the 8B base's: the plan names the base, and nothing in it says Instruct."""

from __future__ import annotations

import json

import yaml

from llmsizer.catalog.models import find
from llmsizer.plan import make_plan
from llmsizer.render.plan_text import render_plan_text
from llmsizer.request import parse_request

JOB = {
    "name": "cpt", "kind": "training", "model": {"name": "llama-3.1-70b"}, "method": "full",
    "purpose": "knowledge", "baseline_tried": True,
    "settings": {"micro_batch": 1, "seq_len": 4096, "train_tokens": "1B tokens"},
    "dataset": {"tokens": "1B tokens", "location": "NAS /data", "sensitivity": "internal"},
    "resources": {"device": "h100-sxm", "count": 16, "nodes": 2, "storage": "10 TB", "price_per_hour": "$64/h"},
}


def test_the_plan_names_the_base_70b() -> None:
    req = parse_request(yaml.safe_dump({"version": 1, "jobs": [JOB]}, sort_keys=False), source="cpt.yaml")
    plan = make_plan(req)
    (job,) = plan.jobs
    assert job.model == "meta-llama/Llama-3.1-70B"
    text = render_plan_text(plan)
    data = json.dumps(plan.to_dict())
    assert "meta-llama/Llama-3.1-70B" in text and "meta-llama/Llama-3.1-70B" in data
    assert "Instruct" not in text and "Instruct" not in data


def test_base_and_instruct_are_two_entries_of_one_architecture() -> None:
    """The base answers its own names and the Instruct its own; a release word on the base's name finds the base,
    not the Instruct that sorts before it. The two configs differ only where the releases do (eos_token_id,
    transformers_version), as the 8B pair's do."""
    base, inst = find("llama-3.1-70b"), find("llama-3.1-70b-instruct")
    assert {find(n).id for n in ("meta-llama/Llama-3.1-70B", "Meta-Llama-3.1-70B", "Llama-3.1-70B-Base")} == {base.id}
    assert find("meta-llama/Meta-Llama-3.1-70B-Instruct").id == inst.id == "meta-llama/Llama-3.1-70B-Instruct"
    differ = {k for k in base.config.keys() | inst.config.keys() if base.config.get(k) != inst.config.get(k)}
    assert differ == {"eos_token_id", "transformers_version"}
    assert (base.config["eos_token_id"], base.config["transformers_version"]) == (128001, "4.43.0.dev0")
    assert "meta-llama--Meta-Llama-3.1-70B_config.json@5f2e6bb0cce1c64ae849cca017cadeeedbc4fcfe" in base.source
    assert base.retrieved

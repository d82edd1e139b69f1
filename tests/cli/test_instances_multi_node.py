"""Several instances from one flag: ``--gpus`` (or ``--count``) a whole multiple of an instance's devices means that
many instances, each one machine of the instance's devices talking over the instance's network, and each priced
(docs/training.md). Truth: the catalog's instance row read from its JSON file, and the ring collectives written out
(NCCL bus bandwidth across machines = min(NVLink, the machine's network), formulas/network.py eq. (11))."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.cli_run import answer, run
from llmsizer import fit_training
from llmsizer.recommend import Constraints, recommend_training

ROW = next(r for r in json.loads((Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/hardware/"
                                  "instances_aws.json").read_text())["instances"] if r["id"] == "aws-p5.48xlarge")
TOKENS = "1000000000"


def test_train_gpus_beyond_one_instance_is_several(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = answer(["train", "qwen2.5-0.5b", "--device", "aws-p5.48xlarge", "--gpus", "16", "--tokens", TOKENS],
                     capsys)
    d = data["duration"]
    assert d["devices"] == 16 and d["step"]["topology"] == "multi-node"
    network = ROW["network"]["value"] * 1e9 / 8  # 3200 Gb/s per machine
    assert d["step"]["bus_bandwidth"] == pytest.approx(min(18 * 20.6e9, network))  # NVLink as NCCL credits it (eq. 12)
    notes = {a["name"]: a for a in d["assumptions"]}
    assert notes["inter_node_network"]["value"] == pytest.approx(network)


def test_fit_prices_every_instance(capsys: pytest.CaptureFixture[str]) -> None:
    _, one = answer(["fit", "qwen2.5-0.5b", "--device", "aws-p5.48xlarge", "--train", "--tokens", TOKENS], capsys)
    _, two = answer(["fit", "qwen2.5-0.5b", "--device", "aws-p5.48xlarge", "--train", "--gpus", "16", "--tokens",
                     TOKENS], capsys)
    price = ROW["price"]["value"]
    assert one["training_time"]["price_per_hour"] == pytest.approx(price)
    assert two["training_time"]["price_per_hour"] == pytest.approx(2 * price)
    assert two["count"] == 16 and two["memory"]["details"]
    t = two["training_time"]
    assert t["cost"] == pytest.approx(2 * price * t["seconds"] / 3600)
    # the Python API and train give the same duration for the same words
    api = fit_training("qwen2.5-0.5b", "aws-p5.48xlarge", 16, tokens=1e9)
    assert api.duration is not None and api.duration.seconds == pytest.approx(t["seconds"], rel=1e-12)
    _, tr = answer(["train", "qwen2.5-0.5b", "--device", "aws-p5.48xlarge", "--gpus", "16", "--tokens", TOKENS],
                   capsys)
    assert tr["duration"]["seconds"] == pytest.approx(t["seconds"], rel=1e-12)


@pytest.mark.parametrize("gpus,says", [("12", "give 8 (1 instance) or 16 (2 instances), or the device name h100-sxm"),
                                       ("4", "give 8 (1 instance), or the device name h100-sxm")])
def test_part_of_an_instance_is_refused_with_the_forms_that_work(gpus: str, says: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["train", "qwen2.5-0.5b", "--device", "aws-p5.48xlarge", "--gpus", gpus, "--tokens", TOKENS],
                       capsys)
    assert code == 2 and says in err and err.count("\n") == 1


def test_count_and_gpus_that_disagree_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--count", "2", "--gpus", "4", "--train"],
                       capsys)
    assert code == 2 and "count (2) and gpus (4)" in err


def test_recommend_scales_out_over_the_network_as_fit_times_it() -> None:
    """An option of several instances is timed as ``fit --train --count N x devices`` (the network included), not
    by dividing one instance's time by N."""
    rec = recommend_training("llama-3.1-8b", tokens=20e9, constraints=Constraints(deadline=2 * 86400))
    many = [o for o in rec.options if o.instances > 1 and o.target == "aws-p5.48xlarge"]
    assert many
    o = many[0]
    fr = fit_training("llama-3.1-8b", o.target, o.count, tokens=20e9)  # count: every device (fit's)
    assert (o.count, o.instances) == (fr.count, fr.instances) == (o.instances * ROW["device_count"], o.instances)
    assert fr.duration is not None and o.training_seconds == pytest.approx(fr.duration.seconds, rel=1e-12)
    assert o.price_per_hour == pytest.approx(o.instances * ROW["price"]["value"])
    assert o.replicas == fr.replicas  # fit's model copies over all the devices (data parallelism), not the instances

"""`recommend --train --gpus N`: every option is N devices (a bare device N times; an instance as the whole instances
that make N, fit's rule ``fit.not_whole_instances``), an instance that cannot give N is a rejection with its
reason, not an error; exit codes 0 answered, 1 nothing fits, 2 bad input. And a training search with none chosen
states no top-level assumptions or warnings, so its JSON does not depend on the order the hardware is listed in.

Before: ``recommend llama-3.1-8b --train --tokens 1B --method lora --gpus 2`` stopped at the first 8-GPU instance
with "aws-p5.48xlarge has 8 devices: 2 devices are not whole instances" (exit 2), and a search with none chosen
stated the first timed option's duration notes (its collective bandwidth: the listing order's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run, run_json
from llmsizer.catalog.hardware import _read_builtin, load_catalog

TRAIN = ("llama-3.1-8b", "--train", "--tokens", "1B", "--method", "lora")


def test_gpus_2_answers_with_two_device_options_and_skips_the_8_gpu_instances() -> None:
    code, rec = run_json("recommend", *TRAIN, "--gpus", "2", "--provider", "aws")
    assert code == 0 and rec["chosen"] is not None
    cat = load_catalog()
    for o in rec["options"]:  # each option is 2 devices (count, fit's), the whole instances they are
        inst = cat.instances[o["target"]]
        assert o["count"] == 2 and o["instances"] * inst.device_count == 2, o
    skipped = {o["target"]: o for o in rec["rejected"] if "not whole instances" in " ".join(o["reasons"])}
    eight = {i.id for i in cat.instances.values() if i.provider == "aws" and i.device_count == 8}
    assert "aws-p5.48xlarge" in eight and eight <= set(skipped)
    assert skipped["aws-p5.48xlarge"]["reasons"] == [
        "aws-p5.48xlarge has 8 devices: 2 devices are not whole instances (--gpus 2: whole instances only)"]
    # the chosen option is fit --train --count 2 on it: the same memory, wall clock and price
    ch = rec["chosen"]
    code, fit = run_json("fit", *TRAIN[:1], "--train", "--device", ch["target"], "--count", "2", *TRAIN[2:])
    assert code == 0 and fit["fits"]
    assert (ch["memory_per_device"], ch["training_seconds"], ch["price_per_hour"]) == (
        fit["memory_per_device"], fit["training_time"]["seconds"], fit["training_time"]["price_per_hour"])


def test_gpus_2_on_local_devices_and_one_gpu_instances(tmp_path: Path) -> None:
    """A bare device is taken twice; a 1-GPU instance twice (2 instances, priced as 2); a 4-GPU box is skipped."""
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"instances": [
        {"id": "one-l40s", "name": "one", "provider": "mybox", "device": "l40s", "device_count": 1,
         "price": {"value": 1.0, "unit": "USD/h", "source": "user"}},
        {"id": "four-l40s", "name": "four", "provider": "mybox", "device": "l40s", "device_count": 4,
         "price": {"value": 4.0, "unit": "USD/h", "source": "user"}}]}), encoding="utf-8")
    code, rec = run_json("recommend", *TRAIN, "--gpus", "2", "--provider", "mybox", "--hardware-file", str(hw))
    assert code == 0
    (one,) = rec["options"]
    assert (one["target"], one["count"], one["instances"], one["price_per_hour"]) == ("one-l40s", 2, 2, 2.0)
    assert "2 instances of 1 device (--gpus 2), no network between them" in one["reasons"][-1]  # a lower bound
    (four,) = rec["rejected"]
    assert four["target"] == "four-l40s" and "4 devices: 2 devices are not whole instances" in four["reasons"][0]
    code, local = run_json("recommend", *TRAIN, "--gpus", "2", "--top", "200")
    assert code == 0
    by = {o["target"]: o for o in local["options"] + local["rejected"]}
    assert by["rtx-5090"]["count"] == 2 and by["rtx-5090"]["instances"] == 1


def test_exit_codes() -> None:
    # nothing fits: a 70B full fine-tune on two laptop devices -> 1, every option rejected with a reason
    code, rec = run_json("recommend", "llama-3.1-70b", "--train", "--tokens", "1B", "--method", "full",
                         "--gpus", "2", "--laptop")
    assert code == 1 and rec["chosen"] is None and rec["rejected"] and all(o["reasons"] for o in rec["rejected"])
    sized = [o for o in rec["rejected"] if o["memory_per_device"] is not None]  # not those of unknown memory
    assert sized and all(o["count"] == 2 for o in sized)
    # bad input: 3 devices cannot hold tensor parallelism of 2 -> 2, one line
    code, out, err = run("recommend", *TRAIN, "--gpus", "3", "--tp", "2")
    assert code == 2 and out == "" and err.strip().count("\n") == 0 and "gpus (3)" in err
    # a deadline no 2-device option meets: no instances are added (the devices were given) -> 1
    code, rec = run_json("recommend", *TRAIN, "--gpus", "2", "--provider", "aws", "--deadline", "1h")
    assert code == 1 and any("on 2 devices (--gpus) misses the" in " ".join(o["reasons"]) for o in rec["rejected"])
    assert all(o["count"] == 2 for o in rec["rejected"] if o["training_seconds"])


def _boxes(tmp_path: Path, first: int) -> Path:
    """A 2-GPU box of the RTX 4090 (no peer-to-peer: host-staged collectives) and of a twin that does not state
    peer_to_peer (the direct link), listed in the order ``first``."""
    raw = next(d for d in _read_builtin("accelerators.json")["devices"] if d["id"] == "rtx-4090")
    twin = {k: v for k, v in raw.items() if k != "peer_to_peer"}
    twin.update(id="twin-4090", name="twin", aliases=[])
    boxes = [{"id": f"box-{d}", "name": f"box {d}", "provider": "mybox", "device": d, "device_count": 2,
              "price": {"value": 1.0, "unit": "USD/h", "source": "user"}} for d in ("rtx-4090", "twin-4090")]
    path = tmp_path / f"hw{first}.json"
    path.write_text(json.dumps({"devices": [twin], "instances": boxes[first:] + boxes[:first]}), encoding="utf-8")
    return path


@pytest.mark.parametrize("gpus", [(), ("--gpus", "2")])
def test_none_chosen_answers_the_same_in_either_listing_order(tmp_path: Path, gpus: tuple[str, ...]) -> None:
    """Both boxes are timed (they fit) and both miss the budget: none chosen. The answer states no run's notes at
    the top (each is its option's fit --train --tokens), so either listing order gives the same JSON."""
    answers: list[Any] = []
    for first in (0, 1):
        path = _boxes(tmp_path, first)
        code, rec = run_json("recommend", "llama-3.2-1b", "--train", "--method", "full", "--tokens", "1e8",
                             "--provider", "mybox", "--max-cost", "0.01", "--hardware-file", str(path), *gpus)
        assert code == 1 and rec["chosen"] is None and len(rec["rejected"]) == 2
        assert all(o["training_seconds"] for o in rec["rejected"])  # both were timed
        answers.append(rec)
    assert answers[0] == answers[1]
    # recommend's own rule only (no deadline given: the practical limit stands in for one), no run's notes
    assert [a["name"] for a in answers[0]["assumptions"]] == ["practical_training_limit"]
    assert answers[0]["warnings"] == []

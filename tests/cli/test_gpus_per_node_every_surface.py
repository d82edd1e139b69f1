"""``--gpus-per-node`` (serving) on ``models --fits-on`` and ``recommend``: the machine size reaches ``fit``'s one rule
(estimate/fit.py ``serving_machine_size``), so each surface gives the layout and numbers ``fit --gpus-per-node`` gives
for the same devices. The expected values are ``fit``'s own answers, computed in each test.

Why the machine size changes the answer here (independent of our output): Qwen3-32B has 64 attention heads and 8 KV
heads (config.json), so tensor parallel 2 and 4 are both whole shards; vLLM shards a model over its tensor-parallel
group and runs the other devices as replicas (data parallel), so on machines of 2 a copy that stays inside a machine is
TP 2 (x 2 replicas), while one machine of 4 can hold a TP 4 copy."""

from __future__ import annotations

from typing import Any

from cli_capture import run, run_json
from llmsizer.estimate.fit import fit

MODEL, DEVICE = "qwen3-32b", "a100-pcie-80gb"


def _fit(count: int, **kw: Any) -> Any:
    return fit(MODEL, DEVICE, count, **kw)


def test_fits_on_takes_gpus_per_node_as_fit() -> None:
    default, two = _fit(4), _fit(4, gpus_per_node=2)
    assert (default.tensor_parallel, default.replicas) == (4, 1)  # the flag must change something to be tested
    assert (two.tensor_parallel, two.replicas) == (2, 2)
    code, d = run_json("models", MODEL, "--fits-on", DEVICE, "--count", "4", "--gpus-per-node", "2", "--json")
    assert code == 0 and d["gpus_per_node"] == 2
    (row,) = [m for m in d["models"] if m["id"] == "Qwen/Qwen3-32B"]
    f = _fit(4, gpus_per_node=2, engine=row["engine"], weights=row["weights_format"])
    assert (row["tensor_parallel"], row["replicas"]) == (f.tensor_parallel, f.replicas) == (2, 2)
    assert row["memory_per_device"] == f.memory_per_device
    assert row["tokens_per_second"] == f.tokens_per_second_total
    code, d = run_json("models", MODEL, "--fits-on", DEVICE, "--count", "4", "--json")
    (row,) = [m for m in d["models"] if m["id"] == "Qwen/Qwen3-32B"]
    assert (row["tensor_parallel"], row["replicas"]) == (default.tensor_parallel, default.replicas)


def test_fits_on_text_names_the_machine_size() -> None:
    code, out, _ = run("models", MODEL, "--fits-on", DEVICE, "--count", "4", "--gpus-per-node", "2")
    assert code == 0 and out.startswith(f"models on 4 x {DEVICE}, devices per machine 2:")


def test_fits_on_gpus_per_node_needs_fits_on() -> None:
    code, _, err = run("models", "--gpus-per-node", "2")
    assert code == 2 and "--gpus-per-node" in err and "--fits-on" in err


def test_recommend_searches_bare_cards_within_one_machine_of_gpus_per_node() -> None:
    """Bare (local) cards are searched up to one machine (fit's machine size): 8 by default, 2 when given; each such
    option is fit's answer at that count with ``gpus_per_node`` 2; instances are their own machines, unchanged."""
    code, base = run_json("recommend", MODEL, "--json")
    assert code == 0
    code, two = run_json("recommend", MODEL, "--gpus-per-node", "2", "--json")
    assert code == 0
    assert [a["value"] for a in two["assumptions"] if a["name"] == "gpus_per_node"] == [2]
    assert not [a for a in base["assumptions"] if a["name"] == "gpus_per_node"]
    local = [o for o in two["options"] if o["provider"] == "local"]
    assert local and max(o["count"] for o in local) <= 2
    assert max(o["count"] for o in base["options"] if o["provider"] == "local") > 2  # the bound changed something
    for o in local:
        f = fit(MODEL, o["target"], o["count"], gpus_per_node=2, engine=o["engine"], weights=o["weights_format"])
        assert (o["tensor_parallel"], o["replicas"]) == (f.tensor_parallel, f.replicas), o["target"]
        assert o["memory_per_device"] == f.memory_per_device, o["target"]
    def cloud(d: dict[str, Any]) -> list[Any]:
        return sorted((o["target"], o["count"], o["tensor_parallel"], o["weights_format"], o["tokens_per_second"])
                      for o in d["options"] if o["provider"] != "local")
    assert cloud(two) == cloud(base)


def test_recommend_serving_no_longer_refuses_gpus_per_node() -> None:
    code, _, err = run("recommend", MODEL, "--gpus-per-node", "2", "--laptop")
    assert code in (0, 1), err


def test_fits_on_refuses_a_machine_size_as_fit_does() -> None:
    """A machine size that contradicts an instance (AWS p4d.24xlarge: 8 A100 GPUs in one instance, AWS's instance
    page) or does not divide the devices: fits-on exits 2 with fit's one line (estimate/fit.py serving_machine_size)."""
    for extra in (["aws-p4d.24xlarge", "--gpus-per-node", "2"],
                  [DEVICE, "--count", "4", "--gpus-per-node", "3"]):
        code, _, err = run("models", MODEL, "--fits-on", *extra)
        fit_code, _, fit_err = run("fit", MODEL, "--device", *extra)
        assert code == fit_code == 2
        assert len(err.strip().splitlines()) == 1 and "--gpus-per-node" in err and err == fit_err


def test_recommend_train_sizes_instances_as_their_own_machines() -> None:
    """An instance is its own machine (AWS p5.48xlarge: 8 H100 GPUs, AWS's instance page): `recommend --train
    --gpus-per-node 4` sizes the local devices by it and every instance option as without it (review20: it exited 2
    on the first 8-GPU instance, fit's refusal of a machine size that contradicts an instance)."""
    from llmsizer.recommend import recommend_training

    kw = dict(tokens=1e8, method="full", seq_len=2048)
    given, plain = recommend_training("llama-3.1-8b", gpus_per_node=4, **kw), recommend_training("llama-3.1-8b", **kw)

    def instances(rec: Any) -> dict[str, Any]:
        return {o.target: (o.count, o.training_seconds, o.run_cost) for o in rec.options if o.provider != "local"}

    assert instances(given) and instances(given) == instances(plain)


def test_fit_train_refuses_machines_the_devices_do_not_fill() -> None:
    """8 GPUs in machines of 3 are not whole machines: fit --train refuses them with serving's line (one rule)."""
    code, _, err = run("fit", MODEL, "--train", "--device", DEVICE, "--count", "8", "--gpus-per-node", "3")
    serve_code, _, serve_err = run("fit", MODEL, "--device", DEVICE, "--count", "8", "--gpus-per-node", "3")
    assert code == serve_code == 2 and err == serve_err and "split evenly" in err

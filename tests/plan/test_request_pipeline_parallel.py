"""A serving job's ``pipeline_parallel`` (request/fields.py), given with ``tensor_parallel``, makes each replica
tensor_parallel x pipeline_parallel devices, as `fit --tp T --pp P` does (estimate/fit.py ``ServingLayout.replicas``,
the one home of the devices per replica): the plan's hardware, memory and speed are `fit ... --tp 8 --pp 2 --json`'s
and `infer ... --tp 8 --pp 2 --json`'s for the same load, and `capacity check` books a replica of 16 GPUs, one copy
over two machines of 8 (so on one fabric).

Truth, apart from the plan: the CLI's `infer` and `fit` answers for the same model, devices, engine and load; the
replica count by hand (16 devices / (8 x 2) = 1; 32 / 16 = 2); the machines one copy spans by hand (16 / 8 = 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.cli_run import answer, run
from llmsizer.errors import InputError
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

MODEL = "deepseek-r1"
LOAD = ("--context", "4096", "--output-tokens", "256")


def body(extra: str = "tensor_parallel: 8\npipeline_parallel: 2", count: int = 16, engine: str = "vllm",
         nodes: int = 2) -> str:
    return "\n".join([f"model: {{name: {MODEL}}}", f"engine: {engine}",
                      f"resources: {{device: h100-sxm, count: {count}, nodes: {nodes}}}",
                      "traffic: {concurrency: {typical: 32, peak: 64}, context: {typical: 2k, peak: 4k}, "
                      "output: {typical: 256, peak: 256}}", extra])


def plan_of(text: str):
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


@pytest.mark.parametrize("count,replicas", [(16, 1), (32, 2)])
def test_the_plan_answers_what_infer_and_fit_tp_pp_answer(capsys: pytest.CaptureFixture[str], count: int,
                                                          replicas: int) -> None:
    job = plan_of(job_yaml("inference", body(count=count, nodes=count // 8)))
    hw = job.hardware
    assert (hw.tensor_parallel, hw.pipeline_parallel, hw.replicas) == (8, 2, replicas)
    assert hw.count // hw.replicas == 8 * 2  # a replica is T x P devices
    assert job.to_dict()["hardware"]["pipeline_parallel"] == 2
    per_replica = 64 // replicas
    _, inf = answer(["infer", MODEL, "--device", "h100-sxm", "--engine", "vllm", "--tp", "8", "--pp", "2", *LOAD,
                     "--concurrency", str(per_replica)], capsys)
    mem = job.section("memory")
    d = inf["details"]
    assert mem.value("need_peak") == d["workload_bytes"]  # what the verdict compares, the binding stage's
    assert mem.value("memory_per_device") == inf["totals"]["device"]["bytes"]
    assert mem.value("weights") == d["weights_bytes"]
    assert mem.value("fits") is True
    _, fit = answer(["fit", MODEL, "--device", "h100-sxm", "--count", str(count), "--engine", "vllm", "--tp", "8",
                     "--pp", "2", *LOAD, "--concurrency", "64"], capsys)
    assert (fit["tensor_parallel"], fit["pipeline_parallel"], fit["replicas"]) == (8, 2, replicas)
    assert mem.value("memory_per_device") == fit["memory_per_device"]
    assert job.section("speed").value("tps_user_peak") == pytest.approx(fit["speed"]["tokens_per_second_per_user"],
                                                                        rel=1e-12)


def test_without_the_field_there_is_no_pipeline() -> None:
    job = plan_of(job_yaml("inference", body("tensor_parallel: 16")))
    assert (job.hardware.tensor_parallel, job.hardware.pipeline_parallel, job.hardware.replicas) == (16, 1, 1)
    assert "pipeline_parallel" not in job.to_dict()["hardware"]  # as fit --json leaves it out


def test_stages_alone_take_fit_s_degree(capsys: pytest.CaptureFixture[str]) -> None:
    """pipeline_parallel without tensor_parallel: fit's choice of each stage's degree (`fit --pp 2`), among the
    degrees t whose replicas of t x 2 devices fill the 16 (t in 1, 2, 4, 8: by hand, the divisors of 16 / 2)."""
    job = plan_of(job_yaml("inference", body("pipeline_parallel: 2")))
    _, fit = answer(["fit", MODEL, "--device", "h100-sxm", "--count", "16", "--engine", "vllm", "--pp", "2", *LOAD,
                     "--concurrency", "64"], capsys)
    ranked = fit["details"]["tensor_parallel_layouts"]
    assert sorted((d["tensor_parallel"], d["replicas"]) for d in ranked) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert (job.hardware.tensor_parallel, job.hardware.pipeline_parallel, job.hardware.replicas) == \
        (fit["tensor_parallel"], 2, fit["replicas"])
    assert job.section("memory").value("memory_per_device") == fit["memory_per_device"]


def test_the_field_needs_named_devices() -> None:
    text = job_yaml("inference", f"model: {{name: {MODEL}}}\npipeline_parallel: 2")
    with pytest.raises(InputError, match="pipeline_parallel: lays out the devices named in resources"):
        parse_request(text, source="t.yaml")


@pytest.mark.parametrize("extra,engine,message", [
    ("pipeline_parallel: 3", "vllm", "pipeline_parallel 3 does not divide the 16 devices"),
    ("tensor_parallel: 8\npipeline_parallel: 3", "vllm",
     "pipeline_parallel: tensor_parallel 8 x pipeline_parallel 3 does not divide the 16 devices"),
    ("tensor_parallel: 1\npipeline_parallel: 2", "llamacpp", "pipeline_parallel applies to vLLM"),
    ("tensor_parallel: 8\npipeline_parallel: 2", "transformers", "pipeline_parallel applies to vLLM"),
])
def test_a_layout_fit_refuses_is_refused_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str,
                                                     engine: str, message: str) -> None:
    text = job_yaml("inference", body(extra, engine=engine))
    with pytest.raises(InputError, match=rf"t\.yaml:\d+: job 'chat' \(inference\): .*{message}"):
        plan_of(text)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    code, _, err = run(["plan", str(path)], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def _inventory(fabric_a: str, fabric_b: str) -> str:
    fabrics = ", ".join(f"{{id: {f}, bandwidth: 3200 Gb/s}}" for f in dict.fromkeys((fabric_a, fabric_b)))
    return ("version: 1\nsites:\n  - id: s1\n    fabrics: [" + fabrics + "]\nnodes:\n" + "".join(
        f"  - {{id: h100-{k}, site: s1, device: h100-sxm, devices: 8, cpus: 192, ram: 2 TiB, pools: [serving], "
        f"fabric: {f}}}\n" for k, f in ((1, fabric_a), (2, fabric_b))) +
        "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")


@pytest.mark.parametrize("fabrics,fits", [(("ib", "ib"), True), (("ib-a", "ib-b"), False)])
def test_capacity_check_books_a_replica_of_sixteen(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   fabrics: tuple[str, str], fits: bool) -> None:
    """One TP 8 x PP 2 replica is 16 GPUs: over both 8-GPU machines (copy_nodes 2, by hand 16 / 8), so its stages'
    sends cross the network and it is placed only where the two share a fabric, the rule of a copy spanning
    machines (provider/placement.py JobNeed.one_fabric)."""
    (tmp_path / "inv.yaml").write_text(_inventory(*fabrics))
    (tmp_path / "r.yaml").write_text(job_yaml("inference", body() + "\nstart: 2027-01-04\n"
                                              "service: {duration: 1 month}"))
    code, out, err = run(["capacity", "check", str(tmp_path / "r.yaml"), "--inventory", str(tmp_path / "inv.yaml"),
                          "--now", "2026-12-01", "--no-db", "--json"], capsys)
    assert code in (0, 1), err
    (check,) = json.loads(out)["jobs"]
    assert (check["need"]["devices"], check["need"]["copy_nodes"]) == (16, 16 // 8)
    assert check["fits"] is fits, check
    if fits:
        assert sorted(check["placement"]["nodes"]) == ["h100-1", "h100-2"]
        assert check["need"]["memory_per_device"] == plan_of(job_yaml("inference", body())).section(
            "memory").value("memory_per_device")
    else:
        assert check["binding"] == "fabric"

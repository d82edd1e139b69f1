"""A serving job's ``tensor_parallel`` (request/fields.py) pins the layout of the devices it names, as `fit --tp`
does: the plan's hardware, memory per device and speed are `fit ... --tp t --json`'s for the same load (plan/inference.py
``_fit``), and a degree fit refuses is refused at the file's line with fit's own message (exit 2 at the CLI).

Truth, apart from the plan: the CLI's `fit --tp` answer for the same model, devices, engine and load, and
`infer --tp` for the memory per device; the layout fit chooses on its own is the one a job without the field gets.
"""

from __future__ import annotations

import json

import pytest

from cli.cli_run import answer, run
from llmsizer.errors import InputError
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

MODEL = "llama-3.1-70b-instruct"


def body(extra: str = "", device: str = "h100-sxm", count: int = 8, engine: str = "transformers") -> str:
    return f"""\
    model: {{name: {MODEL}}}
    engine: {engine}
    resources: {{device: {device}, count: {count}}}
    traffic: {{concurrency: {{typical: 4, peak: 8}}, context: {{typical: 2k, peak: 4k}}, output: {{typical: 256, peak: 256}}}}
    {extra}"""


def plan_of(text: str):
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


def fit_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, data = answer(["fit", MODEL, "--device", "h100-sxm", "--count", "8", "--engine", "transformers",
                         "--context", "4096", "--output-tokens", "256", *argv], capsys)
    assert code == 0
    return data


@pytest.mark.parametrize("tp", [4, 8])
def test_the_plan_answers_what_fit_tp_answers(capsys: pytest.CaptureFixture[str], tp: int) -> None:
    job = plan_of(job_yaml("inference", body(f"tensor_parallel: {tp}")))
    cli = fit_cli(capsys, "--concurrency", "8", "--tp", str(tp))
    assert (job.hardware.tensor_parallel, job.hardware.replicas) == (cli["tensor_parallel"], cli["replicas"]) \
        == (tp, 8 // tp)
    mem = job.section("memory")
    assert mem.value("need_peak") == cli["memory_per_device"]
    assert mem.value("fits") is cli["fits"] is True
    assert job.section("speed").value("tps_user_peak") == pytest.approx(cli["speed"]["tokens_per_second_per_user"],
                                                                        rel=1e-12)
    _, inf = answer(["infer", MODEL, "--device", "h100-sxm", "--engine", "transformers", "--tp", str(tp),
                     "--context", "4096", "--output-tokens", "256", "--concurrency", str(8 // (8 // tp))], capsys)
    assert mem.value("need_peak") == inf["totals"]["device"]["bytes"]  # the replica's share: 8 sequences / replicas


def test_without_the_field_the_plan_takes_fit_s_choice(capsys: pytest.CaptureFixture[str]) -> None:
    job = plan_of(job_yaml("inference", body()))
    cli = fit_cli(capsys, "--concurrency", "8")
    assert job.hardware.tensor_parallel == cli["tensor_parallel"]
    assert any(d["tensor_parallel"] != cli["tensor_parallel"] for d in cli["details"]["tensor_parallel_layouts"])


@pytest.mark.parametrize("extra,device,count,engine,message", [
    ("tensor_parallel: 3", "h100-sxm", 8, "transformers", "tensor_parallel 3 does not divide the 8 devices"),
    ("tensor_parallel: 2", "epyc-9654", 1, "llamacpp", "runs no tensor parallelism"),
    ("tensor_parallel: 2", "h100-sxm", 2, "llamacpp", "llama.cpp splits the model over the 2 GPUs"),
])
def test_a_degree_fit_refuses_is_refused_at_its_line(extra: str, device: str, count: int, engine: str,
                                                     message: str) -> None:
    text = job_yaml("inference", body(extra + "  #<", device, count, engine))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "#<" in ln)
    # the key once: fit's message opens with it ('tensor_parallel 3 does not divide ...'), not 'tensor_parallel:
    # tensor_parallel 3 ...' (smalls3 #7)
    with pytest.raises(InputError, match=rf"t\.yaml:{line}: job 'chat' \(inference\): tensor_parallel \d.*{message}"
                       rf"|t\.yaml:{line}: job 'chat' \(inference\): {message}") as e:
        plan_of(text.replace("  #<", ""))
    assert str(e.value).count("tensor_parallel") == 1


def test_the_field_needs_named_devices() -> None:
    text = job_yaml("inference", f"model: {{name: {MODEL}}}\ntensor_parallel: 2")
    with pytest.raises(InputError, match="tensor_parallel: pins the layout of the devices named in resources"):
        parse_request(text, source="t.yaml")


def test_the_cli_refuses_it_with_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(job_yaml("inference", body("tensor_parallel: 3")))
    code, _, err = run(["plan", str(path)], capsys)
    assert code == 2 and "tensor_parallel 3 does not divide the 8 devices" in err and len(err.strip().splitlines()) == 1


INVENTORY = """\
version: 1
provider: test
sites:
  - {id: s1, operator: provider, jurisdiction: DE}
nodes:
  - {id: n, count: 1, site: s1, device: h100-sxm, devices: 8, cpus: 64, ram: 1 TiB, disk: 4 TB, pools: [serving]}
storage:
  - {id: st, site: s1, capacity: 100 TB}
"""


@pytest.mark.parametrize("tp", [4, 8])
def test_capacity_check_places_the_memory_fit_tp_answers(tmp_path, capsys: pytest.CaptureFixture[str],
                                                          tp: int) -> None:
    """The provider's check reads the plan: the memory it places per device is `fit --tp t`'s."""
    inv, req = tmp_path / "inv.yaml", tmp_path / "r.yaml"
    inv.write_text(INVENTORY)
    req.write_text(job_yaml("inference", body(f"tensor_parallel: {tp}\n    start: 2027-01-04\n"
                                               "    service: {duration: 1 month}")))
    code, out, err = run(["capacity", "check", str(req), "--inventory", str(inv), "--now", "2026-12-01", "--no-db",
                          "--json"], capsys)
    assert code == 0, err
    (check,) = json.loads(out)["jobs"]
    cli = fit_cli(capsys, "--concurrency", "8", "--tp", str(tp))
    # fit's name for what the verdict compares (docs/nomenclature.md); memory_need its deprecated alias
    assert check["fits"] and check["need"]["verdict_need_per_device"] == cli["memory_per_device"]
    assert check["need"]["memory_need"] == check["need"]["verdict_need_per_device"]


def test_a_degree_eq_tp5_refuses_is_refused_at_its_line() -> None:
    """probe33 D3: eq. TP5's refusal (MiniMax-M2.7's 1536-wide experts in 128 x 128 FP8 blocks: TP 8 leaves 192 per
    device) is fit's exit 2 for `fit --tp 8`, so the plan's pinned degree is refused at its line, as the others are,
    not answered at another degree."""
    text = job_yaml("inference", body("tensor_parallel: 8  #<", "h100-sxm", 8, "vllm").replace(MODEL, "minimax-m2.7"))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "#<" in ln)
    with pytest.raises(InputError, match=rf"t\.yaml:{line}: job 'chat' \(inference\): tensor_parallel 8 splits the "
                       r"1536-wide routed-expert intermediate into 192 per device"):
        plan_of(text.replace("  #<", ""))

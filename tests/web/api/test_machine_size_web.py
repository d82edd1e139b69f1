"""The web refuses a machine size past one machine (numbers.py ``MACHINE_GPUS``: a GB200 / GB300 NVL72 rack's 72
GPUs, the catalog's largest single NVLink domain) and recommend's machine size beside cloud_only, with the CLI's
line and the field named (tests/cli/test_machine_size_bound.py has the CLI side); recommend's options carry
``ownership`` as the CLI's JSON does (``recommend.Option.ownership``, what the compare page shows)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_capture import run

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_outputs"


def _cli_line(*argv: str) -> str:
    code, _, err = run(*argv)
    assert code == 2
    return err.strip().removeprefix("llmsizer: error: ")


def test_fit_past_one_machine(client) -> None:
    r = client.post("/api/v1/fit", json={"model": "llama-3.1-8b", "device": "h100-sxm", "count": 146,
                                          "gpus_per_node": 73})
    assert r.status_code == 400 and r.json()["field"] == "gpus_per_node", r.text
    line = _cli_line("fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "146", "--gpus-per-node", "73")
    assert "[1, 72]" in r.json()["detail"] and "[1, 72]" in line


def test_recommend_machine_size_with_cloud_only(client) -> None:
    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-7b", "gpus_per_node": 4, "cloud_only": True})
    assert r.status_code == 400 and r.json()["field"] == "gpus_per_node", r.text
    assert r.json()["detail"] == _cli_line("recommend", "qwen2.5-7b", "--gpus-per-node", "4", "--cloud-only")


def test_recommend_options_carry_ownership_as_the_cli(client) -> None:
    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-7b", "context": "8k", "kwh_price": 0.3})
    assert r.status_code == 200, r.text
    code, out, _ = run("recommend", "qwen2.5-7b", "--context", "8k", "--kwh-price", "0.3", "--json")
    cli = json.loads(out)
    web = r.json()
    assert [(o["target"], o["ownership"]) for o in web["options"]] == [(o["target"], o["ownership"])
                                                                       for o in cli["options"]]
    assert all("ownership" in o for o in web["options"] + web["rejected"])


def test_the_web_takes_no_hardware_file_and_its_answer_path_labels_one(client, tmp_path: Path) -> None:
    """review21 D11: the ownership comparison above holds on lists that are all None (no catalog device is owned),
    so it cannot catch a wrong label. The web refuses hardware_file (it names a server path); the answer its route
    computes -- bridge.parse of the same fields, then recommend_answer, as ``_estimate_route`` runs them -- labels the
    H100 of a hardware file built by `hardware detect` from real recorded outputs "your hardware", first, in the key
    the compare page renders (compare.js ``label``: ``o.ownership``)."""
    from llmsizer.cli.recommend_cmd import recommend_answer
    from llmsizer.models import load_model
    from llmsizer.web import bridge

    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-7b", "hardware_file": ["hw.json"]})
    assert r.status_code == 400 and r.json()["field"] == "hardware_file", r.text
    for name, rel in {"nvidia-smi-q.txt": "nvidia-smi-q/h100-80gb-hbm3.txt",
                      "nvidia-smi-query-gpu.csv": "nvidia-smi-query-gpu/h100-80gb-hbm3-allfields.csv"}.items():
        shutil.copy(REAL / rel, tmp_path / name)
    hw = tmp_path / "hw.json"
    code, _, err = run("hardware", "detect", "--from", str(tmp_path), "-o", str(hw))
    assert code == 0, err
    args = bridge.parse(("recommend",), {"context": "8k"}, positionals=["qwen2.5-7b"])
    args.hardware_file = [str(hw)]
    data, code, *_ = recommend_answer(load_model("qwen2.5-7b"), args)
    labels = [o["ownership"] for o in data["options"]]
    assert code == 0 and labels[0] == "your hardware" and data["options"][0]["target"] == "detected-h100-sxm"
    assert labels.count("your hardware") == 1
    js = (Path(__file__).resolve().parents[3] / "src/llmsizer/web/static/js/compare.js").read_text()
    assert "o.ownership ? ` (${o.ownership})`" in js  # the page shows the key as the CLI's table does

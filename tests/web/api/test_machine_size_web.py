"""The web refuses a machine size past one machine (numbers.py ``MACHINE_GPUS``: a GB200 / GB300 NVL72 rack's 72
GPUs, the catalog's largest single NVLink domain) and recommend's machine size beside cloud_only, with the CLI's
line and the field named (tests/cli/test_machine_size_bound.py has the CLI side); recommend's options carry
``ownership`` as the CLI's JSON does (``recommend.Option.ownership``, what the compare page shows)."""

from __future__ import annotations

import json

from cli_capture import run


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

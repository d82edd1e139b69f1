"""A request that names no hardware, checked against a provider's inventory: the job is sized on the inventory's own
device types (placement.py on_inventory), not on the plan's catalog suggestion the provider does not have; the
answer states that assumption, and it is the answer the same request gets when it names that device and count."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlalchemy")
from .test_cli_capacity import INV, run  # noqa: E402

NOW = ("--now", "2027-01-01")


def _request(resources: str, kind: str = "training") -> str:
    if kind == "training":
        return ("version: 1\nteam: ML team\njobs:\n  - name: ft\n    kind: training\n    model: {name: llama-3.1-8b}\n"
                f"    method: lora\n    dataset: {{tokens: 50M}}\n    resources: {resources}\n    start: 2027-02-01\n")
    return ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen2.5-0.5b}\n"
            "    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}\n    service: {duration: 7 days}\n"
            f"    resources: {resources}\n    start: 2027-02-01\n")


def _check(tmp_path, capsys, text: str) -> tuple[int, dict]:
    req = tmp_path / "req.yaml"
    req.write_text(text)
    code = run("capacity", "check", str(req), "--inventory", INV, "--no-db", "--json", *NOW)
    (answer,) = json.loads(capsys.readouterr().out)["jobs"]
    return code, answer


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_no_hardware_is_sized_on_the_inventory_and_matches_naming_it(tmp_path, capsys, kind):
    code, free = _check(tmp_path, capsys, _request("{storage: 1 TB}", kind))
    assert code == 0 and free["fits"], free
    need = free["need"]
    assert need["device"] in {"h100-sxm", "a100-pcie-80gb", "intel-xeon-spr-8ch"}  # the inventory's own types
    assert free["assumption"].startswith("assumed: the request names no hardware")
    assert f"{need['devices']} x {need['device']}" in free["assumption"]
    # the same job naming that device and count: the same placement, the same time
    code2, named = _check(tmp_path, capsys, _request(
        f"{{device: {need['device']}, count: {need['devices']}, storage: 1 TB}}", kind))
    assert code2 == 0 and named["assumption"] == ""
    assert named["placement"]["nodes"] == free["placement"]["nodes"]
    assert (named["placement"]["start"], named["placement"]["end"]) == (free["placement"]["start"],
                                                                        free["placement"]["end"])
    assert named["need"]["seconds"] == pytest.approx(need["seconds"], rel=1e-9)
    assert named["need"]["memory_need"] == need["memory_need"]
    assert named["need"]["memory_per_device"] == need["memory_per_device"]


def test_text_answer_states_the_assumption(tmp_path, capsys):
    req = tmp_path / "req.yaml"
    req.write_text(_request("{storage: 1 TB}"))
    assert run("capacity", "check", str(req), "--inventory", INV, "--no-db", *NOW) == 0
    out = capsys.readouterr().out
    assert "assumed: the request names no hardware" in out and "FITS     at fra1" in out
    assert "DOES NOT FIT" not in out and "no node holds" not in out

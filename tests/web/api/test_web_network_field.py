"""The training API takes ``network`` and ``grad_sync`` as the CLI does (web/API.md): the duration of a run across
machines is timed over the network the request names, at the ring's bus bandwidth min(NVLink, the machine's network)
(formulas/network.py eq. (11)), and a bad value is the CLI's one line as a 400."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

BODY = {"model": "qwen2.5-0.5b", "method": "full", "device": "h100-sxm", "gpus": 16, "gpus_per_node": 8,
        "tokens": "1B"}


def _duration(client, **extra) -> dict:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/train", json={**BODY, **extra})
    assert r.status_code == 200, r.text
    return r.json()["duration"]


@pytest.mark.parametrize("network,per_machine", [("100 Gb/s", 12.5e9), ("3200 Gb/s", 400e9), ("ib-ndr", 8 * 50e9)])
def test_network_sets_the_bus_bandwidth(client, network: str, per_machine: float) -> None:  # type: ignore[no-untyped-def]
    d = _duration(client, network=network)
    assert d["step"]["bus_bandwidth"] == pytest.approx(min(18 * 20.6e9, per_machine))  # NVLink as NCCL credits it (eq. 12)
    assert {a["name"]: a["value"] for a in d["assumptions"]}["inter_node_network"] == pytest.approx(per_machine)


def test_slower_network_longer_run_and_grad_sync_counts_every_micro_step(client) -> None:  # type: ignore[no-untyped-def]
    slow, fast = _duration(client, network="100 Gb/s"), _duration(client, network="3200 Gb/s")
    assert slow["seconds"] > fast["seconds"]
    once = _duration(client, network="100 Gb/s", grad_accumulation=4)
    every = _duration(client, network="100 Gb/s", grad_accumulation=4, grad_sync="micro-step")
    assert every["step"]["comm_bytes_per_step"] == pytest.approx(4 * once["step"]["comm_bytes_per_step"])


def test_bad_network_is_a_400_with_the_cli_line(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/train", json={**BODY, "network": "nvlink4"})
    assert r.status_code == 400 and "is a nvlink link inside a machine" in r.text


def test_bad_network_is_a_400_without_tokens_too(client) -> None:  # type: ignore[no-untyped-def]
    # probe31: read where the flags are, not only where the duration uses it (cli/workload_args.py training_fields)
    body = {k: v for k, v in BODY.items() if k not in ("tokens", "device")}
    r = client.post("/api/v1/train", json={**body, "network": "garbage"})
    assert r.status_code == 400 and "network 'garbage': not a catalog interconnect" in r.text

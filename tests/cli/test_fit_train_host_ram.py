"""review9 #1: the training ladder's offload steps put optimizer states, master weights, gradients (and, for
``offload params``, the bf16 parameters) in host RAM. On a catalog instance (its RAM known) the verdict and every
ladder step check that host part per machine against the instance's RAM; on a bare device the host need is stated,
unchecked. Independent truth: the instance's RAM as the catalog lists it, and ZeRO-Offload's host state per
parameter (Ren et al. 2021 section 4: fp32 master weights 4 B + Adam's two fp32 moments 8 B = 12 B, before the
gradients and parameters) times the model's published parameter count (Llama-3.1 model card: 70.6B, 8.03B)."""

from __future__ import annotations

import re

from cli_capture import run, run_json
from llmsizer.catalog.hardware import load_catalog
from llmsizer.units import GiB

INSTANCE = "azure-standard_nc24ads_a100_v4"  # 1 x A100 80GB, 220 GiB of RAM in the catalog
OFFLOADED_PER_PARAM = 12  # fp32 master + Adam m, v: the least ZeRO-Offload keeps in host RAM per parameter


def _ram() -> int:
    return int(load_catalog().find(INSTANCE).memory.base)


def test_offload_beyond_the_instance_ram_does_not_fit() -> None:
    assert OFFLOADED_PER_PARAM * 70.6e9 > _ram()  # the question's premise, from the catalog and the paper
    code, d = run_json("fit", "llama-3.1-70b", "--device", INSTANCE, "--train", "--grad-checkpointing", "full",
                       "--offload", "params")
    assert code == 1 and d["fits"] is False  # before: FITS, exit 0 with 1.03 TiB of host RAM unchecked
    assert any(r.startswith("host memory: needs") for r in d["reasons"]), d["reasons"]


def test_the_ladder_skips_a_step_the_instance_ram_cannot_hold() -> None:
    code, d = run_json("fit", "llama-3.1-70b", "--device", INSTANCE, "--train")
    assert code == 1
    at = d["fits_at"]
    assert at is not None and at["changes"].get("offload") in (None, "none"), at  # before: --offload params
    if at.get("host_per_machine"):
        assert at["host_per_machine"] <= at["host_ram"] == _ram()
    flags = [x for k, v in at["changes"].items() for x in (f"--{k.replace('_', '-')}", str(v))]
    assert run_json("fit", "llama-3.1-70b", "--device", INSTANCE, "--train", *flags)[0] == 0  # as named, it fits


def test_a_bare_device_states_the_host_need_unchecked() -> None:
    code, out, _ = run("fit", "llama-3.1-8b", "--device", "rtx-4090", "--train")
    assert code == 1
    m = re.search(r"--offload optimizer \(.* \+ ([\d.]+) GiB host RAM per machine, not checked: give an instance", out)
    assert m, out
    assert float(m.group(1)) * GiB >= OFFLOADED_PER_PARAM * 8.03e9
    code, d = run_json("fit", "llama-3.1-8b", "--device", "rtx-4090", "--train", "--grad-checkpointing", "full",
                       "--offload", "optimizer")
    assert code == 0
    assert any(r.startswith("host RAM:") and "not checked: give an instance" in r for r in d["reasons"])
    assert any(a["name"] == "host_memory" and a["value"] == "not checked" for a in d["assumptions"])

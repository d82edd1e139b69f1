""""What fits my machine" through ``recommend --hardware-file``: the file `hardware detect` writes (its devices
marked ``owned``) is the user's machine, so recommend answers on it first ("your hardware", the best option of the
file's devices chosen) and lists the catalog's alternatives after it; the catalog's local cards (GeForce, Apple) are
then hardware "to buy", not priced by their power alone (recommend.py ``rank_key``, ``_device_candidate``).

Before (probe17 F4): the detected H100 ranked 65th of 168 and a cloud CPU at Q2_K (TTFT 6.2 min) was chosen; with
--kwh-price 0.3 the catalog rtx-5050, which the user does not own, was chosen at $0.039/h of power.

The machine is built by `hardware detect --from` from the REAL recorded outputs in tests/fixtures/real_outputs/
(an H100 80GB HBM3 and a 2 x Xeon Platinum 8488C host, sources in its README). The truth each answer is checked
against is ``fit``'s own answer for the file's device (the command that sizes one device), and the H100's power:
700 W, NVIDIA's H100 SXM TDP (catalog h100-sxm tdp, klockwood-h100), x $0.3/kWh = $0.21/h (formulas/cost.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs"
GPU = "detected-h100-sxm"
CPU = "detected-intel-xeon-platinum-8488c"
ASK = ("qwen2.5-7b", "--context", "8k")


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("saved")
    for name, rel in {"nvidia-smi-q.txt": "nvidia-smi-q/h100-80gb-hbm3.txt",
                      "nvidia-smi-query-gpu.csv": "nvidia-smi-query-gpu/h100-80gb-hbm3-allfields.csv",
                      "lscpu.txt": "lscpu/intel-xeon-platinum-8488c-2s-c7i-metal-truncated.txt",
                      "proc-meminfo.txt": "proc-meminfo/566gib-server-hugepages-htop-truncated.txt"}.items():
        shutil.copy(REAL / rel, d / name)
    out = d / "hw.json"
    code, _, err = run("hardware", "detect", "--from", str(d), "-o", str(out))
    assert code == 0, err
    ids = {x["id"]: x["owned"] for x in json.loads(out.read_text())["devices"]}
    assert ids == {GPU: True, CPU: True}  # what detect wrote: the machine's two devices, the user's own
    return out


def _json(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code in (0, 1), err
    return json.loads(out)


def test_the_machine_is_answered_first_as_fit_answers_it(machine: Path) -> None:
    rec = _json("recommend", *ASK, "--hardware-file", str(machine))
    chosen = rec["chosen"]
    assert chosen["target"] == GPU and chosen["ownership"] == "your hardware" and chosen["status"] == "chosen"
    # every option of the file's devices comes before every catalog option
    yours = [o["ownership"] == "your hardware" for o in rec["options"]]
    assert yours == sorted(yours, reverse=True) and sum(yours) == 2
    # the option is fit's answer for the device, at the format and engine recommend chose
    fit = _json("fit", *ASK, "--device", GPU, "--hardware-file", str(machine), "--engine", chosen["engine"],
                "--weights", chosen["weights_format"])
    assert fit["fits"] is True and fit["weights_format"] == chosen["weights_format"]
    assert fit["memory_per_device"] == chosen["memory_per_device"]
    assert fit["speed"]["tokens_per_second_per_user"] == chosen["tokens_per_second_per_user"]
    assert fit["speed"]["ttft_seconds"] == chosen["ttft_seconds"]
    # unpriced (no --kwh-price): said, with the flag that prices it
    assert any("your hardware" in w and "--kwh-price" in w for w in rec["warnings"])


def test_text_labels_the_machine_as_the_json_does(machine: Path) -> None:
    code, out, err = run("recommend", *ASK, "--hardware-file", str(machine))
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith(("chosen ", "meets "))]
    assert rows[0][:4] == ["chosen", GPU, "(your", "hardware)"]
    assert out.count("chosen: " + GPU + " (your hardware) - your hardware") == 1


def test_with_a_kwh_price_the_machine_is_priced_by_its_power_and_catalog_cards_are_to_buy(machine: Path) -> None:
    rec = _json("recommend", *ASK, "--hardware-file", str(machine), "--kwh-price", "0.3")
    chosen = rec["chosen"]
    assert chosen["target"] == GPU and chosen["cost_basis"] == "power"
    assert chosen["price_per_hour"] == pytest.approx(700 * 0.3 / 1000)  # 700 W H100 SXM TDP at $0.3/kWh
    fit = _json("fit", *ASK, "--device", GPU, "--hardware-file", str(machine), "--kwh-price", "0.3")
    assert fit["cost"]["price_per_hour"] == chosen["price_per_hour"]
    cards = {o["target"]: o for o in rec["options"] + rec["rejected"] if o["provider"] == "local"}
    assert "rtx-5050" in cards and "rtx-4090" in cards  # the catalog's GeForce cards: not the user's
    for o in cards.values():
        assert o["ownership"] == "to buy" and o["price_per_hour"] is None and o["cost_basis"] == "purchase", o
    order = [o["target"] for o in rec["options"]]
    last_priced = max(i for i, o in enumerate(rec["options"]) if o["price_per_hour"] is not None)
    assert all(order.index(t) > last_priced for t in cards if t in order)
    # the CPU of the machine has no TDP in the file: still unpriced, and said so
    assert any(CPU in w and "tdp" in w for w in rec["warnings"])


def test_without_a_machine_the_catalog_cards_keep_their_power_price() -> None:
    """No hardware file: nothing is the user's, a local card is priced by its power as before (rtx-4090: 450 W,
    NVIDIA's TDP in the catalog, at $0.3/kWh = $0.135/h)."""
    rec = _json("recommend", *ASK, "--kwh-price", "0.3")
    card = next(o for o in rec["options"] if o["target"] == "rtx-4090" and o["count"] == 1)
    assert card["ownership"] is None and card["cost_basis"] == "power"
    assert card["price_per_hour"] == pytest.approx(450 * 0.3 / 1000)
    assert not any(o["ownership"] for o in rec["options"] + rec["rejected"])


def test_a_training_search_answers_on_the_machine_first_too(machine: Path) -> None:
    """The same order for `recommend --train` (its own sort by run cost, the owned devices first as rank_key): the
    H100 is chosen and priced by its power, at fit --train's run cost for it."""
    ask = ("qwen2.5-0.5b", "--tokens", "100M")
    rec = _json("recommend", ask[0], "--train", *ask[1:], "--hardware-file", str(machine), "--kwh-price", "0.3")
    chosen = rec["chosen"]
    assert chosen["target"] == GPU and chosen["ownership"] == "your hardware"
    yours = [o["ownership"] == "your hardware" for o in rec["options"]]
    assert yours == sorted(yours, reverse=True)
    fit = _json("fit", ask[0], "--train", "--device", GPU, "--hardware-file", str(machine), "--kwh-price", "0.3",
                "--tokens", "100M")
    assert fit["training_time"]["cost"] == pytest.approx(chosen["run_cost"])


@pytest.mark.parametrize("train", [False, True])
def test_a_budget_without_kwh_price_does_not_reject_the_machine(machine: Path, train: bool) -> None:
    """review21 D1: a $ budget and no --kwh-price rejected the user's own (unpriced) devices -- "no hourly price to
    compare with the budget" -- and a cloud CPU at Q2_K (TTFT 4.2 min) was chosen over the H100, while the warning
    said the H100 ranked first. The H100 is the user's: a dollar budget cannot be measured against it, so it is
    chosen as without the budget (fit's answer, as above), the reason says why and names --kwh-price, and the
    warning is the same in both searches. With --kwh-price 0.3 the H100 costs $0.21/h (700 W x $0.3/kWh), so a
    $0.10/h budget must then reject it: the budget still applies to what can be priced."""
    ask = (("qwen2.5-0.5b", "--train", "--tokens", "100M", "--max-cost", "50") if train
           else (*ASK, "--max-cost-per-hour", "1"))
    rec = _json("recommend", *ask, "--hardware-file", str(machine))
    chosen = rec["chosen"]
    assert chosen["target"] == GPU and chosen["ownership"] == "your hardware" and chosen["price_per_hour"] is None
    assert any("budget cannot be measured" in r and "--kwh-price" in r for r in chosen["reasons"])
    assert not any(o["ownership"] == "your hardware" for o in rec["rejected"])
    said = [w for w in rec["warnings"] if "your hardware" in w]
    assert len(said) == 1 and GPU in said[0] and "--kwh-price" in said[0] and "no cost budget rejects it" in said[0]
    if not train:
        hourly = ("--max-cost-per-hour", "0.1")
        rec = _json("recommend", *ASK, *hourly, "--hardware-file", str(machine), "--kwh-price", "0.3")
        gpu = [o for o in rec["rejected"] if o["target"] == GPU]
        assert gpu and "$0.21/h exceeds" in gpu[0]["reasons"][0], gpu


def test_the_cpu_advice_does_not_send_the_user_from_their_own_gpu_to_a_rented_cpu(machine: Path) -> None:
    """probe18 D5: with the user's own H100 chosen (it meets every constraint), the CPU-or-GPU advice said "CPU is
    enough" and pointed at a cloud CPU at $11.13/h with a 3.5 min TTFT, because the unpriced owned GPU compared as
    infinitely expensive. The advice must agree with the chosen line: the user's own GPU, not a CPU to rent."""
    rec = _json("recommend", "llama-3.1-70b", "--context", "8k", "--gpus-per-node", "4",
                "--hardware-file", str(machine))
    assert rec["chosen"]["target"] == GPU and rec["chosen"]["ownership"] == "your hardware"
    cpus = [o for o in rec["options"] if o["status"] == "meets" and o["device_kind"] == "cpu" and o["ownership"] != "your hardware"]
    assert cpus, "a CPU option meets the floor here, which is what made the advice wrong"
    advice = " ".join(rec["advice"])
    assert "CPU is enough" not in advice and advice.startswith("Use a GPU")
    assert "(detected)" in advice


@pytest.mark.parametrize("power", [(), ("--kwh-price", "0.15")])
def test_the_cpu_advice_follows_the_chosen_option_when_both_are_the_users(machine: Path, power: tuple[str, ...]
                                                                           ) -> None:
    """probe19 D2: with the user's own H100 chosen, the advice said "CPU is enough" for the user's own Xeon 8488C at a
    16.2 s TTFT (an unpriced CPU compared as free, an unpriced GPU as infinitely dear; with --kwh-price the H100 is
    priced by its 700 W and the 8488C row has no TDP, so still unpriced). Both are the user's: the advice must agree
    with the chosen line, the one ranking (rank_key)."""
    rec = _json("recommend", "llama-3.1-8b", "--context", "8192", "--concurrency", "4", "--hardware-file",
                str(machine), *power)
    assert rec["chosen"]["target"] == GPU
    own_cpu = [o for o in rec["options"] if o["target"] == CPU and o["status"] == "meets"]
    assert own_cpu, "the user's CPU meets the floor here, which is what made the advice wrong"
    advice = " ".join(rec["advice"])
    assert "CPU is enough" not in advice and advice.startswith("Use a GPU"), advice

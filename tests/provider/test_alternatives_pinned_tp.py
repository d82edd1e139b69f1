"""`capacity check`'s alternatives for a service whose request pins ``tensor_parallel`` are sized at that degree
where fit takes it, else at fit's own choice, said in the alternative's line (plan/inference.py ``at_jobs_degree``).

Before, the quantized alternative on the job's own devices (plan/inference.py ``quantized_fit``) was chosen and sized
at fit's own degree, whatever the request pinned, and the other-device alternative (``device_fit``) passed the pin to
devices it does not divide: fit refused it, the refusal was caught and the alternative vanished without a word.

Truth, apart from the check: ``fit MODEL --device D --count N --tp T`` at the request's peak load (PEAK), which
says where each layout fits; Llama-3.1-70B's bf16 weights (70.55e9 x 2 B) fit neither one nor two L40S (44.99 GiB).
"""

from __future__ import annotations

from pathlib import Path

from cli_capture import run, run_json
from llmsizer.units import format_bytes

from .inventory_text import PEAK, chat_service, failing_check, one_site_inventory

MODEL = "llama-3.1-70b"
L40S_AND_B200 = one_site_inventory("""\
  - {id: l, site: s1, device: l40s, devices: 2, cpus: 32, ram: 256 GiB, pools: [serving]}
  - {id: b, site: s1, device: b200, devices: 8, cpus: 64, ram: 1 TiB, pools: [serving]}""")


def pinned_service(tp: int, count: int) -> str:
    """The chat service on ``count`` x l40s under vLLM, its tensor_parallel pinned at ``tp``."""
    text = chat_service(MODEL, "l40s", engine="vllm", quantization="none").replace("count: 1}", f"count: {count}}}")
    return text.replace("    engine: vllm\n", f"    engine: vllm\n    tensor_parallel: {tp}\n")


def _fit(device: str, count: int, *extra: str) -> dict:
    code, data = run_json("fit", MODEL, "--device", device, "--count", str(count), "--engine", "vllm", *PEAK, *extra)
    assert code == (0 if data["fits"] else 1)
    return data


def test_the_quantized_alternative_keeps_the_pinned_degree(tmp_path: Path) -> None:
    """TP 1 pinned on 2 x L40S (two replicas): at AWQ int4, vLLM's smallest rung, fit says neither 1 nor 2 L40S hold
    it at TP 1, while 2 at fit's own choice (TP 2) would: no quantized alternative (before: awq-int4 on 2 x l40s at
    TP 2, a degree the request did not ask for)."""
    for n in (1, 2):
        assert not _fit("l40s", n, "--tp", "1", "--weights", "awq-int4")["fits"], n
    assert _fit("l40s", 2, "--tp", "2", "--weights", "awq-int4")["fits"]  # the premise: fit's own choice fits
    c = failing_check(tmp_path, L40S_AND_B200, pinned_service(1, 2))
    assert c["binding"] == "memory", c
    assert not [a for a in c["alternatives"] if a.startswith("serve a quantized model")], c["alternatives"]


def test_the_quantized_alternative_at_the_pin_says_it(tmp_path: Path) -> None:
    """TP 2 pinned on 2 x L40S: the quantized alternative is fit's at awq-int4 and TP 2, and its line says the
    degree is the request's."""
    int4 = _fit("l40s", 2, "--tp", "2", "--weights", "awq-int4")
    c = failing_check(tmp_path, L40S_AND_B200, pinned_service(2, 2))
    (line,) = [a for a in c["alternatives"] if a.startswith("serve a quantized model")]
    assert line.startswith("serve a quantized model: awq-int4 on vllm, 2 x l40s at s1"), line
    assert f"memory per device {format_bytes(int4['memory_per_device'])} of" in line, line
    assert line.endswith("; TP 2, the request's tensor_parallel (`--tp 2`))"), line


def test_another_device_the_pin_does_not_divide_is_offered_at_fits_choice(tmp_path: Path) -> None:
    """TP 2 pinned: one B200 (179 GiB) holds the bf16 model (fit's choice there is TP 1), which the pin does not
    divide. The alternative is 1 x b200 with fit's memory line and says the pin was dropped and why (fit's own
    refusal of --tp 2 on one device); before, 1 x b200 vanished and 2 x b200 was offered."""
    one = _fit("b200", 1)
    assert one["fits"] and one["tensor_parallel"] == 1
    code, _, err = run("fit", MODEL, "--device", "b200", "--count", "1", "--tp", "2", *PEAK)
    assert code == 2 and "--tp 2 does not divide the 1 devices" in err  # fit refuses the pin on one device
    c = failing_check(tmp_path, L40S_AND_B200, pinned_service(2, 2))
    (line,) = [a for a in c["alternatives"] if a.startswith("other device type")]
    assert line.startswith("other device type: 1 x b200 on 1 node(s) at s1"), line
    assert f"memory per device {format_bytes(one['memory_per_device'])} of" in line, line
    assert "; TP 1, fit's choice: the request's tensor_parallel 2 does not hold on these devices, fit refuses it: " \
           "tensor_parallel 2 does not divide the 1 devices" in line, line

"""fit's "does not fit; fits at X" hint (FitResult.fits_at) searches the format ladder with fit's own host CPU
(``--host-device``, ``host_device=``). llama.cpp with layers on the CPU (``--n-gpu-layers``) decodes at the host's
memory bandwidth (estimate/speed.py ``split_decode``, eq. 8), and the search holds each rung to reading speed. Before,
fit asked the ladder without its host CPU: every rung that fits had no decode speed, failed the floor, and the hint
was null although ``fit --weights q8_0`` with the same host CPU fits at about 13 tokens/s. The truth the hint is
checked against is fit itself at every rung it passes over and at the one it names, with the same flags."""

from __future__ import annotations

import llmsizer
from cli_capture import run_json
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.formats import format_ladder
from llmsizer.models import load_model

HOST = ["--host-device", "intel-core-i9-13900k"]
ARGV = ["llama-3.1-8b-instruct", "--device", "rtx-5060", "--engine", "llamacpp", "--n-gpu-layers", "24",
        "--context", "8k"]


def test_the_hint_is_searched_with_fits_host_cpu() -> None:
    code, data = run_json("fit", *ARGV, *HOST)
    at = data["fits_at"]
    assert code == 1 and data["weights_format"] == "gguf:bf16"  # 24 bf16 layers are more than an 8 GB card holds
    assert at is not None and at["engine"] == "llamacpp" and at["same_engine"] is True
    floor = round(E.READING_RATE_TOKENS_PER_SECOND, 2)
    passed = []
    for fmt in format_ladder(load_model(ARGV[0]), "llamacpp", None):
        _, r = run_json("fit", *ARGV, *HOST, "--weights", fmt)
        speed = (r["speed"] or {}).get("tokens_per_second_per_user")
        if r["fits"] and speed is not None and speed >= floor:
            break
        passed.append(fmt)
    else:
        raise AssertionError("no rung fits at reading speed")
    assert passed and at["weights"] == fmt
    assert (at["memory_per_device"], at["budget_per_device"]) == (r["memory_per_device"], r["budget_per_device"])
    py = llmsizer.fit(ARGV[0], "rtx-5060", engine="llamacpp", n_gpu_layers=24, context=8192,
                      host_device="intel-core-i9-13900k")
    assert py.fits_at == at


def test_without_a_host_cpu_the_split_has_no_speed_and_no_hint() -> None:
    """No host CPU named: the layers on the CPU have no decode speed (fit warns), so no rung meets reading speed and
    the hint stays null, as fit at that rung says (speed unknown)."""
    _, data = run_json("fit", *ARGV)
    assert data["fits"] is False and data["fits_at"] is None
    _, q8 = run_json("fit", *ARGV, "--weights", "q8_0")
    assert q8["fits"] is True and (q8["speed"] or {}).get("tokens_per_second_per_user") is None

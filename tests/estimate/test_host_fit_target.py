"""Host RAM keeps a margin, and the auto-fit's "fits at" hint states the named format's decode speed (probe9 #7).

llama.cpp's --fit keeps its --fit-target (1024 MiB, common/common.h:483) of system memory free on a host-only run
(common/fit.cpp:317-326 @0c1e57098); the host part beside GPUs is checked with the same margin. The hint's rung is
timed as `fit` times its printed flags and the first rung meeting recommend's reading-speed floor (Brysbaert 2019,
238 words/min x 4/3 tokens/word) is named."""

from __future__ import annotations

from llmsizer.estimate.fit import fit
from llmsizer.estimate.llamacpp_fit import fit_llamacpp

GiB = 1024**3
READING = round(238 / 60 * 4 / 3, 2)  # Brysbaert (2019) silent reading, 4/3 tokens per word


def _host_fit(host_memory: int) -> bool:
    r = fit("llama-3.3-70b-instruct", "rtx-4090", engine="llamacpp", weights="q8_0", context=32768,
            n_gpu_layers=19, host_memory=host_memory, speed=False)
    return r.fits


def test_host_part_keeps_one_gib_free():
    r = fit("llama-3.3-70b-instruct", "rtx-4090", engine="llamacpp", weights="q8_0", context=32768,
            n_gpu_layers=19, speed=False)
    host = r.estimate.total("host")[1]
    assert _host_fit(host + GiB)
    assert not _host_fit(host + GiB - 1)  # the old check (no margin) took anything >= host
    words = fit("llama-3.3-70b-instruct", "rtx-4090", engine="llamacpp", weights="q8_0", context=32768,
                n_gpu_layers=19, host_memory=host + GiB // 2, speed=False)
    assert any(a.name == "host_fit_target" and a.value == "1.00 GiB" for a in words.assumptions)


def test_hint_states_decode_speed_of_fit_with_its_flags():
    r = fit_llamacpp("llama-3.3-70b-instruct", ["24GiB"], context=32768, host_memory=64 * 10**9,
                     device="rtx-4090", host_device="desktop-ddr5-4800-2ch")
    at = r.fits_at
    assert not r.fits and at is not None and at["meets_reading_speed"] is False and at["reading_speed"] == READING
    ngl = int(at["flags"][at["flags"].index("-ngl") + 1])
    timed = fit("llama-3.3-70b-instruct", "rtx-4090", engine="llamacpp", weights=at["weights"], context=32768,
                n_gpu_layers=ngl, host_device="desktop-ddr5-4800-2ch")
    assert at["decode_tokens_per_second"] == timed.speed.decode_tokens_per_second < READING


def test_hint_prefers_a_rung_at_reading_speed():
    """qwen3-30b-a3b with 16 GB of host RAM: bf16 does not fit; the hint skips fitting rungs below reading speed."""
    r = fit_llamacpp("qwen3-30b-a3b", ["24GiB"], context=16384, host_memory=16 * 10**9, device="rtx-4090",
                     host_device="desktop-ddr5-4800-2ch")
    at = r.fits_at
    assert at["meets_reading_speed"] is True and at["decode_tokens_per_second"] >= READING


def test_a_training_runs_host_check_names_the_margin_it_keeps():
    # final review: training_host goes through host_memory_verdict (HOST_FIT_TARGET kept free) but fit --train did not
    # name the margin; now the assumption stands beside the check whenever an instance's RAM is checked
    from cli_capture import run_json

    code, d = run_json("fit", "llama-3.1-70b", "--train", "--device", "aws-p4d.24xlarge", "--offload", "optimizer")
    assert code in (0, 1)
    assert any(a["name"] == "host_fit_target" and a["value"] == "1.00 GiB" for a in d["assumptions"])
    code, d = run_json("fit", "llama-3.1-70b", "--train", "--device", "a100-sxm-80gb", "--count", "8",
                       "--offload", "optimizer")  # a bare device: its host RAM is not known, nothing kept free
    assert not any(a["name"] == "host_fit_target" for a in d["assumptions"])

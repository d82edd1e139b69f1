"""fit's hint tries the engine's settings that keep the weights before a weight format (probe24 D4): gpt-oss-120b,
released in MXFP4, on one H100 under vLLM at 8k x 8 does not fit at vLLM's defaults (its start-up profile runs the
sampler over max_num_seqs 1,024 sequences: vllm/v1/worker/gpu_model_runner.py ``_dummy_sampler_run``), and the hint
said only "--weights awq-int4", a re-quantization. Truth here is the core's own verdict on the run the hint names
(its flags rerun through fit fit, with the weights unchanged), and that it names the largest power of two that does
(the next one up does not), independent of how the hint searched."""

from __future__ import annotations

from llmsizer.estimate.fit import fit
from llmsizer.render.fit_text import fits_at_line

RUN = dict(engine="vllm", context=8192, concurrency=8)


def test_hint_names_engine_settings_before_requantizing() -> None:
    r = fit("gpt-oss-120b", "h100-sxm", **RUN, speed=False)
    assert not r.fits and r.weights_format == "mxfp4"
    at = r.fits_at
    assert at is not None and at["engine_settings"], at
    for k in at["engine_settings"]:  # each named change fits, the weights kept
        again = fit("gpt-oss-120b", "h100-sxm", **RUN, **k["changes"], speed=False)
        assert again.fits and again.weights_format == "mxfp4", k
        # C1: the hint quotes what that run's verdict compared (the workload's need of what vLLM's pool offers)
        assert again.estimate is not None
        d = again.estimate.details
        assert (k["verdict_need_per_device"], k["verdict_budget_per_device"]) == (d["workload_bytes"],
                                                                                  d["workload_budget_bytes"])
        assert k["verdict_need_per_device"] <= k["verdict_budget_per_device"]
    seqs = next(k["changes"]["max_num_seqs"] for k in at["engine_settings"] if "max_num_seqs" in k["changes"])
    assert seqs >= RUN["concurrency"]
    assert not fit("gpt-oss-120b", "h100-sxm", **RUN, max_num_seqs=2 * seqs, speed=False).fits  # the least change
    line = fits_at_line(at) or ""
    assert line.startswith(f"hint: it fits with the weights kept at --max-num-seqs {seqs}")
    assert line.index("--max-num-seqs") < line.index("--weights awq-int4")
    assert "its pool offers per device" in line and "per device of a 79.65 GiB budget" not in line  # the format only after, as the fallback


def test_no_engine_settings_when_weights_alone_exceed_the_device() -> None:
    # llama-3.1-70b in bf16 (141 GB of weights) on one 80 GB card: no engine setting makes room
    r = fit("llama-3.1-70b", "h100-sxm", **RUN, speed=False)
    assert not r.fits
    assert not (r.fits_at or {}).get("engine_settings")

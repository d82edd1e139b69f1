"""validation/serving_load.csv: published closed-loop sweeps (TTFT and requests/s at several concurrencies, lengths
stated) against estimate/serving_load.py (formulas/serving_queue.py eqs. Q4-Q9), the estimate fit gives."""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.serving_queue import loaded_serving
from llmsizer.validation_cases import (
    API_SERVER_CALIBRATION,
    CALIBRATION,
    SERVING_RATE,
    SERVING_TTFT,
    serving_load_cases,
    serving_rate_cases,
    span_coverage,
)

# the prefill-bound sweep: Mistral-7B on an RTX 4090, 256-token prompts (SL13-SL22)
PREFILL_BOUND = [f"SL{i}" for i in range(13, 23)]
# one burst of 500 requests on one H100 (SL23 requests/s, SL24 TTFT): the server's serial share (eq. Q11)
BURST_500 = ("SL23", "SL24")
# the sweeps the server time H was calibrated and first checked on: Qwen2.5-0.5B on an L4 (SL01-SL12), Mistral-7B on
# an RTX 4090 (SL13-SL22); the gpustack H100 rows (SL29-SL34, SL41-SL42) came later, held out
FIRST_SWEEPS = {f"SL{i:02d}" for i in range(1, 23)}
# gpustack's Qwen3-8B page on one H100 (SL29-SL32 vLLM 0.11.0 at 4 and 8 requests, SL33-SL34 SGLang 0.5.3.post3 at 4)
# and its Qwen3-14B burst of 1000 short prompts (SL41-SL42)
GPUSTACK = ("SL29", "SL30", "SL31", "SL32", "SL33", "SL34", "SL41", "SL42")
# the same lab's bursts of 1000 short prompts (128 in / 4 out) on other pages (rows28, held out): vLLM 0.11.0
# Qwen3-32B on an H100 SXM (SL43-SL44) and an A100 SXM 80GB (SL45-SL46), gpt-oss-20b MXFP4 on both (SL47-SL50),
# SGLang 0.5.5.post1 Qwen3-14B-FP8 on an H100 SXM (SL51-SL52)
GPUSTACK_SHORT_BURSTS = tuple(f"SL{i}" for i in range(43, 53))
# and the same pages' bursts of 1000 ShareGPT prompts, each engine's default ('1. Choosing the Inference Engine'):
# vLLM 0.11.0 and SGLang 0.5.5.post1 / 0.5.4.post2 with Qwen3-14B (H100), Qwen3-32B (H100, A100 80GB), gpt-oss-20b
# (H100, A100 80GB): SL53-SL72, held out
GPUSTACK_SHAREGPT_BURSTS = tuple(f"SL{i}" for i in range(53, 73))


def _cases() -> dict[str, object]:
    return {c.id: c for c in serving_load_cases()}


def _speed(c: object) -> object:
    """The row's speed estimate before the load (the engine's, as serving_load_cases builds it)."""
    l4 = "l4" in c.what
    dev = builtin_catalog().devices["l4" if l4 else "rtx-4090"]
    conc = int(c.what.split(" c")[1].split(" ")[0])
    return estimate_speed(find("qwen2.5-0.5b" if l4 else "mistral-7b-v0.3").spec(), dev, 1, weights_format="bf16",
                          prompt_tokens=256, output_tokens=128 if l4 else 100, concurrency=conc, kv_dtype="bf16",
                          engine="vllm", engine_version="0.23.0")


def test_every_row_is_estimated() -> None:
    cases = _cases()
    assert len(cases) == 62 and all(c.predicted for c in cases.values())
    assert {c.kind for c in cases.values()} == {SERVING_TTFT, SERVING_RATE}


def test_the_measured_ttft_lies_within_the_stated_bounds() -> None:
    """The measured TTFT against the bounds the estimate states: independent arrivals (eqs. Q6', Q9a, the expected
    figure) to arriving together (eqs. Q8, Q9b, an upper bound). Every row lies below the upper bound; the summarised
    L4 rows lie between them; on the prefill-bound sweep one prompt's idle TTFT is far below the measured one from 16
    requests on (the queue the speed table used to leave out). The Mistral rows at 4 and 8 requests (assumed settings,
    another host than SL01's) lie below the independent-arrival figure: its H of SL01's host and the decode step each
    prompt's step carries (eq. Q9a's k t_d, 20 ms on the RTX 4090) exceed what that run spent. SL33 (SGLang at 4
    requests) lies below it too: SGLang's server time is vLLM's SL01 value by default (engines.API_SERVER_SECONDS),
    and the run's 27.7 ms TTFT leaves at most 21.5 ms for it beside the 6.2 ms idle prefill. The expected figure is
    either end (the bounds are sorted): near saturation independent arrivals wait the longer (SL41, 1000 short
    prompts at once). Of the later held-out gpustack bursts (rows28; vLLM 0.11.0 rows sized with that release's
    FlashInfer sampler in the profile run, estimate/engines.py, so the pools hold more than at the current release)
    eight lie above the upper bound: Qwen3-32B's 1000 short prompts on one H100 SXM and one A100 SXM 80GB (SL43, SL45:
    eq. Q14b's waves below the measured 21.6 s and 31.2 s), of the ShareGPT bursts vLLM's Qwen3-14B (SL53) and
    Qwen3-32B (SL57, SL61), SGLang's Qwen3-32B on both GPUs (SL59, SL63) and SGLang's gpt-oss-20b on the A100 (SL71,
    141 s measured against 14 s: that run's 1.36 requests/s is a twentieth of vLLM's on the same GPU); six lie below
    both: gpt-oss-20b's short bursts on both GPUs and SGLang's Qwen3-14B-FP8 (SL47, SL49, SL51: the estimate's server
    time H per request, 22.5 ms in series, puts 1000 requests at 11 s or more; measured 2.8-4.5 s, so those servers
    spent at most 3-4.5 ms per request: srvhost's report, vLLM 0.11's chat template parsed per request, gpt-oss's
    Rust renderer skipping it) and gpt-oss-20b's ShareGPT bursts on the H100 (SL65, SL67)."""
    rows = 0
    below, above = [], []
    for c in _cases().values():
        if c.kind != SERVING_TTFT or c.id == API_SERVER_CALIBRATION or c.id in BURST_500:
            continue
        low, high = c.span
        assert c.predicted in (low, high), (c.id, low, c.measured, high)
        if c.measured > high:
            above.append(c.id)
        if c.measured < low:
            below.append(c.id)
        burst = float(c.note.split("arriving together (eqs. Q8, Q9b) ")[1].split(";")[0])
        assert burst == pytest.approx(high if c.predicted == low else low, rel=1e-3)
        rows += 1
        if c.id in PREFILL_BOUND and int(c.what.split(" c")[1].split(" ")[0]) >= 16:
            idle = float(c.note.split("TTFT alone ")[1].split(" s")[0])
            assert c.measured > 4 * idle, c.id
    assert rows == 29
    assert below == ["SL13", "SL15", "SL33", "SL47", "SL49", "SL51", "SL65", "SL67"]
    assert above == ["SL43", "SL45", "SL53", "SL57", "SL59", "SL61", "SL63", "SL71"]


def test_the_server_time_follows_from_its_row() -> None:
    """efficiency.VLLM_API_SERVER_SECONDS = SL01's measured TTFT (one request at a time) - the predicted prefill of
    its prompt on the idle engine: a change to the prefill model moves it, and this test fails until it is re-fitted."""
    c = _cases()[API_SERVER_CALIBRATION]
    assert c.excluded == CALIBRATION and c.span is None  # its own row: no range to cover
    idle = _speed(c).ttft_idle_seconds
    assert c.measured - idle == pytest.approx(E.VLLM_API_SERVER_SECONDS.expected, abs=1e-5)
    # one request alone: the idle prefill plus the server's time, no step to wait for, no other prompt
    assert c.predicted == pytest.approx(idle + E.VLLM_API_SERVER_SECONDS.expected)


def test_the_server_time_moves_the_held_out_rows_in() -> None:
    """The mechanism, not a fit to the summary: without the server time and the step wait (eq. Q9) every loaded
    TTFT row is predicted below its measured value by 22-96 %; with them, fitted on SL01 alone, every held-out row
    (L4 at 2-32 requests, Mistral-7B at 4-48) comes closer, and the L4 rows' requests/s too."""
    host = E.VLLM_API_SERVER_SECONDS.expected
    for c in _cases().values():
        if c.id in (API_SERVER_CALIBRATION, "SL02") or c.id not in FIRST_SWEEPS:
            continue
        s = _speed(c)
        bare = loaded_serving(s.concurrency, s.prefill.seconds, s.decode.seconds, s.output_tokens, None)
        if c.kind == SERVING_TTFT:
            bare_ttft = bare["ttft_seconds"]
            assert bare_ttft < 0.8 * c.measured, c.id
            assert abs(math.log(c.predicted / c.measured)) < abs(math.log(bare_ttft / c.measured)), c.id
            # one step carries each 256-token prompt (max_num_batched_tokens 2048): k = 1 (eq. Q9a)
            assert c.predicted == pytest.approx(loaded_serving(s.concurrency, s.prefill.seconds, s.decode.seconds,
                                                               s.output_tokens, None, host, 1)["ttft_seconds"])
        elif c.id not in PREFILL_BOUND:  # the L4 sweep's requests/s, all predicted too fast
            assert c.measured < c.predicted < bare["requests_per_second"], c.id


def test_requests_per_second_of_the_prefill_bound_sweep() -> None:
    """Completed requests/s within 15 % at every concurrency (4 to 48) of the sweep."""
    for c in _cases().values():
        if c.id in PREFILL_BOUND and c.kind == SERVING_RATE:
            assert abs(c.predicted / c.measured - 1) <= 0.15, (c.id, c.predicted, c.measured)


def test_the_rows_choose_the_additive_step() -> None:
    """estimate/serving_load.py times a step carrying a prefill chunk additively (eq. Q5b), not at the roofline of one
    forward (eq. Q5a): re-derived here from the rows, the additive cost's requests/s errors are the smaller at every
    concurrency from 16 on, where the prefill takes a fifth of the device or more."""
    dev = builtin_catalog().devices["rtx-4090"]
    spec = find("mistral-7b-v0.3").spec()
    for c in _cases().values():
        if c.id not in PREFILL_BOUND or c.kind != SERVING_RATE:
            continue
        conc = int(c.what.split(" c")[1].split(" ")[0])
        if conc < 16:
            continue
        s = estimate_speed(spec, dev, 1, weights_format="bf16", prompt_tokens=256, output_tokens=100,
                           concurrency=conc, kv_dtype="bf16", engine="vllm", engine_version="0.23.0")
        d, t = s.prefill.seconds, s.decode.seconds
        host = E.VLLM_API_SERVER_SECONDS.expected
        additive = loaded_serving(conc, d, t, 100, None, host)["requests_per_second"]
        roofline = loaded_serving(conc, d, t, 100, d * min(2048, 256) / 256, host)["requests_per_second"]
        assert abs(math.log(additive / c.measured)) < abs(math.log(roofline / c.measured)), c.id


@pytest.mark.parametrize("row", ["SL01", "SL02"])
def test_one_request_waits_for_nothing_but_the_server(row: str) -> None:
    """At one request nothing competes: the request's cycle is the server's own time, the idle prompt's prefill and
    its decode steps at the idle step (eq. Q4 at C = 1: no other prompt stretches them, no running step to wait
    for), so SL02's requests/s is 1 / that cycle."""
    c = _cases()[row]
    s = _speed(c)
    cycle = E.VLLM_API_SERVER_SECONDS.expected + s.prefill.seconds + s.output_tokens * s.decode.seconds
    if c.kind == SERVING_RATE:
        assert c.predicted == pytest.approx(1 / cycle, rel=1e-6)
    else:
        assert c.predicted == pytest.approx(cycle - s.output_tokens * s.decode.seconds, rel=1e-6)


def test_validate_reports_the_ranges_coverage() -> None:
    """validate's coverage of the stated bounds (validation_cases.span_coverage): the TTFT kind only; of the 15
    summarised rows every L4 row, the gpustack vLLM rows at 4 and 8 requests (SL29, SL31) and the burst of 1000 short
    prompts (SL41) inside, the H100 burst of 500 (SL24) and SGLang at 4 requests (SL33) below both, and of the 15
    later gpustack bursts (SL43-SL71) two inside (SL55, SL69), six above, seven below; 13 of 30 with the
    assumed-settings rows; the calibration row (one request: no bounds) counted in neither; the width is each row's
    high / low, recomputed here from the rows."""
    cases = serving_load_cases()
    ((kind, inside, summarised, inside_all, rows, median, widest),) = span_coverage(cases)
    assert (kind, inside, summarised, inside_all, rows) == (SERVING_TTFT, 10, 25, 13, 30)
    widths = sorted(c.span[1] / c.span[0] for c in cases if c.span)
    assert widest == max(widths) and median == pytest.approx((widths[14] + widths[15]) / 2)


def test_the_burst_rows_are_the_runs_numbers() -> None:
    """SL23 is seed 42's request_throughput and SL24 the mean of the three seeds' mean_ttft_ms, as quoted from the
    JSON files (H100_results.md's '94.91 | 2905' is the same three-seed mean)."""
    cases = _cases()
    assert cases["SL23"].measured == pytest.approx(92.5945, abs=0.005)
    assert cases["SL24"].measured == pytest.approx((2996.34 + 2841.26 + 2878.07) / 3 * 1e-3, abs=5e-4)
    assert all(cases[r].excluded == "" for r in BURST_500)  # held out: no constant is fitted on them


def _serial_share_cases(share: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The rows estimated with the server's serial share (formulas/serving_queue.py eq. Q11) set to ``share``."""
    monkeypatch.setattr(ENG, "API_SERVER_SERIAL_SHARE", {e: share for e in ENG.API_SERVER_SECONDS})
    return {c.id: c for c in serving_load_cases() + serving_rate_cases()}


def _median_error(cases: dict[str, object], kind: str, skip: tuple[str, ...]) -> float:
    errors = sorted(abs(c.predicted / c.measured - 1) for c in cases.values()
                    if c.kind == kind and not c.excluded and c.id not in skip)
    return errors[len(errors) // 2] if len(errors) % 2 else (errors[len(errors) // 2 - 1] + errors[len(errors) // 2]) / 2


def test_the_serial_share_the_burst_gives_makes_the_held_out_rows_worse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why efficiency.VLLM_API_SERVER_SERIAL_SHARE stays 1 (all of H serial). Re-derived from SL23 alone (bisection
    on s until the closed model at 500 requests gives the measured 92.59 requests/s): s = 0.480. At that s SL23 and
    SL24 come in (-52 % -> 0 %, +223 % -> +20 %), but the held-out median |error| of both kinds gets worse (TTFT
    27.0 -> 31.1 %: the L4 sweep at 16 and 32 requests and SR01 lose the server's queue that explained them;
    requests/s without SL23 19.8 -> 22.1 %). When a change to the model turns this round, this test fails: re-decide."""
    assert E.VLLM_API_SERVER_SERIAL_SHARE.expected == 1.0
    lo, hi = 0.2, 1.0
    for _ in range(24):  # requests/s falls as s rises: the server's serial demand s H binds at 500 requests
        mid = (lo + hi) / 2
        if _serial_share_cases(mid, monkeypatch)["SL23"].predicted > _cases()["SL23"].measured:
            lo = mid
        else:
            hi = mid
    assert lo == pytest.approx(0.480, abs=0.002)
    fitted, stated = _serial_share_cases(lo, monkeypatch), _serial_share_cases(1.0, monkeypatch)
    for row in BURST_500:
        assert abs(math.log(fitted[row].predicted / fitted[row].measured)) < \
            abs(math.log(stated[row].predicted / stated[row].measured)), row
    for kind in (SERVING_TTFT, SERVING_RATE):
        assert _median_error(fitted, kind, ("SL23",)) > _median_error(stated, kind, ("SL23",)), kind
    for row in ("SL11", "SR01"):
        assert abs(fitted[row].predicted / fitted[row].measured - 1) > 0.2 > \
            abs(stated[row].predicted / stated[row].measured - 1), row


def test_sglang_rows_get_the_load_model() -> None:
    """SGLang rows are loaded like vLLM's (formulas/serving_queue.py eqs. Q4-Q9): the chunk is the one fit's memory
    estimate applies, SGLang's chunked_prefill_size default for an 80 GB GPU (8192, the memory tier of
    sglang/srt/arg_groups/memory_hook.py, engines.SGLANG_TIERS), its prefill batches run apart from the decode (no
    decode carried by the prompt's own steps), with the server's time per request; so SL33's TTFT is the closed load
    at 4 requests, above the idle prefill plus H (before: the idle 6.2 ms alone, -77.6 %)."""
    c = _cases()["SL33"]
    s = estimate_speed(find("qwen3-8b").spec(), builtin_catalog().devices["h100-sxm"], 1, weights_format="bf16",
                       prompt_tokens=233, output_tokens=221, concurrency=4, kv_dtype="bf16", engine="sglang",
                       engine_version="0.5.3.post3")
    assert ENG.SGLANG_TIERS[3][1] == 8192  # the H100 / A100 80GB tier
    host = ENG.API_SERVER_SECONDS["sglang"]
    want = loaded_serving(4, s.prefill.seconds, s.decode.seconds, 221, None, host, 0)["ttft_seconds"]
    assert c.predicted == pytest.approx(want, rel=1e-9)
    assert c.predicted > s.ttft_idle_seconds + host
    assert abs(c.predicted / c.measured - 1) < 0.2


# gpustack's Qwen3-14B bursts on one H100 SXM, vLLM 0.11.0 (docs/performance-lab/qwen3-14b/h100.md @7ae332a:
# 'Mean TTFT (ms)', 'Request throughput (req/s)'), random prompts of (prompt, output) tokens, N sent at once: more than
# the KV pool holds. Kept out of validation/serving_load.csv (/work/notes: rowhunt's SL35-SL40): the measured TTFT lies
# above eq. Q14b's waves even so.
# (prompt, output, N, measured TTFT s, measured requests/s, sequences the pool admits: 0.9 x CUDA's total of the
# H100, 79.18 GiB (the catalog's memory_cuda; 7, 59, 117 on nvidia-smi's 79.65 GiB before probe23 D2))
LONG_BURSTS = (
    (32000, 100, 100, 191.02443, 0.26, 8),
    (4000, 200, 500, 112.71692, 2.20, 64),
    (2000, 100, 500, 50.71613, 5.06, 127),
)


def _burst_rows(tmp_path: object) -> dict[str, object]:
    """The LONG_BURSTS as serving_load.csv rows in a folder of their own, estimated through serving_load_cases."""
    import csv

    head = ("id,engine,engine_version,device,gpus,catalog_model,dtype,prompt,generated,concurrency,metric,value,unit,"
            "settings,source,quote,notes").split(",")
    (tmp_path / "public_measurements.csv").write_text("")  # type: ignore[operator]  # data_dir's marker
    path = tmp_path / "serving_load.csv"  # type: ignore[operator]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for i, (p, g, n, ttft, rps, _) in enumerate(LONG_BURSTS):
            for metric, value, unit in (("ttft", ttft * 1e3, "ms"), ("requests_per_second", rps, "requests/s")):
                w.writerow([f"LB{i}{metric[0]}", "vllm", "0.11.0", "h100-sxm", 1, "qwen3-14b", "bf16", p, g, n,
                            metric, value, unit, "defaults", "gpustack qwen3-14b/h100.md @7ae332a", "-",
                            "one closed burst"])
    return {c.id: c for c in serving_load_cases(tmp_path)}


def test_a_burst_larger_than_the_pool_runs_through_its_admitted_slots(tmp_path: object) -> None:
    """The mechanism (formulas/serving_queue.py eq. Q14), on published bursts that overflow the KV pool: the engine
    runs the sequences of the full context its pool holds (estimate/inference/common.py eq. R1: 8, 64, 127 at vLLM 0.11.0, for
    Qwen3-14B's 160 KiB per token), the rest wait for admission. Against the closed load at all N in flight, the
    TTFT error falls from -93..-99 % to -48..-70 % and the requests/s error from +95..+115 % to +74..+96 %; the
    measured TTFT still lies above the upper bound (waves in lockstep, eq. Q14b): the measured token rate is about
    half the predicted one (vLLM's prefill at these batches is not calibrated; preemption's recomputed prompts are
    not counted), so these rows stay out of the CSV."""
    from llmsizer.estimate.serving_load import under_load
    from llmsizer.validation_cases import row_speed, serving_admission

    cases = _burst_rows(tmp_path)
    for i, (p, g, n, ttft, rps, admitted) in enumerate(LONG_BURSTS):
        row = {"engine": "vllm", "engine_version": "0.11.0", "device": "h100-sxm", "gpus": "1",
               "catalog_model": "qwen3-14b", "dtype": "bf16", "prompt": str(p), "generated": str(g)}
        assert serving_admission(row, n) == (admitted, 8192)
        closed = under_load(row_speed(row, n), "vllm", 8192)
        assert closed is not None and closed.load is not None
        t, r = cases[f"LB{i}t"], cases[f"LB{i}r"]
        assert abs(math.log(t.predicted / ttft)) < abs(math.log(closed.ttft_seconds / ttft))
        assert abs(math.log(r.predicted / rps)) < abs(math.log(closed.load["requests_per_second"] / rps))
        assert t.predicted < t.span[1] < ttft  # the known miss: above eq. Q14b


def test_fit_reports_the_burst_figure_validation_judges(tmp_path: object) -> None:
    """One path (review17 D2): fit's answer for the bursts above (``details['burst']``, estimate/fit.py
    ``burst_figure``) is the figure their validation rows are judged by, and it equals the composition from the
    engine-row speed alone (validation's ``row_speed`` at the admitted c, through ``burst_over_pool``) and eq. Q14a
    written out from its definition: the closed load's TTFT at c plus the mean admission wait (N - c)(N - c + 1) /
    (2 N X(c)). The memory verdict keeps its meaning (the pool does not hold the N at once: does not fit)."""
    from llmsizer.estimate.fit import fit
    from llmsizer.estimate.serving_load import burst_over_pool, under_load
    from llmsizer.validation_cases import row_speed

    cases = _burst_rows(tmp_path)
    for i, (p, g, n, _, _, admitted) in enumerate(LONG_BURSTS):
        f = fit("qwen3-14b", "h100-sxm", 1, engine="vllm", weights="bf16", context=p + g, output_tokens=g,
                concurrency=n, engine_version="0.11.0")
        assert not f.fits
        b = f.details["burst"]
        assert (b["requests"], b["admitted"], b["waiting"]) == (n, admitted, n - admitted)
        t, r = cases[f"LB{i}t"], cases[f"LB{i}r"]
        assert (b["ttft_seconds"], b["requests_per_second"]) == (t.predicted, r.predicted)
        assert t.span == tuple(sorted((b["ttft_seconds"], b["ttft_upper_seconds"])))
        row = {"engine": "vllm", "engine_version": "0.11.0", "device": "h100-sxm", "gpus": "1",
               "catalog_model": "qwen3-14b", "dtype": "bf16", "prompt": str(p), "generated": str(g)}
        alone = burst_over_pool(row_speed(row, admitted), "vllm", n, 8192)
        assert alone is not None and alone.load is not None
        assert b["ttft_seconds"] == pytest.approx(alone.load["ttft_seconds"], rel=1e-12)
        assert b["ttft_upper_seconds"] == pytest.approx(alone.load["ttft_burst_seconds"], rel=1e-12)
        assert b["requests_per_second_waves"] == pytest.approx(alone.load["requests_per_second_burst"], rel=1e-12)
        at_c = under_load(row_speed(row, admitted), "vllm", 8192)
        assert at_c is not None and at_c.load is not None
        x, c = at_c.load["requests_per_second"], admitted
        assert b["requests_per_second"] == pytest.approx(x, rel=1e-12)
        assert b["ttft_seconds"] == pytest.approx(at_c.ttft_seconds + (n - c) * (n - c + 1) / (2 * n * x), rel=1e-12)
        assert b["ttft_seconds"] <= b["ttft_upper_seconds"]
        assert b["waves"] == math.ceil(n / c)


def test_the_short_bursts_are_the_pages_numbers() -> None:
    """SL43-SL72 (gpustack performance-lab pages: 'random 128 input' of 'Other Benchmark Cases', SL43-SL52, and the
    ShareGPT bursts of '1. Choosing the Inference Engine', SL53-SL72): each row's value is its quoted 'Mean TTFT
    (ms)' or 'Request throughput (req/s)', the latter 1000 requests over the quoted 'Benchmark duration (s)'
    (independent of the throughput line, to its two decimals); the short bursts 1000 requests of 4 generated tokens
    each ('Total generated tokens: 4000') after the Short prompt case's 128, the ShareGPT rows the run's mean
    lengths (its quoted totals / 1000); all held out."""
    import csv

    from llmsizer.validation_cases import data_dir

    rows = {r["id"]: r for r in csv.DictReader(open(data_dir(None) / "serving_load.csv"))}
    cases = _cases()
    for rid in GPUSTACK_SHORT_BURSTS + GPUSTACK_SHAREGPT_BURSTS:
        r, c = rows[rid], cases[rid]
        quote = r["quote"]
        total_in = int(quote.split("Total input tokens: ")[1].split(" ")[0])
        total_gen = int(quote.split("Total generated tokens: ")[1].split(" ")[0])
        assert "Successful requests: 1000" in quote and r["concurrency"] == "1000", rid
        if rid in GPUSTACK_SHORT_BURSTS:
            assert total_gen == 4000 and (r["prompt"], r["generated"]) == ("128", "4"), rid
        else:  # ShareGPT: the run's mean lengths, from its totals
            assert (int(r["prompt"]), int(r["generated"])) == (round(total_in / 1000), round(total_gen / 1000)), rid
        assert c.excluded == "", rid
        if r["metric"] == "ttft":
            assert f"Mean TTFT (ms): {r['value']}" in quote, rid
        else:
            assert f"Request throughput (req/s): {r['value']}" in quote, rid
            duration = float(quote.split("Benchmark duration (s): ")[1].split(" ")[0])
            assert float(r["value"]) == pytest.approx(1000 / duration, abs=0.006 * 1000 / duration), rid

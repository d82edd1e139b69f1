"""The calibrated bands of estimate/ranges.py, re-derived from the repository's validation rows, and their
coverage: at least 90 % of the summarised rows of each kind and engine inside [low, high].

When a prediction changes, the bands move with it: this test then prints the lines to paste into
estimate/ranges.py (and `llmsizer validate --markdown docs/accuracy.md` republishes the coverage).
"""

from __future__ import annotations

import math
import random

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate import ranges as R
from llmsizer.validation_cases import (
    CALIBRATION,
    DECODE,
    INFERENCE_MEMORY,
    KNOWN_MISSES,
    QWEN25_PAGE_IDS,
    TRANSFORMERS,
    VLLM,
    band_keys,
    band_of,
    band_rows,
    coverage,
    inside_share,
    known_misses,
    loso_share,
    repo_cases,
    setup_of,
)


@pytest.fixture(scope="module")
def cases():
    return repo_cases()


def test_bands_follow_from_the_rows(cases) -> None:
    derived = {}
    for (kind, engine), rows in sorted(band_rows(cases).items()):
        lo, hi = band_of(rows)
        devices = tuple(sorted({c.device for c in rows})) if all(c.device for c in rows) else ()
        loso = loso_share(rows)
        derived[(kind, engine)] = (lo, hi, len(rows), len({setup_of(c) for c in rows}),
                                   round(inside_share(rows), 3), None if loso is None else round(loso, 3), devices)
    stated = {k: (b.low, b.high, b.rows, b.setups, b.inside, b.loso, b.devices) for k, b in R.BANDS.items()}
    lines = "\n".join(f"_add({k!r}, {e!r}, {lo:.4f}, {hi:.4f}, {n}, {s}, {ins}, {lo_so}, {d!r})"
                      for (k, e), (lo, hi, n, s, ins, lo_so, d) in derived.items())
    assert stated == derived, ("stale bands: run `PYTHONPATH=src python scripts/gen_docs.py` (it runs "
                               "scripts/rederive_bands.py and regenerates docs/accuracy.md):\n" + lines)


def test_coverage_is_at_least_90_percent_per_kind_and_engine(cases) -> None:
    """In sample, by row and by setup (each setup as one: the share of its rows inside, summed over setups)."""
    for c in coverage(cases):
        assert c.low is not None, (c.kind, c.engine)
        assert c.inside >= 0.9 * c.rows, (c.kind, c.engine, c.inside, c.rows)
        assert c.inside_setups >= 0.9 * c.setups - 1e-9, (c.kind, c.engine, c.inside_setups, c.setups)


def test_leave_one_out_coverage_is_at_least_90_percent_where_rows_allow_it(cases) -> None:
    """Out of sample: with 20 or more rows (each left-out row judged by the band of the others, re-derived with the
    setup weights of the rows left) at least 90 % of the rows fall inside, per kind and engine. Leaving a whole setup
    out needs 20 setups for the conformal rule; only llama.cpp decode has them (33 setups, 89.6 % today), so the
    figure (``Coverage.inside_loso``, ``Band.loso``) is published beside the rows' without holding it to 90 %."""
    for c in coverage(cases):
        if c.rows >= 20:
            assert c.inside_loo >= 0.9 * c.rows, (c.kind, c.engine, c.inside_loo, c.rows)


def test_a_run_feeds_a_memory_band_with_its_live_tensor_figure_only(cases) -> None:
    """The band multiplies the live tensors (allocator.calibrated_need), so of a measured run's two memory figures
    the one predicted by the live tensors (peak allocated on CUDA, the tracker's peak tensors on a CPU) feeds it, and
    the whole-need figure (device total, process RSS) stays summarised but out of the band: one run, one row."""
    rows = [c for rs in band_rows(cases).values() for c in rs if c.origin == "measured"]
    assert rows and all(c.id.endswith((".peak_allocated", ".peak_tensors")) for c in rows if "memory" in c.kind)
    totals = [c for c in cases if c.id.endswith((".device_total", ".process_rss"))]
    # summarised, or (the H200 inference device totals) calibration rows of allocator.RESERVE, never silently dropped
    assert totals and all(c.no_band and c.excluded in ("", CALIBRATION) for c in totals)
    runs = [c.id.rsplit(".", 1)[0] for c in rows if "memory" in c.kind]
    assert len(runs) == len(set(runs))


def test_qwen25_page_rows_feed_the_band_as_one_setup(cases) -> None:
    """The Qwen2.5 page's 102 transformers memory rows (one setup) feed the band again, weighing as one setup of
    the band's: the band is no narrower than the one of the other setups' rows alone (pooled row by row they set it
    to 1.000..1.080 and left 5 of the other 11 rows outside)."""
    rows = band_rows(cases)[(INFERENCE_MEMORY, TRANSFORMERS)]
    page = [c for c in rows if c.id in QWEN25_PAGE_IDS]
    others = [c for c in rows if c.id not in QWEN25_PAGE_IDS]
    assert len(page) == 102 and len({setup_of(c) for c in page}) == 1
    lo, hi = band_of(rows)
    olo, ohi = band_of(others)
    assert lo <= olo and hi >= ohi * 0.98  # one setup more may move an end by one setup's weight, not collapse it
    inside = sum(lo <= c.measured / c.predicted <= hi for c in others)
    assert inside >= 0.9 * len(others), (inside, len(others))


def test_a_single_row_gives_no_band(cases) -> None:
    """One summarised row of a kind and band has no spread to calibrate: no band of its own, rather than one of zero
    width that claims 90 % coverage (VS08 alone); a release scope without summarised rows (vLLM 0.8-0.13's one
    sequence: VS17 is a calibration row of the serving share) takes the pooled serving band, named."""
    vs08 = [c for c in cases if c.id == "VS08"]
    assert len(vs08) == 1 and not vs08[0].excluded and band_keys(vs08[0]) == ("vllm >= 0.14", R.SERVING_POOLED)
    assert band_rows(vs08) == {}
    assert R.band_for(DECODE, "vllm 0.8-0.13") is None
    b, why = R.serving_band(DECODE, VLLM, "0.13", "a100-sxm-40gb")
    assert b is R.band_for(DECODE, R.SERVING_POOLED) and b is not None and R.SERVING_POOLED in why


def test_band_is_the_conformal_order_statistic() -> None:
    xs = [float(i) for i in range(1, 41)]  # 40 ratios: d = floor(0.05 x 41) = 2, the 2nd from each end
    assert R.band(xs) == (2.0, 39.0)
    xs = [float(i) for i in range(1, 172)]  # 171 ratios: d = 8 (the old rule kept the 9th: 89 % out of sample)
    assert R.band(xs) == (8.0, 164.0)
    assert R.band([float(i) for i in range(1, 20)]) == (1.0, 19.0)  # 19 rows: d = 1, the full span
    assert R.calibrated_range("decode throughput", "llama.cpp", 100.0) is not None
    assert R.calibrated_range("decode throughput", "no such engine", 100.0) is None


def test_small_samples_get_the_log_normal_prediction_interval() -> None:
    # 3 ratios: mean of logs 0, s = 0.1 exactly (logs -0.1, 0, 0.1), t(0.95, 2) = 2.920
    xs = [math.exp(-0.1), 1.0, math.exp(0.1)]
    lo, hi = R.band(xs)
    w = 2.920 * 0.1 * math.sqrt(1 + 1 / 3)
    assert lo == pytest.approx(math.exp(-w)) and hi == pytest.approx(math.exp(w))
    assert R.band([1.0, 1.0]) == (1.0, 1.0)  # no spread: the rows' span


def test_coverage_holds_on_fresh_draws() -> None:
    """Independent of our rows: bands from n exchangeable draws cover a fresh draw >= 90 % of the time (log-normal
    draws, where the small-n interval is exact, and heavy-tailed ones for the conformal rule)."""
    rng = random.Random(12)
    for n, draw in ((8, lambda: math.exp(rng.gauss(0, 0.2))), (30, lambda: math.exp(rng.gauss(0, 0.2))),
                    (60, lambda: math.exp(0.2 * rng.paretovariate(1.5) * rng.choice((-1, 1))))):
        hits = 0
        trials = 3000
        for _ in range(trials):
            lo, hi = R.band([draw() for _ in range(n)])
            hits += lo <= draw() <= hi
        assert hits / trials >= 0.885, (n, hits / trials)  # 90 % less 3 standard errors of 3000 trials


def test_a_stated_band_reaches_to_the_expected_value() -> None:
    """Rows all on one side of 1 (every run slower than the estimate) give a band that reaches to 1, so the expected
    value lies inside its own range; it only widens the band, so the rows' coverage stays. Rows on both sides keep
    ``band`` unchanged."""
    slow = [0.55, 0.6, 0.62, 0.58]
    lo, hi = R.band(slow)
    assert hi < 1.0 and R.band_around_expected(slow) == (lo, 1.0)
    fast = [1.2, 1.3, 1.25]
    assert R.band_around_expected(fast) == (1.0, R.band(fast)[1])
    both = [0.9, 1.0, 1.1, 0.95, 1.05]
    assert R.band_around_expected(both) == R.band(both)


# -- each setup weighs as one -------------------------------------------------------------------------------------

def _spread(n: int) -> list[float]:
    return [math.exp(0.1 * (i - (n - 1) / 2) / n) for i in range(n)]  # n distinct ratios around 1, span ~0.905-1.1


def test_equal_weights_are_the_unweighted_rule() -> None:
    for n in (3, 12, 19, 20, 40, 171):
        xs = _spread(n)
        assert R.band(xs, setups=[str(i) for i in range(n)]) == R.band(xs)
        assert R.band(xs, setups=["one setup"] * n) == R.band(xs)
        assert R.effective_rows([0.25] * n) == pytest.approx(n)


def test_a_setup_of_100_identical_rows_cannot_shrink_a_band_set_by_other_setups() -> None:
    """20 single-row setups set a band; one more setup of 100 identical rows at their centre must not narrow it, and
    at any value it moves the band as one row there would. Pooled row by row (the old rule) the 100 central rows
    narrow it; 100 outlying rows of one setup (40 setups besides) set its end, where weighted they are left out as
    one row would be."""
    others = _spread(20)
    names = [f"s{i}" for i in range(20)]
    alone = R.band(others)
    for v in (1.0, 1.5):
        xs, setups = others + [v] * 100, names + ["big"] * 100
        lo, hi = R.band(xs, setups=setups)
        assert lo <= alone[0] and hi >= alone[1]
        assert (lo, hi) == R.band(others + [v])  # as one row at v
    plo, phi = R.band(others + [1.0] * 100)  # row by row the 100 central rows narrow it
    assert plo > alone[0] and phi < alone[1]
    # 40 setups: d = 2, so one outlying setup is left out as one row would be
    others, names = _spread(40), [f"s{i}" for i in range(40)]
    lo, hi = R.band(others + [1.5] * 100, setups=names + ["big"] * 100)
    assert hi == max(others) == R.band(others + [1.5])[1] and R.band(others + [1.5] * 100)[1] == 1.5


def test_weighted_bands_cover_a_new_setup() -> None:
    """Independent of our rows, the setting the weights are for (Dunn, Wasserman & Ramdas 2022): 30 setups, each
    with its own offset (log sd 0.1) and run-to-run noise (log sd 0.02), one of 100 runs and 29 of 1-3 runs. The
    weighted band covers a run of a new setup >= 90 % of the time; pooled row by row it does not (the big setup's
    narrow spread decides it: 77 % here)."""
    rng = random.Random(7)

    def covered(weighted: bool) -> bool:
        ratios, setups = [], []
        for k in range(30):
            offset = rng.gauss(0, 0.1)
            for _ in range(100 if k == 0 else rng.randint(1, 3)):
                ratios.append(math.exp(offset + rng.gauss(0, 0.02)))
                setups.append(str(k))
        lo, hi = R.band(ratios, setups=setups if weighted else None)
        return lo <= math.exp(rng.gauss(0, 0.1) + rng.gauss(0, 0.02)) <= hi

    trials = 1500
    assert sum(covered(True) for _ in range(trials)) / trials >= 0.885  # 90 % less 2 standard errors
    assert sum(covered(False) for _ in range(trials)) / trials < 0.85


def test_bad_setups_are_refused() -> None:
    with pytest.raises(InputError, match="one setup name per ratio"):
        R.band([1.0, 1.1], setups=["a"])


def test_small_weighted_samples_use_the_effective_count() -> None:
    """Below 19 effective rows the weighted log-normal interval: weighted mean and variance of the log ratios,
    t with floor(n_eff) - 1 degrees of freedom. Two setups, one of 1 row (log 0.1), one of 4 rows (log -0.1 each):
    weights 1 and 1/4 x 4, so mean 0, n_eff = 4 / 1.25 = 3.2, variance 0.01 / (1 - 1 / 3.2), t(0.95, 2)."""
    xs = [math.exp(0.1)] + [math.exp(-0.1)] * 4
    lo, hi = R.band(xs, setups=["a"] + ["b"] * 4)
    n = 3.2
    w = 2.920 * math.sqrt(0.01 / (1 - 1 / n)) * math.sqrt(1 + 1 / n)
    assert lo == pytest.approx(math.exp(-w)) and hi == pytest.approx(math.exp(w))


# -- the small-sample floor: each setup's own central 90 % -----------------------------------------------------------

def test_one_row_of_a_many_row_setup_cannot_set_a_small_sample_end_alone() -> None:
    """Below 19 effective rows the band is never narrower than each setup's shortest range holding 90 % of its rows:
    with one row per setup that is the rows' full span (a lone row at 0.3 is inside), but one row weighing 1 / 100 of
    a setup no longer sets an end (the rows' span did: 0.300 for this draw). 5 single-row setups near 1 and a 100-row setup:
    n_eff = 36 / 5.01 = 7.2, the t-interval branch."""
    five = [0.97, 0.99, 1.0, 1.01, 1.03]
    big = [1.0 + 0.02 * (i - 49.5) / 49.5 for i in range(99)] + [0.3]
    xs, setups = five + big, [f"s{i}" for i in range(5)] + ["big"] * 100
    assert R.effective_rows(R.band_weights(setups)) < 19
    lo, hi = R.band(xs, setups=setups)
    wlo, whi = R.band(five + big[:-1], setups=setups[:-1])  # the same without the 0.3 row
    assert lo > 0.8 and hi < 1.2  # the row moves the band by its weight (1 / 600 of the total), not to 0.3
    assert lo <= wlo and hi >= whi
    assert R.setup_span(xs, setups)[0] > 0.9  # the floor: the 0.3 row is among the 10 rows its setup leaves out
    # the same row as a setup of its own sets the low end: the unweighted rows' span
    assert R.band(five + [0.3])[0] <= 0.3 and R.band(five + [0.3], setups=[str(i) for i in range(6)])[0] <= 0.3


def test_setup_span_keeps_90_percent_of_each_setup() -> None:
    """Each setup's shortest range of ceil(0.9 m) of its m rows: 16 rows keep 15 (the one far outlier left out, on
    whichever side it lies), 10 keep 9, a single-row setup is its row."""
    sixteen = [0.45] + [1.0 + 0.01 * i for i in range(15)]
    assert R.setup_span(sixteen, ["a"] * 16) == (1.0, sixteen[-1])
    assert R.setup_span([1 / x for x in sixteen], ["a"] * 16) == (1 / sixteen[-1], 1.0)
    ten = [float(i) for i in range(1, 11)]
    # "a": 2..10 spans x5, 1..9 x9, the shorter kept; "b" alone is its row
    assert R.setup_span(ten + [20.0], ["a"] * 10 + ["b"]) == (2.0, 20.0)


# -- what a setup is -------------------------------------------------------------------------------------------------

def test_a_setup_is_one_document_on_one_device_whatever_its_commit(cases) -> None:
    """Two snapshots of one README are one document (XiongjieDai @00dd2bd and @eafac9d, torchtune README @ca0a6de and
    @1814feb, torchtitan's benchmark @b5bcd76 and @31a17bf); one document's rows of several devices are one setup per
    device (llama.cpp discussion 4167's many users' GPUs, XiongjieDai's Apple and NVIDIA tables, llm-foundry's A100
    40GB / A100 80GB / H100 80GB tables); a measured file of runs is one setup."""
    rows = [c for rs in band_rows(cases).values() for c in rs]
    by_id = {c.id: c for c in rows}
    assert all("@" not in setup_of(c) for c in rows)
    xd = [c for c in rows if "XiongjieDai" in c.source and c.hardware == "h100-pcie"]
    assert {"00dd2bd" in c.source for c in xd} == {True, False}  # both snapshots hold H100 PCIe rows
    assert len({setup_of(c) for c in xd}) == 1
    for doc in ("pytorch/torchtune README", "pytorch/torchtitan benchmarks/llama3_h100"):
        mine = [c for c in rows if doc in c.source and c.kind == "training throughput"]
        commits = {c.source.split("@")[1].split()[0][:7] for c in mine}
        assert len(commits) == 2, (doc, commits)
        assert len({setup_of(c) for c in mine}) == len({c.hardware for c in mine}), doc
    thread = [c for c in rows if "discussions/4167" in c.source]
    assert len({c.hardware for c in thread}) > 5 and len({setup_of(c) for c in thread}) == len({c.hardware
                                                                                             for c in thread})
    foundry = {setup_of(c) for c in rows if "llm-foundry" in c.source}
    assert {s.rsplit(" on ", 1)[1] for s in foundry} == {"a100-40gb", "a100-80gb", "h100-80gb"}
    apple = {setup_of(c) for c in rows if "XiongjieDai" in c.source and c.hardware.startswith("apple")}
    nvidia = {setup_of(c) for c in rows if "XiongjieDai" in c.source and c.hardware.startswith("rtx")}
    assert apple and nvidia and not apple & nvidia
    h200 = {setup_of(c) for c in rows if c.origin == "measured" and "h200" in c.source}
    assert h200 == {"gpu-h200-2026-12-04.jsonl"}
    # the device column of one CSV and the hardware text of another name one part alike
    assert by_id["BB01"].hardware == "dgx-spark" and setup_of(by_id["BB01"]) == setup_of(by_id["PM0103"])


def test_device_key_names_one_part_one_way() -> None:
    from llmsizer.validation_cases import device_key

    assert device_key("NVIDIA DGX Spark (GB10, 128GB unified LPDDR5X)") == device_key("dgx-spark") == "dgx-spark"
    assert device_key("2x H100 80GB") == device_key("H100 80GB") == "h100-80gb"
    assert device_key("A10G (1xA10G)") == device_key("A10G (4xA10G)") == "a10g"


# -- what the coverage is of ---------------------------------------------------------------------------------------

def test_a_band_says_what_its_coverage_is_of(cases) -> None:
    """The 90 % is of a new run of one of the band's setups; for a run of a new setup the band carries its
    leave-one-setup-out coverage, re-derived here from the rows (a setup's rows judged by the band of the others)."""
    rows = band_rows(cases)[(INFERENCE_MEMORY, TRANSFORMERS)]
    b = R.band_for(INFERENCE_MEMORY, TRANSFORMERS)
    assert b is not None and b.setups == 4
    d = b.to_dict()["coverage"]
    assert d["target"] == 0.9 and "one of this band's 4 setups" in str(d["of"])
    assert d["leave_one_setup_out"] == _by_hand(rows)[1]
    one = R.band_for(DECODE, "vllm 0.6-0.7")
    assert one is not None and one.loso is None and one.coverage_of == "a new run of this band's one setup"


def _by_hand(rows) -> tuple[float, float | None]:
    """(in-sample coverage per run of the setups, leave-one-setup-out coverage) of a band's rows, to 3 decimals,
    counted here from the rows: each setup's share of its ratios inside the band of all rows (of the other setups'
    rows), averaged over the setups."""
    rows = [c for c in rows if c.predicted]
    names = sorted({setup_of(c) for c in rows})

    def share(s: str, lo: float, hi: float) -> float:
        mine = [c.measured / c.predicted for c in rows if setup_of(c) == s]
        return sum(lo <= r <= hi for r in mine) / len(mine)

    lo, hi = band_of(rows)
    inside = sum(share(s, lo, hi) for s in names) / len(names)
    if len(names) < 2:
        return round(inside, 3), None
    out = [share(s, *band_of([c for c in rows if setup_of(c) != s])) for s in names]
    return round(inside, 3), round(sum(out) / len(out), 3)


def test_every_band_states_its_coverage_from_its_rows(cases) -> None:
    """Each band's ``coverage`` (the one every printed range carries) holds the target, the in-sample coverage per
    run of its setups and the leave-one-setup-out coverage counted from its rows, its setups and rows; the in-sample
    share is the one ``validate`` prints (its 'setups inside' column)."""
    summary = {(c.kind, c.engine): c for c in coverage(cases)}
    for key, rows in band_rows(cases).items():
        b = R.BANDS[key]
        cov = b.coverage()
        inside, loso = _by_hand(rows)
        assert (cov["target"], cov["in_sample"], cov["leave_one_setup_out"]) == (0.9, inside, loso), key
        assert (cov["setups"], cov["rows"]) == (len({setup_of(c) for c in rows}), len(rows)), key
        assert round(summary[key].inside_setups / summary[key].setups, 3) == inside, key


def test_a_warning_appears_exactly_when_leave_one_setup_out_is_below_target() -> None:
    """The bands of today: transformers inference memory (0.766) and pooled serving decode (0.786) among those below
    90 % (llama.cpp decode, 0.896 until the A10G record's rows PW02/PW04 joined it as a 34th setup, is at 0.916); vLLM
    inference memory sits at 0.900 (no warning); one setup has no check (no warning). Stated in words: the share, the
    target and what it means for a run."""
    below = {k for k, b in R.BANDS.items() if b.loso is not None and b.loso < R.COVERAGE}
    assert {(INFERENCE_MEMORY, TRANSFORMERS), (DECODE, R.SERVING_POOLED)} <= below
    for k, b in R.BANDS.items():
        w = b.coverage()["warning"]
        assert (w is not None) == (k in below), k
        if w is not None:
            assert f"{b.loso:.1%}" in w and "90%" in w and "more often than 1 in 10" in w, w
    edge = R.Band("k", "e", 0.9, 1.1, 10, setups=3, loso=R.COVERAGE, inside=1.0)
    assert edge.coverage_warning is None
    assert R.Band("k", "e", 0.9, 1.1, 10, setups=3, loso=0.8999, inside=1.0).coverage_warning is not None
    assert R.Band("k", "e", 0.9, 1.1, 10, setups=1, loso=None, inside=0.5).coverage_warning is None


def test_the_printed_ranges_carry_their_bands_coverage(cases) -> None:
    """The memory range of `infer --json` (details.calibrated_range) and the speed ranges of `fit --json`
    (speed.calibrated_ranges) state the coverage their band has, equal to the numbers counted from its rows; the
    text line says it and, below target, the warning."""
    from cli_capture import run, run_json

    rows = band_rows(cases)
    code, d = run_json("infer", "qwen2.5-7b", "--device", "h100-sxm", "--engine", "transformers")
    assert code == 0
    cov = d["details"]["calibrated_range"]["coverage"]
    inside, loso = _by_hand(rows[(INFERENCE_MEMORY, TRANSFORMERS)])
    assert (cov["target"], cov["in_sample"], cov["leave_one_setup_out"], cov["setups"]) == (0.9, inside, loso, 4)
    assert d["details"]["calibrated_range"]["coverage_target"] == cov["target"]  # deprecated alias, one release
    assert loso is not None and loso < 0.9 and f"{loso:.1%}" in cov["warning"]
    code, text, _ = run("infer", "qwen2.5-7b", "--device", "h100-sxm", "--engine", "transformers")
    at = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("calibrated range:")))
    assert text.splitlines()[at + 1].startswith("  coverage: target 90%")
    assert f"leave one setup out {loso:.1%}" in text.splitlines()[at + 1]
    assert text.splitlines()[at + 2] == "  warning: " + cov["warning"]
    # vLLM on an H100: the decode range comes from the pooled serving band (its scope has no H100 rows)
    code, f = run_json("fit", "qwen2.5-7b", "--device", "h100-sxm")
    assert code == 0
    speed = f["speed"]["calibrated_ranges"]
    assert speed["tokens_per_second"] is not None and speed["prefill_tokens_per_second"] is None
    assert speed["coverage"]["prefill_tokens_per_second"] is None
    dec = speed["coverage"]["tokens_per_second"]
    inside, loso = _by_hand(rows[(DECODE, R.SERVING_POOLED)])
    assert (dec["in_sample"], dec["leave_one_setup_out"], dec["setups"]) == (inside, loso, 2)
    assert dec["warning"] is not None and ">= 90 %" not in speed["source"]
    # vLLM inference memory: leave one setup out at or above the target (95.0% since probe23 D3's MXFP4 bytes),
    # so no warning
    _, loso = _by_hand(rows[(INFERENCE_MEMORY, "vllm")])
    assert loso is not None and loso >= 0.9
    code, text, _ = run("infer", "qwen2.5-7b", "--device", "h100-sxm", "--engine", "vllm")
    line = next(x for x in text.splitlines() if x.startswith("  coverage:"))
    assert f"leave one setup out {loso:.1%}" in line and not any(x.startswith("  warning:") for x in text.splitlines())
    # one setup: no leave-one-setup-out figure, and the words say there is no such check
    from llmsizer.render.text import coverage_lines

    one = R.band_for(DECODE, "vllm 0.6-0.7")
    assert one is not None and coverage_lines(one.coverage()) == [
        "  coverage: target 90% (of a new run of this band's one setup); in sample 100.0% of the setups' runs inside; "
        "no leave-one-setup-out check (one setup)"]


def _says_coverage(lines: list[str], at: int, cov: dict, by_hand: tuple[float, float | None], of: str = "") -> int:
    """Lines ``at``, ``at + 1`` of a text answer state ``cov`` (a range's coverage, whose numbers must be the ones
    counted from its band's rows, ``by_hand``): the coverage line, then the warning line exactly when the
    leave-one-setup-out share is below the 90 % target. Returns the index after them."""
    inside, loso = by_hand
    assert (cov["target"], cov["in_sample"], cov["leave_one_setup_out"]) == (0.9, inside, loso)
    assert lines[at].startswith(f"  {of + ' ' if of else ''}coverage: target 90%"), lines[at]
    assert f"in sample {inside:.1%}" in lines[at] and (loso is None or f"leave one setup out {loso:.1%}" in lines[at])
    warned = loso is not None and loso < 0.9
    assert (cov["warning"] is not None) == warned
    if warned:
        assert lines[at + 1] == f"  warning{f' ({of})' if of else ''}: " + cov["warning"]
        assert f"{loso:.1%}" in cov["warning"]
        return at + 2
    assert at + 1 == len(lines) or "warning" not in lines[at + 1], lines[at + 1]
    return at + 1


def test_the_training_duration_range_carries_its_coverage(cases) -> None:
    """`train --tokens`: the calibrated wall-clock range is the tokens over the training-throughput band's tokens/s
    range (band counted from the rows) and carries that band's coverage in its JSON (`duration`) and under its text
    line; `fit --train --tokens` prints and carries the same (its `training_time`). The band's leave-one-setup-out
    coverage (0.902 today) decides the warning."""
    from cli_capture import run, run_json
    from llmsizer.validation_cases import PYTORCH_TRAINING, TRAINING_SPEED

    rows = band_rows(cases)[(TRAINING_SPEED, PYTORCH_TRAINING)]
    truth = _by_hand(rows)
    lo, hi = band_of([c for c in rows if c.predicted])
    args = ("llama-3.1-8b", "--device", "h100-sxm", "--method", "lora", "--tokens", "1e8")
    code, d = run_json("train", *args)
    assert code == 0
    du = d["duration"]
    assert du["calibrated_seconds_range"] == pytest.approx([1e8 / (du["tokens_per_second"] * hi),
                                                            1e8 / (du["tokens_per_second"] * lo)], rel=1e-3)
    cov = du["calibrated_seconds_range_coverage"]
    assert cov["setups"] == len({setup_of(c) for c in rows}) and cov["rows"] == len(rows)
    code, text, _ = run("train", *args)
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("duration:"))
    assert "calibrated range)" in lines[at]
    _says_coverage(lines, at + 1, cov, truth)
    code, f = run_json("fit", *args, "--train")
    assert f["training_time"]["calibrated_seconds_range_coverage"] == cov
    code, text, _ = run("fit", *args, "--train")
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("duration:"))
    _says_coverage(lines, at + 1, cov, truth)
    # a CPU run has no calibrated range (the band is of GPU runs), so no coverage either
    code, c = run_json("train", "smollm2-135m", "--device", "cpu", "--method", "lora", "--tokens", "1e6")
    assert c["duration"]["calibrated_seconds_range"] is None
    assert c["duration"]["calibrated_seconds_range_coverage"] is None


def test_fit_text_prints_each_speed_ranges_coverage(cases) -> None:
    """`fit` text: under the speed table, each rate printed with a range names its range's coverage, the numbers of
    its band counted from the rows, and its warning exactly when leave-one-setup-out is below target: vLLM at 8
    sequences on 8 H100s (pooled serving batched decode; no prefill band), llama.cpp on one RTX 4090 (prefill and
    decode ranges, llama.cpp's CUDA bands). The JSON carries the same coverage."""
    from cli_capture import run, run_json
    from llmsizer.validation_cases import BATCHED, PREFILL

    rows = band_rows(cases)
    for args, prefill_key, decode_key in (
            (("llama-3.1-70b-instruct", "--device", "h100-sxm", "--count", "8", "--engine", "vllm",
              "--concurrency", "8"), None, (BATCHED, R.SERVING_POOLED)),
            (("llama-3.1-8b", "--device", "rtx-4090", "--engine", "llamacpp"), (PREFILL, "llama.cpp on CUDA"),
             (DECODE, "llama.cpp on CUDA"))):
        code, d = run_json("fit", *args)
        assert code == 0
        covs = d["speed"]["calibrated_ranges"]["coverage"]
        code, text, _ = run("fit", *args)
        lines = text.splitlines()
        at = next(i for i, x in enumerate(lines) if x.startswith("decode x")) + 1
        at += lines[at].startswith("at ")  # the table's row at the requested load (estimate/serving_load.py), if any
        if prefill_key is None:
            assert covs["prefill_tokens_per_second"] is None
            assert not any("prefill range coverage" in x for x in lines)
        else:
            at = _says_coverage(lines, at, covs["prefill_tokens_per_second"], _by_hand(rows[prefill_key]),
                                "prefill range")
        _says_coverage(lines, at, covs["tokens_per_second"], _by_hand(rows[decode_key]), "decode range")


def test_the_notebook_fit_shows_the_speed_ranges_coverage() -> None:
    """The notebook's fit (render/notebook.py fit_html) prints the speed table's coverage lines as `fit` does."""
    from html import escape

    from llmsizer import fit
    from llmsizer.render.fit_text import speed_coverage_lines
    from llmsizer.render.notebook import fit_html

    r = fit("llama-3.1-8b", "rtx-4090", engine="llamacpp")
    lines = speed_coverage_lines(r.speed)
    page = fit_html(r)
    assert len(lines) >= 2 and all(f"<p>{escape(x)}</p>" in page for x in lines)


def test_removed_coverage_keys_live_on_as_deprecated_aliases() -> None:
    """calcov renamed the coverage keys into one `coverage` object; the former names stay one release with the same
    values, as docs/nomenclature.md says (its rule: a deprecated alias kept one release, as `headroom_bytes`)."""
    from pathlib import Path

    for b in R.BANDS.values():
        d = b.to_dict()
        assert (d["coverage_target"], d["coverage_of"], d["coverage_new_setup_leave_one_setup_out"]) == (
            d["coverage"]["target"], d["coverage"]["of"], d["coverage"]["leave_one_setup_out"])
    doc = (Path(__file__).resolve().parents[2] / "docs" / "nomenclature.md").read_text()
    row = next(x for x in doc.splitlines() if x.startswith("| `coverage` |"))
    for name in ("calibrated_range.coverage_target", "coverage_of", "coverage_new_setup_leave_one_setup_out",
                 "Deprecated alias"):
        assert name in row, name


# -- llama.cpp: one band per backend --------------------------------------------------------------------------------

def _vendor(case) -> str:
    """The vendor the hardware catalog states for the device a row's CSV names (catalog data, not the band code)."""
    from llmsizer.catalog.hardware import builtin_catalog

    return builtin_catalog().device(case.hardware).vendor


def test_llamacpp_rows_feed_their_devices_backends_band(cases) -> None:
    """Each summarised llama.cpp prefill and one-sequence decode row feeds the band of its device's backend (an Apple
    chip's rows (Metal) the Metal band, an NVIDIA GPU's (CUDA) the CUDA band, no row lost and none in two backends)
    and the engine-wide band, but a known miss of a backend with a band of its own that band alone (the next test).
    Discussion 4167's 50 Apple pp512 rows (AP01-AP50) are all Metal, so the CUDA prefill band is the one the NVIDIA
    rows give alone: the Apple rows cannot move it (they moved the engine-wide low end 0.6257 -> 0.7952)."""
    from llmsizer.validation_cases import PREFILL

    rows = band_rows(cases)
    for kind in (PREFILL, DECODE):
        engine_wide = rows[(kind, R.LLAMACPP)]
        cuda, metal = rows[(kind, "llama.cpp on CUDA")], rows[(kind, "llama.cpp on Metal")]
        assert {c.id for c in cuda} | {c.id for c in metal} == {c.id for c in engine_wide} | (
            {c.id for c in cuda + metal} & set(KNOWN_MISSES)), kind
        assert not {c.id for c in cuda} & {c.id for c in metal}, kind
        assert {_vendor(c) for c in cuda} == {"NVIDIA"} and {_vendor(c) for c in metal} == {"Apple"}, kind
        assert not any(k == kind and e == "llama.cpp on CPU" for k, e in rows)  # no published CPU row (yet)
    ap = [c for c in rows[(PREFILL, R.LLAMACPP)] if c.id.startswith("AP")]
    assert len(ap) == 50 and all(band_keys(c) == (R.LLAMACPP, "llama.cpp on Metal") for c in ap)
    nvidia = [c for c in cases if c.id in {r.id for r in rows[(PREFILL, "llama.cpp on CUDA")]}]
    assert {_vendor(c) for c in nvidia} == {"NVIDIA"} and not any(c.id.startswith("AP") for c in nvidia)
    b = R.band_for(PREFILL, "llama.cpp on CUDA")
    assert b is not None and (b.low, b.high) == band_of(nvidia) and b.setups == len({setup_of(c) for c in nvidia})


def test_one_backends_known_misses_stay_out_of_the_band_other_backends_inherit(cases) -> None:
    """review35 D2: the A10G's MMQ prefill misses (KNOWN_MISSES PW03, PX01, ..., 2.0-2.9x, a CUDA-kernel gap) feed
    the CUDA band -- which they widen, and keep: dropping them there would claim a coverage CUDA does not have -- but
    not the engine-wide band that CPU and ROCm estimates inherit (ranges.has_own_llamacpp_band: CUDA has its own).
    The inherited prefill band is the band of every other llama.cpp row, so no CUDA miss can set its ends (it was
    0.7727..2.3238 with them, the row-unit rule bringing in the A10G's 2.0-2.9x rows); a backend without a band of
    its own (here CUDA cut to the A10G setup alone) keeps its known misses in the engine-wide band it inherits."""
    from llmsizer.validation_cases import PREFILL

    rows = band_rows(cases)
    for kind in (PREFILL, DECODE):
        cuda = rows[(kind, "llama.cpp on CUDA")]
        misses = {c.id for c in cuda if c.id in KNOWN_MISSES}
        assert misses and R.has_own_llamacpp_band(len({setup_of(c) for c in cuda})), kind
        engine_wide = rows[(kind, R.LLAMACPP)]
        assert not misses & {c.id for c in engine_wide}, kind
        assert (R.BANDS[(kind, R.LLAMACPP)].low, R.BANDS[(kind, R.LLAMACPP)].high) == band_of(
            [c for c in cuda + rows[(kind, "llama.cpp on Metal")] if c.id not in KNOWN_MISSES]), kind
    # the CUDA prefill band keeps the A10G rows, one of which sets its high end (PX36, 2.875 x)
    high = R.BANDS[(PREFILL, "llama.cpp on CUDA")].high
    assert any(c.id in KNOWN_MISSES and math.ceil(c.measured / c.predicted * 1e4) / 1e4 == high
               for c in rows[(PREFILL, "llama.cpp on CUDA")] if c.predicted)
    # the band CPU and ROCm estimates take is set by no known miss: none of its rows is one, and it is narrower than
    # the one that imported them
    for backend in ("cpu", "rocm", None):
        b, why = R.llamacpp_band(PREFILL, backend)
        assert b is R.BANDS[(PREFILL, R.LLAMACPP)] and "known misses" in why, backend
    assert R.BANDS[(PREFILL, R.LLAMACPP)].high < 2.0
    # a backend with one setup has no band of its own: its known misses stay in the engine-wide band it inherits
    a10g = {setup_of(c) for c in rows[(PREFILL, "llama.cpp on CUDA")] if c.id == "PX01"}
    cut = band_rows([c for c in cases if not (c.id in {r.id for r in rows[(PREFILL, "llama.cpp on CUDA")]}
                                                 and setup_of(c) not in a10g)])
    assert not R.has_own_llamacpp_band(len({setup_of(c) for c in cut[(PREFILL, "llama.cpp on CUDA")]}))
    kept = {c.id for c in cut[(PREFILL, R.LLAMACPP)]} & set(KNOWN_MISSES)
    assert {"PX01", "PX09", "PX36"} <= kept


def test_an_estimate_takes_its_backends_llamacpp_band_or_the_engine_wide_one_named(cases) -> None:
    """A llama.cpp estimate's prefill and decode ranges are its rate x its backend's band (CUDA on an RTX 4090, Metal
    on an M2 Ultra), named in its assumptions; a CPU (no CPU row) and an AMD GPU (ROCm, no row) take the engine-wide
    band, the assumption saying so and why; a batched decode (not keyed by backend) the engine-wide batched band."""
    from llmsizer import fit
    from llmsizer.validation_cases import BATCHED, PREFILL

    for device, memory, band in (("rtx-4090", None, "llama.cpp on CUDA"),
                                 ("apple-m2-ultra-192gb", None, "llama.cpp on Metal"),
                                 ("amd-epyc-9654", "64GiB", R.LLAMACPP), ("mi300x", None, R.LLAMACPP)):
        sp = fit("llama-3.1-8b", device, engine="llamacpp", memory=memory).speed
        assert sp is not None
        named = {a.name: a for a in sp.assumptions}
        for name, kind, rate, got in (("prefill_range_band", PREFILL, sp.prefill_tokens_per_second, sp.prefill_range),
                                      ("decode_range_band", DECODE, sp.decode_tokens_per_second, sp.decode_range)):
            b = R.BANDS[(kind, band)]
            assert got == pytest.approx((rate * b.low, rate * b.high)), (device, kind)
            assert named[name].value == band, (device, name)
            assert named[name].why.startswith("engine-wide") == (band == R.LLAMACPP), named[name].why
            if band == R.LLAMACPP:
                assert "has no band of its own" in named[name].why and "CUDA, Metal" in named[name].why
    sp = fit("llama-3.1-8b", "rtx-4090", engine="llamacpp", concurrency=4).speed
    assert sp is not None and sp.decode_band is R.band_for(BATCHED, R.LLAMACPP)
    assert {a.name: a.value for a in sp.assumptions}["decode_range_band"] == R.LLAMACPP


def test_a_backend_band_of_one_setup_falls_back_to_the_engine_wide_band(monkeypatch) -> None:
    """A backend whose rows measured one setup (one device) speaks for no other device: the engine-wide band, named,
    with why (the serving scopes' rule, MIN_BAND_DEVICES); no engine-wide band: none."""
    from llmsizer.validation_cases import PREFILL

    one = R.Band(PREFILL, "llama.cpp on CPU", 0.5, 1.5, 12, setups=1, inside=1.0)
    monkeypatch.setitem(R.BANDS, (PREFILL, "llama.cpp on CPU"), one)
    b, why = R.llamacpp_band(PREFILL, "cpu")
    assert b is R.band_for(PREFILL, R.LLAMACPP) and why.startswith("engine-wide") and "measured 1 setup" in why
    assert R.llamacpp_band(PREFILL, "metal")[0] is R.band_for(PREFILL, "llama.cpp on Metal")
    assert R.llamacpp_band(PREFILL, None)[0] is R.band_for(PREFILL, R.LLAMACPP)
    monkeypatch.delitem(R.BANDS, (PREFILL, R.LLAMACPP))
    b, why = R.llamacpp_band(PREFILL, "cpu")
    assert b is None and why.startswith("no prefill throughput band")


# -- known misses --------------------------------------------------------------------------------------------------

def test_known_misses_stay_in_the_summary_and_the_band(cases) -> None:
    """Rows whose miss has no established mechanism are named, not dropped: each is summarised and feeds its band
    (ranges.py: they may set an end), and docs/accuracy.md lists them with the band without them."""
    from pathlib import Path

    fed = {c.id for rs in band_rows(cases).values() for c in rs}
    by_id = {c.id: c for c in cases}
    for rid in KNOWN_MISSES:
        assert rid in by_id and not by_id[rid].excluded and rid in fed, rid
        assert "known miss" in by_id[rid].note
    listed = known_misses(cases)
    assert {m.id for m in listed} == set(KNOWN_MISSES)
    h200 = [m for m in listed if m.id.startswith("gpu-h200")]
    assert len(h200) == 3 and all(m.ratio < 0.63 and m.weight == pytest.approx(1 / 12) for m in h200)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "accuracy.md").read_text(encoding="utf-8")
    assert "### Known misses in the bands" in doc and all(f"| {rid} |" in doc for rid in KNOWN_MISSES)


def test_an_uncalibrated_architecture_feeds_no_training_band_and_gets_no_range(cases) -> None:
    """A GPU architecture without a training calibration row (efficiency.TRAINING_UTILIZATION_BY_ARCH) gets no
    calibrated duration range: a duration on such a part (8 x V100, Volta; 8 x MI250X, CDNA 2) has no range and
    no coverage, states why in an assumption, and its warning says what its compared published runs measured
    or that none is compared instead of calling the stand-in conservative. Blackwell, calibrated on PM1368 against
    its H100 twin PM1366, keeps its range like Hopper. Since CDNA3 is calibrated on PM1341 and its float8 share on PM1343
    (calibration rows, excluded), the MI300X float8 rows PM1345/PM1347 are held out and feed the training-throughput
    band like any other
    calibrated architecture's rows, and an MI300X duration carries the range. A Hopper duration keeps its range."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate import efficiency as E
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.validation_cases import CALIBRATION, PYTORCH_TRAINING, TRAINING_SPEED

    by_id = {c.id: c for c in cases}
    band_ids = {c.id for c in band_rows(cases)[(TRAINING_SPEED, PYTORCH_TRAINING)]}
    for rid in ("PM1341", "PM1343"):
        assert by_id[rid].excluded == CALIBRATION and rid not in band_ids
    for rid in ("PM1345", "PM1347"):
        c = by_id[rid]
        assert c.kind == TRAINING_SPEED and not c.excluded and not c.no_band
        assert rid in band_ids
    devs = builtin_catalog().devices
    assert devs["mi300x"].architecture in E.TRAINING_UTILIZATION_BY_ARCH
    spec = find("llama-3.1-8b").spec()
    fields = dict(method="full", micro_batch=1, seq_len=8192, fsdp="full")
    h = training_duration_for(spec, devs["h100-sxm"], 8, 1e9, dict(fields))
    mi = training_duration_for(spec, devs["mi300x"], 8, 1e9, dict(fields))
    b = training_duration_for(spec, devs["b200"], 8, 1e9, dict(fields))  # Blackwell: calibrated on PM1368 (bwcal)
    for d in (h, mi, b):
        assert d.seconds_range is not None and not d.no_band
        assert not any(a.name == "training_range_band" for a in d.assumptions)
        assert not any("calibration row" in w for w in d.warnings)
    for dev in ("v100-sxm2-32gb", "mi250x"):
        d = training_duration_for(spec, devs[dev], 8, 1e9, dict(fields))
        assert d.seconds is not None and d.seconds_range is None and d.seconds_range_coverage is None, dev
        assert d.to_dict()["calibrated_seconds_range"] is None
        assert any(a.name == "training_range_band" and R.UNCALIBRATED_ARCH_TRAINING_NO_BAND in a.why
                   for a in d.assumptions)
        (warn,) = [w for w in d.warnings if "no training calibration row" in w]
        # what the architecture's published rows measured, where any is compared (ranges.UNCALIBRATED_TRAINING_MEASURED)
        said = (R.uncalibrated_training_note(devs[dev].architecture) if devs[dev].architecture in
                R.UNCALIBRATED_TRAINING_MEASURED else "no published run on it is compared")
        assert "conservative" not in warn and said in warn, warn


def test_the_uncalibrated_architectures_measured_ratios_follow_from_their_rows(cases) -> None:
    """ranges.UNCALIBRATED_TRAINING_MEASURED, which the duration's warning quotes: per architecture, the lowest and
    highest measured / expected of its summarised rows, to 2 decimals, re-derived from the rows."""
    by_id = {c.id: c for c in cases}
    for arch, (lo, hi, ids) in R.UNCALIBRATED_TRAINING_MEASURED.items():
        rows = [by_id[i] for i in ids]
        assert all(c.no_band == R.UNCALIBRATED_ARCH_TRAINING_NO_BAND and not c.excluded for c in rows), arch
        ratios = [c.measured / c.predicted for c in rows if c.predicted]
        assert len(ratios) == len(ids)
        assert (round(min(ratios), 2), round(max(ratios), 2)) == (lo, hi), (arch, ratios)
    # every summarised no-band training row of an uncalibrated architecture is quoted
    quoted = {i for _, _, ids in R.UNCALIBRATED_TRAINING_MEASURED.values() for i in ids}
    assert {c.id for c in cases if c.no_band == R.UNCALIBRATED_ARCH_TRAINING_NO_BAND and not c.excluded} == quoted


def test_the_tensor_parallel_training_measured_ratios_follow_from_their_rows(cases) -> None:
    """ranges.TENSOR_PARALLEL_TRAINING_MEASURED, which the duration's warning on PyTorch tensor-parallel training
    quotes: per recipe, the lowest and highest measured / expected of torchtitan's AsyncTP rows, to 2 decimals,
    re-derived from the rows (held out: none is a calibration row)."""
    from llmsizer.validation_cases import TORCHTITAN_RUNS

    by_id = {c.id: c for c in cases}
    for recipe, (lo, hi, ids) in R.TENSOR_PARALLEL_TRAINING_MEASURED.items():
        rows = [by_id[i] for i in ids]
        assert all(not c.excluded and TORCHTITAN_RUNS[c.id][2]["tp"] > 1 for c in rows), recipe
        assert all((TORCHTITAN_RUNS[c.id][2].get("float8_recipe") or "bf16") == recipe for c in rows), recipe
        ratios = [c.measured / c.predicted for c in rows if c.predicted]
        assert len(ratios) == len(ids)
        assert (round(min(ratios), 2), round(max(ratios), 2)) == (lo, hi), (recipe, ratios)


def test_the_tensor_parallel_training_warning_says_which_recipes_have_a_published_row() -> None:
    """The duration's warning on PyTorch tensor-parallel training: bf16 and torchao rowwise quote their own torchtitan
    rows (ranges.TENSOR_PARALLEL_TRAINING_MEASURED); rowwise with high-precision weight gradients, which no published
    TP run used, says it has no row and quotes the rowwise rows as the nearest; tensorwise float8 gets no warning."""
    from llmsizer.catalog.models import find
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.validation_cases import TORCHTITAN_RUNS, row_device

    model, device, fields, _ = TORCHTITAN_RUNS["PM1320"]
    dev = row_device(device)

    def tp_warnings(**extra: object) -> list[str]:
        f = dict(fields, **extra)
        d = training_duration_for(find(model).spec(), dev, int(f["gpus"]), 1e6, f)
        return [x for x in d.warnings if x.startswith("PyTorch tensor-parallel training")]

    lo, hi, ids = R.TENSOR_PARALLEL_TRAINING_MEASURED["torchao-rowwise"]
    (rowwise,) = tp_warnings()
    assert "no published" not in rowwise and ", ".join(ids) in rowwise and f"{lo:.2f}-{hi:.2f}" in rowwise
    (gw_hp,) = tp_warnings(float8_recipe="torchao-rowwise-gw-hp")
    assert "torchao-rowwise-gw-hp: no published tensor-parallel row" in gw_hp
    assert ", ".join(ids) in gw_hp and f"{lo:.2f}-{hi:.2f}" in gw_hp
    assert tp_warnings(float8_recipe="torchao") == []
    (bf16,) = tp_warnings(float8=False, float8_recipe="torchao")
    assert ", ".join(R.TENSOR_PARALLEL_TRAINING_MEASURED["bf16"][2]) in bf16


def test_a_band_holds_90_percent_of_rows_as_well_as_of_setups() -> None:
    """The stated band is the wider of the setup-weighted band and the row-wise one (ranges.band_around_expected): 40
    setups of one row each about 1, and one setup of 16 rows that all read 2x (as the A10G llama-bench prefill rows),
    weighs as one setup of 41 in the first, which then ends at 1.19 and leaves those 16 of the 56 rows outside; the
    row-wise rule brings them in (to 2.14), so at least 90 % of the rows lie inside, and the band is never narrower
    than the weighted one."""
    ratios = [0.8 + 0.01 * i for i in range(40)] + [2.0 + 0.01 * i for i in range(16)]
    setups = [f"s{i}" for i in range(40)] + ["a10g"] * 16
    weighted = R.band(ratios, setups=setups)
    lo, hi = R.band_around_expected(ratios, setups)
    assert sum(weighted[0] <= r <= weighted[1] for r in ratios) < 0.9 * len(ratios)  # the weighted band alone fails
    assert lo <= min(weighted[0], 1.0) and hi >= max(weighted[1], 1.0)
    assert sum(lo <= r <= hi for r in ratios) >= 0.9 * len(ratios)

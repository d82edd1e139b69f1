"""probe16 D-H (probe15 D2's left item): `recommend` offers several consumer cards where one does not hold the model,
as `fit --count N` and `models --fits-on --count N` lay them out. Llama-3.3-70B at 8k x 1: one RTX 4090 holds no
format (fit says so at the smallest rung), two hold a format (recpp: vLLM's AWQ at TP 1 x PP 2, fit's hint with its
`--tp --pp`, where TP 2's all-reduce buffers leave no KV for a sequence; llama.cpp Q4_K_M before pipeline layouts were
searched); recommend's option for the card is then fit's
answer on 2 x rtx-4090 (its engine, format, layout, memory and speed: fit asked here, not numbers copied from an
output), priced as two cards (NVIDIA's 450 W board power of an RTX 4090 x 2 at the given $/kWh)."""

from __future__ import annotations

import pytest

from llmsizer import fit
from llmsizer.recommend import Constraints, best_option_on, recommend_inference

MODEL = "llama-3.3-70b-instruct"
KW = dict(context=8192, concurrency=1)
RTX_4090_WATTS = 450.0  # NVIDIA GeForce RTX 4090 specifications: total graphics power 450 W
KWH = 0.30


@pytest.fixture(scope="module")
def rec():
    return recommend_inference(MODEL, constraints=Constraints(kwh_price=KWH), **KW)


def _rows(rec, target):
    return [o for o in (*rec.options, *rec.rejected) if o.target == target]


def test_one_card_holds_no_format_so_two_are_asked(rec):
    one = fit(MODEL, "rtx-4090", 1, **KW)
    assert not one.fits and one.fits_at is None  # fit: no format on any engine's ladder fits one card
    (single,) = [o for o in _rows(rec, "rtx-4090") if o.count == 1]
    assert single.status == "rejected"
    (two,) = [o for o in _rows(rec, "rtx-4090") if o.count == 2]
    assert two.status == "meets", two.reasons


def test_the_two_card_option_is_fits_answer_at_that_layout(rec):
    (opt,) = [o for o in _rows(rec, "rtx-4090") if o.count == 2]
    hint = fit(MODEL, "rtx-4090", 2, **KW).fits_at  # fit's own search on 2 cards (vLLM's ladder, then llama.cpp's)
    assert hint is not None and (opt.engine, opt.weights_format) == (hint["engine"], hint["weights"])
    # the hint's layout where it names pipeline stages (`fit --pp P`, fit choosing each stage's degree)
    stages = {"pipeline_parallel": hint["pipeline_parallel"]} if "pipeline_parallel" in hint else {}
    r = fit(MODEL, "rtx-4090", 2, engine=hint["engine"], weights=hint["weights"], **stages, **KW)
    assert r.fits and r.speed is not None
    assert (opt.count, opt.tensor_parallel, opt.pipeline_parallel, opt.replicas) == (
        r.count, r.tensor_parallel, r.pipeline_parallel, r.replicas)
    assert opt.memory_per_device == r.memory_per_device and opt.budget_per_device == r.budget_per_device
    assert opt.tokens_per_second_per_user == r.speed.tokens_per_second_per_user
    assert opt.ttft_seconds == r.speed.ttft_seconds
    # models --fits-on 2 x rtx-4090 (best_option_on) answers the same
    on = best_option_on(MODEL, "rtx-4090", 2, constraints=Constraints(kwh_price=KWH), **KW)
    assert (on.status, on.weights_format, on.memory_per_device, on.tokens_per_second_per_user) == (
        opt.status, opt.weights_format, opt.memory_per_device, opt.tokens_per_second_per_user)
    # priced as two cards at full board power, and ranked among the others by that price (the same rule)
    assert opt.price_per_hour == pytest.approx(2 * RTX_4090_WATTS / 1000 * KWH)
    prices = [o.price_per_hour for o in rec.options if o.price_per_hour is not None]
    assert prices == sorted(prices)


def test_the_fewest_cards_that_hold_a_format():
    """An RTX 5090 (32 GB) holds Q2_K alone: recommend keeps the one card, no second one (a card more costs more);
    an 8 GB card needs more than two: the fewest that hold a format, each count asked as fit asks it."""
    rec = recommend_inference(MODEL, **KW)
    assert [o.count for o in _rows(rec, "rtx-5090")] == [1]
    counts = sorted(o.count for o in _rows(rec, "rtx-5060") if o.status == "meets")
    assert len(counts) == 1
    n = counts[0]
    assert fit(MODEL, "rtx-5060", n, **KW).fits_at is not None
    assert fit(MODEL, "rtx-5060", n - 1, **KW).fits_at is None  # one card fewer holds no format


def test_a_laptop_and_an_instance_keep_their_own_count():
    rec = recommend_inference(MODEL, constraints=Constraints(laptop=True), **KW)
    assert all(o.count == 1 for o in (*rec.options, *rec.rejected) if o.device_kind == "gpu")


def test_on_a_tensor_parallel_engine_each_card_gets_the_fewest_count_fit_fits():
    """review19 D1: on vLLM a model is laid out at a tensor-parallel degree dividing its 64 heads and 8 KV heads
    (Llama-3.3-70B config.json), so 5-7 cards hold no layout while 4 and 8 may: whether a format fits is not monotone
    in the count. For every card recommend grows, its count is the fewest k in 2..8 at which fit on k cards (same
    engine) finds a format, every smaller k finding none; and a card fit fits at some k in 2..8 is offered."""
    rec = recommend_inference(MODEL, engine="vllm", constraints=Constraints(kwh_price=KWH), **KW)
    grown = {o.target: o.count for o in (*rec.options, *rec.rejected) if o.count > 1}
    for card in ("rtx-4090", "rtx-5080", "rtx-5060-ti-16gb"):
        answers = {k: fit(MODEL, card, k, engine="vllm", **KW) for k in range(2, 9)}
        # fit's default format fits, or its hint names one on vLLM (review20 D10: fits_at is None in both cases)
        fits_at = [k for k, r in answers.items()
                   if r.fits or (r.fits_at is not None and r.fits_at["engine"] == "vllm")]
        assert fits_at and fits_at[0] in (2, 4, 8)  # a TP degree dividing 64 and 8
        assert grown.get(card) == fits_at[0], (card, grown.get(card), fits_at)

"""The seed's FAQ in the plan: is training needed, how a LoRA is deployed, hourly vs reserved pricing."""

from __future__ import annotations

import pytest

from llmsizer.plan import make_plan
from llmsizer.request import parse_request

from .test_checks import CLEAN_INFER, CLEAN_TRAIN, edit, request


def plan_of(*jobs, **top):
    return make_plan(parse_request(request(*jobs, top=top or None)), alternatives=False)


def test_is_training_needed_compares_serving_with_training_memory():
    j = plan_of(edit(CLEAN_TRAIN, purpose="knowledge", baseline_tried=True)).jobs[0]
    note = next(n for n in j.notes if n.startswith("Is training needed?"))
    assert "prompt design and retrieval" in note and "retrieval over the documents" in note
    mem = j.section("memory")
    assert mem.value("inference_need") < mem.value("need")  # serving the base model needs less than training it


def test_is_training_needed_says_so_when_serving_needs_more_than_a_qlora_run():
    """probe20 D5: a QLoRA run holds its base in 4 bits, so serving the base in bf16 can need more memory than training
    it; the note then says that, not "serving needs X against Y to train it" as if training cost more. Truth: the
    weights alone, Qwen2.5-7B's 7.62e9 parameters (its model card) x 2 B = 15.2 GB in bf16 against NF4's 0.5 B plus
    the block scales (bitsandbytes, Dettmers et al. 2023 QLoRA sec. 2: 64-element blocks) = about 4 GB."""
    j = plan_of(edit(CLEAN_TRAIN, model={"name": "qwen2.5-7b", "size": "7B"}, method="qlora",
                     settings={"micro_batch": 1, "seq_len": 512, "epochs": 1})).jobs[0]
    mem = j.section("memory")
    assert mem.value("inference_need") > 7.62e9 * 2 > mem.value("need")
    note = next(n for n in j.notes if n.startswith("Is training needed?"))
    assert "to train it" not in note
    assert "Serving the base model in bf16 needs about" in note and "its base is held in 4 bits" in note


def test_no_training_question_for_pretraining():
    j = plan_of(edit(CLEAN_TRAIN, method="full", purpose="pretraining")).jobs[0]
    assert not any(n.startswith("Is training needed?") for n in j.notes)


@pytest.mark.parametrize("mode", ["merged", "dynamic"])
def test_lora_deployment_note_gives_the_memory_of_each_way(mode):
    p = plan_of(CLEAN_TRAIN, edit(CLEAN_INFER, model={"from_job": "ft"}, adapters={"mode": mode, "count": 2}))
    chat = p.job("chat")
    note = next(n for n in chat.notes if n.startswith("Deploying the adapter from training job 'ft'"))
    assert f"Chosen: {mode}." in note and "With 2 adapter(s)" in note
    if mode == "dynamic":
        assert chat.value("memory", "adapter_slots") > 0
    else:
        assert chat.section("memory").get("adapter_slots") is None
        assert chat.value("storage", "merged_copies") == chat.value("storage", "model_files")  # one more copy


def test_owned_hardware_has_no_provider_pricing():
    j = plan_of(CLEAN_INFER).jobs[0]  # resources.price_per_hour on a bare device: the team's own cost
    assert any("provider pricing does not apply" in n for n in j.notes)


def test_round_the_clock_service_any_discount_pays_off():
    j = plan_of(edit(CLEAN_INFER, resources={"instance": "aws-g6.xlarge", "pool": "serve"})).jobs[0]
    assert j.value("cost", "busy_share") == 1.0
    assert j.value("cost", "break_even_discount") == 0.0
    assert any("any reservation discount pays off" in n for n in j.notes)


def test_office_hours_service_needs_a_big_discount():
    j = plan_of(edit(CLEAN_INFER, service={"duration": "1 year", "hours_per_day": 10, "days_per_week": 5,
                                           "maintenance_windows": ["Sat"]},
                     resources={"instance": "aws-g6.xlarge", "pool": "serve"})).jobs[0]
    busy = 50 / 168  # 10 h x 5 days of 168 h
    assert j.value("cost", "busy_share") == pytest.approx(busy)
    assert j.value("cost", "break_even_discount") == pytest.approx(1 - busy)
    assert any(f"unless its discount exceeds {1 - busy:.0%}" in n for n in j.notes)


def test_a_quoted_reservation_discount_is_priced():
    j = plan_of(edit(CLEAN_INFER, pricing={"model": "reserved", "reserved_discount": "40%"})).jobs[0]
    assert j.value("cost", "monthly_reserved") == pytest.approx(1.0 * 0.6 * 730)  # $1/h x (1 - 40%) x 730 h
    t = plan_of(edit(CLEAN_TRAIN, pricing={"model": "reserved", "reserved_discount": "30%",
                                           "reserved_term": "1 week"})).jobs[0]
    assert t.value("cost", "reserved_total") == pytest.approx(4.0 * 0.7 * 168)  # a week reserved at $4/h
    assert t.value("cost", "busy_share") == pytest.approx(t.value("duration", "seconds") / (168 * 3600))

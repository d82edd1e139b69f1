"""estimate/training/compose.py ``training_workload`` memoizes ``TrainingWorkload(**fields)`` (a catalog search times
one run per device with the same fields). It must answer what the constructor answers for every input: the same
fields give the constructor's workload (``given`` too), and any change of a field's name, value or value type
(1 and True hash alike) gives a workload of its own; refused fields are refused every time."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.training.compose import training_workload
from llmsizer.specs import TrainingWorkload

BASE = {"method": "lora", "rank": 16, "micro_batch": 2, "seq_len": 2048, "gpus": 1, "device": "gpu"}
CHANGES = [{"rank": 32}, {"micro_batch": 4}, {"targets": ("q", "v")}, {"targets": "q,v"}, {"packing": True},
           {"packing": 1}, {"device": "cpu"}, {"method": "qlora"}, {"gpus": 2}, {"gpus_per_node": 4, "gpus": 8}]


def _same(a: TrainingWorkload, b: TrainingWorkload) -> bool:
    return a == b and a.given == b.given and [type(v) for v in a.__dict__.values()] == [
        type(v) for v in b.__dict__.values()]


@pytest.mark.parametrize("change", CHANGES)
def test_memo_answers_as_the_constructor(change: dict[str, object]) -> None:
    clear_caches(estimates_only=True)
    first = training_workload(dict(BASE))
    assert _same(first, TrainingWorkload(**BASE)) and training_workload(dict(BASE)) is first
    other = training_workload({**BASE, **change})  # asked after the base is memoized: not the base's answer
    assert _same(other, TrainingWorkload(**{**BASE, **change}))
    assert not _same(other, first)


def test_memo_keeps_the_field_names_given() -> None:
    clear_caches(estimates_only=True)
    a = training_workload({"method": "full", "gpus": 1})
    b = training_workload({"method": "full"})  # equal values, gpus not given: the assumption says "(default)"
    assert a.gpus == b.gpus and a.given != b.given and b.given == TrainingWorkload(method="full").given


def test_refused_fields_stay_refused_and_unhashable_values_are_built() -> None:
    clear_caches(estimates_only=True)
    for _ in range(2):
        with pytest.raises(InputError):
            training_workload({**BASE, "rank": 0})
    listed = {**BASE, "targets": ["q", "v"]}  # a list: not hashable, built each time
    assert _same(training_workload(listed), TrainingWorkload(**listed))


def test_values_equal_but_of_another_type_are_another_key() -> None:
    clear_caches(estimates_only=True)
    a = training_workload({**BASE, "packing": True})
    b = training_workload({**BASE, "packing": 1})  # 1 == True and hash(1) == hash(True)
    assert a.packing is True and type(b.packing) is int

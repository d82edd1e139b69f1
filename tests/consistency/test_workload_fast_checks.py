"""The workload checks that read many fields at once (specs/workload.py ``check_numbers`` and the engine-settings
check of InferenceWorkload, specs/given.py's record of the fields given): each field still refused or recorded on
its own, as a field-by-field loop does."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.specs import InferenceWorkload, TrainingWorkload
from llmsizer.specs.workload import ENGINE_SETTINGS, ENGINES, INFERENCE_NUMBERS, LLAMACPP_SPLIT_FIELDS

# a value of each engine setting that passes its own range check
SETTING_VALUES: dict[str, Any] = {
    "n_gpu_layers": 10, "n_ubatch": 256, "kv_unified": True, "mem_fraction_static": 0.8,
    "gpu_memory_utilization": 0.8, "paged_block_size": 16, "max_num_seqs": 8, "max_num_batched_tokens": 4096,
    "engine_version": "0.10.1", "split_mode": "row", "tensor_split": (1.0, 1.0), "n_cpu_moe": 2,
    "fit_target": 2**30, "allow_long_context": True, "max_mamba_cache_size": 150, "mamba_full_memory_ratio": 2.0,
    "mamba_radix_cache_strategy": "no_buffer", "disable_overlap_schedule": True, "disable_radix_cache": True,
    "async_scheduling": True,
    "attention": "eager", "image_min_tokens": 1024, "image_max_tokens": 1024,
}


@pytest.mark.parametrize("name", sorted(n for n in ENGINE_SETTINGS if n not in LLAMACPP_SPLIT_FIELDS))
def test_each_engine_setting_refused_on_another_engine(name: str) -> None:
    owners = ENGINE_SETTINGS[name]
    for engine in ENGINES:
        kw = {name: SETTING_VALUES[name], "engine": engine}
        if engine in owners:
            assert getattr(InferenceWorkload(**kw), name) == SETTING_VALUES[name]
        else:
            with pytest.raises(InputError, match=f"^{name} applies to engine {' or '.join(owners)}, not {engine}$"):
                InferenceWorkload(**kw)
    assert getattr(InferenceWorkload(**{name: SETTING_VALUES[name]}), name) == SETTING_VALUES[name]  # no engine yet


@pytest.mark.parametrize(("name", "rng"), INFERENCE_NUMBERS)
def test_each_number_checked_alone(name: str, rng: Any) -> None:
    """Unreadable text in any one numeric field names that field (text is read as the CLI reads it:
    test_python_reads_cli_spellings.py); the fields before it, given valid values, pass."""
    with pytest.raises(InputError, match=f"^{name}: "):
        InferenceWorkload(**{name: "x"})
    with pytest.raises(InputError, match="^context: "):  # the first bad field in field order is named
        InferenceWorkload(context="lots", **{name: "x"}) if name != "context" else InferenceWorkload(context="lots")


def test_numbers_converted_as_their_range_says() -> None:
    w = InferenceWorkload(headroom=0, memory=2**30, context=4096.0)
    assert type(w.headroom) is float and w.headroom == 0.0  # a fraction: float
    assert type(w.context) is int and w.context == 4096  # a whole number of tokens: int
    t = TrainingWorkload(memory=80 * 2**30, headroom=0)
    assert type(t.headroom) is float and type(t.memory) is int


def test_given_names_every_field_passed_with_a_value() -> None:
    assert InferenceWorkload(4096, 2, None, "bf16", kv_dtype=None, engine="vllm").given == frozenset(
        {"context", "concurrency", "weights", "engine"})
    assert InferenceWorkload().given == frozenset()
    assert TrainingWorkload(method="lora", rank=8, optimizer=None).given == frozenset({"method", "rank"})

"""Several CPUs or Apple chips serve as that many replicas, one whole model each (estimate/device.py
``one_replica_per_device``: llama.cpp's -ngl/-ts split and vLLM's tensor parallelism are GPU features). ``fit`` and
``recommend`` lay a candidate out by the one rule (estimate/fit.py ``serving_layout``).

Before, recommend kept its own copy of the rule for llama.cpp only: on 2 x an Apple chip or 2 x CPU with
transformers it took tensor parallelism 2 and halved the weights in its weights-alone check (a 70B AWQ model "18.52
GiB per device" where each replica holds all 37 GiB), and reported TP 2 where fit answers TP 1. And ``fit(...,
tensor_parallel=1)`` on such a layout was refused although 1 is the degree it answers."""

from __future__ import annotations

import re

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit
from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on

GiB = 2**30
LOAD = dict(context=4096, concurrency=2, output_tokens=256)

# device, memory per device (None: the catalog's), engine, model
CASES = [
    ("cpu", 64 * GiB, "transformers", "llama-3.1-8b"),  # fits at bf16
    ("cpu", 8 * GiB, "llamacpp", "llama-3.1-8b"),  # fits at a smaller GGUF rung
    ("apple-m1-16gb", None, "transformers", "llama-3.1-8b"),  # fits at AWQ
    # no rung fits: since the Metal working set is 2/3 of 8 GiB (5.33 GiB, efficiency.apple_gpu_working_set; 0.75
    # before), the weights alone at awq-int4 exceed the budget and the search says so without a memory figure
    ("apple-m1-8gb", None, "transformers", "llama-3.1-8b"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[2]}-{c[3]}-2x{c[0]}")
def test_recommend_and_fit_give_one_answer_on_two_devices(case: tuple[str, int | None, str, str]) -> None:
    device, memory, engine, model = case
    o = best_option_on(model, device, 2, memory=memory, engine=engine, **LOAD)
    f = fit(model, device, 2, memory=memory, engine=engine, weights=o.weights_format or "awq-int4", speed=False,
            **LOAD)
    # the independent layout: two machines, each holding the whole model (no split, no tensor parallelism)
    assert (f.tensor_parallel, f.replicas, f.layer_split) == (1, 2, False)
    assert "split" not in f.estimate.details
    assert o.tensor_parallel == f.tensor_parallel, o.reasons
    if o.memory_per_device is None:  # rejected on the weights alone, which exceed fit's budget too
        assert o.status == "rejected" and "weights alone" in o.reasons[0] and not f.fits
    else:
        assert o.memory_per_device == f.memory_per_device, o.reasons
    assert (o.status != "rejected") == f.fits, o.reasons


@pytest.mark.parametrize("device, memory", [("cpu", 8 * GiB), ("apple-m1-8gb", None)])
def test_the_weights_alone_are_whole_on_each_replica(device: str, memory: int | None) -> None:
    """A 70B model is rejected on its weights alone; the figure given is one whole model's, at least 4 bits for each
    of its parameters (AWQ int4 is the smallest rung on transformers), not half of it."""
    model = "llama-3.1-70b-instruct"
    o = best_option_on(model, device, 2, memory=memory, engine="transformers", **LOAD)
    assert o.status == "rejected" and o.tensor_parallel == 1, o.reasons
    m = re.search(r"weights alone at the smallest format tried \(awq-int4\) need ([\d.]+) GiB per device", o.reasons[0])
    assert m is not None, o.reasons
    assert float(m.group(1)) * GiB >= count_params(load_model(model)).total * 4 / 8


@pytest.mark.parametrize("device, memory, engine", [("cpu", 8 * GiB, "llamacpp"), ("apple-m1-16gb", None, "transformers"),
                                                     ("rtx-4090", None, "llamacpp")])
def test_tensor_parallel_one_is_the_answer_not_a_refusal(device: str, memory: int | None, engine: str) -> None:
    """TP 1 is the degree these layouts answer (replicas apart; a llama.cpp split over GPUs): given, it is taken and
    the answer is the one without it; any other degree is refused, naming it."""
    args = dict(memory=memory, engine=engine, weights="gguf:q4_k_m" if engine == "llamacpp" else "awq-int4",
                speed=False, **LOAD)
    free = fit("llama-3.1-8b", device, 2, **args)
    pinned = fit("llama-3.1-8b", device, 2, tensor_parallel=1, **args)
    assert free.tensor_parallel == pinned.tensor_parallel == 1
    assert (pinned.replicas, pinned.memory_per_device, pinned.fits) == (free.replicas, free.memory_per_device, free.fits)
    with pytest.raises(InputError, match="tensor_parallel 2"):
        fit("llama-3.1-8b", device, 2, tensor_parallel=2, **args)

"""Eq. (6) of formulas/nf4_quantization.py: transformers 5.0-5.3's threaded loader can hold the whole checkpoint
in its load dtype on the device while it quantizes a QLoRA base on the fly.

Independent truth: the bound is the real model's tensors in bf16, so transformers builds the catalog entry's model
class on the meta device (``oracle_utils.build``) and 2 B x every parameter it holds is compared with the number
the estimate's warning names. The loader side is transformers' own code: the release installed here loads
synchronously whenever a quantizer runs on the fly (pull 44576), the condition the warning tells users to reach.
"""

from __future__ import annotations

import inspect

import pytest

from llmsizer import estimate_training
from llmsizer.catalog.models import entries
from llmsizer.formulas.nf4_quantization import async_load_bound_bytes
from llmsizer.units import format_bytes
from oracle_utils import build

MODELS = ("qwen3.5-27b", "llama-3.1-8b")


@pytest.mark.parametrize("name", MODELS)
def test_warning_names_the_real_bf16_checkpoint(name):
    model = build(entries()[name].config)
    real_bf16 = 2 * sum(p.numel() for p in model.parameters())
    del model
    est = estimate_training(name, method="qlora", metric="reserved")
    named = [w for w in est.warnings if "4-thread loader" in w]
    assert len(named) == 1
    assert f"up to {format_bytes(real_bf16)}," in named[0]
    # a bound on a load-time race: named, never added to the step's peak
    assert not any("async" in it.name or "load" in it.name for it in est.items)


def test_only_transformers_quantizer_is_bounded():
    assert async_load_bound_bytes(10**9, "bitsandbytes") == 10**9
    for q in ("torchao", "torchao-0.1", "lightning-bnb-0.42", "bitsandbytes-0.42"):
        assert async_load_bound_bytes(10**9, q) == 0
    est = estimate_training("llama-3.1-8b", method="qlora", nf4_quantizer="torchao")
    assert not any("4-thread loader" in w for w in est.warnings)


def test_installed_transformers_loads_synchronously_when_quantizing_on_the_fly():
    transformers = pytest.importorskip("transformers")
    cml = pytest.importorskip("transformers.core_model_loading")
    src = inspect.getsource(cml)
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    if (major, minor) <= (5, 3):
        pytest.skip(f"transformers {transformers.__version__} predates pull 44576")
    assert "not hf_quantizer.pre_quantized" in src and "thread_pool = None" in src


@pytest.mark.parametrize("metric", [None, "allocated"])
def test_warning_only_where_a_pool_metric_can_show_it(metric):
    """The race leaves the checkpoint in the allocator's reserve, which only --metric reserved / nvidia-smi read;
    transformers after 5.3 (installed here, test above) has no race, and no workload field states the release, so
    allocated estimates carry no warning (docs/training.md states it once)."""
    est = estimate_training("llama-3.1-8b", method="qlora", **({"metric": metric} if metric else {}))
    assert not any("4-thread loader" in w for w in est.warnings)
    est = estimate_training("llama-3.1-8b", method="qlora", metric="nvidia-smi")
    assert sum("4-thread loader" in w for w in est.warnings) == 1

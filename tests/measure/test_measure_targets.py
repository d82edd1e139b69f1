"""A measurement's LoRA targets follow PEFT's rules, and the estimate it is compared with reads them the same way.

Truth: the adapters ``peft.get_peft_model`` creates inside ``measure.workloads.prepare_training`` (the code path a
measurement runs) on the real transformers model built on the meta device; 'all-linear' is PEFT's own shorthand
(peft tuners/tuners_utils.py ``_maybe_include_all_linear_layers``), not a list of seven names.
"""

from __future__ import annotations

import warnings

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.lora import lora_params
from llmsizer.measure.settings import MeasureSettings, normalize_targets
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs.training import normalize_targets as estimate_targets
from oracle_utils import TINY_CONFIGS, build

peft = pytest.importorskip("peft")


def test_all_linear_is_peft_shorthand_and_names_are_checked_as_the_estimate_does() -> None:
    assert normalize_targets("all-linear") == ("all-linear",)
    assert MeasureSettings("training", "x").targets == ("all-linear",)
    assert normalize_targets("q,v_proj,qkv_proj") == ("q_proj", "v_proj", "qkv_proj")
    with pytest.raises(InputError, match="unknown LoRA target 'q_prj'"):
        normalize_targets("q_prj")
    with pytest.raises(InputError, match="stands alone"):
        normalize_targets("all-linear,q")


@pytest.mark.parametrize(("config", "targets"), [("qwen2-moe-shared", "all-linear"), ("phi3-sliding", "all-linear"),
                                                 ("phi3-sliding", "qkv_proj,down"), ("llama-gqa", "q,v")])
def test_measured_adapters_equal_the_compared_estimate(config: str, targets: str) -> None:
    from llmsizer.measure.workloads import prepare_training

    cfg = TINY_CONFIGS[config]
    s = MeasureSettings.from_dict({"kind": "training", "model": config, "method": "lora", "rank": 8,
                                   "targets": targets})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = prepare_training(build(cfg), s)
    measured = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # measure/compare.py training_estimate hands the estimate tuple(settings targets)
    assert lora_params(spec_from_config(cfg, name=config), 8, estimate_targets(s.targets)).total == measured

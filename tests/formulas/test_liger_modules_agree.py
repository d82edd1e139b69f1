"""Memory and step time take the same Liger modules per model type (formulas/liger_kernels.py ``swiglu_applies``,
``LIGER_NO_SWIGLU`` / ``LIGER_FUSED_EXPERTS``, read from Liger-Kernel's monkey_patch.py @ead96b6): a dense Llama's MLP
is Liger's SwiGLU on both sides; Qwen3-30B-A3B's MLPs are all routed experts, which Liger runs through LigerExperts'
fused MoE (not counted: eager on both sides); gpt-oss's ``apply_liger_kernel_to_gpt_oss`` defaults ``swiglu=False``
(line 1792), so no MLP of it is Liger's on either side."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmsizer import estimate_training
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find_spec
from llmsizer.estimate.duration import elementwise_bytes_per_token, training_duration_for
from llmsizer.formulas import liger_kernels as lk
from llmsizer.specs import TrainingWorkload

CASES = {"llama-3.1-8b": True, "qwen3-30b-a3b": False, "gpt-oss-20b": False}


@pytest.mark.parametrize("name", CASES)
def test_memory_and_time_agree_on_liger_swiglu(name):
    est = estimate_training(name, method="lora", kernels="liger", seq_len=512)
    act = next(it for it in est.items if it.name == "activations")
    memory_swiglu = "(Liger SiLU/GELU-mul)" in act.formula
    w = TrainingWorkload(method="full", kernels="liger", seq_len=512)
    spec = find_spec(name)
    # the time side with Liger's SwiGLU, against the same step with it off (TiledMLP turns it off, ArcticTraining)
    time_swiglu = elementwise_bytes_per_token(spec, w) != elementwise_bytes_per_token(spec, replace(w, tiled_mlp=True))
    assert memory_swiglu == time_swiglu == CASES[name] == (lk.swiglu_applies(spec) and spec.moe is None)


def test_assumption_names_the_modules():
    dev = builtin_catalog().devices["h100-sxm"]
    f = {"method": "lora", "kernels": "liger", "seq_len": 512}
    why = next(a.why for a in training_duration_for(find_spec("qwen3-30b-a3b"), dev, 1, 1e6, f).assumptions
               if a.name == "liger_kernels_time")
    assert "LigerExperts" in why and "eager value kept" in why
    why = next(a.why for a in training_duration_for(find_spec("gpt-oss-20b"), dev, 1, 1e6, f).assumptions
               if a.name == "liger_kernels_time")
    assert "swiglu=False" in why

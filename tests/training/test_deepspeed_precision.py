"""DeepSpeed's own mixed precision under ZeRO (#12): the default bf16-mixed of a run with ``zero`` 1-3 is DeepSpeed's
``bf16`` section (bf16 parameters, fp32 master weights only in the optimizer partition, bf16 gradients, no
torch.autocast copies; formulas/training_states.py DEEPSPEED_PRECISION), checked against the ZeRO paper's model-state
equations (Rajbhandari et al. 2020, arXiv 1910.02054, section 3.1 / Figure 1: 2Psi + 2Psi + K Psi with K = 12;
P_os: 4Psi + 12Psi/N_d, P_os+g: 2Psi + 14Psi/N_d, P_os+g+p: 16Psi/N_d). The measured DeepSpeed step is in
test_deepspeed_zero3.py (test_default_precision_under_zero3_is_deepspeeds_bf16)."""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import find
from llmsizer.estimate.training import estimate_training

PSI = 8_030_261_248  # Llama 3.1 8B parameters (meta-llama/Llama-3.1-8B safetensors index: 8,030,261,248)
N_D = 8


def _states(zero: int, **kw: object) -> dict[str, int]:
    est = estimate_training(find("llama-3.1-8b").spec(), gpus=N_D, zero=zero, **kw)
    return {i.name: i.bytes for i in est.items}


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_model_states_follow_the_paper(zero: int) -> None:
    s = _states(zero)
    assert "autocast_weight_copies" not in s
    weights = 2 * PSI / N_D if zero == 3 else 2 * PSI  # P_p shards the bf16 parameters, P_os/P_os+g do not
    assert s["weights"] == pytest.approx(weights, rel=1e-6)
    # K = 12: the fp32 master and Adam's two fp32 moments, sharded at every stage (+ 4 B step scalars per tensor)
    assert s["master_weights"] + s["optimizer_states"] == pytest.approx(12 * PSI / N_D, rel=1e-6)
    if zero == 3:  # at the peak (loss backward) ZeRO-3's gradient partition is allocated: 2 B bf16 / N_d
        assert s["gradients"] == pytest.approx(2 * PSI / N_D, rel=1e-6)


def test_fp16_mixed_under_zero_is_deepspeeds_fp16_and_zero0_keeps_autocast() -> None:
    assert "autocast_weight_copies" not in _states(2, precision="fp16-mixed")
    # without ZeRO there is no DeepSpeed engine: HF Trainer / accelerate run torch.autocast over fp32 weights
    assert "autocast_weight_copies" in _states(0)


def test_lora_adapters_under_zero3_follow_the_same_equation() -> None:
    """DeepSpeed casts every parameter (engine.py _cast_module_mixed_precision), the LoRA adapters too: bf16 adapters
    and gradients with fp32 master and Adam states in the partition, 2 + 2 + 12 B per adapter parameter / N_d.
    Llama 3.1 8B, rank 16 on every linear: 32 x 16 x (2 x 8192 + 2 x 5120 + 3 x 18432) = 41,943,040 adapter
    parameters (PEFT's LoRA A r x in + B out x r per adapted Linear)."""
    n = 32 * 16 * (2 * 8192 + 2 * 5120 + 3 * 18432)
    assert n == 41_943_040
    s = _states(3, method="lora", rank=16)
    trained = s["adapter_weights"] + s["gradients"] + s["master_weights"] + s["optimizer_states"]
    assert "autocast_weight_copies" not in s
    assert trained == pytest.approx(16 * n / N_D, rel=1e-4)

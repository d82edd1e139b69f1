"""kernels='liger' and loss='liger-flce' (specs/training.py; formulas/liger_kernels.py) move exactly the bytes Liger's
kernels save or keep, per the terms read from linkedin/Liger-Kernel @ ead96b6 (the kernels' own memory is checked
against Liger-Kernel's measured benchmark rows in tests/formulas/test_liger_kernels.py)."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training

# Llama-3.1-8B: h 4096, I 14336, V 128256, 32 layers; bf16 weights and activations, full training, one row of 4096
BASE = dict(method="full", micro_batch=1, seq_len=4096, grad_checkpointing="none", precision="bf16", device="h100")
H, INTER, VOCAB, LAYERS, T = 4096, 14336, 128256, 32, 4096


def _layer_bytes(est) -> int:  # type: ignore[no-untyped-def]
    return sum(t["bytes"] for t in est.details["layer_terms"])


def test_liger_layers_keep_input_rstd_and_gate_up() -> None:
    eager = estimate_training("llama-3.1-8b", **BASE)
    liger = estimate_training("llama-3.1-8b", **BASE, kernels="liger")
    names = [t["name"] for t in liger.details["layer_terms"]]
    assert "attention norm input + 1/rms (LigerRMSNorm)" in names and "mlp norm input + 1/rms (LigerRMSNorm)" in names
    assert not any(n.endswith("normalised") for n in names)
    # per layer: two norms each lose the fp32 copy (4 B -> 2 B per element) and the normalised tensor (2 B); the
    # MLP loses the activation output (eq. LG2), 1 of its 4 [t, I]
    saved = 2 * (T * H * (4 - 2) + T * H * 2) + T * INTER * 2
    assert _layer_bytes(eager) - _layer_bytes(liger) == saved


def test_liger_flce_keeps_no_vocabulary_sized_tensor() -> None:
    lora = dict(BASE, method="lora")
    ce = estimate_training("llama-3.1-8b", **lora)
    flce = estimate_training("llama-3.1-8b", **lora, loss="liger-flce")
    phases = flce.details["phases"]
    # eq. LG3: ceil(V / h) = 32, chunk = next_pow2(4096 / 32) = 128 rows of bf16 logits, alive in the forward only;
    # LoRA: no grad_weight
    assert phases["forward end"] - phases["loss backward"] == 128 * VOCAB * 2
    assert flce.details["tensor_peak_bytes"] < ce.details["tensor_peak_bytes"] - T * VOCAB * 4
    assert "lm_head backward" not in phases


def test_liger_flce_keeps_the_lm_head_gradient_from_the_forward() -> None:
    ce = estimate_training("llama-3.1-8b", **BASE)
    flce = estimate_training("llama-3.1-8b", **BASE, loss="liger-flce")
    phases = flce.details["phases"]
    # full bf16: grad_weight [V, h] in the weight's dtype is made in the forward, and torch.mm(...).float() puts a
    # [V, h] product and its fp32 cast beside it while a chunk runs (eq. LG4); the loss keeps grad_input instead of
    # the lm_head input (the same [t, h]) and grad_weight instead of the fp32 log-softmax
    assert phases["forward end"] - phases["loss backward"] == 128 * VOCAB * 2 + VOCAB * H * (2 + 4)
    kept = T * H * 2 + T * 4 + VOCAB * H * 2
    eager_kept = T * H * 2 + T * VOCAB * 4 + T * 8
    assert ce.details["phases"]["loss backward"] - phases["loss backward"] == (
        eager_kept - kept + 2 * T * VOCAB * 4)  # + the eager loss's two fp32 gradients


@pytest.mark.parametrize(("fields", "match"), [
    (dict(kernels="liger", compile=True), "does not take compile"),
    (dict(loss="liger-flce", loss_chunks=8), "does not take loss_chunks 8"),
    (dict(loss="liger-flce", tp=2, gpus=2), "does not take tp 2"),
    (dict(kernels="liger", precision="megatron-bf16"), "does not take precision megatron-bf16"),
])
def test_liger_settings_not_modelled_are_refused(fields: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        estimate_training("llama-3.1-8b", **{**BASE, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize("fields", [dict(kernels="liger"), dict(loss="liger-flce")])
def test_liger_refuses_model_types_it_does_not_patch(fields: dict[str, object]) -> None:
    with pytest.raises(InputError, match="Liger-Kernel patches model types .* not 'gpt2'"):
        estimate_training("gpt2", **{**BASE, **fields})  # type: ignore[arg-type]


def test_liger_speed_states_its_check() -> None:
    # the step time is Liger's kernels' bytes (eqs. E20-E22, LG5) and the warning states how far its check spreads
    code, out, _ = run("train", "llama-3.1-8b", "--method", "lora", "--device", "h100", "--seq-len", "4096",
                       "--kernels", "liger", "--loss", "liger-flce", "--tokens", "1M")
    assert code == 0 and "warning: Liger-Kernel's step time is its kernels' bytes" in out


def test_liger_off_gpu_is_one_line_exit_2() -> None:
    code, out, err = run("train", "llama-3.1-8b", "--method", "lora", "--device", "cpu", "--kernels", "liger")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "CUDA and ROCm GPUs only" in err


def test_liger_flce_refuses_an_lm_head_adapter() -> None:
    with pytest.raises(InputError, match="LoRA adapter on the lm_head would not run"):
        estimate_training("llama-3.1-8b", **{**BASE, "method": "lora", "targets": "q,v,lm_head",  # type: ignore[arg-type]
                                             "loss": "liger-flce"})


def test_liger_beside_tiled_mlp_keeps_the_pytorch_tiled_mlp() -> None:
    # ArcticTraining @5885b9f8 model/liger_factory.py L41-50: under tiled_mlp_compute, AutoLigerKernelForCausalLM
    # gets swiglu=False: Liger's RMSNorm (and RoPE, fused loss) run, the MLP is TiledMLP over PyTorch's MLP. So the
    # layer differs from the PyTorch one by the two norms' eq. LG1 saving only, and its backward transient is TM2's.
    tiled = dict(BASE, seq_len=8192, grad_checkpointing="full", tiled_mlp=True)
    t = 8192
    eager = estimate_training("llama-3.1-8b", **tiled)
    liger = estimate_training("llama-3.1-8b", **tiled, kernels="liger")
    names = [x["name"] for x in liger.details["layer_terms"]]
    assert "mlp input (TiledMLP: x only, 2 shards)" in names  # ceil(8192 / 4096)
    assert not any("Liger SiLU" in n for n in names)
    assert _layer_bytes(eager) - _layer_bytes(liger) == 2 * (t * H * (4 - 2) + t * H * 2)
    # the last layer's backward (its recompute + TM2's transient) moves by the layer's saving alone: the same TM2
    layer31 = [e.details["phases"]["backward layer 31"] for e in (eager, liger)]
    assert layer31[0] - layer31[1] == 2 * (t * H * (4 - 2) + t * H * 2)


def test_tiled_mlp_still_refuses_unsloth_kernels() -> None:
    with pytest.raises(InputError, match="kernels pytorch or liger"):
        estimate_training("llama-3.1-8b", **BASE, tiled_mlp=True, kernels="unsloth")  # type: ignore[arg-type]

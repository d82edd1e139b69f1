"""The bytes the step time's FSDP collectives carry (estimate/training/gather_units.py ``fsdp_collective_volume``,
read by estimate/duration.py into formulas/training_time.py eq. (7c)) against what torch sends on real 2-rank
steps on the CPU over gloo (#12, "one answer": the time reads the units the memory gathers).

The step scripts (``fsdp_rs_output_step.py`` for FSDP2, ``fsdp1_lora_step.py`` for FSDP1) wrap
``torch.distributed``'s all-gather and reduce-scatter (ranks.py ``count_collectives``) and record every call's
payload (every rank's elements) of their second step, by pass. Truth for each case:

- the forward all-gathers: every unit once, in its all-gather dtype;
- the backward all-gathers: the units resharded after their forward (torch's default keeps the root);
- the reduce-scatters: the gradients autograd produced, in the reduce dtype (LoRA: the adapters' only, while the
  frozen base is gathered whole; FSDP1 with the adapters in their layer's unit: each unit's whole flat gradient).

The duration's bytes per device and micro-step (``StepTime.comm_bytes``) are the ring volumes of those payloads,
(n-1)/n of each (formulas/network.py). Cases: FSDP2 pure bf16 full fine-tuning; LoRA r8 on every linear and lm_head
(PEFT), fp32 under ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``; torchao float8 training
(``enable_fsdp_float8_all_gather``); torchtitan's layout on torch >= 2.8 (the last block kept after its forward, the
root resharded: formulas/fsdp2_units.py 'torchtitan-resharded'); FSDP1 pure bf16 full fine-tuning (the wrapping of
torchtune's 2024 full recipe) and LoRA with the adapters wrapped apart and with them in their layer's unit (on the
CPU FSDP1 all-gathers into a list, ``dist.all_gather``: counted too).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA, run_cases  # noqa: E402
from test_deepspeed_zero3_volume import HYBRID  # noqa: E402

from llmsizer.catalog.hardware import builtin_catalog  # noqa: E402
from llmsizer.estimate.duration import Duration, training_duration_for  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

N = 2
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]
LORA = dict(method="lora", rank=8, targets=",".join(TARGETS))
FSDP1_LORA = dict(LORA, precision="bf16", base_dtype="bf16", adapter_dtype="bf16", fsdp_version=1)
HAS_TORCHAO = importlib.util.find_spec("torchao") is not None

# name: (step script, its case, TrainingWorkload fields)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "FSDP2 full, pure bf16": (
        "fsdp_rs_output_step.py", dict(dtype="bf16", mp=False), dict(precision="bf16")),
    "FSDP2 LoRA r8, fp32 under bf16 param_dtype": (
        "fsdp_rs_output_step.py", dict(lora=dict(r=8, targets=TARGETS)), dict(LORA, precision="fsdp-bf16-mixed")),
    "FSDP2 float8 full": (
        "fsdp_rs_output_step.py", dict(float8=True), dict(precision="fsdp-bf16-mixed", float8=True)),
    "FSDP2 full, torchtitan layout (root resharded)": (
        "fsdp_rs_output_step.py", dict(dtype="bf16", mp=False, last_kept=True, root_reshard=True),
        dict(precision="bf16", fsdp2_units="torchtitan-resharded")),
    # eq. (B2): the blocks whose output needs no gradient are not gathered again, but the one before the first that
    # does is, by the backward prefetch of the unit after it (the root, last in FSDP2's post-forward order)
    "FSDP2 LoRA r8 on the lm_head only": (
        "fsdp_rs_output_step.py", dict(lora=dict(r=8, targets=["lm_head"])),
        dict(LORA, targets="lm_head", precision="fsdp-bf16-mixed")),
    "FSDP2 LoRA r8 on q, v of a hybrid (a Mamba and an MLP layer before the attention layer)": (
        "fsdp_rs_output_step.py", dict(config=HYBRID, lora=dict(r=8, targets=["q_proj", "v_proj"])),
        dict(LORA, targets="q,v", precision="fsdp-bf16-mixed")),
    "FSDP1 full, pure bf16": ("fsdp1_lora_step.py", {}, dict(precision="bf16", fsdp_version=1)),
    "FSDP1 LoRA r8, adapters apart": (
        "fsdp1_lora_step.py", dict(lora=dict(r=8, targets=TARGETS)), dict(FSDP1_LORA)),
    "FSDP1 LoRA r8, adapters in their layer's unit": (
        "fsdp1_lora_step.py", dict(lora=dict(r=8, targets=TARGETS), wrap="layers"),
        dict(FSDP1_LORA, fsdp1_lora_wrap="with-layers")),
    # FSDP1 prefetches in the reverse pre-forward order, the root first: the root's pre-backward prefetches nothing
    "FSDP1 LoRA r8 on the lm_head only, adapters apart": (
        "fsdp1_lora_step.py", dict(lora=dict(r=8, targets=["lm_head"])), dict(FSDP1_LORA, targets="lm_head")),
    # ... but with the adapters in their unit the root's flat parameter requires grad, the embedding's view too
    # (setup.py embedding_output_needs_grad): every block runs its backward
    "FSDP1 LoRA r8 on the lm_head only, adapters in their unit": (
        "fsdp1_lora_step.py", dict(lora=dict(r=8, targets=["lm_head"]), wrap="layers"),
        dict(FSDP1_LORA, targets="lm_head", fsdp1_lora_wrap="with-layers")),
}


def duration(fields: dict[str, Any], config: dict[str, Any] = TINY_LLAMA) -> Duration:
    """The one duration rule for the tiny model (the Llama unless told) on two devices (any GPU with a link: only
    the bytes are read)."""
    spec = spec_from_config(config, name="llama-tiny")
    dev = builtin_catalog().devices["h100-sxm"]
    return training_duration_for(spec, dev, N, 1e6, dict(micro_batch=2, seq_len=64, fsdp="full", **fields))


def volume(d: Duration) -> dict[str, int]:
    """The payloads the duration's step time used (its assumptions) [bytes]."""
    notes = {a.name: a.value for a in d.assumptions}
    return {k: notes[f"fsdp_{k}_bytes"] for k in ("all_gather_forward", "all_gather_backward", "reduce_scatter")}


def payloads(calls: list[list[Any]]) -> dict[str, int]:
    """Summed payloads of one step: forward and backward all-gathers, reduce-scatters [bytes]."""
    out = {"all_gather_forward": 0, "all_gather_backward": 0, "reduce_scatter": 0}
    for phase, op, n in calls:
        out[op if op == "reduce_scatter" else f"{op}_{phase}"] += n
    return out


@pytest.fixture(scope="module")
def steps() -> dict[str, dict[str, Any]]:
    """Every case's real step, one launch of two ranks per step script (ranks.py ``run_cases``: one child process per
    case, forked after the imports)."""
    out: dict[str, dict[str, Any]] = {}
    for script in sorted({s for s, _, _ in CASES.values()}):
        names = [n for n, (s, _, f) in CASES.items() if s == script and (HAS_TORCHAO or not f.get("float8"))]
        runs = run_cases(script, [dict(dict(config=TINY_LLAMA, batch=2, seq=64), **CASES[n][1]) for n in names], N,
                         preload=("peft",))
        out.update(zip(names, runs, strict=True))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_step_time_collectives_carry_what_torch_sends(name: str, steps: dict[str, dict[str, Any]]) -> None:
    """The duration's FSDP payloads and its bytes per device equal the collectives' of a real step."""
    script, case, fields = CASES[name]
    if fields.get("float8") and not HAS_TORCHAO:
        pytest.skip("torchao is not installed")
    m = steps[name]
    measured = payloads(m["collectives"])
    d = duration(fields, case.get("config", TINY_LLAMA))
    predicted = volume(d)
    print(f"\n{name}: torch sent {measured}; llmsizer {predicted}")
    assert predicted == measured
    assert d.step is not None
    assert d.step.comm_bytes == pytest.approx((N - 1) / N * sum(measured.values()), rel=1e-12)


@pytest.mark.slow
def test_lora_reduces_only_the_adapters_and_gathers_the_base() -> None:
    """Under FSDP2 a LoRA step reduce-scatters its adapters' gradients only (torch's post_backward skips parameters
    without a gradient) while its forward all-gathers the frozen base whole: the estimate's reduce-scatter payload is
    the adapters' elements (PEFT's own count) in the reduce dtype, and its all-gather the full fine-tune's plus the
    adapters. FSDP1 with the adapters in their layer's unit reduce-scatters every element of the units."""
    peft = pytest.importorskip("peft")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    conf = transformers.AutoConfig.for_model(**TINY_LLAMA)
    model = peft.get_peft_model(transformers.AutoModelForCausalLM.from_config(conf),
                                peft.LoraConfig(r=8, lora_alpha=8, target_modules=TARGETS))
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    everything = sum(p.numel() for p in model.parameters())
    assert adapters < everything and torch.float32 == next(model.parameters()).dtype
    lora = volume(duration(dict(LORA, precision="fsdp-bf16-mixed")))
    full = volume(duration(dict(precision="fsdp-bf16-mixed")))
    assert lora["reduce_scatter"] == adapters * 4  # reduce_dtype fp32
    assert lora["all_gather_forward"] == everything * 2  # param_dtype bf16, base + adapters
    assert full["all_gather_forward"] == (everything - adapters) * 2
    with_layers = volume(duration(dict(FSDP1_LORA, fsdp1_lora_wrap="with-layers")))
    assert with_layers["reduce_scatter"] == everything * 2  # every element, bf16

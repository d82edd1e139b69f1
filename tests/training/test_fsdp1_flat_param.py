"""FSDP1 flat-parameter gradients against a real ``FullyShardedDataParallel`` LoRA step on two gloo ranks (#12).

``fsdp1_step.py`` wraps a PEFT LoRA model (adapters and base in bf16: one flat parameter has one dtype) with FSDP1,
``use_orig_params=True``, one unit per decoder layer plus the root, and reads every ``flat_param.grad`` after the
backward: FSDP1 gives the whole flat parameter a gradient, frozen base included (torch
``torch/distributed/fsdp/_flat_param.py`` lines 804-836). llmsizer's ``fsdp_version=1`` with ``fsdp1_lora_wrap=
'with-layers'`` gradient bytes per rank must agree within 2%; ``fsdp_version=2`` (gradients of the adapters only) must
miss by far. ``fsdp1_lora_step.py`` wraps the adapters apart instead, as torchtune's 2024 recipe did
(``test_fsdp1_lora_adapters_apart``: eqs. W1, W2 of formulas/fsdp_flat_param.py); without adapters it is a full
fine-tune as torchtune's 2024 full recipe wrapped it (``test_fsdp1_full_units``: eq. W3).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from ranks import TINY_LLAMA, run_cases  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

LLAMA = dict(TINY_LLAMA, num_hidden_layers=3)
ROOT_CONFIG = dict(LLAMA, vocab_size=16000)
# every test's real step: name -> (step script, case)
STEPS: dict[str, tuple[str, dict[str, Any]]] = {
    "lora-flat": ("fsdp1_step.py", dict(config=LLAMA, batch=2, seq=128, lora=dict(r=8, targets=["q_proj", "v_proj"]))),
    "no-sync": ("fsdp1_step.py", dict(config=LLAMA, batch=2, seq=128, no_sync=True)),
    "root-peak": ("fsdp1_step.py", dict(config=ROOT_CONFIG, batch=1, seq=64, root_peak=True)),
    **{f"apart-{ckpt}-{accumulate}": ("fsdp1_lora_step.py",
                                      dict(config=LLAMA, batch=2, seq=128, lora=dict(r=8, targets=["q_proj", "v_proj"]),
                                           grad_ckpt=ckpt, accumulate=accumulate))
       for ckpt, accumulate in [(False, 1), (True, 2)]},
    **{f"full-{ckpt}": ("fsdp1_lora_step.py", dict(config=LLAMA, batch=2, seq=128, grad_ckpt=ckpt))
       for ckpt in [False, True]},
}


@pytest.fixture(scope="module")
def steps() -> dict[str, dict[str, Any]]:
    """Every test's real step, one launch of two ranks per step script (ranks.py ``run_cases``: one child process
    per case, forked after the imports)."""
    out: dict[str, dict[str, Any]] = {}
    for script in sorted({s for s, _ in STEPS.values()}):
        names = [n for n, (s, _) in STEPS.items() if s == script]
        out.update(zip(names, run_cases(script, [STEPS[n][1] for n in names], 2, preload=("peft",)), strict=True))
    return out


def test_fsdp1_lora_flat_gradients(steps: dict[str, dict[str, Any]]) -> None:
    m = steps["lora-flat"]
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(method="lora", rank=8, targets="q,v", base_dtype="bf16", adapter_dtype="bf16", precision="bf16",
                  micro_batch=2, seq_len=128, gpus=2, fsdp="full")
    v1 = estimate_training(spec, fsdp_version=1, fsdp1_lora_wrap="with-layers", **common).details["model_states"][
        "gradients"]
    v2 = estimate_training(spec, **common).details["model_states"]["gradients"]
    meas = m["flat_grad_bytes"]
    print(f"\nFSDP1 LoRA over 2 ranks: flat gradient shards {meas} B (all params {m['param_bytes']} B, trained "
          f"{m['trained_param_bytes']} B, {m['units']} units); fsdp_version 1 predicts {v1} B "
          f"({(v1 - meas) / meas:+.2%}), fsdp_version 2 {v2} B ({(v2 - meas) / meas:+.1%})")
    assert abs(v1 - meas) / meas <= 0.02
    assert abs(v2 - meas) / meas > 0.5


def test_fsdp1_no_sync_unsharded_gradients(steps: dict[str, dict[str, Any]]) -> None:
    """Eq. (N1): a full fine-tune's micro-batch under FSDP1 ``no_sync()`` leaves every unit's unsharded flat gradient
    (torch ``_runtime_utils.py`` lines 742-746), as litgpt's full.py accumulates under Fabric's no_backward_sync.
    ``grad_sync='optimizer-step'`` with ``fsdp_version=1`` must hold that within 2%; without it, the sharded
    gradients (half of it over two ranks) must miss by far."""
    m = steps["no-sync"]
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(method="full", precision="bf16", micro_batch=2, seq_len=128, gpus=2, fsdp="full",
                  fsdp_version=1, grad_accumulation=2)
    no_sync = estimate_training(spec, grad_sync="optimizer-step", **common).details["peak_parts"]["gradients"]
    synced = estimate_training(spec, **common).details["peak_parts"]["gradients"]
    meas = m["flat_grad_bytes"]
    print(f"\nFSDP1 full fine-tune over 2 ranks under no_sync: flat gradients {meas} B (params shard "
          f"{m['param_bytes']} B, {m['units']} units); grad_sync optimizer-step predicts {no_sync} B "
          f"({(no_sync - meas) / meas:+.2%}), per micro-step {synced} B ({(synced - meas) / meas:+.1%})")
    assert m["param_bytes"] == m["trained_param_bytes"]
    assert abs(no_sync - meas) / meas <= 0.02
    assert abs(synced - meas) / meas > 0.4


def test_fsdp1_root_gradient_assembly(steps: dict[str, dict[str, Any]]) -> None:
    """Eq. (N2): at the end of an FSDP1 full fine-tune's backward a rank holds the root unit's view gradients (the
    lm_head's since the loss backward, the embedding's) and their concatenation into the flat gradient. Measured:
    the peak of an accumulating micro-batch above the bytes held before it (parameters, unsharded gradients), a
    Llama-shaped model with a large vocabulary so that the root dominates; llmsizer's backward-end transient must
    agree within 8% (the rest is the loss chain's own small tensors)."""
    m = steps["root-peak"]
    spec = spec_from_config(ROOT_CONFIG, name="llama-tiny-16k")
    est = estimate_training(spec, method="full", precision="bf16", micro_batch=1, seq_len=64, gpus=2, fsdp="full",
                            fsdp_version=1, grad_accumulation=2, grad_sync="optimizer-step")
    assert est.details["peak_phase"] == "backward end"
    pred = est.details["peak_parts"]["backward_transient"]
    meas = m["peak_over_held"]
    print(f"\nFSDP1 root unit ({m['root_elements']} elements): micro-batch peak {meas} B above the held bytes; "
          f"predicted backward-end transient {pred} B ({(pred - meas) / meas:+.1%})")
    assert abs(pred - meas) / meas <= 0.08
    assert 2 * m["root_elements"] * 2 > 0.8 * meas  # the root's assembly is most of it: the case tests N2



# torchtune's 2024-05 distributed LoRA recipe (lora_finetune_distributed.py @ 0217d44c2 lines 332-350): FSDP1,
# lora_fsdp_wrap_policy (every LoRA A / B its own unit), use_orig_params False, mixed_precision None, pure bf16
TORCHTUNE_LORA = dict(method="lora", rank=8, targets="q,v", base_dtype="bf16", adapter_dtype="bf16", precision="bf16",
                      micro_batch=2, seq_len=128, gpus=2, fsdp="full", fsdp_version=1, optimizer_impl="for-loop")


@pytest.mark.parametrize("ckpt, accumulate", [(False, 1), (True, 2)])
def test_fsdp1_lora_adapters_apart(ckpt: bool, accumulate: int, steps: dict[str, dict[str, Any]]) -> None:
    """Eqs. (W1), (W2) against a real FSDP1 LoRA step wrapped as torchtune's recipe wrapped it (``fsdp1_lora_step.py``):
    the frozen layer units get no gradient (the sharded flat gradients are the adapters' exactly), the root unit stays
    unsharded through the step and one block is unsharded at a time; the step's peak (CPU allocator, every
    allocation) within 3 %. The adapters-in-their-layer model ('with-layers', llmsizer's FSDP1 LoRA before) must
    miss the gradients by far, and the two-largest-units model (what FSDP1 got before) the root at the loss."""
    m = steps[f"apart-{ckpt}-{accumulate}"]
    spec = spec_from_config(LLAMA, name="llama-tiny")
    fields = dict(TORCHTUNE_LORA, grad_checkpointing="full" if ckpt else "none", grad_accumulation=accumulate)
    est = estimate_training(spec, **fields)
    mixed = estimate_training(spec, **fields, fsdp1_lora_wrap="with-layers")
    v2 = estimate_training(spec, **dict(fields, fsdp_version=2))
    grads = est.details["model_states"]["gradients"]
    print(f"\nFSDP1 LoRA adapters apart, checkpointing {ckpt}, {accumulate} micro-batches: units {m['units']}; flat "
          f"gradient shards {m['flat_grad_bytes']} B, predicted {grads} B (with-layers "
          f"{mixed.details['model_states']['gradients']} B)")
    assert m["units"] == {"trained": 4 * LLAMA["num_hidden_layers"], "frozen": 1 + LLAMA["num_hidden_layers"]}
    assert grads == m["flat_grad_bytes"]
    assert mixed.details["model_states"]["gradients"] > 10 * m["flat_grad_bytes"]

    # eq. (W2): the unsharded flat parameters at each moment (adapter units, 2-8 kB, left out)
    root = spec.vocab_size * spec.hidden_size * 2 * 2  # embedding + output, bf16
    seen = [(moment, u) for moment, u in m["unsharded"]]
    at_loss = [u for moment, u in seen if moment == "loss backward"]
    fwd = [sum(v for k, v in u.items() if k != "adapters") for moment, u in seen if moment == "forward"]
    back = [u for moment, u in seen if moment == "backward"]
    print("unsharded at the loss backward", at_loss, "; forward max", max(fwd), "; backward:", back)
    assert len(at_loss) == 1 and set(at_loss[0]) == {"root"}  # every block resharded after its forward, root kept
    block = max(fwd) - at_loss[0]["root"]
    assert abs(at_loss[0]["root"] - root) <= 1024  # (+ the final norm)
    # in the backward: the root, the block being run; the next block is gathered at its pre-backward hook before the
    # reshard-only hook frees the one just run (torch _runtime_utils.py lines 1473-1517), at the blocks' boundary
    blocks_held = [sum(1 for k in u if k.startswith("layer")) for u in back]
    assert max(blocks_held) == 2 and blocks_held[-1] == 1 and all("root" in u for u in back)
    peak_phase = est.details["peak_phase"]
    gathered = est.details["peak_parts"]["gathered_params"]
    assert peak_phase == "loss backward"
    assert abs(gathered - at_loss[0]["root"]) <= 1024
    assert abs(v2.details["peak_parts"]["gathered_params"] - at_loss[0]["root"]) > block / 2

    pred, meas = est.details["tensor_peak_bytes"], m["peak"]
    before = v2.details["tensor_peak_bytes"]
    print(f"step peak measured {meas} B; predicted {pred} B ({(pred - meas) / meas:+.2%}); with the FSDP2-like "
          f"gathering of before {before} B ({(before - meas) / meas:+.2%})")
    assert abs(pred - meas) / meas <= 0.03
    assert abs(before - meas) / meas > 0.03


# torchtune's 2024-05 full fine-tuning recipe (full_finetune_distributed.py @ 0217d44c2 lines 293-303): FSDP1,
# ModuleWrapPolicy({TransformerDecoderLayer}) (memory_efficient_fsdp_wrap False), FULL_SHARD, mixed_precision None,
# pure bf16, the loss outside the model (lines 479-488)
TORCHTUNE_FULL = dict(method="full", precision="bf16", micro_batch=2, seq_len=128, gpus=2, fsdp="full", fsdp_version=1,
                      optimizer_impl="for-loop")


@pytest.mark.parametrize("ckpt", [False, True])
def test_fsdp1_full_units(ckpt: bool, steps: dict[str, dict[str, Any]]) -> None:
    """Eq. (W3) against a real FSDP1 full fine-tuning step wrapped as torchtune's recipe wrapped it
    (``fsdp1_lora_step.py`` without ``lora``): the root unit unsharded from its forward to the end of the backward,
    every block resharded after its forward, and each block's backward with the block below it prefetched
    (``BACKWARD_PRE``). The units FSDP holds unsharded at the moment of llmsizer's peak phase must be what llmsizer
    gathers there: the root alone at the loss backward (no checkpointing: the two-largest-units gathering llmsizer
    had counted a block there), the root, block 1 and block 0 prefetched below it in a checkpointed block 1's
    backward (W2's one block misses). The moment is FSDP's state at its all-gathers and at the loss backward, not the
    allocator's highest stretch, which a reduce-scatter's free on gloo's thread moves (``fsdp1_lora_step.py``).
    Without checkpointing the step's peak above the bytes held before it within 1 %."""
    m = steps[f"full-{ckpt}"]
    spec = spec_from_config(LLAMA, name="llama-tiny")
    est = estimate_training(spec, **dict(TORCHTUNE_FULL, grad_checkpointing="full" if ckpt else "none"))
    assert m["units"] == {"trained": 1 + LLAMA["num_hidden_layers"], "frozen": 0}
    seen = m["unsharded"]
    root = spec.vocab_size * spec.hidden_size * 2 * 2 + spec.hidden_size * 2  # embedding + output + final norm, bf16
    block = max(sum(v for k, v in u.items() if k != "root") for moment, u in seen if moment == "forward")
    print(f"\nFSDP1 full fine-tune, checkpointing {ckpt}: units {m['units']}; unsharded {seen}")
    assert [u for moment, u in seen if moment == "loss backward"] == [{"root": root}]
    assert all("root" in u for _, u in seen)  # the root never resharded before the backward's end
    assert max(sum(1 for k in u if k.startswith("layer")) for _, u in seen) == 2
    phase = est.details["peak_phase"]
    assert phase == ("backward layer 1" if ckpt else "loss backward")
    # the measured moment of that phase: the loss backward (_Probe), or block j's backward from the all-gather of the
    # block below it, prefetched at j's pre-backward hook, to j's reshard (the units FSDP holds all through it)
    if phase == "loss backward":
        at_phase = [u for moment, u in seen if moment == "loss backward"]
    else:
        j = int(phase.rsplit(" ", 1)[1])
        at_phase = [u for moment, u in seen if moment == "backward" and {f"layer {j}", f"layer {j - 1}"} <= set(u)]
    assert len(at_phase) == 1
    held = sum(at_phase[0].values())
    gathered = est.details["peak_parts"]["gathered_params"]
    print(f"unsharded in {phase} {at_phase[0]}: {held} B; predicted {gathered} B")
    assert gathered == held
    assert held == (root + 2 * block if ckpt else root)
    meas = m["peak"] - m["before"]  # above the step's start (a gloo thread's frees of older blocks go unseen)
    states = est.details["model_states"]
    pred = est.details["tensor_peak_bytes"] - states["weights"] - states["optimizer_states"]
    print(f"step peak above the held bytes: measured {meas} B, predicted {pred} B ({(pred - meas) / meas:+.2%})")
    if not ckpt:
        assert abs(pred - meas) / meas <= 0.01

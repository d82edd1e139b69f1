"""Recomputation FLOPs of activation checkpointing against PyTorch's own FLOP counter (#12).

A tiny Llama runs one real CPU forward + backward under ``torch.utils.flop_counter.FlopCounterMode`` with the decoder
layers wrapped as torchtitan wraps them (``measure_step._torchtitan_checkpointing``: the op-level ``SelectiveAC``
policy through ``create_selective_checkpoint_contexts``, or full checkpointing of every N-th layer, both with
PyTorch's non-reentrant checkpoint), and once without checkpointing. The counter's difference is the matmul work
the backward runs again; llmsizer's recompute terms (formulas/selective_checkpointing.py, formulas/training_time.py
eqs. (2')-(2'')) must give it. The counter does not count the CPU SDPA kernel, so the comparison is of matmul FLOPs
(the attention-core term 4 c d s is added by eq. (2') apart). The step without checkpointing checks eqs. (1) and
(4): 6 (resp. 4 for a frozen base) FLOPs per linear weight and token, adapters 6 per weight.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from measure_step import _torchtitan_checkpointing  # noqa: E402

from llmsizer.estimate.duration import _matmul_setup, checkpointed_layers  # noqa: E402
from llmsizer.formulas.selective_checkpointing import full_recompute_flops, op_sac_recompute_flops  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 4, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 1024, "tie_word_embeddings": False}
TOKENS = 128


def _llama() -> Any:
    """The tiny Llama of transformers (SDPA attention, seeded) in training mode."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**LLAMA)
    conf._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(conf)
    return model.train()


def _step_flops(model: Any) -> int:
    """FLOPs PyTorch's counter sees in one forward and backward of ``model`` over TOKENS random tokens."""
    from torch.utils.flop_counter import FlopCounterMode

    ids = torch.randint(0, LLAMA["vocab_size"], (1, TOKENS))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return int(counter.get_total_flops())


def _count(sac: Any, lora: tuple[str, ...] = ()) -> int:
    model = _llama()
    if lora:
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=list(lora),
                                                           lora_dropout=0.0))
    if sac is not None:
        _torchtitan_checkpointing(torch, model, sac)
    return _step_flops(model)


@pytest.fixture(scope="module")
def counts() -> dict[str, int]:
    qv, every = ("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    return {"none": _count(None), "op": _count("op"), "every2": _count(2), "every1": _count(1),
            "lora none": _count(None, qv), "lora op": _count("op", qv), "lora every1": _count(1, qv),
            "all none": _count(None, every), "all op": _count("op", every), "all every1": _count(1, every)}


def test_no_checkpointing_matches_eqs_1_and_4(counts: dict[str, int]) -> None:
    h, kv, i, v, layers = 320, 64, 864, 2000, 4
    linear = layers * (h * h * 2 + h * kv * 2 + 3 * h * i) + h * v  # decoder linears + lm_head
    assert counts["none"] == 6 * linear * TOKENS
    adapters = layers * (8 * (h + h) + 8 * (h + kv))  # rank 8 on q (h -> h) and v (h -> kv)
    # frozen base: forward + input gradient (4 per weight), adapters 6 per weight; the first layer's input (the
    # frozen embedding's output) needs no gradient, so PyTorch skips the input-gradient GEMMs of its q, k, v and of
    # the two lora_A (llmsizer's eq. (4) counts them: 1/L of the q/k/v share, left as a known over-count)
    first = h * h + 2 * h * kv + 2 * 8 * h
    assert counts["lora none"] == (4 * linear + 6 * adapters - 2 * first) * TOKENS


@pytest.mark.parametrize("case,sac,every", [("op", "op", 1), ("every1", "full", 1), ("every2", "full", 2)])
def test_recompute_matmul_flops(counts: dict[str, int], case: str, sac: str, every: int) -> None:
    spec = spec_from_config(LLAMA, name="tiny-llama")
    st = _matmul_setup(spec, "full", 0, ())
    rule = op_sac_recompute_flops if sac == "op" else full_recompute_flops
    ours = sum(rule(spec, i, st) for i in checkpointed_layers(spec.num_layers, every))
    assert (counts[case] - counts["none"]) == ours * TOKENS


@pytest.mark.parametrize("case,sac,targets", [("lora op", "op", "q,v"), ("lora every1", "full", "q,v"),
                                              ("all op", "op", "all-linear"), ("all every1", "full", "all-linear")])
def test_recompute_with_adapters(counts: dict[str, int], case: str, sac: str, targets: str) -> None:
    """LoRA adapters are matmuls too: they shift the every-second count of the op-level policy, and with an adapter
    on the down projection the early stop comes after its lora_A (whose output lora_B's weight gradient needs), so
    the frozen down projection before it runs again."""
    spec = spec_from_config(LLAMA, name="tiny-llama")
    st = _matmul_setup(spec, "lora", 8, targets)
    rule = op_sac_recompute_flops if sac == "op" else full_recompute_flops
    ours = sum(rule(spec, i, st) for i in range(spec.num_layers))
    # gradient_checkpointing_enable makes the embedding output require grad (transformers enable_input_require_grads
    # for a frozen base), so the first layer's input-gradient GEMMs of q, k, v and their lora_A, skipped without
    # checkpointing, run here
    h, kv = LLAMA["hidden_size"], 64
    first = h * h + 2 * h * kv + (2 if targets == "q,v" else 3) * 8 * h
    base = counts["lora none" if targets == "q,v" else "all none"]
    assert counts[case] - base - 2 * first * TOKENS == ours * TOKENS


def test_reentrant_checkpoint_reruns_the_whole_layer() -> None:
    """A reentrant checkpoint (torch ``CheckpointFunction``, ``use_reentrant=True``; Megatron-LM's own
    ``CheckpointFunction``, megatron/mpu/random.py @9aad920 line 360) re-runs the layer's whole forward in the
    backward: the last matmul (down projection) that the non-reentrant early stop skips runs again too
    (formulas/selective_checkpointing.py ``whole_layer_recompute_flops``), counted by PyTorch's FLOP counter on a
    real CPU step with transformers' reentrant gradient checkpointing."""
    from llmsizer.formulas.selective_checkpointing import whole_layer_recompute_flops

    def count(reentrant: bool | None) -> int:
        model = _llama()
        if reentrant is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        return _step_flops(model)

    spec = spec_from_config(LLAMA, name="tiny-llama")
    st = _matmul_setup(spec, "full", 0, ())
    none, again = count(None), count(True)
    whole = sum(whole_layer_recompute_flops(spec, i, st) for i in range(spec.num_layers))
    assert again - none == whole * TOKENS
    # one down projection (i -> h, 2 i h FLOPs per token) per layer more than the early stop's count
    assert whole - sum(full_recompute_flops(spec, i, st) for i in range(spec.num_layers)) \
        == LLAMA["num_hidden_layers"] * 2 * LLAMA["intermediate_size"] * LLAMA["hidden_size"]


def test_non_reentrant_checkpoint_without_early_stop_reruns_the_whole_layer() -> None:
    """torch 1.13's non-reentrant checkpoint re-ran the whole checkpointed function when the backward first unpacked
    a saved tensor (torch v1.13.1 torch/utils/checkpoint.py ``_checkpoint_without_reentrant``), as today's does with
    its early stop turned off (``set_checkpoint_early_stop(False)``, torch 2.13.0 torch/utils/checkpoint.py lines
    773-804). PyTorch's FLOP counter over a real CPU step of transformers' non-reentrant gradient checkpointing under
    that switch must give the recompute that checkpoint_impl 'non-reentrant-no-early-stop' times (the duration's
    ``flops_per_token`` with ``recomputes_whole_layer``), less the attention core's 4 L d s, which the counter does
    not see in the CPU SDPA kernel (module docstring)."""
    from torch.utils.checkpoint import set_checkpoint_early_stop

    from llmsizer.estimate.duration import flops_per_token
    from llmsizer.specs.training import recomputes_whole_layer

    def count(checkpointing: bool) -> int:
        model = _llama()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        with set_checkpoint_early_stop(False):
            return _step_flops(model)

    spec = spec_from_config(LLAMA, name="tiny-llama")
    impl = "non-reentrant-no-early-stop"
    plain = flops_per_token(spec, "full", TOKENS, "none").per_token
    rerun = flops_per_token(spec, "full", TOKENS, "full", reentrant=recomputes_whole_layer(impl)).per_token
    attention = 4 * LLAMA["num_hidden_layers"] * LLAMA["hidden_size"] * TOKENS  # d = 10 heads x 32 = hidden
    assert count(True) - count(False) == (rerun - plain - attention) * TOKENS
    # and not the early-stopping count: one down projection per layer more
    early = flops_per_token(spec, "full", TOKENS, "full").per_token
    assert rerun - early == LLAMA["num_hidden_layers"] * 2 * LLAMA["intermediate_size"] * LLAMA["hidden_size"]
    assert not recomputes_whole_layer("non-reentrant") and recomputes_whole_layer("reentrant")

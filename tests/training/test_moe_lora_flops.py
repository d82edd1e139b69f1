"""LoRA on fused MoE experts: what PEFT's ParamWrapper executes, against a real CPU step (formulas/lora.py eq. (3),
formulas/training_time.py eq. (4')).

A tiny Qwen3-MoE (transformers 5: fused 3-D ``gate_up_proj`` / ``down_proj`` experts, which PEFT adapts through
``target_parameters``) runs one fp32 forward + backward under ``torch.utils.flop_counter.FlopCounterMode`` with
``experts_implementation="eager"`` (one ``F.linear`` per expert; the CPU ``grouped_mm`` kernel is not counted),
once with PEFT's default-style targets q,k,v,o,gate,up,down and once with q,k,v,o only. The two runs share every
other FLOP (the attention adapters, the frozen base, the dense MLP layer PEFT leaves frozen once gate/up/down are
rewritten to the experts), so their measured difference is what the expert adapters cost: it must equal
T x 2 N_e (the routed experts' weight gradients through W + B A, at the k/E routing share) plus eq. (3)'s
per-micro-step materialisation, exactly -- and the old count (6 FLOPs per token and adapter parameter of every
expert) must not.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.estimate.duration import flops_per_token
from llmsizer.formulas.lora import expert_adapter_work, lora_params
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from oracle_utils import TINY_CONFIGS, hf_config  # noqa: E402

TOKENS = 64
RANK = 4
CFG = TINY_CONFIGS["qwen3-moe"]  # 3 layers, layer 1 a dense MLP (mlp_only_layers), 8 experts, top-2
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
EVERY = (*ATTN, "gate_proj", "up_proj", "down_proj")


def _step_flops(targets: tuple[str, ...], checkpointing: bool = False) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = hf_config(CFG)
    conf._attn_implementation = "sdpa"
    conf._experts_implementation = "eager"
    model: Any = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = peft.get_peft_model(model, peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=list(targets),
                                                       lora_dropout=0.0))
    if checkpointing:
        model.enable_input_require_grads()
    model.train()
    ids = torch.randint(0, CFG["vocab_size"], (1, TOKENS))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    return int(counter.get_total_flops())


def _spec() -> Any:
    return spec_from_config(CFG, name="tiny-qwen3-moe")


@pytest.mark.parametrize("checkpointing", [False, True])
def test_expert_adapter_flops_match_a_real_peft_step(checkpointing: bool) -> None:
    spec = _spec()
    measured = _step_flops(EVERY, checkpointing) - _step_flops(ATTN, checkpointing)
    recompute = "full" if checkpointing else "none"
    every = flops_per_token(spec, "lora", TOKENS, recompute, RANK, "q,k,v,o,gate,up,down")
    attn = flops_per_token(spec, "lora", TOKENS, recompute, RANK, "q,k,v,o")
    predicted = TOKENS * (every.per_token - attn.per_token) + every.per_micro_step - attn.per_micro_step
    work = expert_adapter_work(spec, RANK, "q,k,v,o,gate,up,down")
    old = 6 * TOKENS * lora_params(spec, RANK, "q,k,v,o,gate,up,down").experts_total
    print(f"\nexpert adapters (checkpointing {checkpointing}): measured {measured:,} FLOPs, predicted "
          f"{predicted:,.0f} (N_e {work.grad_params:g}/token, {every.per_micro_step:,.0f} per micro-step), "
          f"6 N_a per token {old:,}")
    assert attn.per_micro_step == 0.0
    assert predicted == measured
    assert old != measured


def test_lora_below_full_fine_tuning_on_moe() -> None:
    """On Qwen3-Next-80B-A3B (512 experts, top 10) LoRA's FLOPs -- per token and per 4096-token micro-step -- stay
    below full fine-tuning's: a frozen base saves the dense weights' gradients, and the experts' adapters do not
    run per token (6 N_a over all 512 experts' adapters put LoRA above full fine-tuning)."""
    spec = load_model("qwen3-next-80b-a3b-thinking")
    seq = 4096
    lora = flops_per_token(spec, "lora", seq)
    full = flops_per_token(spec, "full", seq)
    assert lora.per_token + lora.per_micro_step / seq < full.per_token
    assert lora.per_micro_step > 0 and full.per_micro_step == 0

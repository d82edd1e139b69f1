"""The prefill and decode FLOPs (formulas/speed.py eqs. 2' and 1') against a real transformers Llama forward.

Independent truth: ``torch.utils.flop_counter.FlopCounterMode`` counts the FLOPs of every matrix product the real
``LlamaForCausalLM`` forward dispatches (2 per multiply-add), on a tiny model in fp32 with eager attention (its two
attention products run as matmuls; FlopCounterMode has no rule for the CPU SDPA kernel), untied and tied. The
prompt runs with ``logits_to_keep=1``, as ``generate`` runs it (transformers 5.24 generation/utils.py L2952-2956;
vLLM's ``logits_indices`` and llama.cpp's ``batch.logits`` ask the head for the same one row): the head's product
covers one token, every other linear every token. The formula's inputs are torch's own counts (the ``nn.Linear``
weights, the ``lm_head``'s), and the composition (estimate/speed.py) must hand it the same ones from the config.

Eager attention multiplies the whole T x T score matrix (the causal mask is added, not skipped): 4 L d_attn T^2,
where eq. (2)'s causal count, 4 L d_attn T (T + 1) / 2, is what a causal kernel (flash attention, SDPA
``is_causal``) computes; the test checks each against its own arithmetic and compares the linears alone.
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.speed import attention_flops, decode_flops, prefill_flops
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, torch

flop_counter = pytest.importorskip("torch.utils.flop_counter")

pytestmark = pytest.mark.slow

CONFIG = {"model_type": "llama", "vocab_size": 1024, "hidden_size": 128, "intermediate_size": 352,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 1024}
T = 64  # prompt tokens


def _counts(model, ids, **kw) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(the linears' FLOPs: aten.mm, the attention products': aten.bmm) of one forward."""
    counter = flop_counter.FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(ids, use_cache=False, **kw)
    ops = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    assert set(ops) <= {"aten.mm", "aten.bmm"}, ops  # nothing else multiplies (rotary, norms: elementwise)
    return ops.get("aten.mm", 0), ops.get("aten.bmm", 0)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_prefill_flops_match_the_forward_with_the_head_on_the_last_token(tied):
    cfg = {**CONFIG, "tie_word_embeddings": tied}
    model = build(cfg, device="cpu", dtype=torch.float32, attn="eager")
    linears = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)}
    matmul_params = sum(linears.values())  # a tied lm_head is the embedding's tensor: once
    head_params = model.lm_head.weight.numel()
    assert (id(model.lm_head.weight) == id(model.model.embed_tokens.weight)) is tied
    ids = torch.zeros(1, T, dtype=torch.long)

    mm, bmm = _counts(model, ids, logits_to_keep=1)
    assert mm == prefill_flops(matmul_params, head_params, T)
    # the textbook head on every token is what the forward runs with every logit kept (logits_to_keep=0)
    mm_all, _ = _counts(model, ids, logits_to_keep=0)
    assert mm_all == prefill_flops(matmul_params, head_params, T, logit_tokens=T)
    assert mm_all - mm == 2 * head_params * (T - 1)

    L, d_attn = cfg["num_hidden_layers"], cfg["hidden_size"]  # 4 heads x 32 = 128
    assert bmm == 4 * L * d_attn * T * T  # eager: the masked half multiplied too
    assert attention_flops(L, d_attn, T) == 4 * L * d_attn * T * (T + 1) / 2

    # the composition hands eq. (2') the forward's parameters: llmsizer's prefill FLOPs = these linears + the
    # causal attention + 2 per RMSNorm weight per token. The norms' weights are in the parameters estimate/speed.py
    # counts as multiplied (count_params' active, less the embedding); the forward multiplies them elementwise
    # (1 FLOP each, no matmul, so FlopCounterMode counts none): a known gap of 2 x 640 x 64 = 81,920 FLOP here,
    # 2 x 266,240 per token on Llama-3.1-8B (3e-5 of its 2 N), stated, not adjusted
    from llmsizer.estimate.speed import estimate_speed

    norms = sum(m.weight.numel() for n, m in model.named_modules() if type(m).__name__ == "LlamaRMSNorm")
    assert norms == (2 * L + 1) * cfg["hidden_size"]
    spec = spec_from_config(cfg, name="tiny-llama")
    details = estimate_speed(spec, "h100-sxm", 1, weights_format="fp32", prompt_tokens=T, output_tokens=2,
                             engine="transformers").details
    assert details["prefill_flops"] == mm + attention_flops(L, d_attn, T) + 2 * norms * T


def test_decode_flops_match_a_one_token_step():
    """One new token of each of b = 3 sequences after a 16-token prompt: every linear, the head included (each
    token is sampled), on the 3 tokens; the attention products over the 17 cached + new positions."""
    model = build({**CONFIG, "tie_word_embeddings": False}, device="cpu", dtype=torch.float32, attn="eager")
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    b, past = 3, 16
    ids = torch.zeros(b, past, dtype=torch.long)
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    counter = flop_counter.FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.zeros(b, 1, dtype=torch.long), past_key_values=cache, use_cache=True, logits_to_keep=1)
    ops = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    L, d_attn = CONFIG["num_hidden_layers"], CONFIG["hidden_size"]
    attn = b * attention_flops(L, d_attn, 1, past)  # one token attending past + 1 positions
    assert ops["aten.bmm"] == attn
    assert ops["aten.mm"] + ops["aten.bmm"] == decode_flops(matmul_params, b, attn)

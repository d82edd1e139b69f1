"""Megatron-Core's MoE router outside TransformerEngine's fused kernels: its kernels and memory traffic (eq. E19).

Megatron-Core routes with TE's fused kernels only under ``moe_router_fusion`` (NVIDIA/Megatron-LM @d7288711
megatron/core/transformer/transformer_config.py line 792: default False). Megatron-Bridge's performance configs
turn it on for the GPT-OSS and Qwen3 runs (NVIDIA-NeMo/Megatron-Bridge @f9b6319e scripts/performance/configs/
gpt_oss/gpt_oss_llm_pretrain.py line 34, configs/qwen/qwen3_llm_pretrain.py line 36, over the recipes' False), so
eq. K9's router (formulas/launch_overhead.py ``MEGATRON_MOE_FIXED``: one fused top-k kernel, the fused aux-loss
scores and loss) is theirs; Nemotron 3 Nano's recipe keeps it off (recipes/nemotronh/nemotron_3_nano.py line 126).

Unfused, with the softmax score function after the top-k (Megatron's default, ``moe_router_pre_softmax`` False),
the router's ops over the [T, E] logits are (megatron/core/transformer/moe/moe_utils.py
``topk_routing_with_score_function`` lines 805-808 and 817-822, ``compute_routing_scores_for_aux_loss`` lines
857-868, ``get_tokens_per_expert_and_token_count`` line 233, ``switch_load_balancing_loss_func`` lines 143-146;
router.py lines 637-668 apply the aux loss when its coefficient is above 0, Megatron's default 0,
transformer_config.py line 734). Per token, E experts, top-k, c the logits' bytes (the router's dtype), int64
indices (8 B), int32 (4 B) and bool (1 B) maps; each term's kernels and bytes read + written::

    forward   topk                 1         E c + k (c + 8)
              top-k softmax        1 + 2 x   8k + 2 x (k c + 4k)        (x = 1 when c != 4: the fp32 casts)
              probs scatter        2         3 E c + k (c + 8)          (zeros_like, out-of-place scatter)
              map scatter          4         2 E c + 17 E + 8k          (zeros_like, .int(), scatter, .bool())
    aux loss  softmax over E       1 + x     8 E + x (E c + 4E)
              top-k of scores      1         4 E + 12 k
              map scatter          4         2 E c + 17 E + 8k
              counts               2         5 E                        (tokens per expert, probabilities summed)
              loss                 3         (scalars)
    backward  gather               1         k c + 8k + k c
              top-k softmax        1 + 2 x   12 k + 2 x (k c + 4k)
              top-k scatter        2         3 E c + k (c + 8)          (new_zeros, scatter)
    aux loss  loss                 4         (scalars: MoEAuxLossAutoScaler's ones_like x scale, lines 269-285,
                                                    and the loss's two products)
              softmax over E       1 + x     8 E + x (4E + E c)         (the summed gradient broadcast per expert)
              gradient sum         1         3 E c                                                         (E19)

(tests/formulas/test_moe_router.py runs these lines of Megatron-Core on CPU tensors under ``TorchDispatchMode`` and
sums each op's bytes.) Qwen3-30B-A3B's router (E 128, k 8, bf16 logits) moves 9.9 KB per token forward and 3.7 KB
backward with the aux loss (22 and 13 kernels), 4.1 KB and 1.1 KB without (10 and 6 kernels). Not here: the sigmoid score function with an expert bias, group-limited top-k and the sequence-level aux
loss (Nemotron 3 Nano's router), the aux-loss all-reduce of the token counts.

**Against the fused router** (``unfused_routing_extra``): eq. K9 (formulas/launch_overhead.py ``MEGATRON_MOE_FIXED``)
counts TE's fused top-k with its score function as one kernel forward and one backward (``FUSED_TOPK_KERNELS``) and
its aux-loss kernels apart. Unfused (the workload's ``moe_router_fusion`` off, Megatron-Core's default), the routing
terms above without the aux loss take the place of those two kernels; eq. K9's aux-loss kernels stay as counted (the
run's aux-loss coefficient is not a workload field). Their bytes are added to the memory-bound traffic; the fused
kernel's own traffic is not counted (as before).

**Forced load balancing** (``moe_router_force_load_balancing``, every Megatron-Bridge MoE benchmark row): the logits
are replaced by random ones before the routing (router.py lines 697-699, moe_utils.py lines 1203-1229 ``RandomSTE``:
``logits.clone().normal_()``; its backward passes the gradient through), fused or not::

    forward  2 kernels, 3 E c per token;   backward  none                                               (E19f)
"""

from __future__ import annotations

from ..errors import InputError

SOURCE = ("NVIDIA/Megatron-LM @d7288711 megatron/core/transformer/moe/moe_utils.py lines 805-822 (top-k routing), "
          "857-868 (aux-loss scores), 143-146 (aux loss), 1203-1229 (RandomSTE); router.py lines 637-668, 697-699 "
          "(eqs. E19/E19f)")
INDEX_BYTES = 8  # torch.topk's int64 indices


def unfused_router_terms(experts: int, top_k: int, logit_bytes: float = 2.0,
                         aux_loss: bool = True) -> dict[str, tuple[str, int, float]]:
    """Eq. (E19): the unfused router's terms per token, ``name: (pass, kernels, bytes)``, pass 'forward' or
    'backward'; ``logit_bytes`` c, ``aux_loss`` a load-balancing coefficient above 0.

    >>> t = unfused_router_terms(128, 8, 2.0)
    >>> sum(b for p, _, b in t.values() if p == "forward"), sum(k for p, k, _ in t.values() if p == "forward")
    (9888.0, 22)
    """
    if experts < 1 or not 1 <= top_k <= experts:
        raise InputError("a router needs 1 <= top-k <= experts")
    if logit_bytes <= 0:
        raise InputError("the logits' element size must be positive")
    e, k, c, ix = float(experts), float(top_k), float(logit_bytes), float(INDEX_BYTES)
    x = 0 if c == 4.0 else 1
    cast_k = x * 2 * (k * c + 4 * k)
    terms: dict[str, tuple[str, int, float]] = {
        "topk": ("forward", 1, e * c + k * (c + ix)),
        "top-k softmax": ("forward", 1 + 2 * x, 8 * k + cast_k),
        "probs scatter": ("forward", 2, 3 * e * c + k * (c + ix)),
        "map scatter": ("forward", 4, 2 * e * c + 17 * e + ix * k),
        "gather backward": ("backward", 1, 2 * k * c + ix * k),
        "top-k softmax backward": ("backward", 1 + 2 * x, 12 * k + cast_k),
        "top-k scatter backward": ("backward", 2, 3 * e * c + k * (c + ix)),
    }
    if aux_loss:
        terms |= {
            "aux softmax": ("forward", 1 + x, 8 * e + x * (e * c + 4 * e)),
            "aux topk": ("forward", 1, 4 * e + 12 * k),
            "aux map scatter": ("forward", 4, 2 * e * c + 17 * e + ix * k),
            "aux counts": ("forward", 2, 5 * e),
            "aux loss": ("forward", 3, 0.0),
            "aux loss backward": ("backward", 4, 0.0),
            "aux softmax backward": ("backward", 1 + x, 8 * e + x * (4 * e + e * c)),
            "logits gradient sum": ("backward", 1, 3 * e * c),
        }
    return terms


def forced_balance_terms(experts: int, logit_bytes: float = 2.0) -> tuple[int, float]:
    """Eq. (E19f): (forward kernels, forward bytes per token) of Megatron's random logits under
    ``moe_router_force_load_balancing`` (``clone`` and ``normal_``); its backward launches nothing."""
    if experts < 1 or logit_bytes <= 0:
        raise InputError("a router needs experts and a positive element size")
    return 2, 3.0 * experts * logit_bytes


# eq. K9's fused top-k + score function (formulas/launch_overhead.py MEGATRON_MOE_FIXED: "the fused top-k + score
# function, 1" forward; "the top-k's ... backward", 1): (forward, backward) kernels
FUSED_TOPK_KERNELS = (1, 1)


def unfused_routing_extra(experts: int, top_k: int, logit_bytes: float = 2.0) -> tuple[int, int, float, float]:
    """(forward kernels, backward kernels, forward bytes per token, backward bytes per token) Megatron-Core's unfused
    router adds to eq. K9's fused one in one MoE layer: eq. (E19)'s routing terms without the aux loss, less
    ``FUSED_TOPK_KERNELS``; bytes of eq. (E19) whole.

    >>> unfused_routing_extra(128, 8, 2.0)
    (9, 5, 4096.0, 1136.0)
    """
    terms = unfused_router_terms(experts, top_k, logit_bytes, aux_loss=False)
    kf = sum(k for p, k, _ in terms.values() if p == "forward") - FUSED_TOPK_KERNELS[0]
    kb = sum(k for p, k, _ in terms.values() if p == "backward") - FUSED_TOPK_KERNELS[1]
    bf = sum(b for p, _, b in terms.values() if p == "forward")
    bb = sum(b for p, _, b in terms.values() if p == "backward")
    return kf, kb, bf, bb

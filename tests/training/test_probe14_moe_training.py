"""probe14's MoE training defects (D1, D2, D6, D9), each against independent truth.

- D1: LoRA adapters on routed experts live with their experts under expert parallelism. Truth: PEFT's real
  ``get_peft_model`` on the transformers Qwen3-MoE model built on the meta device (shapes only), once with all E
  experts (the dense modules' adapters) and once with the E / ep experts one EP rank holds (EP shards the fused
  expert parameters' expert dimension; PEFT's ParamWrapper sizes lora_A / lora_B by it); the expert adapters' ZeRO
  shards span the expert data-parallel ranks, world / ep (Megatron-Core parallel_state.py:871-880, cited in
  formulas/parallelism.py expert_shard_group).
- D2: Megatron-Core has no ZeRO-3 (megatron/core/optimizer/distrib_optimizer.py shards optimizer states and
  gradients, not parameters): refused, and recommend never offers it.
- D6: DeepSpeed ZeRO-3 + EP runs AutoEP layers only (deepspeed/runtime/engine.py:1872-1897): said in the assumptions.
- D9: a formula text reproduces its number (config.json shapes + FSDP's hybrid shard rule: a node's ranks).
"""

from __future__ import annotations

import re
import warnings

import pytest

from llmsizer.catalog.models import entries
from llmsizer.errors import FieldError
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config

TARGETS = "q,k,v,o,gate,up,down"
PEFT_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _peft_adapters(cfg: dict[str, object], rank: int) -> tuple[int, int]:
    """(non-expert, routed-expert) trainable elements PEFT creates on the model of ``cfg``."""
    peft = pytest.importorskip("peft")
    from oracle_utils import build

    model = build(cfg)  # meta device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pm = peft.get_peft_model(model, peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=PEFT_NAMES,
                                                       lora_dropout=0.0))
    dense = expert = 0
    for name, p in pm.named_parameters():
        if p.requires_grad:
            if ".experts." in name:
                expert += p.numel()
            else:
                dense += p.numel()
    return dense, expert


@pytest.mark.parametrize(("ep", "gpus", "zero"), [(2, 2, 0), (4, 4, 0), (4, 8, 3)])
def test_expert_adapters_split_with_their_experts(ep: int, gpus: int, zero: int) -> None:
    from oracle_utils import TINY_CONFIGS

    cfg = TINY_CONFIGS["qwen3-moe"]
    rank = 4
    dense, _ = _peft_adapters(cfg, rank)
    _, local = _peft_adapters({**cfg, "num_experts": cfg["num_experts"] // ep}, rank)  # one EP rank's experts
    assert local > 0
    est = estimate_training(spec_from_config(cfg, name="qwen3-moe"), method="lora", rank=rank, targets=TARGETS,
                            precision="bf16-mixed", gpus=gpus, ep=ep, zero=zero, seq_len=64)
    states = est.details["model_states"]
    # the adapters' dtype the estimate states (fp32 under bf16-mixed; bf16 with an fp32 master under DeepSpeed ZeRO)
    b = {"fp32": 4, "bf16": 2}[next(str(a.value) for a in est.assumptions if a.name == "adapter_dtype")]
    ways, e_ways = (gpus, gpus // ep) if zero == 3 else (1, 1)  # ZeRO-3: weights and gradients sharded
    assert states["adapter_weights"] == pytest.approx(dense * b / ways + local * b / e_ways, abs=2)
    assert states["gradients"] == pytest.approx(dense * b / ways + local * b / e_ways, abs=2)


def test_qwen3_30b_lora_adapter_states_shrink_with_ep() -> None:
    """The report's case at ep 8: the routed experts' adapters from config.json shapes (eq. 2 of formulas/lora.py:
    rank 2r x E on gate_up_proj [2I, H], r x E on down_proj [H, I]) on 128 / 8 experts, AdamW's two fp32 moments."""
    c = entries()["qwen3-30b-a3b"].config
    r, h, i, e, layers = 16, c["hidden_size"], c["moe_intermediate_size"], c["num_experts"], c["num_hidden_layers"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    attn = layers * r * ((h + q) + 2 * (h + kv) + (q + h))
    experts = layers * (2 * r * e * (h + 2 * i) + r * e * (i + h))
    est = estimate_training(load_model("qwen3-30b-a3b"), method="lora", precision="bf16-mixed", gpus=8, ep=8,
                            seq_len=4096, grad_checkpointing="full", attention="flash")
    got = {it.name: it.bytes for it in est.items}
    mine = attn + experts // 8
    assert got["adapter_weights"] == 4 * mine
    assert got["optimizer_states"] == pytest.approx(8 * mine, rel=1e-4)  # + Adam's per-tensor step scalars


def test_megatron_zero3_is_refused_and_never_recommended() -> None:
    with pytest.raises(FieldError, match=r"zero 3 with precision megatron-bf16: Megatron-Core has no ZeRO-3"):
        estimate_training(load_model("qwen3-30b-a3b"), precision="megatron-bf16", zero=3, gpus=8, seq_len=4096)
    from llmsizer.estimate.training.compose import sharded_workload
    from llmsizer.specs import TrainingWorkload

    w = TrainingWorkload(precision="megatron-bf16", gpus=8, seq_len=4096, memory=10 * 2**30)  # nothing fits
    assert sharded_workload(load_model("qwen3-30b-a3b"), w).zero in (0, 1, 2)


def test_deepspeed_zero3_with_ep_names_autoep() -> None:
    est = estimate_training(load_model("mixtral-8x7b-v0.1"), precision="deepspeed-bf16", zero=3, gpus=16, ep=8,
                            seq_len=4096)
    a = {x.name: x for x in est.assumptions}
    assert a["expert_layer"].value == "AutoEP"
    assert "deepspeed/runtime/engine.py:1872-1897" in a["expert_layer"].why
    est = estimate_training(load_model("mixtral-8x7b-v0.1"), precision="deepspeed-bf16", zero=2, gpus=16, ep=8,
                            seq_len=4096)
    assert "expert_layer" not in {x.name for x in est.assumptions}


_COUNT = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def _num(s: str) -> float:
    return float(s[:-1]) * _COUNT[s[-1]] if s[-1] in _COUNT else float(s)


def test_fsdp_hybrid_gradient_text_reproduces_its_full_size() -> None:
    """FSDP hybrid over a node (8 GPUs), EP 8: dense gradients / 8, routed experts' / (8 / 8). The counts stated in
    the text times their bytes over their ways give the stated full size, and that size matches config.json shapes."""
    spec = load_model("qwen3-30b-a3b")
    est = estimate_training(spec, precision="fsdp-bf16-mixed", fsdp="hybrid", gpus=64, ep=8, seq_len=4096)
    f = next(it.formula for it in est.items if it.name == "gradients")
    terms = re.findall(r"([\d.]+[KMBT]?) (?:routed-expert|trained) x (\d+) B / (\d+)", f)
    assert len(terms) == 2
    stated = sum(_num(n) * int(b) / int(ways) for n, b, ways in terms)
    full = est.details["model_states"]["gradients"]
    assert stated == pytest.approx(full, rel=5e-3)
    c = entries()["qwen3-30b-a3b"].config
    experts = c["num_hidden_layers"] * c["num_experts"] * 3 * c["hidden_size"] * c["moe_intermediate_size"]
    from llmsizer.formulas.params import count_params

    total = count_params(spec).total
    assert full == pytest.approx(4 * ((total - experts) / 8 + experts / 8), rel=1e-6)


def test_megatron_weights_text_names_mla_only_on_an_mla_model() -> None:
    def weights_text(model: str) -> str:
        est = estimate_training(load_model(model), precision="megatron-bf16", tp=2, sequence_parallel=True, gpus=2,
                                seq_len=1024)
        return next(it.formula for it in est.items if it.name == "weights")

    assert "MLA" not in weights_text("qwen3-30b-a3b") and "MoE routers" in weights_text("qwen3-30b-a3b")
    assert "MLA down-projections" in weights_text("deepseek-v3")

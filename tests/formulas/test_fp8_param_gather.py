"""Megatron's ``fp8_param_gather``: the te linears' weights as TransformerEngine float8 parameters
(formulas/float8_training.py eq. T3, ``fp8_param_bytes``; ``TrainingWorkload.fp8_params``).

TE does not run on a CPU, so the truth is the cited code, counted by hand for a tiny Llama config written out here:
- the parameter is a Float8Tensor made at init under ``fp8_model_init`` (Megatron-LM @d98e8a64 core/fp8_utils.py
  lines 865-881; TE @d0067d0d pytorch/module/base.py lines 1838-1865); Megatron's DDP buffer stores it as uint8,
  1 B an element (core/distributed/param_and_grad_buffer.py lines 920-923), and all-gathers that buffer;
- after the all-gather ``post_all_gather_processing`` makes the transpose only where the GPU lacks non-TN FP8 GEMMs
  (param_and_grad_buffer.py line 343 -> fp8_utils.py lines 687-704 -> TE tensor/utils.py lines 1404-1426): + 1 B on
  Hopper (9.0), nothing on B200 (10.0; TE common/transformer_engine.cpp lines 1191-1203);
- ``quantize_weight`` hands the parameter to the GEMM as it is (TE module/base.py lines 835-845): no workspace copy;
- the distributed optimizer keeps its fp32 main shard and the fp32 gradient buffer unchanged (optimizer/
  distrib_optimizer.py lines 428-445; param_and_grad_buffer.py line 924, grad dtype fp32) and casts its own
  1/dp shard once per step (distrib_optimizer.py lines 2824-2853);
- the flag needs the distributed optimizer (training/arguments.py lines 1095-1097).
"""

from __future__ import annotations

from typing import Any

import pytest

from cli_capture import run
from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs.training import TrainingWorkload

# a tiny Llama: hidden 256, 4 heads of 64 (2 KV heads), FFN 512, 2 layers
H, HEADS, KV, HEAD_DIM, FFN, LAYERS, V = 256, 4, 2, 64, 512, 2, 1024
TINY = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, num_attention_heads=HEADS,
            num_key_value_heads=KV, intermediate_size=FFN, num_hidden_layers=LAYERS, vocab_size=V,
            max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False, torch_dtype="bfloat16",
            hidden_act="silu", rope_theta=500000.0)
Q, KVW = HEADS * HEAD_DIM, KV * HEAD_DIM
WEIGHTS = H * Q + 2 * H * KVW + Q * H + 3 * H * FFN  # one layer's te linears: q, k, v, o, gate, up, down
GPUS, SEQ = 8, 1024
MEGATRON = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=SEQ,
                float8=True, float8_recipe="transformer-engine-current", gpus=GPUS)


@pytest.fixture(scope="module")
def spec():
    return spec_from_config(TINY, name="tiny-llama-hand")


def _items(spec, device: str, on: bool) -> dict[str, int]:
    est = estimate_training(spec, device=device, fp8_param_gather=on, **MEGATRON)  # type: ignore[arg-type]
    out = {i.name: i.bytes for i in est.items if i.location == "device"}
    out["TOTAL"] = int(est.total("device")[1])
    return out


# bytes per te linear weight element by hand: (bf16 parameter, TE's workspace copy) without the flag; (uint8 data,
# transpose) with it
@pytest.mark.parametrize("device,without,with_", [("h100-sxm", (2, 1 + 1), (1, 1)), ("b200", (2, 1), (1, 0))])
def test_bytes_per_linear_weight_element(spec, device: str, without: tuple[int, int], with_: tuple[int, int]) -> None:
    off, on = _items(spec, device, False), _items(spec, device, True)
    n = LAYERS * WEIGHTS  # ZeRO-1: the parameters are not sharded, only the optimizer's states
    assert off["fp8_weight_copies"] == n * without[1]
    assert on.get("fp8_weight_copies", 0) == 0
    assert off["weights"] - on["weights"] == n * (without[0] - sum(with_))
    for name in ("master_weights", "gradients", "optimizer_states"):  # the optimizer's side is unchanged
        assert on.get(name) == off.get(name), name
    # both are held the whole step: the peak falls by the same bytes, 2 B a linear weight element on either GPU
    assert off["TOTAL"] - on["TOTAL"] == n * (sum(without) - sum(with_)) == 2 * n


def test_default_is_megatron_lms_flag_default_off_and_names_both_sources(spec) -> None:
    """review21 D4: Megatron-LM's ``--fp8-param-gather`` is ``action='store_true'`` (Megatron-LM @d98e8a64
    megatron/training/arguments.py line 2016), so a pretrain_gpt.py run without the flag keeps bf16 weights and TE's
    float8 copies; only Megatron-Bridge's float8 recipes set ``fp8_param_gather = True`` (mixed_precision.py @f9b6319e
    lines 223, 294). The default is Megatron-LM's -- the estimate equals the one with the flag off -- and the named
    assumption cites both."""
    est = estimate_training(spec, device="h100-sxm", **MEGATRON)  # type: ignore[arg-type]
    a = next(a for a in est.assumptions if a.name == "fp8_param_gather")
    assert a.value is False and a.default
    assert "arguments.py line 2016" in a.why and "mixed_precision.py @f9b6319e lines 223, 294" in a.why
    assert "--fp8-param-gather" in a.why
    assert int(est.total("device")[1]) == _items(spec, "h100-sxm", False)["TOTAL"] != _items(spec, "h100-sxm", True)["TOTAL"]
    off = dict(MEGATRON, zero=0)  # no distributed optimizer: Megatron refuses the flag, so the default is off
    est0 = estimate_training(spec, device="h100-sxm", **off)  # type: ignore[arg-type]
    a0 = next(a for a in est0.assumptions if a.name == "fp8_param_gather")
    assert a0.value is False and "distributed optimizer" in a0.why


def _duration(spec, on: bool, **kw: Any):
    dev = builtin_catalog().devices["h100-sxm"]
    return training_duration_for(spec, dev, GPUS, 1e6, dict(MEGATRON, fp8_param_gather=on, **kw))


def test_no_forward_weight_cast_only_the_optimizers_shard(spec) -> None:
    # eq. F3c's weight terms per element (read bf16 c = 2, write data and transpose 2, the amax read c = 2): once a
    # micro-batch without the flag (k = 1, the first micro-batch refreshes the workspace), 1/dp of it with it
    def per_token(r) -> float:
        return next(a.value for a in r.assumptions if a.name == "float8_cast_bytes_per_token")

    per_weight = 2 + 2 + 2
    drop = per_token(_duration(spec, False)) - per_token(_duration(spec, True))
    assert drop == pytest.approx(LAYERS * per_weight * WEIGHTS * (1 - 1 / GPUS) / SEQ, abs=2)


def test_param_all_gather_moves_one_byte_per_linear_weight_element(spec) -> None:
    # pure data parallelism under the distributed optimizer: the updated parameters all-gathered in their storage
    # dtype, bf16 (2 B) without the flag, the uint8 buffer (1 B) for the te linears' weights with it; a ring moves
    # (n - 1) / n of them
    off, on = _duration(spec, False), _duration(spec, True)
    assert off.step is not None and on.step is not None
    assert off.step.comm_bytes_per_step - on.step.comm_bytes_per_step == pytest.approx(
        LAYERS * WEIGHTS * (2 - 1) * (GPUS - 1) / GPUS)


@pytest.mark.parametrize("fields", [
    dict(precision="bf16-mixed", float8=True, float8_recipe="transformer-engine", zero=1),  # not Megatron
    dict(precision="megatron-bf16", float8=True, float8_recipe="torchao", zero=1),  # not TE
    dict(precision="megatron-bf16", float8=False, zero=1),  # no float8
    dict(precision="megatron-bf16", float8=True, float8_recipe="transformer-engine", zero=0),  # no dist. optimizer
])
def test_flag_refused_outside_megatron_te_float8(fields: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="fp8_param_gather"):
        TrainingWorkload(method="full", fp8_param_gather=True, **fields)
    TrainingWorkload(method="full", fp8_param_gather=False, **fields)  # saying no is always allowed


def test_cli_refuses_the_flag_with_one_line_exit_2() -> None:
    code, out, err = run("train", "meta-llama/Llama-3.1-8B", "--precision", "bf16-mixed", "--fp8-param-gather")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--fp8-param-gather" in err
    code, _, err = run("train", "meta-llama/Llama-3.1-8B", "--precision", "megatron-bf16", "--float8",
                       "--float8-recipe", "transformer-engine", "--fp8-param-gather")  # zero 0
    assert code == 2 and len(err.strip().splitlines()) == 1 and "zero >= 1" in err


def test_model_parallel_gather_moves_the_linears_at_one_byte(spec) -> None:
    # tp 2 of 8 GPUs: 4 replicas. Eq. (P5) times the distributed optimizer's reduce-scatter and all-gather as two
    # rings of 2 B elements (estimate/duration.py reduced_grad_bytes under zero >= 1), the bf16 parameters' size; the
    # flag's all-gather moves the te linears' weights at 1 B (the uint8 buffer), each device its tp share, the ring
    # (dp - 1) / dp of them
    off, on = _duration(spec, False, tp=2), _duration(spec, True, tp=2)
    assert off.step is not None and on.step is not None
    assert off.step.model_parallel is not None and on.step.model_parallel is not None
    dp = GPUS // 2
    assert off.step.model_parallel.dp_bytes - on.step.model_parallel.dp_bytes == pytest.approx(
        LAYERS * WEIGHTS * (dp - 1) / dp * (2 - 1) / 2)

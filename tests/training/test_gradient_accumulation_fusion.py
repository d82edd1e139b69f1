"""Megatron's gradient_accumulation_fusion (issue #12, training throughput).

Unfused, Megatron's DDP backward hook adds each micro-batch's model-dtype ``param.grad`` into the ``main_grad``
buffer (NVIDIA/Megatron-LM @d98e8a64 megatron/core/distributed/distributed_data_parallel.py:575-578,
``param.main_grad.add_(param.grad.data)``): formulas/optimizer_step.py eq. (O3m). Fused (Megatron-LM's and
Megatron-Bridge's default, gpt_provider.py:197 @f9b6319e), TE's wgrad GEMMs accumulate into ``main_grad``
themselves (transformer_engine.py:1293/1524/2527 @d98e8a64: ``fuse_wgrad_accumulation``) and that pass runs only over
the parameters outside those linears (review18 D5): the hook skips the add only where a layer set
``grad_added_to_main_grad`` (distributed_data_parallel.py:184-187, :575-578), which only the wgrad-fused linears do
(tensor_parallel/layers.py:733-762), so the word embedding, the norm weights and an MoE router still pay it.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.optimizer_step import accumulation_bytes, megatron_accumulation_bytes
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload
from llmsizer.validation_cases import MEGATRON_BRIDGE_RUNS

torch = pytest.importorskip("torch")

# Llama 3.1 8B's parameters (meta-llama/Llama-3.1-8B safetensors index: 8,030,261,248), every one trained
LLAMA31_8B_PARAMS = 8_030_261_248
# its parameters outside the linears, from its config.json (vocab_size 128256, hidden_size 4096, 32 layers): the
# embedding table and the 2 RMSNorm weights per layer plus the final one
LLAMA31_8B_UNFUSED = 128_256 * 4096 + (2 * 32 + 1) * 4096
_DENSE = dict(method="full", optimizer="adamw", zero=1, micro_batch=1, seq_len=4096, grad_accumulation=8)


def _hook_bytes(main_dtype: Any, grad_dtype: Any) -> int:
    """Bytes per element Megatron's hook moves, from the tensors it touches: ``main_grad.add_(grad)`` on CPU reads
    both and writes ``main_grad`` in place, in its own dtype."""
    n = 1024
    main = torch.full((n,), 1.5, dtype=main_dtype)
    grad = torch.full((n,), 0.25, dtype=grad_dtype)
    ptr = main.data_ptr()
    main.add_(grad)
    assert main.data_ptr() == ptr and main.dtype == main_dtype  # written in place, in the buffer's dtype
    assert torch.equal(main, torch.full((n,), 1.75, dtype=main_dtype))
    return (2 * main.nbytes + grad.nbytes) // n


@pytest.mark.parametrize(("main_dtype", "grad_dtype"), [("float32", "bfloat16"), ("float16", "float16"),
                                                        ("bfloat16", "bfloat16")])
def test_megatron_hook_bytes_are_the_tensors_it_touches(main_dtype: str, grad_dtype: str) -> None:
    m, g = getattr(torch, main_dtype), getattr(torch, grad_dtype)
    got = megatron_accumulation_bytes(torch.empty(0, dtype=m).element_size(), torch.empty(0, dtype=g).element_size())
    assert got == _hook_bytes(m, g)
    with pytest.raises(InputError):
        megatron_accumulation_bytes(-1.0, 2.0)


@pytest.mark.parametrize(("precision", "main_dtype", "grad_dtype"), [
    # megatron-bf16: the bf16 model's gradient into an fp32 main_grad (the recipe's 4 B gradient, Megatron-LM README
    # "Distributed Optimizer"); megatron-fp16: fp16 into the fp16 buffer (no fp32 accumulation)
    ("megatron-bf16", "float32", "bfloat16"), ("megatron-fp16", "float16", "float16")])
def test_unfused_pass_is_the_hook_over_every_gradient_element(precision: str, main_dtype: str,
                                                              grad_dtype: str) -> None:
    """--no-gradient-accumulation-fusion: the pass of each micro-batch after the first moves the hook's bytes over every
    element of the gradient buffer (the distributed optimizer shards states, not ``main_grad``) at the memory-bound
    bandwidth; fused it is 0 and the step is shorter by exactly (k - 1) of those passes."""
    spec, dev = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    fields = dict(_DENSE, precision=precision)
    off = training_duration_for(spec, dev, 8, 1e9, dict(fields, gradient_accumulation_fusion=False))
    on = training_duration_for(spec, dev, 8, 1e9, fields)
    assert off.step is not None and on.step is not None
    rate = float(dev.memory_bandwidth.base) * E.memory_bound_bandwidth("gpu").expected
    hook = _hook_bytes(getattr(torch, main_dtype), getattr(torch, grad_dtype))
    assert off.step.accumulation_seconds * rate == pytest.approx(LLAMA31_8B_PARAMS * hook, rel=1e-12)
    # fused: the hook still adds the embedding's and the norms' gradients (ZeRO-1: main_grad is not sharded)
    assert on.step.accumulation_seconds * rate == pytest.approx(LLAMA31_8B_UNFUSED * hook, rel=1e-12)
    assert {a.name: a.value for a in on.assumptions}["unfused_accumulation_elements"] == LLAMA31_8B_UNFUSED
    # Llama 3.1 8B: 32 layers x 4 linear weights (linear_qkv, linear_proj, linear_fc1, linear_fc2: Megatron's fused
    # q/k/v and gate/up), config.json num_hidden_layers 32; + 1: tie_word_embeddings false, so the output layer's own
    # weight (a ColumnParallelLinear, Megatron-LM @d7288711 gpt_model.py lines 244-260) is added by the hook when
    # unfused. The embedding's and the final norm's adds run either way: not in the difference.
    _removes_exactly_the_passes(on, off, 8, hook_launches=32 * 4 + 1)
    fused = {a.name: a for a in on.assumptions}["gradient_accumulation_fusion"]
    assert fused.value is True and fused.default and "arguments.py:2944-2948" in fused.why
    assert {a.name: a for a in off.assumptions}["gradient_accumulation_fusion"].value is False


def _removes_exactly_the_passes(on: Any, off: Any, k: int, hook_launches: int | None = None) -> None:
    """The fused step is the unfused one less (k - 1) times the part of the accumulation pass the fusion removes,
    every other term the same but the host's launches: unfused, Megatron DDP's backward hook launches one
    ``main_grad.add_`` per linear weight (formulas/megatron_layer_kernels.py eq. K12h; Megatron-LM @d7288711
    distributed_data_parallel.py lines 441-444), ``hook_launches`` more per micro-step where given,
    hidden here behind the device's time (eq. K1), so the step moves by the passes alone."""
    removed = off.step.accumulation_seconds - on.step.accumulation_seconds
    assert off.step.step_seconds - on.step.step_seconds == pytest.approx((k - 1) * removed, rel=1e-9)
    for part in ("compute_seconds", "comm_seconds", "optimizer_seconds", "elementwise_seconds"):
        assert getattr(on.step, part) == getattr(off.step, part), part
    added = off.step.launch_seconds - on.step.launch_seconds
    if hook_launches is None:
        assert added > 0.0
    else:
        assert added == pytest.approx(hook_launches * E.HOST_SECONDS_PER_KERNEL.expected, rel=1e-9)


def test_bridge_gpt_oss_row_loses_exactly_the_pass() -> None:
    """PM1361 (GPT-OSS-120B, 64 x H100, PP 4, 80 micro-batches): its recipe leaves the fusion at Bridge's default, so the
    row runs fused; stating it off puts back 79 passes of eq. (O3m) and nothing else."""
    model, device, fields, _ = MEGATRON_BRIDGE_RUNS["PM1361"]
    assert "gradient_accumulation_fusion" not in fields
    spec, dev = load_model(model), builtin_catalog().devices[device]
    on = training_duration_for(spec, dev, fields["gpus"], 1e9, fields)
    off = training_duration_for(spec, dev, fields["gpus"], 1e9, dict(fields, gradient_accumulation_fusion=False))
    assert on.step is not None and off.step is not None and on.step.model_parallel is not None
    assert 0.0 < on.step.accumulation_seconds < off.step.accumulation_seconds
    # fused, what is left is the embedding, the norms and the routers (gpt-oss-120b config.json: vocab 201088,
    # hidden 2880, 36 layers of 128 experts, each router a 128 x 2880 weight and a 128 bias)
    unfused = 201_088 * 2880 + (2 * 36 + 1) * 2880 + 36 * (128 * 2880 + 128)
    assert {a.name: a.value for a in on.assumptions}["unfused_accumulation_elements"] == unfused
    assert on.step.model_parallel.step_seconds == off.step.model_parallel.step_seconds
    _removes_exactly_the_passes(on, off, fields["grad_accumulation"])


def test_the_field_is_megatron_only() -> None:
    """True outside the megatron precisions is refused, naming the field (torch autograd, FSDP and DeepSpeed add
    into .grad with a separate pass: eq. (O3)); False and None there keep eq. (O3)."""
    with pytest.raises(InputError, match="gradient_accumulation_fusion.*megatron-bf16"):
        TrainingWorkload(precision="bf16-mixed", gradient_accumulation_fusion=True)
    with pytest.raises(InputError, match="gradient_accumulation_fusion"):
        TrainingWorkload(precision="megatron-bf16", gradient_accumulation_fusion="yes")  # type: ignore[arg-type]
    assert TrainingWorkload(precision="megatron-fp16").accumulation_fused
    assert not TrainingWorkload(precision="megatron-bf16", gradient_accumulation_fusion=False).accumulation_fused
    assert not TrainingWorkload(precision="bf16-mixed", gradient_accumulation_fusion=False).accumulation_fused
    spec, dev = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    plain = training_duration_for(spec, dev, 8, 1e9, dict(_DENSE, precision="bf16-mixed", zero=0))
    assert plain.step is not None
    rate = float(dev.memory_bandwidth.base) * E.memory_bound_bandwidth("gpu").expected
    assert plain.step.accumulation_seconds * rate == pytest.approx(LLAMA31_8B_PARAMS * accumulation_bytes(4.0),
                                                                   rel=1e-12)
    assert "gradient_accumulation_fusion" not in {a.name for a in plain.assumptions}


def test_gpt_oss_20b_unfused_launches_are_the_hooks_of_its_weights() -> None:
    """Eq. K12h's count, exact (not only positive): gpt-oss-20b under Bridge's gpt-oss recipe fields on 8 x H100 at
    EP 8, one micro-batch after another. Unfused, Megatron-Core's DDP backward hook runs one ``param.main_grad.add_(
    param.grad.data)`` per trained parameter (NVIDIA/Megatron-LM @d7288711 megatron/core/distributed/
    distributed_data_parallel.py lines 441-444); fused, the wgrad-fused linears mark ``grad_added_to_main_grad`` and are
    skipped (TransformerEngine linear.py lines 1287-1289, grouped_linear.py lines 1237-1239). So the fusion removes,
    per micro-step, one launch per linear weight: in each of gpt-oss-20b's 24 layers (config.json num_hidden_layers 24)
    ``linear_qkv`` and ``linear_proj`` (Megatron's fused q/k/v) and, in its GroupedLinear experts, ``weight{i}`` of fc1
    and of fc2 per local expert (grouped_linear.py line 1453: num_local_experts 32 / EP 8 = 4 each); + 1 for the output
    layer's own weight (tie_word_embeddings false; gpt_model.py lines 244-260). The norms, biases, router and sinks
    add either way: not in the difference."""
    spec, dev = load_model("gpt-oss-20b"), builtin_catalog().devices["h100-sxm"]
    kw = {k: v for k, v in MEGATRON_BRIDGE_RUNS["PM1361"][2].items()
          if k not in ("network", "gpus", "pp", "grad_accumulation")}
    fields = dict(kw, ep=8, grad_accumulation=4)
    on = training_duration_for(spec, dev, 8, 1e9, fields)
    off = training_duration_for(spec, dev, 8, 1e9, dict(fields, gradient_accumulation_fusion=False))
    assert on.step is not None and off.step is not None
    layers, local = 24, 32 // 8
    assert (spec.num_layers, spec.moe.num_experts if spec.moe else 0, spec.tie_word_embeddings) == (layers, 32, False)
    _removes_exactly_the_passes(on, off, 4, hook_launches=layers * (2 + 2 * local) + 1)

"""The kernel count of a whole training step (estimate/duration.py kernels_per_micro_step; formulas/launch_overhead.py
eqs. K2/K3, K2', K6, K6a) against a real one.

Independent truth: the measure worker's step (measure/workloads.py ``training_step``: forward with ``labels``, the
loss's backward, ``opt.step()``, ``opt.zero_grad(set_to_none=True)``) of a tiny transformers Qwen2 (tied embeddings,
q/k/v biases, random weights, CPU, SDPA) prepared as the worker prepares it (``use_cache`` off, non-reentrant
checkpointing, PEFT LoRA on every linear with dropout 0), run under a ``TorchDispatchMode`` that counts every aten
op that launches a kernel (views, aliases and pure allocations launch none). AdamW is forced to its CUDA default,
foreach (torch/optim/optimizer.py ``_default_to_fused_or_foreach`` L161-186: foreach only where every parameter is
on a device of torch/utils/_foreach_utils.py L8-10, which excludes the CPU). The step is traced at 1 and 2 decoder
layers: the difference is one layer's forward + backward (+ recompute), the rest is what lies outside the layers.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from llmsizer.estimate.duration import kernels_per_micro_step  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided", "_record_function_enter_new", "_record_function_exit"}
CFG = dict(hidden_size=128, intermediate_size=344, num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
           tie_word_embeddings=True, max_position_embeddings=512)
BATCH, SEQ, RANK = 2, 32, 8
# transformers' packed-sequence check of a forward without attention mask or cache (masking_utils.py
# ``find_packed_sequence_indices`` L756-761 @5.24.0, called at L865-870): ``position_ids[:, :1] - 1``, ``diff``
# (``cat`` + ``sub``), ``!= 1``, ``cumsum``, ``== 0``, ``all`` and its read back to the host: 8 ops the estimate
# leaves out (a run with ``use_cache`` on builds a DynamicCache instead, which skips it)
PACKED_CHECK = 8
# tied embeddings: the head's weight gradient and the embedding's accumulate into one ``.grad`` (an ``add``)
TIED_GRAD_ADD = 1
# what is left outside the layers: the estimate's loss backward counts two zero fills (formulas/launch_overhead.py
# head_kernels) that a CPU dispatch trace does not show as ops, against the ``contiguous`` copy of the shifted labels
# and the rotary tables' inventory; not reconciled further, bounded here
OUTSIDE_RESIDUAL = 3


def _config(family: str, layers: int) -> Any:
    """A tiny config of ``family``: 'qwen2', or 'phi3' (transformers' Phi-3: one fused qkv_proj sliced into q/k/v,
    one gate_up_proj chunked, the rotary's pass-through ``cat``; pad token inside the tiny vocabulary)."""
    if family == "phi3":
        return transformers.Phi3Config(**CFG, num_hidden_layers=layers, pad_token_id=0, attn_implementation="sdpa")
    return transformers.Qwen2Config(**CFG, num_hidden_layers=layers, attn_implementation="sdpa")


def _step_ops(method: str, ckpt: bool, precision: str, layers: int,
              family: str = "qwen2") -> dict[str, collections.Counter[str]]:
    """Kernel-launching aten ops of the third step, by phase (forward, backward, optimizer, zero_grad)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.manual_seed(0)
    conf = _config(family, layers)
    model = (transformers.Phi3ForCausalLM if family == "phi3" else transformers.Qwen2ForCausalLM)(conf)
    mixed = precision == "bf16-mixed"
    # a full fine-tune under autocast keeps fp32 weights; a LoRA base is bf16 either way (the worker's base_dtype)
    model = (model if mixed and method == "full" else model.to(torch.bfloat16)).train()
    if method == "qlora":  # the worker's NF4 base (double quantization, bf16 compute), every linear but the head
        from llmsizer.measure.build import quantize_4bit

        # quantize_4bit marks the model is_loaded_in_4bit as transformers' bitsandbytes loader does, so PEFT wraps
        # each Linear4bit in its bitsandbytes LoRA layer (tests/measure/test_measure_qlora_peft.py checks it)
        quantize_4bit(model, device="cpu", compute_dtype="bf16", double_quant=True)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    if method in ("lora", "qlora"):
        cfg = peft.LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules="all-linear", lora_dropout=0.0,
                              bias="none", task_type="CAUSAL_LM")
        # the measure worker's choice (measure/workloads.py prepare_training): PEFT's default fp32 adapters under
        # mixed precision, the base dtype in pure half precision
        model = peft.get_peft_model(model, cfg, autocast_adapter_dtype=mixed)
        if ckpt:
            model.enable_input_require_grads()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, foreach=True)
    ids = torch.randint(0, CFG["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    phase = ["fwd"]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if not func.is_view and name not in NO_KERNEL:  # ones_like included: the loss's backward seed
                ops[phase[0]][name] += 1
            return out

    for _step in range(3):  # the third step runs with the optimizer state allocated, as the timed steps do
        ops.clear()
        with Count(), _autocast_query_of_this_device():  # the backward too: a checkpoint's recompute asks again
            phase[0] = "fwd"
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                loss = model(input_ids=ids, labels=ids).loss
            phase[0] = "bwd"
            loss.backward()
            del loss
            phase[0] = "opt"
            opt.step()
            phase[0] = "zero"
            opt.zero_grad(set_to_none=True)
    return ops


@contextlib.contextmanager
def _autocast_query_of_this_device() -> Iterator[None]:
    """``torch.is_autocast_enabled()`` without a device reads CUDA's autocast state: False inside this CPU region,
    True inside the CUDA region of a real run. PEFT's bitsandbytes LoRA branches on it (peft tuners/lora/bnb.py:543
    @5d602fdb), so the trace answers it with this device's state, as a CUDA run's would."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not torch.is_autocast_enabled() and torch.is_autocast_enabled("cpu")  # the premise
    query = torch.is_autocast_enabled
    torch.is_autocast_enabled = lambda *dev: query(*dev) if dev else query("cpu")
    try:
        yield
    finally:
        torch.is_autocast_enabled = query


def _estimate(method: str, ckpt: bool, precision: str, layers: int, family: str = "qwen2") -> int:
    spec = spec_from_config(_config(family, layers).to_dict(), name=f"tiny-{family}")
    fields: dict[str, Any] = dict(method=method, micro_batch=BATCH, seq_len=SEQ, precision=precision,
                                  grad_checkpointing="full" if ckpt else "none")
    if method in ("lora", "qlora"):
        fields.update(rank=RANK, targets=("all-linear",))
    return kernels_per_micro_step(spec, TrainingWorkload(**fields))


CASES = [("full", False, "bf16"), ("full", True, "bf16"), ("lora", False, "bf16"), ("lora", True, "bf16"),
         ("full", False, "bf16-mixed"), ("full", True, "bf16-mixed"), ("lora", False, "bf16-mixed"),
         ("lora", True, "bf16-mixed")]


@pytest.mark.parametrize(("method", "ckpt", "precision"), CASES)
def test_step_kernels_equal_a_traced_training_step(method: str, ckpt: bool, precision: str) -> None:
    """Per decoder layer (forward, backward and the early-stopped recompute, eqs. K2/K3/K2'; the autocast casts of
    eq. K6 under bf16-mixed, of eq. K6a for a LoRA step's fp32 adapters over its bf16 base) the estimate's count
    equals the traced step's exactly; outside the layers (embedding, rotary tables, final norm, head, loss) it is
    within OUTSIDE_RESIDUAL of it once transformers' packed-sequence check and the tied embedding's gradient sum are
    added. LoRA without
    checkpointing: autograd also prunes the first layer's input gradient (nothing before it trains), which the
    estimate keeps, so there it may only over-count."""
    one, two = (_step_ops(method, ckpt, precision, n) for n in (1, 2))
    traced = {n: sum(o["fwd"].values()) + sum(o["bwd"].values()) for n, o in ((1, one), (2, two))}
    est = {n: _estimate(method, ckpt, precision, n) for n in (1, 2)}
    assert traced[2] - traced[1] == est[2] - est[1], (traced, est)
    outside_traced = 2 * traced[1] - traced[2]
    outside_est = 2 * est[1] - est[2] + PACKED_CHECK + (TIED_GRAD_ADD if method == "full" else 0)
    if method == "lora" and not ckpt:
        assert outside_traced <= outside_est + OUTSIDE_RESIDUAL, (outside_traced, outside_est)
    else:
        assert abs(outside_traced - outside_est) <= OUTSIDE_RESIDUAL, (outside_traced, outside_est)
    # the packed-sequence check is the named difference: its ops are in the traced forward
    for op in ("cumsum", "ne", "all", "_local_scalar_dense"):
        assert two["fwd"][op] >= 1, op


@pytest.mark.parametrize(("method", "ckpt", "precision"), [("full", False, "bf16"), ("lora", False, "bf16"),
                                                           ("full", False, "bf16-mixed"), ("full", True, "bf16-mixed"),
                                                           ("lora", True, "bf16-mixed")])
def test_fused_linears_equal_a_traced_phi3_step(method: str, ckpt: bool, precision: str) -> None:
    """A layer with fused linears (transformers' Phi-3: qkv_proj sliced into q/k/v, gate_up_proj chunked, the
    rotary's pass-through ``cat``, the copied attention output; formulas/launch_overhead.py LayerCode): per decoder
    layer the estimate's count equals the traced step's exactly -- one GEMM and one adapter per fused linear, its
    parts' gradients gathered (three ``slice_backward`` and two ``add`` for q/k/v, one ``cat`` for gate/up). Before
    the fused linears were counted as separate ones, LoRA's layer was 168 kernels against the traced 142."""
    one, two = (_step_ops(method, ckpt, precision, n, "phi3") for n in (1, 2))
    traced = sum(two["fwd"].values()) + sum(two["bwd"].values()) - sum(one["fwd"].values()) - sum(one["bwd"].values())
    assert two["fwd"]["mm"] - one["fwd"]["mm"] == (4 if method == "full" else 12)  # the premise: 4 fused-layer GEMMs
    assert traced == _estimate(method, ckpt, precision, 2, "phi3") - _estimate(method, ckpt, precision, 1, "phi3")


@pytest.mark.parametrize("ckpt", [False, True])
def test_qlora_autocast_casts_equal_a_traced_step(ckpt: bool) -> None:
    """Eq. K6a over PEFT's bitsandbytes NF4 layers (QLoRA as transformers' BitsAndBytesConfig loads it: the worker's
    quantize_4bit base marked is_loaded_in_4bit, PEFT's fp32 adapters under bf16-mixed, bf16 ones under bf16; the
    measure worker itself does not mark it, so its runs take PEFT's plain lora.Linear: validation_cases.py's
    KNOWN_MISSES comment): per decoder layer, the bf16-mixed step's kernels less the bf16 step's
    are the estimate's difference exactly (the weight casts and their gradients' only: PEFT's bitsandbytes forward
    skips the input cast under autocast; the dequantization kernels, which a CPU backend runs differently from
    CUDA's eq. K5, are the same in both and cancel)."""
    per_layer = {}
    for precision in ("bf16", "bf16-mixed"):
        one, two = (_step_ops("qlora", ckpt, precision, n) for n in (1, 2))
        traced = sum(two["fwd"].values()) + sum(two["bwd"].values()) - sum(one["fwd"].values()) - sum(
            one["bwd"].values())
        est = _estimate("qlora", ckpt, precision, 2) - _estimate("qlora", ckpt, precision, 1)
        per_layer[precision] = traced, est
    traced_casts = per_layer["bf16-mixed"][0] - per_layer["bf16"][0]
    assert traced_casts == per_layer["bf16-mixed"][1] - per_layer["bf16"][1] > 0, per_layer


@pytest.mark.parametrize("method", ["full", "lora"])
def test_foreach_adamw_step_is_nine_foreach_ops_and_two_host_reads_per_parameter(method: str) -> None:
    """The optimizer step the count leaves out (formulas/launch_overhead.py, module docstring): torch's foreach
    AdamW runs 9 ``_foreach_*`` ops over all parameters (one on the CPU ``step`` counters) and reads each parameter's CPU ``step`` twice
    (``_local_scalar_dense``: host only); ``zero_grad(set_to_none=True)`` launches nothing."""
    ops = _step_ops(method, False, "bf16", 2)
    n_params = 2 * 7 * 2 if method == "lora" else 2 * 12 + 2  # LoRA A/B per linear; 12 per layer + embedding, norm
    foreach = {k: v for k, v in ops["opt"].items() if k.startswith("_foreach_")}
    assert sum(foreach.values()) == 9, foreach
    assert ops["opt"]["_local_scalar_dense"] == 2 * n_params
    assert sum(ops["opt"].values()) == 9 + 2 * n_params
    assert sum(ops["zero"].values()) == 0


def test_gptq_qlora_step_adds_the_unpacking_of_each_quantized_linear_per_forward_pass() -> None:
    """Qwen-7B's Q-LoRA step over the Int4 GPTQ checkpoint (PM0726) against its LoRA step over the fp16 base in pure
    half precision (DeepSpeed's fp16 engine halves the model and runs no autocast: neither casts an adapter's input;
    peft v0.5.0 tuners/lora.py:1260-1268). The difference counted by hand from the two sources: Qwen's remote code has
    5 linears a layer (c_attn with a bias, attn c_proj, w1, w2, mlp c_proj; modeling_qwen.py at zhangningboo/Qwen-7B
    @ffe04dd5), each an auto-gptq QuantLinear unpacking in 9 kernels at >= 128 rows, its bias a separate add
    (qlinear_cuda_old.py:231-271 @ef442d9f), in the forward and in the reentrant checkpoint's recompute of every
    layer (the saved fp16 weight serves the backward): 2 x 32 x (5 x 9 + 1)."""
    from llmsizer.estimate.duration import kernels_per_micro_step
    from llmsizer.estimate.training.compose import training_workload
    from llmsizer.validation_cases import framework_attention, qwen7b_spec

    common = dict(rank=64, targets="all-linear", precision="fp16", micro_batch=1, seq_len=256, grad_accumulation=8,
                  grad_checkpointing="full", checkpoint_impl="reentrant", lora_dropout="per-module",
                  **framework_attention("qwen"))
    # the row's fields (fp16-mixed: the estimate's QLoRA takes no pure fp16 recipe; over GPTQ it counts no cast)
    gptq = kernels_per_micro_step(qwen7b_spec(True), training_workload(dict(common, method="qlora",
                                                                            precision="fp16-mixed")))
    lora = kernels_per_micro_step(qwen7b_spec(False), training_workload(dict(common, method="lora")))
    assert gptq - lora == 2 * 32 * (5 * 9 + 1)

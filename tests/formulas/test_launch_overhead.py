"""Kernel counts of a training step (formulas/launch_overhead.py eqs. K2/K3), against real PyTorch (#12).

Independent truth: a transformers Llama decoder layer (random weights, CPU, bf16) runs forward and backward under a
``TorchDispatchMode`` that counts every aten op that launches a kernel: views and aliases (``func.is_view``, detach)
and pure allocations (``empty*``) launch none. The backward seed (``ones_like`` of the output) is the test's, not
the layer's, and is left out. A LoRA case wraps the same layer with PEFT (dropout 0: the identity, no kernel); the
loss head is traced the same way. The counts must be equal, not close: each is an integer inventory.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from inductor_nodes import inductor_nodes  # noqa: E402
from test_elementwise_traffic import _run_layer  # noqa: E402

from llmsizer.errors import InputError  # noqa: E402
from llmsizer.formulas.elementwise_traffic import LayerWidths  # noqa: E402
from llmsizer.formulas.launch_overhead import (  # noqa: E402
    NF4_FUSED_MAX_ROWS,
    NF4_FUSED_MAX_ROWS_OTHER,
    gptq_linear_kernels,
    head_kernels,
    host_seconds,
    layer_kernels,
    nf4_fused_max_rows,
    nf4_linear_kernels,
    overlapped_seconds,
    rmsnorm_kernels,
    step_kernels,
)

NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided"}
CFG = dict(hidden_size=128, intermediate_size=344, num_attention_heads=4, num_key_value_heads=2)
BASE = ["q", "k", "v", "o", "gate", "up", "down"]


def _kernels(run: Any) -> tuple[int, int]:
    """(forward, backward) kernels ``run`` launches; ``run`` calls ``mark()`` between forward and backward and
    returns the backward seed op count to leave out."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts = [0, 0]
    phase = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if not func.is_view and name not in NO_KERNEL and name != "ones_like":
                counts[phase[0]] += 1
            return out

    def mark() -> None:
        phase[0] = 1

    with Count():
        run(mark)
    return counts[0], counts[1]


def _layer_run(model: Any, layer: Any, tokens: int = 32) -> Any:
    x = torch.randn(1, tokens, CFG["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(tokens)[None]
    pe = tuple(p.detach() for p in model.model.rotary_emb(x, pos))

    def run(mark: Any) -> None:
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        out = out[0] if isinstance(out, tuple) else out
        mark()
        out.backward(torch.ones_like(out))
    return run


def _model() -> Any:
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(**CFG, num_hidden_layers=1, vocab_size=256, attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(conf).to(torch.bfloat16).train()


def _widths() -> LayerWidths:
    d = CFG["hidden_size"] // CFG["num_attention_heads"]
    return LayerWidths(CFG["hidden_size"], CFG["intermediate_size"], CFG["num_attention_heads"] * d,
                       CFG["num_key_value_heads"] * d, d)


def test_eager_layer_kernels_equal_the_traced_ops() -> None:
    model = _model()
    traced = _kernels(_layer_run(model, model.model.layers[0]))
    linears = [(n, True, False) for n in BASE]
    assert layer_kernels(_widths(), linears, compiled=False, norms_trained=True) == traced == (38, 71)


@pytest.mark.parametrize("targets", [["q_proj", "v_proj"], ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                             "up_proj", "down_proj"]], ids=["qv", "all"])
def test_eager_lora_layer_kernels_equal_the_traced_ops(targets: list[str]) -> None:
    peft = pytest.importorskip("peft")
    cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets)
    pm = peft.get_peft_model(_model(), cfg, autocast_adapter_dtype=False)
    traced = _kernels(_layer_run(pm.base_model.model, pm.base_model.model.model.layers[0]))
    linears: list[tuple[str, bool, bool]] = []
    for n in BASE:
        linears.append((n, False, False))
        if n + "_proj" in targets:
            linears += [(n + " lora_A", True, False), (n + " lora_B", True, False)]
    assert layer_kernels(_widths(), linears, compiled=False, norms_trained=False) == traced


def test_rmsnorm_kernels_equal_the_traced_ops() -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    for half in (True, False):
        for trained in (True, False):
            dtype = torch.bfloat16 if half else torch.float32
            norm = LlamaRMSNorm(64).to(dtype)
            norm.weight.requires_grad_(trained)
            h = torch.randn(4, 64, dtype=dtype, requires_grad=True)
            x = h * 1  # a non-leaf input, as inside a model: its gradient flows on, not into a leaf's .grad

            def run(mark: Any, norm: Any = norm, x: Any = x) -> None:
                out = norm(x)
                mark()
                out.backward(torch.ones_like(out))
            fwd, bwd = _kernels(run)
            # the test's own `h * 1` (outside the trace) adds its `mul` backward
            assert rmsnorm_kernels(half, trained) == (fwd, bwd - 1), (half, trained)


def test_head_and_loss_kernels_equal_the_traced_ops() -> None:
    """The final norm, the untied head GEMM and ForCausalLMLoss of a real LlamaForCausalLM, its embedding frozen
    (LoRA: nothing outside the layers trains) or trained (full fine-tuning), with the decoder layer's own count
    (K2/K3) taken off the whole model's trace."""
    for trained in (False, True):
        model = _model()
        model.requires_grad_(trained)
        ids = torch.randint(0, 256, (1, 32))

        def run(mark: Any, model: Any = model, ids: Any = ids, trained: bool = trained) -> None:
            emb = model.model.embed_tokens(ids)
            h = emb.requires_grad_(True) if not trained else emb
            out = model(inputs_embeds=h, labels=ids)
            mark()
            out.loss.backward()
        fwd, bwd = _kernels(run)
        lf, lb = layer_kernels(_widths(), [(n, trained, False) for n in BASE], compiled=False,
                               norms_trained=trained)
        # forward: the embedding lookup is in `run`; backward: the embedding gradient only when it trains
        expected = head_kernels(False, trained, trained, layernorm=False)
        # + 1: the loss's backward seed (``ones_like``), which _kernels leaves out
        assert fwd + bwd + 1 - lf - lb == expected, (trained, fwd, bwd)


def test_step_is_the_longer_of_device_and_host() -> None:
    """Eq. (K1) and the step sum: recomputed forwards add K_f per checkpointed layer."""
    w = _widths()
    lin = [(n, True, False) for n in BASE]
    f, b = layer_kernels(w, lin, compiled=False, norms_trained=True)
    assert step_kernels([w, w], [lin, lin], False, True, recomputed_layers=2, head=10) == 2 * (f + b) + 2 * f + 10
    cf, cb = layer_kernels(w, lin, compiled=True, norms_trained=True)
    assert cf + cb < (f + b) / 2  # inductor fuses the pointwise ops: far fewer launches
    assert overlapped_seconds(0.08, host_seconds(7500, 20e-6)) == pytest.approx(0.15)
    assert overlapped_seconds(0.65, host_seconds(7500, 20e-6)) == 0.65


def _inductor_kernels(run: Any) -> int:
    """Kernels inductor emits over every graph compiled while ``run`` runs: its scheduler nodes (fused pointwise /
    reduction kernels and extern GEMM / attention calls), less the no-op nodes and the multi-output views of a tuple
    result, which launch nothing."""
    from torch._inductor.ir import MultiOutput
    from torch._inductor.scheduler import NopKernelSchedulerNode

    return sum(1 for node, _ in inductor_nodes(run)
               if not isinstance(node, NopKernelSchedulerNode) and not isinstance(node.node, MultiOutput))


@pytest.mark.slow
@pytest.mark.parametrize("targets", [[], ["q_proj", "v_proj"], [n + "_proj" for n in BASE]],
                         ids=["dense", "lora-qv", "lora-all"])
def test_compiled_layer_kernels_equal_inductors_kernels(targets: list[str]) -> None:
    model = _model()
    layer = model.model.layers[0]
    if targets:
        peft = pytest.importorskip("peft")
        cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets)
        pm = peft.get_peft_model(model, cfg, autocast_adapter_dtype=False)
        model, layer = pm.base_model.model, pm.base_model.model.model.layers[0]
    measured = _inductor_kernels(_run_layer(model, torch.compile(layer), 64, CFG["hidden_size"]))
    linears: list[tuple[str, bool, bool]] = []
    for n in BASE:
        linears.append((n, not targets, False))
        if n + "_proj" in targets:
            linears += [(n + " lora_A", True, False), (n + " lora_B", True, False)]
    fwd, bwd = layer_kernels(_widths(), linears, compiled=True, norms_trained=not targets)
    assert fwd + bwd == measured
    eager = sum(layer_kernels(_widths(), linears, compiled=False, norms_trained=not targets))
    assert fwd + bwd < 0.6 * eager  # the case discriminates: eager launches far more


def _nf4_linear(nested: bool) -> Any:
    """A real bitsandbytes NF4 ``Linear4bit`` (128 -> 256, bf16 compute; ``nested``: double quantization) holding a
    seeded dense layer's weight."""
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    dense = torch.nn.Linear(128, 256, bias=False).to(torch.bfloat16)
    q = bnb.nn.Linear4bit(128, 256, bias=False, compute_dtype=torch.bfloat16, compress_statistics=nested,
                          quant_type="nf4")
    q.weight = bnb.nn.Params4bit(dense.weight.data, requires_grad=False, quant_type="nf4",
                                 compress_statistics=nested)
    return q


@pytest.mark.parametrize("nested", [True, False])
def test_nf4_backward_dequantization_kernels_match_a_real_bitsandbytes_backward(nested: bool) -> None:
    """Eq. K5's backward: a real bitsandbytes ``Linear4bit`` (double quantization or not) on CPU, its backward traced
    op by op: the kernels beside the one input-gradient GEMM (``mm``) are the dequantization's. The forward's
    ``bitsandbytes::gemm_4bit`` is one opaque op here (its CUDA fallback's kernels are read from the source, ops.py
    :912-916), so only the backward is checked against the run."""
    q = _nf4_linear(nested).to("cpu")
    x = torch.randn(600, 128, dtype=torch.bfloat16, requires_grad=True)

    def run(mark: Any) -> None:
        y = q(x)
        mark()
        y.backward(torch.ones_like(y))

    _, bwd = _kernels(run)
    gemm = 1  # grad_A = grad_output @ W (MatMul4Bit.backward)
    assert bwd - gemm == nf4_linear_kernels(nested, x.shape[0])[1]


def test_nf4_forward_kernels_only_past_the_fused_kernels_rows() -> None:
    assert nf4_linear_kernels(True, 64, 64) == (0, 3)
    assert nf4_linear_kernels(True, 65, 64) == (3, 3)
    assert nf4_linear_kernels(False, 4096, 512) == (1, 1)
    with pytest.raises(InputError):
        nf4_linear_kernels(True, 0)


def _installed_bnb_heuristic() -> tuple[Any, dict[str, Any], dict[str, int]]:
    """The installed bitsandbytes' own CUDA fused-kernel choice (backends/cuda/ops.py ``_gemm_4bit_use_custom_cuda``)
    and its CUDA row caps, read from its source file: the module itself needs a CUDA build of torch to import, so the
    function's definition is compiled alone, with the GPU's (SMs, major, minor) supplied where it asks the device."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("bitsandbytes")
    if spec is None or spec.origin is None:
        pytest.skip("bitsandbytes is not installed")
    path = Path(spec.origin).parent / "backends" / "cuda" / "ops.py"
    if not path.exists():
        pytest.skip("this bitsandbytes has no backends/cuda/ops.py")
    tree = ast.parse(path.read_text())
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_gemm_4bit_use_custom_cuda"), None)
    if fn is None:
        pytest.skip("this bitsandbytes has no _gemm_4bit_use_custom_cuda (before 0.50)")
    consts: dict[str, int] = {}
    for node in ast.walk(tree):  # the first assignment of each: CUDA's branch (ROCm's follows in the else)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("_GEMM_4BIT_CUSTOM_FLOOR_M", "_gemm_4bit_custom_max_m") \
                and isinstance(node.value, ast.Constant):
            consts.setdefault(node.targets[0].id, node.value.value)
    props: dict[str, Any] = {}
    ns: dict[str, Any] = {"torch": torch, "_gpu_dispatch_props": lambda _i: props["gpu"], **consts}
    fn.decorator_list = []  # functools.cache: the GPU changes between calls here
    exec(compile(ast.Module([fn], []), str(path), "exec"), ns)  # noqa: S102 - the installed package's own code
    return ns["_gemm_4bit_use_custom_cuda"], props, consts


# (SMs, major, minor) of one GPU per compute capability the table lists (SM counts: NVIDIA's data sheets; only the
# occupancy tiers below the top one depend on them)
GPUS = {75: (40, 7, 5), 80: (108, 8, 0), 86: (84, 8, 6), 87: (16, 8, 7), 89: (128, 8, 9), 90: (132, 9, 0),
        100: (148, 10, 0), 110: (20, 11, 0), 120: (170, 12, 0), 121: (48, 12, 1)}


@pytest.mark.parametrize("capability", sorted(GPUS))
def test_nf4_fused_rows_are_the_installed_bitsandbytes_heuristics_highest(capability: int) -> None:
    """Eq. K5's fused-kernel reach (bitsandbytes 0.50) against the installed bitsandbytes' own function: over weights
    of every size class (output blocks from under one SM to several waves) the largest M at which it keeps the fused
    kernel is ``NF4_FUSED_MAX_ROWS`` for that GPU, and no M past it ever keeps it. Half precision: bf16, fp16 on sm75."""
    use_custom, props, consts = _installed_bnb_heuristic()
    assert consts["_gemm_4bit_custom_max_m"] == max(max(v) for v in NF4_FUSED_MAX_ROWS.values())
    props["gpu"] = GPUS[capability]
    dtype = torch.float16 if capability == 75 else torch.bfloat16
    ns = sorted({64 * i for i in range(1, 40)} | {int(64 * 1.25 ** j) // 64 * 64 for j in range(40)})
    ks = sorted({64 * i for i in range(1, 20)} | {int(64 * 1.3 ** j) // 64 * 64 for j in range(35)})
    steps = (1536, 1024, 768, 512, 384, 320, 256, 192, 128, 96, 64, 48, 32, 23, 16, 12, 10, 8, 7, 6, 5, 4)
    best = {"short": 0, "other": 0, "large": 0}
    for n in ns:
        for k in ks:
            cls = ("short" if 2 * k < n else "other") if n * k < 4 * 1024 * 1024 else "large"
            for m in steps:
                if m <= best[cls]:
                    break
                if use_custom(0, dtype, m, n, k):
                    while m < 1536 and use_custom(0, dtype, m + 1, n, k):
                        m += 1
                    best[cls] = m
                    break
            # the formula's cap per shape is never below the installed choice
            cap = nf4_fused_max_rows("0.50", capability, n, k)
            assert cap >= 1536 or not use_custom(0, dtype, cap + 1, n, k), (n, k)
    assert (best["short"], best["other"], best["large"]) == NF4_FUSED_MAX_ROWS[capability]


def test_nf4_fused_rows_by_release() -> None:
    """Before 0.50 the forward always dequantizes (0.42.0 _functions.py:516 .. 0.49.2 :315): no fused rows; an
    unlisted GPU takes the fallback ladder; pre-Turing the SIMT kernel only (M < 8)."""
    assert nf4_fused_max_rows("0.42", 90, 1536, 1536) == 0
    assert nf4_fused_max_rows("0.43-0.49", 80, 8192, 8192) == 0
    assert nf4_fused_max_rows("0.50", 90, 8192, 8192) == NF4_FUSED_MAX_ROWS[90][2] == 64
    assert nf4_fused_max_rows("0.50", None, 8192, 8192) == NF4_FUSED_MAX_ROWS_OTHER[2]
    assert nf4_fused_max_rows("0.50", 70, 8192, 8192) == 7
    with pytest.raises(InputError):
        nf4_fused_max_rows("0.41", 90, 64, 64)


@pytest.mark.parametrize(("tokens", "seq", "quantizer", "capability", "dequantizing"), [
    (4, 1024, "bitsandbytes", 90, 7),  # 4096 rows: past every fused cap (0.50 ops.py:926, :677)
    (1, 512, "bitsandbytes", 80, 7),  # A100: q/k/v/o small weights (other tier, <= 384), MLP larger (<= 128)
    (1, 32, "bitsandbytes", 90, 0),  # H200: small weights to 32 rows, larger to 64: all fused
    (1, 48, "bitsandbytes", 90, 4),  # H200: q, k, v, o past their 32, gate/up/down fused to 64
    (1, 32, "bitsandbytes-0.42", 90, 7),  # 0.42: MatMul4Bit.forward always dequantizes (_functions.py:516)
])
def test_qlora_step_adds_the_bitsandbytes_and_peft_kernels(tokens: int, seq: int, quantizer: str, capability: int,
                                                           dequantizing: int) -> None:
    """The step's count (estimate/duration.py kernels_per_micro_step) over a PEFT + bitsandbytes NF4 base against the
    same step over a bf16 base, counted by hand from the sources: Qwen2.5-1.5B-Instruct has 28 layers x 7 linears, all
    adapted (all-linear); q and o are 1536 x 1536, k and v 256 x 1536 (small weights, N K < 4 Mi, 2 K >= N), gate, up
    and down 8960 x 1536 (larger). A dequantizing NF4 linear launches 3 kernels with double quantization in its forward
    (ops.py:904-916) and in the recomputed forward (checkpointing every layer); ``dequantizing`` of the 7 do at these
    rows on this GPU (0.50's fused-kernel tiers, ops.py:635-674 / :745-757 / :701-729); every one dequantizes in the
    backward (3, functional.py:1053-1063); PEFT clones each adapted base output in the forward and its recompute
    (bnb.py:533)."""
    from llmsizer.estimate.duration import kernels_per_micro_step
    from llmsizer.models import load_model
    from llmsizer.specs import TrainingWorkload

    spec = load_model("qwen2.5-1.5b-instruct")
    # pure bf16 (the adapters in the base dtype): no autocast casts, whose count differs by adapter layer (eq. K6a,
    # tests/formulas/test_training_step_kernels.py)
    common = dict(micro_batch=tokens, seq_len=seq, grad_checkpointing="full", targets=("all-linear",), precision="bf16")
    qlora = kernels_per_micro_step(spec, TrainingWorkload(method="qlora", nf4_quantizer=quantizer, **common), capability)
    lora = kernels_per_micro_step(spec, TrainingWorkload(method="lora", **common), capability)
    linears = 28 * 7
    assert qlora - lora == 28 * dequantizing * 3 * 2 + linears * 3 + linears * 2
    torchao = kernels_per_micro_step(spec, TrainingWorkload(method="qlora", nf4_quantizer="torchao", **common))
    assert torchao == lora  # torchtune's NF4 tensors: not bitsandbytes' kernels (eq. K5 does not apply)


@pytest.mark.parametrize("nested", [True, False])
def test_nf4_one_token_inference_forward_is_one_gemm_4bit_op_that_cuda_runs_fused(nested: bool) -> None:
    """Eq. K5 at inference (K4): a real bitsandbytes ``Linear4bit`` one-token forward under ``torch.no_grad`` on CPU,
    traced op by op, is the one ``bitsandbytes::gemm_4bit`` op and nothing else that launches a kernel (no absmax
    dequantize beside it, nested or not: ``gemv_4bit``'s, functional.py:1311-1313, is not on the path); the installed
    bitsandbytes' own CUDA dispatch then runs that op fused at one row on every GPU of the table (ops.py floor M <= 4),
    so a decode step's NF4 linears add no kernels, and a long prefill's add K5's dequantization."""
    q = _nf4_linear(nested).to("cpu").eval()
    q.support_avx512bf16_for_cpu = False  # the CPU-only repacked path (gemv_4bit) is not a GPU's
    x = torch.randn(1, 1, 128, dtype=torch.bfloat16)
    from torch.utils._python_dispatch import TorchDispatchMode
    ops: list[str] = []

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL:
                ops.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Trace():
        q(x)
    assert [o for o in ops if "gemm_4bit" not in o] == [] and len(ops) == 1, ops
    use_custom, props, _ = _installed_bnb_heuristic()
    for cap, gpu in GPUS.items():
        props["gpu"] = gpu
        assert use_custom(0, torch.bfloat16, 1, 4096, 4096), cap  # fused at one row
        assert nf4_linear_kernels(nested, 1, nf4_fused_max_rows("0.50", cap, 4096, 4096))[0] == 0


def test_inference_kernels_add_nf4_dequantization_only_past_the_fused_rows() -> None:
    """Eq. K4 with K5: a Llama's NF4 (double-quantized) step launches bf16's count at one row (decode) and 3 more
    kernels per frozen linear (7 a layer) in a 4096-token prefill on an H200 (past sm90's cap of 64 rows)."""
    from llmsizer.estimate.launch import inference_kernels
    from llmsizer.models import load_model

    spec = load_model("Llama-3.1-8B")
    bf16 = inference_kernels(spec, per_step=0)
    assert inference_kernels(spec, per_step=0, weights_format="nf4-dq", capability=90, rows=1) == bf16
    assert inference_kernels(spec, per_step=0, weights_format="nf4-dq", capability=90, rows=4096) \
        == bf16 + 3 * 7 * spec.num_layers
    assert inference_kernels(spec, per_step=0, weights_format="nf4", capability=90, rows=4096) \
        == bf16 + 7 * spec.num_layers


def test_gptq_unpacking_kernels_as_read_from_auto_gptq() -> None:
    """Eq. K8 against auto-gptq's qlinear_cuda_old.forward read at tag v0.4.2 (@ef442d9f; not installable here: no
    0.4.2 distribution on the index, 0.5.0's source needs CUDA to build): at >= 128 rows (``kernel_switch_threshold``,
    line 32) the eager branch runs, per forward, the zeros' shift and int8 cast (231), ``bitwise_and`` (232), ``+ 1``
    (234), the weight's shift and int8 cast (240), ``bitwise_and`` (241), ``weight - zeros`` and ``scales *`` (266):
    9 kernels beside ``torch.matmul`` (269), and ``out + self.bias`` (271) apart from it; below, ``torch.zeros``
    (202), ``scales.float()`` and the CUDA kernel (210), ``out.half()`` (270)."""
    read = ["zeros shift", "zeros to int8", "zeros and", "zeros + 1", "weight shift", "weight to int8", "weight and",
            "weight - zeros", "scales *"]
    assert gptq_linear_kernels(128, bias=False) == (len(read), 0)
    assert gptq_linear_kernels(4096, bias=True) == (len(read) + 1, 0)
    assert gptq_linear_kernels(127, bias=False) == (len(["zeros", "scales.float", "out.half"]), 0)
    with pytest.raises(InputError):
        gptq_linear_kernels(0, bias=False)

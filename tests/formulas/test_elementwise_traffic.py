"""Memory-bound traffic of a training step (formulas/elementwise_traffic.py), against real PyTorch (#12).

Independent truth, eager: a transformers Llama decoder layer (random weights, CPU, bf16) runs forward and backward
under a ``TorchDispatchMode`` that adds up, for every aten op that is not a view, a GEMM or the attention kernel,
the bytes of its tensor inputs and outputs (a broadcast input counted once: its stride-0 dimensions are not read
again). A LoRA case wraps the same layer with PEFT. The cross-entropy head is traced the same way.

Independent truth, compiled: the same layer under ``torch.compile`` (inductor, CPU C++ backend): inductor's own
byte count of the kernels it generated (``GraphLowering.count_bytes``: each scheduler node's read and written
buffers) without the extern GEMM / attention kernels.

The norm weights' own reads (h elements per kernel, not per token) are the only bytes the per-token formulas leave
out; the cases use enough tokens that they stay under 0.5 %.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from inductor_nodes import inductor_nodes  # noqa: E402

from llmsizer.formulas.elementwise_traffic import LayerWidths, layer_bytes, loss_bytes  # noqa: E402

pytestmark = pytest.mark.slow

VIEWS = {"view", "t", "transpose", "detach", "_unsafe_view", "slice", "expand", "unsqueeze", "alias", "permute",
         "lift_fresh", "select", "as_strided", "_reshape_alias", "split", "split_with_sizes", "squeeze", "zeros",
         "ones_like", "empty", "arange", "lift_fresh_copy", "_to_copy_int"}
NOT_ELEMENTWISE = ("mm", "addmm", "bmm", "linear")


def _physical_bytes(t: Any) -> int:
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _attention_kernel(name: str) -> bool:
    return "scaled_dot_product" in name


def _traced_bytes(run: Any, left_out: Callable[[str], bool] = _attention_kernel) -> int:
    """Bytes of the tensors of every aten op ``run`` dispatches, views, GEMMs and the ops ``left_out`` names
    excepted."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    total = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name in VIEWS or name in NOT_ELEMENTWISE or left_out(name):
                return out
            tensors = [a for a in tree_flatten((args, kwargs, out))[0] if isinstance(a, torch.Tensor)]
            total[0] += sum(_physical_bytes(a) for a in tensors if a.dtype not in (torch.int64,))
            return out

    with Count():
        run()
    return total[0]


def _layer(cfg: dict[str, Any]) -> tuple[Any, Any]:
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(**cfg, num_hidden_layers=1, vocab_size=512, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(conf).to(torch.bfloat16).train()
    return model, model.model.layers[0]


def _widths(cfg: dict[str, Any]) -> LayerWidths:
    d = cfg["hidden_size"] // cfg["num_attention_heads"]
    return LayerWidths(cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"] * d,
                       cfg["num_key_value_heads"] * d, d)


GQA = dict(hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2)
MHA = dict(hidden_size=192, intermediate_size=512, num_attention_heads=3, num_key_value_heads=3)


def _run_layer(model: Any, layer: Any, tokens: int, hidden: int) -> Any:
    """A forward + backward of ``layer`` (eager or ``torch.compile``'d) over one random bf16 sequence."""
    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(tokens)[None]
    pe = model.model.rotary_emb(x, pos)
    pe = tuple(p.detach() for p in pe)

    def run() -> None:
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))
    return run


@pytest.mark.parametrize("cfg", [GQA, MHA], ids=["gqa", "mha"])
def test_eager_layer_bytes_equal_the_traced_ops(cfg: dict[str, Any]) -> None:
    model, layer = _layer(cfg)
    tokens = 512
    traced = _traced_bytes(_run_layer(model, layer, tokens, cfg["hidden_size"]))
    fwd, bwd = layer_bytes(_widths(cfg), 2, compiled=False, norms_trained=True)
    assert (fwd + bwd) * tokens == pytest.approx(traced, rel=0.005)
    # the case discriminates: the compiled count of the same layer is far below the eager one
    cf, cb = layer_bytes(_widths(cfg), 2, compiled=True, norms_trained=True)
    assert (cf + cb) * tokens < 0.5 * traced


def test_eager_lora_layer_bytes_equal_the_traced_ops() -> None:
    peft = pytest.importorskip("peft")
    model, _ = _layer(GQA)
    cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    pm = peft.get_peft_model(model, cfg, autocast_adapter_dtype=False)  # adapters in bf16, as torchtune
    layer = pm.base_model.model.model.layers[0]
    tokens = 512
    traced = _traced_bytes(_run_layer(pm.base_model.model, layer, tokens, GQA["hidden_size"]))
    w = _widths(GQA)
    adapters = ((w.hidden, w.q_width), (w.hidden, w.kv_width))
    fwd, bwd = layer_bytes(w, 2, compiled=False, norms_trained=False, adapters=adapters)
    assert (fwd + bwd) * tokens == pytest.approx(traced, rel=0.01)


def test_eager_loss_bytes_equal_the_traced_ops() -> None:
    vocab, tokens = 4096, 256
    logits = torch.randn(1, tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))
    from transformers.loss.loss_utils import ForCausalLMLoss

    def run() -> None:
        ForCausalLMLoss(logits, labels, vocab_size=vocab).backward()
    traced = _traced_bytes(run)
    assert loss_bytes(vocab, 2, compiled=False) * tokens == pytest.approx(traced, rel=0.01)


def _inductor_bytes(run: Any) -> int:
    """Bytes of inductor's generated (non-extern) kernels over every graph compiled while ``run`` runs."""
    from torch._inductor.scheduler import ExternKernelSchedulerNode

    total = 0
    for node, n in inductor_nodes(run):
        origins = {str(o.target) for sn in node.get_nodes() if sn.node is not None for o in sn.node.origins}
        if not isinstance(node, ExternKernelSchedulerNode) and not any("scaled_dot" in o for o in origins):
            total += n
    return total


def test_compiled_layer_bytes_equal_inductors_kernels() -> None:
    model, layer = _layer(GQA)
    tokens = 512
    measured = _inductor_bytes(_run_layer(model, torch.compile(layer), tokens, GQA["hidden_size"]))
    fwd, bwd = layer_bytes(_widths(GQA), 2, compiled=True, norms_trained=True)
    assert (fwd + bwd) * tokens == pytest.approx(measured, rel=0.02)


def test_compiled_loss_bytes_equal_inductors_kernels() -> None:
    vocab, tokens = 4096, 512
    logits = torch.randn(tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))

    def ce(x: Any, y: Any) -> Any:  # torchtune / torchtitan: cross_entropy over the upcast logits
        return torch.nn.functional.cross_entropy(x.float(), y)
    compiled = torch.compile(ce)

    def run() -> None:
        compiled(logits, labels).backward()
    measured = _inductor_bytes(run)
    assert loss_bytes(vocab, 2, compiled=True) * tokens == pytest.approx(measured, rel=0.05)
    assert loss_bytes(vocab, 2, compiled=False) * tokens > 5 * measured


def test_compiled_lora_layer_bytes_equal_inductors_kernels() -> None:
    peft = pytest.importorskip("peft")
    model, _ = _layer(GQA)
    cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"])
    pm = peft.get_peft_model(model, cfg, autocast_adapter_dtype=False)
    layer = pm.base_model.model.model.layers[0]
    tokens = 512
    compiled = torch.compile(layer)
    x = torch.randn(1, tokens, GQA["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(tokens)[None]
    pe = tuple(p.detach() for p in pm.base_model.model.model.rotary_emb(x, pos))

    def run() -> None:
        out = compiled(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))
    measured = _inductor_bytes(run)
    w = _widths(GQA)
    adapters = ((w.hidden, w.q_width), (w.hidden, w.kv_width), (w.intermediate, w.hidden))
    fwd, bwd = layer_bytes(w, 2, compiled=True, norms_trained=False, adapters=adapters)
    assert (fwd + bwd) * tokens == pytest.approx(measured, rel=0.03)


def test_eager_layernorm_and_gelu_bytes_equal_the_traced_ops() -> None:
    """The LayerNorm / GeLU path (GPT-2-style layers): torch's fused native_layer_norm and gelu, forward and
    backward, traced the same way."""
    from llmsizer.formulas.elementwise_traffic import layernorm_bytes

    hidden, inter, tokens = 256, 1024, 512
    norm = torch.nn.LayerNorm(hidden, dtype=torch.bfloat16)
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    a = torch.randn(tokens, inter, dtype=torch.bfloat16, requires_grad=True)

    gy = torch.ones(tokens, hidden, dtype=torch.bfloat16)
    ga = torch.ones(tokens, inter, dtype=torch.bfloat16)

    def run() -> None:
        torch.autograd.backward([norm(x), torch.nn.functional.gelu(a)], [gy, ga])
    traced = _traced_bytes(run)
    nf, nb = layernorm_bytes(hidden, 2)
    expected = (nf + nb) * tokens + (2 + 3) * 2 * inter * tokens  # gelu 2c I, gelu_backward 3c I
    assert expected == pytest.approx(traced, rel=0.02)

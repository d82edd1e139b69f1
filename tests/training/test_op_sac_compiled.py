"""Op-level selective checkpointing under torch.compile, against the real min-cut partitioner (#12).

Independent truth: one transformers decoder layer (random weights, CPU) wrapped as torchtitan wraps a
TransformerBlock - ``torch.utils.checkpoint`` with torchtitan's op-level policy through
``create_selective_checkpoint_contexts`` (``measure_step.torchtitan_op_policy``) - and compiled as torchtitan's
``apply_compile`` compiles it, after the wrapping, with the partitioner inductor uses for training
(``aot_autograd(partition_fn=min_cut_rematerialization_partition)``, torch/_inductor/compile_fx.py). The tensors
the forward saves for the backward are the backward graph's inputs minus its tangents, the layer's parameters
and the rotary cos/sin. ``op_sac_saved_terms(compiled=True)`` must agree within 2%. In the Llama case the eager
policy's terms (which keep the down projection's output) must miss by more than 10%, so the case discriminates;
in the Qwen2 case (q/k/v biases: the down projection is the 4th mm, recomputed) compile changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from measure_step import torchtitan_op_policy  # noqa: E402

from llmsizer.formulas.selective_checkpointing import op_sac_saved_terms  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow

LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 320, "intermediate_size": 864,
         "num_hidden_layers": 1, "num_attention_heads": 10, "num_key_value_heads": 2,
         "max_position_embeddings": 2048, "tie_word_embeddings": False}
QWEN2 = {"model_type": "qwen2", "vocab_size": 2048, "hidden_size": 256, "intermediate_size": 704,
         "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 2048, "tie_word_embeddings": True}

# name: (config, batch, seq, whether compile drops a saved output)
CASES: dict[str, tuple[dict[str, Any], int, int, bool]] = {
    "llama GQA bf16 (down projection is mm 7: saved eagerly, dropped compiled)": (LLAMA, 2, 256, True),
    "qwen2 q/k/v biases bf16 (down projection is mm 4: recomputed either way)": (QWEN2, 3, 160, False),
}

_POLICY: list[Any] = []
_LAYER: list[Any] = []


def _context_fn() -> Any:  # module level: dynamo traces a context_fn only if it is not a nested function
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(_POLICY[0]())


def _layer_call(x: Any, pos: Any, pe: Any) -> Any:
    return _LAYER[0](x, attention_mask=None, position_ids=pos, position_embeddings=pe)


class _Checkpointed(torch.nn.Module):  # torchtitan: ptd_checkpoint_wrapper(block, context_fn=...), then compile
    def __init__(self, layer: Any) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: Any, pos: Any, pe: Any) -> Any:
        from torch.utils.checkpoint import checkpoint

        return checkpoint(_layer_call, x, pos, pe, use_reentrant=False, context_fn=_context_fn)


def _compiled_op_sac_saved_bytes(cfg: dict[str, Any], batch: int, seq: int) -> int:
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**cfg)
    conf._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16).train()
    layer = model.get_decoder().layers[0]
    _POLICY[:] = [torchtitan_op_policy(torch)]
    _LAYER[:] = [layer]
    skip = {tuple(p.shape) for p in layer.parameters()}
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    saved: list[int] = []

    def fw(gm: Any, _inputs: Any) -> Any:
        return make_boxed_func(gm.forward)

    def bw(gm: Any, _inputs: Any) -> Any:
        for n in gm.graph.nodes:
            v = n.meta.get("val")
            if n.op != "placeholder" or not isinstance(v, torch.Tensor) or n.name.startswith("tangents"):
                continue
            if tuple(v.shape) in skip or tuple(v.shape) == (1, seq, head_dim):
                continue  # parameters and the rotary tables (no activation has their shapes here)
            saved.append(v.numel() * v.element_size())
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    compiled = torch.compile(_Checkpointed(layer), fullgraph=True,
                             backend=aot_autograd(fw_compiler=fw, bw_compiler=bw,
                                                  partition_fn=min_cut_rematerialization_partition))
    x = torch.randn(batch, seq, cfg["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(seq)[None]
    pe = model.get_decoder().rotary_emb(x, pos)
    out = compiled(x, pos, pe)
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    torch._dynamo.reset()
    return sum(saved)


@pytest.mark.parametrize("name", list(CASES))
def test_op_sac_compiled_saved_set(name: str) -> None:
    cfg, batch, seq, drops = CASES[name]
    spec = spec_from_config(cfg, name=name)
    st = ActivationSetup(batch=batch, seq=seq, residual=2, compute=2, expert=2, checkpointing="selective-op")
    pred = sum(t.bytes for t in op_sac_saved_terms(spec, 0, st, compiled=True))
    eager = sum(t.bytes for t in op_sac_saved_terms(spec, 0, st))
    meas = _compiled_op_sac_saved_bytes(cfg, batch, seq)
    err = (pred - meas) / meas
    print(f"\n{name}: compiled op-SAC saved {meas / 2**20:.3f} MiB, predicted {pred / 2**20:.3f} MiB ({err:+.2%}); "
          f"eager policy terms {eager / 2**20:.3f} MiB ({(eager - meas) / meas:+.1%})")
    assert abs(err) <= 0.02
    if drops:
        assert (eager - meas) / meas > 0.10
    else:
        assert eager == pred

"""The activations a compiled decoder layer saves for its backward, as inductor's training partitioner decides
them: the one measurement of tests/formulas/test_compiled_activations.py and tests/training/test_op_sac_compiled.py.

The layer (or a wrapper around it) is compiled with ``aot_autograd(partition_fn=min_cut_rematerialization_partition)``
- the partitioner inductor uses for training (torch/_inductor/compile_fx.py) - and one forward + backward is run. The
tensors the forward saves are the backward graph's inputs minus its tangents, the layer's parameters and the rotary
cos/sin (shared by every layer): told apart by shape (no activation shape equals them in these cases).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# one-layer cases both tests measure: GQA without biases, untied head; Qwen2's q/k/v biases, tied head
LLAMA: dict[str, Any] = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 320, "intermediate_size": 864,
                         "num_hidden_layers": 1, "num_attention_heads": 10, "num_key_value_heads": 2,
                         "max_position_embeddings": 2048, "tie_word_embeddings": False}
QWEN2: dict[str, Any] = {"model_type": "qwen2", "vocab_size": 2048, "hidden_size": 256, "intermediate_size": 704,
                         "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "max_position_embeddings": 2048, "tie_word_embeddings": True}


def decoder_model(cfg: dict[str, Any], dtype: Any) -> tuple[Any, Any]:
    """(model, its first decoder layer): random weights (seed 0), SDPA, training mode."""
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**cfg)
    conf._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=dtype).train()
    return model, model.get_decoder().layers[0]


def min_cut_saved_bytes(model: Any, module: Any, batch: int, seq: int, dtype: Any, fullgraph: bool = False) -> int:
    """Bytes the forward of compiled ``module`` (called as a decoder layer: ``x, attention_mask=, position_ids=,
    position_embeddings=``) saves for the backward, less the first layer's parameters and the rotary tables."""
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    decoder = model.get_decoder()
    skip = {tuple(p.shape) for p in decoder.layers[0].parameters()}
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    saved: list[int] = []

    def fw(gm: Any, _inputs: Any) -> Any:
        return make_boxed_func(gm.forward)

    def bw(gm: Any, _inputs: Any) -> Any:
        for n in gm.graph.nodes:
            v = n.meta.get("val")
            if n.op != "placeholder" or not isinstance(v, torch.Tensor) or n.name.startswith("tangents"):
                continue
            if tuple(v.shape) in skip or tuple(v.shape) == (1, seq, head_dim):
                continue  # parameters and the rotary tables
            saved.append(v.numel() * v.element_size())
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    compiled = torch.compile(module, fullgraph=fullgraph,
                             backend=aot_autograd(fw_compiler=fw, bw_compiler=bw,
                                                  partition_fn=min_cut_rematerialization_partition))
    x = torch.randn(batch, seq, model.config.hidden_size, dtype=dtype, requires_grad=True)
    pos = torch.arange(seq)[None]
    pe = decoder.rotary_emb(x, pos)
    out = compiled(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    torch._dynamo.reset()
    return sum(saved)

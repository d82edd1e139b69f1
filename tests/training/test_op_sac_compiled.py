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
pytest.importorskip("transformers")

from measure_step import torchtitan_op_policy  # noqa: E402

from compiled_saved import LLAMA, QWEN2, decoder_model, min_cut_saved_bytes  # noqa: E402
from llmsizer.formulas.selective_checkpointing import op_sac_saved_terms  # noqa: E402
from llmsizer.formulas.training_activations import ActivationSetup  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

pytestmark = pytest.mark.slow


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

    def forward(self, x: Any, attention_mask: Any, position_ids: Any, position_embeddings: Any) -> Any:
        from torch.utils.checkpoint import checkpoint

        # attention_mask: None (causal, SDPA), the layer's own default
        return checkpoint(_layer_call, x, position_ids, position_embeddings, use_reentrant=False,
                          context_fn=_context_fn)


def _compiled_op_sac_saved_bytes(cfg: dict[str, Any], batch: int, seq: int) -> int:
    model, layer = decoder_model(cfg, torch.bfloat16)
    _POLICY[:] = [torchtitan_op_policy(torch)]
    _LAYER[:] = [layer]
    return min_cut_saved_bytes(model, _Checkpointed(layer), batch, seq, torch.bfloat16, fullgraph=True)


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

"""The rotary cos/sin a training forward keeps (formulas/training_activations.py ``shared_activations``).

Independent truth: transformers 5.24's LlamaRotaryEmbedding.forward (models/llama/modeling_llama.py L110-116)
returns ``cos, sin`` of ``position_ids[..., None] * inv_freq``: shape ``position_ids.shape + (head_dim,)``. With no
position_ids (a training batch from the plain causal-LM collator) LlamaModel.forward makes
``arange(T).unsqueeze(0)`` (L379-380): one [1, T, head_dim] table each, whatever the batch; packed rows carry their
own position_ids (positions restart per document), [B, T, head_dim]. Measured here: the tables' storages that
autograd saves (a saved-tensor hook) in a tiny Llama's bf16 training forward at batch 1 and 2. Before, the estimate
counted 2 B T head_dim bytes unpacked too (2x at batch 2)."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, shared_activations
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build, random_ids, torch

pytestmark = pytest.mark.slow
T = 64


def _saved_rotary_bytes(batch: int, packed: bool) -> int:
    torch.manual_seed(0)
    model = build(TINY_CONFIGS["llama-gqa"], device="cpu", dtype=torch.bfloat16, attn="sdpa")
    model.train()
    tables: list[Any] = []
    model.model.rotary_emb.register_forward_hook(lambda m, a, out: tables.extend(out))
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    ids = random_ids(TINY_CONFIGS["llama-gqa"]["vocab_size"], batch, T)
    # packed: two documents per row, positions restarting at the second (what a packing collator passes)
    pos = torch.cat([torch.arange(T // 2), torch.arange(T // 2)]).expand(batch, T) if packed else None
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids, position_ids=pos, use_cache=False)
    assert len(tables) == 2
    return sum(saved.get(t.untyped_storage().data_ptr(), 0) for t in tables)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("batch", [1, 2])
def test_rotary_tables_kept_by_a_training_forward(batch: int, packed: bool, capsys: Any) -> None:
    spec = spec_from_config(TINY_CONFIGS["llama-gqa"], name="tiny-llama")
    st = ActivationSetup(batch=batch, seq=T, residual=2, compute=2, expert=2, full=True, attention="sdpa",
                         packing=packed)
    counted = next(t.bytes for t in shared_activations(spec, st) if t.name == "rotary cos/sin")
    measured = _saved_rotary_bytes(batch, packed)
    with capsys.disabled():
        print(f"\n[rotary B={batch} packed={packed}] saved {measured:,} B, counted {counted:,} B")
    assert counted == measured

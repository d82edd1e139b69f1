"""Measure what Megatron-Core's vocab_parallel_cross_entropy keeps for the backward, on one gloo rank.

Run: ``python tests/training/megatron_ce_step.py MEGATRON_LM_CHECKOUT`` (NVIDIA/Megatron-LM @d98e8a64: the real
megatron/core/tensor_parallel/cross_entropy.py is loaded from it; the two package helpers it imports, the tensor
parallel group and the rank's vocabulary range, are given for one rank). Prints the tokens, the vocabulary and the
bytes of the distinct storages autograd saved (``saved_tensors_hooks``) as JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from typing import Any

import torch
import torch.distributed as dist

SEQ, BATCH, VOCAB, HIDDEN = 64, 2, 1000, 16  # the vocabulary shard of one rank


class VocabUtility:
    """The rank's vocabulary range (megatron/core/tensor_parallel/utils.py's, for one rank)."""

    @staticmethod
    def vocab_range_from_per_partition_vocab_size(per: int, rank: int, world_size: int) -> tuple[int, int]:
        return rank * per, (rank + 1) * per


def _module(name: str, package: bool = False, **attrs: Any) -> None:
    m = types.ModuleType(name)
    if package:
        m.__path__ = []
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m


def main(checkout: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    group = dist.new_group([0])
    for name in ("megatron", "megatron.core", "megatron.core.tensor_parallel"):
        _module(name, package=True)
    _module("megatron.core.parallel_state", get_tensor_model_parallel_group=lambda: group)
    _module("megatron.core.utils", get_pg_rank=lambda g: 0, get_pg_size=lambda g: 1)
    _module("megatron.core.tensor_parallel.utils", VocabUtility=VocabUtility)
    src = os.path.join(checkout, "megatron/core/tensor_parallel/cross_entropy.py")
    spec = importlib.util.spec_from_file_location("megatron.core.tensor_parallel.cross_entropy", src)
    assert spec is not None and spec.loader is not None
    ce = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ce)

    h = torch.randn(SEQ, BATCH, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, VOCAB, (SEQ, BATCH))
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    logits = torch.matmul(h, weight.t())
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        ce.vocab_parallel_cross_entropy(logits, target)
    print(json.dumps({"tokens": SEQ * BATCH, "vocab": VOCAB, "saved_bytes": sum(saved.values()),
                      "storages": sorted(saved.values())}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

"""Independent measurement for tests/measure: the same workload as ``llmsizer measure`` on CPU, measured in a separate
process by PyTorch's CPU allocator itself (tests/training/measure_step.py ``AllocatorBytes``: torch.profiler's
allocation and free records replayed into a running sum; no dispatch mode, so autograd runs as it does untraced).
Imports nothing from llmsizer. Usage: ``python independent_peak.py '<json>'`` -> one JSON line ``{"peak_bytes": ...}``:
the parameters, buffers and input ids (allocated before the measure) plus the highest bytes the allocator held above
them over the workload.

The case JSON: {"kind": "inference"|"training", "config": {...}, "context", "concurrency", "output_tokens"}
or {"micro_batch", "seq_len"} for a full fp32 AdamW (for-loop) training run of two steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from measure_step import AllocatorBytes  # noqa: E402


def _storage_bytes(tensors: list) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st._cdata] = st.nbytes()
    return sum(seen.values())


def main(case: dict) -> dict:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(case.get("seed", 0))
    torch.set_num_threads(1)
    cfg = dict(case["config"])
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32, attn_implementation="sdpa")
    if case["kind"] == "inference":
        model.eval()
        prompt = case["context"] - case["output_tokens"]
        ids = torch.randint(0, conf.vocab_size, (case["concurrency"], prompt))
        base = _storage_bytes([*model.parameters(), *model.buffers(), ids])
        with AllocatorBytes() as alloc, torch.no_grad():
            cache = transformers.DynamicCache(config=conf)
            out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1, :].float().argmax(-1, keepdim=True)
            del out
            for _ in range(case["output_tokens"]):
                out = model(input_ids=nxt, cache=cache, use_cache=True, logits_to_keep=1)
                nxt = out.logits[:, -1, :].float().argmax(-1, keepdim=True)
                del out
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
        ids = torch.randint(0, conf.vocab_size, (case["micro_batch"], case["seq_len"]))
        base = _storage_bytes([*model.parameters(), *model.buffers(), ids])
        with AllocatorBytes() as alloc:
            for _ in range(2):
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                del loss
                opt.step()
                opt.zero_grad(set_to_none=True)
    return {"peak_bytes": base + alloc.peak()}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

"""Independent measurement for tests/measure: the same workload as ``llmsizer measure`` on CPU, measured with
PyTorch's own ``torch.distributed._tools.mem_tracker.MemTracker`` in a separate process. Imports nothing from
llmsizer. Usage: ``python independent_peak.py '<json>'`` -> one JSON line ``{"peak_bytes": ...}``.

The case JSON: {"kind": "inference"|"training", "config": {...}, "context", "concurrency", "output_tokens"}
or {"micro_batch", "seq_len"} for a full fp32 AdamW (for-loop) training run of two steps.
"""

from __future__ import annotations

import json
import sys


def main(case: dict) -> dict:
    import torch
    import transformers
    from torch.distributed._tools.mem_tracker import MemTracker

    transformers.logging.set_verbosity_error()
    torch.manual_seed(case.get("seed", 0))
    torch.set_num_threads(1)
    cfg = dict(case["config"])
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32, attn_implementation="sdpa")
    mt = MemTracker()
    if case["kind"] == "inference":
        model.eval()
        prompt = case["context"] - case["output_tokens"]
        ids = torch.randint(0, conf.vocab_size, (case["concurrency"], prompt))
        mt.track_external(model)
        with mt, torch.no_grad():
            cache = transformers.DynamicCache(config=conf)
            out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1, :].float().argmax(-1, keepdim=True)
            del out
            for _ in range(case["output_tokens"]):
                mt.reset_mod_stats()  # MemTracker refuses repeated module calls otherwise; the global peak stays
                out = model(input_ids=nxt, cache=cache, use_cache=True, logits_to_keep=1)
                nxt = out.logits[:, -1, :].float().argmax(-1, keepdim=True)
                del out
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
        ids = torch.randint(0, conf.vocab_size, (case["micro_batch"], case["seq_len"]))
        mt.track_external(model, opt)
        with mt:
            for _ in range(2):
                mt.reset_mod_stats()
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                del loss
                opt.step()
                opt.zero_grad(set_to_none=True)
    peak = mt.get_tracker_snapshot("peak")
    total = sum(v["Total"] for v in peak.values())
    return {"peak_bytes": int(total)}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

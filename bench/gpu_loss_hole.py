"""CUDA check of the eager loss's hole (formulas/loss_allocations.py eq. L1, eq. 4'' of formulas/caching_allocator.py):
torchtitan 9dec370's loss lines (train.py 131-134, 303-308) on bf16 logits of t = 2 x 8192 tokens and Llama 3's
vocabulary, under ``expandable_segments:True`` (run_llama_train.sh line 22), three fixed-shape steps, the peak stats
reset after the first (as torchtitan's metrics do). Prints max reserved - max allocated of the later steps beside
llmsizer's replayed hole (t V 2 B, to within the allocator's 20 MiB pages and cuBLAS's workspace).

    python bench/gpu_loss_hole.py            # needs one CUDA GPU with about 40 GB free; under 30 s
    (writes $OUT/gpu_loss_hole.json when OUT is set)
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from llmsizer.formulas.caching_allocator import stream_trace_hole_bytes  # noqa: E402
from llmsizer.formulas.loss_allocations import eager_loss_events  # noqa: E402


def main(batch: int = 2, seq: int = 8192, hidden: int = 4096, vocab: int = 128256) -> dict[str, object]:
    if not torch.cuda.is_available():
        raise SystemExit("gpu_loss_hole: no CUDA device")
    dev = torch.device("cuda")
    out = torch.nn.Linear(hidden, vocab, bias=False, device=dev, dtype=torch.bfloat16)
    h = torch.randn(batch, seq, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (batch, seq), device=dev)
    for step in range(3):
        if step == 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        pred = out(h)
        loss = torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        loss.backward()
        out.weight.grad = None
        h.grad = None
    torch.cuda.synchronize()
    reserved, allocated = torch.cuda.max_memory_reserved(), torch.cuda.max_memory_allocated()
    hole = stream_trace_hole_bytes(eager_loss_events(batch * seq, vocab, 2))
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "alloc_conf": os.environ["PYTORCH_CUDA_ALLOC_CONF"], "tokens": batch * seq, "vocab": vocab,
            "max_reserved": reserved, "max_allocated": allocated, "measured_reserve": reserved - allocated,
            "llmsizer_hole": hole}


if __name__ == "__main__":
    result = main()
    text = json.dumps(result, indent=1)
    print(text)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_loss_hole.json"), "w", encoding="utf-8") as f:
            f.write(text + "\n")

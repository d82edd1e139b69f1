"""Measured truth for DeepSpeed ZeRO-3: real training steps of a small random-weight transformers model under
``deepspeed.initialize`` on the CPU accelerator (gloo), one process per rank.

Run as a script (``python deepspeed_step.py '<case json>'`` with RANK / WORLD_SIZE / MASTER_PORT set); prints one
JSON object. Nothing here imports llmsizer: the bytes come from :class:`measure_step.LiveTensorBytes`, which follows
every tensor storage DeepSpeed and PyTorch create (``torch.empty`` buffers included: storage bytes, not RSS).

- ``init_bytes``: live tensor bytes right after ``deepspeed.initialize`` (model, partitions, optimizer states, the
  buffers ZeRO-3 allocates at initialisation);
- ``peak_bytes``: the peak over ``steps`` training steps (forward, ``engine.backward``, ``engine.step``);
- ``fb_peak_bytes``: the last step's forward + backward peak above the live bytes it starts from (a complete
  parameter trace from the second step on, so the prefetch runs).

- ``fb_off_thread_max_bytes``: the largest tracked storage freed, during that forward + backward, on a thread
  other than the rank's own (see below).

The parameter all-gathers complete where DeepSpeed launches them (``gathers_on_this_thread``): gloo runs an
asynchronous collective on its own worker thread, which holds the output and input tensors until it lets go of
the finished work, so a gathered bucket DeepSpeed had dropped stayed live until that thread ran again: later under
CPU load, beside the next bucket, a peak that depended on the scheduler (probe20: the live-window case read
+7.08 MiB beside 8 busy processes, +7.56 MiB alone). Here gloo gathers into its own scratch tensors, made outside
the count, and the rank copies the result into DeepSpeed's buffer before the call returns: DeepSpeed still
allocates each bucket at launch and frees it when it drops the handle, every one of them on the rank's thread.

``case["freeze_base"]``: only the norm weights train (as under LoRA, the base frozen), so the optimizer's step does
not hide the forward and backward.

DeepSpeed's CPU communication backend would JIT-compile its shared-memory extension (``build_shm_op``); that is a
speed path only, so it is switched off and gloo does the collectives.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def default_rank_env() -> None:
    """One rank on this host unless the launcher set them (RANK / WORLD_SIZE / MASTER_PORT ...)."""
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29533"), ("RANK", "0"), ("WORLD_SIZE", "1"),
                       ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)


def zero3_setup(case: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The transformers config and the DeepSpeed ZeRO-3 config of ``case`` (``precision`` 'bf16', the default, or
    'fp32'; ``zero``: extra ``zero_optimization`` keys), with DeepSpeed's CPU shared-memory extension switched off
    (gloo does the collectives), transformers quiet and one torch thread."""
    import torch
    import transformers

    importlib.import_module("deepspeed.comm.torch")
    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    conf = transformers.AutoConfig.for_model(**case["config"])
    conf._attn_implementation = "sdpa"
    zero: dict[str, Any] = {"stage": 3, **case.get("zero", {})}
    ds_config: dict[str, Any] = {"train_micro_batch_size_per_gpu": case["batch"], "zero_optimization": zero,
                                 "optimizer": {"type": "AdamW",
                                               "params": {"lr": 1e-4, "torch_adam": True, "fused": False}}}
    if case.get("precision", "bf16") == "bf16":
        ds_config["bf16"] = {"enabled": True}
    return conf, ds_config


def gathers_on_this_thread() -> None:
    """Make DeepSpeed's parameter all-gather (``partition_parameters._dist_allgather_fn``, which every ZeRO-3
    parameter fetch and prefetch calls, async_op=True) complete before it returns: gloo gathers into scratch
    tensors made with the tracking mode off, and the result is copied into DeepSpeed's output on this thread. The
    handle returned is already complete (its ``wait`` returns at once); DeepSpeed's own handle then does what it
    does after any wait (each parameter's ``torch.cat`` of its parts, the bucket freed with the handle)."""
    import torch
    from deepspeed import comm
    from deepspeed.runtime.zero import partition_parameters
    from torch.utils._python_dispatch import _disable_current_modes

    class _Done:
        def wait(self) -> None:
            return None

    def gather(input_tensor: Any, output_tensor: Any, group: Any = None) -> _Done:
        with _disable_current_modes():
            out = torch.empty_like(output_tensor)
            comm.allgather_fn(out, input_tensor.clone(), group=group, async_op=False)
        output_tensor.copy_(out)
        return _Done()

    partition_parameters._dist_allgather_fn = gather


def main(case: dict[str, Any]) -> dict[str, Any]:
    default_rank_env()
    import deepspeed
    import torch
    import transformers
    from measure_step import LiveTensorBytes

    conf, ds_config = zero3_setup(case)
    deepspeed.init_distributed(dist_backend="gloo")
    gathers_on_this_thread()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf)
    if case.get("freeze_base"):
        for name, p in model.named_parameters():
            p.requires_grad_("norm" in name)
    tracker = LiveTensorBytes(lambda live: {})
    for p in model.parameters():
        tracker.track(p)
    fb_peak = off_thread = 0
    with tracker.mode:
        engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config,
                                               model_parameters=[p for p in model.parameters() if p.requires_grad])
        init = tracker.current
        ids = torch.randint(0, conf.vocab_size, (case["batch"], case["seq"]))
        for _ in range(case.get("steps", 2)):
            start, peak = tracker.current, tracker.peak
            tracker.peak, tracker.off_thread_freed_max = start, 0
            loss = engine(input_ids=ids, labels=ids).loss
            engine.backward(loss)
            fb_peak, off_thread = tracker.peak - start, tracker.off_thread_freed_max
            tracker.peak = max(peak, tracker.peak)
            engine.step()
            del loss
    # end_bytes: live after the last optimizer step (its _post_step has gathered the persistent parameters again)
    return {"init_bytes": init, "peak_bytes": tracker.peak, "fb_peak_bytes": fb_peak,
            "fb_off_thread_max_bytes": off_thread, "end_bytes": tracker.current}


if __name__ == "__main__":
    from ranks import rank_main

    rank_main(main)

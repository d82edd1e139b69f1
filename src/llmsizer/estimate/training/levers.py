"""What a training run that does not fit can still change, and when its per-device need compares with serving.

Two rules the plan and the training estimate share (one home):

* ``inference_comparable``: the "sized with inference numbers" comparison (``estimate/inference/compose.py``
  ``inference_sized``: the model served on one device, which holds all of its weights) is like with like only when
  each training device holds all of the weights too: no ZeRO-3 / FSDP full sharding of the parameters
  (``formulas/parallelism.py zero_shards``: the weights' factor, ZeRO paper section 5.3 P_os+g+p), no tensor,
  pipeline or expert parallelism. A run whose weights are split over N devices has a per-device need that is no
  serving estimate's counterpart (probe3 #3: 80.43 GiB per device over 16 against 134.50 GiB on one device).
* ``memory_levers``: the memory levers of a run not yet pulled, in the request file's words (probe3 #5: a LoRA run
  was told to use "lora, qlora"; a ZeRO-3 run with full checkpointing to shard and checkpoint).
"""

from __future__ import annotations

from ...formulas.parallelism import zero_shards
from ...specs import TrainingWorkload


def inference_comparable(w: TrainingWorkload) -> bool:
    """Each device of ``w`` holds all of the model's weights (see the module rule)."""
    return (zero_shards(w.shard_stage, w.shard_group)[0] == 1 and w.tp == 1 and w.pp == 1
            and w.ep == 1)


def memory_levers(w: TrainingWorkload) -> list[str]:
    """The levers that lower ``w``'s memory per device and are not yet pulled, most general first: larger devices
    and more devices always (more devices: more shards when the states are sharded, else with sharding); ZeRO-3 /
    FSDP full unless set; full activation checkpointing unless set; a smaller micro-batch above 1; the next
    parameter-efficient step (full -> lora/qlora, lora/dora -> qlora's 4-bit base; none after qlora)."""
    sharded = w.shard_stage >= 3
    out = ["devices with more memory",
           "more devices (the sharded states spread further)" if sharded and w.gpus > 1 else
           "more devices with ZeRO-3/FSDP sharding (settings.zero: 3 / settings.fsdp: full)" if not sharded else
           "more devices (ZeRO-3 then shards the states)"]
    if w.grad_checkpointing != "full":
        out.append("full activation checkpointing (settings.grad_checkpointing: full)")
    if w.micro_batch > 1:
        out.append("a smaller micro-batch with more gradient accumulation (settings.micro_batch, "
                   "settings.grad_accumulation)")
    if w.method == "full":
        out.append("a parameter-efficient method (method: lora or qlora)")
    elif w.method in ("lora", "dora"):
        out.append("qlora (method: qlora: a 4-bit frozen base)")
    return out

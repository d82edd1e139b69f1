"""When a training run's per-device need compares with serving (the rule the plan and the training estimate share):

* ``inference_comparable``: the "sized with inference numbers" comparison (``estimate/inference/compose.py``
  ``inference_sized``: the model served on one device, which holds all of its weights) is like with like only when
  each training device holds all of the weights too: no ZeRO-3 / FSDP full sharding of the parameters
  (``formulas/parallelism.py zero_shards``: the weights' factor, ZeRO paper section 5.3 P_os+g+p), no tensor,
  pipeline or expert parallelism. A run whose weights are split over N devices has a per-device need that is no
  serving estimate's counterpart (probe3 #3: 80.43 GiB per device over 16 against 134.50 GiB on one device).
"""

from __future__ import annotations

from ...formulas.parallelism import zero_shards
from ...specs import TrainingWorkload


def inference_comparable(w: TrainingWorkload) -> bool:
    """Each device of ``w`` holds all of the model's weights (see the module rule)."""
    return (zero_shards(w.shard_stage, w.shard_group)[0] == 1 and w.tp == 1 and w.pp == 1
            and w.ep == 1)


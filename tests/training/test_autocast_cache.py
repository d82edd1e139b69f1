"""torch.autocast's weight-cast cache against real forwards on two gloo ranks: plain, FSDP1 and FSDP2 (#autocast).

``autocast_cache_step.py`` runs one forward of a small random-weight fp32 Llama under ``torch.autocast('cpu',
bf16)`` and measures the bytes of the bf16 copies of its 2-D weights still alive when the loss is computed. The
cache keeps a cast only of a leaf fp32 tensor that requires grad and is not a view (pytorch
``aten/src/ATen/autocast_mode.cpp`` ``cached_cast``): a plain module's weights and FSDP2's unsharded
``nn.Parameter`` s qualify, FSDP1's flat-parameter views do not. With every layer checkpointed, the copies a
checkpointed layer made are then gone at forward end under FSDP1 (only the non-checkpointed lm_head's, saved by
autograd, remain) and all alive otherwise; without checkpointing autograd keeps them all in every case. llmsizer's
``autocast_weight_copies`` at its ``forward end`` moment, and its largest value over the backward's moments (one
recomputed layer's copies, or all of them before the lm_head's backward when nothing is checkpointed), must equal the
measured bytes exactly.

The ``float8`` cases first convert every linear but lm_head with torchao's real ``convert_to_float8_training``
(torchao 0.18.0; FSDP2 with the float8 all-gather, as torchtitan runs it): a Float8Linear casts its weight to float8
itself, from the transposed view the cache never takes, so the only bf16 weight copy left is lm_head's, checkpointed or
not; and no float8 copy of a weight outlives its matmul (the tracker sees them made during the forward: its largest
float8 weight total must be positive, its total at forward end zero).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA as LLAMA
from ranks import run_cases, run_step  # noqa: E402

from llmsizer.estimate.inference.common import Acc  # noqa: E402
from llmsizer.estimate.training.setup import resolve  # noqa: E402
from llmsizer.estimate.training.states import stage_states  # noqa: E402
from llmsizer.estimate.training.timeline import stage_timeline  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

pytestmark = pytest.mark.slow

# name: (step case, llmsizer workload fields)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "plain, checkpointed": (dict(wrap="none"), dict(gpus=1)),
    "FSDP1 use_orig_params, checkpointed": (dict(wrap="fsdp1", use_orig_params=True),
                                            dict(gpus=2, fsdp="full", fsdp_version=1)),
    "FSDP1, not checkpointed": (dict(wrap="fsdp1", use_orig_params=False, ckpt=False),
                                dict(gpus=2, fsdp="full", fsdp_version=1, grad_checkpointing="none")),
    "FSDP2, checkpointed": (dict(wrap="fsdp2"), dict(gpus=2, fsdp="full", fsdp_version=2)),
    "plain, checkpointed, float8": (dict(wrap="none", float8=True), dict(gpus=1, float8=True)),
    "plain, not checkpointed, float8": (dict(wrap="none", float8=True, ckpt=False),
                                        dict(gpus=1, float8=True, grad_checkpointing="none")),
    "FSDP2, checkpointed, float8 all-gather": (dict(wrap="fsdp2", float8=True),
                                               dict(gpus=2, fsdp="full", fsdp_version=2, float8=True)),
}


@pytest.fixture(scope="module", autouse=True)
def _all_cases() -> None:
    """Every case in one launch (ranks.run_cases: torch and transformers imported once per rank, a forked child per
    case, torchao imported by the float8 cases' own children as in their own launches); each test's run_step reads
    its case back."""
    run_cases("autocast_cache_step.py", [dict(case, config=LLAMA, batch=2, seq=64) for case, _ in CASES.values()], 2)


def predicted_copies(fields: dict[str, Any]) -> tuple[int, int]:
    """(autocast_weight_copies at forward end, their largest value over the moments of the backward)."""
    spec = spec_from_config(LLAMA, name="llama-tiny")
    w = TrainingWorkload(**{"precision": "bf16-mixed", "micro_batch": 2, "seq_len": 64, "grad_checkpointing": "full",
                            **fields})
    ctx = resolve(spec, w, Acc())
    tl = stage_timeline(ctx, stage_states(ctx, 0))
    copies = {p.name: p.parts.get("autocast_weight_copies", 0) for p in tl.phases}
    return copies["forward end"], max(v for k, v in copies.items() if "backward" in k)


@pytest.mark.parametrize("name", list(CASES))
def test_autocast_copies_at_forward_end(name: str) -> None:
    case, fields = CASES[name]
    m = run_step("autocast_cache_step.py", dict(case, config=LLAMA, batch=2, seq=64), 2)
    (pred, pred_bwd), meas, meas_bwd = predicted_copies(fields), m["forward_end_copy_bytes"], m["backward_max_copy_bytes"]
    print(f"\n{name}: bf16 weight copies alive at forward end {meas} B (largest during the forward "
          f"{m['forward_max_copy_bytes']} B, during the backward {meas_bwd} B; one copy of every 2-D weight "
          f"{m['all_weight_copy_bytes']} B); llmsizer {pred} B at forward end, {pred_bwd} B at most in the backward")
    assert pred == meas
    assert pred_bwd == meas_bwd
    if case.get("float8"):
        print(f"float8 weight copies: {m['forward_max_float8_weight_bytes']} B at most during the forward, "
              f"{m['forward_end_float8_weight_bytes']} B at forward end")
        assert m["forward_max_float8_weight_bytes"] > 0 and m["forward_end_float8_weight_bytes"] == 0

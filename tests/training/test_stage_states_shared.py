"""The duration's FSDP collective volume reads the stage states the memory estimate made on the same context
(compose.py ``context_stage_states``); made anew they give the same volume, and the states are equal field by field."""

from dataclasses import asdict

from llmsizer.catalog.models import find
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.duration import fsdp_volume
from llmsizer.estimate.fit import fit_training
from llmsizer.estimate.training import compose
from llmsizer.estimate.training.states import stage_states


def test_fsdp_volume_same_with_shared_states() -> None:
    spec = find("qwen3-30b-a3b").spec()
    kw = dict(method="full", micro_batch=1, seq_len=4096, fsdp="full", float8=True, compile=True)
    clear_caches(estimates_only=True)
    fit_training(spec, "h100-sxm", 8, tokens=1e9, **kw)
    assert compose._STAGE_STATES  # the estimate kept its stages' states
    (ctx, shared), *_ = compose._STAGE_STATES.values()
    assert asdict(shared) == asdict(stage_states(ctx, 0))
    w = ctx.w
    fsdp_volume.cache_clear()
    with_shared = fsdp_volume(spec, w)
    compose._STAGE_STATES.clear()
    fsdp_volume.cache_clear()
    assert fsdp_volume(spec, w) == with_shared

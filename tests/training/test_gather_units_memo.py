"""The FSDP units of a stage are computed once per (context, states) pair (gather_units.py ``_UNITS``): after the
estimates of a measurement have read them, every remembered value equals the units computed anew from states made
anew on the same context (so no caller changed the states after the units were taken from them), and
``clear_caches`` forgets them."""

from llmsizer.catalog.models import find
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.fit import fit_training
from llmsizer.estimate.training import gather_units
from llmsizer.estimate.training.states import stage_states

CASES = (
    ("qwen3-30b-a3b", "h100-sxm", 8, dict(method="full", micro_batch=1, seq_len=4096, fsdp="full", float8=True,
                                          compile=True)),
    ("llama-3.1-8b", "h100-sxm", 8, dict(method="lora", fsdp="full", fsdp2_units="torchtune")),
    ("llama-3.1-8b", "h100-sxm", 8, dict(method="full", fsdp="full", fsdp_version=1, grad_checkpointing="full")),
    ("llama-3.1-70b-instruct", "h100-sxm", 16, dict(method="full", fsdp="full", pp=4, micro_batch=1,
                                                    grad_accumulation=8, grad_checkpointing="full")),
)


def test_remembered_units_equal_units_made_anew() -> None:
    checked = 0
    for name, device, count, kw in CASES:
        clear_caches(estimates_only=True)
        fit_training(find(name).spec(), device, count, tokens=1e9, **kw)
        assert gather_units._UNITS, name  # the measurement and the duration read units
        for ctx, st, units in list(gather_units._UNITS.values()):
            fresh = stage_states(ctx, st.stage)
            assert fresh is not st
            assert gather_units.fsdp_gather_units(ctx, fresh) == units, (name, st.stage)
            checked += 1
    assert checked >= len(CASES)
    clear_caches(estimates_only=True)
    assert not gather_units._UNITS

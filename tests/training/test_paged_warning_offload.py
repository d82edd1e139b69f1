"""The paged-optimizer warning names states in CUDA unified memory; offloaded (--offload params) they are pinned host
items, not paged, so the warning does not apply (probe25 C2)."""

from __future__ import annotations

from llmsizer import estimate_training

PAGED = "paged optimizer states are in CUDA unified memory"


def _run(**kw: object) -> tuple[list[str], set[str]]:
    est = estimate_training("llama-3.2-1b", method="qlora", gpus=2, fsdp="full", micro_batch=1, seq_len=512, **kw)
    return [str(w) for w in est.warnings], {i.name for i in est.items}


def test_paged_warning_only_while_states_are_paged() -> None:
    warns, items = _run()
    assert any(PAGED in w for w in warns) and "paged_optimizer_states" in items
    warns, items = _run(offload="params")
    assert not any(PAGED in w for w in warns) and "paged_optimizer_states" not in items
    assert "host_optimizer_states" in items

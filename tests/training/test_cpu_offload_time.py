"""FSDP2 CPU offload in the training duration (formulas/cpu_offload_time.py) against its independent truths.

- The host-link copies, eq. (H1): ``cpu_offload_step.py`` wraps a small Llama as torchtune does and counts, on two
  real gloo ranks inside FSDP2's own code paths, the sharded parameter bytes each all-gather copies to the device
  (forward and, with ``reshard_after_forward``, backward) and the sharded gradient bytes copied to the host; the
  estimate's ``offload_host_link_bytes`` (from llmsizer's own parameter count) must equal them exactly.
- The host optimizer step's bytes per element, eq. (H4) with (O2): torch's fused AdamW on CPU, observed with a
  dispatch mode, is one ``_fused_adamw_`` pass over parameters, gradients and both moments that changes parameters
  and moments and leaves the gradients as they were.
- The torchtune 70B CPU-offload row (PM0705) is expressed through the one duration rule, its host step the largest
  addition, and the bytes of its terms recomputed from the README's settings.
"""

from __future__ import annotations

from typing import Any

import pytest
from ranks import TINY_LLAMA as LLAMA
from ranks import run_cases

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import training_duration_for
from llmsizer.formulas.cpu_offload_time import host_link_traffic, host_step_seconds, offloaded_comm
from llmsizer.formulas.optimizer_step import optimizer_step_bytes
from llmsizer.formulas.params import count_params
from llmsizer.formulas.training_time import data_parallel_comm
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.validation_cases import ASSUMED, TORCHTUNE_SPEED_ROWS, Case, public_rows, speed_case

A100 = "a100-sxm-80gb"


def _assumption(d: Any, name: str) -> Any:
    return next(a.value for a in d.assumptions if a.name == name)


@pytest.fixture(scope="module")
def offload_steps() -> dict[bool, dict[str, Any]]:
    """Both real steps (resharded after the forward or not), one launch of two ranks (ranks.py ``run_cases``: one
    child process per case, forked after the imports)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    cases = {reshard: dict(config=LLAMA, batch=2, seq=64, grad_ckpt=True, reshard_after_forward=reshard)
             for reshard in (True, False)}
    return dict(zip(cases, run_cases("cpu_offload_step.py", list(cases.values()), 2), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("reshard", [True, False])
def test_host_copies_equal_what_fsdp2_copies(reshard: bool, offload_steps: dict[bool, dict[str, Any]]) -> None:
    m = offload_steps[reshard]
    assert m["grad_on_cpu"] and m["reduces"] == m["forward_all_gathers"] == 7  # 4 layers, embeddings, lm_head, root
    spec = spec_from_config(LLAMA, name="llama-tiny")
    n = count_params(spec).total
    assert n == m["params"]
    t = host_link_traffic(4.0 * n, 4.0 * n, 2, reshard)  # fp32 weights and gradients, over 2 shards
    assert (t.forward_h2d, t.backward_h2d, t.backward_d2h) == (m["forward_h2d"], m["backward_h2d"], m["backward_d2h"])
    if not reshard:  # llmsizer takes offload='params' with full sharding only (specs/training.py)
        return
    # the same bytes through the one duration rule (the estimate's assumption)
    fields = dict(method="full", precision="fp32", micro_batch=2, seq_len=64, grad_checkpointing="full",
                  fsdp="full", offload="params", optimizer="adamw", gpus=2)
    d = training_duration_for(spec, builtin_catalog().devices[A100], 2, 1e6, fields)
    assert _assumption(d, "offload_host_link_bytes") == m["forward_h2d"] + m["backward_h2d"] + m["backward_d2h"]


def test_cpu_fused_adamw_is_one_pass_of_eq_o2() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[Any, tuple[Any, ...]]] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.seen.append((func, args))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32).to(torch.bfloat16)
    opt = torch.optim.AdamW(lin.parameters(), lr=1e-3, fused=True)
    for _ in range(2):
        opt.zero_grad()
        lin(torch.randn(4, 64, dtype=torch.bfloat16)).sum().backward()
        if _ == 0:
            opt.step()
    params = list(lin.parameters())
    before = {name: [t.clone() for t in ts] for name, ts in (
        ("p", params), ("g", [p.grad for p in params]), ("m", [opt.state[p]["exp_avg"] for p in params]),
        ("v", [opt.state[p]["exp_avg_sq"] for p in params]))}
    with Ops() as ops:
        opt.step()
    fused = [(f, a) for f, a in ops.seen if "_fused_adamw_" in str(f)]
    assert len(fused) == 1 and not [f for f, _ in ops.seen if "foreach_add" not in str(f) and "profiler" not in
                                    str(f) and "_fused_adamw_" not in str(f)]
    _, (p_l, g_l, m_l, v_l, max_l, *_) = fused[0]
    assert not max_l and all(len(x) == len(params) for x in (p_l, g_l, m_l, v_l))
    after = {"p": params, "g": [p.grad for p in params], "m": [opt.state[p]["exp_avg"] for p in params],
             "v": [opt.state[p]["exp_avg_sq"] for p in params]}
    written = {k for k in after if any(not torch.equal(a, b) for a, b in zip(after[k], before[k], strict=True))}
    assert written == {"p", "m", "v"}  # the gradient is read, not written back
    elements = sum(p.numel() for p in params)
    read = sum(t.numel() * t.element_size() for ts in (p_l, g_l, m_l, v_l) for t in ts)
    stored = sum(t.numel() * t.element_size() for k in sorted(written) for t in after[k])
    assert (read + stored) / elements == optimizer_step_bytes("adamw", "fused", 2.0, 2.0, 2.0) == 14.0


def test_offloaded_phases_take_the_longer_transfer_and_expose_the_ends() -> None:
    c = data_parallel_comm(8, 8, 800.0, 400.0, "full", 10, 100.0)
    t = host_link_traffic(800.0, 400.0, 8)
    slow = offloaded_comm(c, t, 1.0)  # a slow host link: the copies set each phase
    assert slow.forward_seconds == 100.0 and slow.backward_seconds == 100.0
    fast = offloaded_comm(c, t, 1e12)  # a fast one: the collectives do, as without offload
    assert fast.forward_seconds == c.forward_seconds and fast.backward_seconds == c.backward_seconds
    assert slow.first_seconds - c.first_seconds == pytest.approx(100.0 / 10)
    assert slow.last_seconds - c.last_seconds == pytest.approx(50.0 / 10)
    assert host_step_seconds(2.0, 14.0, 28.0, 0.5) == 2.0
    with pytest.raises(InputError):
        host_link_traffic(1.0, 1.0, 0)
    with pytest.raises(InputError):
        host_step_seconds(1.0, 1.0, 1.0, 0.0)


def _pm0705() -> tuple[Any, dict[str, Any]]:
    model, fields = TORCHTUNE_SPEED_ROWS["PM0705"]  # type: ignore[misc]
    return find(model).spec(), fields


def test_pm0705_settings_are_the_configs() -> None:
    """70B_full.yaml @30b8519: fsdp_cpu_offload True, torch.optim.AdamW fused True, batch 2, no accumulation,
    activation checkpointing, bf16; the README note's packing to 2048 and compile."""
    _, f = _pm0705()
    assert (f["offload"], f["fsdp"], f["optimizer"], f["optimizer_impl"], f["precision"]) == (
        "params", "full", "adamw", "fused", "bf16")
    assert (f["micro_batch"], f["seq_len"], f.get("grad_accumulation", 1), f["grad_checkpointing"]) == (
        2, 2048, 1, "full")


def test_pm0705_is_expressed_with_the_host_named() -> None:
    c = speed_case(public_rows()["PM0705"])
    assert isinstance(c, Case) and c.excluded == ASSUMED and "DGX A100" in c.note
    assert c.within  # inside the training-throughput tolerance (+36 %: see docs/training.md)


def test_pm0705_host_step_recomputed_from_the_settings() -> None:
    """The host step is 70.6e9 parameters x 14 B (fused AdamW on bf16 parameter, gradient and moments, eq. O2) over
    the machine's DRAM at the CPU memory-bound share; the H2D/D2H copies (2 x 17.6 GB + 17.6 GB per rank at 32 GB/s)
    stay under the compute, so offload costs the host step."""
    spec, f = _pm0705()
    dev = builtin_catalog().devices[A100]
    on = training_duration_for(spec, dev, 8, 1e6, f)
    off = training_duration_for(spec, dev, 8, 1e6, dict(f, offload="none"))
    assert on.step is not None and off.step is not None
    n = count_params(spec).total
    host = E.OFFLOAD_HOST_MEMORY_BANDWIDTH.expected * E.MEMORY_BOUND_BANDWIDTH_CPU.expected
    assert on.step.optimizer_seconds == pytest.approx(n * 14.0 / host)
    assert _assumption(on, "offload_host_link_bytes") == pytest.approx(3 * n * 2 / 8, rel=1e-9)
    assert on.step.exposed_comm_seconds - off.step.exposed_comm_seconds < 0.05  # hidden but the two ends
    assert on.step.step_seconds - off.step.step_seconds == pytest.approx(
        on.step.optimizer_seconds - off.step.optimizer_seconds, rel=0.02)


def test_deepspeed_offload_names_what_it_does_not_time() -> None:
    spec, _ = _pm0705()
    d = training_duration_for(spec, builtin_catalog().devices[A100], 8, 1e6,
                              dict(method="full", precision="bf16-mixed", micro_batch=1, seq_len=2048, zero=3,
                                   offload="params", optimizer="adamw", gpus=8))
    assert any("DeepSpeed" in w and "not" in w for w in d.warnings)
    assert d.step is not None and d.step.optimizer_seconds > 0


def test_formula_examples_run() -> None:
    import doctest

    from llmsizer.formulas import cpu_offload_time

    assert doctest.testmod(cpu_offload_time).failed == 0


def test_fsdp_optimizer_only_offload_is_refused() -> None:
    # was sized with a warning; FSDP has no optimizer-only offload, so the workload refuses it (probe25 D5;
    # tests/training/test_fsdp_offload_optimizer_refused.py)
    spec, f = _pm0705()
    with pytest.raises(InputError, match="offload params"):
        training_duration_for(spec, builtin_catalog().devices[A100], 8, 1e6, dict(f, offload="optimizer"))

"""When and how much the data-parallel collectives move under gradient accumulation (formulas/training_time.py eqs.
(7d), (7e), (8'')), against the collectives real frameworks issue: ``collectives_step.py`` runs one optimizer step of
k = 3 micro-steps of a small random-weight Llama over two gloo ranks and records every collective with the
micro-step it falls in.

- torch DDP reduces every micro-step in a plain loop and only the last one under ``no_sync`` (torch 2.13.0
  ``nn/parallel/distributed.py`` lines 1659-1685): the all-reduce payload is the fp32 gradients.
- DeepSpeed ZeRO-2 all-reduces the partitioned gradients in every micro-step, ZeRO-1 only at the accumulation
  boundary (``runtime/engine.py`` lines 2902-2910), both in bf16 (``communication_data_type``), and both all-gather the
  updated bf16 weights after the optimizer step (``runtime/zero/stage_1_and_2.py`` lines 2394-2400).

The model's bytes per rank are the ring volumes of those payloads: all-reduce 2 (n-1)/n S, all-gather (n-1)/n S.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import run_cases, run_ranks  # noqa: E402

from llmsizer.estimate.duration import grad_sync_of, reduced_grad_bytes, sharding_mode  # noqa: E402
from llmsizer.formulas.training_time import data_parallel_comm  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

HERE = Path(__file__).resolve().parent
LLAMA = {"model_type": "llama", "vocab_size": 2000, "hidden_size": 128, "intermediate_size": 256,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "tie_word_embeddings": False}
K, N = 3, 2
SCALAR = 64  # bytes: loss-scale / overflow flags and norms DeepSpeed all-reduces, not gradients
RING = {"all_reduce": 2 * (N - 1) / N, "all_gather_into_tensor": (N - 1) / N}


def _case(mode: str) -> dict[str, Any]:
    return dict(config=LLAMA, batch=1, seq=32, micro_steps=K, mode=mode)


def _run(mode: str) -> dict[str, Any]:
    return run_ranks(HERE / "collectives_step.py", _case(mode), N, local_rank_zero=mode.startswith("zero"))


@pytest.fixture(scope="module")
def _zero_steps() -> None:
    """Both ZeRO stages' real steps in one launch (ranks.py ``run_cases``: one child process per case, forked after
    the imports); each test's ``_run`` then reads its case's result."""
    pytest.importorskip("deepspeed")
    run_cases(HERE / "collectives_step.py", [_case("zero1"), _case("zero2")], N, local_rank_zero=True,
              preload=("deepspeed",))


def _sent(calls: list[list[Any]], phases: set[Any]) -> float:
    """Bytes one rank sends in ``phases`` (ring volumes of the recorded payloads)."""
    return sum(RING[op] * b for ph, op, b in calls if ph in phases and b > SCALAR)


def _check(calls: list[list[Any]], grad_elements: int, w: TrainingWorkload) -> None:
    mode = sharding_mode(w)
    g = grad_elements * reduced_grad_bytes(w)
    comm = data_parallel_comm(N, N, 0.0, g, mode, LLAMA["num_hidden_layers"], 1.0, grad_sync=grad_sync_of(w, mode),
                              updated_bytes=grad_elements * 2.0)
    for i in range(K - 1):  # the micro-steps before the last: every-micro-step collectives only
        assert _sent(calls, {i}) == pytest.approx(comm.bytes)
    assert _sent(calls, {K - 1, "step"}) == pytest.approx(comm.bytes + comm.step_bytes)
    assert _sent(calls, set(range(K)) | {"step"}) == pytest.approx(comm.bytes_per_step(K))
    assert {op for _, op, b in calls if b > SCALAR} <= set(RING)


def test_ddp_plain_loop_and_no_sync() -> None:
    r = _run("ddp")
    runs, p = r["runs"], r["grad_elements"]
    assert _sent(runs["ddp"], {0}) == pytest.approx(p * 4)  # fp32 gradients, all-reduced (n = 2: 2 x 1/2)
    _check(runs["ddp"], p, TrainingWorkload(gpus=N, grad_accumulation=K, grad_sync="micro-step"))
    _check(runs["ddp-no-sync"], p, TrainingWorkload(gpus=N, grad_accumulation=K))  # the default: no_sync
    assert _sent(runs["ddp-no-sync"], {0, 1}) == 0


@pytest.mark.usefixtures("_zero_steps")
@pytest.mark.parametrize("stage", [1, 2])
def test_deepspeed_zero_1_and_2(stage: int) -> None:
    pytest.importorskip("deepspeed")
    r = _run(f"zero{stage}")
    calls, p = r["runs"][f"zero{stage}"], r["grad_elements"]
    assert _sent(calls, {"step"}) == pytest.approx(p * 2 / 2)  # the bf16 weights gathered: (n-1)/n x 2 B
    _check(calls, p, TrainingWorkload(gpus=N, grad_accumulation=K, zero=stage, precision="deepspeed-bf16"))

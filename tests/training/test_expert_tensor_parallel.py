"""Megatron-Core's expert tensor-parallel size (``etp``, ``--etp``) as a stated setting.

Independent truth:

- the routed-expert parameters of the real Qwen3-235B-A22B and DeepSeek-V3 (transformers built on the meta device,
  shapes only: ``oracle_utils.build``; the ``.mlp.experts.`` tensors, e.g. Qwen3-235B's gate_up_proj
  [128, 3072, 4096] and down_proj [128, 4096, 1536] in each of 94 layers);
- Megatron-Core's expert grid (NVIDIA/Megatron-LM @d98e8a64 megatron/core/parallel_state.py:871-884): each expert
  split ETP ways, the experts EP ways, expert data-parallel = world / (ETP x EP x PP), world divisible by
  ETP x EP x PP; ETP = TP when unset (megatron/training/arguments.py:587-588); the distributed optimizer (ZeRO-1)
  shards the expert states over the expert data-parallel ranks (optimizer/__init__.py:1213-1245), not the gradients;
- its all-to-all token dispatcher (megatron/core/transformer/moe/token_dispatcher.py:705-711, :741-752): a rank's
  experts receive its sequence-parallel shard's routed copies over EP and all-gather them over the expert-TP group
  only: (t / tp) x etp x k copies at width I / etp.
"""

from __future__ import annotations

from functools import cache

import pytest

from cli_capture import run
from llmsizer.catalog.models import entries
from llmsizer.errors import FieldError, InputError
from llmsizer.estimate.training.compose import training_context
from llmsizer.estimate.training.states import stage_states
from llmsizer.formulas.training_activations import ActivationSetup, moe_saved_terms
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload

MEGATRON = dict(method="full", micro_batch=1, seq_len=4096, optimizer="adamw", zero=1, grad_checkpointing="full",
                precision="megatron-bf16", sequence_parallel=True)


@cache
def _experts(name: str) -> int:
    """Routed-expert parameters of the real model (every layer)."""
    from oracle_utils import build

    return sum(p.numel() for n, p in build(entries()[name].config).named_parameters() if ".mlp.experts." in n)


def _states(name: str, **layout: int | None) -> tuple[int, int, int, int]:
    """(expert elements, weights, gradients, optimizer bytes) on a device of pipeline stage 0."""
    w = TrainingWorkload(**{**MEGATRON, **layout})  # type: ignore[arg-type]
    st = stage_states(training_context(load_model(name), w), 0)
    return st.expert_elements, st.weights, st.grads, st.optimizer


@pytest.mark.parametrize("name,gpus,tp,ep", [("qwen3-235b-a22b", 64, 4, 16), ("deepseek-v3", 256, 8, 32)])
def test_expert_params_per_gpu_at_etp_1_and_etp_tp(name: str, gpus: int, tp: int, ep: int) -> None:
    """PP 1: a GPU holds E / (etp x ep) expert parameters; at ETP 1 each expert is whole, at ETP = TP (the default)
    split tp ways. bf16 weights and fp32 main gradients (unsharded under the distributed optimizer) grow by exactly
    the extra expert elements x 2 B and x 4 B; the optimizer states do not move: E / (etp x ep) over
    world / (etp x ep) expert data-parallel ranks is E / world either way."""
    e = _experts(name)
    n1, w1, g1, o1 = _states(name, gpus=gpus, tp=tp, ep=ep, etp=1)
    nt, wt, gt, ot = _states(name, gpus=gpus, tp=tp, ep=ep, etp=tp)
    nd, wd, gd, od = _states(name, gpus=gpus, tp=tp, ep=ep)  # unset: Megatron's rule, ETP = TP
    assert n1 == pytest.approx(e / ep, rel=1e-9)
    assert nt == pytest.approx(e / (tp * ep), rel=1e-9)
    assert (nd, wd, gd, od) == (nt, wt, gt, ot)
    extra = e / ep - e / (tp * ep)
    assert w1 - wt == pytest.approx(2 * extra, rel=1e-6)
    assert g1 - gt == pytest.approx(4 * extra, rel=1e-6)
    assert o1 == pytest.approx(ot, rel=1e-6)


def test_qwen3_235b_recipe_layout_is_accepted() -> None:
    """Megatron-Bridge's Qwen3-235B-A22B recipe: 256 GPUs, TP 2, PP 8, VP 4, EP 32, ETP 1. 256 / (2 x 8) = 16 data
    ranks cannot hold EP 32 with ETP = TP, but ETP x EP x PP = 256 divides the world; the 8 stages' experts sum to
    E / 32 (each expert whole, one of 32 per rank of an EP group)."""
    layout = dict(gpus=256, tp=2, pp=8, virtual_stages=4, ep=32)
    with pytest.raises(FieldError, match="must divide the data-parallel degree"):
        TrainingWorkload(**{**MEGATRON, **layout})  # type: ignore[arg-type]
    w = TrainingWorkload(**{**MEGATRON, **layout, "etp": 1})  # type: ignore[arg-type]
    ctx = training_context(load_model("qwen3-235b-a22b"), w)
    assert sum(stage_states(ctx, s).expert_elements for s in range(8)) == pytest.approx(
        _experts("qwen3-235b-a22b") / 32, rel=1e-9)
    code, out, err = run("train", "qwen3-235b-a22b", "--gpus", "256", "--tp", "2", "--pp", "8", "--virtual-stages",
                         "4", "--ep", "32", "--etp", "1", "--precision", "megatron-bf16", "--sequence-parallel",
                         "--zero", "1")
    assert code == 0, err
    assert "etp=1" in out


@pytest.mark.parametrize("argv,needle", [
    (("--etp", "2"), "--etp x --ep x --pp (2 x 32 x 8) must divide --gpus (256)"),
    (("--etp", "1", "--precision", "bf16-mixed"), "Megatron-Core's expert_tensor_parallel_size"),
])
def test_bad_etp_is_refused_with_one_line(argv: tuple[str, ...], needle: str) -> None:
    base = ["train", "qwen3-235b-a22b", "--gpus", "256", "--tp", "2", "--pp", "8", "--ep", "32", "--zero", "1",
            "--sequence-parallel"]
    if "--precision" not in argv:
        base += ["--precision", "megatron-bf16"]
    code, out, err = run(*base, *argv)
    assert code == 2 and not out
    assert needle in err and len(err.strip().splitlines()) == 1, err


def test_etp_needs_an_moe_model() -> None:
    w = TrainingWorkload(**{**MEGATRON, "gpus": 8, "tp": 2, "etp": 1})  # type: ignore[arg-type]
    with pytest.raises(InputError, match="mixture-of-experts"):
        training_context(load_model("qwen3-8b"), w)


def test_moe_activations_follow_the_dispatcher() -> None:
    """DeepSeek-V3, TP 8 under sequence parallelism: at ETP 1 a rank's experts run its own shard's t/8 x k routed
    copies at the full I; at ETP = 8 the all-gather over the expert-TP group gives t x k copies at I / 8. The
    intermediate tensors (copies x width) are the same; the gathered inputs and outputs (2 x copies x h) differ by
    the (t - t/8) x k copies not gathered, and the per-copy routing bookkeeping with them."""
    spec = load_model("deepseek-v3")
    assert spec.moe is not None
    t, tp, k, h = 4096, 8, spec.moe.experts_per_token, spec.hidden_size
    st = dict(batch=1, seq=t, compute=2, residual=2, expert=2, tp=tp, sp=True)

    def routed(etp: int) -> int:
        terms = moe_saved_terms(spec, ActivationSetup(**st, etp=etp))  # type: ignore[arg-type]
        return next(x.bytes for x in terms if x.name.startswith("routed experts"))

    assert routed(tp) == next(x.bytes for x in moe_saved_terms(spec, ActivationSetup(**st))  # type: ignore[arg-type]
                              if x.name.startswith("routed experts"))
    fewer = (t - t // tp) * k
    per_copy_in_out = 2 * h * 2  # input + output rows of h in bf16
    assert routed(tp) - routed(1) == fewer * per_copy_in_out + fewer * 16


def test_request_field_reaches_the_workload() -> None:
    """settings.etp in a request file is the workload's etp: stated on a dense model it is refused on its line."""
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    from llmsizer.request.reader import RequestError
    from request.helpers import job_yaml

    text = job_yaml("training", "method: full\nsettings: {micro_batch: 1, seq_len: 1024, precision: megatron-bf16, "
                                "etp: 1}")
    with pytest.raises(RequestError, match=r"t\.yaml:8: .*settings\.etp .*mixture-of-experts"):
        make_plan(parse_request(text, source="t.yaml"), alternatives=False)


# Qwen3-30B-A3B's config.json (Qwen/Qwen3-30B-A3B): 48 layers of 128 experts, each a gate, up and down projection
# of hidden_size 2048 x moe_intermediate_size 768; attention of 32 query and 4 key/value heads of head_dim 128
_QWEN3_30B_EXPERTS = 48 * 128 * 3 * 2048 * 768


def _step_comm_bytes(*argv: str) -> float:
    from cli_capture import run_json

    code, d = run_json("train", "qwen3-30b-a3b", "--precision", "megatron-bf16", "--seq", "4096", "--batch", "1",
                       "--zero", "1", "--tokens", "1e8", "--device", "h100-sxm", *argv)
    assert code in (0, 1)  # 1: the run does not fit the device; its duration is still estimated
    return float(d["duration"]["step"]["comm_bytes_per_step"])


def test_expert_gradients_reduce_over_the_expert_group_with_one_dense_replica() -> None:
    """review14 D2: on 4 GPUs at tp 4 there is one dense data-parallel replica, but at etp 1 every rank holds all
    the routed experts (world / (etp x ep x pp) = 4 expert data-parallel ranks: Megatron-LM parallel_state.py
    :871-880), whose gradients Megatron's distributed optimizer (zero 1) reduce-scatters over that group in the grad
    buffer's fp32 (grad_reduce_in_fp32, on by default under --bf16: arguments.py:1204-1216) and whose updated bf16
    parameters it all-gathers (review23a D3): 3/4 x E x (4 + 2) B per rank and step more than at etp = tp (one
    expert data-parallel rank)."""
    layout = ("--gpus", "4", "--tp", "4", "--sequence-parallel")
    extra = _step_comm_bytes(*layout, "--etp", "1") - _step_comm_bytes(*layout, "--etp", "4")
    assert extra == pytest.approx(3 / 4 * _QWEN3_30B_EXPERTS * (4 + 2), rel=1e-6)


def test_lora_expert_adapters_reduce_over_the_expert_group() -> None:
    """review14 D3: LoRA all-linear r16 under EP 8 on 8 GPUs: the routed experts' adapters live with their experts
    (one expert data-parallel rank: nothing to reduce), so only the dense adapters (per layer q 2048->4096, k and v
    2048->512, o 4096->2048, router 2048->128: r x (in + out) each) move: ZeRO-1's bf16 reduction, 2 x 7/8, and
    its all-gather of the updated weights, 7/8."""
    r = 16
    dense = 48 * r * ((2048 + 4096) * 2 + (2048 + 512) * 2 + (2048 + 128))
    lora = ("--method", "lora", "--targets", "all-linear", "--rank", str(r), "--gpus", "8")
    assert _step_comm_bytes(*lora, "--ep", "8") == pytest.approx(dense * 2 * (2 * 7 / 8 + 7 / 8), rel=1e-6)

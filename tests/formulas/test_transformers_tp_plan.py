"""Per-GPU weight bytes under transformers' own tensor parallelism against the real plan applied by transformers.

Independent truth: for one catalog model of each model type, the transformers 5.24 model built on the meta device
(``oracle_utils.build``), its tensor-parallel plan as transformers assembles it (``model.tp_plan``:
the class ``_tp_plan``, the config's ``base_model_tp_plan``, the added ``embed_tokens`` rule; distributed/mixin.py
``init_parallel_plans``), expanded per parameter by ``_expand_parallel_plan`` and applied by transformers' own
``apply_tensor_parallelism`` on a fake process group of ``tp`` ranks (torch's in-process "fake" backend: no
communication, real ``DTensor`` placements). The oracle's per-GPU bytes are rank 0's local shards, two bytes per
element (bf16); nothing here reads llmsizer's table. A model type whose plan is empty must be refused
(transformers raises for ``tp_size > 1`` without a plan, mixin.py:257-264).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from llmsizer import estimate_inference  # noqa: E402
from llmsizer.catalog.models import entries  # noqa: E402
from llmsizer.errors import InputError  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from oracle_utils import build  # noqa: E402

WORLD = 8


def _mesh(tp: int):  # type: ignore[no-untyped-def]
    from torch.distributed.device_mesh import DeviceMesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    return DeviceMesh("cpu", list(range(tp)))


def _one_per_type() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, e in entries().items():
        out.setdefault(str(e.config.get("model_type")), name)
    return out


MODELS = _one_per_type()


def _oracle(model_name: str, tp: int) -> tuple[float, dict[str, str]]:
    """(rank 0's weight bytes at 2 bytes per element, the expanded plan) with transformers' plan applied."""
    from torch.distributed.tensor import DTensor
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    model = build(entries()[model_name].config)
    names = [n for n, _ in model.named_parameters()]  # tied tensors once
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    # a tied lm_head's weight is the embedding's tensor (named_parameters lists it once, as the embedding): its
    # rule has nothing of its own to shard (both shard the vocabulary rows, the same bytes)
    known = set(names) | {n for n, _ in model.named_modules()}
    plan = {k: v for k, v in plan.items() if k in known}
    if plan:
        apply_tensor_parallelism(model, _mesh(tp), plan)
    total = 0
    for n in names:
        p = model.get_parameter(n)
        total += 2 * (p.to_local() if isinstance(p, DTensor) else p).numel()
    return total, plan


def _ours(model_name: str, tp: int) -> int:
    e = estimate_inference(load_model(model_name), engine="transformers", tensor_parallel=tp, context=1024,
                           weights="bf16")
    return next(i.bytes for i in e.items if i.name == "weights")


def _planned(model_type: str) -> bool:
    """Whether transformers has a tensor-parallel plan for the model (read from the built model, not llmsizer)."""
    return bool(build(entries()[MODELS[model_type]].config).tp_plan)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_per_gpu_weights_follow_the_real_plan_or_refuse(model_type):
    """TP 2 for every catalog model type: the bytes rank 0 holds once transformers applied its plan; a model type
    with no plan (transformers raises for it) is refused, in one line naming tensor_parallel."""
    name = MODELS[model_type]
    if not _planned(model_type):
        with pytest.raises(InputError) as err:
            _ours(name, 2)
        assert "tensor-parallel" in str(err.value) or "tensor_parallel" in str(err.value)
        return
    expected, _ = _oracle(name, 2)
    # Llama 4: its projector and vision adapter, split by the plan, are one 1-D lump in llmsizer's inventory
    # (kept whole): 61 MB of 402 GB
    assert _ours(name, 2) == pytest.approx(expected, rel=2e-4 if model_type == "llama4" else 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "tp"), [("deepseek-v3", 8), ("llama-3.1-70b-instruct", 8),
                                                ("qwen3-30b-a3b", 8), ("qwen3-30b-a3b", 2)])
def test_per_gpu_weights_at_the_quoted_sizes(model_name, tp):
    """DeepSeek-V3's plan names no attention module: its MLA (about 11.4 B parameters over 61 layers) stays whole on
    each of 8 GPUs, about 20 GB per GPU more than splitting everything."""
    expected, _ = _oracle(model_name, tp)
    assert _ours(model_name, tp) == pytest.approx(expected, rel=1e-6)
    if model_name == "deepseek-v3":
        full = 2 * sum(p.numel() for p in build(entries()[model_name].config).parameters())
        assert expected - full / tp > 19e9


RECURRENT_MIXERS = {"jamba": "JambaMambaMixer", "qwen3_next": "Qwen3NextGatedDeltaNet",
                    "nemotron_h": "NemotronHMamba2Mixer", "falcon_h1": "FalconH1Mixer",
                    "granitemoehybrid": "GraniteMoeHybridMambaLayer"}


@pytest.mark.parametrize("model_type", sorted(t for t in RECURRENT_MIXERS if t in MODELS))
def test_recurrent_mixer_activations_are_whole_on_every_rank(model_type):
    """transformers' plans leave a recurrent mixer's activations whole on every rank: a rule under a mixer module is
    at most ``colwise_gather_output`` (its output gathered back to all heads), so each rank runs the whole scan.
    The prefill peak of the torch path's scan (formulas/activations.py recurrent_mixer_bytes, eqs. M4, G4, M5) is
    then the same at any tensor_parallel (before: split tp ways, half the Jamba mixer at tp 2)."""
    from llmsizer.formulas.activations import prefill_activation_bytes

    name = MODELS[model_type]
    model = build(entries()[name].config)
    mixers = [n + "." for n, m in model.named_modules() if type(m).__name__ == RECURRENT_MIXERS[model_type]]
    assert mixers
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    styles = {v for k, v in plan.items() if any(k.startswith(p) for p in mixers)}
    assert styles <= {"colwise_gather_output"}, styles
    spec = load_model(name)
    one, two = (prefill_activation_bytes(spec, 1, 512, 512, tp=tp, forward_locals=True, recurrent_scan=True)
                for tp in (1, 2))
    assert one.mixer_bytes == two.mixer_bytes > 0

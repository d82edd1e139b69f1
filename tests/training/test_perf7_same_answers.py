"""perf7's speed changes answer what the code they replaced answered, on many random valid inputs (a differential
check: each reference below is the replaced code, kept here verbatim as the definition the faster one must meet).

- training/setup.py ``record_workload``: plain fields (no rule of their own, no framework profile) are recorded
  without the per-field rule tests; the assumptions (name, value and its type, default flag, reason) must be the
  replaced loop's, in order, for every field name, any ``given`` set, with and without a framework profile.
- specs/workload.py ``setting_engines``: for a mapping only the names it holds are tested (a missing name reads
  None, no setting); the answer must be the replaced one's for mappings and workload objects alike.
- formulas/training_activations.py ``masked_layers``: the layers ``needs_mask`` holds for, without testing each layer
  where it can hold for none; the list must be the replaced per-layer test's.
- training/compose.py ``_prepared``: the workload of ``estimate_training(device=...)`` is built by
  ``training_workload`` (the memo ``fit_training``'s kernel check fills) from the caller's fields in the caller's
  order and the device resolver's additions; it must equal the replaced ``TrainingWorkload(**resolved)`` field by
  field, ``given`` included.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from llmsizer.catalog.frameworks import framework_profiles
from llmsizer.catalog.models import entries, find
from llmsizer.errors import InputError
from llmsizer.estimate.caches import clear_caches
from llmsizer.estimate.device import precision_notes, resolve_target, training_device_fields, workload_on_device
from llmsizer.estimate.framework import profile_why, with_framework
from llmsizer.estimate.inference.common import Acc
from llmsizer.estimate.training import compose, setup
from llmsizer.estimate.training.setup import record_workload
from llmsizer.formulas.training_activations import ActivationSetup, masked_layers, needs_mask
from llmsizer.formulas.training_states import recipe
from llmsizer.result import Assumption, Estimate
from llmsizer.specs import TrainingWorkload
from llmsizer.specs import workload as workload_mod
from llmsizer.specs.training import MEGATRON_PRECISIONS, RECOMPUTE_MODULES, default_grad_checkpointing
from llmsizer.specs.workload import setting_engines


def _record_reference(w: TrainingWorkload, acc: Acc, names: tuple[str, ...]) -> None:
    """``record_workload`` before perf7 (main 340f5a34), verbatim but for the module prefixes and the one rule added
    since (review23a D4: the megatron precisions' attention names TEDotProductAttention)."""
    named = w.given or ()
    device_precision_why, _ = precision_notes(w)
    for name in names:
        value = getattr(w, name)
        if name == "recompute_modules":
            value = ",".join(m for m in RECOMPUTE_MODULES if m in w.recomputed_modules)
        default = name not in named
        why = setup._WHY.get(name, "") if default else "given"
        if default and name == "grad_checkpointing" and w.grad_checkpointing == default_grad_checkpointing(w.method) \
                and w.method == "qlora":
            why = setup.QLORA_GRAD_CHECKPOINTING_WHY
        if default and name == "loss" and w.precision in MEGATRON_PRECISIONS:
            why = setup.MEGATRON_LOSS_WHY
        if default and name == "attention" and w.precision in MEGATRON_PRECISIONS and w.attention == "sdpa" \
                and w.attention_kernel is None:  # review23a D4 (after perf7): TEDotProductAttention named
            why = setup.MEGATRON_ATTENTION_WHY
        if default and name == "recompute_modules":
            why = "Megatron-Core's default recompute_modules ['core_attn'] (transformer_config.py)"
        if name == "precision":
            why = device_precision_why or recipe(w.precision).description
        if default and w.framework != "none":
            why = profile_why(w, name) or why
        acc.assumptions.append(Assumption(name, value, default, why))


# valid values of the fields that decide a recorded reason or value (and a few others), drawn at random
CHOICES: dict[str, tuple[Any, ...]] = {
    "method": ("full", "lora", "qlora"),
    "precision": ("bf16-mixed", "fp16-mixed", "fp32", "bf16", "fsdp-bf16-mixed", "megatron-bf16", "megatron-fp16"),
    "grad_checkpointing": (None, "none", "full", "selective", "selective-op"),
    "micro_batch": (1, 2, 8),
    "seq_len": (512, 4096),
    "grad_accumulation": (1, 4),
    "attention": ("sdpa", "flash", "eager"),
    "packing": (False, True),
    "loss_chunks": (1, 8),
    "compile": (False, True),
    "float8": (False, True),
    "gpus": (1, 8),
    "zero": (0, 1, 3),
    "tp": (1, 2),
    "offload": ("none", "optimizer"),
    "activation_offload": (False, True),
    "metric": (None, "allocated", "reserved"),
    "device": ("gpu", "cpu"),
    "bf16_tensor_cores": (True, False),
    "gpu_capability": (None, 75, 90),
    "checkpoint_offload": (False, True),
    "framework": ("none",),
}


def _random_workloads(rng: random.Random, n: int) -> list[TrainingWorkload]:
    frameworks = tuple(framework_profiles())
    out: list[TrainingWorkload] = []
    while len(out) < n:
        fields = {k: rng.choice(v) for k, v in CHOICES.items() if rng.random() < 0.5}
        if rng.random() < 0.3:
            fields["framework"] = rng.choice(frameworks)
        if rng.random() < 0.2:
            fields.update(precision="megatron-bf16", grad_checkpointing="selective")
            if rng.random() < 0.5:
                fields["recompute_modules"] = rng.choice((("core_attn",), ("core_attn", "mlp")))
        try:
            out.append(TrainingWorkload(**fields))
        except InputError:
            continue
    return out


FIELD_NAMES = tuple(f for f in TrainingWorkload.__dataclass_fields__ if f != "given")


def test_record_workload_as_before() -> None:
    rng = random.Random(7)
    workloads = _random_workloads(rng, 1500)
    assert sum(w.framework != "none" for w in workloads) > 200  # the profile's reasons are exercised
    assert sum(w.recompute_modules is not None for w in workloads) > 50
    # the tuples the estimate records (setup.py resolve, compose.py _measure) and random ones over every field
    fixed = (("method", "precision", "micro_batch", "seq_len", "grad_accumulation", "grad_checkpointing", "attention",
              "packing", "loss", "loss_chunks", "kernels"), ("compile", "activation_offload", "float8",
              "context_parallel"), ("gpus", "zero", "tp", "pp", "ep", "offload"), ("recompute_modules",),
             ("checkpoint_offload", "checkpoint_impl"), ("precision",), ("loss",), ("grad_checkpointing",))
    compared = 0
    for w in workloads:
        for names in (*fixed, tuple(rng.sample(FIELD_NAMES, rng.randint(1, 12)))):
            if "recompute_modules" in names and w.recompute_modules is None and w.grad_checkpointing != "selective":
                names = tuple(n for n in names if n != "recompute_modules") or ("method",)
            new, old = Acc(), Acc()
            record_workload(w, new, names)
            _record_reference(w, old, names)
            assert new.assumptions == old.assumptions, (w, names)
            assert [type(a.value) for a in new.assumptions] == [type(a.value) for a in old.assumptions]
            compared += len(names)
    assert compared > 50_000


def _setting_engines_reference(given: Mapping[str, object] | object) -> tuple[list[str], set[str]]:
    """``setting_engines`` before perf7 (main 340f5a34), verbatim but for the module prefixes."""
    read = given.get if isinstance(given, Mapping) else (lambda n: getattr(given, n, None))
    gpus = read("gpus")
    named = [n for n in workload_mod._OWNERS if (workload_mod.engine_setting_given(n, read(n)) if n != "gpus"
                                                 else isinstance(gpus, int) and not isinstance(gpus, bool)
                                                 and gpus > 1)]
    if not named:
        return [], set()
    return named, set(workload_mod._OWNERS[named[0]]).intersection(*(workload_mod._OWNERS[n] for n in named[1:]))


class _Fields:
    """A workload-like object: attributes, not a mapping."""

    def __init__(self, d: dict[str, object]) -> None:
        self.__dict__.update(d)


def test_setting_engines_as_before() -> None:
    rng = random.Random(11)
    owners = list(workload_mod._OWNERS)
    values: tuple[object, ...] = (None, False, True, 0, 1, 2, 8, 0.5, "x", (1, 2))
    others = ("context", "concurrency", "engine", "weights", "memory", "device")
    seen_named = 0
    for _ in range(20_000):
        keys = rng.sample(owners, rng.randint(0, 4)) + rng.sample(others, rng.randint(0, 3))
        rng.shuffle(keys)
        d = {k: rng.choice(values) for k in keys}
        for given in (d, _Fields(d)):
            assert setting_engines(given) == _setting_engines_reference(given), d
        seen_named += bool(_setting_engines_reference(d)[0])
    assert seen_named > 5_000


def test_prepared_workload_as_before() -> None:
    """``_prepared`` (estimate_training with a device) builds its workload through ``training_workload`` from the
    caller's fields in the caller's order, then the resolver's additions: it must equal the replaced
    ``TrainingWorkload(**workload_on_device(...)[0])`` field by field, ``given`` and the values' types included."""
    spec = find("llama-3.1-8b").spec()
    rng = random.Random(13)
    compared = 0
    for _ in range(2_000):
        clear_caches(estimates_only=True)
        fields = {k: rng.choice(v) for k, v in CHOICES.items() if rng.random() < 0.5}
        fields["device"] = rng.choice(("gpu", "h100-sxm", "rtx-4090", "a100-sxm-40gb"))
        if rng.random() < 0.5:
            fields["memory"] = rng.choice((24 * 2**30, 80 * 2**30))
            fields["headroom"] = rng.choice((None, 0.1))
        if rng.random() < 0.5 and fields["device"] != "gpu":  # as fit_training passes them: the device's own fields
            fields.update(training_device_fields(resolve_target(fields["device"])[0]), device="gpu")
        items = list(fields.items())
        rng.shuffle(items)
        fields = dict(items)
        try:
            old = TrainingWorkload(**workload_on_device(dict(fields), "estimate_training")[0])
        except InputError:
            continue
        try:
            prepared = compose._prepared(spec, None, dict(fields))
        except InputError:  # a check after the workload (a kernel the device cannot run): the workload is built
            continue
        assert not isinstance(prepared, Estimate)
        new = prepared[1]
        old = with_framework(spec, old)[1]
        assert new == old and new.given == old.given, fields  # (== compares every field but given: given too)
        assert [type(v) for v in new.__dict__.values()] == [type(v) for v in old.__dict__.values()]
        compared += 1
    assert compared > 500


def test_masked_layers_as_before() -> None:
    """formulas/training_activations.py ``masked_layers`` (the duration's SDPA mask check, estimate/duration.py
    ``sdpa_masked_layers``) must list what the replaced per-layer test listed, on every catalog model (sliding windows,
    hybrids, encoder-decoders) and random settings: windows shorter and longer than the sequence, packing, each
    attention, Megatron-Core."""
    rng = random.Random(17)
    specs = []
    for name in sorted(entries()):
        try:
            specs.append(entries()[name].spec())
        except InputError:
            continue
    assert sum(s.sliding_window is not None for s in specs) >= 5
    nonempty = 0
    for spec in specs:
        for _ in range(12):
            st = ActivationSetup(batch=1, seq=rng.choice((128, 1024, 4096, 32768, 131072)),
                                 attention=rng.choice(("sdpa", "flash", "eager", "flex")), packing=rng.random() < 0.3,
                                 megatron_te=rng.random() < 0.2)
            old = [i for i, t in enumerate(spec.layer_types) if t != "none" and needs_mask(spec, i, st)]
            assert masked_layers(spec, st) == old, (spec.name, st)
            nonempty += bool(old)
    assert nonempty > 100

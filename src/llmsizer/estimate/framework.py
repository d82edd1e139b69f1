"""A training framework profile applied to a workload (``TrainingWorkload.framework``; the profiles are data:
catalog/data/frameworks.json, each default with its source file, line and date).

The one home of the rule "a profile's default applies only where the caller did not state the setting": a field in
``w.given`` (specs/given.py: what the user wrote) keeps its value; every other field the profile names takes the
profile's value, and the framework's own model code's layout (a ModelSpec field, by a named rule of
catalog/frameworks.py ``MODEL_RULES``) is applied to the model. The estimate names each applied default
"from framework profile NAME (source)" (estimate/training/setup.py ``resolve``). Idempotent: a workload and model the
profile already holds come back as the same objects.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..catalog.frameworks import FrameworkDefault, FrameworkProfile, framework_profile
from ..errors import InputError
from ..specs import ModelSpec, TrainingWorkload
from ..specs.training import POOL_METRICS, check_kernels
from .device import with_device_precision


def model_rule_holds(rule: str, spec: ModelSpec) -> bool:
    """Whether a profile's model rule (catalog/frameworks.py MODEL_RULES) applies to ``spec``."""
    if rule == "gqa":  # torchtune's expand + merge copies for GQA only; MQA's merge is a stride-0 view
        return 1 < spec.num_kv_heads < spec.num_heads
    if rule == "fewer-kv-heads":  # torchtitan's repeat_kv copies whenever K/V heads are fewer
        return spec.num_kv_heads != spec.num_heads
    raise InputError(f"unknown framework model rule {rule!r}")  # (checked on load: catalog/frameworks.py)


def workload_rule_holds(rule: str | None, w: TrainingWorkload) -> bool:
    """Whether a profile default's condition (catalog/frameworks.py WORKLOAD_RULES; None: always) holds for ``w``."""
    if rule is None:
        return True
    # where llmsizer's own default stays bf16-mixed (estimate/device.py with_device_precision: not a GPU without BF16
    # tensor cores); read from the device, not the precision, so the condition holds after the profile set it too
    bf16_default = w.bf16_tensor_cores or w.float8
    if rule == "bf16-device":
        return bf16_default
    if rule == "fsdp-bf16-device":
        return w.fsdp is not None and bf16_default
    if rule == "fsdp2-full":
        return w.fsdp == "full" and w.fsdp_version == 2
    if rule == "tp":
        return w.tp > 1
    if rule == "packing":
        return w.packing
    if rule == "pool-metric":
        return w.metric in POOL_METRICS
    raise InputError(f"unknown framework workload rule {rule!r}")  # (checked on load: catalog/frameworks.py)


# a setting that qualifies another: the profile's value of it is the framework's choice for the profile's value of
# the other, so it applies only where the other holds the profile's value (a given attention 'sdpa' under
# llm-foundry runs SDPA's own kernel, not llm-foundry's Triton FlashAttention; a given loss 'ce' under torchtune runs
# its own chunk count, not LinearCrossEntropyLoss's 8)
QUALIFIES = {"attention_kernel": "attention", "loss_chunks": "loss"}


def applied_workload_defaults(w: TrainingWorkload) -> tuple[FrameworkDefault, ...]:
    """The defaults of ``w``'s profile that apply: those whose field the caller did not give (and, for a field that
    qualifies another, :data:`QUALIFIES`, whose other field holds the profile's value), of a field the profile lists
    several defaults for the first whose condition holds (``workload_rule_holds``: the conditions read the caller's
    settings, which a profile's defaults never change)."""
    given = w.given or frozenset()
    profile = framework_profile(w.framework)

    def applies(d: FrameworkDefault) -> bool:
        other = QUALIFIES.get(d.field)
        base = profile.default(other) if other is not None else None
        return d.field not in given and (other is None or other not in given or base is None
                                         or getattr(w, other) == base.value)

    chosen: dict[str, FrameworkDefault] = {}
    for d in profile.workload:
        if d.field not in chosen and workload_rule_holds(d.when, w):
            chosen[d.field] = d
    return tuple(d for d in chosen.values() if applies(d))


def profile_why(w: TrainingWorkload, field: str) -> str | None:
    """The assumption's explanation of ``field`` when ``w``'s profile set it (not given by the caller): "from framework
    profile NAME (source)"; None otherwise."""
    if w.framework == "none" or field in (w.given or ()):
        return None
    d = next((d for d in applied_workload_defaults(w) if d.field == field), None)
    return None if d is None else why_of(framework_profile(w.framework), d)


def why_of(profile: FrameworkProfile, d: FrameworkDefault) -> str:
    return f"from framework profile {profile.name} ({d.source}; read {d.date})"


def with_framework(spec: ModelSpec, w: TrainingWorkload) -> tuple[ModelSpec, TrainingWorkload]:
    """``spec`` and ``w`` with ``w.framework``'s defaults applied where the caller did not state them (module
    docstring). Pure and idempotent: a workload and model that already hold the profile's values come back as the
    same objects. An unknown profile name is bad input (one line with the choices); a profile default that the
    caller's other settings refuse is one line naming the profile. The device's precision default (estimate/device.py
    ``with_device_precision``: fp16-mixed without BF16 tensor cores) is applied first, by the same rule: only where
    the caller stated none."""
    w = with_device_precision(w)
    if w.framework == "none":
        return spec, w
    try:
        return _applied(spec, w)
    except TypeError:  # a field value that cannot be hashed (a Python caller's list): applied uncached
        return _applied.__wrapped__(spec, w)


@lru_cache(maxsize=1024)
def _applied(spec: ModelSpec, w: TrainingWorkload) -> tuple[ModelSpec, TrainingWorkload]:
    """:func:`with_framework`, memoized on the model (by identity: ModelSpec compares so) and the workload (by its
    fields, ``given`` included): a catalog-wide search applies one profile to the same workload on every device, and
    the same applied objects let the duration's and the estimate's memos match them by identity."""
    profile = framework_profile(w.framework)
    changes: dict[str, Any] = {d.field: d.value for d in applied_workload_defaults(w)
                               if getattr(w, d.field) != d.value}
    if changes:
        try:
            w = replace(w, **changes)  # ``given`` travels with it: the profile's fields stay not-given
        except InputError as e:
            raise InputError(f"framework {profile.name!r}: its defaults "
                             f"{', '.join(f'{k}={v!r}' for k, v in changes.items())} with the settings given: "
                             f"{e} (state the field to override the profile)") from None
    check_kernels(w)  # the kernel named against the attention the profile left or set (specs/training.py)
    model: dict[str, Any] = {d.field: True for d in profile.model
                             if model_rule_holds(d.value, spec) and getattr(spec, d.field) is not True}
    return (replace(spec, **model) if model else spec), w


def model_defaults_applied(spec: ModelSpec, w: TrainingWorkload) -> tuple[tuple[str, str], ...]:
    """(field, why) of each model-layout default ``w``'s profile applies to ``spec`` (for the assumptions)."""
    if w.framework == "none":
        return ()
    profile = framework_profile(w.framework)
    return tuple((d.field, why_of(profile, d)) for d in profile.model if model_rule_holds(d.value, spec))

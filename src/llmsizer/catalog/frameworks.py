"""Training framework profiles (``catalog/data/frameworks.json``): the defaults a framework runs that change the
training estimate, each with its source (repository @ commit, file, line) and the date it was read.

A profile is data only; the composition core applies it (estimate/framework.py ``with_framework``) to the fields
the caller did not give. Read once, checked on load: every default names a value, a source and a date, and a model
rule is one of :data:`MODEL_RULES`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import InputError
from ..suggest import unknown_choice

# the model-layout rules a profile may name for a ModelSpec field (the framework's own model code): which models the
# framework's layout applies to
MODEL_RULES = {
    # K/V expanded to every query head and merged into a copy: GQA only (with one K/V head the merge is a view)
    "gqa": "1 < num_kv_heads < num_heads",
    # K/V repeated to every query head whenever there are fewer K/V heads than query heads (MQA too)
    "fewer-kv-heads": "num_kv_heads != num_heads",
}

# the conditions ('when') a profile's workload default may hold under: the framework sets that value only in that
# setup (estimate/framework.py ``workload_rule_holds``). A field may list several defaults: the first whose
# condition holds applies (one without a condition always holds)
WORKLOAD_RULES = {
    # the precision still llmsizer's bf16-mixed default: a device without BF16 tensor cores keeps its fp16-mixed
    # (estimate/device.py with_device_precision), as torch refuses neither but the framework's bf16 has no tensor path
    "bf16-device": "precision bf16-mixed by default (a GPU with BF16 tensor cores)",
    "fsdp-bf16-device": "fsdp given, precision bf16-mixed by default (a GPU with BF16 tensor cores)",
    "fsdp2-full": "fsdp full with fsdp_version 2",
    "tp": "tp > 1",
    "packing": "packing",
    # the memory metric reads the caching allocator's reserve (specs/training.py POOL_METRICS), the only one that
    # reads batch_shapes (refused under any other)
    "pool-metric": "metric reserved or nvidia-smi",
}


@dataclass(frozen=True)
class FrameworkDefault:
    """One default of a profile: the field it sets, its value, its source and the date it was read."""

    field: str
    value: Any
    source: str
    date: str
    when: str | None = None  # a WORKLOAD_RULES name: the setup the framework sets this value in (None: always)


@dataclass(frozen=True)
class FrameworkProfile:
    name: str
    description: str
    workload: tuple[FrameworkDefault, ...]  # TrainingWorkload fields
    model: tuple[FrameworkDefault, ...]  # ModelSpec fields, each value a MODEL_RULES name
    pinned: str | None = None  # "repository @commit" whose source lines the defaults were read at (None: 'none')

    @property
    def label(self) -> str:
        """The profile's name with its pinned version, as the CLI help and the web select show it:
        'llm-foundry (mosaicml/llm-foundry @b2a43a147)'; 'none' alone."""
        return self.name if self.pinned is None else f"{self.name} ({self.pinned})"

    def default(self, field: str) -> FrameworkDefault | None:
        """The profile's unconditional default for workload or model field ``field`` (None: the profile does not set
        it, or sets it only under a condition: estimate/framework.py applies those)."""
        return next((d for d in (*self.workload, *self.model) if d.field == field and d.when is None), None)


def _defaults(name: str, part: str, entries: dict[str, Any]) -> tuple[FrameworkDefault, ...]:
    """A part's defaults; a workload field may list several (each with its 'when' but the last: :data:`WORKLOAD_RULES`)."""
    out = []
    for field, listed in entries.items():
        alternatives = listed if isinstance(listed, list) else [listed]
        for i, e in enumerate(alternatives):
            missing = [k for k in ("value", "source", "date") if not e.get(k) and e.get(k) != 0]
            if missing:
                raise InputError(f"frameworks.json: {name}.{part}.{field} has no {', '.join(missing)}")
            if part == "model" and e["value"] not in MODEL_RULES:
                raise InputError(f"frameworks.json: {name}.model.{field}: "
                                 f"{unknown_choice('rule', e['value'], MODEL_RULES)}")
            when = e.get("when")
            if when is not None and (part == "model" or when not in WORKLOAD_RULES):
                raise InputError(f"frameworks.json: {name}.{part}.{field}: {unknown_choice('when', when, WORKLOAD_RULES)}")
            if when is None and i < len(alternatives) - 1:
                raise InputError(f"frameworks.json: {name}.{part}.{field}: only the last default may have no 'when'")
            out.append(FrameworkDefault(field, e["value"], e["source"], e["date"], when))
    return tuple(out)


@lru_cache(maxsize=1)
def framework_profiles() -> dict[str, FrameworkProfile]:
    """Every profile of ``catalog/data/frameworks.json`` by name ('none' first: no profile)."""
    text = resources.files("llmsizer.catalog.data").joinpath("frameworks.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    profiles = {name: FrameworkProfile(name, p["description"], _defaults(name, "workload", p["workload"]),
                                       _defaults(name, "model", p["model"]), p.get("pinned"))
                for name, p in data.items() if not name.startswith("_")}
    for p in profiles.values():  # the pinned commit is the one its defaults' sources were read at
        if p.pinned is not None and not any(p.pinned in d.source for d in (*p.workload, *p.model)):
            raise InputError(f"frameworks.json: {p.name}.pinned {p.pinned!r} is named by none of its sources")
    return profiles


def framework_profile(name: str) -> FrameworkProfile:
    """The profile named ``name``; an unknown name is one line with the closest names and the choices."""
    profiles = framework_profiles()
    if name not in profiles:
        raise InputError(unknown_choice("framework", name, profiles))
    return profiles[name]

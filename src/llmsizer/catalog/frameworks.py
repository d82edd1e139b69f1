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


@dataclass(frozen=True)
class FrameworkDefault:
    """One default of a profile: the field it sets, its value, its source and the date it was read."""

    field: str
    value: Any
    source: str
    date: str


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
        """The profile's default for workload or model field ``field`` (None: the profile does not set it)."""
        return next((d for d in (*self.workload, *self.model) if d.field == field), None)


def _defaults(name: str, part: str, entries: dict[str, Any]) -> tuple[FrameworkDefault, ...]:
    out = []
    for field, e in entries.items():
        missing = [k for k in ("value", "source", "date") if not e.get(k) and e.get(k) != 0]
        if missing:
            raise InputError(f"frameworks.json: {name}.{part}.{field} has no {', '.join(missing)}")
        if part == "model" and e["value"] not in MODEL_RULES:
            raise InputError(f"frameworks.json: {name}.model.{field}: {unknown_choice('rule', e['value'], MODEL_RULES)}")
        out.append(FrameworkDefault(field, e["value"], e["source"], e["date"]))
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

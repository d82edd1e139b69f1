"""A catalog name is looked up in its own file (catalog/models.py ``_lookup``: ``infer llama-3.1-8b`` reads one of the
66 files, not all): the same entry the full index gives only while each file is named after its entry and every
name, id and alias (and their part after the organisation) names one entry. These check both rules on the data
files, that every key resolves as the full index says, and that a name reads no other file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from importlib import resources

from llmsizer.catalog import models as M


def _files() -> dict[str, dict[str, object]]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return {f.name: json.loads(f.read_text("utf-8")) for f in folder.iterdir() if f.name.endswith(".json")}


def test_each_file_is_named_after_its_entry() -> None:
    wrong = {f: d["name"] for f, d in _files().items() if f"{str(d['name']).lower()}.json" != f}
    assert not wrong, f"rename these catalog files after their entry's name: {wrong}"


def test_every_name_id_and_alias_names_one_entry() -> None:
    claims: dict[str, set[str]] = defaultdict(set)
    for d in _files().values():
        for key in (d["name"], d["id"], *(d.get("aliases") or ())):  # type: ignore[misc]
            k = str(key).lower()
            claims[k].add(str(d["name"]).lower())
            claims[k.split("/")[-1]].add(str(d["name"]).lower())
    shared = {k: sorted(v) for k, v in claims.items() if len(v) > 1}
    assert not shared, f"catalog keys naming several entries: {shared}"


def test_every_key_resolves_as_the_full_index_says() -> None:
    index = M._index()
    for key, name in index.items():
        for asked in (key, key.upper(), f"  {key} "):
            assert M.find(asked, variants=False) is M.entries()[name], asked


def test_a_catalog_name_reads_only_its_own_file() -> None:
    code = ("from llmsizer.catalog import models as M; s = M.find_spec('llama-3.1-8b'); "
            "print(M.entries.cache_info().currsize, M._entry.cache_info().currsize, s.name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "1", "meta-llama/Llama-3.1-8B"]

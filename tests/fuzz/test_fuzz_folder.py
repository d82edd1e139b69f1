"""Model-folder fuzz: a real tiny folder (config.json + safetensors, optionally sharded with an index) where the
config, the index's weight_map and the file names are replaced by hostile values. Besides ending cleanly, the
reader must never open a file outside the folder: an audit hook records every open() while it runs."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import readers_helpers as H
from fuzz_common import FUZZ, JSON_VALUES, ends_cleanly
from hypothesis import given
from hypothesis import strategies as st

from llmsizer.models import load_model

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)

SHARD_REFS = st.one_of(st.sampled_from(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                        "../bait.safetensors", "../outside/bait.safetensors", "/etc/passwd",
                                        "sub/../../bait.safetensors", "", ".", "..", "config.json",
                                        "model.safetensors.index.json", "link.safetensors", "a\0b"]),
                       st.text(max_size=20), JSON_VALUES)


def _make(d: Path, shards: int) -> Path:
    folder = d / "model"
    folder.mkdir()
    arrays = H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG), np.float16)
    H.write_folder(folder, H.LLAMA_CONFIG, arrays, shards=shards)
    outside = d / "outside"
    outside.mkdir()
    (outside / "bait.safetensors").write_bytes(b"BAIT" * 100)
    (d / "bait.safetensors").write_bytes(b"BAIT" * 100)
    (folder / "link.safetensors").symlink_to(outside / "bait.safetensors")
    return folder


def _check(folder: Path) -> None:
    """Every file the reader opened is compared by resolved path with the bait files and /etc/passwd (a substring
    test on the path once failed when the random temporary directory itself was named tmpembaitmp)."""
    global _OPENED
    _OPENED = []
    try:
        ends_cleanly(lambda: load_model(str(folder)))
        opened = list(_OPENED)
    finally:
        _OPENED = None
    forbidden = {(folder.parent / "bait.safetensors").resolve(), (folder.parent / "outside" / "bait.safetensors").resolve(),
                 Path("/etc/passwd").resolve()}
    assert not [p for p in opened if Path(p).resolve() in forbidden], opened


@FUZZ
@given(refs=st.dictionaries(st.text(max_size=10), SHARD_REFS, max_size=4), keep=st.booleans(),
       index_extra=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=2))
def test_hostile_weight_maps_end_cleanly_inside_the_folder(refs, keep, index_extra):
    with tempfile.TemporaryDirectory() as d:
        folder = _make(Path(d), shards=2)
        index_path = folder / "model.safetensors.index.json"
        index = json.loads(index_path.read_text())
        index["weight_map"] = {**(index["weight_map"] if keep else {}), **refs}
        index_path.write_text(json.dumps({**index, **index_extra}))
        _check(folder)


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(sorted(H.LLAMA_CONFIG)), JSON_VALUES, max_size=3),
       shards=st.sampled_from([1, 2]), drop_index=st.booleans())
def test_hostile_configs_in_a_real_folder_end_cleanly(changes, shards, drop_index):
    with tempfile.TemporaryDirectory() as d:
        folder = _make(Path(d), shards=shards)
        (folder / "config.json").write_text(json.dumps({**H.LLAMA_CONFIG, **changes}))
        if drop_index and shards > 1:
            (folder / "model.safetensors.index.json").unlink()  # the glob path picks up link.safetensors
        _check(folder)

"""A named constant has one home (review32 N1): no UPPER_CASE name is assigned the same literal value at module level
in two modules of src/llmsizer; the second module imports the first. Before: TEXT_BYTES_PER_TOKEN in
formulas/storage.py and formulas/network.py (the plan read both), GDN_CHUNK in recurrent_activations.py and
training_activations.py, PIPELINE_SPLITS in specs/training.py and formulas/parallelism.py, SENSITIVITY in
request/fields.py and provider/inventory.py, and measure/settings.py's own METHODS, OPTIMIZER_IMPLS, DTYPES, ATTENTION
(specs' and formulas/hf_cache_traffic.py's), cli/main.py's and web/bridge.py's argparse words."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "llmsizer"
# the same name and value with a meaning of its own in each module: each schema's own version, each module's cache
INDEPENDENT = {"SCHEMA_VERSION", "_MEMO"}


# one UPPER name with other values in several modules, each a different thing (review35 N1: a name that means one
# thing holds one value in one home; these hold different things under a name local to each module's own topic)
DIFFERENT_MEANINGS = {
    "ADAPTER_FIELDS": "the LoRA fields the training composition records vs the ones measure/compare.py compares",
    "ALL_LINEAR": "PEFT's 'all-linear' shorthand the harness passes as is vs the module list it stands for (specs)",
    "COMMANDS": "the probe commands catalog/detect.py runs vs cli/commands.py's command -> module table",
    "CSP": "the Content-Security-Policy of a standalone HTML report vs the web server's",
    "EPILOG": "each CLI command's own --help examples",
    "FORMATS": "plan's output file suffixes vs the scheduler export formats",
    "FULL_EVERY": "each Gemma reader's own interleave of full-attention layers (3n: 5, Gemma 4: 6)",
    "INSTALL_HINT": "each optional extra's own pip line (web, hub)",
    "KINDS": "device kinds (catalog) vs measurement kinds (measure/settings) vs model file kinds (web/sources)",
    "SCHEMA_VERSION": "each stored document's own schema version",
    "SOURCE": "each formula module's own citation",
    "STATES": "the reservation states (provider/store.py) vs the web's action -> state table",
    "_LAZY": "each package's own lazy attribute table",
    "_NUM": "the request reader's number pattern (digit groups) vs units.py's (signed)",
    "_SCALAR": "GGUF value-type struct codes vs the request schema's scalar types",
}


def _literal_constants() -> dict[tuple[str, str], list[str]]:
    homes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in sorted(SRC.rglob("*.py")):
        for n in ast.parse(f.read_text()).body:
            if not isinstance(n, (ast.Assign, ast.AnnAssign)) or n.value is None:
                continue
            target = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if not (isinstance(target, ast.Name) and target.id.lstrip("_").isupper()):
                continue
            try:
                value = ast.literal_eval(n.value)
            except ValueError:
                continue  # not a literal: a derived value (an expression over other constants, a call)
            homes[(target.id, repr(value))].append(f"{f.relative_to(SRC)}:{n.lineno}")
    return homes


def test_each_literal_constant_has_one_home() -> None:
    homes = _literal_constants()
    assert len(homes) > 500  # the scan reads the tree (about 960 literal constants)
    twice = {k: v for k, v in homes.items() if len(v) > 1 and k[0] not in INDEPENDENT}
    assert not twice, twice


def test_the_readers_read_the_home() -> None:
    from llmsizer.formulas import network, parallelism, recurrent_activations, storage, training_activations
    from llmsizer.measure import settings
    from llmsizer.provider import inventory
    from llmsizer.request import fields
    from llmsizer.specs import training, workload
    assert network.TEXT_BYTES_PER_TOKEN is storage.TEXT_BYTES_PER_TOKEN
    assert training_activations.GDN_CHUNK is recurrent_activations.GDN_CHUNK
    assert not hasattr(parallelism, "PIPELINE_SPLITS")  # read by nobody there: specs/training.py's is the one
    assert inventory.SENSITIVITY is fields.SENSITIVITY
    assert settings.METHODS is training.METHODS and settings.OPTIMIZER_IMPLS is training.OPTIMIZER_IMPLS
    assert settings.DTYPES is workload.DTYPES


def test_one_name_one_value() -> None:
    """review35 N1: the test above keys on (name, value), so a name two modules gave different values passed (measure/
    settings.py's PRECISIONS, GRAD_CHECKPOINTING, DEVICES beside specs'; MAX_NODES 100000 in provider/scheduler_import.py
    and 512 in recommend.py). Those are renamed to say what they hold (MEASURED_PRECISIONS,
    MEASURED_GRAD_CHECKPOINTING, TORCH_DEVICES, MAX_IMPORTED_NODES, MAX_SEARCH_NODES); any other name with two values
    is one of DIFFERENT_MEANINGS, each with its reason."""
    values: dict[str, set[str]] = defaultdict(set)
    for name, value in _literal_constants():
        values[name].add(value)
    apart = {n for n, v in values.items() if len(v) > 1}
    assert apart <= DIFFERENT_MEANINGS.keys(), sorted(apart - DIFFERENT_MEANINGS.keys())
    assert DIFFERENT_MEANINGS.keys() <= apart, sorted(DIFFERENT_MEANINGS.keys() - apart)  # (no stale entry)
    for old in ("PRECISIONS", "GRAD_CHECKPOINTING", "DEVICES", "MAX_NODES"):
        assert old not in apart

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

"""The layers of docs/architecture.md, checked on the import graph: each top-level part of ``llmsizer`` imports
only parts on a lower floor (module-level imports; a function-level import is a deliberate lazy load and is
listed in LAZY_UPWARD with its reason). One composition layer: ``estimate/`` is the only part below the
services that imports both the formulas and the catalog, and nothing below it imports it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "llmsizer"

FLOORS = {
    "_version": 0, "errors": 0, "frozen": 0, "numbers": 0.5, "inputs": 0.5, "units": 1, "result": 1, "suggest": 1, "specs": 2, "formulas": 3, "readers": 4,
    "catalog": 5, "models": 6, "request": 7, "estimate": 8, "recommend": 9, "fits_on": 9.5, "plan": 10, "render": 11,
    "measure": 12, "provider": 12, "validation_cases": 13, "cli": 14, "__main__": 14.2, "web": 14.5, "__init__": 15,
}
# upward imports made inside a function on purpose, each with its reason
LAZY_UPWARD = {
    ("result", "render"): "Estimate.__str__ / _repr_html_ render on demand (notebook API)",
    ("estimate", "render"): "FitResult.__str__ / _repr_html_",
    ("recommend", "render"): "Recommendation.__str__ / _repr_html_",
    ("fits_on", "render"): "ModelsThatFit.__str__",
    ("plan", "render"): "Plan.__str__ / _repr_html_",
    ("measure", "cli"): "none expected",
    ("cli", "__init__"): "none expected",
    ("cli", "web"): "`serve` imports the web app (FastAPI) only when it runs",
}


def _part(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0].removesuffix(".py")


def _edges(module_level: bool) -> set[tuple[str, str, str]]:
    out = set()
    for f in SRC.rglob("*.py"):
        me = _part(f)
        mod_parts = list(f.relative_to(SRC).with_suffix("").parts)
        tree = ast.parse(f.read_text("utf-8"))
        nodes = tree.body if module_level else list(ast.walk(tree))
        for n in nodes:
            if isinstance(n, ast.If):  # `if TYPE_CHECKING:` blocks are for type checkers only
                continue
            if isinstance(n, ast.ImportFrom) and n.level > 0:
                is_pkg = f.name == "__init__.py"
                base = mod_parts[:-1] if not is_pkg else mod_parts[:-1]
                base = base[: len(base) - (n.level - 1)] if n.level > 1 else base
                target = [*base, *(n.module.split(".") if n.module else [])]
                if not target:  # `from .. import X`: a part when X is one, else the package itself
                    name = n.names[0].name
                    target = [name if (SRC / name).exists() or (SRC / f"{name}.py").exists() else "__init__"]
                top = target[0]
                if top != me:
                    out.add((me, top, f"{f.relative_to(SRC)}:{n.lineno}"))
    return out


def test_every_part_has_a_floor() -> None:
    parts = {p.name.removesuffix(".py") for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert parts <= set(FLOORS), f"give these a floor in FLOORS and docs/architecture.md: {parts - set(FLOORS)}"


def test_module_level_imports_only_go_down() -> None:
    bad = sorted(f"{where}: {a} -> {b}" for a, b, where in _edges(module_level=True)
                 if FLOORS[b] >= FLOORS[a])
    assert not bad, "imports that go up or sideways:\n" + "\n".join(bad)


def test_lazy_upward_imports_are_the_listed_ones() -> None:
    up = {(a, b) for a, b, _ in _edges(module_level=False) if FLOORS[b] >= FLOORS[a]}
    unexpected = up - {k for k, why in LAZY_UPWARD.items() if why != "none expected"}
    assert not unexpected, f"unlisted upward imports: {sorted(unexpected)}"


def test_one_composition_layer() -> None:
    """Only estimate/ (and the services above it) compose formulas with catalog data; nothing under estimate/
    reaches a service, and no service re-implements a rule estimate/ owns (headroom, FLOPs, format choice)."""
    edges = {(a, b) for a, b, _ in _edges(module_level=False)}
    for low in ("formulas", "specs", "readers", "catalog", "models", "request"):
        assert (low, "estimate") not in edges, f"{low} imports the composition core"
    rules = {"DEFAULT_HEADROOM =": "estimate/verdict.py", "def training_flops_per_token": "formulas/training_time.py",
             "def engine_weights": "estimate/formats.py", "def memory_verdict": "estimate/verdict.py",
             "\nDTYPE_BYTES: dict": "formulas/dtypes.py",
             # MoE routing: the share k / E of a routed-expert tensor one token uses (params.routed_share)
             "moe.experts_per_token / spec.moe.num_experts": "formulas/params.py",
             # architecture -> compute capability, in either scale (89 or ggml's 890); a device's capability
             # (its row's compute_capability, else this table) is Device.capability, beside it
             '"ada": 89': "catalog/hardware.py", "def capability(self)": "catalog/hardware.py"}
    for needle, home in rules.items():
        homes = [str(f.relative_to(SRC)) for f in SRC.rglob("*.py") if needle in f.read_text("utf-8")]
        assert homes == [home], f"{needle!r} defined in {homes}, its one home is {home}"


def _module_rows() -> dict[str, str]:
    """The rows of docs/architecture.md's "Every module, one line each" table: module -> its line."""
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text("utf-8")
    section = doc.split("## Every module, one line each", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            name = cells[0].strip("`")
            assert name not in rows, f"docs/architecture.md lists {name} twice"
            rows[name] = cells[1]
    return rows


def test_every_module_has_a_row_in_the_architecture_doc() -> None:
    """Each module under src/llmsizer, and each package (``name/``: its ``__init__.py``, or a folder of modules
    without one, as ``provider/``), has one row with a one-line description in docs/architecture.md, and each row
    names a module that exists: a new module without its row, or a removed one still listed, fails."""
    modules = {"__init__.py"}
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC)
        if f.name != "__init__.py":
            modules.add(rel.as_posix())
        if rel.parent != Path():
            modules.add(f"{rel.parent.as_posix()}/")
    rows = _module_rows()
    assert modules - rows.keys() == set(), f"add a row to docs/architecture.md for: {sorted(modules - rows.keys())}"
    assert rows.keys() - modules == set(), f"rows for modules that do not exist: {sorted(rows.keys() - modules)}"
    empty = sorted(name for name, line in rows.items() if not line)
    assert not empty, f"rows without a description: {empty}"


def test_every_path_the_architecture_doc_names_exists() -> None:
    """Each backticked path in docs/architecture.md (``estimate/fit.py``, ``estimate/fit.py:fit_memory``,
    ``tests/validation``, ``catalog/data/``) names a file or folder under src/llmsizer/ or the repository root, so
    a moved module or a short relative name (``store.py`` for ``provider/store.py``) fails here."""
    import re

    root = SRC.parents[1]
    doc = (root / "docs" / "architecture.md").read_text("utf-8")
    pathlike = re.compile(r"^[a-z_][\w.-]*(/[\w.-]+)*(\.(py|json|md|csv|js|html|css|sh)|/)$|^[a-z_]+(/[\w.-]+)+$")
    missing = set()
    for token in re.findall(r"`([^`\n]+)`", doc):
        path = token.split(":")[0]
        if " " in path or not pathlike.match(path):
            continue
        if not any((base / path.rstrip("/")).exists() for base in (SRC, root)):
            missing.add(token)
    assert not missing, f"docs/architecture.md names paths that do not exist: {sorted(missing)}"

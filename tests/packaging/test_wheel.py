"""The wheel works (issue 11): a wheel built from the repository carries every module and data file of
``src/llmsizer``, installs into a fresh virtual environment, and runs the README's main job from a folder outside
the repository, with no PYTHONPATH and no editable install in sight.

Slow (a build, a venv and an install: about 15-30 s); it still runs in CI. PyYAML, the one core dependency, is
fetched as a wheel by the running pip (its cache, or the configured index) and installed with --no-index, so
nothing but the wheel and PyYAML reaches the new environment; where no PyYAML wheel can be had the test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "llmsizer"
EXAMPLE = ROOT / "examples" / "lora-finetune-and-chat.yaml"

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _clean_env(venv_dir: Path) -> dict[str, str]:
    """The new venv first on PATH; none of the test process's Python settings (PYTHONPATH, ...)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "PIP_TARGET")}
    env["PATH"] = str(venv_dir / "bin") + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(venv_dir)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _setuptools_ok() -> bool:
    """setuptools >= 77 (pyproject's build requirement) importable here: then the build needs no download."""
    try:
        import setuptools
    except ImportError:
        return False
    try:
        return int(setuptools.__version__.split(".")[0]) >= 77
    except ValueError:
        return False


def _package_files() -> set[str]:
    """Every file the package is made of, as wheel paths (llmsizer/...), caches left out."""
    out = set()
    for p in PKG.rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
            out.add(p.relative_to(PKG.parent).as_posix())
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the repository (the build writes build/ and *.egg-info into its source)."""
    work = tmp_path_factory.mktemp("wheel")
    proj = work / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, proj / name)
    shutil.copytree(ROOT / "src", proj / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    dist = work / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), "./proj"]
    if _setuptools_ok():
        cmd.insert(4, "--no-build-isolation")
    r = _run(cmd, cwd=work, timeout=300)
    assert r.returncode == 0, f"pip wheel failed:\n{r.stdout}\n{r.stderr}"
    wheels = sorted(dist.glob("llmsizer-*.whl"))
    assert len(wheels) == 1, f"expected one llmsizer wheel in {dist}: {sorted(p.name for p in dist.iterdir())}"
    return wheels[0]


def test_the_wheel_holds_every_module_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _package_files()
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (pyproject.toml package-data / packages): {missing}"
    data = {n for n in expected if not n.endswith(".py")}
    # the kinds of data the package reads at run time, each present (a guard against an empty glob)
    for must in ("llmsizer/py.typed", "llmsizer/request/request.schema.json",
                 "llmsizer/catalog/data/hardware/accelerators.json", "llmsizer/catalog/data/config_defaults.json"):
        assert must in data and must in names
    assert any(n.startswith("llmsizer/catalog/data/models/") for n in names)


def test_the_wheel_installs_and_plans_from_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    got = _run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(wheelhouse),
                "pyyaml>=6"], cwd=tmp_path, timeout=180)
    if got.returncode != 0 or not list(wheelhouse.glob("*.whl")):
        pytest.skip(f"no PyYAML wheel available to install into the fresh venv: {got.stderr.strip()[-300:]}")
    venv_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    py = venv_dir / "bin" / "python"
    env = _clean_env(venv_dir)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    r = _run([str(py), "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse), "--no-cache-dir",
              "--disable-pip-version-check", str(wheel)], cwd=outside, env=env, timeout=300)
    assert r.returncode == 0, f"pip install of the wheel failed:\n{r.stdout}\n{r.stderr}"

    # the package comes from the venv, not from the repository
    r = _run([str(py), "-c", "import llmsizer, sys; print(llmsizer.__file__); print('torch' in sys.modules)"],
             cwd=outside, env=env)
    assert r.returncode == 0, r.stderr
    where, torch_loaded = r.stdout.split()
    assert Path(where).resolve().is_relative_to(venv_dir.resolve()), where
    assert not Path(where).resolve().is_relative_to(ROOT), where
    assert torch_loaded == "False"

    cli = str(venv_dir / "bin" / "llmsizer")
    r = _run([cli, "plan", str(EXAMPLE), "-o", "report.html"], cwd=outside, env=env)
    assert r.returncode == 0, f"llmsizer plan exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    report = outside / "report.html"
    assert report.is_file()
    html = report.read_text("utf-8")
    assert html.lstrip().lower().startswith("<!doctype html") and "ticket-lora" in html and "support-chat" in html

    r = _run([cli, "models"], cwd=outside, env=env)
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0] for line in r.stdout.splitlines()[2:] if line.strip()}
    catalog = {p.stem for p in (PKG / "catalog" / "data" / "models").glob("*.json")}
    assert catalog and catalog <= listed, f"models not listed: {sorted(catalog - listed)}"

    r = _run([cli, "request", "schema"], cwd=outside, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads((PKG / "request" / "request.schema.json").read_text("utf-8"))

    r = _run([cli, "hardware", "list"], cwd=outside, env=env)
    assert r.returncode == 0 and "h100" in r.stdout.lower(), r.stderr

"""Facts the hand-written docs state that a change elsewhere can make false: each is re-derived here from the live
code (the answer, the message, the route, the module), so the doc fails a test instead of going stale. Before
(probe12): docs/python-api.md's table missed five public names, docs/provider.md quoted a vLLM pool of 72.17 GiB
(now 72.35), docs/plans.md an error message since reworded, docs/architecture.md a constant that no longer exists,
web/API.md three of the six pages, the README's layout web/ and its "Fits" definition llama.cpp and SGLang."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import llmsizer
from llmsizer.units import format_bytes

ROOT = Path(__file__).resolve().parents[2]


def _read(rel: str) -> str:
    return (ROOT / rel).read_text("utf-8")


def test_python_api_table_lists_every_public_name() -> None:
    page = _read("docs/python-api.md")
    table = page.split("## The public API", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([A-Za-z_]\w*)[`(]", table))
    assert set(llmsizer.__all__) - listed == set()
    assert sorted(n for n in dir(llmsizer) if not n.startswith("_")) == sorted(
        n for n in llmsizer.__all__ if not n.startswith("_"))  # dir() is the public list: no TYPE_CHECKING, errors


def test_python_api_print_is_the_cli_text(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/python-api.md: "That is the same text `llmsizer infer llama-3.1-8b --context 8192 --concurrency 4`
    prints"."""
    from llmsizer.cli.main import main

    page = _read("docs/python-api.md")
    claim = re.search(r"That is the same text `llmsizer (infer [^`]+)` prints", page)
    assert claim is not None and "estimate_inference(spec, context=8192, concurrency=4)" in page
    assert main(claim.group(1).split()) == 0
    cli = capsys.readouterr().out
    assert cli.rstrip("\n") == str(llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=4))


def test_provider_example_figures_are_fits() -> None:
    """docs/provider.md's other-device-type example quotes what fit answers for 2 and 4 x h100-sxm."""
    text = " ".join(_read("docs/provider.md").split())
    m = re.search(r"2 x h100-sxm do not hold it \(this workload needs ([\d.]+ GiB) per device of the ([\d.]+ GiB) "
                  r"vLLM's pool offers\) and 4 do", text)
    assert m is not None
    kw = {"engine": "vllm", "context": 8192, "concurrency": 4, "speed": False}
    two = llmsizer.fit("llama-3.1-70b-instruct", "h100-sxm", 2, **kw)
    assert not two.fits
    details = two.estimate.details
    assert (m.group(1), m.group(2)) == (format_bytes(details["workload_bytes"]),
                                        format_bytes(details["workload_budget_bytes"]))
    assert llmsizer.fit("llama-3.1-70b-instruct", "h100-sxm", 4, **kw).fits


def test_plans_error_sample_is_the_live_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from llmsizer.cli.main import main

    page = _read("docs/plans.md")
    block = re.search(r"```\n\$ llmsizer request check req\.yaml\n(.*?)\n```", page, flags=re.S)
    assert block is not None and "`peak: lots` and `maintenance_window:`" in page
    src = (ROOT / "examples" / "cpu-internal-tool.yaml").read_text("utf-8")
    edited = src.replace("peak: 6}", "peak: lots}").replace("      maintenance_windows:", "      maintenance_window:")
    assert edited.count("lots") == 1 and "maintenance_window:" in edited
    (tmp_path / "req.yaml").write_text(edited, "utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["request", "check", "req.yaml"]) == 2
    assert capsys.readouterr().err.rstrip("\n") == block.group(1)


def test_architecture_constants_exist() -> None:
    """Every backticked CONSTANT (or module.CONSTANT) docs/architecture.md names is defined in src/, tests/ or
    scripts/ (before: `SETTINGS_TO_WORKLOAD`, renamed away)."""
    code = "\n".join(p.read_text("utf-8") for d in ("src", "tests", "scripts") for p in (ROOT / d).rglob("*.py"))
    names = set(re.findall(r"`(?:[\w/]+\.py:|[a-z_]+\.)?([A-Z][A-Z0-9_]{3,})`", _read("docs/architecture.md")))
    assert len(names) > 20  # the regex still finds the doc's constants (27 since its rule table became rule -> home)
    missing = [n for n in sorted(names) if not re.search(rf"^\s*(?:class\s+)?{n}\b\s*(?:[:=(]|$)", code, re.M)]
    assert missing == []


def test_page_lists_are_the_app_routes() -> None:
    pytest.importorskip("fastapi")
    from llmsizer.web.pages import router

    routes = {r.path.replace("{name:path}", "...") for r in router.routes}  # type: ignore[attr-defined]
    api = re.search(r"^Pages \(web-ui, `web/pages.py`\): (.*)$", _read("src/llmsizer/web/API.md"), re.M)
    web = re.search(r"`src/llmsizer/web/pages.py`: the FastAPI router the app includes: (.*?)\n\s*and (`[^`]+`)",
                    _read("docs/web.md"))
    assert api is not None and web is not None
    assert {p.removeprefix("GET ") for p in re.findall(r"`([^`]+)`", api.group(1))} == routes
    assert set(re.findall(r"`([^`]+)`", web.group(1) + web.group(2))) == routes


def test_readme_layout_names_every_module() -> None:
    readme = _read("README.md")
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    skip = {"__init__.py", "__main__.py", "_version.py", "py.typed", "__pycache__"}
    for entry in sorted(p.name for p in (ROOT / "src" / "llmsizer").iterdir() if p.name not in skip):
        name = entry.removesuffix(".py")
        assert re.search(rf"\b{re.escape(name)}\b", layout), entry


def test_readme_fits_definition_states_the_margins() -> None:
    from llmsizer.estimate.verdict import DEFAULT_HEADROOM, LLAMACPP_FIT_TARGET

    text = " ".join(_read("README.md").split())
    fits = text.split('"Fits" means', 1)[1].split("Device memory is", 1)[0]
    assert f"{DEFAULT_HEADROOM:.0%}".replace("%", " %") in fits
    assert f"for llama.cpp on a GPU, within device memory - {format_bytes(LLAMACPP_FIT_TARGET)}" in fits
    assert "vLLM" in fits and "SGLang" in fits and "no headroom" in fits


def test_setup_script_states_the_dependencies() -> None:
    import tomllib

    deps = tomllib.loads(_read("pyproject.toml"))["project"]["dependencies"]
    comment = _read("scripts/setup.sh").splitlines()[1]
    assert deps == ["pyyaml>=6"] and "PyYAML" in comment and "no dependencies" not in comment


def test_shared_research_is_not_cited_where_the_repository_lacks_it() -> None:
    if (ROOT / "shared" / "research" / "hardware_notes.md").exists():
        pytest.skip("the research notes are present")
    assert "shared/research/hardware_notes.md" not in _read("docs/hardware.md")

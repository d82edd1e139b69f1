"""CLI conventions users expect (issue #11): "did you mean", variant names, engine aliases, stdin requests,
a fast --version, shell completion, output file permissions. Run through the real entry point."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_capture import run_cli

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


# ------------------------------------------------------------------------------------------ did you mean

@pytest.mark.parametrize(("args", "meant"), [
    (["trian"], "'train'"),
    (["request", "chek", "x.yaml"], "'check'"),
    (["infer", "llama-3.1-8b", "--contxt", "8k"], "'--context'"),
    (["infer", "llama-3.1-8b", "--concurency=2"], "'--concurrency'"),
    (["infer", "llama-3.1-8b", "--engine", "vlm"], "'vllm'"),
    (["infer", "llama-3.1-8bb"], "'llama-3.1-8b'"),
    (["inspect", "qwen3-8"], "'qwen3-8b'"),
])
def test_mistyped_names_get_one_line_with_did_you_mean(args, meant):
    err = one_line_error(run_cli(*args))
    assert "did you mean" in err and meant in err, err


def test_nothing_close_suggests_nothing():
    err = one_line_error(run_cli("xyzzy-frobnicate"))
    assert "did you mean" not in err
    err = one_line_error(run_cli("infer", "totally-unknown-thing"))
    assert "unknown model 'totally-unknown-thing'" in err and "did you mean" not in err


def test_close_matches_helper_is_case_insensitive_and_keeps_spelling():
    from llmsizer.suggest import close_matches, did_you_mean
    assert close_matches("LLAMACP", ["transformers", "vllm", "llamacpp"]) == ["llamacpp"]
    assert did_you_mean("--contxt", ["--context", "--concurrency"], n=1) == "; did you mean '--context'?"
    assert did_you_mean("zzz", ["--context"]) == ""


# ------------------------------------------------------------------------------------------ engine aliases

@pytest.mark.parametrize("alias", ["llama.cpp", "llama-cpp", "LLAMA.CPP"])
def test_llama_cpp_spellings_are_the_llamacpp_engine(alias):
    base = ("infer", "llama-3.1-8b", "--weights", "q4_k_m", "--context", "4096", "--json")
    want = run_cli(*base, "--engine", "llamacpp")
    got = run_cli(*base, "--engine", alias)
    assert want.returncode == 0 and got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    assert '"value": "llamacpp"' in got.stdout


def test_engine_alias_in_the_python_api():
    import llmsizer
    from llmsizer.specs import InferenceWorkload
    assert InferenceWorkload(engine="llama.cpp").engine == "llamacpp"
    a = llmsizer.estimate_inference("qwen2.5-0.5b", engine="llama.cpp", weights="q8_0").to_dict()
    b = llmsizer.estimate_inference("qwen2.5-0.5b", engine="llamacpp", weights="q8_0").to_dict()
    assert a == b


def test_unknown_engine_still_rejected_with_the_list():
    from llmsizer.errors import InputError
    from llmsizer.specs import InferenceWorkload
    with pytest.raises(InputError, match="choose one of: transformers, vllm, llamacpp"):
        InferenceWorkload(engine="llama.c")
    err = one_line_error(run_cli("infer", "llama-3.1-8b", "--engine", "tgi"))
    assert "invalid choice: 'tgi'" in err


# ------------------------------------------------------------------------------------------ fast --version / --help

_PROBE = """
import sys
before = set(sys.modules)
from llmsizer.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
sys.stdout.flush()
print("MODULES", " ".join(sorted(set(sys.modules) - before)))
"""


def _imported(*argv: str) -> tuple[str, set[str]]:
    r = subprocess.run([sys.executable, "-c", _PROBE.format(argv=list(argv))], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=SRC), timeout=120)
    assert r.returncode == 0, r.stderr
    out, _, mods = r.stdout.rpartition("MODULES ")
    return out, set(mods.split())


def test_version_imports_no_command_module():
    out, mods = _imported("--version")
    from llmsizer import __version__
    assert out.strip() == f"llmsizer {__version__}"
    cli = {m for m in mods if m.startswith("llmsizer.cli.")}
    assert cli == {"llmsizer.cli.main", "llmsizer.cli.commands"}, cli
    assert not {m for m in mods if m.startswith(("llmsizer.catalog", "llmsizer.plan", "llmsizer.request"))}


def test_help_lists_every_command_without_importing_them():
    from llmsizer.cli.main import COMMANDS
    out, mods = _imported("--help")
    for name in COMMANDS:
        assert f"    {name}" in out, name
    assert {m for m in mods if m.startswith("llmsizer.cli.")} == {"llmsizer.cli.main", "llmsizer.cli.commands"}
    third_party = {m.split(".")[0] for m in mods} - set(sys.stdlib_module_names) - {"llmsizer"}
    assert not third_party, third_party  # no torch, transformers, numpy, yaml, web stack


@pytest.mark.parametrize("command", ["plan", "fit", "recommend"])
def test_a_commands_help_imports_no_estimator(command: str) -> None:
    """probe33 D7: `plan --help` took 1.0-1.6 s, most of it importing the planner and every estimator (llmsizer.plan,
    estimate.fit, estimate.duration, the renderers) to build a parser that needs none of them; they are imported
    where the command runs. The help is the parser's all the same (its usage line)."""
    out, mods = _imported(command, "--help")
    assert out.startswith(f"usage: llmsizer {command} "), out[:200]
    heavy = {m for m in mods if m.startswith(("llmsizer.plan", "llmsizer.recommend", "llmsizer.estimate.fit",
                                              "llmsizer.estimate.duration", "llmsizer.render.", "llmsizer.catalog.models"))
             and m != "llmsizer.render.safe"}
    assert not heavy, sorted(heavy)


WEB_STACK = {"fastapi", "starlette", "uvicorn", "pydantic", "pydantic_core", "anyio", "httpx", "h11"}


def test_only_serve_imports_the_web_stack():
    """`import llmsizer` and every command but a running `serve` stay free of the web stack (issue #13)."""
    for argv in (("infer", "llama-3.1-8b", "--json"), ("serve", "--help"), ("request", "new")):
        _, mods = _imported(*argv)
        web = {m for m in mods if m.split(".")[0] in WEB_STACK or m.startswith("llmsizer.web")}
        assert not web, (argv, sorted(web)[:10])


# ------------------------------------------------------------------------------------------ output file modes

@pytest.fixture
def umask():
    def set_mask(mask: int) -> None:
        os.umask(mask)
    old = os.umask(0o022)
    yield set_mask
    os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_get_the_users_normal_permissions(tmp_path, umask, mask, mode):
    umask(mask)
    outputs = {
        "request.yaml": ["request", "new", "-o", str(tmp_path / "request.yaml")],
        "schema.json": ["request", "schema", "-o", str(tmp_path / "schema.json")],
        "plan.json": ["plan", str(ROOT / "examples" / "cpu-internal-tool.yaml"), "-q", "-o",
                      str(tmp_path / "plan.json")],
    }
    for name, args in outputs.items():
        r = run_cli(*args)
        assert r.returncode in (0, 1), r.stderr
        got = (tmp_path / name).stat().st_mode & 0o777
        assert got == mode, (name, oct(got), oct(mode))
    plain = tmp_path / "plain.txt"  # the truth: what open() gives under this umask
    plain.write_text("x")
    assert plain.stat().st_mode & 0o777 == mode
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_overwritten_file_keeps_its_mode(tmp_path, umask):
    out = tmp_path / "schema.json"
    out.write_text("old")
    out.chmod(0o600)
    assert run_cli("request", "schema", "-o", str(out), "--force").returncode == 0
    assert out.stat().st_mode & 0o777 == 0o600 and out.read_text() != "old"


# ------------------------------------------------------------------------------------------ request from stdin

EXAMPLE = ROOT / "examples" / "cpu-internal-tool.yaml"
BAD_REQUEST = "version: 1\njobs:\n  - name: chat\n    kind: inference\n    modle: llama-3.1-8b\n"


def test_request_check_reads_stdin():
    r = run_cli("request", "check", "-", stdin=EXAMPLE.read_text())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<stdin>: valid request with 1 job(s)")


def test_plan_reads_stdin_and_gives_the_same_plan(tmp_path):
    import json
    from_file = run_cli("plan", str(EXAMPLE), "--json", "--today", "2026-01-05")
    from_stdin = run_cli("plan", "-", "--json", "--today", "2026-01-05", stdin=EXAMPLE.read_text())
    assert from_file.returncode == from_stdin.returncode and from_file.returncode in (0, 1), from_stdin.stderr
    a, b = json.loads(from_file.stdout), json.loads(from_stdin.stdout)
    assert b["source"] == "<stdin>" and a["source"] == str(EXAMPLE)
    a = json.loads(from_file.stdout.replace(json.dumps(str(EXAMPLE)), '"<stdin>"'))
    assert a["request"].pop("base_dir") == str(EXAMPLE.parent)
    assert b["request"].pop("base_dir") == os.getcwd()  # relative model paths in a piped request: from here
    assert a == b


@pytest.mark.parametrize("command", [["request", "check", "-"], ["plan", "-"]])
def test_stdin_errors_name_stdin_and_the_line(command):
    r = run_cli(*command, stdin=BAD_REQUEST)
    # an invalid request is bad input to both: exit 2 (README "Exit codes")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.splitlines()
    assert any(line.startswith("llmsizer: error: <stdin>:5: ") and "'modle'" in line for line in lines), r.stderr
    assert all(line.startswith("llmsizer: error: <stdin>:") for line in lines), r.stderr


def test_an_invalid_request_is_bad_input_to_every_command_that_reads_it(tmp_path):
    """README "Exit codes": 2 is bad input, 1 an answer that does not fit. The same invalid file is bad input to
    `request check` (with or without --json), `plan` and `capacity check`: exit 2 and the same lines. Before,
    `request check` exited 1 where the others exited 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_REQUEST)
    inventory = str(ROOT / "examples" / "provider" / "inventory.yaml")
    runs = {" ".join(c): run_cli(*c) for c in (("request", "check", str(bad)), ("plan", str(bad)),
                                          ("capacity", "check", str(bad), "--no-db", "--inventory", inventory))}
    lines = {k: r.stderr for k, r in runs.items()}
    assert {r.returncode for r in runs.values()} == {2}, lines
    assert len(set(lines.values())) == 1 and "'modle'" in lines[f"plan {bad}"]
    r = run_cli("request", "check", str(bad), "--json")
    assert r.returncode == 2 and r.stderr == lines[f"plan {bad}"] and r.stdout == ""  # as plan --json


# ------------------------------------------------------------------------------------------ instruct/chat variants

def _infer_json(model: str) -> dict:
    import json
    r = run_cli("infer", model, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_qwen25_instruct_resolves_to_its_base_saying_so():
    import json
    d = _infer_json("Qwen2.5-7B-Instruct")
    notes = [a for a in d["assumptions"] if a["name"] == "model.name"]
    assert len(notes) == 1 and notes[0]["value"].startswith("Qwen2.5-7B-Instruct resolved to Qwen/Qwen2.5-7B ")
    assert "same architecture" in notes[0]["value"]
    # Qwen2.5-7B-Instruct's published shape (config.json; model card: 28 layers, 28 Q / 4 KV heads, 7.61B params)
    r = run_cli("inspect", "Qwen/Qwen2.5-7B-Instruct", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    a = info["architecture"]
    assert (a["layers"], a["hidden_size"], a["num_heads"], a["num_kv_heads"], a["intermediate_size"],
            a["vocab_size"], a["tie_word_embeddings"]) == (28, 3584, 28, 4, 18944, 152064, False)
    assert 7.61e9 <= info["params"]["total"] < 7.62e9  # the card writes 7.61B
    assert any("resolved to Qwen/Qwen2.5-7B" in n for n in info["notes"])


@pytest.mark.parametrize(("asked", "entry"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),  # an alias in the catalog: now said too
    ("qwen2.5-14b-instruct", "Qwen/Qwen2.5-14B"),
    ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"),
    ("google/gemma-3-1b-pt", "google/gemma-3-1b-it"),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-v0.1"),
])
def test_variants_resolve_with_a_named_assumption(asked, entry):
    from llmsizer.models import load_model
    spec = load_model(asked)
    assert spec.name == entry
    assert [n for n in spec.notes if n.startswith("name=")] == [
        f"name={asked} resolved to {entry} (same architecture: instruct/chat/base releases of one model share "
        f"layer shapes and vocabulary; other config values, e.g. max_position_embeddings, are {entry}'s)"]


@pytest.mark.parametrize("exact", ["qwen2.5-7b", "Qwen/Qwen2.5-7B", "meta-llama/Meta-Llama-3.1-8B", "mixtral-8x22b",
                                   "qwen2.5-1.5b-instruct"])
def test_catalog_names_and_renames_carry_no_resolution_note(exact):
    from llmsizer.models import load_model
    assert not [n for n in load_model(exact).notes if n.startswith("name=")]


@pytest.mark.parametrize("other", ["Qwen2.5-7B-Instruct-1M", "Qwen/Qwen3-4B-Instruct-2507", "qwen2.5-8b-instruct",
                                   "Qwen/Qwen2.5-Coder-7B-Instruct",
                                   # the pre-trained release tiles images at 448 px, the catalog's Instruct at 560
                                   # (llama-models sku_list.py vision_chunk_size): it must not resolve to it
                                   "meta-llama/Llama-3.2-11B-Vision"])
def test_other_sizes_and_releases_stay_unknown(other):
    err = one_line_error(run_cli("infer", other))
    assert f"unknown model {other!r}" in err


def test_a_variant_known_to_differ_is_refused_with_the_reason():
    err = one_line_error(run_cli("infer", "mistralai/Mixtral-8x22B-Instruct-v0.1"))
    assert "vocab_size is 32768" in err and "config.json" in err


def test_hub_lookup_beats_variant_resolution(monkeypatch):
    import llmsizer.readers.hub as hub
    from llmsizer.models import load_model
    seen = []
    monkeypatch.setattr(hub, "spec_from_hub", lambda ref: seen.append(ref) or load_model("qwen2.5-3b"))
    load_model("Qwen/Qwen2.5-7B-Instruct", hub=True)
    assert seen == ["Qwen/Qwen2.5-7B-Instruct"]
    assert load_model("Qwen/Qwen2.5-7B", hub=True).name == "Qwen/Qwen2.5-7B" and seen == seen[:1]


# ------------------------------------------------------------------------------------------ shell completion

BASH = shutil.which("bash")
ZSH = shutil.which("zsh")


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory) -> Path:
    r = run_cli("completion", "bash")
    assert r.returncode == 0, r.stderr
    p = tmp_path_factory.mktemp("completion") / "llmsizer.bash"
    p.write_text(r.stdout)
    return p


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_bash_completion_is_valid_and_lists_every_sub_command(bash_script):
    from llmsizer.cli.main import COMMANDS
    assert subprocess.run([BASH, "-n", str(bash_script)], capture_output=True).returncode == 0
    top = subprocess.run([BASH, "-c", f'source "{bash_script}"; __llmsizer_subs ""'], capture_output=True,
                         text=True).stdout.split()
    assert sorted(top) == sorted(COMMANDS)


def _complete(script: Path, *words: str) -> list[str]:
    """COMPREPLY for the command line ``llmsizer WORDS`` with the cursor on the last word."""
    line = " ".join(["llmsizer", *words])
    quoted = " ".join(f"'{w}'" for w in ["llmsizer", *words])
    cmd = (f'source "{script}"; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; COMP_LINE="{line}"; '
           '_llmsizer; printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run([BASH, "-c", cmd], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.split("\n") if w)


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_bash_completion_completes_from_the_parser_and_catalog(bash_script):
    from llmsizer.catalog.models import entries
    from llmsizer.specs import ENGINES
    assert _complete(bash_script, "tr") == ["train"]
    assert _complete(bash_script, "infer", "--conte") == ["--context"]
    assert _complete(bash_script, "infer", "llama-3.1-8b", "--engine", "") == sorted(ENGINES)
    assert _complete(bash_script, "request", "c") == ["check"]
    assert "--hardware-file" in _complete(bash_script, "request", "check", "--")
    assert _complete(bash_script, "infer", "qwen2.5-7") == sorted(n for n in entries() if n.startswith("qwen2.5-7"))
    assert _complete(bash_script, "plan", "--format", "") == ["html", "json", "md"]
    assert _complete(bash_script, "infer", "--context", "") == []  # a free value: the shell's file default


def test_zsh_completion_shares_the_tables_and_registers_natively(bash_script):
    r = run_cli("completion", "zsh")
    assert r.returncode == 0, r.stderr
    tables = bash_script.read_text().split("\n", 1)[1].split("_llmsizer() {")[0]
    assert tables in r.stdout and "compdef _llmsizer llmsizer" in r.stdout and "bashcompinit" not in r.stdout
    if ZSH:  # syntax, then the completing function with zsh's compadd/_files/compdef stubbed to print
        assert subprocess.run([ZSH, "-f", "-n", "-c", r.stdout], capture_output=True).returncode == 0
        stubs = 'compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }; _files() { print FILES; }'
        probe = ('t() { words=("$@"); CURRENT=$#; _llmsizer; }; t llmsizer infer x --engine ""; print SEP; '
                 't llmsizer request c; print SEP; t llmsizer infer --context ""')
        z = subprocess.run([ZSH, "-f", "-c", f"{stubs}\n{r.stdout}\n{probe}"], capture_output=True, text=True)
        engines, request, value = (part.split() for part in z.stdout.split("SEP"))
        assert engines == ["transformers", "vllm", "llamacpp"] and request == ["new", "check", "schema"]
        assert value == ["FILES"]
    err = one_line_error(run_cli("completion", "fish"))
    assert "invalid choice: 'fish'" in err


# ------------------------------------------------------------------------------------------ no internal notes

_INTERNAL = re.compile(r"(?:\bids?|index) \d{6,}|code-search|search-index|code-index|reported by the index|"
                       r"shared/research|read_file|find_string", re.I)


def test_model_sources_shown_to_users_cite_no_internal_index_ids():
    import json

    from llmsizer.catalog.models import entries
    from llmsizer.cli.model_cmds import inspect_data
    r = run_cli("models", "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)["models"]
    assert len(listed) == len(entries())
    for m in listed:
        assert not _INTERNAL.search(m["source"]), (m["name"], _INTERNAL.search(m["source"]))
    for e in entries().values():
        shown = json.dumps(inspect_data(e.spec()))
        assert not _INTERNAL.search(shown), (e.name, _INTERNAL.search(shown))
        assert shown.count("@") >= e.source.count("@")  # public repository@commit citations are all kept


def test_public_citation_keeps_the_public_part():
    from llmsizer.catalog.models import public_citation
    text = ("GitHub code-search index copy, file id 7768956847 (repository/path not reported by the index): dict "
            "`X`; identical in code-index file ids 4813762979 and 2485673147 (citing https://hf.co/x/config.json); "
            "same values in org/repo:path.py@0123456789abcdef0123456789abcdef01234567 (card copy, code-index file "
            "id 11240120624)")
    assert public_citation(text) == (
        "a public GitHub copy (repository not recorded): dict `X`; identical in public GitHub code (citing "
        "https://hf.co/x/config.json); same values in org/repo:path.py@0123456789abcdef0123456789abcdef01234567 "
        "(card copy)")

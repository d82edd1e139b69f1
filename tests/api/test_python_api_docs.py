"""docs/python-api.md is a notebook session that runs: every ```python block is executed in order in one
namespace (from the repository root), and every ``expr  # -> value`` comment is asserted: ``expr`` evaluates to
the Python literal ``value``. The doc keeps those for exact facts (parameter counts of released checkpoints, byte
counts redone by hand in its text, values written in the request file)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"
CLAIM = re.compile(r"^(?P<indent>\s*)(?P<expr>\S.*?)\s+# -> (?P<value>.+?)\s*$")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the block's first line, source) of every ```python fenced block."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start, body = i + 2, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append((start, "\n".join(body)))
        i += 1
    return out


def instrument(source: str, first_line: int) -> tuple[str, int]:
    """The block with each claim line turned into an assertion; and how many claims it had."""
    lines, claims = [], 0
    for k, line in enumerate(source.splitlines()):
        m = CLAIM.match(line)
        if m is None:
            lines.append(line)
            continue
        expr, value = m.group("expr"), m.group("value")
        ast.parse(expr, mode="eval")  # a claim is one complete expression
        expected = ast.literal_eval(value)  # and its value a literal: nothing unchecked hides behind "# ->"
        where = f"docs/python-api.md:{first_line + k}"
        lines.append(f"{m.group('indent')}__claim(({expr}), {expected!r}, {where!r}, {expr!r})")
        claims += 1
    return "\n".join(lines), claims


def _claim(value: object, expected: object, where: str, expr: str) -> None:
    assert value == expected, f"{where}: {expr} is {value!r}, the doc says {expected!r}"


def test_the_python_api_page_runs_and_its_stated_facts_hold(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the page reads examples/*.yaml by relative path
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 8
    ns: dict[str, object] = {"__name__": "__doc_session__", "__claim": _claim}
    total = 0
    for first_line, source in blocks:
        code, n = instrument(source, first_line)
        total += n
        exec(compile(code, f"docs/python-api.md:{first_line}", "exec"), ns)
    assert total >= 15
    out = capsys.readouterr().out
    # the page's print() calls show the CLI's tables
    assert "meta-llama/Llama-3.1-8B - inference memory" in out and "TOTAL per device" in out
    assert "FITS  [llamacpp, gguf:q4_k_m, TP 1]" in out
    assert "Plan: Contract drafting helper on an on-premises CPU server" in out


def test_the_page_states_the_facts_it_is_checked_on():
    text = DOC.read_text()
    for claim in ("llmsizer.count_params(spec).total  # -> 8030261248",
                  'kv.bytes  # -> 4160749568', 'train.item("adapter_weights").bytes  # -> 161480704',
                  'job.value("memory", "usable")  # -> 68719476736'):
        assert claim in text


def test_a_false_claim_fails():
    code, n = instrument("x = 2\nx + 2  # -> 5", 1)
    assert n == 1
    ns: dict[str, object] = {"__claim": _claim}
    try:
        exec(code, ns)
    except AssertionError as e:
        assert "the doc says 5" in str(e)
    else:
        raise AssertionError("a false claim passed")


def test_readme_links_the_page():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python API", 1)[1].split("\n## ", 1)[0]
    assert "docs/python-api.md" in section

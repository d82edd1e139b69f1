"""Every ``>>>`` example in llmsizer's docstrings runs and prints what it says.

The examples document formulas with worked numbers (e.g. formulas/training_time.py eq. (10'')); a figure that no
longer matches its function misleads a reader, so they are run here rather than trusted.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import llmsizer

MODULES = sorted(m.name for m in pkgutil.walk_packages(llmsizer.__path__, "llmsizer.")
                 if not m.name.startswith("llmsizer.web")  # the web stack is an optional extra
                 and not m.name.endswith("__main__"))  # running it runs the CLI


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    return [t for t in doctest.DocTestFinder(exclude_empty=True).find(module, name) if t.examples]


WITH_EXAMPLES = [name for name in MODULES if _examples(name)]


def test_the_docstrings_have_examples_to_run() -> None:
    assert len(WITH_EXAMPLES) >= 5  # the formulas document their equations with worked numbers


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_print_what_they_say(name: str) -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name):
        runner.run(test, out=lambda _s: None)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0
    assert failed == 0, f"{failed} of {attempted} docstring examples in {name} print something else (python -m doctest)"

"""One way to say a YAML file cannot be read (inputs.yaml_problem), used by the request and inventory readers:
PyYAML's own errors, raised by really parsing broken text, give FILE:LINE for a marked place, FILE alone otherwise,
and the nesting message for a RecursionError; a broken request and a broken inventory say the same line."""

from __future__ import annotations

import pytest
import yaml

from llmsizer.inputs import TOO_DEEP, yaml_problem
from llmsizer.provider.inventory import parse_inventory
from llmsizer.request.reader import parse_request


def _error(text: str) -> yaml.YAMLError:
    with pytest.raises(yaml.YAMLError) as e:
        yaml.compose(text, Loader=yaml.SafeLoader)
    return e.value


def test_a_marked_error_names_its_line() -> None:
    # "jobs: [" never closes the flow sequence: PyYAML marks the end of the text, line 2 (1-based)
    line, said = yaml_problem("r.yaml", _error("jobs: [\n"), "a request is at most a few levels deep")
    assert line == 2 and said.startswith("r.yaml:2: not valid YAML: ")


def test_recursion_says_too_deep() -> None:
    assert yaml_problem("inv.yaml", RecursionError(), "an inventory is a few levels deep") == (
        0, f"inv.yaml: {TOO_DEEP}; an inventory is a few levels deep")


def test_an_unmarked_error_names_the_file() -> None:
    assert yaml_problem("x.yaml", yaml.YAMLError("bad stream\nmore"), "") == (0, "x.yaml: not valid YAML: bad stream")


def test_request_and_inventory_say_the_same_line() -> None:
    broken = "nodes: [\n"
    said = yaml_problem("f.yaml", _error(broken), "")[1]
    for parse in (lambda t: parse_request(t, source="f.yaml"), lambda t: parse_inventory(t, source="f.yaml")):
        with pytest.raises(Exception) as e:
            parse(broken)
        assert said in str(e.value)


def test_a_json_file_is_named_json() -> None:
    # probe23 C1: a truncated request.json is read by the same parser (JSON is YAML's subset) but is a JSON file
    line, said = yaml_problem("bad.json", _error('{"title": "x", "jobs": ['), "a request is at most a few levels deep")
    assert line == 1 and said.startswith("bad.json:1: not valid JSON: ")
    assert "YAML" not in said

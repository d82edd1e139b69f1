"""A request file's whole-number fields written as text ('1e30', '40k') are read in the field's own range, so the
message names the file:line, the key path and that range, as the same value written as a YAML float does. Before,
``resources.count: 1e30`` (a string to YAML 1.1) said "expected an integer in [0, 10^15] (a count of people, examples
or parameters...)", the generic amount range, while ``1.0e+30`` said the count's [1, 1,048,576]. A number that is
whole only once read as a float ('4.00000000000000001') is refused, as the CLI's --count refuses it. Truth: the
request format's documented range for resources.count (numbers.COUNT, the CLI's --count range), written here."""

from __future__ import annotations

import pytest

from cli_capture import run

REQUEST = """version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: qwen3-8b}}
    traffic:
      concurrency: {{typical: 2, peak: 4}}
    resources:
      device: h100
      count: {count}
"""
RANGE = "expected an integer in [1, 1,048,576]"


@pytest.mark.parametrize("count,says", [
    ("1e30", f"resources.count: 1e+30 is out of range; {RANGE}"),
    ("1.0e+30", f"resources.count: 1e+30 is out of range; {RANGE}"),
    ("'2M'", f"resources.count: 2000000 is out of range; {RANGE}"),
    ("0", f"resources.count: 0 is out of range; {RANGE}"),
    ("4.00000000000000001", "resources.count: must be a whole number"),
])
def test_a_count_out_of_its_range_names_the_field_line_and_range(tmp_path, count: str, says: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(REQUEST.format(count=count))
    code, out, err = run("plan", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"llmsizer: error: {path}:10: job 'chat' (inference): {says}"), err


def test_a_whole_count_written_with_an_exponent_is_taken(tmp_path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(REQUEST.format(count="1.6e1"))
    code, out, err = run("plan", str(path), "--json")
    assert code in (0, 1) and '"count": 16' in out, err

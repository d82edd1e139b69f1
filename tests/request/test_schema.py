"""The published JSON Schema is generated from the field table and current; the examples and the template conform
to it (checked with a small validator for the keywords the schema uses, so no extra dependency is needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from llmsizer.request.fields import JOB_FIELDS, TOP
from llmsizer.request.schema import json_schema, published_schema_text, schema_text
from llmsizer.request.template import template

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_published_schema_is_current():
    assert published_schema_text() == schema_text(), (
        "src/llmsizer/request/request.schema.json is stale: run "
        "`llmsizer request schema -o src/llmsizer/request/request.schema.json --force`")


def test_schema_lists_every_field():
    s = json_schema()
    assert set(s["properties"]) == {f.name for f in TOP}
    train = s["$defs"]["training_job"]["properties"]
    infer = s["$defs"]["inference_job"]["properties"]
    for f in JOB_FIELDS:
        for kind, props in (("training", train), ("inference", infer)):
            assert (f.name in props) == (kind in f.kinds), (f.name, kind)
    assert s["$defs"]["training_job"]["properties"]["kind"] == {"description": "the kind of job", "const": "training"}


def _errors(value, schema, root, path="$"):
    """Validation errors of ``value`` against the subset of JSON Schema the request schema uses."""
    if "$ref" in schema:
        return _errors(value, root["$defs"][schema["$ref"].split("/")[-1]], root, path)
    if "oneOf" in schema:
        ok = [s for s in schema["oneOf"] if not _errors(value, s, root, path)]
        return [] if len(ok) == 1 else [f"{path}: matches {len(ok)} of oneOf"]
    out = []
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in enum")
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        pytype = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict,
                  "array": list}
        if not any(isinstance(value, pytype[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                   for t in types):
            return out + [f"{path}: {type(value).__name__} is not {types}"]
    if isinstance(value, dict):
        for k in schema.get("required", ()):
            if k not in value:
                out.append(f"{path}: missing {k}")
        props = schema.get("properties", {})
        for k, v in value.items():
            if k not in props:
                if schema.get("additionalProperties") is False:
                    out.append(f"{path}: unexpected {k}")
                continue
            out += _errors(v, props[k], root, f"{path}.{k}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: too few items")
        for i, v in enumerate(value):
            out += _errors(v, schema.get("items", {}), root, f"{path}[{i}]")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: below minimum")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{path}: not above exclusiveMinimum")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: above maximum")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            out.append(f"{path}: too short")
    return out


def _as_json(data):
    """What a JSON editor would see: YAML dates become strings."""
    return json.loads(json.dumps(data, default=str))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_conform_to_the_schema(path):
    s = json_schema()
    assert _errors(_as_json(yaml.safe_load(path.read_text())), s, s) == []


def test_template_conforms_and_bad_requests_do_not():
    s = json_schema()
    assert _errors(_as_json(yaml.safe_load(template())), s, s) == []
    bad = {"jobs": [{"name": "x", "kind": "inference", "model": {"name": "m"}, "trafic": {}}]}
    assert _errors(bad, s, s)
    assert _errors({"titel": "x", "jobs": []}, s, s)


def test_what_the_reader_reads_as_text_the_schema_allows(tmp_path):
    """A number field's text ('1.5k', '0.5') is read by the request reader as the CLI reads it (units.parse_count):
    the published schema must not reject a file the reader accepts (review: peft.alpha '1.5k' passed `request
    check` and failed the schema)."""
    from llmsizer.request import load_request

    body = ("version: 1\njobs:\n  - name: ft\n    kind: training\n    model: {name: qwen2.5-0.5b}\n"
            "    method: lora\n    dataset: {tokens: 10M tokens}\n    peft: {alpha: '1.5k'}\n")
    path = tmp_path / "r.yaml"
    path.write_text(body, "utf-8")
    assert load_request(path).jobs[0].peft.alpha == 1500
    s = json_schema()
    assert _errors(_as_json(yaml.safe_load(body)), s, s) == []

"""The request format as a JSON Schema (draft 2020-12), generated from the same field table the reader validates
with (``fields.py``). The published copy is ``request.schema.json`` beside this module; ``tests/request`` checks
it is current (regenerate with ``llmsizer request schema -o src/llmsizer/request/request.schema.json --force``).

Quantities with units ("2 TB", "3 days") are strings or numbers in the schema; the schema documents the units
and the reader does the parsing, so an editor with the schema completes keys and enum values while llmsizer gives
the exact line-numbered error for a value it cannot read.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .fields import JOB_FIELDS, TOP, TYPES, Field

SCHEMA_ID = "https://llmsizer.dev/schemas/request-1.json"

_SCALAR: dict[str, dict[str, Any]] = {
    "str": {"type": "string", "minLength": 1},
    "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
    "int": {"type": ["integer", "string"]},
    "number": {"type": ["number", "string"]},  # text read as the CLI reads it (units.parse_count: "1.5k")
    "bool": {"type": "boolean"},
    "size": {"type": ["string", "integer"]},
    "count": {"type": ["string", "integer"]},
    "tokens": {"type": ["string", "integer"]},
    "context": {"type": ["string", "integer"]},
    "duration": {"type": "string"},
    "interval": {"type": "string"},
    "money": {"type": ["string", "number"]},
    "money_h": {"type": ["string", "number"]},
    "money_month": {"type": ["string", "number"]},
    "bandwidth": {"type": "string"},
    "network": {"type": "string"},
    "rate": {"type": ["string", "number"]},
    "share": {"type": ["string", "number"]},
    "date": {"type": "string", "format": "date"},
    "deadline": {"type": "string"},
    "weights": {"type": "string"},
    "image_size": {"type": "string", "pattern": "^\\s*[0-9]+\\s*[xX*]\\s*[0-9]+\\s*$"},
}


def _field_schema(f: Field) -> dict[str, Any]:
    doc = f.doc if f.type in ("section", "str", "enum", "bool") else f"{f.doc} ({TYPES[f.type]})"
    if f.type == "section":
        s: dict[str, Any] = _object(f.fields)
    elif f.type == "enum":
        s = {"enum": list(f.choices)}
    elif f.type in ("str_list", "targets"):
        item = {"type": "string", "minLength": 1}
        s = {"oneOf": [item, {"type": "array", "items": item, "minItems": 1}]}
    elif f.type == "ratios":
        s = {"oneOf": [{"type": "string", "pattern": "^\\s*[0-9.eE+]+(\\s*,\\s*[0-9.eE+]+)*\\s*$"},
                       {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": 1}]}
    elif f.type == "dist":
        item = dict(_SCALAR[f.item])
        s = {"oneOf": [item, {"type": "object", "additionalProperties": False,
                              "properties": {"typical": item, "peak": item}}]}
    else:
        s = dict(_SCALAR[f.type])
        if f.minimum is not None and f.type in ("int", "number", "share"):  # a share's bounds bind its number form
            s["exclusiveMinimum" if f.bounds is not None and f.bounds.low_open else "minimum"] = f.minimum
        if f.maximum is not None and f.type in ("int", "number", "share"):
            s["maximum"] = f.maximum
    s = {"description": doc, **s}
    if f.example is not None and f.type not in ("section",):
        s["examples"] = [list(f.example) if isinstance(f.example, tuple) else f.example]
    return s


def _object(fields: tuple[Field, ...], extra_required: tuple[str, ...] = ()) -> dict[str, Any]:
    req = [f.name for f in fields if f.required] + list(extra_required)
    out: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": {f.name: _field_schema(f) for f in fields}}
    if req:
        out["required"] = req
    return out


def _job(kind: str) -> dict[str, Any]:
    fields = tuple(f for f in JOB_FIELDS if kind in f.kinds)
    s = _object(fields)
    s["properties"]["kind"] = {"description": "the kind of job", "const": kind}
    s["title"] = f"{kind} job"
    return s


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a request file, from the field table."""
    top = _object(tuple(f for f in TOP if f.name != "jobs"))
    top["properties"]["jobs"] = {
        "description": "the training and inference jobs, each described separately", "type": "array",
        "minItems": 1, "items": {"oneOf": [{"$ref": "#/$defs/training_job"}, {"$ref": "#/$defs/inference_job"}]},
    }
    top["required"] = ["jobs"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "llmsizer request", "description": "Resources for LLM training and inference jobs, described "
            "separately so each can be checked (llmsizer request new writes a commented template).",
            **top, "$defs": {"training_job": _job("training"), "inference_job": _job("inference")}}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def published_schema_text() -> str:
    """The copy shipped with the package (``request.schema.json``)."""
    return resources.files("llmsizer.request").joinpath("request.schema.json").read_text("utf-8")

"""Errors as ``application/problem+json`` (RFC 9457): the CLI's one-line message as ``detail``, the field at fault
as ``field``; never a traceback."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from starlette.responses import Response

from ..errors import FieldError, HubUnavailableError, LlmsizerError, UnknownNameError
from ..render.safe import term

PROBLEM_JSON = "application/problem+json"

# the RFC 9457 members every answer has, and ours: field (the request field at fault), errors (one line per problem
# of a request file)
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "about:blank (the status code says it all)"},
        "title": {"type": "string", "description": "the HTTP status phrase"},
        "status": {"type": "integer"},
        "detail": {"type": "string", "description": "the one line the CLI prints after 'llmsizer: error: ' for the "
                                                    "same input, its where-prefix 'argument --FLAG: ' written "
                                                    "'field 'FIELD': ' (the field the request gave)"},
        "field": {"type": "string", "description": "the input at fault, on every 4xx: the body field or query "
                                                   "parameter (request for a request file's text), a path parameter "
                                                   "(model, name, rid), or the part of the HTTP request: body (not "
                                                   "JSON, not an object, too large), path (no such route or page), "
                                                   "method, token (the credential: a bearer token, the console's "
                                                   "session or the sign-in's token), or a header by its name "
                                                   "(Content-Type, Content-Length, Host, X-CSRF-Token)"},
        "errors": {"type": "array", "items": {"type": "string"},
                   "description": "an invalid request file: one line per problem (FILE:LINE: job: field: message)"},
        "also": {"type": "array", "items": {"type": "string"},
                 "description": "the other inputs a cross-field error names beside field, each at fault with it "
                                "(gpus vs tp x pp x context_parallel: field gpus, also tp, pp, context_parallel; "
                                "errors.py FieldError's also)"},
    },
}


# argparse's where-prefix of a usage error: 'argument --memory: ', 'argument --tp/--tensor-parallel: '
_WHERE = re.compile(r"argument (-{1,2}[\w-]+(?:/-{1,2}[\w-]+)*): ")


def web_detail(detail: str, field: str | None) -> str:
    """The CLI's line as the web says it: where it begins with argparse's ``argument --memory: `` (the flag the
    command line typed) and ``field`` is that option's field, the web names the field the request gave, ``field
    'memory': `` (the wording of the web's own refusals, ``field 'x': ...``); the reason after it is the CLI's word
    for word (probe24 C4). Any other line is the CLI's unchanged. The one home of a web error's where-prefix."""
    m = _WHERE.match(detail)
    if m is None or not field or "--" + field.replace("_", "-") not in m.group(1).split("/"):
        return detail
    return f"field '{field}': {detail[m.end():]}"


class Problem(Exception):
    """An answer that is an error: status, the one-line detail (``web_detail``), the field at fault."""

    def __init__(self, status: int, detail: str, field: str | None, errors: list[str] | None = None,
                 headers: dict[str, str] | None = None, also: list[str] | None = None) -> None:
        detail = web_detail(detail, field)
        super().__init__(detail)
        self.status, self.detail, self.field, self.errors, self.headers = status, detail, field, errors, headers
        self.also = also

    def response(self) -> Response:
        return problem_response(self.status, self.detail, self.field, self.errors, self.headers, self.also)


def problem_response(status: int, detail: str, field: str | None, errors: list[str] | None = None,
                     headers: dict[str, str] | None = None, also: list[str] | None = None) -> Response:
    """The problem+json answer. ``field`` is required of every caller (None only for a 5xx, which is the server's
    fault, not an input's): every 4xx names the input at fault (PROBLEM_SCHEMA's ``field``), in ``detail`` too
    (``web_detail``)."""
    body: dict[str, Any] = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
                            "detail": web_detail(detail, field)}
    if field:
        body["field"] = field
    if errors:
        body["errors"] = errors
    if also:  # the other fields a cross-field error names (FieldError.fields past the first): the pages mark each
        body["also"] = also
    return Response(json.dumps(body, indent=2) + "\n", status_code=status, media_type=PROBLEM_JSON, headers=headers)


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def from_error(e: LlmsizerError, *, not_found: bool = False, fields: Mapping[str, Any] | None = None,
               default: str = "body") -> Problem:
    """A library error (the CLI's exit 2) as a 4xx with the CLI's message; an unknown name in a URL path is 404.
    An error with several problems (the CLI prints one line each) has the first as detail and all in errors.

    ``field``: the one the error names (a FieldError's, ``hub``, ``model``), else the option its message names (to
    fix, or to give: 'give one with --memory'), else the field of the call's ``fields`` (body fields, query or path
    parameters) the message names first, by its name or its quoted value (``unknown hardware 'nodev'`` -> the field
    holding 'nodev'), else ``default``: the input as a whole."""
    lines = [term(line) for line in str(e).splitlines()] or [""]
    detail = lines[0]
    m = _FLAG.search(detail)
    flag = m.group(1).replace("-", "_") if m else None
    field: str | None
    if isinstance(e, HubUnavailableError):
        field = "hub"
    elif isinstance(e, FieldError):  # about one workload field, named by the error (not a flag its advice names)
        field = e.field
    elif detail.startswith(("model ", "unknown model ", "give a MODEL")):
        field = "model"
    elif flag is not None:  # the option the message names, to fix or to give ('give one with --memory')
        field = flag
    else:
        field = (named_field(detail, fields) if fields is not None else None) or default
    status = 404 if not_found and isinstance(e, UnknownNameError) else 400
    also = list(e.fields[1:]) if isinstance(e, FieldError) else None  # a cross-field error's other fields
    return Problem(status, detail, field, lines if len(lines) > 1 else None, also=also)


def named_field(detail: str, fields: Mapping[str, Any]) -> str | None:
    """The field of ``fields`` that ``detail`` names first: by its name as a word (``zero``, ``offload``; ``_`` or
    ``-`` between its words) or by its string value quoted (``'nodev'``); None when it names none."""
    first: tuple[int, str] | None = None
    for key, value in fields.items():
        if not isinstance(key, str):
            continue
        words = "[_-]".join(map(re.escape, key.split("_")))
        hits = [h.start() for h in [re.search(rf"(?<![\w-]){words}(?![\w-])", detail)] if h]
        if isinstance(value, str) and value:
            at = detail.find(repr(value)[:60])
            hits += [at] if at >= 0 else []
        if hits and (first is None or min(hits) < first[0]):
            first = (min(hits), key)
    return first[1] if first else None

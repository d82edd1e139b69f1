"""Errors as ``application/problem+json`` (RFC 9457): the CLI's one-line message as ``detail``, the field at fault
as ``field``; never a traceback."""

from __future__ import annotations

import json
import re
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
                                                    "same input"},
        "field": {"type": "string", "description": "the request field (or query parameter) at fault, when known"},
        "errors": {"type": "array", "items": {"type": "string"},
                   "description": "an invalid request file: one line per problem (FILE:LINE: job: field: message)"},
    },
}


class Problem(Exception):
    """An answer that is an error: status, the one-line detail, the field at fault."""

    def __init__(self, status: int, detail: str, field: str | None = None, errors: list[str] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.field, self.errors, self.headers = status, detail, field, errors, headers

    def response(self) -> Response:
        return problem_response(self.status, self.detail, self.field, self.errors, self.headers)


def problem_response(status: int, detail: str, field: str | None = None, errors: list[str] | None = None,
                     headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
                            "detail": detail}
    if field:
        body["field"] = field
    if errors:
        body["errors"] = errors
    return Response(json.dumps(body, indent=2) + "\n", status_code=status, media_type=PROBLEM_JSON, headers=headers)


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def from_error(e: LlmsizerError, *, not_found: bool = False) -> Problem:
    """A library error (the CLI's exit 2) as a 4xx with the CLI's message; an unknown name in a URL path is 404.
    An error with several problems (the CLI prints one line each) has the first as detail and all in errors."""
    lines = [term(line) for line in str(e).splitlines()] or [""]
    detail = lines[0]
    m = _FLAG.search(detail)
    if isinstance(e, HubUnavailableError):
        field: str | None = "hub"
    elif isinstance(e, FieldError):  # about one workload field, named by the error (not a flag its advice names)
        field = e.field
    elif detail.startswith(("model ", "unknown model ", "give a MODEL")):
        field = "model"
    else:
        field = m.group(1).replace("-", "_") if m else None
    status = 404 if not_found and isinstance(e, UnknownNameError) else 400
    return Problem(status, detail, field, lines if len(lines) > 1 else None)

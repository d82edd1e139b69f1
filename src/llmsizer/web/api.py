"""The JSON API, ``/api/v1`` (contract: ``API.md``). Each route parses its input with the CLI's parser
(``bridge``), resolves the model (``sources``) and calls the same answer function as the CLI command, so the body
of every answer is byte for byte what ``llmsizer COMMAND ... --json`` prints. The work runs in a worker thread
under the per-request time limit, with ``models.names_only`` (no server-side path)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from .._version import __version__
from ..cli.common import json_text
from ..errors import FieldError, InputError, LlmsizerError
from ..models import names_only
from ..readers.safe_io import loads_bounded
from ..request import RequestError
from ..suggest import NAME_QUERY_HELP
from . import bridge
from .guards import BODY_LIMIT, REPORT_CSP, internal_error
from .problems import PROBLEM_JSON, PROBLEM_SCHEMA, Problem, from_error
from .sources import KINDS, MODEL_FIELDS, MODEL_SCHEMA, UPLOAD_LIMIT, Uploads, check_label, resolve

log = logging.getLogger("llmsizer.web")

PREFIX = "/api/v1"
TIME_LIMIT_S = 30.0  # per request; recommend over the whole catalog answers in ~1-3 s, a plan in a few
EXIT_HEADER = "X-Llmsizer-Exit-Code"
REQUEST_LABEL = "request.yaml"

router = APIRouter(prefix=PREFIX)

_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"description": d, "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}
    for s, d in ((400, "bad input: the CLI's one-line message (exit code 2) and the field"),
                 (413, "request body too large"), (415, "wrong content type"),
                 (503, "no answer within the per-request time limit"), (500, "internal error (no details)"))}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "no such entry in the catalog (the CLI's one-line message)",
          "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}}
_ANSWER = {"description": "the same JSON as the CLI's --json for this input; the CLI's exit code (0 or 1: does not "
                          "fit, a constraint fails) in the X-Llmsizer-Exit-Code header",
           "content": {"application/json": {"schema": {}}}}
# /fit's answer: the keys a caller acts on when it does not fit (API.md's /fit row, docs/nomenclature.md), described
# as estimate/fit.py ``FitResult.to_dict`` writes them; every other key as the CLI's --json
_CHANGE = {"type": "object", "required": ["changes", "changes_given", "memory_per_device", "budget_per_device"],
           "properties": {
               "changes": {"type": "object", "description": "field -> value: the settings to change (a training "
                           "field, or count: the devices)"},
               "changes_given": {"type": "array", "items": {"type": "string"},
                                 "description": "the fields among changes that the caller gave (overridden)"},
               "memory_per_device": {"type": "integer", "description": "bytes per device with the changes"},
               "budget_per_device": {"type": "integer", "description": "bytes per device the verdict allows"},
               "machines": {"type": "integer", "description": "count alternatives past one machine: how many"},
               "gpus_per_node": {"type": "integer", "description": "the devices per machine machines counts"},
               "host_per_machine": {"type": "integer", "description": "bytes of host RAM per machine an offload "
                                    "step keeps there (pinned states and the host runtime)"},
               "host_ram": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "the instance's RAM "
                            "host_per_machine was checked against (bytes); null: a bare device, not checked"}}}
_FIT_ANSWER = {"description": _ANSWER["description"], "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": True, "properties": {
        "fits_at": {"anyOf": [{"type": "object"}, {"type": "null"}],
                    "description": "what fits when this does not, keeping every setting the caller gave (serving: a "
                                   "weight format, an engine or a context window; training: changes, the least change "
                                   "of the training ladder, with memory_per_device and budget_per_device); null when "
                                   "it fits, a format was given, or nothing keeping the caller's settings fits"},
        "fits_if_changed": {"type": "array", "items": _CHANGE,
                            "description": "training only, when fits_at is null: what fits if settings the caller "
                                           "gave change (changes_given names them): the first ladder step that "
                                           "fits, and the smallest device count; empty when fits_at is not null "
                                           "or neither fits"}}}}}}


def json_answer(data: Any, code: int = 0) -> Response:
    return Response(json_text(data), media_type="application/json", headers={EXIT_HEADER: str(code)})


async def run(request: Request, work: Callable[[], Response], *, fields: Mapping[str, Any], not_found: bool = False,
              default: str = "body", command: tuple[str, ...] | None = None) -> Response:
    """``work`` in a worker thread under the time limit and ``names_only``; errors become problems, each naming the
    input at fault: ``fields`` are the call's inputs (body fields, query and path parameters) an error's message may
    name, ``default`` the one named when it names none (problems.from_error). Every detail is the CLI's line for
    the same input: a FieldError of ``command`` (the CLI command the route answers) is written with its flags, as
    the CLI writes it (bridge.field_problem)."""
    limit = request.app.state.time_limit

    def guarded() -> Response:
        with names_only():
            return work()

    try:
        with anyio.fail_after(limit):
            return await anyio.to_thread.run_sync(guarded, abandon_on_cancel=True)
    except TimeoutError:
        return Problem(503, f"no answer within {limit:g} s, the server's time limit per request; ask for less (a "
                            "narrower search, fewer options) or start the server with a longer limit", None,
                       headers={"Retry-After": "1"}).response()
    except Problem as p:
        return p.response()
    except RequestError as e:
        return Problem(400, e.errors[0], "request", e.errors).response()
    except FieldError as e:
        if command is not None:
            return bridge.field_problem(command, e, fields).response()
        return from_error(e, not_found=not_found, fields=fields, default=default).response()
    except LlmsizerError as e:
        return from_error(e, not_found=not_found, fields=fields, default=default).response()
    except Exception:
        log.exception("internal error answering %s", request.url.path)
        return internal_error()


async def body_of(request: Request) -> dict[str, Any]:
    """The JSON object of a POST (the guard has already capped its size)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":  # also keeps other sites' plain form posts out (they cannot send this type)
        raise Problem(415, f"send the request as JSON (Content-Type: application/json), not {kind or 'no type'}", "Content-Type")
    raw = await request.body()
    try:
        data = loads_bounded(raw, "request body", "the body", object_pairs_hook=bridge.unique_pairs)
    except LlmsizerError as e:
        raise Problem(400, str(e), "body") from None
    if not isinstance(data, dict):
        raise Problem(400, "request body: expected a JSON object of fields (the command's long options)", "body")
    return data


def _uploads(request: Request) -> Uploads:
    uploads: Uploads = request.app.state.uploads
    return uploads


def _post_schema(command: tuple[str, ...], with_model: bool = True, skip: tuple[str, ...] = (),
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {**(MODEL_SCHEMA if with_model else {}), **(extra or {})}
    schema = bridge.body_schema(command, props, skip)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


# ------------------------------------------------------------------------------------------------------- catalog

@router.get("", summary="version, limits, whether Hub ids are accepted")
def index(request: Request) -> dict[str, Any]:
    return {"name": "llmsizer", "version": __version__, "api": "v1",
            "hub": importlib.util.find_spec("huggingface_hub") is not None,
            "limits": {"body_bytes": BODY_LIMIT, "upload_bytes": UPLOAD_LIMIT,
                       "time_limit_s": request.app.state.time_limit}}


@router.get("/models", summary="list or search the model catalog (models --json)", responses={200: _ANSWER, **_ERRORS})
async def models(request: Request, query: str | None = Query(None, description=NAME_QUERY_HELP),
                 fits_on: str | None = Query(None, description="a device or instance: which models fit it"),
                 count: str | None = None, context: str | None = None, concurrency: str | None = None,
                 output_tokens: str | None = None, kv_dtype: str | None = None,
                 engine: str | None = None, engine_version: str | None = None, memory: str | None = None,
                 host_memory: str | None = None, headroom: str | None = None, metric: str | None = None,
                 gpus_per_node: str | None = None, images: str | None = None,
                 image_size: str | None = None, video_frames: str | None = None,
                 video_size: str | None = None) -> Response:
    from ..cli.model_cmds import models_answer
    # all of them, to the CLI's parser (the arguments above document them); one value per field
    params = bridge.query_fields(("models",), request.query_params.multi_items())
    q = params.pop("query", None)

    def work() -> Response:
        args = bridge.parse(("models",), params, positionals=[q] if q else [])
        return json_answer(*models_answer(args))
    return await run(request, work, fields={**params, "query": q}, command=("models",))


@router.get("/models/fits-on", summary="which catalog models fit a device or instance (models --fits-on --json)",
            responses={200: _ANSWER, **_ERRORS})
async def models_fits_on(request: Request,
                         fits_on: str = Query(description="a device or instance (hardware list): which models fit it"),
                         query: str | None = Query(None, description=NAME_QUERY_HELP),
                         count: str | None = None, context: str | None = None,
                         concurrency: str | None = None, output_tokens: str | None = None,
                         kv_dtype: str | None = None, engine: str | None = None,
                         engine_version: str | None = None, memory: str | None = None,
                         host_memory: str | None = None, headroom: str | None = None, metric: str | None = None,
                         gpus_per_node: str | None = None, images: str | None = None,
                         image_size: str | None = None, video_frames: str | None = None,
                         video_size: str | None = None) -> Response:
    """`models [QUERY] --fits-on DEVICE --json`: the CLI's own answer function (`models_answer`), byte for byte."""
    from ..cli.model_cmds import models_answer
    # all of them, to the CLI's parser (the arguments above document them); one value per field
    params = bridge.query_fields(("models",), request.query_params.multi_items())
    q = params.pop("query", None)
    if not fits_on.strip():
        return Problem(400, "field 'fits_on': give a device or instance (GET /api/v1/hardware lists them)",
                       "fits_on").response()

    def work() -> Response:
        args = bridge.parse(("models",), params, positionals=[q] if q else [])
        return json_answer(*models_answer(args))
    return await run(request, work, fields={**params, "query": q}, command=("models",))


_HARDWARE_FIELDS = {
    "hardware": {"type": "string", "description": "a hardware file's content (YAML or JSON: devices, instances, "
                                                  "sources; the schema of --hardware-file), e.g. one node of yours; "
                                                  "fits_on may name its entries"},
    "hardware_name": {"type": "string", "description": "how messages and sources name that text, as a file of this "
                                                       "name (YAML when it ends in .yaml/.yml, else JSON); default "
                                                       "hardware.yaml"},
}


@router.post("/models/fits-on", summary="which catalog models fit a device or instance, your own hardware entry "
             "given as text (models --fits-on --hardware-file --json)", responses={200: _ANSWER, **_ERRORS},
             openapi_extra=_post_schema(("models",), with_model=False, extra=_HARDWARE_FIELDS))
async def models_fits_on_with_hardware(request: Request) -> Response:
    """`models [QUERY] --fits-on DEVICE --hardware-file FILE --json`, the file's content sent as ``hardware``: the
    same answer and, for a bad entry, the same one-line message as the CLI on a file of that name."""
    import datetime

    from ..catalog.hardware import HardwareText
    from ..cli.model_cmds import models_answer
    fields = await body_of(request)
    text, name = fields.get("hardware"), fields.get("hardware_name", "hardware.yaml")
    if not isinstance(text, str):
        return Problem(400, "field 'hardware': expected a hardware file's text (YAML or JSON)", "hardware").response()
    if not isinstance(name, str):
        return Problem(400, "field 'hardware_name': expected a file name", "hardware_name").response()
    query = fields.get("query")
    if query is not None and not isinstance(query, str):
        return Problem(400, "field 'query': expected a string", "query").response()
    params = {k: v for k, v in fields.items() if k not in ("hardware", "hardware_name", "query")}

    def work() -> Response:
        label = check_label(name, "hardware_name")
        args = bridge.parse(("models",), params, positionals=[query] if query else [])
        if not args.fits_on:
            raise Problem(400, "field 'fits_on': give a device or instance (one of the hardware text's, or of "
                               "GET /api/v1/hardware)", "fits_on")
        args.hardware_file = [HardwareText(label, text, datetime.date.today().isoformat())]
        try:
            return json_answer(*models_answer(args))
        except InputError as e:  # the CLI's line; a problem of the text names the field that holds it
            if str(e).startswith(f"hardware file {label}:"):
                raise Problem(400, str(e), "hardware") from None
            raise
    return await run(request, work, fields=fields, command=("models",))


@router.get("/models/{model:path}", summary="one model: architecture and parameters (inspect --json)",
            responses={200: _ANSWER, **_NOT_FOUND, **_ERRORS})
async def model(request: Request, model: str) -> Response:
    return await _inspect(request, {"model": model}, not_found=True)


@router.post("/inspect", summary="a model's architecture and parameters (inspect MODEL --json)",
             responses={200: _ANSWER, **_ERRORS}, openapi_extra=_post_schema(("inspect",)))
async def inspect(request: Request) -> Response:
    return await _inspect(request, await body_of(request))


async def _inspect(request: Request, fields: dict[str, Any], not_found: bool = False) -> Response:
    from ..cli.model_cmds import inspect_data
    uploads = _uploads(request)

    def work() -> Response:
        args = bridge.parse(("inspect",), fields, skip=MODEL_FIELDS)
        return json_answer(inspect_data(resolve(args, fields, uploads)))
    return await run(request, work, fields=fields, not_found=not_found, command=("inspect",))


@router.get("/formats", summary="weight formats (formats --json)", responses={200: _ANSWER})
async def formats(request: Request) -> Response:
    from ..cli.model_cmds import formats_answer
    return await run(request, lambda: json_answer(formats_answer()), fields={})


@router.get("/hardware", summary="the hardware catalog (hardware list --json)", responses={200: _ANSWER, **_ERRORS})
async def hardware(request: Request, query: str | None = Query(None, description=NAME_QUERY_HELP),
                   kind: str | None = Query(None, description="gpu, tpu, accelerator, apple, cpu, instance"),
                   provider: str | None = Query(None, description="aws, gcp, azure")) -> Response:
    from ..cli.hardware_cmd import list_answer
    # all of them, to the CLI's parser (the arguments above document them); one value per field
    params = bridge.query_fields(("hardware", "list"), request.query_params.multi_items())
    q = params.pop("query", None)

    def work() -> Response:
        return json_answer(list_answer(bridge.parse(("hardware", "list"), params, positionals=[q] if q else [])))
    return await run(request, work, fields={**params, "query": q}, command=("models",))


@router.get("/hardware/{name:path}", summary="one device or instance, every value with source and date "
            "(hardware show --json)", responses={200: _ANSWER, **_NOT_FOUND, **_ERRORS})
async def hardware_one(request: Request, name: str) -> Response:
    from ..cli.hardware_cmd import show_answer

    params = bridge.query_fields(("hardware", "show"), request.query_params.multi_items())

    def work() -> Response:
        return json_answer(show_answer(bridge.parse(("hardware", "show"), params, positionals=[name])))
    return await run(request, work, fields={"name": name, **params}, not_found=True)


# ---------------------------------------------------------------------------------------------------- estimates

def _estimate_route(command: str, answer: Callable[..., Any]) -> Callable[[Request], Any]:
    async def route(request: Request) -> Response:
        fields = await body_of(request)
        uploads = _uploads(request)

        def work() -> Response:
            args = bridge.parse((command,), fields, skip=MODEL_FIELDS)
            spec = resolve(args, fields, uploads)
            data, code, *_ = answer(spec, args)
            return json_answer(data, code)
        return await run(request, work, fields=fields, command=(command,))
    route.__name__ = command
    return route


def _answers() -> dict[str, tuple[str, Callable[..., Any]]]:
    from ..cli.fit_cmd import fit_answer
    from ..cli.infer_cmd import infer_answer
    from ..cli.recommend_cmd import recommend_answer
    from ..cli.train_cmd import train_answer
    return {"infer": ("memory to serve a model (infer --json)", infer_answer),
            "train": ("memory to train or fine-tune a model (train --json)", train_answer),
            "fit": ("does it fit on N x device, how fast (fit --json)", fit_answer),
            "recommend": ("ranked hardware options with reasons (recommend --json)", recommend_answer)}


for _command, (_summary, _answer) in _answers().items():
    router.add_api_route(f"/{_command}", _estimate_route(_command, _answer), methods=["POST"], summary=_summary,
                         responses={200: _FIT_ANSWER if _command == "fit" else _ANSWER, **_ERRORS},
                         openapi_extra=_post_schema((_command,)),
                         response_class=Response)


# ------------------------------------------------------------------------------------------------------ requests

_REQUEST_FIELDS = {
    "request": {"type": "string", "description": "the request file's text (YAML or JSON; start from "
                                                 "GET /api/v1/request/template)"},
    "filename": {"type": "string", "description": f"how error lines name the request (default {REQUEST_LABEL})"},
}


def request_text(fields: dict[str, Any]) -> tuple[str, str]:
    """The request file's text and its label from a body's ``request`` / ``filename`` (plan, request check, capacity)."""
    text, name = fields.get("request"), fields.get("filename", REQUEST_LABEL)
    if not isinstance(text, str):
        raise Problem(400, "field 'request': expected the request file's text (a string)", "request")
    if not isinstance(name, str):
        raise Problem(400, "field 'filename': expected a string", "filename")
    return text, check_label(name, "filename")


@router.post("/plan", summary="a request in, the checked plan out (plan --json, or the report as html / md)",
             responses={200: {"description": "format json: the plan as `plan --json`; html: the report as "
                                             "`plan -o report.html`; md: as `plan -o report.md`",
                              "content": {"application/json": {"schema": {}}, "text/html": {"schema": {}},
                                          "text/markdown": {"schema": {}}}}, **_ERRORS},
             openapi_extra=_post_schema(("plan",), with_model=False, extra=_REQUEST_FIELDS))
async def plan(request: Request) -> Response:
    from ..cli.plan_cmd import plan_answer, plan_today, render
    from ..request.reader import parse_request
    fields = await body_of(request)

    def work() -> Response:
        args = bridge.parse(("plan",), fields, skip=_REQUEST_FIELDS, positionals=["-"])
        text, name = request_text(fields)
        today = plan_today(args)
        result = plan_answer(parse_request(text, source=name), args, today)
        fmt = args.format or "json"
        headers = {EXIT_HEADER: "0" if result.ok else "1"}
        if fmt == "html":
            headers["Content-Security-Policy"] = REPORT_CSP
            return Response(render(result, "html"), media_type="text/html", headers=headers)
        if fmt == "md":
            return Response(render(result, "md"), media_type="text/markdown", headers=headers)
        return Response(render(result, "json"), media_type="application/json", headers=headers)
    return await run(request, work, fields=fields, default="request")


@router.post("/request/check", summary="validate a request (request check --json)",
             responses={200: _ANSWER, **_ERRORS},
             openapi_extra=_post_schema(("request", "check"), with_model=False, extra=_REQUEST_FIELDS))
async def request_check(request: Request) -> Response:
    from ..cli.request_cmd import check_answer
    from ..request.reader import parse_request
    fields = await body_of(request)

    def work() -> Response:
        bridge.parse(("request", "check"), fields, skip=_REQUEST_FIELDS, positionals=["-"])
        text, name = request_text(fields)
        data, code, _ = check_answer(lambda: parse_request(text, source=name))
        return json_answer(data, code)
    return await run(request, work, fields=fields, default="request")


@router.get("/request/template", summary="the commented request template (request new)",
            responses={200: {"description": "YAML", "content": {"text/yaml": {"schema": {"type": "string"}}}}})
async def request_template(request: Request) -> Response:
    from ..request.template import template
    return await run(request, lambda: Response(template(), media_type="text/yaml"), fields={})


@router.get("/request/schema", summary="the JSON Schema of request files (request schema)",
            responses={200: _ANSWER})
async def request_schema(request: Request) -> Response:
    from ..request.schema import schema_text
    return await run(request, lambda: Response(schema_text(), media_type="application/json"), fields={})


# --------------------------------------------------------------------------------------------------- model files

@router.post("/model-files", summary="upload a .gguf or .safetensors header (read in the browser; never weights)",
             responses={200: {"description": "the id to give as model_file, and what the header holds",
                              "content": {"application/json": {"schema": {}}}}, **_ERRORS},
             openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {
                 "schema": {"type": "string", "format": "binary"},
                 "description": f"the first bytes of the file (at most {UPLOAD_LIMIT:,}): safetensors: the 8-byte "
                                "length and the JSON header; GGUF: the header (metadata and tensor table)"}}}})
async def model_files(request: Request, kind: str = Query(..., description="gguf or safetensors"),
                      name: str = Query(..., description="the file's name (a label only)"),
                      size: int = Query(..., description="the whole file's size in bytes", ge=0)) -> Response:
    uploads = _uploads(request)
    content = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content != "application/octet-stream":
        return Problem(415, "send the header bytes raw (Content-Type: application/octet-stream), not "
                            f"{content or 'no type'}", "Content-Type").response()
    if kind not in KINDS:
        return Problem(400, f"kind {kind[:40]!r}: expected one of {', '.join(KINDS)}", "kind").response()
    data = await request.body()

    def work() -> Response:
        label = check_label(name, "name")
        return json_answer(uploads.add(kind, label, size, data).to_dict())
    return await run(request, work, fields={"kind": kind, "name": name, "size": size})

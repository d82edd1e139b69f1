"""The app factory of ``llmsizer serve``: ``create_app()`` returns the FastAPI app (the API under ``/api/v1``, the
pages from ``pages.py`` when present, the guard of every request)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from .._version import __version__
from .answer_cache import ENTRIES as ANSWER_ENTRIES
from .answer_cache import AnswerCache
from .api import PREFIX, TIME_LIMIT_S, router
from .api_capacity import ProviderConfig
from .api_capacity import router as capacity_router
from .guards import BODY_LIMIT, Guard
from .problems import Problem, problem_response
from .sources import UPLOAD_LIMIT, Uploads

STATIC = Path(__file__).resolve().parent / "static"
DESCRIPTION = ("What does this LLM workload need? The JSON API of llmsizer: every answer is the JSON the CLI prints "
               "with --json for the same input; request fields are the CLI's long options with - written _; errors "
               "are application/problem+json with the CLI's one-line message.")


def create_app(*, time_limit: float = TIME_LIMIT_S, body_limit: int = BODY_LIMIT,
               upload_limit: int = UPLOAD_LIMIT, hosts: frozenset[str] | None = None,
               provider: ProviderConfig | None = None, uploads_folder: str | None = None,
               answer_cache: int = ANSWER_ENTRIES) -> FastAPI:
    """The web app. ``time_limit``: seconds one request may take (503 after); ``body_limit``: bytes of a JSON body
    (413 past it); ``upload_limit``: bytes of a model-file header; ``hosts``: the names the Host header may carry
    (None: any; ``serve`` on a loopback address gives the loopback names); ``provider``: the inventory, store and
    auth file of the ``/api/v1/capacity`` routes and the console (None: those answer 503); ``uploads_folder``: a
    private folder where uploaded headers are shared with the other worker processes (None: this process's memory
    only); ``answer_cache``: how many estimate answers to remember (``answer_cache.py``; 0: none)."""
    app = FastAPI(title="llmsizer", version=__version__, description=DESCRIPTION,
                  openapi_url=f"{PREFIX}/openapi.json", docs_url=None, redoc_url=None,
                  swagger_ui_oauth2_redirect_url=None)
    app.state.time_limit = time_limit
    app.state.uploads = Uploads(folder=uploads_folder)
    app.state.provider = provider
    app.include_router(router)
    app.include_router(capacity_router)
    if importlib.util.find_spec(f"{__package__}.pages") is not None:
        pages = importlib.import_module(f"{__package__}.pages")
        app.include_router(pages.router)
    else:  # the pages' files without their module: serve them as they are
        app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static")
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(HTTPException, _http_problem)
    app.add_exception_handler(RequestValidationError, _validation_problem)
    # inside the guard (added last: outermost); estimate routes called directly (routes: the API's)
    app.add_middleware(AnswerCache, entries=answer_cache, routes=router.routes)
    app.add_middleware(Guard, body_limit=body_limit, limits={f"{PREFIX}/model-files": upload_limit}, hosts=hosts)
    return app


WORKER_ENV = "LLMSIZER_SERVE_WORKER"  # how `serve` hands its settings to its worker processes (JSON)


def app_from_env() -> FastAPI:
    """The app of one worker process of ``llmsizer serve --workers N`` (uvicorn imports this factory in each): the
    settings the parent checked and wrote to ``WORKER_ENV``; the console's session key is the parent's
    ``LLMSIZER_SESSION_SECRET`` (the parent sets one when none is given), so a sign-in holds on every worker."""
    import json
    import os

    from .sessions import secret_from_env
    cfg = json.loads(os.environ[WORKER_ENV])
    if cfg.get("parent"):
        _end_with(int(cfg["parent"]))
    provider = None
    if cfg.get("inventory"):
        provider = ProviderConfig(inventory=cfg["inventory"], db=cfg.get("db"), auth=cfg.get("auth"),
                                  session_key=secret_from_env())
    hosts = cfg.get("hosts")
    return create_app(hosts=frozenset(hosts) if hosts is not None else None, provider=provider,
                      uploads_folder=cfg.get("uploads_folder"), answer_cache=int(cfg.get("answer_cache", 0)))


def _end_with(parent: int) -> None:
    """Linux: this worker gets SIGTERM when the ``serve`` process that started it ends, even by SIGKILL
    (``prctl(PR_SET_PDEATHSIG)``, man 2 prctl), so no orphaned worker keeps the port; elsewhere uvicorn's
    supervisor ends its workers when it stops normally."""
    import os
    import signal
    import sys
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # it ended before the call above
        os.kill(os.getpid(), signal.SIGTERM)


async def _problem(request: Request, exc: Any) -> Response:
    response: Response = exc.response()
    return response


async def _http_problem(request: Request, exc: Any) -> Response:
    detail = exc.detail if isinstance(exc.detail, str) else "error"
    field: str | None = "path"  # a 404: no such route, page or file
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such page or API route: {request.url.path[:200]}"
    elif exc.status_code == 405:
        detail, field = f"{request.method} is not allowed on {request.url.path[:200]}", "method"
    elif exc.status_code != 404:
        field = None if exc.status_code >= 500 else "body"
    return problem_response(exc.status_code, detail, field, headers=getattr(exc, "headers", None))


async def _validation_problem(request: Request, exc: Any) -> Response:
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(x) for x in first.get("loc", ()) if x not in ("query", "path", "body")]
    field = loc[-1] if loc else "body"
    # one line in the words of the other 400s ("field 'fits_on': ..."), not the validator's ("Field required")
    if first.get("type") == "missing":
        where = f" (give ?{field}=... in the URL)" if first.get("loc", ("",))[0] == "query" else ""
        return problem_response(400, f"field '{field}': required{where}", field)
    msg = str(first.get("msg", "invalid value"))
    return problem_response(400, f"field '{field}': {msg[:1].lower()}{msg[1:]}", field)

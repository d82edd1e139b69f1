"""One request to the real web app (Starlette's TestClient, server exceptions answered as the server would), for the
tests that compare what the web API answers with the CLI's answer to the same question. Skips where the ``web`` extra
is not installed."""

from __future__ import annotations

from typing import Any

import pytest


def post_api(path: str, body: dict[str, Any]) -> Any:
    """The response of ``POST path`` with ``body`` as JSON."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        return client.post(path, json=body)

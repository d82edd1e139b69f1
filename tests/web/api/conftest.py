"""The web API in-process: starlette's TestClient over the real app."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def app():
    from llmsizer.web.app import create_app
    return create_app()


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c

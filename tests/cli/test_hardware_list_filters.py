"""`hardware list --provider X` for a provider the catalog has no instance of printed "0 devices, 0 instances" (an
empty list that said nothing of why); it is bad input in one line naming the providers the catalog has, exit 2, and
the web API's 400 with the same message. The providers are read from the catalog's own instances."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer.catalog.hardware import builtin_catalog

PROVIDERS = ", ".join(sorted({i.provider for i in builtin_catalog().instances.values()}))


def test_an_unknown_provider_is_one_line_naming_the_providers() -> None:
    assert PROVIDERS  # the catalog has instances (else the check below says nothing)
    code, out, err = run("hardware", "list", "--provider", "nosuch")
    assert (code, out) == (2, "")
    assert err == f"llmsizer: error: the catalog has no instances of provider 'nosuch'; its providers: {PROVIDERS}\n"


def test_a_known_provider_in_any_case_lists_its_instances() -> None:
    code, out, _ = run("hardware", "list", "--provider", "GCP")
    assert code == 0
    n = sum(1 for i in builtin_catalog().instances.values() if i.provider == "gcp")
    assert n and out.rstrip().endswith(f"0 devices, {n} instances")


def test_the_web_api_says_the_same() -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/hardware", params={"provider": "nosuch"})
    assert r.status_code == 400
    assert r.json()["detail"] == f"the catalog has no instances of provider 'nosuch'; its providers: {PROVIDERS}"

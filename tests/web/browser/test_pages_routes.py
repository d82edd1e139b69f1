"""The pages' routes without a browser: every shipped file is served with its media type under the app's CSP; a
name that is not a shipped file (a path climbing out, an encoded one) is 404 and no file is opened for it; the
forms' choices are the specs' closed sets."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from llmsizer.estimate.verdict import DEFAULT_HEADROOM
from llmsizer.specs import ENGINES, InferenceWorkload, TrainingWorkload
from llmsizer.specs.training import METHODS, OPTIMIZERS
from llmsizer.web import pages
from llmsizer.web.app import create_app

STATIC = Path(pages.__file__).parent / "static"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_every_shipped_file_and_page_is_served(client: TestClient) -> None:
    files = sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file())
    assert "index.html" in files and "js/calculator.js" in files
    for name in files:
        r = client.get(f"/static/{name}")
        assert r.status_code == 200, name
        assert r.content == (STATIC / name).read_bytes()
        assert r.headers["content-type"].split(";")[0] == pages.MEDIA_TYPES[Path(name).suffix].split(";")[0]
    for path, file in pages.PAGES.items():
        r = client.get(path)
        assert r.status_code == 200 and r.content == (STATIC / file).read_bytes()
        assert "script-src 'self'" in r.headers["content-security-policy"]


@pytest.mark.parametrize("name", ["../pages.py", "..%2fpages.py", "%2e%2e/pages.py", "js/../../pages.py",
                                  "/etc/passwd", "..%5c..%5cpages.py", "index.html%00.js", "nope.js"])
def test_a_name_that_is_not_a_shipped_file_is_404(client: TestClient, name: str) -> None:
    r = client.get(f"/static/{name}")
    assert r.status_code == 404
    assert b"import" not in r.content and b"root:" not in r.content


def test_choices_are_the_specs_sets(client: TestClient) -> None:
    c = client.get("/pages/choices.json").json()
    assert c["choices"]["engines"] == list(ENGINES)
    assert c["choices"]["methods"] == list(METHODS)
    assert c["choices"]["optimizers"] == list(OPTIMIZERS)
    assert c["choices"]["zero_stages"] == [0, 1, 2, 3]
    # no engine given: the device's (estimate/device.py engine_rule); the form says so, not one engine's name
    assert InferenceWorkload.engine is None and c["defaults"]["engine"] == "by device"
    assert c["defaults"]["headroom"] == DEFAULT_HEADROOM
    assert c["defaults"]["seq_len"] == TrainingWorkload.seq_len

"""The pages' routes without a browser: every shipped file is served with its media type under the app's CSP; a
name that is not a shipped file (a path climbing out, an encoded one) is 404 and no file is opened for it; the
forms' choices are the specs' closed sets."""

from __future__ import annotations

import re
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
    assert "style.css" in files and "js/calculator.js" in files
    for name in files:
        r = client.get(f"/static/{name}")
        assert r.status_code == 200, name
        assert r.content == (STATIC / name).read_bytes()
        assert r.headers["content-type"].split(";")[0] == pages.MEDIA_TYPES[Path(name).suffix].split(";")[0]
    for path, page in pages.PAGES.items():
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in r.headers["content-security-policy"]
        html = r.text
        assert html.startswith("<!DOCTYPE html>") and html.endswith("</main>\n</body>\n</html>\n")
        assert f'<script type="module" src="/static/js/{page.script}"></script>' in html
        assert client.get(f"/static/js/{page.script}").status_code == 200
        # the page's own link, and only it, is the current one; every id is unique (an include may not repeat one)
        assert re.findall(r'<a href="([^"]+)" aria-current="page">', html) == [path]
        ids = re.findall(r'\sid="([^"]+)"', html)
        assert len(ids) == len(set(ids)) and f'href="#{page.skip_to}"' in html and f'id="{page.skip_to}"' in html
        assert "<!-- include" not in html and "{" not in html.split("<main")[0]


def test_the_head_and_nav_have_one_copy() -> None:
    """The pages' head and nav are written once (templates/layout.html), not once per page."""
    web = Path(pages.__file__).parent
    for shared in ('<nav aria-label="Pages">', '<link rel="stylesheet" href="/static/style.css">',
                   '<meta name="viewport"', 'value="llama-3.1-8b"'):
        holders = [p.relative_to(web).as_posix() for p in web.rglob("*.html") if shared in p.read_text(encoding="utf-8")]
        assert len(holders) == 1, (shared, holders)


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


def test_every_page_has_the_same_nav(client: TestClient) -> None:
    """The Console link (probe11 defect 11) is on every page, as every other link: one nav."""
    navs = {}
    for path in pages.PAGES:
        html = client.get(path).text
        nav = re.search(r'<nav aria-label="Pages"><ul>(.*?)</ul></nav>', html, re.S)
        assert nav, path
        navs[path] = re.findall(r'<a href="([^"]+)"', nav.group(1))
        assert re.findall(r'<a href="([^"]+)" aria-current="page"', nav.group(1)) == [path]
    assert "/console" in navs["/"]
    assert all(n == navs["/"] for n in navs.values()), navs

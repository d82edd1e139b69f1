"""Fixtures of the browser tests: a real ``llmsizer serve`` on a free port (a subprocess running this tree's code)
and one headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright through ``executable_path``;
browser downloads are not available here) shared by the session, a new page per test.

Screenshots of each page go to ``LLMSIZER_WEB_SCREENSHOTS`` (a folder) when set, else to a temporary folder whose
path the tests print; docs/web/*.png are copies of them (docs/web.md).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Browser, Page, sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """``llmsizer serve --port N`` started as the user starts it; its base URL once /api/v1 answers."""
    port = _free_port()
    log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a pipe nobody reads can block the server
    proc = subprocess.Popen([sys.executable, "-m", "llmsizer.cli.main", "serve", "--port", str(port)],
                            env=cli_env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"llmsizer serve exited with {proc.returncode}:\n{log.read()}")
            try:
                with urllib.request.urlopen(f"{base}/api/v1", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llmsizer serve did not answer within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(SKIP)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """A fresh page (its own storage); every console error, uncaught exception or request to another origin fails
    the test, except Chromium's note of a 4xx answer (bad input is answered 400 on purpose; the page shows it)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True, base_url=server)
    pg = ctx.new_page()
    problems: list[str] = []
    def console(m: object) -> None:
        text = m.text  # type: ignore[attr-defined]
        if m.type == "error" and not text.startswith("Failed to load resource: the server responded with a status of 4"):  # type: ignore[attr-defined]
            problems.append(f"console error: {text}")
    pg.on("console", console)
    # offline first: nothing is fetched from another origin (no CDN, no font, no analytics)
    pg.on("request", lambda r: problems.append(f"request to another origin: {r.url}")
          if not r.url.startswith((server, "data:", "blob:", "about:")) else None)
    pg.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    pg.set_default_timeout(15_000)
    yield pg
    ctx.close()
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


def shrink_png(path: Path) -> None:
    """Rewrite a screenshot as a 256-colour palette PNG (Pillow's fast octree, no dithering): the pages' flat colours
    and text survive, the file is about a third of Chromium's RGB one (docs/web/*.png stay modest in git)."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The screenshots' folder; when it is ``LLMSIZER_WEB_SCREENSHOTS`` (the docs' copies), each one taken in this
    session is shrunk (``shrink_png``) once the session ends."""
    folder = os.environ.get("LLMSIZER_WEB_SCREENSHOTS")
    out = Path(folder) if folder else tmp_path_factory.mktemp("web-screenshots")
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the pages: {out}")
    started = time.time()
    yield out
    if folder:
        for png in out.glob("*.png"):
            if png.stat().st_mtime >= started - 1:
                shrink_png(png)

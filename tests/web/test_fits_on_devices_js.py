"""The "what fits my machine" page and ``models --fits-on``'s header name the hardware with one line computed in one
place, the core (``estimate/fit.py`` ``devices_text``), carried in the answer's JSON as ``devices_text``: the CLI
prints that field and the page (static/js/fits.js) shows it verbatim, so two whole instances read '16 x h100-sxm
(aws-p5.48xlarge, 2 instances)' on both. Before, the CLI (``_devices_text``) and the page (format.js
``fitsOnDevices``) each computed it, and a node test compared the two copies.

The truth here is the instance catalog row (its devices per instance, read from the data file, not from our code)
and the count asked; the page is checked in a real browser in tests/web/browser/test_browser_pages.py
``test_fits_on_summary_is_the_answers_devices_text``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.estimate.fit import devices_text

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "src" / "llmsizer" / "web" / "static" / "js"
ROW = next(r for r in json.loads((ROOT / "src" / "llmsizer" / "catalog" / "data" / "hardware" /
                                  "instances_aws.json").read_text())["instances"] if r["id"] == "aws-p5.48xlarge")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer", *argv], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, check=False)


@pytest.mark.parametrize("count", [None, 16, 24])
def test_cli_header_and_json_name_the_instances_of_the_catalog_row(count: int | None) -> None:
    each = ROW["device_count"]  # 8 H100 SXM per p5.48xlarge (the catalog row)
    n = count or each
    want = f"{n} x {ROW['device']} (aws-p5.48xlarge" + (f", {n // each} instances)" if n > each else ")")
    flag = ["--count", str(count)] if count else []
    p = run("models", "llama-3.1-8b", "--fits-on", "aws-p5.48xlarge", *flag, "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert (data["devices_text"], data["count"], data["instances"]) == (want, n, n // each)
    text = run("models", "llama-3.1-8b", "--fits-on", "aws-p5.48xlarge", *flag)
    assert text.stdout.startswith(f"models on {want}: "), text.stdout


def test_core_line_for_bare_devices_and_copies() -> None:
    assert devices_text(1, "rtx-4090") == "rtx-4090"
    assert devices_text(4, "h100-sxm") == "4 x h100-sxm"
    assert devices_text(3, "rtx-4090", 3) == "3 x rtx-4090 (3 copies)"
    p = run("models", "llama-3.1-8b", "--fits-on", "h100-sxm", "--count", "4", "--json")
    data = json.loads(p.stdout)
    assert (data["devices_text"], data["instances"]) == ("4 x h100-sxm", 1) and "devices_per_instance" not in data


def test_no_page_script_computes_the_line() -> None:
    """The page shows the answer's field: fits.js interpolates ``d.devices_text`` and no script builds an
    'N instances' text of its own (the copy in format.js is gone)."""
    fits = (JS / "fits.js").read_text()
    assert "${d.devices_text}" in fits
    for path in JS.glob("*.js"):
        src = path.read_text()
        assert "fitsOnDevices" not in src and not re.search(r"instances\)`", src), path.name

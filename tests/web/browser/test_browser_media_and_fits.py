"""In real Chromium against a real server (conftest.py), checked against separate ``llmsizer ... --json`` processes:
the calculator's image and video inputs (shown only for a model with a vision encoder) give the CLI's media tokens
and totals, flow into the link, the CLI command and the request YAML; the "what fits my machine" page lists the
answer of ``llmsizer models --fits-on``, ranked as the CLI's table ranks it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from browser_helpers import CHROMIUM, SKIP
from playwright.sync_api import Page
from test_browser_pages import LABELS, api, cli, copy_command, ready, wait_attr

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)

VL = "qwen2.5-vl-7b-instruct"


def test_images_on_a_vision_model_are_the_cli_media_tokens_and_totals(page: Page, server: str, shots: Path) -> None:
    ready(page, "/?model=llama-3.1-8b&context=8k&memory=24GiB")
    assert page.locator("#media").is_hidden()  # a text-only model: no image inputs
    model = page.get_by_label("Model", exact=True)
    model.fill("")
    model.press_sequentially(VL)
    page.wait_for_selector("#media:not([hidden])")
    assert page.evaluate(LABELS) == []  # the image and video inputs are labelled, and reached with Tab in order
    # the serving fieldset's last control (--enable-expert-parallel, after --tp / --pp / --dp beside the Device)
    page.locator("#expert_parallel").focus()
    tabbed = []
    for _ in range(5):
        page.keyboard.press("Tab")
        tabbed.append(page.evaluate("document.activeElement.id"))
    assert tabbed == ["images", "image_size", "video_frames", "video_size", "pan_and_scan"], tabbed
    page.get_by_label("Images", exact=True).fill("2")
    page.get_by_label("Image size").fill("1024x768")
    argv = ["infer", VL, "--context", "8k", "--memory", "24GiB", "--images", "2", "--image-size", "1024x768",
            "--max-context", "--max-concurrency"]
    want = cli(*argv)
    assert want["details"]["media_tokens"] > 0
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "total with 2 images")
    assert page.locator("#media-token-count").get_attribute("data-value") == str(want["details"]["media_tokens"])
    assert want["totals"] != cli("infer", VL, "--context", "8k", "--memory", "24GiB")["totals"]  # images count
    for item in want["items"]:
        row = page.locator(f'#breakdown tr[data-name="{item["name"]}"]')
        assert row.locator("td.num").first.get_attribute("data-bytes") == str(item["bytes"])
    assert "images=2" in page.url and "image_size=1024x768" in page.url

    command = copy_command(page)
    assert "--images 2" in command and "--image-size 1024x768" in command
    assert cli(*shlex.split(command)[1:])["totals"] == want["totals"]

    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    text = Path(dl.value.path()).read_text()
    assert yaml.safe_load(text)["jobs"][0]["media"] == {"images": 2, "image_size": "1024x768"}
    check = api(server, "/request/check", {"request": text, "filename": "request.yaml"})
    assert check["valid"], check

    other = page.context.new_page()  # the link reproduces the page, images included
    other.goto(page.url)
    wait_attr(other, "#total", "bytes", want["totals"]["device"]["bytes"], "the page opened from its link")
    other.close()
    page.set_viewport_size({"width": 1400, "height": 1500})  # the image inputs and the media tokens in one view
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=shots / "calculator-images.png")

    model.fill("")  # back to a text-only model: the inputs go away and are not sent
    model.press_sequentially("llama-3.1-8b")
    page.wait_for_selector("#media", state="hidden")
    wait_attr(page, "#total", "bytes", cli("infer", "llama-3.1-8b", "--context", "8k", "--memory", "24GiB")["totals"]
              ["device"]["bytes"], "a text-only model after images")
    assert page.locator("#problem").is_hidden()


def test_a_link_with_images_estimates_once(page: Page, server: str) -> None:
    """A page opened from a link that carries images asks whether the model takes them before its first estimate:
    one POST /infer, with the images (the CLI's total), not one without them and a second with them."""
    argv = ["infer", VL, "--context", "8k", "--memory", "24GiB", "--images", "2", "--image-size", "1024x768",
            "--max-context", "--max-concurrency"]
    want = cli(*argv)
    without = cli("infer", VL, "--context", "8k", "--memory", "24GiB", "--max-context", "--max-concurrency")
    assert want["totals"]["device"]["bytes"] != without["totals"]["device"]["bytes"]  # the images count
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url.removeprefix(server))
            if r.method == "POST" and r.url.startswith(server) else None)
    ready(page, f"/?model={VL}&context=8k&memory=24GiB&images=2&image_size=1024x768")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the page opened from a link with images")
    # the fits-on grid is asked only once the estimate on show is the last one (gridLater): once it is answered, no
    # second estimate is pending
    page.wait_for_selector("#fits-grid[data-answered]", timeout=60_000)
    assert posts.count("/api/v1/infer") == 1, posts
    assert posts.count("/api/v1/inspect") == 1, posts
    assert page.locator("#media-token-count").get_attribute("data-value") == str(want["details"]["media_tokens"])


def test_what_fits_my_machine_is_models_fits_on(page: Page, server: str, shots: Path) -> None:
    ready(page, "/")
    page.get_by_role("link", name="What fits my machine").click()
    page.wait_for_url("**/fits*")
    page.wait_for_selector("body[data-ready='1']")
    page.get_by_label("Device or instance").fill("rtx-4090")
    page.get_by_label("Context", exact=True).fill("8k")
    page.get_by_label("Concurrency").fill("2")
    want = cli("models", "--fits-on", "rtx-4090", "--context", "8k", "--concurrency", "2")
    n = sum(m["status"] == "meets" for m in want["models"])
    assert 0 < n < len(want["models"])
    wait_attr(page, "#fit-count", "fits", n, "models that fit")
    page.wait_for_function("() => !document.querySelector('#status.busy')")
    # the CLI's table, ranked: the same model names in the same order, with their format and tok/s
    table = cli("models", "--fits-on", "rtx-4090", "--context", "8k", "--concurrency", "2", json_out=False)
    names = {m["id"]: m for m in want["models"]}
    rows = page.locator("#fits-table tbody tr")
    assert rows.count() == len(want["models"])
    ids = [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]
    by_name = {e["name"]: e["id"] for e in cli("models")["models"]}
    name_of = {mid: name for name, mid in by_name.items()}
    cli_order = [by_name[ln.split()[0]] for ln in table.splitlines()[2:] if ln.split() and ln.split()[0] in by_name]
    assert ids == cli_order == [m["id"] for m in want["models"]]  # the answer's own order (its "order" line)
    assert want["order"] in page.locator("#fits-order").inner_text()
    for i, mid in enumerate(ids):
        m, row = names[mid], rows.nth(i)
        assert row.get_attribute("data-status") == m["status"]
        # the row names the model as the CLI's table does (its name, from GET /api/v1/models), not its id
        assert row.locator("th").inner_text().startswith(name_of[mid]), (mid, row.locator("th").inner_text())
        if m["status"] == "meets":
            assert row.locator("td[data-value]").get_attribute("data-value") == str(m["tokens_per_second_per_user"])
            assert row.locator("td[data-bytes]").get_attribute("data-bytes") == str(m["memory_per_device"])
            assert m["weights_format"].removeprefix("gguf:") in row.inner_text()
            assert m["quality"] in row.inner_text()  # the quality column, as the CLI's
        else:  # why not, as the CLI says it
            assert "; ".join(m["reasons"]) in row.inner_text()
    command = copy_command(page)
    assert command == "llmsizer models --fits-on rtx-4090 --context 8k --concurrency 2 --json"
    assert cli(*shlex.split(command)[1:-1]) == want
    assert "fits_on=rtx-4090" in page.url and "concurrency=2" in page.url
    # a model's line about experts in host memory wraps under its name (at most 60ch, as a reason does): before, it
    # kept the name's nowrap and made the model column ~1,800 px wide, the other columns out of view
    host_widths = page.evaluate("[...document.querySelectorAll('#fits-table .experts-in-host')].map((e) => "
                                "[e.getBoundingClientRect().width, parseFloat(getComputedStyle(e).maxWidth)])")
    assert host_widths and all(w <= most + 1 for w, most in host_widths), host_widths
    # the copy button scrolled the page, and Playwright's fill/click scrolled the form's own scroller (its sticky
    # column, overflow-y: auto) to the fields it typed in: both back to their top (the page itself scrolls neither)
    # (instant: the page's scroll-behavior is smooth, and a screenshot taken mid-way shows neither top)
    page.evaluate("window.scrollTo({ top: 0, behavior: 'instant' }); "
                  "document.getElementById('fits-form').scrollTo({ top: 0, behavior: 'instant' })")
    assert page.evaluate("[window.scrollY, document.getElementById('fits-form').scrollTop]") == [0, 0]
    page.screenshot(path=shots / "fits.png")

    page.get_by_label("Device or instance").fill("no-such-card")
    page.wait_for_selector("#problem:not([hidden])")
    assert "unknown hardware 'no-such-card'" in page.locator("#problem").inner_text()


MY_BOX = "devices:\n  - id: my-box\n    name: My box\n    kind: gpu\n    memory: 20GiB\n    memory_bandwidth: 760 GB/s\n"


def test_a_pasted_hardware_entry_is_models_fits_on_with_that_file(page: Page, server: str, tmp_path: Path) -> None:
    """Paste one node as a hardware-file entry: the list is `models --fits-on ID --hardware-file FILE`'s, and a bad
    value is the CLI's one line for that file, marked on the text box."""
    import subprocess
    import sys

    from browser_helpers import cli_env
    (tmp_path / "hardware.yaml").write_text(MY_BOX)
    want = cli("models", "--fits-on", "my-box", "--context", "8k", "--hardware-file", str(tmp_path / "hardware.yaml"))
    n = sum(m["status"] == "meets" for m in want["models"])
    assert 0 < n < len(want["models"])
    page.goto("/fits?context=8k")
    page.wait_for_selector("body[data-ready='1']")
    page.get_by_label("Your hardware (optional)").fill(MY_BOX)
    page.get_by_label("Device or instance").fill("my-box")
    wait_attr(page, "#fit-count", "fits", n, "models that fit the pasted device")
    assert "my-box" in page.locator("#summary").inner_text()
    command = copy_command(page)
    assert command == "llmsizer models --fits-on my-box --context 8k --hardware-file hardware.yaml --json"

    bad = MY_BOX.replace("20GiB", "twenty")
    (tmp_path / "hardware.yaml").write_text(bad)  # the copied command, run where the file is
    line = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *shlex.split(command)[1:]], capture_output=True,
                          text=True, cwd=tmp_path, env=cli_env())
    assert line.returncode == 2
    page.get_by_label("Your hardware (optional)").fill(bad)
    page.wait_for_function("() => !document.getElementById('problem').hidden")
    assert "llmsizer: error: " + page.locator("#problem").inner_text() + "\n" == line.stderr.replace(" (see --help)\n", "\n")
    assert page.get_by_label("Your hardware (optional)").get_attribute("aria-invalid") == "true"


def test_the_engine_and_release_of_the_fits_page_are_models_fits_on_with_them(page: Page, server: str) -> None:
    """Engine and release chosen on the page: the list is `models --fits-on DEVICE --engine E --engine-version V`'s
    (each model fit's answer on that engine and release), the copied command carries both, and choosing the engine
    from the select recomputes the list."""
    argv = ["qwen3-0", "--fits-on", "h100-sxm", "--concurrency", "4", "--engine", "vllm", "--engine-version", "0.5"]
    want = cli("models", *argv)
    n = sum(m["status"] == "meets" for m in want["models"])
    assert n > 0 and all(m["engine"] == "vllm" for m in want["models"])
    page.goto("/fits?fits_on=h100-sxm&concurrency=4&engine=vllm&engine_version=0.5&query=qwen3-0")
    page.wait_for_selector("body[data-ready='1']")
    assert page.get_by_label("Engine").input_value() == "vllm"
    wait_attr(page, "#fit-count", "fits", n, "models that fit on vLLM 0.5")
    page.wait_for_function("() => !document.querySelector('#status.busy')")
    rows = page.locator("#fits-table tbody tr")
    by_id = {m["id"]: m for m in want["models"]}
    for i in range(rows.count()):
        row = rows.nth(i)
        m = by_id[row.get_attribute("data-id")]
        if m["status"] == "meets":
            assert row.locator("td[data-value]").get_attribute("data-value") == str(m["tokens_per_second_per_user"])
    command = copy_command(page)
    assert command == ("llmsizer models qwen3-0 --fits-on h100-sxm --concurrency 4 --engine vllm --engine-version 0.5 "
                       "--json")
    assert cli(*shlex.split(command)[1:-1]) == want
    page.get_by_label("Engine").select_option("sglang")
    page.wait_for_function("() => [...document.querySelectorAll('#fits-table tbody tr td')].some("
                           "(td) => td.textContent === 'sglang')")


def test_the_fits_page_shows_the_cli_warning_of_a_newer_release(page: Page, server: str) -> None:
    """`models --fits-on h100-sxm --engine vllm --engine-version 99.0` warns that the newest release's rules are
    applied (as `fit` does); the page shows the same line under the count, not nothing."""
    want = cli("models", "qwen3-0", "--fits-on", "h100-sxm", "--engine", "vllm", "--engine-version", "99.0")
    assert len(want["warnings"]) == 1
    page.goto("/fits?fits_on=h100-sxm&engine=vllm&engine_version=99.0&query=qwen3-0")
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector("#fits-warnings li", timeout=60_000)
    assert page.locator("#fits-warnings li").all_text_contents() == [f"warning: {want['warnings'][0]}"]


def test_memory_and_headroom_of_the_fits_page_are_models_fits_on_with_them(page: Page, server: str) -> None:
    """Memory per device and headroom typed on the page: the list is `models --fits-on DEVICE --memory M --headroom
    H`'s (each model `fit --memory M --headroom H`'s answer), the copied command carries both, and a bad memory
    shows the CLI's one line on the field."""
    argv = ["qwen3", "--fits-on", "rtx-4090", "--memory", "12GiB", "--headroom", "0.3"]
    want = cli("models", *argv)
    n = sum(m["status"] == "meets" for m in want["models"])
    assert 0 < n < sum(m["status"] == "meets" for m in cli("models", "qwen3", "--fits-on", "rtx-4090")["models"])
    page.goto("/fits?fits_on=rtx-4090&query=qwen3")
    page.wait_for_selector("body[data-ready='1']")
    # llama.cpp's own margin on a GPU: 1024 MiB (llama.cpp common/common.h:483 fit_params_target)
    assert page.get_by_label("Headroom").get_attribute("placeholder") == "default 0.1; llama.cpp on a GPU: 1024 MiB"
    page.get_by_label("Memory per device").fill("12GiB")
    page.get_by_label("Headroom").fill("0.3")
    wait_attr(page, "#fit-count", "fits", n, "models that fit in 12 GiB with 0.3 headroom")
    page.wait_for_function("() => !document.querySelector('#status.busy')")
    by_id = {m["id"]: m for m in want["models"]}
    rows = page.locator("#fits-table tbody tr")
    for i in range(rows.count()):
        m = by_id[rows.nth(i).get_attribute("data-id")]
        if m["status"] == "meets":
            assert rows.nth(i).locator("td[data-bytes]").get_attribute("data-bytes") == str(m["memory_per_device"])
    command = copy_command(page)
    assert command == "llmsizer models qwen3 --fits-on rtx-4090 --memory 12GiB --headroom 0.3 --json"
    assert cli(*shlex.split(command)[1:-1]) == want
    page.get_by_label("Memory per device").fill("12")
    page.wait_for_function("() => !document.getElementById('problem').hidden")
    import subprocess
    import sys

    from browser_helpers import cli_env
    line = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "models", "qwen3", "--fits-on", "rtx-4090",
                           "--memory", "12", "--json"], capture_output=True, text=True, env=cli_env())
    assert line.returncode == 2 and line.stderr.startswith("llmsizer: error: argument --memory: ")
    # the CLI's reason, the field named as the request gave it (web/problems.py web_detail)
    assert "llmsizer: error: argument --memory: " + page.locator("#problem").inner_text().removeprefix(
        "field 'memory': ") + "\n" == line.stderr.replace(" (see --help)\n", "\n")
    assert page.get_by_label("Memory per device").get_attribute("aria-invalid") == "true"

"""The pages of ``llmsizer serve`` in real Chromium, against a real server (conftest.py), checked against the CLI's
own answers for the same input (a separate ``llmsizer ... --json`` process: the independent face of the one
estimator) and against files written by gguf-py (bytes counted from gguf's own block table).

Cases (issue #13): type a model, change the context, see the number change and equal the API's and the CLI's; the
same in the training tab (reached by keyboard); the fits-on grid agrees with ``llmsizer fit``; a link reproduces the
page and "copy as CLI command" prints the same number; drop a GGUF file and see its exact weight bytes, with only
its header sent; break a request and see the error at its line with "did you mean"; open the plan report (the
bytes of ``plan -o report.html``); compare = ``recommend``; every control labelled, tabs and pages keyboard-operable.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, ROOT, SKIP, cli_env
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from llmsizer.units import format_rate

sys.path.insert(0, str(ROOT / "tests" / "readers"))
import readers_helpers as H  # noqa: E402  (tiny real GGUF files written by gguf-py)

EXAMPLE = ROOT / "examples" / "lora-finetune-and-chat.yaml"
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP)


def cli(*args: str, json_out: bool = True) -> Any:
    """``llmsizer ARGS [--json]`` in a child process: its parsed JSON (or text)."""
    cmd = [sys.executable, "-m", "llmsizer.cli.main", *args] + (["--json"] if json_out else [])
    r = subprocess.run(cmd, env=cli_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), f"{' '.join(args)} exited {r.returncode}: {r.stderr}"
    if not json_out:
        return r.stdout
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        pytest.fail(f"llmsizer {' '.join(args)} --json printed no JSON ({e}); stdout {r.stdout[:300]!r}, "
                    f"stderr {r.stderr[:300]!r}")


def api(server: str, path: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(f"{server}/api/v1{path}", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read().decode()
        return json.loads(raw) if "json" in r.headers.get("content-type", "") else raw


def wait_attr(page: Page, selector: str, attr: str, value: object, what: str) -> None:
    """Wait until ``selector``'s data-``attr`` is ``value``; on timeout say what the page shows instead."""
    try:
        page.wait_for_function("([s, a, v]) => document.querySelector(s)?.dataset[a] === v",
                               arg=[selector, attr, str(value)], timeout=15_000)
    except PlaywrightTimeout:
        shown = page.evaluate("([s, a]) => document.querySelector(s)?.dataset[a]", [selector, attr])
        problem = page.locator("#problem").all_inner_texts() if page.locator("#problem").count() else []
        pytest.fail(f"{what}: the page shows {shown!r}, expected {value!r} (problem shown: {problem})")


def cli_total_text(text_out: str) -> str:
    """The expected device total as the CLI's table prints it ('TOTAL per device  device  17.36 GiB ...')."""
    line = next(ln for ln in text_out.splitlines() if ln.startswith("TOTAL per device"))
    return " ".join(line.split()[4:6])


def ready(page: Page, path: str) -> None:
    """Open ``path`` and wait until the page has its choices and has asked for its first answer."""
    page.goto(path)
    page.wait_for_selector("body[data-ready='1']")


def copy_command(page: Page) -> str:
    """Click "Copy as CLI command" and return the command the page shows (and copies)."""
    page.evaluate("delete document.getElementById('action-status').dataset.command")
    page.get_by_role("button", name="Copy as CLI command").click()
    page.wait_for_selector("#action-status[data-command]")
    return page.locator("#action-status").get_attribute("data-command") or ""


def wait_grid(page: Page) -> None:
    """Wait until every cell of the fits-on grid is answered for the page's current input (each input change
    clears the grid's stamp and the grid re-asked 400 ms after the new answer sets it again, so a grid finished for
    the previous input does not count, nor one finished while the next answer had already scheduled its re-ask); each cell must be a verdict (a device id the catalog lost would show its error instead)."""
    page.wait_for_function("() => document.querySelector('#fits-grid')?.dataset.answered === location.search",
                           timeout=60_000)
    errors = page.locator("#fits-grid .cell:not([data-fits])")
    assert errors.count() == 0, errors.all_inner_texts()


# ---------------------------------------------------------------------------------------------- calculator

def test_type_a_model_change_the_context_and_equal_the_api_and_the_cli(page: Page, server: str, shots: Path) -> None:
    ready(page, "/")
    model = page.get_by_label("Model", exact=True)
    model.fill("")
    model.press_sequentially("qwen2.5-7b")
    page.locator("#memory").fill("24GiB")  # empty by default (probe26 D1)
    page.get_by_label("Context", exact=True).fill("4k")
    args = ["--memory", "24GiB", "--max-context", "--max-concurrency"]
    at4k = cli("infer", "qwen2.5-7b", "--context", "4k", *args)
    wait_attr(page, "#total", "bytes", at4k["totals"]["device"]["bytes"], "total at 4k")
    assert page.locator("#total").inner_text() == cli_total_text(cli("infer", "qwen2.5-7b", "--context", "4k", *args,
                                                                         json_out=False))

    page.get_by_label("Context", exact=True).fill("32k")
    at32k = cli("infer", "qwen2.5-7b", "--context", "32k", *args)
    assert at32k["totals"]["device"]["bytes"] != at4k["totals"]["device"]["bytes"]
    wait_attr(page, "#total", "bytes", at32k["totals"]["device"]["bytes"], "total at 32k")
    by_api = api(server, "/infer", {"model": "qwen2.5-7b", "context": "32k", "memory": "24GiB", "max_context": True,
                                    "max_concurrency": True})
    assert by_api == at32k
    for item in at32k["items"]:  # every breakdown row, with its formula and source
        row = page.locator(f'#breakdown tr[data-name="{item["name"]}"]')
        assert row.locator("td.num").first.get_attribute("data-bytes") == str(item["bytes"])
        assert item["formula"] in row.inner_text() and item["source"] in row.inner_text()
    assert page.locator("#rev-context b").get_attribute("data-value") == str(at32k["reverse"]["max_context"])
    assert page.locator("#rev-concurrency b").get_attribute("data-value") == str(at32k["reverse"]["max_concurrency"])
    assert page.locator("#fits").inner_text() == ("fits" if at32k["details"]["fits"] else "does not fit")
    budget = page.locator("#chart-memory line.limit")
    assert budget.count() == 1  # the budget line on the device bar
    assert "context=32k" in page.url and "model=qwen2.5-7b" in page.url

    # a link reproduces the page
    other = page.context.new_page()
    other.goto(page.url)
    wait_attr(other, "#total", "bytes", at32k["totals"]["device"]["bytes"], "the page opened from its link")
    other.close()

    # "copy as CLI command" prints the same number
    command = copy_command(page)
    assert command and command.startswith("llmsizer infer qwen2.5-7b")
    again = cli(*shlex.split(command)[1:])
    assert again["totals"] == at32k["totals"]

    wait_grid(page)
    page.screenshot(path=shots / "calculator-full.png", full_page=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=shots / "calculator.png")


def test_training_tab_by_keyboard_and_the_fits_on_grid(page: Page, server: str, shots: Path) -> None:
    ready(page, "/?model=llama-3.1-8b&context=8k&memory=24GiB")
    page.locator("#tab-infer").focus()
    page.keyboard.press("ArrowRight")
    assert page.locator("#tab-train").get_attribute("aria-selected") == "true"
    assert page.locator("#panel-train").is_visible() and not page.locator("#panel-infer").is_visible()
    assert page.evaluate("document.activeElement.id") == "tab-train"
    page.get_by_label("Method").select_option("lora")
    page.get_by_label("Micro-batch").fill("4")
    page.get_by_label("Sequence", exact=True).fill("2k")
    want = cli("train", "llama-3.1-8b", "--method", "lora", "--batch", "4", "--seq", "2k", "--memory", "24GiB",
               "--max-batch", "--max-seq")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "training total")
    assert page.locator("#rev-batch b").get_attribute("data-value") == str(want["reverse"]["max_micro_batch"])
    assert page.locator("#rev-seq b").get_attribute("data-value") == str(want["reverse"]["max_seq_len"])
    assert "tab=train" in page.url and "method=lora" in page.url
    command = copy_command(page)
    assert command and command.startswith("llmsizer train llama-3.1-8b") and "--batch 4" in command
    assert cli(*shlex.split(command)[1:])["totals"] == want["totals"]

    # on a catalog device, with tokens: its memory is the budget and the duration is train --device --tokens's
    page.get_by_role("textbox", name="Memory per device").fill("")
    page.get_by_label("Device or instance").fill("h100-sxm")
    page.get_by_label("Tokens", exact=True).fill("1B")
    run = cli("train", "llama-3.1-8b", "--method", "lora", "--batch", "4", "--seq", "2k", "--device", "h100-sxm",
              "--tokens", "1B", "--max-batch", "--max-seq")
    wait_attr(page, "#duration-card", "seconds", run["duration"]["seconds"], "the training duration")
    wait_attr(page, "#total", "bytes", run["totals"]["device"]["bytes"], "training total on the device")
    assert page.locator("#rev-batch b").get_attribute("data-value") == str(run["reverse"]["max_micro_batch"])
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    check = api(server, "/request/check", {"request": Path(dl.value.path()).read_text(), "filename": "request.yaml"})
    assert check["valid"], check
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    check = api(server, "/request/check", {"request": Path(dl.value.path()).read_text(), "filename": "request.yaml"})
    assert check["valid"], check

    wait_grid(page)
    for device, count in (("rtx-4090", 1), ("h100-sxm", 2)):  # no instance has 1 x rtx-4090 or 2 x h100: fit by count
        fit = cli("fit", "llama-3.1-8b", "--device", device, "--count", str(count), "--train", "--method", "lora",
                  "--batch", "4", "--seq", "2k")
        cell = page.locator(f"#cell-{device}-{count}")
        assert cell.get_attribute("data-fits") == str(fit["fits"]).lower(), (device, count, cell.inner_text())

    page.locator("#tab-train").focus()
    page.keyboard.press("Home")
    assert page.locator("#tab-infer").get_attribute("aria-selected") == "true"


def test_bad_input_shows_the_cli_message_at_its_field_and_the_yaml_is_a_valid_request(page: Page, server: str) -> None:
    ready(page, "/?model=llama-3.1-8b&context=8k&memory=24GiB")
    wait_attr(page, "#total", "bytes", cli("infer", "llama-3.1-8b", "--context", "8k", "--memory", "24GiB")["totals"]
              ["device"]["bytes"], "the first answer")
    page.get_by_label("Context", exact=True).fill("-5")
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "infer", "llama-3.1-8b", "--context=-5"],
                       env=cli_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    message = r.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)")
    page.wait_for_selector("#problem:not([hidden])")
    assert message.startswith("argument --context: ")  # the CLI names the flag; the web the field (web_detail)
    assert page.locator("#problem").inner_text() == "field 'context': " + message.removeprefix("argument --context: ")
    assert page.get_by_label("Context", exact=True).get_attribute("aria-invalid") == "true"
    page.get_by_label("Context", exact=True).fill("16k")
    page.wait_for_selector("#problem", state="hidden")
    assert page.get_by_label("Context", exact=True).get_attribute("aria-invalid") is None

    page.get_by_label("Weight format").fill("q4_k_m")
    page.get_by_label("Engine").select_option("llamacpp")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    text = Path(dl.value.path()).read_text()
    check = api(server, "/request/check", {"request": text, "filename": "request.yaml"})
    assert check["valid"], check
    job = check["request"]["jobs"][0]
    assert job["engine"] == "llamacpp" and "q4_k_m" in json.dumps(job)


def test_the_calculators_headroom_goes_into_its_request_file(page: Page, server: str) -> None:
    """The headroom the calculator was asked with is a request field (resources.headroom, `fit --headroom`'s), so
    the request file it writes is planned with it. Before: a comment said the plan would keep the default."""
    ready(page, "/?model=llama-3.1-8b&context=8k&memory=24GiB&headroom=0.3")
    want = cli("infer", "llama-3.1-8b", "--context", "8k", "--memory", "24GiB", "--headroom", "0.3")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the answer at headroom 0.3")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download as request YAML").click()
    text = Path(dl.value.path()).read_text()
    assert "headroom: 0.3" in text and "not a request field" not in text
    check = api(server, "/request/check", {"request": text, "filename": "request.yaml"})
    assert check["valid"] and check["request"]["jobs"][0]["resources"]["headroom"] == 0.3, check


def test_fits_on_grid_equals_fit(page: Page, server: str) -> None:
    ready(page, "/?model=llama-3.1-8b&context=8k&concurrency=4&memory=24GiB")
    wait_grid(page)
    hw = json.loads(urllib.request.urlopen(f"{server}/api/v1/hardware?kind=instance", timeout=10).read())
    for device, count in (("rtx-4090", 1), ("l4", 1), ("h100-sxm", 8)):
        inst = sorted((i for i in hw["instances"] if i["device"] == device and i["device_count"] == count
                       and i["price_per_hour"] is not None), key=lambda i: i["price_per_hour"])
        target = ["--device", inst[0]["id"]] if inst else ["--device", device, "--count", str(count)]
        fit = cli("fit", "llama-3.1-8b", *target, "--context", "8k", "--concurrency", "4")
        cell = page.locator(f"#cell-{device}-{count}")
        assert cell.get_attribute("data-fits") == str(fit["fits"]).lower(), (device, count, cell.inner_text())
        if inst:  # the instance's price, from fit's answer
            assert f"${fit['cost']['price_per_hour']:.2f}/h" in cell.inner_text()


def test_fits_on_grid_shows_the_tokens_of_every_replica_as_compare_does(page: Page, server: str) -> None:
    """Qwen2.5-7B (28 heads) on 8 x H100 runs 2 replicas of TP 4: the grid cell's tok/s is the whole instance's,
    ``fit``'s tokens_per_second_total = the compare page's (recommend's) tokens_per_second. It showed one replica's
    before (half of it, beside the price of both)."""
    ready(page, "/?model=qwen2.5-7b&context=8k&concurrency=64")
    wait_grid(page)
    hw = json.loads(urllib.request.urlopen(f"{server}/api/v1/hardware?kind=instance", timeout=10).read())
    inst = min((i for i in hw["instances"] if i["device"] == "h100-sxm" and i["device_count"] == 8
                and i["price_per_hour"] is not None), key=lambda i: i["price_per_hour"])
    fit = cli("fit", "qwen2.5-7b", "--device", inst["id"], "--context", "8k", "--concurrency", "64")
    assert fit["replicas"] == 2 and fit["fits"]
    total = fit["tokens_per_second_total"]
    assert total == 2 * fit["speed"]["tokens_per_second"]
    assert f"{format_rate(total)} tok/s" in page.locator("#cell-h100-sxm-8").inner_text()  # as `fit` says it


def test_fits_on_summary_is_the_answers_devices_text(page: Page, server: str) -> None:
    """The page's summary names the hardware with the answer's ``devices_text`` (estimate/fit.py ``devices_text``),
    as the CLI's header does: 16 devices of an 8-GPU instance are 2 instances (the catalog row's device_count)."""
    want = cli("models", "llama-3.1-8b", "--fits-on", "aws-p5.48xlarge", "--count", "16")
    assert want["devices_text"] == "16 x h100-sxm (aws-p5.48xlarge, 2 instances)"
    ready(page, "/fits?fits_on=aws-p5.48xlarge&count=16&query=llama-3.1-8b")
    page.wait_for_selector("#fit-count")
    assert f"fit {want['devices_text']} at " in page.locator("#summary").inner_text()
    text = cli("models", "llama-3.1-8b", "--fits-on", "aws-p5.48xlarge", "--count", "16", json_out=False)
    assert text.startswith(f"models on {want['devices_text']}: ")


# ---------------------------------------------------------------------------------------------- model files

def test_drop_a_gguf_file_and_see_its_exact_weight_bytes(page: Page, server: str, tmp_path: Path) -> None:
    model = H.llama_gguf(layers=4, hidden=128, heads=4, kv=2, ffn=256, vocab=256)
    path = tmp_path / "tiny-llama.gguf"
    model.write(path)
    import gguf

    data_offset = gguf.GGUFReader(path).data_offset
    expected = sum(model.expected_bytes().values())  # from gguf.GGML_QUANT_SIZES, not from llmsizer
    file_bytes = path.read_bytes()
    assert len(file_bytes) > data_offset + expected - 1

    sent: list[bytes] = []
    page.on("request", lambda r: sent.append(r.post_data_buffer or b"") if "/model-files" in r.url else None)
    ready(page, "/")
    page.locator("#model-file").set_input_files(str(path))
    wait_attr(page, "#file-bytes", "bytes", expected, "the dropped file's weight bytes")
    # a .gguf file runs on llama.cpp (the engine rule), which keeps the token embedding in host memory ("there is
    # very little benefit to offloading the input layer, so always keep it on the CPU", llama.cpp
    # src/llama-model.cpp:1603-1605 at 0c1e57098, as vendored by llama-cpp-python 0.3.36): the weights show as a
    # device row and a host row, which together hold the file's tensor bytes
    rows = '#breakdown tr[data-name="weights"], #breakdown tr[data-name="weights_host"]'
    shown = """(s) => [...document.querySelectorAll(s)].map((r) => [r.dataset.name, r.cells[1].textContent,
                                                                  Number(r.cells[2].dataset.bytes)])"""
    try:
        page.wait_for_function(f"(s) => ({shown})(s).reduce((t, r) => t + r[2], 0) === {expected}", arg=rows,
                               timeout=15_000)
    except PlaywrightTimeout:
        pytest.fail(f"the weights rows {page.evaluate(shown, rows)} do not add up to the file's {expected} B")
    where = {name: (loc, b) for name, loc, b in page.evaluate(shown, rows)}
    assert where["weights"][0] == "device" and where["weights_host"][0] == "host"
    assert where["weights_host"][1] >= model.expected_bytes()["token_embd.weight"]  # the embedding table on host
    assert len(sent) == 1
    body = sent[0]
    # only the header: the file's first bytes up to the end of the tensor table, no tensor data
    assert 24 < len(body) <= data_offset and data_offset - len(body) < 32
    assert body == file_bytes[: len(body)]
    assert "Using tiny-llama.gguf" in page.locator("#file-note").inner_text()

    # the fits-on grid of the dropped file answers as `llmsizer fit FILE` does, verdict or error
    r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "fit", str(path), "--device", "rtx-4090",
                        "--json"], env=cli_env(), capture_output=True, text=True, timeout=60)
    page.wait_for_function("() => document.querySelector('#fits-grid')?.dataset.answered === location.search",
                           timeout=60_000)
    if r.returncode == 2:
        assert page.locator("#grid-problem").inner_text().endswith(r.stderr.strip().removeprefix("llmsizer: error: ").removesuffix(" (see --help)"))
    else:
        assert page.locator("#cell-rtx-4090-1").get_attribute("data-fits") == str(json.loads(r.stdout)["fits"]).lower()


DROP = """async ([files]) => {  // a real drop event carrying File objects, as a drag from the desktop delivers
  const dt = new DataTransfer();
  for (const [name, b64] of files) {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bytes], name));
  }
  const zone = document.getElementById("drop");
  zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
  zone.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
}"""


def test_drop_two_safetensors_shards_with_their_config(page: Page, server: str, tmp_path: Path) -> None:
    import base64

    import numpy as np

    folder = tmp_path / "tiny"
    shards = H.write_folder(folder, H.LLAMA_CONFIG, H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG), np.float16), 2)
    expected = sum(H.safetensors_data_size(p) for p in shards)  # file size - 8 - header length, per shard
    sent: list[int] = []
    page.on("request", lambda r: sent.append(len(r.post_data_buffer or b"")) if "/model-files" in r.url else None)
    ready(page, "/?context=2k&memory=")
    files = [(p.name, base64.b64encode(p.read_bytes()).decode()) for p in [folder / "config.json", *shards]]
    page.evaluate(DROP, [files])
    wait_attr(page, "#file-bytes", "bytes", expected, "the shards' weight bytes")
    want = cli("infer", str(folder), "--context", "2k")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the dropped folder's total")
    headers = sorted(8 + int.from_bytes(p.read_bytes()[:8], "little") for p in shards)
    assert sorted(sent) == headers  # each shard's length prefix + JSON header, no tensor bytes


def test_a_dropped_config_json_is_the_model(page: Page, server: str, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(H.LLAMA_CONFIG))
    ready(page, "/?context=1k&memory=")
    page.locator("#model-file").set_input_files(str(cfg))
    want = cli("infer", str(cfg), "--context", "1k")
    wait_attr(page, "#total", "bytes", want["totals"]["device"]["bytes"], "the config.json model's total")


# ---------------------------------------------------------------------------------------------- request page

def test_break_a_request_and_see_the_error_at_its_line(page: Page, server: str, shots: Path) -> None:
    page.goto("/request")
    page.wait_for_selector("#valid")  # the commented template is valid
    lines = EXAMPLE.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("rank:"))
    lines[at] = lines[at].replace("rank:", "rnak:")
    page.get_by_label("Request (YAML)").fill("\n".join(lines) + "\n")
    err = page.locator(f'#errors button[data-line="{at + 1}"]')
    err.wait_for()
    assert "did you mean 'rank'" in err.inner_text()
    assert page.locator(f'#gutter div.err[data-line="{at + 1}"]').count() == 1
    err.click()
    caret_line = page.evaluate("(() => { const t = document.getElementById('request-text'); "
                               "return t.value.slice(0, t.selectionStart).split('\\n').length; })()")
    assert caret_line == at + 1
    assert page.evaluate("document.activeElement.id") == "request-text"
    page.screenshot(path=shots / "request.png", full_page=False)

    # an invalid request is bad input (400, the CLI's exit 2): the problem lists every line the page shows
    with pytest.raises(urllib.error.HTTPError) as bad:
        api(server, "/request/check", {"request": "\n".join(lines) + "\n", "filename": "request.yaml"})
    assert bad.value.code == 400
    problem = json.loads(bad.value.read().decode())
    assert any(e.startswith(f"request.yaml:{at + 1}:") for e in problem["errors"])


def test_open_the_report_and_download_it(page: Page, server: str, shots: Path, tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    page.goto("/request")
    page.wait_for_selector("#valid")
    page.get_by_label("Request (YAML)").fill(text)
    page.wait_for_function("document.getElementById('check-status').textContent.includes('2 job(s)')")
    page.get_by_role("button", name="View the plan report").click()
    page.wait_for_selector("#report[data-loaded='1']")
    frame = page.frame_locator("#report")
    assert frame.locator("h1").inner_text().startswith("Plan: Support assistant")
    assert frame.locator("svg.chart").count() >= 1 and frame.locator("#checks, .card").count() >= 1
    # the report's own CSS applies (body background #f9fafb), through the constructed sheet
    bg = page.frame_locator("#report").locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
    assert bg == "rgb(249, 250, 251)"
    page.locator("#report-section").screenshot(path=shots / "report.png")

    # downloads: the bytes of `llmsizer plan -o report.html|.md` and its --json for the same file (two CLI runs)
    req = tmp_path / "request.yaml"
    req.write_text(text)
    want = {}
    for ext, extra in (("html", ["--json"]), ("md", ["--quiet"]), ("json", ["--quiet"])):
        r = subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "plan", "request.yaml", "-o", f"report.{ext}",
                            *extra], env=cli_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode in (0, 1), r.stderr
        want[ext] = (tmp_path / f"report.{ext}").read_text()
        if ext == "html":
            printed = r.stdout  # --json beside -o: the plan
    assert json.loads(want["json"]) == json.loads(printed)  # -o report.json writes the plan --json prints
    for button, ext in (("Report as HTML", "html"), ("as Markdown", "md"), ("as JSON", "json")):
        with page.expect_download() as dl:
            page.get_by_role("button", name=button, exact=True).click()
        assert dl.value.suggested_filename == f"request-report.{ext}"  # one name per format (probe26 C7)
        got = Path(dl.value.path()).read_text()
        # the bytes of `plan -o report.EXT`, JSON too (probe26 D2: a re-serialised 730.0 was 730)
        assert got == want[ext], f"report.{ext} differs from the CLI's"


# ---------------------------------------------------------------------------------------------- compare

def test_compare_is_recommend(page: Page, server: str, shots: Path) -> None:
    page.goto("/compare?model=llama-3.1-8b&context=8k&concurrency=8&top=12")
    page.wait_for_selector("#chosen-title")
    want = cli("recommend", "llama-3.1-8b", "--context", "8k", "--concurrency", "8")
    chosen = want["chosen"]
    assert chosen["name"] in page.locator("#chosen-title").inner_text()
    assert chosen["devices_text"] in page.locator("#chosen-title").inner_text()  # the core's line, verbatim
    rows = page.locator("#options tbody tr")
    assert rows.count() == min(12, len(want["options"]))
    assert page.locator("#rejected tbody tr").count() == min(12, len(want["rejected"]))
    for adv in want["advice"]:
        assert adv in page.locator("#advice").inner_text()
    drawn = [o for o in want["options"] if o["price_per_hour"] and o["tokens_per_second"]]
    assert page.locator("#chart-cost-speed circle.point").count() == len(drawn)
    assert page.locator("#chart-cost-speed circle.chosen").count() == 1
    page.screenshot(path=shots / "compare.png", full_page=False)
    command = copy_command(page)
    assert command and command.startswith("llmsizer recommend llama-3.1-8b")
    assert cli(*shlex.split(command)[1:])["chosen"] == chosen  # the copied command answers the same

    page.get_by_role("tab", name="Training").click()
    page.get_by_label("Method").select_option("lora")
    page.get_by_label("Tokens", exact=True).fill("2B")
    train = cli("recommend", "llama-3.1-8b", "--train", "--tokens", "2B", "--method", "lora")
    page.wait_for_function("(name) => document.getElementById('chosen-title')?.textContent.includes(name) && "
                           "document.getElementById('speed-col').textContent === 'wall clock'", arg=train["chosen"]["name"])
    assert page.locator("#chart-cost-speed circle.point").count() == len(
        [o for o in train["options"] if o["run_cost"] and o["training_seconds"]])


def test_compare_with_only_a_model_asks_recommends_defaults(page: Page, server: str) -> None:
    """probe28 D5's sibling: the compare page's Context and Concurrency started filled ('8k', '8'), so a bare model
    compared 8k x 8 while `recommend llama-3.1-8b` asks 4096 x 1. Empty now, their placeholders the defaults'
    home (InferenceWorkload via choices.json): the chosen option is recommend's for the bare model."""
    page.goto("/compare?model=llama-3.1-8b")
    page.wait_for_selector("#chosen-title")
    want = cli("recommend", "llama-3.1-8b")
    assert page.get_by_label("Context").input_value() == "" and page.get_by_label("Concurrency").input_value() == ""
    assert page.get_by_label("Context").get_attribute("placeholder") == "default 4096"
    assert want["chosen"]["devices_text"] in page.locator("#chosen-title").inner_text()
    command = copy_command(page)
    assert command is not None and "--context" not in command and "--concurrency" not in command
    assert cli(*shlex.split(command)[1:])["chosen"] == want["chosen"]


def test_compare_takes_a_dropped_config_json(page: Page, server: str, tmp_path: Path) -> None:
    """The compare page's model is picked as the calculator's: a dropped config.json is the model of `recommend`."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(H.LLAMA_CONFIG))
    page.goto("/compare?model=llama-3.1-8b&context=4k&concurrency=2&top=5")
    page.wait_for_selector("#chosen-title")
    want = cli("recommend", str(cfg), "--context", "4k", "--concurrency", "2")
    before = cli("recommend", "llama-3.1-8b", "--context", "4k", "--concurrency", "2")
    assert want["chosen"] != before["chosen"]  # a tiny model: another choice than the 8B's, so the page must change
    page.locator("#model-file").set_input_files(str(cfg))
    page.wait_for_function("(name) => document.getElementById('chosen-title')?.textContent.includes(name)",
                           arg=want["chosen"]["name"])
    assert page.locator("#options tbody tr").count() == min(5, len(want["options"]))
    assert page.locator("#rejected tbody tr").count() == min(5, len(want["rejected"]))
    assert "config.json" in page.locator("#file-note").inner_text()


# ---------------------------------------------------------------------------------------------- accessibility

LABELS = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter(c => c.type !== 'hidden')
  .filter(c => !((c.labels && c.labels.length && [...c.labels].some(l => l.textContent.trim()))
                 || c.getAttribute('aria-label') || c.getAttribute('aria-labelledby')
                 || (c.tagName === 'BUTTON' && c.textContent.trim())))
  .map(c => c.outerHTML.slice(0, 120))"""


@pytest.mark.parametrize("path", ["/", "/compare", "/request", "/fits"])
def test_every_control_is_labelled_and_reachable_by_keyboard(page: Page, path: str) -> None:
    page.goto(path)
    page.wait_for_load_state("networkidle")
    assert page.evaluate(LABELS) == []
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"  # the first stop: skip to the content
    seen = []
    for _ in range(60):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
    want = {"/": ["model", "context", "memory", "copy-cli"], "/compare": ["model", "context", "copy-cli"],
            "/request": ["template", "request-text", "view-report", "dl-json"],
            "/fits": ["fits_on", "count", "context", "concurrency", "copy-cli"]}[path]
    for control in want:
        assert control in seen, f"{control} is not reached with Tab on {path}: {seen}"
    order = [seen.index(c) for c in want]
    assert order == sorted(order), f"Tab order on {path}: {seen}"

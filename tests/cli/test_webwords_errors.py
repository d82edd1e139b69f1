"""Every error names what the user typed (task `webwords`); each case failed before its fix.

3. Lines that named Python fields where the user gave flags (``tensor_split has 3 shares``, ``gpus (8) must be a
   multiple of tp x pp``, ``ep (3) must divide``) are FieldErrors at their source, so each surface writes its own
   names: the CLI its flags, a request file its keys, the web the CLI's line with ``field`` its key; Python keeps
   the field names.
4. A request file's ``engine_settings.max_num_seqs`` with no engine follows the CLI's rule (specs/workload.py
   ``refuse_default_not_reading``): kept on an H100 (its default, vLLM, reads it), refused where the default does
   not (before: refused everywhere, "not the default engine; set engine").
5. `recommend --devic` means --device (the search chooses it), not '--metric'; `--max-num-seqs` on a CPU, where
   neither engine that reads it runs, says so and asks to drop it (before: "give --engine vllm or --engine sglang",
   both of which a CPU then refuses).
6. `capacity check` / `capacity show` on a --db that does not exist: still read as empty (exit 0), with one note on
   stderr naming the path, and in `show --json` a ``store_not_created`` field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_run import run

from llmsizer import estimate_inference
from llmsizer.errors import FieldError
from llmsizer.estimate.fit import fit
from llmsizer.request.reader import RequestError, load_request
from llmsizer.specs import TrainingWorkload
from llmsizer.specs.workload import ENGINE_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("llmsizer: error: ")


# ------------------------------------------------------------------ 3. the flags the user gave, not Python's names
@pytest.mark.parametrize("argv, opening", [
    (["infer", "llama-3.1-8b", "--engine", "llamacpp", "--gpus", "2", "--tensor-split", "1,1,1"],
     "--tensor-split has 3 shares; give one share per GPU of one machine (2 GPUs; one copy of the model)"),
    (["fit", "llama-3.1-8b", "--device", "rtx-4090", "--count", "2", "--tensor-split", "1,1,1"],
     "--tensor-split has 3 shares; give one share per GPU of one machine (2 GPUs; one copy of the model)"),
    (["train", "llama-3.1-8b", "--gpus", "8", "--tp", "3"], "--gpus (8) must be a multiple of --tp x --pp"),
    (["train", "qwen3-30b-a3b", "--gpus", "8", "--ep", "3"],
     "--ep (3) must divide the data-parallel degree, --gpus / (--tp x --pp) = 8"),
])
def test_a_cli_line_names_the_flags_given(argv, opening, capsys) -> None:
    code, _, err = run(argv, capsys)
    line = one_line(err)
    assert code == 2 and line.startswith(opening), line
    assert not re.search(r"(?<![\w-])(tensor_split|gpus|ep|tp|pp|context_parallel)(?![\w-])", line), line


def test_python_keeps_the_field_names() -> None:
    """The same refusals from the Python API: FieldErrors naming the fields by their Python names."""
    with pytest.raises(FieldError, match=r"^tensor_split has 3 shares; give one share per GPU of one machine \(2 GPUs") as e:
        estimate_inference("llama-3.1-8b", engine="llamacpp", gpus=2, tensor_split=(1, 1, 1))
    assert e.value.field == "tensor_split"
    with pytest.raises(FieldError, match=r"^gpus \(8\) must be a multiple of tp x pp") as e:
        TrainingWorkload(gpus=8, tp=3)
    assert e.value.field == "gpus"
    with pytest.raises(FieldError, match=r"^ep \(3\) must divide") as e:
        TrainingWorkload(gpus=8, ep=3)
    assert e.value.field == "ep"


# ------------------------------------------------------------------ 4. request files follow the CLI's engine rule
def _request(tmp_path: Path, resources: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(f"""jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
{resources}    engine_settings: {{max_num_seqs: 8}}
    traffic:
      concurrency: 4
      context: 2k
""")
    return p


def test_max_num_seqs_without_engine_on_h100_is_kept_as_on_the_cli(tmp_path, capsys) -> None:
    assert ENGINE_SETTINGS["max_num_seqs"] == ("vllm", "sglang")
    code, out, _ = run(["fit", "llama-3.1-8b", "--device", "h100", "--max-num-seqs", "8", "--json"], capsys)
    cli = json.loads(out)
    assert code == 0 and cli["engine"] == "vllm", cli["engine"]
    req = _request(tmp_path, "    resources: {device: h100}\n")
    code, out, err = run(["request", "check", str(req)], capsys)
    assert code == 0, err  # before: "engine_settings.max_num_seqs: applies to engine vllm or sglang, not the default"
    code, out, err = run(["plan", str(req), "--json", "--no-alternatives"], capsys)
    assert code in (0, 1), err
    job = json.loads(out)["jobs"][0]
    engines = [a for a in job["assumptions"] if a["name"] == "engine"]
    assert engines and engines[0]["value"] == "vllm" and engines[0]["why"].startswith("default for h100"), engines
    assert "max_num_seqs 8" in json.dumps(job), "the setting reaches the sizing (vLLM's running cap)"


@pytest.mark.parametrize("resources, words", [
    ("    resources: {device: rtx-4090}\n", "the default on rtx-4090 is llama.cpp"),
    ("", "the default on gpu is transformers"),  # no devices: the plan searches, the default of a GPU by its kind
    ("    resources: {device: cpu}\n", "no engine that reads it runs on cpu"),
])
def test_max_num_seqs_without_engine_is_refused_where_the_default_does_not_read_it(tmp_path, capsys, resources,
                                                                                      words) -> None:
    req = _request(tmp_path, resources)
    load_request(str(req))  # the reader leaves it to the devices' default (before: refused here, every device)
    code, _, err = run(["request", "check", str(req)], capsys)
    line = one_line(err)
    at = req.read_text().splitlines().index("    engine_settings: {max_num_seqs: 8}") + 1  # the setting's own line
    assert code == 2 and line.startswith(f"{req}:{at}: job 'chat' (inference): engine_settings.max_num_seqs is a "
                                         "vLLM or SGLang setting"), line
    assert words in line, line


def test_a_setting_of_one_other_engine_is_still_refused_by_the_reader(tmp_path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("jobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n    engine: vllm\n"
                 "    engine_settings: {mem_fraction_static: 0.8}\n    traffic: {concurrency: 4, context: 2k}\n")
    with pytest.raises(RequestError, match="applies to engine sglang, not vllm"):
        load_request(str(p))


# ------------------------------------------------------------------ 5. did-you-mean and a CPU's engines
@pytest.mark.parametrize("typed", ["--devic", "--devi"])
def test_recommend_devic_means_the_device_the_search_chooses(typed, capsys) -> None:
    code, _, err = run(["recommend", "llama-3.1-8b", typed, "h100"], capsys)
    line = one_line(err)
    assert code == 2 and "'--metric'" not in line and "recommend searches the catalog's devices" in line, line
    assert "(no --device)" in line and "`llmsizer fit MODEL --device NAME`" in line, line


@pytest.mark.parametrize("command", ["infer", "fit"])
def test_max_num_seqs_on_a_cpu_asks_for_no_engine_a_cpu_refuses(command, capsys) -> None:
    code, _, err = run([command, "llama-3.1-8b", "--device", "cpu", "--max-num-seqs", "8"], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith("--max-num-seqs is a vLLM or SGLang setting"), line
    assert "no engine that reads it runs on cpu" in line and line.endswith("drop it") and "--engine" not in line
    for engine in ENGINE_SETTINGS["max_num_seqs"]:  # each reader is refused there: asking for one would mislead
        code, _, err = run([command, "llama-3.1-8b", "--device", "cpu", "--max-num-seqs", "8", "--engine", engine],
                           capsys)
        assert code == 2 and "not device cpu" in one_line(err), err
    with pytest.raises(FieldError, match="no engine that reads it runs on cpu") as e:
        fit("llama-3.1-8b", "cpu", max_num_seqs=8)
    assert e.value.field == "max_num_seqs"


# ------------------------------------------------------------------ 6. a store not created yet
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
PRE = str(ROOT / "examples" / "pretraining-multinode.yaml")


def test_capacity_on_a_store_not_created_says_so(tmp_path, capsys) -> None:
    db = tmp_path / "typo.sqlite"
    code, out, err = run(["capacity", "check", PRE, "--inventory", INV, "--db", str(db), "--now", "2025-09-01"],
                         capsys)
    assert code == 0 and "FITS" in out, err  # empty is legitimate: a store is created by the first booking
    assert err.count(f"--db {db} does not exist yet") == 1, err
    code, out, err = run(["capacity", "show", "--inventory", INV, "--db", str(db), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["reservations"] == [] and data["store_not_created"] == str(db), data
    assert err.count(f"--db {db} does not exist yet") == 1, err
    assert not db.exists()  # reading creates nothing


def test_capacity_on_an_existing_store_says_nothing_of_it(tmp_path, capsys) -> None:
    db = tmp_path / "b.sqlite"
    code, _, err = run(["capacity", "book", PRE, "--inventory", INV, "--db", str(db), "--now", "2025-09-01"], capsys)
    assert code == 0 and db.exists(), err
    code, out, err = run(["capacity", "show", "--inventory", INV, "--db", str(db), "--json"], capsys)
    assert code == 0 and "store_not_created" not in json.loads(out) and "does not exist" not in err, err


def test_capacity_check_no_db_says_nothing_of_a_store(tmp_path, capsys) -> None:
    """probe3 #9: `check --no-db` reads no store, so the "does not exist yet" note (about the default --db) is
    noise; without --no-db the same missing store is still named."""
    db = tmp_path / "typo.sqlite"
    code, out, err = run(["capacity", "check", PRE, "--inventory", INV, "--db", str(db), "--no-db",
                          "--now", "2025-09-01"], capsys)
    assert code == 0 and "FITS" in out, err
    assert "does not exist" not in err, err
    code, out, err = run(["capacity", "check", PRE, "--inventory", INV, "--no-db", "--now", "2025-09-01"], capsys)
    assert code == 0 and "does not exist" not in err, err

"""Issue #15, request files, CLI numbers, files and output: every hostile value ends in one line naming what and
where, exit 2, no traceback, nothing overwritten; bounded in time."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest
from cli_run import run

from cli_capture import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cpu-internal-tool.yaml"
INVENTORY = ROOT / "examples" / "provider" / "inventory.yaml"


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ 1. numbers
@pytest.mark.parametrize("argv, flag, fragment", [
    (["fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "-1"], "--count", "[1, 1,048,576]"),
    (["fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "2.5"], "--count", "whole number"),
    (["infer", "llama-3.1-8b", "--context", "1e30"], "--context", "[1, 2,147,483,648]"),
    (["infer", "llama-3.1-8b", "--memory", "1e400GB"], "--memory", "finite"),
    (["infer", "llama-3.1-8b", "--concurrency", "1e400"], "--concurrency", "finite"),
    (["infer", "llama-3.1-8b", "--headroom", "nan"], "--headroom", "finite"),
    (["infer", "llama-3.1-8b", "--gpu-memory-utilization", "inf"], "--gpu-memory-utilization", "finite"),
    (["infer", "llama-3.1-8b", "--tp", "0"], "--tp", "out of range"),
    (["train", "llama-3.1-8b", "--utilization", "2"], "--utilization", "out of range"),
    (["train", "llama-3.1-8b", "--zero", "7"], "--zero", "[0, 3]"),
    (["infer", "--params", "7B", "--layers", "1e9", "--hidden", "4096", "--heads", "32"], "--layers", "[1, 10,000]"),
    (["recommend", "llama-3.1-8b", "--max-cost-per-hour", "-5"], "--max-cost-per-hour", "out of range"),
    # models --fits-on answered for concurrency 1 and one device when given 0 (exit 0)
    (["models", "--fits-on", "rtx-4090", "--concurrency", "0"], "--concurrency", "[1, 16,777,216]"),
    (["models", "--fits-on", "rtx-4090", "--count", "0"], "--count", "[1, 1,048,576]"),
])
def test_cli_numbers_are_refused_with_the_flag_and_range(argv, flag, fragment, capsys) -> None:
    code, out, err = run(argv, capsys)
    line = one_line(err)
    assert code == 2 and not out, (code, out)
    assert f"argument {flag}" in line and fragment in line and "expected" in line, line


@pytest.mark.parametrize("old, new, field, fragment", [
    ("users: 25", "users: .nan", "traffic.users", "finite"),
    ("typical: 2, peak: 6", "typical: .inf, peak: 6", "traffic.concurrency.typical", "finite"),
    ("hours_per_day: 11", "hours_per_day: 1" + "0" * 400, "service.hours_per_day", "(0, 24]"),
    ("count: 1\n", "count: 1" + "0" * 400 + "\n", "resources.count", "out of range"),
    ("peak: 4k}", "peak: 1e30}", "traffic.context.peak", "[1, 2,147,483,648]"),
    ("count: 1\n", "count: true\n", "resources.count", "got the boolean true"),
    ("ttft: 45 s", "ttft: 1e400 s", "latency.ttft", "finite"),
    ("per_month: $200/month", "per_month: $1e400/month", "budget.per_month", "finite"),
])
def test_request_numbers_are_refused_with_file_line_and_range(tmp_path, old, new, field, fragment, capsys) -> None:
    text = EXAMPLE.read_text()
    assert old in text
    req = tmp_path / "req.yaml"
    req.write_text(text.replace(old, new, 1))
    code, _, err = run(["plan", str(req)], capsys)
    line = one_line(err)
    assert code == 2 and f"{req}:" in line and f"{field}: " in line and fragment in line, line


# ------------------------------------------------------------------ 2. YAML
@pytest.mark.parametrize("old, new, fragment", [
    ("users: 25", "users: !!python/name:os.system", "YAML tag '!!python/name:os.system' is not allowed"),
    ("users: 25", "users: !custom 3", "YAML tag '!custom' is not allowed"),
    ("users: 25", "users: !!int abc", "cannot read 'abc' as int"),
    ("hours_per_day: 11", "hours_per_day: !!float abc", "cannot read 'abc' as float"),
    ("version: 1", "version: !!binary aGVsbG8=", "YAML tag '!!binary' is not allowed"),
    # a date YAML reads as a timestamp: the line said "(ValueError)", not why
    ("users: 25", "users: 2025-13-45", "users: cannot read '2025-13-45' as a date (month must be in 1..12); write "
                                      "YYYY-MM-DD"),
])
def test_request_yaml_tags_end_in_one_line(tmp_path, old, new, fragment, capsys) -> None:
    text = EXAMPLE.read_text()
    req = tmp_path / "req.yaml"
    req.write_text(text.replace(old, new, 1))
    line_no = next(i for i, ln in enumerate(req.read_text().splitlines(), 1) if new.split(":", 1)[1].strip() in ln)
    code, _, err = run(["plan", str(req)], capsys)
    line = one_line(err)
    assert code == 2 and line.startswith(f"llmsizer: error: {req}:{line_no}: ") and fragment in line, line


def test_tag_on_the_top_level_is_refused(tmp_path, capsys) -> None:
    req = tmp_path / "req.yaml"
    req.write_text("!custom\n" + EXAMPLE.read_text())
    code, _, err = run(["plan", str(req)], capsys)
    assert code == 2 and "YAML tag '!custom'" in one_line(err)


@pytest.mark.parametrize("doc", ["version: 1\njobs: " + "[" * 5000 + "]" * 5000 + "\n",
                                 "version: 1\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"])
def test_deep_nesting_is_one_line(tmp_path, doc, capsys) -> None:
    req = tmp_path / "deep.yaml"
    req.write_text(doc)
    code, _, err = run(["plan", str(req)], capsys)
    assert code == 2 and "nested too deeply" in one_line(err)


def test_request_size_is_capped_fast(tmp_path, capsys) -> None:
    req = tmp_path / "big.yaml"
    req.write_text("version: 1\n" + "".join(f"k{i}: {i}\n" for i in range(500_000)))  # ~6 MB of unknown keys
    t = time.perf_counter()
    code, _, err = run(["plan", str(req)], capsys)
    assert code == 2 and "too large" in one_line(err) and time.perf_counter() - t < 2


def test_request_on_stdin_is_capped(monkeypatch, capsys) -> None:
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO("version: 1\n" + "#" * (3 * 2**20)))
    code, _, err = run(["plan", "-"], capsys)
    assert code == 2 and "too large" in one_line(err)


@pytest.mark.parametrize("body, fragment", [
    ("version: 1\nprovider: !custom x\n", "YAML tag '!custom' is not allowed in an inventory"),
    ("version: 1\nprovider: !!python/name:os.system x\n", "YAML tag '!!python/name:os.system'"),
    ("version: 1\nnodes: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_inventory_yaml_tags_and_depth(tmp_path, body, fragment) -> None:
    from llmsizer.errors import InputError
    from llmsizer.provider.inventory import load_inventory
    inv = tmp_path / "inv.yaml"
    inv.write_text(body)
    with pytest.raises(InputError) as e:
        load_inventory(inv)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{inv}") and fragment in msg, msg


# ------------------------------------------------------------------ 3. files
@pytest.mark.parametrize("flag", ["-o"])
def test_plan_output_onto_a_folder(tmp_path, flag, capsys) -> None:
    (tmp_path / "r.html").mkdir()
    code, _, err = run(["plan", str(EXAMPLE), flag, str(tmp_path / "r.html")], capsys)
    assert code == 2 and "is a folder" in one_line(err)


def test_capacity_svg_and_html_onto_a_folder(tmp_path, capsys) -> None:
    for flag, name in (("--svg", "t.svg"), ("--html", "t.html")):
        (tmp_path / name).mkdir()
        code, _, err = run(["capacity", "show", "--inventory", str(INVENTORY), "--db", str(tmp_path / "b.db"),
                            flag, str(tmp_path / name)], capsys)
        assert code == 2 and "is a folder" in one_line(err), err


def test_plan_output_onto_its_own_request_is_refused(tmp_path, monkeypatch, capsys) -> None:
    req = tmp_path / "req.json"
    text = EXAMPLE.read_text()
    req.write_text(text)
    monkeypatch.chdir(tmp_path)
    for out in ("req.json", str(req), "./req.json"):
        code, _, err = run(["plan", "req.json", "-o", out, "--format", "json"], capsys)
        assert code == 2 and "is an input of this command" in one_line(err), err
    assert req.read_text() == text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
@pytest.mark.parametrize("command", ["plan", "inventory", "db-show", "db-book"])
def test_named_pipe_input_is_refused_up_front(tmp_path, command) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    inventory = str(ROOT / "examples" / "provider" / "inventory.yaml")
    argv = {"plan": ["plan", str(fifo)],
            "inventory": ["capacity", "show", "--inventory", str(fifo), "--db", str(tmp_path / "b.db")],
            # a named pipe as the SQLite store: opening it waited for a writer forever before
            "db-show": ["capacity", "show", "--inventory", inventory, "--db", str(fifo)],
            "db-book": ["capacity", "book", str(EXAMPLE), "--inventory", inventory, "--db", str(fifo),
                        "--earliest"]}[command]
    r = run_cli(*argv, timeout=30)
    assert r.returncode == 2 and "not a regular file" in one_line(r.stderr), r.stderr


@pytest.mark.parametrize("db", ["/dev/null", "folder"])
def test_store_that_is_not_a_regular_file_is_refused(tmp_path, capsys, db) -> None:
    """/dev/null read as an empty store ("0 reservation(s)", exit 0) before; a folder is named as one."""
    path = tmp_path if db == "folder" else db
    code, _, err = run(["capacity", "show", "--inventory", str(ROOT / "examples" / "provider" / "inventory.yaml"),
                        "--db", str(path)], capsys)
    assert code == 2 and ("not a regular file" in one_line(err) or "is a folder" in one_line(err)), err


def test_outputs_are_atomic_with_normal_permissions(tmp_path, capsys) -> None:
    out = tmp_path / "r.md"
    old = os.umask(0o022)
    try:
        code, _, _ = run(["plan", str(EXAMPLE), "-o", str(out)], capsys)
    finally:
        os.umask(old)
    assert code in (0, 1) and stat.S_IMODE(out.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]  # no temporary file left


def test_a_1mb_model_name_is_one_line_and_fast(capsys) -> None:
    t = time.perf_counter()
    code, _, err = run(["infer", "x" * 2**20], capsys)
    line = one_line(err)
    assert code == 2 and len(line) < 2000 and time.perf_counter() - t < 5, (code, len(line))


def test_validate_markdown_onto_a_folder(tmp_path, capsys) -> None:
    code, _, err = run(["validate", "--markdown", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in one_line(err)




# ------------------------------------------------------------------ 4. output hygiene
ESC = "\x1b[31m"


def test_escape_codes_in_a_request_title_are_escaped_on_the_terminal(tmp_path, capsys) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(EXAMPLE.read_text().replace('title: "', 'title: "\\u001b[31m\\u001b]0;owned\\u0007 ', 1))
    code, out, _ = run(["plan", str(req)], capsys)
    assert code in (0, 1) and "\x1b" not in out and "\x07" not in out and "\\x1b[31m" in out


def test_escape_codes_in_a_model_path_are_escaped(tmp_path, capsys) -> None:
    import json
    folder = tmp_path / f"m{ESC}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 2048}))
    code, out, err = run(["infer", str(folder / "config.json")], capsys)
    assert code == 0 and "\x1b" not in out + err and "\\x1b[31m" in out


def test_escape_codes_in_an_error_line_are_escaped(tmp_path, capsys) -> None:
    code, _, err = run(["plan", str(tmp_path / f"no{ESC}.yaml")], capsys)
    assert code == 2 and "\x1b" not in err and "\\x1b[31m" in one_line(err)


def test_markdown_report_escapes_html(tmp_path, capsys) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(EXAMPLE.read_text().replace('title: "', 'title: "<script>alert(1)</script> <img src=x onerror=y> ', 1))
    out = tmp_path / "r.md"
    code, _, _ = run(["plan", str(req), "-o", str(out)], capsys)
    text = out.read_text()
    assert code in (0, 1) and "<script>" not in text and "<img" not in text and "&lt;script&gt;" in text
    assert "<details><summary>Assumptions</summary>" in text  # the report's own tags stay


def test_term_helper_escapes_controls_keeps_text() -> None:
    from llmsizer.render.safe import term
    assert term("a\tb\nc") == "a\tb\nc"
    assert term("x\x1b[31my\r\x9b\u202e") == "x\\x1b[31my\\x0d\\x9b\\u202e"


def test_too_many_jobs_are_refused_fast(tmp_path, capsys) -> None:
    job = ("  - name: j{i}\n    kind: inference\n    model: {{name: qwen2.5-0.5b}}\n"
           "    traffic: {{concurrency: 2, context: 2k}}\n")
    req = tmp_path / "many.yaml"
    req.write_text("version: 1\njobs:\n" + "".join(job.format(i=i) for i in range(5000)))
    t = time.perf_counter()
    code, _, err = run(["plan", str(req)], capsys)
    assert code == 2 and f"{req}:3: jobs: 5,000 jobs is too many" in one_line(err) and time.perf_counter() - t < 10


@pytest.mark.parametrize("line", ["k" * 900_000 + ": 1", "    model: {name: " + "m" * 900_000 + "}",
                                  "    engine: " + "e" * 900_000])
def test_a_huge_key_or_name_in_a_request_is_short_and_fast(tmp_path, line, capsys) -> None:
    text = EXAMPLE.read_text()
    if line.startswith("    "):
        text = text.replace("    engine: llamacpp\n", line + "\n", 1) if "engine" in line else \
            text.replace("    model:\n      name: qwen2.5-1.5b-instruct\n      size: 1.5B\n", line + "\n", 1)
    else:
        text = line + "\n" + text
    req = tmp_path / "big-key.yaml"
    req.write_text(text)
    t = time.perf_counter()
    code, _, err = run(["plan", str(req)], capsys)
    assert code == 2 and time.perf_counter() - t < 10
    assert all(len(ln) < 2000 for ln in err.splitlines()) and "Traceback" not in err, err[:300]


@pytest.mark.parametrize("name, body, fragment", [
    ("hw.yaml", "devices: !!int abc\n", "not valid YAML"),
    ("hw.json", '{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("hw.yaml", "devices: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_hostile_hardware_files_are_one_line(tmp_path, name, body, fragment, capsys) -> None:
    hw = tmp_path / name
    hw.write_text(body)
    code, _, err = run(["plan", str(EXAMPLE), "--hardware-file", str(hw)], capsys)
    assert code == 2 and fragment in one_line(err), err[:300]


MY_GPU = "devices:\n  - {id: my-gpu, name: My GPU, kind: gpu, memory: 24GiB, memory_bandwidth: 1 TB/s}\n"


@pytest.mark.parametrize("old, new, line", [
    # before: a ValueError / OverflowError traceback from Device.memory_bytes when fit read the memory (exit 1)
    ("memory: 24GiB", "memory: .nan", "devices[my-gpu].memory: must be finite, got nan; expected a number in [1, 2^60]"),
    ("memory: 24GiB", "memory: 1e300GiB", "devices[my-gpu].memory: must be finite, got inf; expected a number in "
     "[1, 2^60]"),
    # before: answered 4,388 tokens/s decode from an infinite bandwidth (exit 0)
    ("1 TB/s", ".inf", "devices[my-gpu].memory_bandwidth: must be finite, got inf; expected a number in "
     "[0, 1,000,000,000,000,000] (bytes per second"),
    # before: the line named no file ("memory: 0 is out of range")
    ("memory: 24GiB", "memory: 0", "devices[my-gpu].memory: 0 is out of range; expected a number in [1, 2^60]"),
])
def test_hardware_file_numbers_are_checked_where_they_are_read(tmp_path, old, new, line, capsys) -> None:
    """A hardware file's numbers go through the one number check (numbers.py) in their base unit, named by file
    and field, whichever command reads the file."""
    hw = tmp_path / "hw.yaml"
    hw.write_text(MY_GPU.replace(old, new))
    for argv in (["fit", "llama-3.1-8b", "--device", "my-gpu"], ["hardware", "list"]):
        code, _, err = run([*argv, "--hardware-file", str(hw)], capsys)
        assert code == 2 and one_line(err).startswith(f"llmsizer: error: hardware file {hw}: {line}"), err


def test_every_hardware_quantity_has_its_range() -> None:
    from llmsizer.catalog.hardware import QUANTITY_RANGES, UNIT_TABLES
    assert set(QUANTITY_RANGES) == set(UNIT_TABLES)


def test_a_published_fractional_capacity_is_still_read(tmp_path, capsys) -> None:
    hw = tmp_path / "hw.yaml"
    hw.write_text(MY_GPU.replace("24GiB", "79.65GiB"))
    code, out, _ = run(["fit", "llama-3.1-8b", "--device", "my-gpu", "--hardware-file", str(hw)], capsys)
    assert code == 0 and "79.65 GiB x (1 - 0.1 headroom)" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_named_pipe_hardware_file_is_refused(tmp_path) -> None:
    fifo = tmp_path / "hw.json"
    os.mkfifo(fifo)
    r = run_cli("plan", str(EXAMPLE), "--hardware-file", str(fifo), timeout=30)
    assert r.returncode == 2 and "not a regular file" in one_line(r.stderr), r.stderr


# ------------------------------------------------------------------ engine flags on the wrong engine
@pytest.mark.parametrize("engine, flag, value, owner", [
    ("vllm", "-ngl", "3", "llamacpp"), ("sglang", "-ngl", "3", "llamacpp"), ("transformers", "-ngl", "3", "llamacpp"),
    ("vllm", "--ubatch", "256", "llamacpp"), ("sglang", "--ubatch", "256", "llamacpp"),
    ("vllm", "--mem-fraction-static", "0.5", "sglang"), ("llamacpp", "--mem-fraction-static", "0.5", "sglang"),
    ("sglang", "--gpu-memory-utilization", "0.5", "vllm"), ("llamacpp", "--gpu-memory-utilization", "0.5", "vllm"),
    ("sglang", "--block-size", "32", "vllm"), ("llamacpp", "--block-size", "32", "vllm"),
    ("llamacpp", "--max-num-seqs", "4", "vllm or sglang"), ("transformers", "--max-num-seqs", "4", "vllm or sglang"),
    ("llamacpp", "--max-num-batched-tokens", "1024", "vllm or sglang"),
])
def test_an_engine_flag_on_another_engine_is_refused(engine, flag, value, owner, capsys) -> None:
    """Each of these is read by one engine's profile only (vLLM gpu_memory_utilization, SGLang
    --mem-fraction-static, llama.cpp -ngl / -ub): on another engine the answer silently ignored it (exit 0, the
    same numbers as without it) while --gpus/-ts/--n-cpu-moe on the wrong engine exit 2."""
    code, _, err = run(["infer", "llama-3.1-8b", "--engine", engine, flag, value, "--memory", "24GiB"], capsys)
    named = {"-ngl": "--n-gpu-layers"}.get(flag, flag)  # the long flag, not the Python field (errors.FieldError)
    line = one_line(err)
    assert code == 2 and owner in line and named in line, line


def test_n_cpu_moe_range_error_describes_n_cpu_moe(capsys) -> None:
    code, _, err = run(["infer", "qwen3-30b-a3b", "--engine", "llamacpp", "--n-cpu-moe", "-1"], capsys)
    line = one_line(err)
    assert code == 2 and "--n-cpu-moe" in line and "offloaded to the GPU" not in line and "host" in line, line


@pytest.mark.parametrize("flags, field", [
    (["--gpus", "2"], "--gpus"), (["-ngl", "5"], "--n-gpu-layers"), (["-sm", "row"], "--split-mode"),
    (["--gpus", "2", "-ts", "1,1"], "--gpus, --tensor-split"), (["--n-cpu-moe", "2"], "--n-cpu-moe"),
])
def test_gpu_offload_flags_on_a_cpu_are_refused(flags, field, capsys) -> None:
    """llama.cpp on --device cpu keeps every tensor in host memory: --gpus/-ngl/-sm were ignored (exit 0, the CPU
    answer), and --gpus 2 -ts 1,1 said 'gives 2 shares for one GPU; set gpus' although gpus was set."""
    code, _, err = run(["infer", "qwen3-30b-a3b", "--engine", "llamacpp", "--weights", "q4_k_m", "--device", "cpu",
                        *flags], capsys)
    line = one_line(err)
    assert code == 2 and field in line and "device cpu" in line, line


@pytest.mark.parametrize("argv, flags", [
    (["fit", "llama-3.1-8b", "--device", "h100-sxm", "--method", "lora", "--tokens", "1B"], "--method, --tokens"),
    (["fit", "llama-3.1-8b", "--device", "rtx-3090", "--count", "2", "--engine", "llamacpp", "--gpus", "4"], "--gpus"),
    (["fit", "llama-3.1-8b", "--device", "h100-sxm", "--zero", "3"], "--zero"),
    (["fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "llamacpp", "--auto", "--seq", "4096"], "--seq"),
    (["recommend", "llama-3.1-8b", "--method", "lora", "--batch", "4"], "--method, --batch"),
])
def test_training_flags_without_train_are_refused(argv, flags, capsys) -> None:
    """fit/recommend without --train size serving: a training flag there was ignored (exit 0, a serving answer to
    a question about fine-tuning; `fit --count 2 --gpus 4` split over 2 GPUs) while --tp was refused."""
    code, _, err = run(argv, capsys)
    line = one_line(err)
    assert code == 2 and flags in line and "--train" in line, line


def test_an_unknown_torch_dtype_is_said_to_be_read_as_bf16(tmp_path, capsys) -> None:
    """A config.json whose torch_dtype is none of float32/float16/bfloat16 is sized in bf16; the assumption said only
    "torch_dtype float7", as if that were the format it names."""
    import json

    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
           "torch_dtype": "float7"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, _ = run(["infer", str(path), "--json"], capsys)
    weights = next(a for a in json.loads(out)["assumptions"] if a["name"] == "weights")
    assert code == 0 and weights["value"] == "bf16"
    assert weights["why"] == ("checkpoint's stored format (torch_dtype 'float7' is not float32, float16 or bfloat16: "
                              "bf16 assumed)")

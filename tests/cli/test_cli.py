"""The CLI through its real entry point (a subprocess), as a user runs it."""

import json

from cli_capture import run_cli


def test_infer_json_matches_the_python_api():
    import llmsizer
    r = run_cli("infer", "llama-3.1-8b", "--context", "8192", "--concurrency", "2", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    api = llmsizer.estimate_inference("llama-3.1-8b", context=8192, concurrency=2).to_dict()
    assert data == json.loads(json.dumps(api, default=str))
    assert {i["name"] for i in data["items"]} >= {"weights", "kv_cache", "activations"}
    assert all(a["name"] and "default" in a for a in data["assumptions"])


def test_table_output_names_every_component():
    r = run_cli("infer", "qwen2.5-7b", "--engine", "vllm", "--memory", "24GiB", "--context", "32k")
    assert r.returncode == 0, r.stderr
    for word in ("weights", "kv_cache", "activations", "cuda_graphs", "vLLM admits"):
        assert word in r.stdout


def test_unknown_model_is_one_line_exit_2_with_closest_names():
    r = run_cli("infer", "llama-3.1-8bb")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "llama-3.1-8b" in r.stderr


def test_nonsense_values_are_rejected():
    for args in (["--context", "-5"], ["--concurrency", "0"], ["--weights", "q9_z"], ["--memory", "lots"],
                 ["--engine", "tgi"], ["--kv-dtype", "fp3"]):
        r = run_cli("infer", "llama-3.1-8b", *args)
        assert r.returncode == 2, args
        assert "Traceback" not in r.stderr and r.stderr.strip(), args


def test_malformed_config_json_names_the_file_and_line(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    r = run_cli("inspect", str(bad))
    assert r.returncode == 2
    assert str(bad) in r.stderr and "line 2" in r.stderr


def test_every_command_has_help_with_examples():
    for cmd in ("models", "inspect", "infer"):
        r = run_cli(cmd, "--help")
        assert r.returncode == 0 and "examples" in r.stdout


def test_reverse_questions():
    r = run_cli("infer", "llama-3.1-8b", "--memory", "24GiB", "--max-context", "--max-concurrency", "--json")
    assert r.returncode == 0, r.stderr
    rev = json.loads(r.stdout)["reverse"]
    assert rev["max_context"] > 0 and rev["max_concurrency"] >= 1


def test_largest_context_starts_at_the_stated_output_tokens():
    """A context holds its output tokens (specs/workload.py refuses output > context), so the search for the
    largest context starts there: a stated --output-tokens 256 made the bisection try a context of 128 and exit 2
    with 'output_tokens must be between 0 and context (128), got 256'."""
    too_big = run_cli("infer", "qwen2.5-14b", "--context", "32k", "--concurrency", "8", "--output-tokens", "256",
                      "--memory", "24GiB", "--max-context", "--max-concurrency", "--json")
    assert too_big.returncode == 1, too_big.stderr  # answered: the stated workload does not fit
    assert json.loads(too_big.stdout)["reverse"]["max_context"] == 0
    args = ("infer", "qwen2.5-0.5b", "--memory", "24GiB", "--max-context", "--json")
    free = json.loads(run_cli(*args).stdout)["reverse"]["max_context"]
    with_output = run_cli(*args, "--output-tokens", "256")
    assert with_output.returncode == 0, with_output.stderr
    # output tokens are decoded one at a time, so the prefill (and its activation peak) is shorter: never less fits
    assert json.loads(with_output.stdout)["reverse"]["max_context"] >= free > 256
    text = run_cli("infer", "qwen2.5-14b", "--concurrency", "8", "--output-tokens", "256", "--memory", "2GiB",
                   "--max-context").stdout
    assert "no context fits: even 256 token(s)" in text

"""probe7's defects: what a surface says *about* a number follows the verdict's basis, the same on every surface.

Truths, each apart from llmsizer's wording:
- vLLM's window for Llama-3.1-8B is its config's max_position_embeddings, 131,072 (rope_type llama3 is not scaled by
  vLLM's _get_and_verify_max_len); a context of 200k = 204,800 tokens is past it, so vLLM refuses to start whatever
  the memory (its 45.9 GiB need is under the 72.4 GiB an H100's pool offers): the binding constraint is the window,
  and its remedy a context within it or the override, never more devices or a smaller format.
- llama.cpp's auto-fit chooses at the expected need; where the high end of the range of the GPU it fills most is
  past the budget (fit's ``memory_high_per_device`` > ``budget_per_device``), fit with the same flags warns it.
- Nielsen (1993, sec. 5.5): a first token after more than 10 s is past a user's attention.
- 24 GB = 24e9 bytes = 22.35 GiB; 24 GiB = 24 x 2^30 bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cli_capture import run, run_json
from llmsizer.models import load_model

MODEL = "llama-3.1-8b"
INVENTORY = """\
version: 1
provider: test
sites:
  - {id: s1, operator: provider, jurisdiction: DE}
nodes:
  - {id: h, site: s1, device: h100-sxm, devices: 8, cpus: 64, ram: 1 TiB, pools: [serving]}
storage:
  - {id: st, site: s1, capacity: 100 TB}
"""


def _window() -> int:
    window = load_model(MODEL).max_position_embeddings
    assert window == 131072  # the premise: Llama-3.1's config
    return window


def _check(tmp_path: Path, req: Path) -> tuple[int, dict]:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    code, checks = run_json("capacity", "check", str(req), "--inventory", str(tmp_path / "inv.yaml"), "--no-db",
                            "--now", "2026-12-01")
    (c,) = checks["jobs"]
    return code, c


def test_capacity_binds_on_the_window_not_memory(tmp_path: Path, window_request: Callable[..., Path]) -> None:
    window = _window()
    code, c = _check(tmp_path, window_request("200k"))
    assert code == 1 and not c["fits"]
    assert c["binding"] == "context window", c
    assert f"{window:,} tokens or less" in c["reason"] and "engine_settings.allow_long_context" in c["reason"]
    assert "does not hold the job" not in c["reason"]
    # the control: within the window the same job fits the same devices (so memory was never the constraint)
    code, c = _check(tmp_path, window_request("128k"))
    assert code == 0 and c["fits"], c


def test_plan_and_fit_advise_the_window(window_request: Callable[..., Path]) -> None:
    window = _window()
    code, plan = run_json("plan", str(window_request("200k")))
    assert code == 1
    (err,) = [c for c in plan["checks"] if c["id"] == "service-does-not-fit"]
    assert f"{window:,} tokens or less" in err["advice"] and "allow_long_context" in err["advice"]
    assert "weight format" not in err["advice"] and "more devices" not in err["advice"]
    code, out, _ = run("fit", MODEL, "--device", "h100-sxm", "--engine", "vllm", "--context", "200k")
    assert code == 1
    assert "memory permitting" not in out and f"past the model's window {window:,}" in out


def test_auto_fit_warns_as_the_plain_fit_of_its_flags() -> None:
    base = ("llama-3.3-70b-instruct", "--device", "rtx-3090", "--count", "2", "--engine", "llama.cpp",
            "--weights", "q4_k_m")
    code, auto = run_json("fit", *base, "--auto")
    assert code == 0 and auto["fits"]
    code, plain = run_json("fit", *base, "--context", str(auto["context"]), "-ngl", str(auto["n_gpu_layers"]),
                           "-sm", "layer", "-ts", ",".join(map(str, auto["tensor_split"])))
    assert plain["fits"]
    # the premise: the high end of the fullest GPU is past its budget, the expected need within it
    assert plain["memory_per_device"] <= plain["budget_per_device"] < plain["memory_high_per_device"]
    high = [w for w in plain["warnings"] if "not at the high end" in w]
    assert high and set(high) <= set(auto["warnings"]), (high, auto["warnings"])


def test_first_token_past_ten_seconds_is_warned_everywhere(window_request: Callable[..., Path]) -> None:
    code, f = run_json("fit", "llama-3.2-3b", "--device", "aws-m7i.2xlarge", "--context", "4096", "--concurrency",
                       "2")
    assert code == 0 and f["speed"]["ttft_seconds"] > 10  # the premise (a CPU's prefill of 4k tokens)
    assert [w for w in f["warnings"] if "Nielsen 1993" in w]
    code, quick = run_json("fit", "llama-3.2-3b", "--device", "h100-sxm", "--context", "4096", "--concurrency", "2")
    assert quick["speed"]["ttft_seconds"] < 10 and not [w for w in quick["warnings"] if "Nielsen 1993" in w]
    code, auto = run_json("fit", "llama-3.3-70b-instruct", "--device", "rtx-3090", "--count", "2", "--engine",
                          "llama.cpp", "--weights", "q4_k_m", "--auto")
    assert [w for w in auto["warnings"] if "Nielsen 1993" in w]
    code, plan = run_json("plan", str(window_request("120k", conc=3)))  # no latency limit in the request
    (job,) = plan["jobs"]
    assert job["speed_estimate"]["ttft_seconds"] > 10  # the premise
    assert [c for c in plan["checks"] if c["id"] == "slow-first-token"]
    code, rec = run_json("recommend", "llama-3.2-3b", "--context", "4096", "--concurrency", "2", "--provider", "aws",
                         "--user-tokens-per-second", "1", "--max-cost-per-hour", "0.45")
    assert len([w for w in rec["warnings"] if "Nielsen 1993" in w]) == 1  # said once, fit's of the choice


def test_decimal_gigabytes_are_named(window_request: Callable[..., Path]) -> None:
    gib = 24e9 / 2**30
    code, out, _ = run("infer", MODEL, "--memory", "24GB")
    assert f"24 GB = {gib:.2f} GiB" in out and "did you mean 24GiB?" in out
    code, out, _ = run("infer", MODEL, "--memory", "24GiB")
    assert "did you mean 24GiB" not in out
    code, plan = run_json("plan", str(window_request("32k", device="gpu", memory="24 GB")))
    (job,) = plan["jobs"]
    assert [w for w in job["warnings"] if f"24 GB = {gib:.2f} GiB" in w]


def test_no_catalog_device_is_a_whole_number_of_gb() -> None:
    """The decimal-GB warning reads the number alone: no catalog device may trip it."""
    from llmsizer.catalog.hardware import load_catalog
    assert not [d.id for d in load_catalog(()).devices.values()
                if d.memory_bytes and int(d.memory_bytes) % 10**9 == 0]


def test_running_sequences_derived_and_singular(window_request: Callable[..., Path]) -> None:
    code, out, _ = run("infer", MODEL, "--engine", "vllm", "--weights", "fp8", "--device", "h100-sxm", "--context",
                       "32768", "--concurrency", "16")
    assert "running_sequences=" in out
    assert "running_sequences=14 (default)" not in out and "(derived)" in out.split("running_sequences=")[1][:20]
    code, out, _ = run("plan", str(window_request("200k")))
    assert "runs 1 sequence at once" in out and "runs 1 sequences" not in out

"""SGLang's --max-mamba-cache-size and --mamba-full-memory-ratio (issue #16), against SGLang 0.5.23's own rules (the
PyPI wheel, as tests/estimate/test_sglang_mamba.py):

- sglang/srt/arg_groups/fields/schedule.py:216-227: ``max_mamba_cache_size`` Optional[int] (unset), and
  ``mamba_full_memory_ratio`` Optional[float] with fallback 0.9;
- sglang/srt/mem_cache/kv_cache_configurator.py _handle_max_mamba_cache (no speculative decoding): a stated
  max_mamba_cache_size K is taken as it is (:3303-3307) and the ratio is not read; otherwise
  ``K = int((rest x r / (1 + r) - per_req) // per_req)`` (:3346-3386); the token pool gets
  ``rest - (K + 1) x per_req`` (+1 padding slot, :3404-3409); resolve_max_num_reqs (:3119-3150):
  ``max_running_requests = min(min(max(min(tokens / context_len x 512, 4096), 2048), tokens // 2), K // s)``,
  s = 3 + get_mamba_tracking_slots (_calculate_mamba_ratio :3062-3088, mem_cache/allocation_sizing.py:11-19): 5 for
  Qwen3-Next and Nemotron-H, whose "auto" strategy is extra_buffer with the overlap scheduler (arg_groups/
  overrides.py:403-433, 453-487), 3 with --mamba-radix-cache-strategy no_buffer, 4 with extra_buffer_lazy;
- sglang/srt/configs/mamba_utils.py:47-125, :225, :276: conv state [conv_dim, conv_kernel - 1] in bf16, SSM state
  float32, times the recurrent layers (mamba_cache_per_req).

Expected values are worked out here from those rules and the models' config.json numbers; only the weights' bytes,
SGLang's default mem_fraction_static (its own test: tests/estimate/test_sglang.py) and the CUDA context (500 MiB) are
taken from the estimate, as inputs. Every surface (Python, CLI, request file, web) gives the same numbers and refuses
the same bad values with one line.
"""

from __future__ import annotations

import json

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.units import GiB

H200 = 141 * GiB
EXTRA_BUFFER_SLOTS = 3 + 2  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + get_mamba_tracking_slots(True, overlap=True)
QWEN = "qwen3-next-80b-a3b-thinking"
NEMOTRON = "nemotron-h-56b-base-8k"


def _qwen3_next_per_req() -> int:
    # Qwen3-Next-80B-A3B config.json: 48 layers, full_attention_interval 4 -> 36 Gated DeltaNet layers;
    # linear_num_key_heads 16, linear_key_head_dim 128, linear_num_value_heads 32, linear_value_head_dim 128,
    # linear_conv_kernel_dim 4. conv_dim = 2 x 16 x 128 + 32 x 128 = 8192 (qwen3_next.py hybrid_gdn_params)
    return (8192 * (4 - 1) * 2 + 32 * 128 * 128 * 4) * 36  # bf16 conv + float32 SSM state, per layer


def _nemotron_h_56b_per_req() -> int:
    # Nemotron-H-56B-Base-8K config.json: 54 'M' (Mamba-2) layers, 10 '*' (attention) layers; mamba_num_heads 256,
    # mamba_head_dim 64, ssm_state_size 256, n_groups 8, conv_kernel 4: conv_dim = 256 x 64 + 2 x 8 x 256 = 20480
    return (20480 * (4 - 1) * 2 + 256 * 64 * 256 * 4) * 54


# (model, mamba_cache_per_req, KV cell of the full-attention layers [B/token], the model's context_len)
MODELS = [
    (QWEN, _qwen3_next_per_req(), 12 * 2 * 512 * 2, 262144),  # 12 layers x 2 kv heads x (256 + 256) x bf16
    (NEMOTRON, _nemotron_h_56b_per_req(), 10 * 8 * 256 * 2, 8192),  # 10 layers x 8 kv heads x (128 + 128) x bf16
]


def _by_hand(model: str, per_req: int, cell: int, context_len: int, **setting):  # type: ignore[no-untyped-def]
    """The estimate with ``setting`` and SGLang's numbers for it, by the rules of the module docstring."""
    est = llmsizer.estimate_inference(model, engine="sglang", memory=H200, context=4096, weights="fp8", **setting)
    rest = int(est.details["mem_fraction_static"] * (H200 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    if "max_mamba_cache_size" in setting:
        slots = setting["max_mamba_cache_size"]
    else:
        r = setting.get("mamba_full_memory_ratio", 0.9)
        slots = int((rest * r / (1 + r) - per_req) // per_req)
    tokens = (rest - (slots + 1) * per_req) // cell
    running = min(max(min(int(tokens / context_len * 512), 4096), 2048), tokens // 2, slots // EXTRA_BUFFER_SLOTS)
    return est, slots, tokens, running


@pytest.mark.parametrize("model, per_req, cell, context_len", MODELS)
@pytest.mark.parametrize("ratio", [0.25, 2.0])
def test_mamba_full_memory_ratio_splits_the_rest_by_r_over_1_plus_r(model, per_req, cell, context_len, ratio):
    est, slots, tokens, running = _by_hand(model, per_req, cell, context_len, mamba_full_memory_ratio=ratio)
    default, *_ = _by_hand(model, per_req, cell, context_len)
    d = est.details
    assert d["mamba_cache_per_req"] == per_req and d["max_mamba_cache_size"] == slots > 0
    assert est.item("recurrent_state_pool").bytes == (slots + 1) * per_req
    assert d["max_total_num_tokens"] == tokens and d["max_running_requests"] == running
    # a larger r, a larger state pool and fewer tokens than SGLang's 0.9 (and the other way round)
    assert (d["max_mamba_cache_size"] > default.details["max_mamba_cache_size"]) == (ratio > 0.9)
    names = {a.name: a for a in est.assumptions}
    assert names["mamba_full_memory_ratio"].value == ratio and names["mamba_full_memory_ratio"].default is False
    assert (
        names["max_mamba_cache_size"].value == slots
        and f"mamba_full_memory_ratio {ratio} (given)" in names["max_mamba_cache_size"].why
    )
    formula = est.item("recurrent_state_pool").formula
    assert f"max_mamba_cache_size {slots:,} = int((rest " in formula and f"x {ratio} / (1 + {ratio})" in formula
    assert f"mamba_cache_per_req {per_req:,} B" in formula


@pytest.mark.parametrize("model, per_req, cell, context_len", MODELS)
@pytest.mark.parametrize("size", [9, 30])
def test_max_mamba_cache_size_replaces_the_split(model, per_req, cell, context_len, size):
    est, slots, tokens, running = _by_hand(model, per_req, cell, context_len, max_mamba_cache_size=size)
    d = est.details
    assert d["max_mamba_cache_size"] == slots == size
    assert est.item("recurrent_state_pool").bytes == (size + 1) * per_req
    assert d["max_total_num_tokens"] == tokens and d["max_running_requests"] == running == size // EXTRA_BUFFER_SLOTS  # the cap
    names = {a.name: a for a in est.assumptions}
    assert names["max_mamba_cache_size"].value == size and names["max_mamba_cache_size"].default is False
    assert "mamba_full_memory_ratio" not in names  # not read when the size is stated (:3303-3307)
    assert (
        f"(max_mamba_cache_size {size:,} (given) + 1 padding slot) x mamba_cache_per_req {per_req:,} B"
        in est.item("recurrent_state_pool").formula
    )


def test_defaults_are_named_as_sglangs():
    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, weights="fp8")
    names = {a.name: a for a in est.assumptions}
    assert names["mamba_full_memory_ratio"].value == 0.9 and names["mamba_full_memory_ratio"].default is True
    assert "mamba_full_memory_ratio 0.9 (SGLang's default)" in names["max_mamba_cache_size"].why


def test_a_size_whose_pool_leaves_no_token_pool_does_not_fit():
    """K = 1000 slots of Qwen3-Next's 77,266,944 B state are 77 GB, more than the ~56 GB left after the weights:
    SGLang stops ("Loaded weights leave no GPU memory for the KV cache", kv_cache_configurator.py:3039-3058)."""
    per_req = _qwen3_next_per_req()
    est = llmsizer.estimate_inference(
        QWEN, engine="sglang", memory=H200, context=4096, weights="fp8", max_mamba_cache_size=1000
    )
    rest = int(est.details["mem_fraction_static"] * (H200 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    assert 1001 * per_req > rest
    assert est.details["max_total_num_tokens"] == 0 and est.details["fits"] is False
    assert "lower max_mamba_cache_size" in est.details["sglang_no_pool"]  # the field: a request file gives no flag


# ------------------------------------------------------------------ one answer on every surface


def _request(settings: str, model: str = QWEN) -> str:
    return (
        f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n"
        f"    quantization: fp8\n    engine: sglang\n    engine_settings: {{{settings}}}\n"
        "    traffic:\n      concurrency: {typical: 1, peak: 1}\n      context: {typical: 4k, peak: 4k}\n"
        "      output: {typical: 256, peak: 256}\n    resources: {device: h200, count: 1}\n"
    )


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("max_mamba_cache_size", 150, "--max-mamba-cache-size"),
        ("mamba_full_memory_ratio", 2.0, "--mamba-full-memory-ratio"),
    ],
)
def test_python_cli_and_request_file_give_the_same_numbers(field, value, flag):
    from llmsizer.estimate.fit import fit
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, weights="fp8", **{field: value})
    out = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights", "fp8",
        flag, str(value), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)["details"]
    for key in ("max_mamba_cache_size", "max_total_num_tokens", "max_running_requests", "kv_pool_bytes"):
        assert d[key] == est.details[key], key
    # the request file's engine_settings = fit's keyword = fit's flag, on one H200
    r = fit(
        QWEN,
        "h200",
        1,
        engine="sglang",
        weights="fp8",
        context=4096,
        concurrency=1,
        output_tokens=256,
        **{field: value},
    )
    plain = fit(QWEN, "h200", 1, engine="sglang", weights="fp8", context=4096, concurrency=1, output_tokens=256)
    assert r.estimate is not None and plain.estimate is not None
    assert r.estimate.details["max_mamba_cache_size"] != plain.estimate.details["max_mamba_cache_size"]
    job = make_plan(parse_request(_request(f"{field}: {value}"), source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]
    out = run_cli(
        "fit",
        QWEN,
        "--device",
        "h200",
        "--engine",
        "sglang",
        "--weights",
        "fp8",
        "--context",
        "4k",
        "--output-tokens",
        "256",
        flag,
        str(value),
        "--json",
    )
    assert out.returncode == 0, out.stderr
    fd = json.loads(out.stdout)["memory"]["details"]
    assert fd["max_mamba_cache_size"] == r.estimate.details["max_mamba_cache_size"]
    assert fd["workload_bytes"] == job.section("memory").value("need_peak")


BAD = [  # (field, value, CLI flag, fragment of the one line every surface gives)
    ("max_mamba_cache_size", -3, "--max-mamba-cache-size", "-3 is out of range"),
    ("max_mamba_cache_size", 0, "--max-mamba-cache-size", "0 is out of range"),
    ("max_mamba_cache_size", "many", "--max-mamba-cache-size", "cannot read 'many'"),
    ("mamba_full_memory_ratio", 0, "--mamba-full-memory-ratio", "0 is out of range"),
    ("mamba_full_memory_ratio", -0.5, "--mamba-full-memory-ratio", "-0.5 is out of range"),
    ("mamba_full_memory_ratio", "lots", "--mamba-full-memory-ratio", "cannot read 'lots'"),
]


@pytest.mark.parametrize("field, value, flag, fragment", BAD)
def test_bad_values_are_one_line_on_every_surface(field, value, flag, fragment):
    from llmsizer.request import RequestError, parse_request

    done = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", flag, str(value))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert fragment in done.stderr and flag in done.stderr
    with pytest.raises(InputError, match=field) as e:
        llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, **{field: value})
    assert fragment in str(e.value)
    with pytest.raises(RequestError) as r:
        parse_request(_request(f"{field}: {value}"), source="t.yaml")
    (err,) = r.value.errors  # the request reader's own wording of a word where a number goes ("must be a number")
    assert err.startswith(f"t.yaml:8: job 'chat' (inference): engine_settings.{field}: "), err
    assert (fragment in err) if not isinstance(value, str) else (f"'{value}'" in err), err


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("max_mamba_cache_size", 150, "--max-mamba-cache-size"),
        ("mamba_full_memory_ratio", 2.0, "--mamba-full-memory-ratio"),
    ],
)
def test_other_engines_and_models_without_recurrent_layers_are_refused(field, value, flag):
    """Engine-specific, as --mem-fraction-static (specs/workload.py ENGINE_SETTINGS); on a model without recurrent
    layers refused as --n-cpu-moe on a model without experts (estimate/inference/llamacpp.py), not ignored."""
    from llmsizer.request import RequestError, parse_request

    done = run_cli("infer", QWEN, "--engine", "vllm", "--memory", "141GiB", flag, str(value))
    assert done.returncode == 2 and f"{flag} applies to engine sglang, not vllm" in done.stderr, done.stderr
    with pytest.raises(RequestError) as r:
        parse_request(_request(f"{field}: {value}").replace("engine: sglang", "engine: vllm"), source="t.yaml")
    assert "applies to engine sglang, not vllm" in r.value.errors[0]
    with pytest.raises(InputError, match=f"^{field} applies to SGLang's recurrent-state pool"):
        llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", memory=H200, **{field: value})
    done = run_cli("infer", "llama-3.1-8b", "--engine", "sglang", flag, str(value))  # without --memory too
    assert done.returncode == 2 and "has no recurrent (Mamba / linear-attention) layers" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_both_given_is_refused():
    """SGLang reads the ratio only when no size is stated (kv_cache_configurator.py:3303-3386)."""
    with pytest.raises(InputError, match="mamba_full_memory_ratio is not read when max_mamba_cache_size is given"):
        llmsizer.estimate_inference(
            QWEN, engine="sglang", memory=H200, max_mamba_cache_size=150, mamba_full_memory_ratio=2
        )
    done = run_cli(
        "infer", QWEN, "--engine", "sglang", "--max-mamba-cache-size", "150", "--mamba-full-memory-ratio", "2"
    )
    assert done.returncode == 2 and "--mamba-full-memory-ratio is not read when --max-mamba-cache-size" in done.stderr


def test_python_reads_the_ratio_as_text_as_the_flag_does():
    """A Python caller's mamba_full_memory_ratio="0.25" is the flag's 0.25 (it was read as a count: 0)."""
    as_text = llmsizer.estimate_inference(
        QWEN, engine="sglang", memory=H200, weights="fp8", mamba_full_memory_ratio="0.25"
    )
    as_number = llmsizer.estimate_inference(
        QWEN, engine="sglang", memory=H200, weights="fp8", mamba_full_memory_ratio=0.25
    )
    assert as_text.details["max_mamba_cache_size"] == as_number.details["max_mamba_cache_size"] > 0


@pytest.mark.parametrize("size", [1, 4])
def test_a_size_below_the_requests_ratio_runs_nothing_and_is_refused(size):
    """kv_cache_configurator.py:3135-3150 (sglang 0.5.23): max_running_requests <= max_mamba_cache_size // s, s = 5
    for Qwen3-Next by default (3 + the extra buffer's 2 tracking slots, :3062-3088), so a stated size of 1 to 4 runs
    no request on any memory: bad input, not 'does not fit; more memory or a smaller format' (review). Under
    no_buffer (s = 3; with the overlap scheduler off, which is also what makes SGLang's auto no_buffer) a size of 3
    or 4 runs one."""
    assert size // EXTRA_BUFFER_SLOTS == 0
    with pytest.raises(InputError, match=r"max_mamba_cache_size \d runs no request.*give at least 5"):
        llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, weights="fp8", max_mamba_cache_size=size)
    out = run_cli("fit", QWEN, "--device", "h200", "--engine", "sglang", "--weights", "fp8",
                  "--max-mamba-cache-size", str(size))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "--max-mamba-cache-size" in out.stderr and "give at least 5" in out.stderr
    # review25 D8: a size that no_buffer's 3 slots run (checked below) says so; one below 3 does not offer it
    offer = "or --disable-overlap-schedule (no_buffer), which runs with 3"
    assert (offer in out.stderr) == (size >= 3), out.stderr
    ok = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, weights="fp8", max_mamba_cache_size=5)
    assert ok.details["max_running_requests"] == 1  # 5 // 5
    # (an explicit no_buffer needs the overlap scheduler off for Qwen3-Next: mamba_hook.py:156-160)
    no_buffer = dict(engine="sglang", memory=H200, weights="fp8", mamba_radix_cache_strategy="no_buffer",
                     disable_overlap_schedule=True)
    if size < 3:
        with pytest.raises(InputError, match="give at least 3"):
            llmsizer.estimate_inference(QWEN, max_mamba_cache_size=size, **no_buffer)
    else:
        assert llmsizer.estimate_inference(QWEN, max_mamba_cache_size=size,
                                           **no_buffer).details["max_running_requests"] == size // 3 == 1

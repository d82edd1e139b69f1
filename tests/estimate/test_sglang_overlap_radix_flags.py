"""SGLang's --disable-overlap-schedule and --disable-radix-cache (issue #16) as llmsizer's settings
``disable_overlap_schedule`` / ``disable_radix_cache``, against SGLang 0.5.23's own code (the PyPI wheel, tag v0.5.23,
whose sglang/_version.py records no commit id; file:line of that release, under sglang/srt/):

- arg_groups/fields/schedule.py:193-199 ``disable_overlap_schedule`` default False; arg_groups/fields/memory.py:64-70
  ``disable_radix_cache`` default False.
- arg_groups/overrides.py:453-487 ``_mamba_radix_cache_resolution``: only for an architecture in
  _MAMBA_RADIX_CACHE_ARCHS (:369-400; Qwen3NextForCausalLM :376, NemotronHForCausalLM :388; Mamba2ForCausalLM is not
  there); with the radix cache disabled it returns nothing (:473-474: no strategy resolved, uses_mamba_radix_cache
  stays False); "auto" becomes "extra_buffer" when the overlap scheduler is on and the architecture is in
  _MAMBA_EXTRA_BUFFER_ARCHS (:403-433, with linear_attn_backend triton :438-450), else "no_buffer" with the overlap
  scheduler turned off (:484-486).
- arg_groups/model_override_base.py:260-265 ``mamba_extra_buffer_of``: the radix cache on and the strategy
  extra_buffer or extra_buffer_lazy (exec_.py:472-479 enable_mamba_extra_buffer is this).
- arg_groups/model_hook.py:1048-1076 ``handle_mamba_radix_cache``: outside the branch (uses_mamba_radix_cache False)
  nothing is validated unless an extra buffer is asked for; inside, validate_mamba_no_buffer for no_buffer
  (arg_groups/mamba_hook.py:156-160: ``assert view.disable_overlap_schedule``, "no_buffer do not support overlap
  schedule").
- mem_cache/kv_cache_configurator.py:3062-3088 ``_calculate_mamba_ratio``: 1 with the radix cache disabled
  (:3063-3064); else 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO) + get_mamba_tracking_slots
  (mem_cache/allocation_sizing.py:11-19: 0 without an extra buffer, 1 lazy, else 2 with the overlap scheduler and 1
  without) when the extra buffer is on; an extra buffer that is lazy with the overlap scheduler off fails its assert
  (:3073-3076, "Lazy extra buffer requires overlap schedule").
- :3119-3150 ``resolve_max_num_reqs``: max_running_requests = min(min(eq. 4, tokens // 2), max_mamba_cache_size //
  ratio).
- :3325-3335 ``_handle_max_mamba_cache``: with the radix cache disabled and --max-running-requests M given (no
  --max-mamba-cache-size) max_mamba_cache_size = max(1, M) (attention DP 1), the ratio split not read; the pool is
  (K + 1) x mamba_cache_per_req (:3404-3409) and the token pool takes the rest.

``_sglang_ratio`` below transcribes those lines (the independent truth of the resolution table); the memory split is
worked out by hand from Qwen3-Next's config.json numbers, with only the weights' bytes, mem_fraction_static
(tests/estimate/test_sglang.py) and the CUDA context taken from the estimate as inputs.
"""

from __future__ import annotations

import itertools
import json

import pytest
from tests.estimate.test_sglang_mamba_strategy import _request  # one Qwen3-Next SGLang request file

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.estimate.inference.sglang import mamba_radix_cache_strategy, mamba_state_slots
from llmsizer.models import load_model
from llmsizer.units import GiB

H200 = 141 * GiB
QWEN = "qwen3-next-80b-a3b-thinking"  # Qwen3NextForCausalLM: in both architecture lists
CODESTRAL = "mamba-codestral-7b-v0.1"  # Mamba2ForCausalLM: in neither
STRATEGIES = (None, "no_buffer", "extra_buffer", "extra_buffer_lazy")  # None: SGLang's "auto"


class Refused(Exception):
    """SGLang stops at start (a ValueError or a failed assert)."""


def _sglang_ratio(in_branch: bool, extra_buffer_arch: bool, strategy: str | None, disable_overlap: bool,
                  disable_radix: bool) -> tuple[str, int]:
    """(the strategy SGLang 0.5.23 runs, _calculate_mamba_ratio), transcribed from the lines in the module docstring;
    Refused where it stops at start. page_size 1, linear_attn_backend triton, no speculative decoding, the
    SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK default (False, environ.py:1637)."""
    strategy = strategy or "auto"
    uses_radix_branch = False
    if in_branch and not disable_radix:  # overrides.py:461-487
        uses_radix_branch = True
        if strategy == "auto":
            if not disable_overlap and extra_buffer_arch:
                strategy = "extra_buffer"
            else:
                strategy, disable_overlap = "no_buffer", True
    extra = not disable_radix and strategy in ("extra_buffer", "extra_buffer_lazy")  # model_override_base.py:260-265
    if not uses_radix_branch:  # model_hook.py:1059-1067
        if extra:
            raise Refused("needs mamba state")
    elif extra:  # mamba_hook.py:115-120
        if not extra_buffer_arch:
            raise Refused("extra_buffer is not supported")
    elif not disable_overlap:  # mamba_hook.py:156-160
        raise Refused("no_buffer do not support overlap schedule")
    if disable_radix:  # kv_cache_configurator.py:3063-3064
        return strategy, 1
    tracking = 0
    if extra:
        lazy = strategy == "extra_buffer_lazy"
        if disable_overlap and lazy:  # :3073-3076
            raise Refused("Lazy extra buffer requires overlap schedule")
        tracking = 1 if lazy else (2 if not disable_overlap else 1)  # allocation_sizing.py:15-19
    return strategy, 3 + tracking


# the resolution table for Qwen3-Next (in both lists), read off the lines above: (strategy, overlap off, radix off)
# -> (strategy, state slots per running request) or the refusal's words
QWEN_TABLE = {
    (None, False, False): ("extra_buffer", 5),  # auto: the extra buffer with the overlap scheduler, 3 + 2
    (None, True, False): ("no_buffer", 3),  # auto with the overlap scheduler off: no_buffer (:484-486)
    ("no_buffer", False, False): "needs disable_overlap_schedule",  # mamba_hook.py:156-160
    ("no_buffer", True, False): ("no_buffer", 3),
    ("extra_buffer", False, False): ("extra_buffer", 5),
    ("extra_buffer", True, False): ("extra_buffer", 4),  # 3 + 1 tracking slot without the overlap scheduler
    ("extra_buffer_lazy", False, False): ("extra_buffer_lazy", 4),
    ("extra_buffer_lazy", True, False): "needs the overlap scheduler",  # :3073-3076
    (None, False, True): ("none", 1),  # no radix cache: ratio 1 (:3063-3064)
    (None, True, True): ("none", 1),
}


@pytest.mark.parametrize(("key", "expected"), QWEN_TABLE.items())
def test_qwen3_next_resolution_table(key, expected) -> None:
    strategy, overlap_off, radix_off = key
    spec = load_model(QWEN)
    try:
        truth = _sglang_ratio(True, True, strategy, overlap_off, radix_off)
    except Refused:
        truth = None
    if isinstance(expected, str):
        assert truth is None
        with pytest.raises(InputError, match=expected):
            mamba_radix_cache_strategy(spec, strategy, not overlap_off, not radix_off)
        return
    assert truth is not None and (expected[1] == truth[1])
    got = mamba_radix_cache_strategy(spec, strategy, not overlap_off, not radix_off)[0]
    assert got == expected[0] and (radix_off or got == truth[0])  # (SGLang leaves "auto" unresolved: "none" here)
    assert mamba_state_slots(got, not overlap_off, not radix_off) == expected[1]


@pytest.mark.parametrize(("model", "in_lists"), [(QWEN, True), (CODESTRAL, False)])
@pytest.mark.parametrize(("strategy", "overlap_off"), list(itertools.product(STRATEGIES, (False, True))))
def test_every_combination_with_the_radix_cache_on_matches_sglangs_code(model, in_lists, strategy,
                                                                           overlap_off) -> None:
    spec = load_model(model)
    try:
        truth = _sglang_ratio(in_lists, in_lists, strategy, overlap_off, False)
    except Refused:
        with pytest.raises(InputError):
            mamba_radix_cache_strategy(spec, strategy, not overlap_off)
        return
    got = mamba_radix_cache_strategy(spec, strategy, not overlap_off)[0]
    # (a model outside the branch keeps "auto", which llmsizer names no_buffer: no extra buffer either way)
    assert got == (truth[0] if truth[0] != "auto" else "no_buffer")
    assert mamba_state_slots(got, not overlap_off) == truth[1]


def _qwen3_next_per_req() -> int:
    # Qwen3-Next-80B-A3B config.json: 36 Gated DeltaNet layers (48, full_attention_interval 4); conv_dim =
    # 2 x 16 x 128 + 32 x 128 = 8192, conv kernel 4 (bf16); SSM [32 value heads, 128, 128] float32
    return (8192 * (4 - 1) * 2 + 32 * 128 * 128 * 4) * 36


CELL = 12 * 2 * (256 + 256) * 2  # the 12 full-attention layers, 2 KV heads, head_dim 256, bf16 [B/token]
CONTEXT_LEN = 262144  # max_position_embeddings


def _settings(strategy: str | None, overlap_off: bool, radix_off: bool) -> dict:
    out: dict = {} if strategy is None else {"mamba_radix_cache_strategy": strategy}
    return {**out, **({"disable_overlap_schedule": True} if overlap_off else {}),
            **({"disable_radix_cache": True} if radix_off else {})}


ACCEPTED = [k for k, v in QWEN_TABLE.items() if not isinstance(v, str)]


@pytest.mark.parametrize(("strategy", "overlap_off", "radix_off"), ACCEPTED)
def test_qwen3_next_on_h200_runs_the_pools_slots_over_the_ratio(strategy, overlap_off, radix_off) -> None:
    """Whole estimate, Qwen3-Next fp8 on 141 GiB (an H200): the running requests under each accepted combination are
    max_mamba_cache_size // ratio, K split from the pool by hand (eq. 2b, r = 0.9) and the ratio SGLang's."""
    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, concurrency=512,
                                      weights="fp8", **_settings(strategy, overlap_off, radix_off))
    d, per_req = est.details, _qwen3_next_per_req()
    rest = int(d["mem_fraction_static"] * (H200 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    k = int((rest * 0.9 / 1.9 - per_req) // per_req)
    tokens = (rest - (k + 1) * per_req) // CELL
    eq4 = min(max(min(int(tokens / CONTEXT_LEN * 512), 4096), 2048), tokens // 2)
    ratio = _sglang_ratio(True, True, strategy, overlap_off, radix_off)[1]
    assert d["mamba_cache_per_req"] == per_req and d["max_mamba_cache_size"] == k and d["max_total_num_tokens"] == tokens
    assert est.item("recurrent_state_pool").bytes == (k + 1) * per_req  # the same split under every combination
    assert d["mamba_requests_ratio"] == ratio
    assert d["max_running_requests"] == min(eq4, k // ratio) == k // ratio  # the MambaPool's room binds here
    # 512 asked: the pools' room runs (the token pool's 4096-token sequences bind below the MambaPool's at ratio 1)
    assert d["admitted_sequences"] == d["running_sequences"] == min(k // ratio, tokens // 4096)
    names = {a.name: a for a in est.assumptions}
    assert (names["radix_cache"].value == "off") == radix_off
    assert ("overlap_schedule" in names) == overlap_off


def test_without_the_radix_cache_the_pool_is_the_running_requests_given() -> None:
    """eq. (2b''): K = max(1, M) with --max-running-requests M (kv_cache_configurator.py:3325-3335), the rest of eq.
    (2)'s memory the token pool's; ratio 1, so M run."""
    m, per_req = 100, _qwen3_next_per_req()
    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, concurrency=100,
                                      weights="fp8", disable_radix_cache=True, max_num_seqs=m)
    d = est.details
    rest = int(d["mem_fraction_static"] * (H200 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    tokens = (rest - (m + 1) * per_req) // CELL
    assert d["max_mamba_cache_size"] == m and est.item("recurrent_state_pool").bytes == (m + 1) * per_req
    assert d["max_total_num_tokens"] == tokens and d["mamba_requests_ratio"] == 1
    assert d["max_running_requests"] == min(m, tokens // 2) == m and d["fits"] is True
    a = {x.name: x for x in est.assumptions}["max_mamba_cache_size"]
    assert a.value == m and "3325-3335" in a.why
    # without --max-running-requests the ratio split stays (:3346-3386): the same K as with the radix cache on
    plain = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, weights="fp8")
    off = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, weights="fp8",
                                      disable_radix_cache=True)
    assert off.details["max_mamba_cache_size"] == plain.details["max_mamba_cache_size"]
    assert off.details["max_running_requests"] == min(off.details["max_mamba_cache_size"],
                                                      off.details["max_total_num_tokens"] // 2)


def test_a_model_without_recurrent_layers_takes_both_and_keeps_its_pool() -> None:
    """Neither flag is read by SGLang's one-pool sizing of a dense model (DefaultPoolConfigurator,
    model_executor/pool_configurator.py:1715-1725; the flags are read only by the SWA request-cap pool, :940-1003):
    the same token pool, the assumptions saying each is off."""
    kw = dict(engine="sglang", memory=80 * GiB, context=4096)
    plain = llmsizer.estimate_inference("llama-3.1-8b", **kw)
    off = llmsizer.estimate_inference("llama-3.1-8b", disable_overlap_schedule=True, disable_radix_cache=True, **kw)
    assert off.details["max_total_num_tokens"] == plain.details["max_total_num_tokens"] > 0
    names = {a.name: a for a in off.assumptions}
    assert names["radix_cache"].value == "off" and names["radix_cache"].default is False
    assert names["overlap_schedule"].value == "off" and "by no measurement" in names["overlap_schedule"].why
    no_memory = llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", disable_overlap_schedule=True)
    assert "overlap_schedule" in {a.name for a in no_memory.assumptions}


# refused: (settings, field named, words) -- each a start-up stop of SGLang's, or a setting it would not read
REFUSED = [
    ({"mamba_radix_cache_strategy": "no_buffer"}, "mamba_radix_cache_strategy", "needs --disable-overlap-schedule"),
    ({"mamba_radix_cache_strategy": "extra_buffer_lazy", "disable_overlap_schedule": True},
     "mamba_radix_cache_strategy", "needs the overlap scheduler"),
    ({"mamba_radix_cache_strategy": "extra_buffer", "disable_radix_cache": True}, "mamba_radix_cache_strategy",
     "is not read when --disable-radix-cache is given"),
    ({"disable_radix_cache": True, "max_num_seqs": 50, "mamba_full_memory_ratio": 2.0}, "mamba_full_memory_ratio",
     "is not read when --disable-radix-cache and"),
]


def _flags(settings: dict) -> list[str]:
    out = []
    for k, v in settings.items():
        flag = "--" + k.replace("_", "-")
        out += [flag] if v is True else [flag, str(v)]
    return out


@pytest.mark.parametrize(("settings", "field", "words"), REFUSED)
def test_refusals_are_one_line_in_python_and_on_the_cli(settings, field, words) -> None:
    with pytest.raises(InputError) as e:
        llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, weights="fp8", **settings)
    assert getattr(e.value, "field", None) == field
    done = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--weights", "fp8", *_flags(settings))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("flag", ["--disable-overlap-schedule", "--disable-radix-cache"])
@pytest.mark.parametrize("engine", ["vllm", "llamacpp", "transformers"])
def test_the_flags_are_sglangs_only(flag, engine) -> None:
    done = run_cli("infer", "qwen2.5-0.5b", "--engine", engine, flag)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{flag} applies to engine sglang, not {engine}" in done.stderr
    with pytest.raises(InputError, match=f"^{flag[2:].replace('-', '_')} applies to engine sglang, not {engine}$"):
        llmsizer.estimate_inference("qwen2.5-0.5b", engine=engine, **{flag[2:].replace("-", "_"): True})


@pytest.mark.parametrize(("settings", "text", "flags"), [
    ({"disable_overlap_schedule": True}, "disable_overlap_schedule: true", ["--disable-overlap-schedule"]),
    ({"disable_radix_cache": True, "max_num_seqs": 64}, "disable_radix_cache: true, max_num_seqs: 64",
     ["--disable-radix-cache", "--max-running-requests", "64"]),
])
def test_python_cli_fit_and_request_file_give_the_same_numbers(settings, text, flags) -> None:
    from llmsizer.estimate.fit import fit
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=H200, context=4096, weights="fp8", **settings)
    out = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights", "fp8",
                  *flags, "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)["details"]
    for key in ("max_mamba_cache_size", "max_total_num_tokens", "max_running_requests", "mamba_requests_ratio"):
        assert d[key] == est.details[key], key
    r = fit(QWEN, "h200", 1, engine="sglang", weights="fp8", context=4096, concurrency=1, output_tokens=256,
            **settings)
    assert r.estimate is not None
    assert r.estimate.details["mamba_requests_ratio"] == est.details["mamba_requests_ratio"]
    job = make_plan(parse_request(_request(text), source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]


def test_a_bad_request_file_value_is_one_line(tmp_path) -> None:
    from llmsizer.request import RequestError, parse_request

    with pytest.raises(RequestError) as r:
        parse_request(_request("disable_radix_cache: 3"), source="t.yaml")
    assert r.value.errors[0].startswith("t.yaml:8: job 'chat' (inference): engine_settings.disable_radix_cache")
    f = tmp_path / "r.yaml"  # SGLang's start-up stop, said at the setting's line as the CLI says it
    f.write_text(_request("mamba_radix_cache_strategy: no_buffer"))
    done = run_cli("request", "check", str(f))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert ":8: job 'chat' (inference): engine_settings.mamba_radix_cache_strategy no_buffer needs " \
           "disable_overlap_schedule" in done.stderr


def _gpt_oss_cells(name: str) -> tuple[int, int, int]:
    """(B_full, B_swa, sliding_window) of GPT-OSS from its config.json (the catalog's copy): layer_types alternate
    sliding_attention / full_attention, 8 KV heads of head_dim 64, bf16."""
    from pathlib import Path

    cfg = json.loads((Path(llmsizer.__file__).parent / "catalog/data/models" / f"{name}.json").read_text())["config"]
    kinds = cfg["layer_types"]
    per_layer = 2 * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    return kinds.count("full_attention") * per_layer, kinds.count("sliding_attention") * per_layer, cfg["sliding_window"]


@pytest.mark.parametrize("overlap_off", [False, True])
def test_without_the_radix_cache_gpt_oss_sizes_its_swa_pool_from_the_running_requests(overlap_off) -> None:
    """SWARequestCapPoolConfigurator (SGLang 0.5.23 model_executor/pool_configurator.py:971-1042, picked at
    :1720-1722 when is_applicable :986-1003: max_running_requests given, radix cache disabled, chunked_prefill_size >
    0, a runner window): swa_tokens = (w + 128 x 1 + 1 + 1) x M + c x chunked_prefill_size + 1
    (compute_swa_request_cap :924-968, page 1, no speculative decoding; c = 1 with the overlap scheduler off, else
    2: :963), w = kvc.sliding_window_size (:982), the model runner's window (model_runner.py:669, 1353;
    load_model_utils.py:144-157): GPT-OSS's get_attention_sliding_window_size, config.sliding_window - 1
    (models/gpt_oss.py:131-132, 1374-1375). The full pool takes the rest (:1016-1023). The SWA pool has room for M
    sequences (each holds w + 128 + 2 of it, S4): the chunks in flight and the page are the chunked prefill's, and
    the verdict names the SWA pool where it binds (review27 D6). Only the pool's byte budget and
    chunked_prefill_size (the memory tier's) come from the estimate."""
    m, context = 64, 4096
    b_full, b_swa, window = _gpt_oss_cells("gpt-oss-20b")
    assert window == 128
    kw = {"disable_overlap_schedule": True} if overlap_off else {}
    est = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=80 * GiB, context=context, concurrency=m,
                                      disable_radix_cache=True, max_num_seqs=m, **kw)
    d = est.details
    chunked = next(a.value for a in est.assumptions if a.name == "chunked_prefill_size")
    held = min(context, (window - 1) + 128 + 2)  # the scheduler evicts by sliding_window - 1 (models/gpt_oss.py:131)
    assert held == 257
    reserve = (1 if overlap_off else 2) * chunked + 1
    swa = held * m + reserve
    full = (d["kv_pool_bytes"] - swa * b_swa) // b_full
    assert (d["swa_pool_tokens"], d["max_total_num_tokens"]) == (swa, full) and d["swa_pool_sizing"] == "request cap"
    assert "swa_full_tokens_ratio" not in d and "swa_full_tokens_ratio" not in {a.name for a in est.assumptions}
    assert d["max_concurrency_at_context"] == min(full // context, (swa - reserve) // held, full // 2) == m
    assert d["admits_bound"] == "SWA pool"
    assert d["max_running_requests"] == min(m, full // 2) == m
    from llmsizer.estimate.verdict import binding_pool_words

    assert binding_pool_words(d) == f"SWA pool ({swa:,} tokens, sized for max_running_requests {m})"
    # with the radix cache on (or no cap given) the ratio pool stays (eq. 3s)
    for other in ({"max_num_seqs": m}, {"disable_radix_cache": True}):
        plain = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=80 * GiB, context=context, **other)
        assert plain.details["swa_pool_sizing"] == "ratio" and plain.details["swa_full_tokens_ratio"] == 0.8


def test_llama4_sizes_its_swa_pool_from_the_running_requests_too() -> None:
    """Llama 4's config has attention_chunk_size, no sliding_window, so its model_config.sliding_window_size is None;
    but is_applicable (SGLang 0.5.23 pool_configurator.py:1001) reads kvc.sliding_window_size, the model runner's
    window (model_runner.py:669), which resolve_sliding_window_size takes from attention_chunk_size
    (load_model_utils.py:152-153): the request cap sizes its SWA pool as GPT-OSS's, with w = attention_chunk_size
    (review27fix: the pool was kept at the ratio)."""
    est = llmsizer.estimate_inference("llama-4-scout-17b-16e-instruct", engine="sglang", memory=4 * 80 * GiB,
                                      tensor_parallel=4, weights="fp8", context=8192, disable_radix_cache=True,
                                      max_num_seqs=16)
    d = est.details
    chunked = next(a.value for a in est.assumptions if a.name == "chunked_prefill_size")
    assert d["swa_pool_sizing"] == "request cap"
    assert d["swa_pool_tokens"] == (8192 + 128 + 2) * 16 + 2 * chunked + 1



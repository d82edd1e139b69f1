"""SGLang's mamba radix-cache strategy (--mamba-radix-cache-strategy) and the state slots each running request of a
hybrid model holds, against SGLang 0.5.23's own code (the PyPI wheel, as tests/estimate/test_sglang_mamba.py):

- arg_groups/fields/exec_.py:512-519: ``mamba_radix_cache_strategy`` choices auto | no_buffer | extra_buffer |
  extra_buffer_lazy, default "auto"; :542-548 ``linear_attn_backend`` default "triton"; arg_groups/fields/
  schedule.py:193-199 ``disable_overlap_schedule`` default False (the overlap scheduler on).
- arg_groups/overrides.py:453-487 ``_mamba_radix_cache_resolution``: for an architecture in _MAMBA_RADIX_CACHE_ARCHS
  (:369-400), "auto" becomes "extra_buffer" when the overlap scheduler is on and supports_mamba_cache_extra_buffer
  (:436-450: the architecture in _MAMBA_EXTRA_BUFFER_ARCHS, :403-433, and linear_attn_backend "triton"), else
  "no_buffer" with the overlap scheduler turned off. Qwen3NextForCausalLM and NemotronHForCausalLM are in both lists;
  Mamba2ForCausalLM in neither (the strategy stays "auto": model_override_base.py:260-265 mamba_extra_buffer_of is
  False).
- Which hybrid / state-space architectures SGLang 0.5.23 serves at all: the ``EntryClass`` of its sglang/srt/models/
  files (``SGLANG_0523_SERVES`` below). JambaForCausalLM is in none (no models/jamba.py), and the fallback to the
  transformers implementation stops at load with the default --model-impl auto (model_loader/utils.py:181-188:
  JambaPreTrainedModel, transformers 5.19.0 as the wheel pins, does not set _supports_attention_backend).
- mem_cache/kv_cache_configurator.py:3062-3088 ``_calculate_mamba_ratio`` = 3 (:227) + get_mamba_tracking_slots
  (mem_cache/allocation_sizing.py:11-19: 0 without the extra buffer; lazy 1; else 2 with the overlap scheduler);
  resolve_max_num_reqs (:3119-3150): ``max_running_requests = min(eq. 4, max_mamba_cache_size // ratio)``.
- The MambaPool is max_mamba_cache_size slots under every strategy (memory_pool.py:1445-1461, kv_cache_configurator.py:
  1718-1721; _handle_max_mamba_cache :3346-3386 reads no strategy without speculative decoding), so the memory split
  (eq. 2b) does not move.
- mamba_hook.py:115-120: extra_buffer on an architecture without it stops SGLang ("extra_buffer is not supported for
  ...; use no_buffer"); model_hook.py:1059-1066 for one outside the hybrid branch.

The slot counts below are worked out from those lines; the memory split by hand from the models' config.json numbers,
with only the weights' bytes, mem_fraction_static (tests/estimate/test_sglang.py) and the CUDA context taken from the
estimate as inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import FieldError, InputError
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.units import GiB

H100 = 80 * GiB
QWEN = "qwen3-next-80b-a3b-thinking"
NANO = "nvidia-nemotron-3-nano-30b-a3b-bf16"

# _calculate_mamba_ratio: 3 + get_mamba_tracking_slots(extra_buffer, overlap=True, lazy)
SLOTS = {"no_buffer": 3 + 0, "extra_buffer": 3 + 2, "extra_buffer_lazy": 3 + 1}


def _qwen3_next_per_req() -> int:
    # Qwen3-Next-80B-A3B config.json: 36 Gated DeltaNet layers (48, full_attention_interval 4); conv_dim =
    # 2 x 16 x 128 + 32 x 128 = 8192, conv kernel 4 (bf16); SSM [32 value heads, 128, 128] float32
    return (8192 * (4 - 1) * 2 + 32 * 128 * 128 * 4) * 36


def _nemotron_3_nano_per_req() -> int:
    # NVIDIA-Nemotron-3-Nano-30B-A3B config.json: hybrid_override_pattern with 23 'M' (Mamba-2) layers, 6 '*';
    # mamba_num_heads 64, mamba_head_dim 64, ssm_state_size 128, n_groups 8, conv_kernel 4, mamba_ssm_cache_dtype
    # float32: conv_dim = 64 x 64 + 2 x 8 x 128 = 6144 (bf16), SSM [64, 64, 128] float32
    return (6144 * (4 - 1) * 2 + 64 * 64 * 128 * 4) * 23


# (model, weights, mamba_cache_per_req, KV cell of the full-attention layers [B/token], context_len)
MODELS = [
    (QWEN, "int4", _qwen3_next_per_req(), 12 * 2 * (256 + 256) * 2, 262144),  # 12 layers, 2 kv heads, head 256
    (NANO, "bf16", _nemotron_3_nano_per_req(), 6 * 2 * (128 + 128) * 2, 262144),  # 6 layers, 2 kv heads, head 128
]


def _by_hand(model: str, weights: str, per_req: int, cell: int, context_len: int, strategy: str | None):
    setting = {} if strategy is None else {"mamba_radix_cache_strategy": strategy}
    if strategy == "no_buffer":  # SGLang requires the overlap scheduler off with it here (mamba_hook.py:156-160)
        setting["disable_overlap_schedule"] = True
    est = llmsizer.estimate_inference(model, engine="sglang", memory=H100, context=4096, concurrency=512,
                                      weights=weights, **setting)
    rest = int(est.details["mem_fraction_static"] * (H100 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    k = int((rest * 0.9 / 1.9 - per_req) // per_req)  # eq. (2b), r = 0.9
    tokens = (rest - (k + 1) * per_req) // cell
    eq4 = min(max(min(int(tokens / context_len * 512), 4096), 2048), tokens // 2)
    return est, k, tokens, eq4


@pytest.mark.parametrize("model, weights, per_req, cell, context_len", MODELS)
def test_sglangs_default_is_the_extra_buffer_five_slots_a_request(model, weights, per_req, cell, context_len):
    est, k, tokens, eq4 = _by_hand(model, weights, per_req, cell, context_len, None)
    d = est.details
    assert d["mamba_cache_per_req"] == per_req and d["max_mamba_cache_size"] == k and d["max_total_num_tokens"] == tokens
    assert d["max_running_requests"] == min(eq4, k // 5) == k // 5 < k // 3  # the MambaPool caps it
    # the MambaPool's room k // 5 is what SGLang admits at once (memory, as vLLM's pool: probe20 D1), below the token
    # pool's room for 4096-token sequences
    assert d["admitted_sequences"] == d["max_concurrency_at_context"] == k // 5 < d["token_pool_room"] == tokens // 4096
    assert d["admits_bound"] == "MambaPool" and d["fits"] is False  # 512 requested
    assert d["mamba_requests_ratio"] == 5 and d["mamba_radix_cache_strategy"] == "extra_buffer"
    a = {x.name: x for x in est.assumptions}["mamba_radix_cache_strategy"]
    assert a.value == "extra_buffer" and a.default and "overlap scheduler" in a.why


@pytest.mark.parametrize("model, weights, per_req, cell, context_len", MODELS)
@pytest.mark.parametrize("strategy", ["no_buffer", "extra_buffer", "extra_buffer_lazy"])
def test_each_strategy_moves_only_the_cap(model, weights, per_req, cell, context_len, strategy):
    est, k, tokens, eq4 = _by_hand(model, weights, per_req, cell, context_len, strategy)
    d = est.details
    assert d["max_mamba_cache_size"] == k and d["max_total_num_tokens"] == tokens  # eq. (2b): the same split
    assert est.item("recurrent_state_pool").bytes == (k + 1) * per_req
    assert d["max_running_requests"] == min(eq4, k // SLOTS[strategy]) and d["mamba_requests_ratio"] == SLOTS[strategy]
    a = {x.name: x for x in est.assumptions}["mamba_radix_cache_strategy"]
    assert a.value == strategy and a.default is False


def test_models_without_the_extra_buffer_keep_three_slots_and_refuse_it():
    """Mamba2ForCausalLM is in neither architecture list (overrides.py:369-433)."""
    model, memory, weights = "mamba-codestral-7b-v0.1", H100, "bf16"
    est = llmsizer.estimate_inference(model, engine="sglang", memory=memory, weights=weights, context=2048)
    d = est.details
    assert d["mamba_requests_ratio"] == 3 and d["mamba_radix_cache_strategy"] == "no_buffer"
    assert d["max_running_requests"] <= d["max_mamba_cache_size"] // 3
    same = llmsizer.estimate_inference(model, engine="sglang", memory=memory, weights=weights, context=2048,
                                       mamba_radix_cache_strategy="no_buffer")
    assert same.details["max_running_requests"] == d["max_running_requests"]
    for strategy in ("extra_buffer", "extra_buffer_lazy"):
        with pytest.raises(InputError, match=f"^mamba_radix_cache_strategy {strategy} is not served for"):
            llmsizer.estimate_inference(model, engine="sglang", memory=memory, mamba_radix_cache_strategy=strategy)
    done = run_cli("infer", model, "--engine", "sglang", "--mamba-radix-cache-strategy", "extra_buffer")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--mamba-radix-cache-strategy extra_buffer is not served for" in done.stderr


# The hybrid and state-space architectures SGLang 0.5.23 registers (the EntryClass of each sglang/srt/models/ file):
# falcon_h1.py:561, mamba.py:33, mamba2.py:262, nemotron_h.py:1361, granitemoehybrid.py:739, qwen3_next.py:1316,
# falcon_mamba.py:252. No file registers JambaForCausalLM.
SGLANG_0523_SERVES = {"FalconH1ForCausalLM", "MambaForCausalLM", "Mamba2ForCausalLM", "NemotronHForCausalLM",
                      "NemotronHPuzzleForCausalLM", "GraniteMoeHybridForCausalLM", "Qwen3NextForCausalLM",
                      "FalconMambaForCausalLM"}
RECURRENT_TYPES = ("jamba", "falcon_h1", "nemotron_h", "granitemoehybrid", "qwen3_next", "mamba2", "mamba")


def _catalog_recurrent() -> list[tuple[str, str]]:
    """(name, architecture) of every catalog model of a recurrent family, from its stored config.json."""
    folder = Path(llmsizer.__file__).parent / "catalog/data/models"
    out = []
    for f in sorted(folder.glob("*.json")):
        d = json.loads(f.read_text())
        if d["config"].get("model_type") in RECURRENT_TYPES:
            out.append((d["name"], d["config"]["architectures"][0]))
    return out


def test_sglang_serves_the_recurrent_families_its_release_registers_and_refuses_jamba():
    found = _catalog_recurrent()
    assert "JambaForCausalLM" in {a for _, a in found} and len(found) >= 8  # the catalog still holds each kind
    for name, arch in found:
        if arch in SGLANG_0523_SERVES:
            est = llmsizer.estimate_inference(name, engine="sglang", memory=141 * GiB, context=2048, weights="fp8")
            assert est.details["max_mamba_cache_size"] > 0, name
            continue
        with pytest.raises(FieldError) as e:
            llmsizer.estimate_inference(name, engine="sglang", memory=141 * GiB, context=2048, weights="fp8")
        assert e.value.fields == ("engine",) and "SGLang 0.5.23 has no Jamba model" in str(e.value), name
        done = run_cli("infer", name, "--engine", "sglang", "--device", "h200", "--weights", "fp8")
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "is not served on --engine sglang" in done.stderr and "give --engine vllm" in done.stderr
        for engine in ("vllm", "transformers"):  # the refusal is SGLang's alone
            assert llmsizer.estimate_inference(name, engine=engine, memory=141 * GiB, context=2048,
                                               weights="fp8").total_bytes > 0
        done = run_cli("recommend", name, "--engine", "sglang")  # said once, not per candidate device
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_bad_and_misplaced_values_are_one_line():
    from llmsizer.request import RequestError, parse_request

    with pytest.raises(InputError, match="mamba_radix_cache_strategy"):
        llmsizer.estimate_inference(QWEN, engine="sglang", memory=H100, mamba_radix_cache_strategy="ping_pong")
    done = run_cli("infer", QWEN, "--engine", "sglang", "--mamba-radix-cache-strategy", "ping_pong")
    assert done.returncode == 2 and "--mamba-radix-cache-strategy" in done.stderr
    done = run_cli("infer", QWEN, "--engine", "vllm", "--mamba-radix-cache-strategy", "no_buffer")
    assert done.returncode == 2 and "applies to engine sglang, not vllm" in done.stderr
    done = run_cli("infer", "llama-3.1-8b", "--engine", "sglang", "--mamba-radix-cache-strategy", "no_buffer")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "has no recurrent (Mamba / linear-attention) layers" in done.stderr
    with pytest.raises(RequestError) as r:
        parse_request(_request("mamba_radix_cache_strategy: ping_pong"), source="t.yaml")
    assert r.value.errors[0].startswith("t.yaml:8: job 'chat' (inference): engine_settings.mamba_radix_cache_strategy")


def _request(settings: str) -> str:
    return (
        f"version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {{name: {QWEN}}}\n"
        f"    quantization: fp8\n    engine: sglang\n    engine_settings: {{{settings}}}\n"
        "    traffic:\n      concurrency: {typical: 1, peak: 1}\n      context: {typical: 4k, peak: 4k}\n"
        "      output: {typical: 256, peak: 256}\n    resources: {device: h200, count: 1}\n"
    )


@pytest.mark.parametrize("strategy", [None, "no_buffer"])
def test_python_cli_fit_and_request_file_give_the_same_numbers(strategy):
    from llmsizer.estimate.fit import fit
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    # (no_buffer with the overlap scheduler off, as SGLang requires for Qwen3-Next: mamba_hook.py:156-160)
    setting = {} if strategy is None else {"mamba_radix_cache_strategy": strategy, "disable_overlap_schedule": True}
    flag = () if strategy is None else ("--mamba-radix-cache-strategy", strategy, "--disable-overlap-schedule")
    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=141 * GiB, context=4096, weights="fp8",
                                      concurrency=256, **setting)
    out = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights", "fp8",
                  "--concurrency", "256", *flag, "--json")
    # 256 requested, more than the MambaPool's K // s admits at once: does not fit (exit 1; it was 0 while the
    # MambaPool's bound counted as a running cap, probe20 D1)
    assert out.returncode == 1, out.stderr
    d = json.loads(out.stdout)["details"]
    assert d["fits"] is False and d["max_concurrency_at_context"] == d["max_running_requests"] < 256
    for key in ("max_mamba_cache_size", "max_running_requests", "admitted_sequences", "mamba_requests_ratio"):
        assert d[key] == est.details[key], key
    assert d["max_running_requests"] == d["max_mamba_cache_size"] // (3 if strategy else 5)
    r = fit(QWEN, "h200", 1, engine="sglang", weights="fp8", context=4096, concurrency=1, output_tokens=256, **setting)
    assert r.estimate is not None and r.estimate.details["mamba_requests_ratio"] == (3 if strategy else 5)
    text = "" if strategy is None else f"mamba_radix_cache_strategy: {strategy}, disable_overlap_schedule: true"
    job = make_plan(parse_request(_request(text), source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("memory").value("need_peak") == r.estimate.details["workload_bytes"]

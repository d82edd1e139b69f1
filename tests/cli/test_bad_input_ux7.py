"""Bad input and edge cases a demanding new user hits (issue #16, brief non-negotiable 6): each refusal is one line
naming what and where, exit 2, no traceback; an answer exits 0 (1: does not fit). Each test failed before its fix.

Independent truth: Llama-3.1-8B's config.json (32 layers, 8 KV heads, head_dim 128 = 4096 / 32 heads; its k_proj and
v_proj are nn.Linear(4096, 1024) in transformers' LlamaAttention); Qwen3-30B-A3B's config.json (hidden 2048,
moe_intermediate_size 768, 4 KV heads x head_dim 128)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer.cli.main import build_parser
from llmsizer.formulas.lora import adapted_layout, rank_ceiling
from llmsizer.models import load_model
from llmsizer.request.fields import JOB_FIELDS
from llmsizer.specs.workload import INFERENCE_NUMBERS, OUTPUT_TOKENS

KV_PER_TOKEN_8B = 2 * 32 * 8 * 128 * 2  # K and V x 32 layers x 8 KV heads x head_dim 128 x 2 B (bf16)


def _one_line(*argv: str) -> str:
    code, out, err = run(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out[-200:], err)
    return err.removeprefix("llmsizer: error: ").rstrip("\n")


# 1. request check applies infer's engine / KV-dtype rule

REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    engine: {engine}
    kv_cache_dtype: {kv}
    traffic:
      concurrency: 4
      context: 2k
      output: {output}
"""


@pytest.mark.parametrize("engine,kv", [("vllm", "q4_0"), ("llamacpp", "fp8")])
def test_request_check_refuses_a_kv_dtype_the_engine_does_not_store_as_infer_does(tmp_path, engine, kv):
    """Before, `request check` said "valid request" (exit 0) for vLLM with a q4_0 KV cache, which `infer` refuses."""
    infer_line = _one_line("infer", "llama-3.1-8b", "--engine", engine, "--kv-dtype", kv)
    f = tmp_path / "r.yaml"
    f.write_text(REQUEST.format(engine=engine, kv=kv, output=100))
    line = _one_line("request", "check", str(f))
    assert line == f"{f}:6: job 'chat' (inference): kv_cache_dtype: {infer_line}"
    assert _one_line("request", "check", str(f), "--json") == line
    assert _one_line("plan", str(f)) == line  # plan reads the same file the same way (was a plan with an ERROR)
    f.write_text(REQUEST.format(engine=engine, kv="bf16", output=100))  # a dtype the engine stores: valid
    assert run("request", "check", str(f))[0] == 0


# 2. --output-tokens 0: a prefill-only workload, one bound everywhere

def test_output_tokens_has_one_bound_that_admits_zero():
    assert OUTPUT_TOKENS.low == 0
    assert dict(INFERENCE_NUMBERS)["output_tokens"] is OUTPUT_TOKENS
    traffic = next(f for f in JOB_FIELDS if f.name == "traffic")
    assert traffic.child("output").bounds is OUTPUT_TOKENS  # type: ignore[union-attr]
    for cmd in (["infer"], ["fit", "--device", "h100"], ["recommend"]):
        argv = [*cmd, "llama-3.1-8b", "--output-tokens", "0"]  # the parser of argv's command, not of pytest's argv
        assert build_parser(argv).parse_args(argv).output_tokens == 0
    assert _one_line("infer", "llama-3.1-8b", "--output-tokens", "-1").startswith("argument --output-tokens: ")


def test_infer_with_no_output_holds_the_kv_of_the_prompt_only():
    code, out, _ = run("infer", "llama-3.1-8b", "--context", "2048", "--concurrency", "4", "--output-tokens", "0",
                       "--json")
    assert code == 0
    items = {i["name"]: i for i in json.loads(out)["items"]}
    assert items["kv_cache"]["bytes"] == KV_PER_TOKEN_8B * 2048 * 4  # every context token is a prompt token


def test_fit_with_no_output_has_a_prefill_and_no_decode():
    code, out, _ = run("fit", "llama-3.1-8b", "--device", "h100", "--context", "2048", "--output-tokens", "0",
                       "--json")
    assert code == 0
    speed = json.loads(out)["speed"]
    assert speed["output_tokens"] == 0 and speed["ttft_seconds"] > 0
    assert speed["decode"] is None and speed["tokens_per_second"] is None
    assert speed["roofline"]["decode"] is None
    code, text, _ = run("fit", "llama-3.1-8b", "--device", "h100", "--context", "2048", "--output-tokens", "0")
    # vLLM's server time per request (eq. Q9's H) loads even one request: the idle prompt and the loaded row, no decode
    assert code == 0 and "prefill (one prompt, idle)" in text and "requests/s (prefill only)" in text
    assert "decode" not in text.split("assumptions:")[0]


def test_recommend_with_no_output_holds_no_reading_floor_and_refuses_a_decode_limit():
    code, out, _ = run("recommend", "llama-3.1-8b", "--context", "2048", "--output-tokens", "0", "--top", "3",
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert data["options"] and data["options"][0]["status"] == "chosen"
    floor = [a for a in data["assumptions"] if a["name"] == "user_tokens_per_second"]
    assert floor and floor[0]["value"] == "none (prefill only)"
    line = _one_line("recommend", "llama-3.1-8b", "--output-tokens", "0", "--user-tokens-per-second", "10")
    assert line.startswith("output_tokens 0 generates no token")


def test_a_request_with_no_output_is_valid_and_planned(tmp_path):
    f = tmp_path / "embed.yaml"
    f.write_text(REQUEST.format(engine="vllm", kv="bf16", output=0))
    code, out, err = run("request", "check", str(f))
    assert code == 0 and "valid request" in out, err
    code, out, err = run("plan", str(f), "--json")
    assert code in (0, 1) and "Traceback" not in err, err
    # no output: a request is in flight for its prefill alone (formulas/network.py eq. 9); 2048 prompt tokens of an 8B
    # model are compute-bound on any GPU (2 x 8e9 x 2048 FLOPs over 16 GB of weights: ~2000 FLOP/B, beyond every
    # catalog GPU's ridge point), so the 4 in flight queue for the device (formulas/serving_queue.py eq. Q6' at 0
    # output tokens): each request's TTFT holds the other prompts' prefill too, and 4 in flight complete 4 per TTFT
    # (Little's law), one prompt's prefill apart (was 4 per idle TTFT: more FLOP/s than the device has)
    job = json.loads(out)["jobs"][0]
    speed = next(s for s in job["sections"] if s["key"] == "speed")
    net = next(s for s in job["sections"] if s["key"] == "network")
    ttft = next(f["value"] for f in speed["figures"] if f["key"] == "ttft_typical")
    rate = next(f["value"] for f in net["figures"] if f["key"] == "requests_typical")
    assert ttft > 0 and rate == pytest.approx(4 / ttft)


# 3. a model search that matches nothing

def test_a_model_search_with_no_match_is_bad_input_with_a_did_you_mean():
    assert _one_line("models", "zzzz") == "no catalog model matches 'zzzz' (list them with `llmsizer models`)"
    line = _one_line("models", "qwn3-8b")
    assert line.startswith("no catalog model matches 'qwn3-8b'; did you mean 'qwen3-8b'")
    assert _one_line("models", "qwn3-8b", "--json") == line
    code, out, _ = run("models", "qwen3-8")
    assert code == 0 and "qwen3-8b" in out
    # the family's name and its number apart is the same name (suggest.split_name_words, review36 D3)
    code, out, _ = run("models", "qwen-3-8b")
    assert code == 0 and "qwen3-8b" in out


# 4. unknown --weights / --kv-dtype name the flag and suggest

@pytest.mark.parametrize("cmd", [("infer", "llama-3.1-8b"), ("fit", "llama-3.1-8b", "--device", "h100"),
                                 ("recommend", "llama-3.1-8b")])
def test_an_unknown_weight_format_or_kv_dtype_names_its_flag_and_suggests(cmd):
    w = _one_line(*cmd, "--weights", "q4_k_n")
    assert w.startswith("argument --weights: unknown weight format 'q4_k_n'; did you mean ") and "'q4_k_m'" in w
    k = _one_line(*cmd, "--kv-dtype", "q8")
    assert k.startswith("argument --kv-dtype: unknown KV cache dtype 'q8'; did you mean 'q8_0'?")
    assert "Traceback" not in w + k


def test_known_spellings_of_formats_and_dtypes_still_parse():
    code, _, err = run("infer", "llama-3.1-8b", "--weights", "Q4_K_M", "--engine", "llamacpp", "--kv-dtype", "q8_0")
    assert code == 0, err
    # vLLM stores an fp16 KV cache only for an fp16 model (engines.py kv_dtypes_model_only): the dtype given with it
    code, _, err = run("infer", "llama-3.1-8b", "--weights", "int4", "--kv-dtype", "float16", "--dtype", "fp16")
    assert code == 0, err


# 5. a LoRA rank above the adapted matrix's own rank

def test_rank_ceiling_is_the_smallest_adapted_matrix_rank():
    spec = load_model("llama-3.1-8b")
    assert rank_ceiling(adapted_layout(spec, "q,k,v,o")) == (1024, "k")  # k_proj: Linear(4096, 1024)
    assert rank_ceiling(adapted_layout(spec, "q,o")) == (4096, "q")  # q_proj / o_proj: Linear(4096, 4096)
    moe = load_model("qwen3-30b-a3b")
    # fused experts: gate_up_proj [E, 2 x 768, 2048] carries rank 2 r (PEFT), down_proj [E, 2048, 768] rank r
    assert rank_ceiling(adapted_layout(moe, "gate,up,down"))[0] == 768  # type: ignore[index]


def test_a_lora_rank_above_the_ceiling_is_warned_in_the_estimate():
    from llmsizer import estimate_training

    est = estimate_training("llama-3.1-8b", method="lora", rank=2048, targets=("q", "k", "v", "o"))
    hits = [w for w in est.warnings if "above min(in, out) = 1024" in w]
    assert len(hits) == 1 and "k projection" in hits[0]
    assert not [w for w in estimate_training("llama-3.1-8b", method="lora", rank=1024,
                                             targets=("q", "k", "v", "o")).warnings if "min(in, out)" in w]
    code, out, _ = run("train", "llama-3.1-8b", "--method", "lora", "--rank", "2048", "--targets", "q,k,v,o")
    assert code == 0 and "above min(in, out) = 1024" in out

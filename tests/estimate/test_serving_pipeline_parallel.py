"""Serving pipeline parallelism (issue #16: `infer --pp`, `fit --tp T --pp P`; estimate/inference/pipeline.py).

Independent truths:
- the layers of each stage: vLLM 0.19.1 ``vllm/distributed/utils.py`` ``get_pp_indices`` (lines 95-140) and SGLang
  0.5.23 ``sglang/srt/distributed/utils.py`` ``get_pp_indices`` (lines 110-150), rebuilt below from their code
  (without the partition environment variables);
- each stage's weights: the model's own tensors (formulas/tensors.py model_tensors, checked against transformers on
  the meta device by tests/catalog/test_params_match_transformers.py) at 2 bytes each (bf16), placed as vLLM 0.19.1
  ``models/llama.py`` lines 373-391 and 538-553 build them: embed_tokens on the first rank (and the last when tied),
  the final norm and lm_head on the last, a rank's own decoder layers (``models/utils.py`` make_layers, lines
  626-658);
- the pool: every stage gets the smallest block count of all workers (``v1/core/kv_cache_utils.py``
  ``get_kv_cache_configs`` lines 1599-1612), and a stage's KV per token is its own layers' (Llama-3.1: 2 x 8 KV
  heads x 128 x 2 B per layer, from config.json).
"""

from __future__ import annotations

import math

import pytest

from llmsizer import estimate_inference
from llmsizer.formulas.model_parallel_time import serving_pipeline_micro_batch, serving_pipeline_step
from llmsizer.formulas.parallelism import serving_stage_layers
from llmsizer.formulas.tensors import model_tensors
from llmsizer.models import load_model


def vllm_get_pp_indices(num_hidden_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """vLLM 0.19.1 vllm/distributed/utils.py lines 124-140, as written there."""
    layers_per_partition = num_hidden_layers // pp_size
    partitions = [layers_per_partition for _ in range(pp_size)]
    if remaining_layers := num_hidden_layers % pp_size:
        for i in range(2, remaining_layers + 2):
            partitions[-i] += 1
    start_layer = sum(partitions[:pp_rank])
    return start_layer, start_layer + partitions[pp_rank]


def sglang_get_pp_indices(num_hidden_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """SGLang 0.5.23 sglang/srt/distributed/utils.py lines 137-150, as written there."""
    base_layers = num_hidden_layers // pp_size
    remainder = num_hidden_layers % pp_size
    if pp_rank >= pp_size - remainder:
        partitions_without_extra_layer = pp_size - remainder
        start_layer = pp_rank * (base_layers + 1) - partitions_without_extra_layer
        end_layer = start_layer + (base_layers + 1)
    else:
        start_layer = pp_rank * base_layers
        end_layer = start_layer + base_layers
    return start_layer, end_layer


@pytest.mark.parametrize("engine, rule", [("vllm", vllm_get_pp_indices), ("sglang", sglang_get_pp_indices)])
def test_stage_layers_match_the_engines_get_pp_indices(engine, rule):
    for layers in (1, 2, 7, 32, 61, 62, 80, 126):
        for pp in range(1, min(layers, 9) + 1):
            got = serving_stage_layers(layers, pp, engine)
            assert [(r.start, r.stop) for r in got] == [rule(layers, k, pp) for k in range(pp)], (layers, pp)


def _bf16_bytes(tensors) -> int:
    return sum(t.numel for t in tensors) * 2


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.2-1b"])
def test_stage_weights_are_the_models_own_tensors_where_vllm_builds_them(name):
    spec = load_model(name)
    pp = 2
    est = estimate_inference(spec, engine="vllm", device="h100", weights="bf16", pipeline_parallel=pp)
    stages = est.details["pipeline_stages"]
    tensors = model_tensors(spec)
    for k, st in enumerate(stages):
        start, stop = vllm_get_pp_indices(spec.num_layers, k, pp)
        assert st["layers"] == [start, stop - 1]
        held = [t for t in tensors if start <= t.layer < stop]
        if k == 0 or spec.tie_word_embeddings:  # embed_tokens: first rank, and the last when tied (llama.py 373-375)
            held += [t for t in tensors if t.role == "token_embd"]
        if k == pp - 1:  # the final norm and an untied lm_head (llama.py 388-391, 538-553)
            held += [t for t in tensors if t.layer < 0 and (t.role == "output" or t.role.startswith("output_norm"))]
        assert st["weights_bytes"] == _bf16_bytes(held), (name, k)
    assert spec.tie_word_embeddings == (name == "llama-3.2-1b")  # (both placements exercised)


def test_pool_is_the_smallest_stages_and_kv_is_the_stages_layers():
    spec = load_model("llama-3.1-8b")
    whole = estimate_inference(spec, engine="vllm", device="h100", weights="bf16", context=8192)
    est = estimate_inference(spec, engine="vllm", device="h100", weights="bf16", context=8192, pipeline_parallel=3)
    stages = est.details["pipeline_stages"]
    assert est.details["kv_tokens"] == min(s["kv_tokens"] for s in stages)  # eq. PP2 (kv_cache_utils.py 1599-1612)
    assert est.details["admitted_sequences"] == min(s["admitted_sequences"] for s in stages)
    k = est.details["pipeline_binding_stage"]
    layers = stages[k]["layers"][1] - stages[k]["layers"][0] + 1  # 32 over 3 stages: 11/11/10 (vLLM)
    per_token = 2 * 8 * 128 * 2  # K and V x 8 KV heads x head_dim 128 x 2 B, one layer
    assert whole.details["kv_bytes_per_sequence"] == 8192 * per_token * 32
    assert est.details["kv_bytes_per_sequence"] == 8192 * per_token * layers
    assert [s["layers"] for s in stages] == [[0, 10], [11, 21], [22, 31]]
    # the binding stage's pool: the whole model's budget less its own weights and its own profile run (the same
    # graphs and non-torch figures), its blocks of 16 tokens at its own layers' bytes per token. vLLM samples in the
    # profile run on the last stage only (gpu_model_runner.py profile_run lines 5785-5789): the binding stage here
    # is an 11-layer one before the last, whose activations are the forward's alone
    def act(e):
        return next(i for i in e.items if i.name == "activations")

    assert k < 2 and "no sampler" in act(est).formula and "sampler 1024 seqs" in act(whole).formula
    pool = (whole.details["kv_pool_bytes"] + whole.details["weights_bytes"] - est.details["weights_bytes"]
            + act(whole).bytes - act(est).bytes)
    assert abs(est.details["kv_pool_bytes"] - pool) <= 1
    assert est.details["kv_tokens"] == pool // (16 * per_token * layers) * 16


def test_binding_stage_memory_is_per_device_and_devices_per_replica():
    spec = load_model("llama-3.1-405b")
    est = estimate_inference(spec, engine="sglang", device="h100", weights="fp8", tensor_parallel=8,
                             pipeline_parallel=2)
    assert est.details["devices_per_replica"] == 16
    assert any("worst of 2 pipeline stages" in w for w in est.warnings)
    assert est.details["weights_bytes"] == est.details["pipeline_stages"][est.details["pipeline_binding_stage"]][
        "weights_bytes"]
    assert any(a.name == "pipeline_parallel" and a.value == 2 for a in est.assumptions)


@pytest.mark.parametrize("kw, words", [
    ({"engine": "llamacpp"}, "not llamacpp"),
    ({"engine": "transformers"}, "not transformers"),
    ({"engine": "vllm", "pipeline_parallel": 40}, "exceeds the model's 32 decoder layers"),
])
def test_refusals(kw, words):
    with pytest.raises(ValueError, match=words):
        estimate_inference(load_model("llama-3.1-8b"), **{"pipeline_parallel": 2, **kw})


@pytest.mark.parametrize("model, engine, words", [
    ("gemma-3-27b-it", "sglang", "model_runner.py lines 1571-1579"),  # SGLang: sliding/full pools of every layer
    ("qwen3-next-80b-a3b-thinking", "sglang", "TODO support pp"),
    ("t0_3b", "vllm", "SupportsPP"),  # encoder-decoder
])
def test_mixed_cache_kinds_refused(model, engine, words):
    with pytest.raises(ValueError, match=words):
        estimate_inference(load_model(model), engine=engine, pipeline_parallel=2)


def test_micro_batch_and_step():
    # vLLM keeps pp batches in flight (multiproc_executor.py 469-472): C sequences in min(C, pp) micro-batches
    assert [serving_pipeline_micro_batch(c, 4) for c in (1, 2, 4, 5, 64)] == [1, 1, 1, 2, 16]
    # (pp - 1) sends: 3 x 1 MB at 100 GB/s = 30 us
    assert math.isclose(serving_pipeline_step(0.01, 1e6, 100e9, 4), 0.01003)
    assert serving_pipeline_step(0.01, 1e6, None, 4) == 0.01

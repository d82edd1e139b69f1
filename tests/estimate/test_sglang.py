"""SGLang engine profile against SGLang's own rules (SGLang 0.5.23, PyPI wheel; file:line in each test) and a
published start-up log.

Expected values are worked out by hand from the cited lines; the log line is quoted with its source.
"""

from __future__ import annotations

import re

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.estimate.inference.sglang import default_mem_fraction_static, prefill_graph_sizes
from llmsizer.units import GiB, MiB


def test_prefill_graph_sizes():
    """cuda_graph_hook.py:480-497: 4..32 step 4 (8), 48..256 step 16 (14), 288..512 step 32 (8), 576..1024 step 64
    (8), 1280..4096 step 256 (12), then 4608.. step 512 up to max_bs: 8192 -> 8 more."""
    assert len(prefill_graph_sizes(4096)) == 8 + 14 + 8 + 8 + 12
    assert len(prefill_graph_sizes(8192)) == 58
    assert prefill_graph_sizes(2048)[-1] == 2048


@pytest.mark.parametrize("mib, tp, mla, expected", [
    # H100 80GB (nvidia-smi 81559 MiB): tier < 90 GiB: chunked 8192, max_bs 256 (memory_hook.py:132-145);
    # reserved = 512 + 1.5 x 8192 + 1 x 1024/8 + (2 x 256 + 8 x 58) = 512 + 12288 + 128 + 976 = 13904 MiB
    # (:309-313), above the 10240 floor (:314-315); round((81559 - 13904) / 81559, 3) = 0.830 (:324-326)
    (81559, 1, False, 0.830),
    # RTX 4090 (24564 MiB): tier < 35 GiB: chunked 4096, max_bs 48 (:101-117); reserved = 512 + 6144 + 128
    # + (96 + 8 x 50) = 7280; no floor; round(17284 / 24564, 3) = 0.704
    (24564, 1, False, 0.704),
    # the same card at TP 4: max_bs 160, reserved = 512 + 6144 + 512 + (320 + 400) = 7888; 16676/24564 = 0.679
    (24564, 4, False, 0.679),
    # H200 (143771 MiB): tier < 160 GiB, same numbers as H100: 13904; round(129867 / 143771, 3) = 0.903
    (143771, 1, False, 0.903),
    # H100 with an MLA model: prefill graphs 1.5 GiB (:387-389): 512 + 12288 + 128 + 512 + 1536 = 14976 -> 0.816
    (81559, 1, True, 0.816),
])
def test_default_mem_fraction_static(mib, tp, mla, expected):
    assert default_mem_fraction_static(mib * MiB, tp, mla)[0] == expected


def test_token_pool_and_cell_size_llama_8b_on_h100():
    """Eq. (2)-(3): pool = mem_fraction_static x (memory - CUDA context) - weights; Llama-3.1-8B bf16: cell_size =
    8 kv heads x (128 + 128) x 32 layers x 2 B = 131072 B/token (pool_configurator.py:492-498)."""
    mem = 81559 * MiB
    est = llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", memory=mem, context=8192)
    d = est.details
    assert d["kv_cell_bytes"] == 8 * 256 * 32 * 2 and d["mem_fraction_static"] == 0.830
    weights = est.item("weights").bytes
    pool = int(0.830 * (mem - CUDA_CONTEXT.expected)) - weights
    assert d["kv_pool_bytes"] == pool and d["max_total_num_tokens"] == pool // 131072
    # max_running_requests (kv_cache_configurator.py:3123-3132): min(max(min(tokens / 131072 x 512, 4096), 2048),
    # tokens // 2)
    tokens = d["max_total_num_tokens"]
    assert d["max_running_requests"] == min(max(min(int(tokens / 131072 * 512), 4096), 2048), tokens // 2)
    assert d["admitted_sequences"] == min(tokens // 8192, d["max_running_requests"])
    assert d["fits"] and "SGLang token pool" in d["verdict"]


def test_published_log_qwen3_235b_fp8_tp4():
    """vllm-project/vllm#21348 (2025-07-22): Qwen3-235B-A22B-FP8 on 4 x H100, `sglang.launch_server --tp 4
    --mem-fraction-static 0.93` logged "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    (SGLang's GB = 2^30 B). The cell size must reproduce the logged K size exactly; the pool is within 12 %: the
    measured gap is +9.6 % (llmsizer 403k tokens), the part of what SGLang's processes allocate before the pool
    besides the CUDA context and NCCL buffers, not modelled."""
    est = llmsizer.estimate_inference("qwen3-235b-a22b", engine="sglang", weights="fp8-block", memory=81559 * MiB,
                                      tensor_parallel=4, mem_fraction_static=0.93, context=4096)
    d = est.details
    logged_tokens, logged_k = 367404, 8.23 * GiB
    # 4 kv heads / TP 4 = 1 per rank x (128 + 128) x 94 layers x 2 B = 48128 B per token
    assert d["kv_cell_bytes"] == 48128
    assert abs(logged_tokens * d["kv_cell_bytes"] / 2 - logged_k) < 0.005 * GiB  # K is half the cell
    assert abs(d["max_total_num_tokens"] / logged_tokens - 1) < 0.12


def test_sglang_and_vllm_differ_for_the_same_card_and_say_why():
    est = llmsizer.estimate_inference("qwen2.5-7b", engine="sglang", memory=24 * GiB, context=8192)
    d = est.details
    v = llmsizer.estimate_inference("qwen2.5-7b", engine="vllm", memory=24 * GiB, context=8192)
    assert d["vllm_kv_tokens"] == v.details["kv_tokens"] != d["max_total_num_tokens"]
    assert "mem_fraction_static" in d["engines_differ_because"] and "profiled activations" in d["engines_differ_because"]


def test_fit_and_cli_go_through_the_core():
    r = llmsizer.fit("llama-3.1-8b", "h100-sxm", engine="sglang", context=8192, concurrency=4)
    assert r.engine == "sglang" and r.fits and r.estimate.details["max_total_num_tokens"] > 0
    with pytest.raises(InputError, match="sglang profile models GPU serving"):
        llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", device="cpu")
    out = run_cli("infer", "qwen2.5-7b", "--engine", "sglang", "--memory", "24GiB", "--context", "32k",
                  "--concurrency", "8")
    assert out.returncode == 1 and "max_total_num_tokens" in out.stdout and "vs vLLM" in out.stdout
    given = run_cli("infer", "qwen2.5-7b", "--engine", "sglang", "--memory", "24GiB", "--mem-fraction-static", "0.85",
                    "--json")
    assert given.returncode == 0 and '"mem_fraction_static": 0.85' in given.stdout


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_workload_need_is_every_item_with_the_load_in_place_of_the_pool(tp):
    """What the load needs of the card (fit's 'this workload needs', plan's need at peak) is the breakdown with the
    KV of the load instead of the whole pool: weights + KV needed + SGLang's reserve + CUDA context + (with TP) the
    NCCL buffers measured before the pool is sized (distributed/bootstrap.py). Before: the NCCL buffers were left
    out with TP > 1 (Llama-3.3-70B AWQ on 2 x 24 GiB: 26.54 GiB needed < 26.47 GiB of items + 0.08 GiB of KV)."""
    est = llmsizer.estimate_inference("llama-3.3-70b-instruct", engine="sglang", weights="awq-int4", memory=24 * GiB,
                                      tensor_parallel=tp, context=4096)
    d = est.details
    items = {i.name: i.bytes for i in est.items if i.location == "device"}
    assert ("communicators" in items) is (tp > 1)
    assert d["workload_bytes"] == sum(items.values()) - items["kv_cache"] + d["kv_needed_bytes"]


def test_an_explicit_headroom_is_refused_for_sglang_the_default_is_not():
    """SGLang keeps no free margin: its pool is mem_fraction_static of the memory (eq. 2), so a headroom the user
    gives would be ignored; it is refused instead. recommend passes no headroom of its own (None: the default),
    which every engine accepts. vLLM applies the headroom as 1 - gpu_memory_utilization, so giving both is refused."""
    with pytest.raises(InputError, match="headroom does not apply to engine sglang"):
        llmsizer.estimate_inference("qwen2.5-7b", engine="sglang", memory=24 * GiB, headroom=0.2)
    with pytest.raises(InputError, match="headroom does not apply to engine sglang"):
        llmsizer.fit("qwen2.5-7b", "rtx-4090", engine="sglang", headroom=0.2)
    r = llmsizer.fit("qwen2.5-7b", "rtx-4090", engine="sglang")
    assert not any(a.name == "headroom" for a in r.assumptions)  # not applied, so not recorded as a default
    with pytest.raises(InputError, match="not both"):
        llmsizer.estimate_inference("qwen2.5-7b", engine="vllm", memory=24 * GiB, headroom=0.2,
                                    gpu_memory_utilization=0.8)
    cli = run_cli("fit", "qwen2.5-7b", "--device", "rtx-4090", "--engine", "sglang", "--headroom", "0.2")
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and "headroom does not apply" in cli.stderr
    rec = run_cli("recommend", "qwen2.5-0.5b", "--engine", "sglang", "--json")
    assert rec.returncode in (0, 1) and "headroom does not apply" not in rec.stdout + rec.stderr


def test_a_card_smaller_than_sglangs_reserve_is_too_small_without_negative_rows():
    """memory_hook.py:289-339: reserved >= 512 + 1.5 x max(chunked_prefill_size, 2048) MiB = 3584 MiB, more than
    a 1 GiB card, so eq. (1) is negative: no token pool at all. Said plainly, exit 1, no negative fraction."""
    mfs, parts = default_mem_fraction_static(1 * GiB)
    assert parts["reserved_mib"] >= 512 + 1.5 * 2048 > 1024 and mfs < 0
    est = llmsizer.estimate_inference("qwen2.5-0.5b", engine="sglang", memory=1 * GiB)
    d = est.details
    assert not d["fits"] and "too small for SGLang" in d["verdict"]
    assert d["mem_fraction_static"] is None and d["max_total_num_tokens"] == 0
    assert all(i.bytes >= 0 for i in est.items)
    assert not any(a.name == "mem_fraction_static" for a in est.assumptions)
    for cmd in (["infer", "qwen2.5-0.5b", "--engine", "sglang", "--memory", "1GiB"],
                ["fit", "qwen2.5-0.5b", "--device", "rtx-4090", "--engine", "sglang", "--memory", "1GiB"]):
        out = run_cli(*cmd)
        assert out.returncode == 1, out.stderr
        assert "too small for SGLang" in out.stdout and "DOES NOT FIT" in out.stdout or "fits: NO" in out.stdout
        assert not re.search(r"mem_fraction_static -\d|- -\d|runtime_reserve", out.stdout)  # no negative pool rows


def test_the_vs_vllm_line_names_the_reserve_the_table_shows(capsys):
    """probe18 F2: ``infer gpt-oss-120b --engine sglang --device h100-sxm --context 32k --concurrency 16`` printed
    runtime_reserve 13.43 GiB = (1 - 0.83) x 78.98 GiB in the table and "leaving 13.58 GiB" in the vs-vLLM line (the
    default rule's reserve on the whole 81,559 MiB, before the CUDA context). One pool, one reserve: the line names the
    table's row, (1 - mem_fraction_static) x the memory free before loading."""
    from llmsizer.cli.main import main
    from llmsizer.units import format_bytes

    args = ["gpt-oss-120b", "--engine", "sglang", "--device", "h100-sxm", "--context", "32k", "--concurrency", "16"]
    # the device's own answer (its pool is of CUDA's total, the catalog's memory_cuda, below the 81,559 MiB)
    est = llmsizer.estimate_inference("gpt-oss-120b", engine="sglang", device="h100-sxm", context=32768,
                                      concurrency=16)
    reserve = next(i.bytes for i in est.items if i.name == "runtime_reserve")
    default_rule = format_bytes(est.details["sglang_reserved_mib"] * 2**20)
    assert format_bytes(reserve) != default_rule  # the two figures the line and the table once disagreed on
    assert main(["infer", *args]) == 1  # does not fit: 2 of the 16 sequences admitted
    out = capsys.readouterr().out
    table = next(ln for ln in out.splitlines() if ln.startswith("runtime_reserve"))
    line = next(ln for ln in out.splitlines() if "vs vLLM" in ln)
    assert format_bytes(reserve) in table and format_bytes(reserve) in line and default_rule not in line

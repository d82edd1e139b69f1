"""Plan figures on small requests, checked against their formulas with the arithmetic written out.

Model: Qwen2.5-0.5B (hidden 896, 24 layers, 14 query heads and 2 KV heads of 64, intermediate 4864, vocabulary
151,936, tied embeddings): small enough to plan in a blink, with a vocabulary above 65,500 (4-byte token ids).
"""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.duration import kernels_per_micro_step
from llmsizer.formulas.elementwise_traffic import LayerWidths, layer_bytes, loss_bytes
from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from llmsizer.specs import TrainingWorkload
from request.helpers import job_yaml

# LoRA rank r on q, k, v, o, gate, up, down of one Qwen2.5-0.5B layer: r x (in + out) each
#   q 896+896, k 896+128, v 896+128, o 896+896, gate 896+4864, up 896+4864, down 4864+896 = 22,912 per unit rank
LORA_PER_RANK_PER_LAYER = 1792 + 1024 + 1024 + 1792 + 5760 * 3
LORA_16 = 16 * LORA_PER_RANK_PER_LAYER * 24  # 8,798,208 adapter parameters


def plan_of(text: str, **kw):
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False, **kw)


@pytest.fixture(scope="module")
def lora_plan():
    text = job_yaml("training", """\
    method: lora
    peft: {rank: 16, targets: all-linear}
    settings: {micro_batch: 8, seq_len: 1024, grad_accumulation: 4, epochs: 2}
    dataset: {size: 50 MB, tokens: 10M tokens, examples: 10k, format: jsonl}
    checkpoints: {resume: true, interval: 30 min, keep: 2, storage: 1 GB}
    resources: {device: h100-sxm, count: 1, storage: 10 GB, price_per_hour: $4/h}
    """)
    return plan_of(text).jobs[0]


def test_lora_checkpoint_and_storage(lora_plan):
    st = lora_plan.section("storage")
    assert LORA_16 == 8_798_208
    one = LORA_16 * (4 + 8)  # fp32 adapters (PEFT under AMP) + AdamW's two fp32 moments
    assert st.value("checkpoint_one") == one == 105_578_496
    assert st.value("checkpoints") == (2 + 1) * one  # keep 2, one more while the newest is written
    # tokenized: 10M ids x 4 B + 10k documents x 12 B + 8 B x (10k + 1) document indices
    assert st.value("dataset_tokenized") == 10_000_000 * 4 + 10_000 * 12 + 8 * 10_001 == 40_200_008
    assert st.value("dataset_raw") == 50_000_000
    assert st.value("final_model") == LORA_16 * 4  # the adapter file in fp32
    steps = math.ceil(2 * 10_000_000 / (8 * 1024 * 4))  # tokens / (micro x seq x accumulation x 1 device) = 611
    assert steps == 611 and lora_plan.value("duration", "steps") == steps
    assert st.value("logs") == 611 * 1024
    spec = load_model("qwen2.5-0.5b")
    assert st.value("base_model") == 2 * count_params(spec).total  # bf16 checkpoint as published
    parts = ("base_model", "dataset_raw", "dataset_tokenized", "checkpoints", "final_model", "logs")
    subtotal = sum(st.value(k) for k in parts)
    assert st.value("subtotal") == subtotal
    assert st.value("total") == math.ceil(subtotal * 1.2)


def test_lora_duration_and_cost(lora_plan):
    d, c = lora_plan.section("duration"), lora_plan.section("cost")
    n = count_params(load_model("qwen2.5-0.5b")).total
    # LoRA rank 16 on every linear of Qwen2.5-0.5B (hidden 896, kv 2 x 64, MLP 4864, 24 layers): r x (in + out)
    n_lora = 24 * 16 * ((896 + 896) * 2 + (896 + 128) * 2 + (896 + 4864) * 3)
    # a frozen base skips the weight-gradient GEMMs: 4N + 6 N_lora + 12 L d s (training_time.py eq. 4)
    fpt = 4 * n + 6 * n_lora + 12 * 24 * (14 * 64) * 1024
    assert d.value("flops_per_token") == fpt
    dev = builtin_catalog().devices["h100-sxm"]
    peak, bw = dev.peak_flops("bf16")[0], 3350e9  # H100 SXM HBM3 3.35 TB/s
    # GEMM shapes (formulas/gemm_shapes.py), written out: 8 x 1024 tokens; per layer (in, out) of q, k, v, o, gate,
    # up, down, each with lora_A (in -> 16) and lora_B (16 -> out) trained; the frozen lm_head 896 -> 151936. Every
    # width >= 128 is a multiple of 128 (no tile loss); a GEMM is memory-bound below peak / bandwidth FLOP/B
    # (2 M N K / (2 (M K + K N + M N)) bf16 bytes).
    t = 8 * 1024
    base = [(896, 896), (896, 128), (896, 128), (896, 896), (896, 4864), (896, 4864), (4864, 896)]
    linears = [(i, o, False) for i, o in base] + [(i, 16, True) for i, _ in base] + [(16, o, True) for _, o in base]
    gemms = [g for i, o, tr in linears * 24 + [(896, 151936, False)]
             for g in [(t, o, i), (t, i, o)] + ([(o, i, t)] if tr else [])]
    flops = sum(2 * m * n_ * k for m, n_, k in gemms)
    # Hopper's GEMM utilisation, read from the calibrated constant (not typed here): its value is re-derived from
    # torchtitan's PM0501 by tests/hardware/test_training_calibration.py; this test checks the plan's arithmetic
    u = E.TRAINING_UTILIZATION_BY_ARCH["hopper"].expected
    time = sum(max(2 * m * n_ * k / (peak * u), 2 * (m * k + k * n_ + m * n_) / bw) for m, n_, k in gemms)
    e = flops / (peak * u) / time
    assert 0.6 < e < 0.9  # the rank-16 adapter GEMMs of a 896-wide model are memory-bound on an H100
    # the memory-bound kernels (formulas/elementwise_traffic.py E1-E3: eager, frozen norms, the seven adapters of
    # every layer, fp32 loss over 151,936 logits) at 0.8 x the bandwidth (efficiency.MEMORY_BOUND_BANDWIDTH)
    widths = LayerWidths(896, 4864, 896, 128, 64)
    fwd, bwd = layer_bytes(widths, 2, compiled=False, norms_trained=False, adapters=tuple(base))
    per_token = 24 * (fwd + bwd) + loss_bytes(151936, 2, compiled=False)
    # the causal flash-attention kernel apart (training_time.py eq. (10)): 2 d s forward + 5 d s backward per layer
    # and token instead of PaLM's 12 d s; the default SDPA runs FlashAttention-2 (warp-level mma.sync) on an H100, at
    # its A100 rate: its speed over llm-foundry's Triton kernel (Dao 2023 section 4.1: 1.3-1.5x forward, 2x backward;
    # 73 % / 63 % of the peak; backward 2.5 x the forward's FLOPs) x rho x u_ampere (efficiency.FLASH_ATTENTION_SHARE
    # and Ampere's u, calibrated together on the Triton rows PM0890-0896 and re-derived there by
    # tests/hardware/test_training_calibration.py) x the A100's 312 TFLOP/s, times FlashAttention-2's own H100 / A100
    # forward + backward speed at 1k tokens, head dim 64, causal: 192 / 119 TFLOP/s (Dao 2023 Fig. 7 (c) / Fig. 4 (c);
    # efficiency.attention_kernel_share)
    fa2 = E.ATTENTION_KERNEL_SPEED["flash-attn-2"].expected  # re-derived from Dao 2023 in test_attention_kernels.py
    rho, u_ampere = E.FLASH_ATTENTION_SHARE.expected, E.TRAINING_UTILIZATION_BY_ARCH["ampere"].expected
    attn_counted, attn_run = 12 * 24 * (14 * 64) * 1024, 7 * 24 * (14 * 64) * 1024
    # and the kernel's A100 rate at 1k tokens over its 16k rate, 119 / 171 TFLOP/s (Dao 2023 Fig. 4 (c), head dim 64:
    # efficiency.fa2_sequence_level; left out here until PM0720's refit made this run device-bound by 0.3 %)
    level = 119 / 171
    device = (t * (fpt - attn_counted) / (peak * u * e)
              + t * attn_run / (312e12 * 192 / 119 * level * fa2 * rho * u_ampere)
              + t * per_token / (0.8 * bw))
    # the host's kernel launches overlap that work and the micro-step takes the longer (formulas/launch_overhead.py
    # eq. K1): the kernel count is checked in tests/formulas/test_launch_overhead.py, the seconds per kernel re-derived
    # in tests/hardware/test_training_calibration.py. The device side (0.1161 s) and the 5,425 launches x 21.35 us
    # (0.1158 s) are within 0.3 % of each other: the micro-step is the longer
    spec = load_model("qwen2.5-0.5b")
    w = TrainingWorkload(method="lora", rank=16, targets=("all-linear",), micro_batch=8, seq_len=1024,
                         grad_accumulation=4)
    host = kernels_per_micro_step(spec, w, dev.capability) * E.HOST_SECONDS_PER_KERNEL.expected
    assert 0.95 * host < device < 1.05 * host  # device work and launches within a few % of each other: both matter
    t_micro = max(device, host)
    # per optimizer step: fused AdamW over the fp32 adapters (2 x 4 + 4 + 4 x 4 = 28 B each, optimizer_step.py O2)
    # and three gradient accumulations (3 x 4 B each, O3)
    t_step = 4 * t_micro + n_lora * 28 / (0.8 * bw) + 3 * n_lora * 12 / (0.8 * bw)
    # one device, no communication or paging: steps of 4 micro-steps of t tokens
    secs = 20_000_000 / (4 * t) * t_step
    assert d.value("seconds") == pytest.approx(secs)
    # the step time is one step's (review16 item 11), not the wall clock over ceil(610.35) = 611 steps
    assert d.value("steps") == 611 and d.value("step_seconds") == pytest.approx(t_step)
    assert c.value("hourly_total") == pytest.approx(4.0 * secs / 3600)
    # an interruption loses at most one interval (30 min) when the run is longer than that
    assert d.value("lost_per_interruption") == pytest.approx(min(1800.0, secs))
    assert d.value("checkpoints_written") == int(secs // 1800)


def test_inference_traffic_storage_and_cost():
    text = job_yaml("inference", """\
    traffic:
      concurrency: {typical: 4, peak: 8}
      context: {typical: 2k, peak: 4k}
      output: {typical: 200, peak: 400}
    service: {duration: 6 months, hours_per_day: 12, days_per_week: 5, maintenance_windows: [Sun]}
    access: {stream: true}
    operations: {logs: {retention: 10 days, content: false}}
    resources: {device: l4, count: 1, price_per_hour: $1/h}
    """)
    j = plan_of(text).jobs[0]
    spd, net, st, cost = (j.section(k) for k in ("speed", "network", "storage", "cost"))
    from llmsizer.formulas import network as N
    w = spd.value("ttft_typical") + 200 / spd.value("tps_user_typical")  # seconds per request
    rate = 4 / w  # Little's law
    assert net.value("requests_typical") == pytest.approx(rate)
    assert net.value("ingress_typical") == pytest.approx(rate * ((2048 - 200) * 4 + N.REQUEST_OVERHEAD_BYTES))
    assert net.value("egress_typical") == pytest.approx(rate * (200 * N.STREAM_BYTES_PER_TOKEN
                                                                + N.RESPONSE_OVERHEAD_BYTES))
    hours = 730 * 12 * 5 / 168  # 260.7 service hours a month
    assert cost.value("service_hours_month") == pytest.approx(hours)
    assert cost.value("monthly_hourly") == pytest.approx(1.0 * hours)
    assert cost.value("hourly_total") == pytest.approx(hours * 6)  # six months of 730 h
    assert cost.value("break_even_discount") == pytest.approx(1 - hours / 730)
    busy = hours / 730
    assert st.value("logs") == math.ceil(rate * 10 * 86400 * busy * 1024)
    assert st.value("total") == math.ceil((st.value("model_files") + st.value("logs")) * 1.2)


def test_dynamic_lora_slots_cost_device_memory():
    text = ("jobs:\n"
            "  - name: ft\n    kind: training\n    model: {name: qwen2.5-0.5b}\n    method: lora\n"
            "    peft: {rank: 16}\n    dataset: {tokens: 1M}\n"
            "  - name: chat\n    kind: inference\n    model: {from_job: ft}\n"
            "    adapters: {mode: dynamic, count: 5, max_loaded: 3}\n"
            "    traffic: {concurrency: {typical: 2, peak: 4}, context: {typical: 1k, peak: 2k}}\n"
            "    resources: {device: l4}\n")
    j = plan_of(text).job("chat")
    # vLLM buffers for 3 slots of rank 16 on every linear, bf16: 3 x 8,798,208 x 2 B
    assert j.value("memory", "adapter_slots") == 3 * LORA_16 * 2 == 52_789_248
    assert j.value("storage", "adapter_files") == 5 * LORA_16 * 2
    note = next(n for n in j.notes if n.startswith("Deploying"))
    assert "merged" in note and "dynamically" in note and "16.78 MiB" in note  # one slot: 17,596,416 B

"""Speed, training-time and cost formulas against hand-computed textbook cases (arithmetic in each test)."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.cost import cost_per_million_tokens, energy_kwh, power_cost, run_cost
from llmsizer.formulas.speed import (
    allreduce_time,
    attended_tokens,
    attention_flops,
    batched_decode_time,
    compute_time,
    decode_flops,
    memory_time,
    moe_expert_fraction,
    phase_time,
    prefill_flops,
    roofline,
    unfused_attention_time,
)
from llmsizer.formulas.training_time import (
    achieved_utilization,
    device_hours,
    megatron_flops_per_iteration,
    tokens_per_second,
    training_flops_per_token,
    training_seconds,
)


def test_decode_of_a_7b_fp16_model_is_bandwidth_bound() -> None:
    # 7e9 params x 2 B = 14e9 B per token; at 1000 GB/s: 14e9 / 1e12 = 0.014 s -> 71.4 tokens/s
    assert memory_time(14e9, 1e12, 1.0) == pytest.approx(0.014)
    # at 80 % of peak: 14e9 / 0.8e12 = 0.0175 s
    assert memory_time(14e9, 1e12, 0.8) == pytest.approx(0.0175)
    # compute for one token: 2 x 7e9 = 1.4e10 FLOP at 312e12 x 0.5 -> 8.97e-5 s, far below 0.014 s
    t = phase_time(1.4e10, 14e9, 312e12, 1e12, 0.5, 1.0)
    assert t.bound == "memory" and t.seconds == pytest.approx(0.014)


def test_batched_decode_adds_the_extra_columns_to_the_weight_stream() -> None:
    # eq. (10), hand arithmetic: 8e9 B weights + 32 x 0.03e9 B KV = 8.96e9 B at 273e9 x 0.923 B/s = 35.56 ms;
    # 2 x 7e9 x 31 = 4.34e11 FLOP at 250e12 x 0.157 = 11.06 ms; 1e11 attention FLOP at 125e12 x 0.4 = 2 ms;
    # plus 2.6 ms fixed -> 51.22 ms (the roofline max of eq. 3 would give 35.56 + 2.6 = 38.16 ms)
    t = batched_decode_time(8.96e9, 273e9, 0.923, 4.34e11, 250e12, 0.157, 1e11, 125e12, 0.4, 0.0, 2.6e-3)
    assert t.memory_seconds == pytest.approx(8.96e9 / (273e9 * 0.923))
    assert t.compute_seconds == pytest.approx(4.34e11 / (250e12 * 0.157) + 1e11 / (125e12 * 0.4))
    assert t.seconds == pytest.approx(0.035560 + 0.011057 + 0.002 + 0.0026, rel=1e-4)
    # one sequence: no extra columns, no attention -> the bandwidth term plus the fixed part (eq. 7)
    one = batched_decode_time(8e9, 273e9, 0.923, 0.0, 250e12, 0.157, 0.0, 125e12, 0.4, 0.0, 2.6e-3)
    assert one.seconds == pytest.approx(8e9 / (273e9 * 0.923) + 2.6e-3)
    with pytest.raises(InputError):
        batched_decode_time(-1.0, 273e9, 0.923, 0.0, 250e12, 0.157, 0.0, 125e12, 0.4)


def test_prefill_flops_head_on_the_last_token() -> None:
    # eq. (2'): N_mm = 7e9 of which the head H = 5e8, T = 1000 tokens, L = 32, d = 4096
    # layer stack: 2 x 6.5e9 x 1000 = 1.3e13; head once: 2 x 5e8 = 1e9
    # attention: 4 x 32 x 4096 x (1000 x 1001 / 2) = 524288 x 500500 = 2.62406144e11
    attn = attention_flops(32, 4096, 1000)
    assert attn == 2.62406144e11
    f = prefill_flops(7e9, 5e8, 1000, attn)
    assert f == pytest.approx(1.3e13 + 1e9 + 2.62406144e11)
    # the textbook eq. (2) (head on every token) counts 999 more head products: 2 x 5e8 x 999 = 9.99e11
    assert prefill_flops(7e9, 5e8, 1000, attn, logit_tokens=1000) - f == pytest.approx(9.99e11)
    # the layer stack's products alone: no head, no attention
    assert prefill_flops(7e9, 5e8, 1000, logit_tokens=0) == 1.3e13
    # on one A100 (312e12 dense BF16) at 50 %: 1.3263406144e13 / 1.56e14 = 0.085022 s
    assert compute_time(f, 312e12, 0.5) == pytest.approx(0.0850218342564, rel=1e-9)
    with pytest.raises(InputError):
        prefill_flops(7e9, 5e8, -1)


def test_attention_flops_with_past_and_window() -> None:
    # 10 new tokens after 0: attended 1+2+...+10 = 55
    assert attended_tokens(10) == 55
    # after 5 cached: 6+7+...+15 = 10 x 5 + 55 = 105
    assert attended_tokens(10, 5) == 105
    # window 4: min(t, 4) for t = 1..10 = 1+2+3+4 + 6 x 4 = 34
    assert attended_tokens(10, 0, 4) == 34
    # window 8 after 5 cached: terms 6,7,8 then 8 x 7 -> 21 + 56 = 77
    assert attended_tokens(10, 5, 8) == 77
    # 4 x L x d x attended: 4 x 2 x 8 x 55 = 3520
    assert attention_flops(2, 8, 10) == 3520


def test_decode_flops_every_sequence_sampled() -> None:
    # eq. (1'): 4 sequences x 2 x 8e9 + the attention of 4 x 4 x 32 x 4096 x 1000 = 6.4e10 + 2.097152e9
    attn = 4 * attention_flops(32, 4096, 1, 999)   # one new token after 999 cached: attends 1000
    assert attn == 4 * 4 * 32 * 4096 * 1000
    assert decode_flops(8e9, 4, attn) == pytest.approx(6.4e10 + 2.097152e9)
    assert decode_flops(8e9, 0) == 0.0
    with pytest.raises(InputError):
        decode_flops(8e9, -1)


def test_roofline_ridge_point() -> None:
    # 2e9 FLOP over 1e9 B: intensity 2 FLOP/B; ridge 100e12 / 1e12 = 100 -> memory-bound, attainable 2 x 1e12
    r = roofline(2e9, 1e9, 100e12, 1e12)
    assert (r.intensity, r.ridge, r.bound) == (2.0, 100.0, "memory")
    assert r.attainable_flops == pytest.approx(2e12)
    # 1e15 FLOP over 1e9 B: intensity 1e6 > 100 -> compute-bound at the peak
    r = roofline(1e15, 1e9, 100e12, 1e12)
    assert r.bound == "compute" and r.attainable_flops == 100e12


def test_moe_expert_coverage() -> None:
    # k=2 of E=8: one token touches 2/8 = 0.25; two tokens 1 - 0.75^2 = 0.4375; 32 tokens ~1 - 0.75^32
    assert moe_expert_fraction(2, 8, 1) == pytest.approx(0.25)
    assert moe_expert_fraction(2, 8, 2) == pytest.approx(0.4375)
    assert moe_expert_fraction(2, 8, 32) == pytest.approx(1 - 0.75**32)
    with pytest.raises(InputError):
        moe_expert_fraction(9, 8, 1)


def test_ring_allreduce() -> None:
    # 1 MB over 8 devices at 100 GB/s: 2 x 7/8 x 1e6 / 1e11 = 1.75e-5 s; one device: nothing to reduce
    assert allreduce_time(1e6, 8, 100e9) == pytest.approx(1.75e-5)
    assert allreduce_time(1e6, 1, 100e9) == 0.0


def test_training_flops_per_token_with_and_without_recompute() -> None:
    # N = 7e9, L = 32, d = 4096, s = 2048
    # none: 6 x 7e9 + 12 x 32 x 4096 x 2048 = 4.2e10 + 3221225472
    assert training_flops_per_token(7e9, 32, 4096, 2048) == pytest.approx(4.2e10 + 3221225472)
    # full: 8 x 7e9 + 16 x 32 x 4096 x 2048 = 5.6e10 + 4294967296
    assert training_flops_per_token(7e9, 32, 4096, 2048, "full") == pytest.approx(5.6e10 + 4294967296)
    with pytest.raises(InputError):
        training_flops_per_token(7e9, 32, 4096, 2048, "selective")


def test_gpt3_training_compute_matches_the_paper() -> None:
    # Brown et al. 2020, Table D.1: GPT-3 175B, 300B tokens, 3.14e23 FLOPs (6ND, attention excluded).
    # Ours: (6 x 175e9 + 12 x 96 x 12288 x 2048) x 300e9 = (1.05e12 + 2.899e10) x 3e11 = 3.237e23 (+3 %:
    # the attention term the paper leaves out)
    total = training_flops_per_token(175e9, 96, 12288, 2048) * 300e9
    assert total == pytest.approx(3.14e23, rel=0.05)


def test_recompute_formula_agrees_with_megatron_eq3() -> None:
    # Narayanan et al. 2021 eq. 3 per token = 96 l h^2 + 16 l h s + 6 h V. With N = 12 l h^2 (their
    # non-embedding count) our full-recompute 8N + 16 l h s equals it up to the logit term 6 h V.
    layers, h, s, v, b = 24, 2304, 2048, 51200, 512
    eq3_per_token = megatron_flops_per_iteration(b, s, layers, h, v) / (b * s)
    ours = training_flops_per_token(12 * layers * h * h, layers, h, s, "full") + 6 * h * v
    assert ours == pytest.approx(eq3_per_token, rel=1e-9)


def test_megatron_table1_row_reproduces_its_achieved_rate() -> None:
    # Table 1, 1.7B row: 32 GPUs at 137 TFLOP/s each = 44 % of 312. Utilisation from a throughput is the
    # inverse of eq. 3: tokens/s x F / (n R). Pick tokens/s so that n R u / F gives back u = 0.44.
    f = training_flops_per_token(1.7e9, 24, 2304, 2048, "full")
    tps = tokens_per_second(f, 32, 312e12, 0.44)
    assert achieved_utilization(tps, f, 32, 312e12) == pytest.approx(0.44)


def test_training_wall_clock_and_device_hours() -> None:
    # 1e12 tokens x 6e9 FLOP/token / (1000 devices x 312e12 x 0.5) = 6e21 / 1.56e17 = 38461.54 s
    secs = training_seconds(1e12, 6e9, 1000, 312e12, 0.5)
    assert secs == pytest.approx(38461.538, rel=1e-6)
    # device-hours: 1000 x 38461.54 / 3600 = 10683.76
    assert device_hours(secs, 1000) == pytest.approx(10683.76, rel=1e-6)


def test_costs() -> None:
    # $2/h for 30 minutes = $1
    assert run_cost(2.0, 1800) == pytest.approx(1.0)
    # $3.60/h at 100 tokens/s: 3.6 / 360000 tokens x 1e6 = $10 per million tokens
    assert cost_per_million_tokens(3.6, 100) == pytest.approx(10.0)
    # 700 W x 8 devices x 10 h = 56 kWh; at $0.15/kWh = $8.40
    assert energy_kwh(700, 10, 8) == pytest.approx(56.0)
    assert power_cost(700, 10, 0.15, 8) == pytest.approx(8.4)
    with pytest.raises(InputError):
        cost_per_million_tokens(1.0, 0)


def test_unfused_attention_is_the_larger_of_the_cache_read_and_the_work() -> None:
    # eq. (13), hand arithmetic: Llama-3-8B at 2048 cells: F = 4 x 4096 x 32 x 2048 = 1.0737e9 FLOP; w = 200 at
    # 330.3e12 FLOP/s -> 200 x 1.0737e9 / 330.3e12 = 0.650 ms; the cache, 2048 x 131072 B = 268.4 MB at
    # 1008e9 x 0.9 B/s = 0.296 ms: the work term binds
    f = 4 * 4096 * 32 * 2048
    kv = 2048 * 131072
    t = unfused_attention_time(kv, 1008e9, 0.9, f, 330.3e12, 200.0)
    assert t == pytest.approx(200 * f / 330.3e12)
    assert t == pytest.approx(0.650e-3, rel=0.001)
    # with w = 50 the work (0.1625 ms) is below the cache read (0.296 ms): the read binds
    assert unfused_attention_time(kv, 1008e9, 0.9, f, 330.3e12, 50.0) == pytest.approx(kv / (1008e9 * 0.9))
    with pytest.raises(InputError):
        unfused_attention_time(-1.0, 1008e9, 0.9, f, 330.3e12, 200.0)
    with pytest.raises(InputError):
        unfused_attention_time(kv, 1008e9, 0.9, f, 330.3e12, 0.0)


def test_phase_time_adds_attention_after_the_weight_stream() -> None:
    # 8e9 B at 1e12 x 0.9 = 8.889 ms, + 3 ms per-layer overhead + 0.65 ms attention = 12.539 ms
    t = phase_time(1.6e10, 8e9, 330e12, 1e12, 0.75, 0.9, overhead_seconds=3e-3, attention_seconds=0.65e-3)
    assert t.seconds == pytest.approx(8e9 / 0.9e12 + 3e-3 + 0.65e-3)
    assert t.attention_seconds == 0.65e-3 and t.to_dict()["attention_seconds"] == 0.65e-3
    assert "attention_seconds" not in phase_time(1.6e10, 8e9, 330e12, 1e12, 0.75, 0.9).to_dict()
    with pytest.raises(InputError):
        phase_time(1.6e10, 8e9, 330e12, 1e12, 0.75, 0.9, attention_seconds=-1.0)


def _chain_seconds(kernel_bytes: list[float], bandwidth: float, latency: float) -> float:
    """A chain of kernels run one after another, each taking the longer of its latency and its bytes at the
    bandwidth: the step eq. (15) bounds from below. Independent of phase_time."""
    return sum(max(latency, b / bandwidth) for b in kernel_bytes)


def test_kernel_latency_roof_is_eq_15() -> None:
    """Eq. (15) against a chain of kernels: exact where every kernel is latency-bound (the step is the chain, not
    the bytes) or every kernel is bandwidth-bound (the roof stays under the bytes: eq. 3 unchanged), a lower bound
    between; it carries through eq. (14); the source's launch-bound decode (gLLM PR #264: 8412 kernels, 22.7 ms of
    GPU time) is 2.70 us a kernel."""
    from llmsizer.formulas.speed import PhaseTime, host_overlapped_step, step_overhead

    bw, lat = 3.0e12, 3e-6
    for sizes in ([1e6] * 40, [1e9] * 40, [1e6] * 30 + [5e7] * 10):  # 0.33 us, 333 us, mixed (16.7 us)
        chain = _chain_seconds(sizes, bw, lat)
        t = phase_time(0.0, sum(sizes), None, bw, 1.0, 1.0, floor_seconds=step_overhead(len(sizes), lat))
        assert t.seconds <= chain + 1e-15
        if all(b / bw <= lat for b in sizes) or all(b / bw >= lat for b in sizes):
            assert t.seconds == pytest.approx(chain, rel=1e-12)
        assert t.bound == ("kernel latency" if sizes[-1] == 1e6 else "memory")
    t = phase_time(0.0, 1e6, None, bw, 1.0, 1.0, comm_seconds=1e-3, floor_seconds=12e-3)
    assert t.seconds == pytest.approx(13e-3) and t.to_dict()["kernel_floor_seconds"] == 12e-3
    assert host_overlapped_step(t, 2e-3).floor_seconds == 12e-3 and host_overlapped_step(t, 2e-3).bound == \
        "kernel latency"
    assert "kernel_floor_seconds" not in phase_time(0.0, 1e6, None, bw, 1.0, 1.0).to_dict()
    assert isinstance(t, PhaseTime)
    with pytest.raises(InputError):
        phase_time(0.0, 1e6, None, bw, 1.0, 1.0, floor_seconds=-1.0)


def _pipeline_seconds_per_step(device: float, host: float, steps: int = 400, depth: int = 2) -> float:
    """A discrete-event run of vLLM's asynchronous loop (vllm/v1/engine/core.py step_with_batch_queue, a queue of
    ``depth`` batches): the host prepares step n (schedule, inputs) when it is free and fewer than ``depth`` steps
    are in flight; the device runs step n when its inputs are ready and it is free. Independent of eq. (14)."""
    host_free = device_free = 0.0
    done: list[float] = []
    for n in range(steps):
        start = host_free if n < depth else max(host_free, done[n - depth])  # the queue holds `depth` batches
        ready = start + host
        host_free = ready
        finish = max(ready, device_free) + device
        device_free = finish
        done.append(finish)
    half = steps // 2
    return (done[-1] - done[half]) / (steps - 1 - half)


def test_host_overlapped_step_is_the_pipeline_steady_state() -> None:
    """Eq. (14) against a simulated two-stage pipeline: device-bound, host-bound and equal stages."""
    from llmsizer.formulas.speed import PhaseTime, host_overlapped_step

    for device, host in ((5.6e-3, 2.39e-3), (0.57e-3, 2.39e-3), (1e-3, 1e-3)):
        t = host_overlapped_step(PhaseTime(device, 0.0, device, 0.0), host)
        assert t.seconds == pytest.approx(_pipeline_seconds_per_step(device, host), rel=1e-9)
        assert t.bound == ("host" if host >= device else "memory")
        # one batch in flight (synchronous scheduling, vLLM before 0.14): the stages add (eq. 7's fixed term)
        assert _pipeline_seconds_per_step(device, host, depth=1) == pytest.approx(device + host, rel=1e-9)
    with pytest.raises(InputError):
        host_overlapped_step(PhaseTime(1e-3, 0.0, 1e-3, 0.0), -1.0)


def test_dequantize_time_is_eq_9_prime() -> None:
    """One F16 conversion per ubatch: ceil(T / u) x (quantized bytes + 2 bytes per weight) / rate."""
    from llmsizer.errors import InputError
    from llmsizer.formulas.speed import dequantize_time

    assert dequantize_time(4e9, 7e9, 512, 512, 1e12) == pytest.approx(18e-3)
    assert dequantize_time(4e9, 7e9, 513, 512, 1e12) == pytest.approx(36e-3)  # a second, partial ubatch
    assert dequantize_time(4e9, 7e9, 4096, 512, 1e12) == pytest.approx(8 * 18e-3)
    for bad in ((-1.0, 7e9, 512, 512, 1e12), (4e9, 7e9, 0, 512, 1e12), (4e9, 7e9, 512, 512, 0.0)):
        with pytest.raises(InputError):
            dequantize_time(*bad)

"""formulas/storage.py and formulas/network.py on small cases, each expected value worked out by hand."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas import network as N
from llmsizer.formulas import storage as S
from llmsizer.formulas.training_time import data_parallel_comm

# ------------------------------------------------------------------------------------------------ storage


def test_token_id_bytes_follow_megatron_optimal_dtype():
    assert S.token_id_bytes(32000) == 2      # < 65500: uint16
    assert S.token_id_bytes(65499) == 2
    assert S.token_id_bytes(65500) == 4      # int32 from 65500 on
    assert S.token_id_bytes(128256) == 4


def test_tokenized_dataset():
    # 1000 tokens x 2 B = 2000; index: 10 docs x (4 + 8) = 120 and 8 x (10 + 1) = 88 -> 2208
    assert S.tokenized_dataset_bytes(1000, 32000, 10) == 2208
    # no document count: ids only; 128k vocabulary -> 4 B per id
    assert S.tokenized_dataset_bytes(1000, 128256) == 4000


def test_raw_text_from_tokens():
    assert S.raw_text_bytes(1_000_000) == 4_000_000  # 4 characters (bytes) per token


def test_checkpoint_sizes():
    # 7B, PyTorch AMP + AdamW: 4 B fp32 model (the master) + 8 B Adam = 12 B/param
    assert S.checkpoint_bytes(7_000_000_000, 4, 0, 8) == 84_000_000_000
    # 7B, DeepSpeed bf16: 2 + 4 master + 8 = 14 B/param -> 98 GB, 7x the 14 GB bf16 file
    assert S.checkpoint_bytes(7_000_000_000, 2, 4, 8) == 98_000_000_000
    # LoRA: 40M adapter params x (4 fp32 + 8 Adam) = 480 MB, base not saved
    assert S.checkpoint_bytes(40_000_000, 4, 0, 8) == 480_000_000
    # frozen weights saved again (e.g. a framework that re-saves the base): + N_f x b_f
    assert S.checkpoint_bytes(10, 4, 0, 8, frozen_params_saved=100, frozen_bytes=2) == 120 + 200
    assert S.checkpoint_shard_bytes(98_000_000_000, 64) == 1_531_250_000
    assert S.checkpoint_shard_bytes(10, 3) == 4                       # ceil(10 / 3)


def test_kept_checkpoints_and_the_disk_filling():
    assert S.kept_checkpoints_bytes(100, 3) == 400                   # (3 + 1) x 100
    assert S.kept_checkpoints_bytes(100, 0) == 100
    assert S.checkpoints_written(10 * 3600, 3600) == 10
    assert S.checkpoints_written(3599, 3600) == 0
    # 1000 B disk, 100 B of other files, 300 B checkpoints every hour: 3 fit, the 4th fails at 4 h
    assert S.disk_full_at(1000, 100, 300, 3600.0) == (4, 14400.0)
    assert S.disk_full_at(1000, 1000, 300, 60.0) == (1, 60.0)        # no room for even one
    assert S.disk_full_at(1000, 1100, 300, 60.0) == (1, 60.0)


def test_adapters_logs_headroom():
    assert S.adapter_bytes(6_815_744, 2) == 13_631_488
    assert S.log_bytes(5000, 1024) == 5_120_000
    assert S.with_headroom(1000, 0.2) == 1200
    with pytest.raises(InputError):
        S.with_headroom(1000, 1.0)
    with pytest.raises(InputError):
        S.checkpoint_bytes(-1, 4, 0, 8)


# ------------------------------------------------------------------------------------------------ network

def test_ring_collectives():
    assert N.allreduce_bytes(1000, 4) == 1500.0       # 2 x 3/4 x 1000
    assert N.allreduce_bytes(1000, 1) == 0.0
    assert N.reduce_scatter_bytes(1000, 4) == 750.0   # 3/4 x 1000
    assert N.all_gather_bytes(1000, 4) == 750.0


def _step_bytes(g: float, w: float, d: int, mode: str, k: int = 1, sync: str = "micro-step") -> float:
    return data_parallel_comm(d, d, w, g, mode, 1, 1e9, grad_sync=sync, updated_bytes=w).bytes_per_step(k)


def test_data_parallel_per_step():
    """Bytes per optimizer step (formulas/training_time.py eqs. (7c)-(7e), the one home of data-parallel traffic)
    from ring volumes written out here: all-reduce 2 (d-1)/d S, all-gather / reduce-scatter (d-1)/d S."""
    g, w, d = 800.0, 400.0, 4  # gradient and weight bytes per replica, 4 ranks
    assert _step_bytes(g, w, d, "ddp", 3) == 3 * 1200.0                               # DDP every micro-step
    assert _step_bytes(g, w, d, "ddp", 3, "optimizer-step") == 1200.0                 # DDP no_sync: once
    assert _step_bytes(g, w, d, "zero1", 2) == 1200.0 + 300.0                         # AR(G) once + AG(W)
    assert _step_bytes(g, w, d, "zero2", 2) == 2 * 1200.0 + 300.0                     # AR(G) each micro + AG(W)
    assert _step_bytes(g, w, d, "full", 2) == 2 * (2 * 300.0 + 600.0)                 # 2 AG(W) + RS(G) each micro
    with pytest.raises(InputError):
        _step_bytes(g, w, d, "zero4")


def test_zero3_is_one_and_a_half_times_ddp_when_weights_and_gradients_match():
    """ZeRO paper section 7.2.2: 3 Psi vs 2 Psi."""
    assert _step_bytes(1e9, 1e9, 64, "full") == pytest.approx(1.5 * _step_bytes(1e9, 1e9, 64, "ddp"))


def test_tensor_and_pipeline_traffic():
    from llmsizer.formulas.model_parallel_time import pipeline_p2p_bytes, tensor_parallel_bytes

    # one layer, b s = 10 tokens, h = 10, 2 B: 200 B activations; 2 + 2 all-reduces over 2 ranks of 2 x 1/2 x 200
    assert sum(tensor_parallel_bytes(1, 0, 10, 10, 2, 2)) == 800.0
    # 32 layers, 4096 tokens, h 4096, bf16, TP 8: 4 x 32 x 2 x 7/8 x 33,554,432 B
    assert sum(tensor_parallel_bytes(32, 0, 4096, 4096, 2, 8)) == pytest.approx(4 * 32 * 1.75 * 4096 * 4096 * 2)
    assert pipeline_p2p_bytes(4096, 4096, 2) == 2 * 4096 * 4096 * 2


def test_time_share_and_bandwidth_per_device():
    assert N.transfer_seconds(50e9, 50e9) == 1.0
    assert N.device_share_of_node_bandwidth(3200e9 / 8, 8) == 50e9   # p5: 3200 Gb/s for 8 GPUs


def test_serving_traffic():
    assert N.request_seconds(0.5, 300, 20.0) == 15.5                 # 0.5 + 300 / 20
    assert N.littles_law_rate(16, 8.0) == 2.0
    # 2 requests/s x (1000 prompt tokens x 4 B + 372 B envelope)
    assert N.REQUEST_OVERHEAD_BYTES == len(N.REQUEST_ENVELOPE_EXAMPLE.encode())
    assert N.ingress_bytes_per_second(2.0, 1000) == 2.0 * (4000 + N.REQUEST_OVERHEAD_BYTES)
    # a streamed token: one SSE chunk + 22 B TLS 1.3 record + 52 B TCP/IPv4 headers
    assert N.STREAM_BYTES_PER_TOKEN == len(N.SSE_CHUNK_EXAMPLE.encode()) + 22 + 52
    assert N.egress_bytes_per_second(1.0, 100, stream=True) == 100 * N.STREAM_BYTES_PER_TOKEN + \
        N.RESPONSE_OVERHEAD_BYTES
    assert N.egress_bytes_per_second(1.0, 100, stream=False) == 400 + N.RESPONSE_OVERHEAD_BYTES


def test_pricing_formulas():
    from llmsizer.plan import pricing as P
    assert P.service_hours_per_month(24, 7) == 730.0
    assert P.service_hours_per_month(12, 5) == pytest.approx(730 * 60 / 168)   # 260.7 h
    assert P.busy_share(365, 730) == 0.5
    assert P.break_even_discount(0.5) == 0.5
    assert P.hourly_cost(2.0, 100) == 200.0
    assert P.reserved_cost(2.0, 0.4, 730) == pytest.approx(2.0 * 0.6 * 730)

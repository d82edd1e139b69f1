"""llm-foundry's MPT benchmark rows (validation/public_measurements.csv PM0800-PM1015, scripts/train/benchmarking/
README.md @4952183): each row's fields are its quoted table line, its model is the yamls' shape with MPTConfig's
defaults (validation_cases.MPT_SHAPES), and the parameter count of that shape equals the table's own NumParams column
and transformers' count of the same config on the meta device; the Ampere and Hopper training utilisations are
judged on the rows that fed no constant."""

from __future__ import annotations

import statistics
from functools import lru_cache

import pytest

from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.validation_cases import (
    AMPERE_CALIBRATION,
    CALIBRATION,
    MPT_NODE_GPUS,
    NETWORK_NOT_STATED,
    Case,
    NotExpressed,
    mpt_config,
    mpt_row,
    public_rows,
    speed_case,
)


@lru_cache(maxsize=1)
def _mpt_rows() -> dict[str, dict[str, str]]:
    return {rid: r for rid, r in public_rows().items() if r["framework"].startswith("llm-foundry")}


def test_every_row_states_what_its_quote_says() -> None:
    rows = _mpt_rows()
    assert len(rows) == 216 and set(rows) == {f"PM{i:04d}" for i in range(800, 1016)}
    for rid, r in rows.items():
        m = mpt_row(r["quote"])
        assert float(r["value"]) == m.tokens_per_second, rid
        assert (int(r["num_gpus"]), int(r["seq_len"]), int(r["params"])) == (m.gpus, m.seq_len, m.params), rid
        assert r["batch_size"] == f"{m.micro_batch} (gradient accumulation {m.grad_accumulation})", rid
        assert r["grad_checkpointing"] == ("on" if m.checkpointing else "off"), rid
        assert not m.cpu_offload and r["model"].startswith(f"MPT-{m.model} "), rid


def test_the_shapes_have_the_published_parameter_counts() -> None:
    """NumParams (the table's column, Composer's count of the run's model) for every row: the learned position
    table grows with SeqLen (max_seq_len x d_model) and every linear and LayerNorm carries a bias."""
    for rid, r in _mpt_rows().items():
        m = mpt_row(r["quote"])
        assert count_params(spec_from_config(mpt_config(m.model, m.seq_len), name=rid)).total == m.params, rid


@pytest.mark.parametrize("model,seq", [("125m", 2048), ("760m", 32768), ("7b", 4096)])
def test_the_shapes_match_transformers_on_the_meta_device(model: str, seq: int) -> None:
    pytest.importorskip("transformers")
    from oracle_utils import build, real_param_count

    cfg = mpt_config(model, seq)
    assert real_param_count(build(cfg)) == count_params(spec_from_config(cfg, name=model)).total


@lru_cache(maxsize=1)
def _cases() -> dict[str, Case | NotExpressed]:
    return {rid: speed_case(r) for rid, r in _mpt_rows().items()}


def test_rows_are_expressed_or_say_why() -> None:
    cases = _cases()
    assert not [rid for rid, c in cases.items() if isinstance(c, NotExpressed)]
    fp8 = {rid for rid, r in _mpt_rows().items() if "amp_fp8" in r["quote"]}
    assert len(fp8) == 7 and all("TransformerEngine FP8" in cases[rid].note for rid in fp8)  # type: ignore[union-attr]
    for rid, c in cases.items():
        if isinstance(c, Case):
            m = mpt_row(_mpt_rows()[rid]["quote"])
            # multi-node rows are timed over the network the table's heading names (RoCE 1600 Gbps on the A100
            # tables) and summarised; the H100 tables name none, so theirs stay out (NETWORK_NOT_STATED)
            multi, a100 = m.gpus > MPT_NODE_GPUS, m.gpu.startswith("a100")
            want = (CALIBRATION if rid in AMPERE_CALIBRATION else NETWORK_NOT_STATED if multi and not a100 else "")
            assert c.excluded == want and c.predicted is not None, rid
            assert ("nodes over 1600 Gb/s" in c.note) == (multi and a100), rid


def _held_out(gpu: str, fp8: bool = False) -> list[float]:
    return [c.error for rid, c in _cases().items() if isinstance(c, Case) and not c.excluded
            and c.error is not None and mpt_row(_mpt_rows()[rid]["quote"]).gpu.startswith(gpu)
            and ("fp8" in mpt_row(_mpt_rows()[rid]["quote"]).precision) == fp8]


def test_held_out_a100_rows() -> None:
    """The A100 rows that fed no constant: measured 2023-10 median |error| 18.6 % (98 rows on one node), every one an
    over-prediction above 3B parameters' share of time in non-GEMM work (elementwise ops, embeddings, optimizer step
    are not in the model); with the 34 multi-node rows timed over their RoCE network, 132 rows; the bound fails if a
    change loses the fit. Since the flash-attention kernel is timed apart (formulas/training_time.py eq. (10)): 8.3 %,
    -4 .. +59 % (PM0939), most rows +5 .. +10 % (8.0 %, -11 .. +48 % before: the long-sequence rows gained, the
    2048-token rows took Ampere's refitted u, 0.676 -> 0.733). 5.8 %, -4 .. +47 %, since a checkpointed layer's recomputed
    attention forward runs at the kernel's forward rate (formulas/training_time.py eq. (10'')): the rows without
    checkpointing, over-predicted 7.3 points more than the checkpointed ones, 5.1-5.4 points more. 9.4 %, -4 .. +47 %,
    since the rows run llm-foundry's fused cross-entropy (eq. (E11), 8 B per logit where the eager loss moved 44): the
    small models' over-prediction grew (760M at 512 tokens +37 -> +42 %); with Composer's two eager train-metric
    cross-entropies per micro-batch (composer v0.16.4 trainer.py line 2475; forward only, 2 x 14 B per logit) counted
    it would be 6.5 % -- not modelled yet."""
    errs = _held_out("a100")
    assert len(errs) == 98 + 34
    assert statistics.median(abs(e) for e in errs) < 0.25


def test_held_out_h100_rows() -> None:
    """Hopper's utilisation is calibrated on torchtitan (PM0501); the MPT H100 BF16 rows on one node are held out:
    median |error| 6.2 % (37 rows; 11.9 % with the attention core at the GEMMs' rate on PaLM's 12 L d s, when the
    32k-64k-token rows were +16 .. +41 %; 8.8 % with the kernel at rho x Hopper's u, the 32k-64k rows +8 .. +24 %;
    since it runs on its mma.sync ceiling, -9 .. -1 %). 9.4 %, -20 .. +10 %, since PM0501's SDPA kernel is timed as
    FlashAttention-2 (efficiency.attention_kernel_share, 1.85 x the Triton kernel these rows run, Dao 2023 section
    4.1) and Hopper's u re-derived on it fell 0.5633 -> 0.4627: an open miss, every row now slow (the MPT-7B rows
    imply u 0.53-0.63); PM0501 ran on 500 W-limited H100s, this table presumably on 700 W parts). 10.3 %, -19 .. +12 %,
    since a checkpointed layer's recomputed attention forward runs at the kernel's forward rate (formulas/
    training_time.py eq. (10'')): rho x u_ampere fell 7 %, these rows' Triton attention with it (Hopper's u 0.4705).
    9.4 %, -19 .. +12 %, since the rows run llm-foundry's fused cross-entropy (eq. (E11))."""
    errs = _held_out("h100")
    assert len(errs) == 37
    assert statistics.median(abs(e) for e in errs) < 0.12


def test_held_out_h100_fp8_rows() -> None:
    """TransformerEngine FP8 (amp_fp8, fc_type te) on one node, 7 rows held out (formulas/float8_training.py: linears
    at the FP8 peak times efficiency.FLOAT8_GEMM_SHARE, calibrated on torchtitan's float8 row PM0503; eq. F3 casts):
    median |error| 8.2 %, -1.0 .. +19.8 % (25.6 %, +2.7 .. +44 % with the BF16 utilisation at the FP8 peak and the
    attention at the GEMMs' rate; 13.1 %, -1.4 .. +24.3 % with the attention at rho x Hopper's u, the 32k-token rows
    +24 %, now -1 %; the 512-token row is now the worst, +19.8 %, with FLOAT8_GEMM_SHARE refitted 0.92 -> 1.03; 5.0 %,
    -9.6 .. -2.3 %, with PM0501's and PM0503's SDPA attention timed as FlashAttention-2, FLOAT8_GEMM_SHARE 0.865)."""
    errs = _held_out("h100", fp8=True)
    assert len(errs) == 7
    assert max(abs(e) for e in errs) < 0.3
    assert statistics.median(abs(e) for e in errs) < 0.15


def test_pure_bf16_rows_are_compute_bound() -> None:
    """Composer's PURE mixed precision reduces gradients in bf16 where bf16-mixed counts fp32 bytes: harmless only
    while the communication stays shorter than the compute it overlaps, which every such row shows."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.duration import training_duration_for
    from llmsizer.validation_cases import MPT_DEVICE, mpt_fields

    pure = [mpt_row(r["quote"]) for r in _mpt_rows().values() if "| PURE |" in r["quote"]]
    assert len(pure) >= 20
    for m in pure:
        spec = spec_from_config(mpt_config(m.model, m.seq_len), name=m.model)
        d = training_duration_for(spec, builtin_catalog().devices[MPT_DEVICE[m.gpu]], m.gpus, 1e6, mpt_fields(m))
        assert d.step is not None and d.step.comm_seconds < d.step.compute_seconds, m


# The same README @9250e84 (2023-08-02), before the A100 80GB table was re-measured in b2a43a1 (2023-10-19, sweep.sh
# line 5: image mosaicml/pytorch:2.1.0_cu121), published the same 760M configurations on 8 x A100 80GB (SeqLen, # GPUs,
# MicroBatchSize, GradAccum, no checkpointing, FULL_SHARD): lines 139, 138, 137, 133, Throughput (T/s), all GPUs.
# PM0919/PM0920 are the +29/+37 % rows; their re-measurement is 15 % and 20 % slower than the earlier publication of
# their configuration, while the seq-2048/4096 twins agree within 2.1 %.
MPT_760M_EARLIER = {"PM0920": 293755.0, "PM0919": 279108.0, "PM0918": 254104.0, "PM0917": 215501.0}


def test_760m_short_sequence_misses_are_the_re_measurement() -> None:
    """PM0919/PM0920 (760M at 512/1024 tokens on 8 x A100 80GB) are predicted within the same few percent of the
    publisher's earlier measurement of the identical configuration as their 2048/4096-token twins are of both
    publications: the prediction orders the four sequence lengths as the earlier table does (more tokens per second
    at shorter sequences), which the re-measured table reverses (seq 512 slower than seq 2048). Since the rows run
    llm-foundry's fused cross-entropy (eq. (E11): 8 B per logit where the eager loss moved 44) the four are predicted
    +10.6 .. +14.0 % above the earlier figures (+5.8 .. +9.7 % before): Composer's two eager train-metric
    cross-entropies per micro-batch (LanguageCrossEntropy, LanguagePerplexity) are not in the time model."""
    rows, cases = _mpt_rows(), _cases()
    err = {}
    for rid, earlier in MPT_760M_EARLIER.items():
        m, c = mpt_row(rows[rid]["quote"]), cases[rid]
        assert isinstance(c, Case) and c.predicted is not None
        assert (m.model, m.gpus, m.gpu, m.checkpointing) == ("760m", 8, "a100_80gb", False), rid
        err[rid] = c.predicted / earlier - 1
        if rid in ("PM0917", "PM0918"):  # the twins: both publications agree
            assert abs(m.tokens_per_second / earlier - 1) < 0.03, rid
        else:  # the re-measurement is far slower than the earlier publication
            assert m.tokens_per_second / earlier - 1 < -0.14, rid
    assert all(0 < e < 0.15 for e in err.values()), err
    assert max(err.values()) - min(err.values()) < 0.04, err
    p = [cases[rid].predicted for rid in ("PM0920", "PM0919", "PM0918", "PM0917")]
    assert p == sorted(p, reverse=True)


def test_1b_on_32_gpus_is_slower_than_its_own_larger_twins() -> None:
    """PM0978 (+36 %): MPT-1B, 2048 tokens, micro-batch 10, no accumulation, FULL_SHARD on 32 x A100 40GB. The same
    table measured the identical per-device work on 64 and 128 of the same GPUs (PM0977, PM0976) 22 % / 20 % faster
    per GPU. Between these three runs only two per-device terms change with n: the sharded optimizer step (1 / n of
    the states per device) and the collectives ((n - 1) / n of the weights and gradients, over the same per-node
    network), together under 1 % of this step; the model's per-GPU predictions for the three agree within that, so
    the miss is the 32-GPU measurement's, not a term that depends on the number of devices."""
    rows, cases = _mpt_rows(), _cases()
    per_gpu = {}
    for rid in ("PM0978", "PM0977", "PM0976"):
        m, c = mpt_row(rows[rid]["quote"]), cases[rid]
        assert isinstance(c, Case) and c.predicted is not None
        assert (m.model, m.seq_len, m.micro_batch, m.grad_accumulation, m.checkpointing) == ("1b", 2048, 10, 1, False)
        per_gpu[rid] = (m.tokens_per_second / m.gpus, c.predicted / m.gpus)
    measured = {rid: v[0] for rid, v in per_gpu.items()}
    predicted = {rid: v[1] for rid, v in per_gpu.items()}
    assert measured["PM0978"] < 0.85 * min(measured["PM0977"], measured["PM0976"])  # the table's inversion
    assert max(predicted.values()) / min(predicted.values()) - 1 < 0.01, predicted


# Training near the device's capacity. When a cudaMalloc fails, torch's caching allocator frees cached blocks and
# retries: DeviceCachingAllocator::malloc runs ``alloc_block(params, false) || (release_available_cached_blocks(params)
# && alloc_block(params, false)) || (release_cached_blocks(context) && alloc_block(params, true))`` and ``alloc_block``
# counts ``stats.num_alloc_retries += 1`` on the retry (pytorch c10/cuda/CUDACachingAllocator.cpp @001074d, read
# through the code index, so named by function; torch 2.13 torch/cuda/memory.py lines 276-279: "number of failed
# cudaMalloc calls that result in a cache flush and retry", ``num_sync_all_streams``: the
# ``synchronize_and_free_events`` calls the flush makes: a device-wide synchronisation). Composer deb39cf07 (#3510,
# 2024-08-02) reads that counter after every batch (trainer.py ``_update_num_consecutive_thrashes``: "Consecutive
# alloc retries in GPU memory usually indicate thrashing, where GPU memory usage is so close to the memory limit that
# it hinders throughput") and halves the micro-batch after two such batches in a row. So the slowdown is real, but a
# term for it needs a predicted peak that says which runs sit at the limit. Every line of these tables is such a run
# (sweep.sh @b2a43a147 passes a hand-chosen --microbatch_size per line); what the model predicts for them follows.
def _reserved_share(rid: str) -> float:
    """The predicted reserved peak per device (torch's max_memory_reserved: the pool the allocator grows and retries
    in; fixed batch shapes, as llm-foundry's text loader pads every sample to max_seq_len, llmfoundry/data/
    text_data.py @b2a43a147 line 167) over the device's memory."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.training.compose import estimate_training
    from llmsizer.validation_cases import MPT_DEVICE, mpt_attn_impl, mpt_fields

    r = _mpt_rows()[rid]
    m = mpt_row(r["quote"])
    spec = spec_from_config(mpt_config(m.model, m.seq_len), name=f"MPT-{m.model}")
    est = estimate_training(spec, **mpt_fields(m, mpt_attn_impl(m, r["source_location"])), metric="reserved",
                            batch_shapes="fixed")
    return est.total("device")[1] / builtin_catalog().devices[MPT_DEVICE[m.gpu]].memory_bytes


def test_the_predicted_peak_does_not_mark_the_near_full_misses() -> None:
    """Decided from the data: no slowdown term and no wider range keyed on the predicted headroom, because the
    predicted reserved peak / device memory does not separate the over-predicted rows from the accurate ones.
    Made again (as this test asked) once the rows ran llm-foundry's own loss and norms (the llm-
    foundry framework profile, catalog/data/frameworks.json: flash-attn's fused cross-entropy, eq. X1, and LPLayerNorm, eq. N4), which moved every
    share down (median 1.044 -> 0.804); the decision stands:

    - MPT-13B on A100 40GB (the same table, software and per-GPU model shape): the 8-GPU rows PM0942/0943/0948/0949/
      0950 (+14 .. +18 %) are predicted at 0.940-0.945 of the device, their 16-128-GPU twins PM0944-PM0947 (-1.5 ..
      -0.1 %) at 0.891-1.044, below and above them: a term keyed on the share cannot tell them apart.
    - MPT-70B on A100 40GB: PM0939 (64 GPUs, +47 %) at 0.88, PM0938 (128 GPUs, +8 %) at 1.04: the opposite order.
    - Every summarised A100 row (132): Pearson r(share, error) = -0.09 (+0.10 before); A100 40GB -0.11, A100 80GB
      -0.18, H100 +0.03.
    - The share was above 1 for 88 of those 132 rows (127 of all 216) before the two settings, runs that ran; now
      for 4 (5 of 216, each within 4.4 % of its device: tests/validation/test_llmfoundry_defaults.py)."""
    cases = _cases()
    share = {rid: _reserved_share(rid) for rid in _mpt_rows()}
    err = {rid: c.error for rid, c in cases.items() if isinstance(c, Case) and c.error is not None}
    eight, wide = ("PM0942", "PM0943", "PM0948", "PM0949", "PM0950"), ("PM0944", "PM0945", "PM0946", "PM0947")
    assert min(err[rid] for rid in eight) > 0.13 and max(abs(err[rid]) for rid in wide) < 0.02
    assert min(share[rid] for rid in wide) < min(share[rid] for rid in eight)
    assert max(share[rid] for rid in wide) > max(share[rid] for rid in eight)
    assert err["PM0939"] > 0.4 > 0.1 > err["PM0938"] and share["PM0939"] < share["PM0938"]
    held = [rid for rid, c in cases.items() if isinstance(c, Case) and not c.excluded and c.error is not None
            and mpt_row(_mpt_rows()[rid]["quote"]).gpu.startswith("a100")]
    assert len(held) == 98 + 34
    assert abs(statistics.correlation([share[rid] for rid in held], [err[rid] for rid in held])) < 0.3
    assert sum(share[rid] > 1 for rid in held) <= 4


def test_composer_per_step_host_work_is_a_small_share_of_the_small_model_gaps() -> None:
    """PM0920/PM0919 (760M, 8 x A100 80GB, +36/+28 %) and PM0978 (1B, 32 x A100 40GB, +35 %) take 892, 720 and 341 ms
    per optimizer step more than predicted. What a Composer step does per batch beyond the model, from the code that
    ran (llm-foundry b2a43a147 setup.py line 50: mosaicml >= 0.16.4, < 0.17, the torch 2.1 tables; 300cc5c58 line 49:
    mosaicml 0.13.4, the A100 40GB table), each bounded as if nothing overlapped:

    - composer v0.16.4 trainer.py: per batch one all_reduce of the loss and its ``.cpu().item()`` (lines 2058-2060),
      ``_accumulate_time_across_ranks``' all_reduce, broadcast and three ``.cpu().item()`` (lines 1972-1980): three
      8-byte collectives and four device syncs, taken at 1 ms each (NCCL's small-message latency is 19-64 us,
      efficiency.NCCL_ALLREDUCE_LATENCY; the margin covers the hop between nodes);
    - DecoupledAdamW (the yamls' ``optimizer: decoupled_adamw``; composer v0.16.4 optim/decoupled_weight_decay.py):
      a Python loop over the parameters (line 237) with ``state_steps[i].item()`` per parameter (line 241) on a
      device tensor (line 307), so each parameter's 8 update kernels (lines 252-264; weight_decay 0.0 skips line
      246) are launched after a device sync: with FSDP ``use_orig_params`` True (composer v0.16.4 dist_strategy.py
      line 148) the loop runs over the original parameters, here every tensor of the layout (an upper bound: a rank
      holds a slice of only some), 9 launches each (8 + the ``.item()`` copy) at efficiency.HOST_SECONDS_PER_KERNEL;
    - the yamls' gradient clipping (``clipping_type: norm``; composer v0.16.4 algorithms/gradient_clipping/
      gradient_clipping.py line 49): FSDP ``clip_grad_norm_`` (torch 2.13 fsdp/fully_sharded_data_parallel.py lines
      1167-1204: a norm per gradient, one all_reduce, a ``mul_`` per gradient), 2 launches per parameter and one
      more collective;
    - FSDP ``limit_all_gathers`` (torch 2.13 fsdp/_runtime_utils.py lines 297-303: the host waits on the free event
      of the unit two back before the next all-gather) holds the host back only where a unit's launches take longer
      than its device work; a layer here runs 10+ ms on the device against under 1 ms of launches.

    The bound is 88 ms per step for the 24-layer models (388 tensors), 10 %, 12 % and 26 % of the three gaps and
    3.4-9.0 % of each predicted step (the DecoupledAdamW loop alone 69 ms; on the A100 40GB table's composer 0.13.4
    the step count is a Python int, decoupled_weight_decay.py lines 318/333, so no sync per parameter); and each
    row has a twin in the same table with the same per-step work (PM0918: the same 49152 tokens per micro-step and accumulation 2; PM0977/PM0976: the same micro-batch on 64 and
    128 GPUs) predicted within +10 .. +16 % (+6 .. +13 % before the rows ran the fused cross-entropy). So no fixed per-step cost is added: a sourced one is a few percent of
    these misses and, being shared with the twins, cannot separate them."""
    from llmsizer.estimate.efficiency import HOST_SECONDS_PER_KERNEL
    from llmsizer.formulas.tensors import model_tensors

    rows, cases = _mpt_rows(), _cases()
    for rid, twin in (("PM0920", "PM0918"), ("PM0919", "PM0918"), ("PM0978", "PM0977")):
        m, c, t = mpt_row(rows[rid]["quote"]), cases[rid], cases[twin]
        assert isinstance(c, Case) and isinstance(t, Case) and c.predicted and t.error is not None
        tokens = m.gpus * m.micro_batch * m.grad_accumulation * m.seq_len
        gap = tokens / c.measured - tokens / c.predicted
        params = len(model_tensors(spec_from_config(mpt_config(m.model, m.seq_len), name=rid)))
        bound = params * (9 + 2) * HOST_SECONDS_PER_KERNEL.high + 4 * 1e-3
        assert bound < 0.3 * gap and bound < 0.1 * tokens / c.predicted, (rid, bound, gap)
        assert 0 < t.error < 0.16 < c.error, (rid, twin)

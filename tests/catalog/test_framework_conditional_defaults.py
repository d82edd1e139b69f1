"""Framework profiles' conditional defaults (catalog/data/frameworks.json 'when', estimate/framework.py) and the
notes on settings that change nothing (estimate/training/setup.py).

Independent truth: the frameworks' own source, typed here with file and line:
- torchtitan @9dec370 torchtitan/parallelisms/parallelize_llama.py line 320: every fully_shard gets
  MixedPrecisionPolicy(param_dtype, reduce_dtype), torchtitan/config_manager.py lines 378-395 defaulting them to
  bfloat16 / float32 (llmsizer's name for that recipe: 'fsdp-bf16-mixed', docs/training.md precision table);
  lines 137, 176, 185: apply_tp's plan shards the norms as SequenceParallel() with no switch; lines 326-339: blocks
  resharded after forward but the last, then the root ('torchtitan' layout).
- torchtune @bd2a0fc recipes/full_finetune_distributed.py lines 84-85: with dtype=bf16 all activations, gradients and
  optimizer states are bf16 (pure bf16; configs' dtype: bf16), torchtune/training/_distributed.py lines 697-714:
  fully_shard without an mp_policy, the root not resharded ('torchtune' layout); data/_collate.py line 611 +
  modules/attention_utils.py lines 231-242: packed batches carry a BlockMask, run by flex attention.
- Korthikanti et al. 2022 §4.2: selective recompute drops only the attention's s^2 terms, which fused kernels never
  keep.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmsizer.cli.main import main
from llmsizer.estimate.framework import with_framework
from llmsizer.models import load_model
from llmsizer.specs import TrainingWorkload

TORCHTITAN_FSDP_PRECISION = "fsdp-bf16-mixed"  # MixedPrecisionPolicy(bfloat16, float32)


def applied(**kw: object) -> TrainingWorkload:
    spec = load_model("llama-3.1-8b")
    return with_framework(spec, TrainingWorkload(**kw))[1]


def test_torchtitan_fsdp_gets_its_mixed_precision_policy_and_layout() -> None:
    w = applied(framework="torchtitan", fsdp="full", gpus=8)
    assert w.precision == TORCHTITAN_FSDP_PRECISION
    assert w.fsdp2_units == "torchtitan"
    assert not w.sequence_parallel  # tp 1


def test_torchtitan_without_fsdp_keeps_autocast_default() -> None:
    w = applied(framework="torchtitan")
    assert w.precision == "bf16-mixed" and w.fsdp2_units == "largest-two"


def test_torchtitan_tp_runs_sequence_parallel() -> None:
    w = applied(framework="torchtitan", fsdp="full", gpus=16, tp=8)
    assert w.sequence_parallel is True


def test_explicit_flags_win_over_the_profile() -> None:
    w = applied(framework="torchtitan", fsdp="full", gpus=16, tp=8, precision="bf16-mixed", sequence_parallel=False,
                fsdp2_units="largest-two")
    assert (w.precision, w.sequence_parallel, w.fsdp2_units) == ("bf16-mixed", False, "largest-two")


def test_device_without_bf16_keeps_fp16_default() -> None:
    w = applied(framework="torchtitan", fsdp="full", gpus=8, bf16_tensor_cores=False)
    assert w.precision == "fp16-mixed"


def test_torchtune_pure_bf16_and_packed_flex() -> None:
    w = applied(framework="torchtune")
    assert w.attention == "sdpa"
    w = applied(framework="torchtune", packing=True, seq_len=2048)
    assert w.attention == "flex"
    w = applied(framework="torchtune", fsdp="full", gpus=2)
    assert w.fsdp2_units == "torchtune"


def test_applied_is_idempotent() -> None:
    spec = load_model("llama-3.1-8b")
    s1, w1 = with_framework(spec, TrainingWorkload(framework="torchtitan", fsdp="full", gpus=16, tp=8))
    s2, w2 = with_framework(s1, w1)
    assert w2 == w1 and replace(w2) == w1


def test_cli_names_each_profile_default(capsys: pytest.CaptureFixture[str]) -> None:
    main(["train", "llama-3.1-70b", "--framework", "torchtitan", "--gpus", "64", "--fsdp", "full", "--tp", "8",
          "--seq", "8192", "--batch", "8", "--grad-checkpointing", "full", "--device", "h100-sxm"])
    out = capsys.readouterr().out
    for text in ("precision=fsdp-bf16-mixed (from framework profile torchtitan",
                 "sequence_parallel=True (from framework profile torchtitan",
                 "fsdp2_units=torchtitan (from framework profile torchtitan"):
        assert text in out, text


def test_selective_with_fused_attention_warns(capsys: pytest.CaptureFixture[str]) -> None:
    main(["train", "llama-3.1-8b", "--device", "h100-sxm", "--seq", "4096", "--batch", "2",
          "--grad-checkpointing", "selective"])
    assert "selective-op" in capsys.readouterr().out
    main(["train", "llama-3.1-8b", "--device", "h100-sxm", "--seq", "4096", "--batch", "2",
          "--grad-checkpointing", "selective", "--attention", "eager"])
    assert "saves nothing here" not in capsys.readouterr().out


def test_doc_len_under_sdpa_says_it_has_no_effect(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["train", "llama-3.1-8b", "--device", "h100-sxm", "--tokens", "1B", "--method", "lora",
            "--grad-checkpointing", "full", "--batch", "4", "--seq", "4096", "--packing", "--doc-len", "512"]
    main(base)
    out = capsys.readouterr().out
    assert "doc_len has no effect with attention sdpa" in out
    assert "every tile of the s x s scores" in out  # what the duration times for the masked layers
    main([*base, "--attention", "flash"])
    assert "doc_len has no effect" not in capsys.readouterr().out


def test_fixed_batch_shapes_without_a_pool_metric_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """batch_shapes only changes the caching allocator's reserve (estimate/allocator.py eq. R1), read under metric
    reserved or nvidia-smi (the flag's own help): elsewhere refused like the other dependent settings, exit 2."""
    from llmsizer.errors import InputError

    with pytest.raises(InputError, match="batch_shapes 'fixed'.*metric reserved or nvidia-smi"):
        TrainingWorkload(batch_shapes="fixed")
    with pytest.raises(InputError, match="batch_shapes 'fixed'"):
        TrainingWorkload(batch_shapes="fixed", metric="allocated")
    assert TrainingWorkload(batch_shapes="fixed", metric="reserved").batch_shapes == "fixed"
    assert main(["train", "llama-3.1-8b", "--device", "h100-sxm", "--batch-shapes", "fixed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "batch_shapes 'fixed'" in err

"""The llm-foundry rows run llm-foundry's own defaults (the llm-foundry framework profile, catalog/data/frameworks.json,
applied by estimate/framework.py): flash-attn's fused cross-entropy and the low-precision LayerNorm, named in each
estimate's assumptions as the profile's, and what the CLI answers with
the same two flags is the estimate the rows are judged on.

The assumption (named in validation_cases): the benchmark runs used the defaults, since their yamls and
submit_benchmarks.py never set ``loss_fn`` (ComposerMPTCausalLM's default 'fused_crossentropy', llmfoundry/models/
mpt/modeling_mpt.py @ b2a43a147 line 724) and set ``norm_type: low_precision_layernorm`` (submit_benchmarks.py @
b2a43a147 line 307). Before these settings the memory model put 127 of the 216 rows, runs that ran, above their
device (reserved peak; e.g. PM0920 92.5 GiB on an 80 GB A100); with them 5, each within 4.4 % of the device."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.cli.main import main
from llmsizer.estimate.training.compose import estimate_training
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.validation_cases import (
    MPT_DEVICE,
    mpt_attn_impl,
    mpt_config,
    mpt_fields,
    mpt_row,
    public_rows,
)


@lru_cache(maxsize=1)
def _rows() -> dict[str, dict[str, str]]:
    return {rid: r for rid, r in public_rows().items() if r["framework"].startswith("llm-foundry")}


def test_every_llmfoundry_row_runs_the_fused_loss_and_low_precision_norm() -> None:
    """Every row states the llm-foundry profile and none of the three settings, so the profile's defaults are what
    the rows run (tests/catalog/test_framework_profiles.py checks them against llm-foundry's source)."""
    for rid, r in _rows().items():
        m = mpt_row(r["quote"])
        f = mpt_fields(m, mpt_attn_impl(m, r["source_location"]))
        assert f["framework"] == "llm-foundry", rid
        assert not {"loss", "layernorm", "train_metric_passes"} & set(f), rid


def _share(rid: str) -> float:
    r = _rows()[rid]
    m = mpt_row(r["quote"])
    spec = spec_from_config(mpt_config(m.model, m.seq_len), name=f"MPT-{m.model}")
    est = estimate_training(spec, **mpt_fields(m, mpt_attn_impl(m, r["source_location"])), metric="reserved",
                            batch_shapes="fixed")
    got = {a.name: a for a in est.assumptions}
    assert (got["loss"].value, got["layernorm"].value) == ("fused-xentropy", "low-precision"), rid
    assert got["loss"].why.startswith("from framework profile llm-foundry ("), rid
    return est.total("device")[1] / builtin_catalog().devices[MPT_DEVICE[m.gpu]].memory_bytes


@pytest.mark.slow
def test_the_runs_that_ran_fit_their_device() -> None:
    """Published runs ran: a predicted reserved peak above the device is a wrong answer. 5 of 216 remain above
    (PM0827, PM0885, PM0938, PM0944, PM0945: 1.013-1.044 of the device) where 127 were (up to 1.28)."""
    share = {rid: _share(rid) for rid in _rows()}
    above = sorted(rid for rid, s in share.items() if s > 1)
    assert len(above) <= 5, above
    assert max(share.values()) < 1.05


def test_cli_flags_give_the_rows_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PM0920 (760M, 96 x 512 tokens, 8 x A100 80GB, FULL_SHARD) through ``llmsizer train`` with the two flags:
    the same device total as the row's estimate, and the loss items are eq. X1's bf16 [t, V] tensors."""
    r = _rows()["PM0920"]
    m = mpt_row(r["quote"])
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(mpt_config(m.model, m.seq_len)))
    argv = ["train", str(cfg), "--method", "full", "--precision", "bf16-mixed", "--batch", str(m.micro_batch),
            "--seq", str(m.seq_len), "--grad-accumulation", str(m.grad_accumulation), "--fsdp", "full",
            "--fsdp-version", "1", "--gpus", str(m.gpus), "--optimizer", "adamw", "--attention", "flash",
            "--attention-kernel", "triton-flash", "--loss", "fused-xentropy", "--layernorm", "low-precision",
            "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    items = {i["name"]: int(i["bytes"]) for i in out["items"]}
    t, v = m.micro_batch * m.seq_len, 50368
    assert items["logits_and_loss"] == t * v * 2  # the loss backward: the logits' bf16 gradient (eq. X1)
    spec = spec_from_config(mpt_config(m.model, m.seq_len), name="config")
    est = estimate_training(spec, **mpt_fields(m))
    assert int(out["totals"]["device"]["bytes"]) == est.total("device")[1]

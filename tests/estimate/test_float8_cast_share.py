"""review10 #3, #4: float8 weight casts split across devices by ONE rule, and the GEMM-rate note quoting the share
the rowwise path uses.

#3: a device casts only its 1/n shard of a weight exactly when FSDP2 all-gathers the weight in float8
(estimate/training/gather_units.py ``float8_all_gather``: torchao ``enable_fsdp_float8_all_gather`` is an FSDP2
extension, config.py lines 223-225, tensorwise-only, lines 270-274; TransformerEngine's ``Float8Tensor
.fsdp_pre_all_gather`` sends the float8 shard, pytorch/tensor/float8_tensor.py @d0067d0 lines 938-990). FSDP1 and
SHARD_GRAD_OP gather nothing in float8, so each device casts the whole weight: the same bytes as without FSDP (the
review's reproduction: 53,215,232 B/token for all three, against 23,396,352 before the fix).
#4: torchao rowwise on an NVIDIA GPU times the float8 GEMMs at FLOAT8_GEMM_SHARE x FLOAT8_ROWWISE_GEMM_SHARE."""

from __future__ import annotations

import json

import pytest

from llmsizer.cli.main import main
from llmsizer.estimate import efficiency as E

BASE = ("train", "llama-3.1-8b", "--device", "h100-sxm", "--gpus", "8", "--float8", "--compile", "--tokens", "1e9",
        "--json")


def _notes(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, dict]:
    capsys.readouterr()
    assert int(main([*BASE, *extra]) or 0) == 0
    return {a["name"]: a for a in json.loads(capsys.readouterr().out)["duration"]["assumptions"]}


def _cast(capsys: pytest.CaptureFixture[str], *extra: str) -> int:
    return _notes(capsys, *extra)["float8_cast_bytes_per_token"]["value"]


@pytest.mark.parametrize("recipe", ["torchao", "transformer-engine", "torchao-rowwise"])
def test_weight_casts_split_only_where_fsdp2_gathers_in_float8(capsys, recipe):
    r = ("--float8-recipe", recipe)
    whole = _cast(capsys, *r)  # no FSDP: every device casts every weight
    for unsharded in (("--fsdp", "grad_op"), ("--fsdp", "full", "--fsdp-version", "1")):
        assert _cast(capsys, *r, *unsharded) == whole, unsharded
    fsdp2 = _cast(capsys, *r, "--fsdp", "full")
    if recipe == "torchao-rowwise":  # gathers bf16 (tensorwise-only float8 all-gather): casts it all
        assert fsdp2 == whole
    else:
        assert fsdp2 < whole


def test_the_rowwise_gemm_note_quotes_the_share_it_uses(capsys):
    why = _notes(capsys, "--float8-recipe", "torchao-rowwise", "--fsdp", "full")["float8_gemm_flops_per_token"]["why"]
    used = E.FLOAT8_GEMM_SHARE.expected * E.FLOAT8_ROWWISE_GEMM_SHARE.expected
    assert f"x {E.FLOAT8_GEMM_SHARE.expected:g} x {E.FLOAT8_ROWWISE_GEMM_SHARE.expected:g}" in why, why
    assert f"= {used:.4g} of the BF16" in why, why
    tensorwise = _notes(capsys, "--float8-recipe", "torchao", "--fsdp", "full")["float8_gemm_flops_per_token"]["why"]
    assert f"x {E.FLOAT8_GEMM_SHARE.expected:g} of the BF16" in tensorwise, tensorwise

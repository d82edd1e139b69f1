"""GPT-2 configs (readers/hf_config.py ``_gpt2``) against GPT2LMHeadModel as transformers builds it.

Independent truth: transformers instantiates GPT2LMHeadModel from each config on the meta device and
``sum(p.numel())`` counts it (tied tensors once), split by module names (``oracle_utils.assert_params_equal``). The
variants vary each key the reader reads: n_inner (None -> 4 x n_embd), tie_word_embeddings, n_positions (the wpe
rows) written as n_positions or as its attribute_map name max_position_embeddings, activation_function.
Refused: add_cross_attention (GPT-2 as a decoder with cross-attention blocks), n_embd not divisible by n_head
(GPT2Attention raises ValueError), a dropout probability outside [0, 1]; through the CLI: one line, exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from llmsizer.errors import LlmsizerError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import assert_params_equal, build

pytestmark = pytest.mark.slow

_BASE = {"model_type": "gpt2", "vocab_size": 300, "n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 128}
VARIANTS: dict[str, dict[str, Any]] = {
    "sparse": {},
    "n_inner": {"n_inner": 96},
    "n_inner-null": {"n_inner": None},
    "untied": {"tie_word_embeddings": False},
    "positions-as-max_position_embeddings": {"n_positions": None, "max_position_embeddings": 200},
    "gelu": {"activation_function": "gelu"},
    "scale-by-layer-idx": {"scale_attn_by_inverse_layer_idx": True, "reorder_and_upcast_attn": True},
}


def _cfg(variant: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**_BASE, **variant}.items() if v is not None or k == "n_inner"}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_counts_equal_gpt2lmheadmodel_on_meta(name: str) -> None:
    cfg = _cfg(VARIANTS[name])
    model = build(cfg)
    spec = spec_from_config(cfg, name=name)
    assert_params_equal(count_params(spec), model)
    assert spec.position_embeddings == model.transformer.wpe.num_embeddings
    assert spec.intermediate_size == model.transformer.h[0].mlp.c_fc.nf  # Conv1D(nf = out features, nx)
    assert spec.tie_word_embeddings == (model.lm_head.weight is model.transformer.wte.weight)


@pytest.mark.parametrize(("extra", "match"), [
    ({"add_cross_attention": True}, "add_cross_attention"),
    ({"n_embd": 66}, "not divisible by n_head"),
    ({"resid_pdrop": 1.5}, "resid_pdrop"),
])
def test_refused_with_one_line(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(LlmsizerError, match=match):
        spec_from_config({**_BASE, **extra}, name="bad")


def test_cli_infer_reads_a_gpt2_config_and_refuses_cross_attention(tmp_path: Any) -> None:
    ok, bad = tmp_path / "config.json", tmp_path / "bad.json"
    ok.write_text(json.dumps(_BASE))
    bad.write_text(json.dumps({**_BASE, "add_cross_attention": True}))
    run = [sys.executable, "-m", "llmsizer", "infer", "--json", "--context", "128"]
    out = subprocess.run([*run, str(ok)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["details"]["params_total"] == count_params(spec_from_config(_BASE, name="x")).total
    err = subprocess.run([*run, str(bad)], capture_output=True, text=True)
    assert err.returncode == 2 and len(err.stderr.strip().splitlines()) == 1 and "add_cross_attention" in err.stderr

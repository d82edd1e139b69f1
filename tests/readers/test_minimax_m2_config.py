"""MiniMax-M2 config.json rules the parameter and cache tests do not reach (readers/hf_config.py).

Truth: transformers 5.24 MiniMaxM2Config / MiniMaxM2Attention (models/minimax_m2/): the legacy ``rotary_dim`` is
``partial_rotary_factor = rotary_dim / head_dim`` (``convert_rope_params_to_dict``), and q_norm / k_norm are built over
all heads whatever the config says, so a config asking for anything else is refused rather than sized."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError, UnsupportedArchitectureError
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build

TINY = TINY_CONFIGS["minimax-m2"]


@pytest.mark.slow
@pytest.mark.parametrize("rope", [{"rotary_dim": 8}, {"partial_rotary_factor": 0.5}, {"rotary_dim": 16}, {}])
def test_rotary_width_is_the_one_transformers_builds(rope):
    cfg = {k: v for k, v in TINY.items() if k != "rotary_dim"} | rope
    model = build(cfg)
    real = model.model.rotary_emb.inv_freq.numel() * 2  # dim = int(head_dim x factor) channels, half as frequencies
    spec = spec_from_config(cfg, name="tiny")
    assert (spec.rotary_dim or spec.head_dim) == real


@pytest.mark.parametrize("bad", [{"use_qk_norm": False}, {"qk_norm_type": "per_head"}])
def test_a_qk_norm_no_engine_builds_is_refused(bad):
    with pytest.raises(UnsupportedArchitectureError, match="qk_norm"):
        spec_from_config({**TINY, **bad}, name="tiny")


def test_rotary_dim_over_the_head_is_one_line():
    with pytest.raises(InputError, match="rotary_dim"):
        spec_from_config({**TINY, "rotary_dim": 17}, name="tiny")


def test_mtp_modules_are_noted_not_counted():
    spec = spec_from_config({**TINY, "use_mtp": True, "num_mtp_modules": 3}, name="tiny")
    assert spec.mtp_layers == 0
    assert any("3 MTP modules" in n for n in spec.notes)
    assert not any("MTP" in n for n in spec_from_config(TINY, name="tiny").notes)

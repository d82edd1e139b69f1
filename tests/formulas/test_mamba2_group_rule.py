"""vLLM and SGLang refuse a Mamba-2 layout whose tensor parallelism does not divide the B/C groups unless there is
one group (vllm 0.23.0 model_executor/layers/mamba/mamba_mixer2.py L289-292, sglang 0.5.6
srt/layers/attention/mamba/mamba.py L166-169: ``assert (n_groups % self.tp_size) == 0 or n_groups == 1``); the one
rule, formulas/recurrent_state.py ``extra_groups``, answers the state page and eqs. V1/V4, and every surface refuses
with one line, exit 2. Independent truth: the engines' assertion and ``extra_groups_for_head_shards`` (tp - groups
where tp does not divide them) written out here; Nemotron-H-56B's and Mamba-Codestral's configs: n_groups 8."""

from __future__ import annotations

import pytest

from cli_capture import run_cli
from llmsizer.errors import InputError
from llmsizer.formulas.recurrent_state import extra_groups, mamba2_groups_refusal
from llmsizer.formulas.vllm_mixer_profile import vllm_mamba2_profile_bytes, vllm_mamba2_step_bytes
from web_capture import post_api


@pytest.mark.parametrize(("groups", "tp", "extra"), [(8, 1, 0), (8, 2, 0), (8, 8, 0), (1, 1, 0), (1, 4, 3),
                                                      (1, 8, 7), (16, 8, 0), (8, 16, None), (8, 3, None)])
def test_extra_groups_is_the_engines_rule(groups: int, tp: int, extra: int | None) -> None:
    allowed = groups % tp == 0 or groups == 1  # the engines' assertion
    assert (mamba2_groups_refusal(groups, tp) is None) == allowed
    if extra is None:
        assert not allowed
        for call in (lambda: extra_groups(groups, tp),
                     lambda: vllm_mamba2_profile_bytes(128, 128, 64, 128, groups, 2, tp),
                     lambda: vllm_mamba2_step_bytes(128, 128, 64, 128, groups, 256, 2, 4, tp)):
            with pytest.raises(InputError, match=f"tensor_parallel {tp} does not divide the {groups} Mamba-2 groups"):
                call()
    else:
        assert extra_groups(groups, tp) == extra


@pytest.mark.parametrize(("model", "engine"), [("nemotron-h-56b-base-8k", "vllm"),
                                               ("nemotron-h-56b-base-8k", "sglang"),
                                               ("mamba-codestral-7b-v0.1", "vllm")])
def test_the_cli_refuses_tp_16_over_8_groups_in_one_line(model: str, engine: str) -> None:
    """Before, ``infer nemotron-h-56b-base-8k --engine vllm --tp 16`` answered "fits: yes" sized with 16 groups."""
    done = run_cli("infer", model, "--engine", engine, "--tp", "16")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--tp 16 does not divide the 8 Mamba-2 groups" in lines[0]


def test_a_dividing_layout_and_transformers_are_not_refused() -> None:
    """TP 8 divides the 8 groups; transformers' plan leaves the Mamba mixer whole (no group rule)."""
    assert run_cli("infer", "nemotron-h-56b-base-8k", "--engine", "vllm", "--tp", "8").returncode == 0
    assert mamba2_groups_refusal(8, 16) is not None
    from llmsizer.formulas.tensor_parallel import mamba2_layout_refusal
    from llmsizer.models import load_model
    spec = load_model("nemotron-h-56b-base-8k")
    assert mamba2_layout_refusal(spec, 16, "transformers") is None
    assert mamba2_layout_refusal(spec, 16, "sglang") == mamba2_groups_refusal(8, 16, spec.name)


def test_the_web_api_refuses_it_with_the_clis_line() -> None:
    r = post_api("/api/v1/infer", {"model": "nemotron-h-56b-base-8k", "engine": "vllm", "tensor_parallel": "16"})
    assert r.status_code == 400, r.text
    line = run_cli("infer", "nemotron-h-56b-base-8k", "--engine", "vllm", "--tp", "16").stderr.strip()
    assert r.json()["field"] == "tensor_parallel"
    assert r.json()["detail"] == line.removeprefix("llmsizer: error: ").removesuffix(" (see --help)")

"""The recurrent mixers' prefill peak (formulas/recurrent_activations.py eqs. M4, G4, M5) against real CPU forwards.

Independent truth: transformers 5.24 runs each tiny model's prefill on the CPU through its torch reference functions
(no mamba_ssm / causal-conv1d / fla installed, the path the equations count). ``oracle_utils.module_prefill_peak_bytes``
follows every storage created inside the first mixer's forward (a TorchDispatchMode with weak references) and
reports the most alive at once, less the cache's conv state (the ``recurrent_state`` item). The cases reach each
moment the equations take the maximum of: Mamba-2 at the scan's end and, with n > 3 P, inside the C-times-states
einsum; padded and unpadded, one chunk and several; Gated DeltaNet at the intra-chunk product (small heads), the
chunk loop's state update (dk = dv = 128, Qwen3-Next's) and the output reshape (long prompt), with and without the
z / b / a copies (1 < Hk < Hv); Mamba-1 (MambaMixer, FalconMambaMixer, JambaMambaMixer) at the end of the
sequential scan and, with a prompt shorter than the state, at its last step, fp32 and bf16, with and without the
input copy generate()'s attention mask makes. Measured equal to the byte today; asserted within 1 %.

Then the whole model: ``MemTracker``'s peak of every live tensor (weights, cache, activations) during the prefill
against the estimate's weights + KV + recurrent state + activations, within the 10 % of
tests/formulas/test_activations_forward.py. Measured (transformers 5.24, torch 2.13 CPU; ratio estimate / measured):
before this rule (the attention-layer rule) mamba2 fp32 0.209, bf16 0.118, qwen3_next bf16 0.338, nemotron_h bf16
0.081; then 1.009, 0.997, 1.024, 1.004; with no rotary tables where the model builds none (ModelSpec.rotary,
review24 D7: Mamba2Model and NemotronHModel make no cos/sin) 1.001, 0.992, 1.024, 1.001. Jamba (Mamba-1 layers,
eq. M5) bf16: before 0.228, then 1.004.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import estimate_inference
from llmsizer.formulas.recurrent_activations import (
    MAMBA1_RAW_MASK_TYPES,
    gated_deltanet_prefill_peak_bytes,
    mamba1_prefill_peak_bytes,
    mamba2_prefill_peak_bytes,
)
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import HYBRID_TINY, MAMBA_LAYER_CASES, hf_config, module_prefill_peak_bytes, prefill_peak_bytes, torch

pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}
MIXER_TOLERANCE = 0.01
MODEL_TOLERANCE = 0.10

MAMBA2 = MAMBA_LAYER_CASES["mamba2"][0]  # heads 8 x 16, state 24, groups 2, chunk 64
MIXERS = {"mamba2": "Mamba2Mixer", "nemotron_h": "NemotronHMamba2Mixer", "falcon_h1": "FalconH1Mixer",
          "granitemoehybrid": "GraniteMoeHybridMambaLayer"}

MAMBA_CASES = [  # (config name, overrides, batch, tokens, dtype)
    ("mamba2", {}, 2, 512, "fp32"),
    ("mamba2", {}, 2, 512, "bf16"),
    ("mamba2", {}, 1, 300, "bf16"),  # padded to 320
    ("mamba2", {}, 2, 40, "bf16"),  # one chunk
    ("mamba2", {"state_size": 64, "chunk_size": 32}, 2, 256, "bf16"),  # n > 3 P: the einsum moment
    ("nemotron_h", {}, 2, 200, "bf16"),
    ("falcon_h1", {}, 1, 128, "fp32"),  # mup_vector product, no gated norm
    ("granitemoehybrid", {}, 2, 200, "bf16"),  # one group
]

GDN = HYBRID_TINY["qwen3_next"]  # Hk 2, Hv 4, dk 8, dv 12
GDN_CASES = [  # (overrides, batch, tokens, dtype)
    ({}, 2, 300, "bf16"),  # the intra-chunk product
    ({}, 1, 100, "fp32"),
    ({"linear_key_head_dim": 128, "linear_value_head_dim": 128}, 2, 300, "bf16"),  # the state update
    ({"linear_key_head_dim": 32, "linear_value_head_dim": 32}, 1, 1000, "bf16"),  # the output reshape
    ({"linear_num_key_heads": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 64}, 2, 200, "fp32"),  # Hk = Hv
    ({"linear_num_key_heads": 1}, 2, 130, "bf16"),  # Hk = 1: no copies
]


def _mamba_cfg(name: str, over: dict[str, Any]) -> dict[str, Any]:
    return {**(MAMBA2 if name == "mamba2" else MAMBA_LAYER_CASES[name][0]), **over}


def _check(measured: int, predicted: int, label: str, tolerance: float, capsys: Any) -> None:
    ratio = predicted / measured
    with capsys.disabled():
        print(f"\n[{label}] measured {measured} B, predicted {predicted} B, ratio {ratio:.4f}")
    assert abs(ratio - 1) <= tolerance, f"predicted/measured = {ratio:.4f}"


@pytest.mark.parametrize(("name", "over", "batch", "tokens", "dtype"), MAMBA_CASES,
                         ids=[f"{c[0]}-{c[2]}x{c[3]}-{c[4]}{'-' + '-'.join(c[1]) if c[1] else ''}" for c in MAMBA_CASES])
def test_mamba2_mixer_peak_equals_the_live_tensors(name, over, batch, tokens, dtype, capsys):
    cfg = _mamba_cfg(name, over)
    torch_dtype, c = DTYPES[dtype]
    measured = module_prefill_peak_bytes(cfg, torch_dtype, batch, tokens, MIXERS[name])
    r = spec_from_config(cfg, name=name).recurrent
    assert r is not None
    predicted = mamba2_prefill_peak_bytes(batch, tokens, r.num_heads, r.head_dim, r.d_state, r.n_groups,
                                          r.chunk_size, c)
    _check(measured, predicted, f"{name} {batch}x{tokens} {dtype}", MIXER_TOLERANCE, capsys)


@pytest.mark.parametrize(("over", "batch", "tokens", "dtype"), GDN_CASES,
                         ids=[f"{c[1]}x{c[2]}-{c[3]}-{i}" for i, c in enumerate(GDN_CASES)])
def test_gated_deltanet_peak_equals_the_live_tensors(over, batch, tokens, dtype, capsys):
    cfg = {**GDN, **over}
    torch_dtype, c = DTYPES[dtype]
    measured = module_prefill_peak_bytes(cfg, torch_dtype, batch, tokens, "Qwen3NextGatedDeltaNet")
    predicted = gated_deltanet_prefill_peak_bytes(batch, tokens, cfg["linear_num_key_heads"],
                                                  cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                                                  cfg["linear_value_head_dim"], c)
    _check(measured, predicted, f"qwen3_next {over} {batch}x{tokens} {dtype}", MIXER_TOLERANCE, capsys)


MAMBA1 = {"model_type": "mamba", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2, "state_size": 8}
MAMBA1_MIXERS = {"mamba": "MambaMixer", "falcon_mamba": "FalconMambaMixer", "jamba": "JambaMambaMixer"}
MAMBA1_CASES = [  # (model type, overrides, batch, tokens, dtype, generate()'s all-ones attention mask)
    ("mamba", {}, 2, 100, "bf16", False),
    ("mamba", {}, 2, 100, "fp32", True),  # the mixer's input copy
    ("mamba", {"state_size": 32}, 2, 6, "bf16", False),  # s < n: the last loop step
    ("falcon_mamba", {}, 1, 80, "bf16", True),  # dt / B / C norms
    ("jamba", {}, 2, 100, "bf16", True),  # JambaModel drops an all-ones mask
    ("jamba", {"mamba_d_state": 16}, 1, 64, "fp32", False),
]


def _mamba1_cfg(name: str, over: dict[str, Any]) -> dict[str, Any]:
    return {**(MAMBA_LAYER_CASES["jamba"][0] if name == "jamba" else {**MAMBA1, "model_type": name}), **over}


@pytest.mark.parametrize(("name", "over", "batch", "tokens", "dtype", "mask"), MAMBA1_CASES,
                         ids=[f"{c[0]}-{c[2]}x{c[3]}-{c[4]}{'-mask' if c[5] else ''}{'-' + '-'.join(c[1]) if c[1] else ''}"
                              for c in MAMBA1_CASES])
def test_mamba1_mixer_peak_equals_the_live_tensors(name, over, batch, tokens, dtype, mask, capsys):
    cfg = _mamba1_cfg(name, over)
    torch_dtype, c = DTYPES[dtype]
    measured = module_prefill_peak_bytes(cfg, torch_dtype, batch, tokens, MAMBA1_MIXERS[name], attention_mask=mask)
    if name == "jamba":  # the reader's spec
        r = spec_from_config(cfg, name=name).recurrent
        assert r is not None
        d, n, rank, norms = r.d_inner, r.d_state, r.dt_rank, r.bcdt_norms
    else:  # no reader: the sizes MambaMixer / FalconMambaMixer read from their config
        conf = hf_config(cfg)
        d, n, rank, norms = conf.intermediate_size, conf.state_size, conf.time_step_rank, name == "falcon_mamba"
    predicted = mamba1_prefill_peak_bytes(batch, tokens, cfg["hidden_size"], d, n, rank, c, bcdt_norms=norms,
                                          masked_input=mask and name in MAMBA1_RAW_MASK_TYPES)
    _check(measured, predicted, f"{name} {over} {batch}x{tokens} {dtype} mask={mask}", MIXER_TOLERANCE, capsys)


MODEL_CASES = [("mamba2", 2, 512, "fp32"), ("mamba2", 2, 512, "bf16"), ("qwen3_next", 2, 300, "bf16"),
               ("nemotron_h", 2, 300, "bf16"), ("jamba", 2, 300, "bf16")]


@pytest.mark.parametrize(("name", "batch", "tokens", "dtype"), MODEL_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in MODEL_CASES])
def test_hybrid_prefill_peak_within_10_percent_of_live_tensors(name, batch, tokens, dtype, capsys):
    cfg = MAMBA2 if name == "mamba2" else HYBRID_TINY[name]
    attn = "eager" if name == "mamba2" else "sdpa"  # Mamba2ForCausalLM refuses sdpa (it has no attention)
    measured = prefill_peak_bytes(cfg, DTYPES[dtype][0], attn, batch, tokens)
    est = estimate_inference(spec_from_config(cfg, name=name), engine="transformers", context=tokens,
                             output_tokens=0, concurrency=batch, dtype=dtype, weights=dtype, device="cpu")
    names = {i.name for i in est.items}
    predicted = sum(est.item(n).bytes for n in ("weights", "kv_cache", "recurrent_state", "activations")
                    if n in names)
    assert "approximated by the attention-layer rule" not in " ".join(est.warnings)
    _check(measured, predicted, f"{name} model {batch}x{tokens} {dtype}", MODEL_TOLERANCE, capsys)

"""Mamba layers in the training formulas (formulas/mamba_activations.py eqs. M1 and J1, the torch path) against what
autograd saves.

Independent truth: the distinct non-parameter storages autograd saves (``saved_storages_by_layer``, as
tests/training/test_qwen3_next_saved_tensors.py) while each decoder layer of a small model runs a pure-bf16 training
forward on the CPU, where transformers 5.24 runs its torch reference functions (``mamba2_chunk_scan``,
``causal_conv1d_fn``, ``mamba_selective_scan``'s sequential loop: neither mamba_ssm nor causal-conv1d is installed).
A whole layer is compared: its norms, the Mamba mixer, and the attention and feed-forward blocks it has (Falcon-H1
runs attention and Mamba-2 side by side, Jamba and Granite-4.0-H have an MLP / MoE after the mixer).

Measured (transformers 5.24, torch 2.13 CPU) and counted to the byte, pure bf16 and pure fp32 (Falcon-H1's
``mup_vector`` buffer, kept by ``projected_states * mup_vector``, included: eq. M1b). Before, a
Mamba layer was counted with the attention (and MLP) rules: Nemotron-H 0.165, Falcon-H1 0.235, Jamba 0.064 of what
it saves (issues #12, #16). Under bf16 autocast with fp32 weights (eq. M1a) see the last test.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.estimate.training.states import _autocast_copies
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import MAMBA_LAYER_CASES as CASES
from oracle_utils import mamba_saved_by_layer, torch

pytestmark = pytest.mark.slow

DTYPES = {"bf16": (torch.bfloat16, 2), "fp32": (torch.float32, 4)}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("batch", "tokens"), [(2, 256), (1, 200), (2, 48), (1, 48)])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_mamba_layer_saved_tensors_torch_path(name: str, batch: int, tokens: int, dtype: str, capsys: Any) -> None:
    """Several chunks (256 = 4 x 64), a padded last chunk (200) and one chunk (48 < 64: einsum views, more of them
    with one sequence); pure bf16 and pure fp32 (no autocast: the mixer's .float() casts are no-ops, eqs. M1c, J1a).
    Pure fp32 read before eqs. M1c / J1a (B=2 T=256): Mamba-2 1.0083, Nemotron-H 1.0166 (with its norm's weight copy,
    256 B, that fp32 weights do not make), Falcon-H1 0.9887, Falcon-H1 with the gated norm 1.0139, Granite-4.0-H
    1.0215, Jamba 1.2211 (its loop's states counted twice, x and D.float() once too many)."""
    _torch_path_layer_exact(name, batch, tokens, dtype, capsys, frozen=False)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("batch", "tokens"), [(2, 256), (1, 200)])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_mamba_layer_torch_path_frozen(name: str, batch: int, tokens: int, dtype: str, capsys: Any) -> None:
    """Every weight but the embedding frozen (a LoRA layer past its first adapter, the mixer unadapted: eqs. M3, J3),
    pure bf16 and pure fp32 (eqs. M1c, J1a with M3, J3)."""
    _torch_path_layer_exact(name, batch, tokens, dtype, capsys, frozen=True)


# under autocast with fp32 weights, before: Falcon-H1 0.87 (0.93 with mamba_rms_norm) before eq. M1b; Nemotron-H
# 1.00004-1.00009 before its NemotronHRMSNorm's fp32 weight copy (256 B) was counted only for 16-bit weights
# (training_activations.py ``_norm_weight_copied``); Granite-4.0-H 1.008-1.0095 before its fused input_linear was
# given one input copy (``ModelSpec.fused_gate_up``: one [t, h] 16-bit copy too many); Jamba 0.988 before eq. J1b
# (conv1d's own 16-bit copy of x, no D.float() copy). Now every case to the byte.
AUTOCAST_CASES = ("mamba2", "nemotron_h", "falcon_h1", "falcon_h1_rms_norm", "granitemoehybrid", "jamba")


@pytest.mark.parametrize("name", AUTOCAST_CASES)
@pytest.mark.parametrize(("batch", "tokens"), [(2, 256), (1, 200)])
@pytest.mark.parametrize("weights", ["fp32", "bf16"])
def test_mamba_layer_under_autocast(name: str, batch: int, tokens: int, weights: str, capsys: Any) -> None:
    """CPU bf16 autocast (the estimate's bf16-mixed) over fp32 weights, eq. M1a, and over bf16 weights (LoRA's
    default), where conv1d's cast to the weight's dtype copies nothing and Falcon-H1's mup_vector product is bf16
    (no M1a conv copy, no M1b). The autocast weight copies (fp32 weights only) are counted from the real layer's
    weights of two or more dimensions (in_proj, conv1d, out_proj, attention, MLP)."""
    cfg, layer = CASES[name]
    fp32 = weights == "fp32"
    layers, by_layer = mamba_saved_by_layer(cfg, batch, tokens, torch.float32 if fp32 else torch.bfloat16,
                                            autocast=True)
    spec = spec_from_config(cfg, name=f"tiny-{name}")
    # the estimate's weight copies (estimate/training/states.py recurrent_copied: on the torch path conv1d's too)
    cast = dict(_autocast_copies(spec, 1, 0, 1, torch_conv=True)[1]).get(layer, 0) if fp32 else 0
    wb = 4 if fp32 else 2
    st = ActivationSetup(batch=batch, seq=tokens, residual=wb, compute=2, expert=wb, autocast=True,
                         weight_copy=2 if fp32 else 0, full=True, attention="sdpa", mamba_path="torch")
    predicted = sum(t.bytes for t in layer_saved_terms(spec, layer, st, cast))
    with capsys.disabled():
        print(f"\n[{name} layer {layer}, B={batch} T={tokens}, autocast, {weights} weights] saved "
              f"{by_layer[layer]:,} B, counted {predicted:,} B (ratio {predicted / by_layer[layer]:.5f})")
    assert predicted == by_layer[layer]


def _torch_path_layer_exact(name: str, batch: int, tokens: int, dtype: str, capsys: Any, *, frozen: bool) -> None:
    """The recurrent layer's saved bytes, measured in a real forward on the torch path, equal the counted terms."""
    cfg, layer = CASES[name]
    torch_dtype, c = DTYPES[dtype]
    measured = mamba_saved_by_layer(cfg, batch, tokens, torch_dtype, frozen=frozen)[1][layer]
    spec = spec_from_config(cfg, name=f"tiny-{name}")
    assert spec.recurrent_layers[layer]
    st = ActivationSetup(batch=batch, seq=tokens, residual=c, compute=c, expert=c, full=not frozen, attention="sdpa",
                         mamba_path="torch")
    predicted = sum(t.bytes for t in layer_saved_terms(spec, layer, st))
    with capsys.disabled():
        print(f"\n[{name} layer {layer}, B={batch} T={tokens}, {dtype}{', frozen' if frozen else ''}] saved "
              f"{measured:,} B, counted {predicted:,} B (ratio {predicted / measured:.5f})")
    assert predicted == measured

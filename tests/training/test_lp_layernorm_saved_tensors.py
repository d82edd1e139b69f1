"""llm-foundry's low-precision LayerNorm (``layernorm='low-precision'``, formulas/training_activations.py eq. N4)
against what autograd saves in a real CPU forward.

Independent truth: the distinct non-parameter storages autograd saves (``saved_storages_by_layer``, as
tests/training/test_gpt_bigcode_saved_tensors.py) in the middle decoder layer of the small GPT-BigCode that stands for
the llm-foundry MPT rows (validation_cases.mpt_config: LayerNorms with bias, fused c_attn, GELU MLP), fp32 weights
under CPU bf16 autocast (bf16-mixed), SDPA, B=2 x T=256, once with transformers' own ``nn.LayerNorm`` and once with
every LayerNorm replaced by the ``LPLayerNorm`` below. The class replicates llm-foundry's casting semantics, read
from its source (it does not install here): llmfoundry/models/layers/norm.py @ b2a43a147 lines 9-18
(``_cast_if_autocast_enabled``: ``tensor.to(dtype=torch.get_autocast_cpu_dtype())`` when autocast is on) and
lines 39-53 (the input, weight and bias cast, then ``torch.nn.functional.layer_norm`` under
``torch.autocast(enabled=False)``); it is the MPT rows' norm (submit_benchmarks.py @ b2a43a147 line 307: model.norm_type
'low_precision_layernorm').

On the CPU ``native_layer_norm`` keeps mean and rstd in the input's dtype when input and weight share it (torch
aten/src/ATen/native/layer_norm.cpp: the statistics take ``param_scalar_type(input, mixed_type)``, the input's type
unless the weight's differs), so the two bf16 statistics of each low-precision norm are 2 B here where eq. N4
counts CUDA's fp32 accumulate type: 2 norms x 2 x T x (4 - 2) B below the count, which the comparison adds back.
Measured (torch 2.13.0 CPU, transformers 5.24): torch LayerNorm 6,316,032 B (as the GPT-BigCode test), counted
6,316,032; low-precision 5,789,696 B, counted 5,793,792 (eq. N4), the CPU statistics' 4,096 B apart: to the byte.
Before eq. N4 the count kept the fp32 norm inputs: 6,316,032 B for either norm (1.091 x the low-precision layer).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, random_ids, saved_storages_by_layer, torch

pytestmark = pytest.mark.slow

BATCH, TOKENS, LAYER = 2, 256, 1
CPU_STAT_BYTES = 2  # the bf16 mean/rstd of a CPU native_layer_norm over bf16 input and weight (module docstring)
CONFIG = {"model_type": "gpt_bigcode", "n_embd": 256, "n_head": 8, "n_layer": 3, "n_inner": 1024,
          "n_positions": TOKENS, "vocab_size": 3000, "multi_query": False, "tie_word_embeddings": True,
          "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}


def _cast_if_autocast_enabled(tensor: Any) -> Any:
    """llm-foundry norm.py lines 9-18, the CPU branch."""
    if torch.is_autocast_enabled("cpu"):
        return tensor.to(dtype=torch.get_autocast_dtype("cpu"))
    return tensor


class LPLayerNorm(torch.nn.LayerNorm):
    """llm-foundry norm.py lines 21-53: cast input, weight and bias to the autocast dtype, then layer_norm with
    autocast off."""

    def forward(self, x: Any) -> Any:
        x_ = _cast_if_autocast_enabled(x)
        w = _cast_if_autocast_enabled(self.weight) if self.weight is not None else None
        b = _cast_if_autocast_enabled(self.bias) if self.bias is not None else None
        with torch.autocast(enabled=False, device_type=x.device.type):
            return torch.nn.functional.layer_norm(x_, self.normalized_shape, w, b, self.eps)


def _low_precision(model: Any) -> int:
    """Replace every nn.LayerNorm of ``model`` by an LPLayerNorm with the same parameters; returns how many."""
    n = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.LayerNorm:
                lp = LPLayerNorm(child.normalized_shape, eps=child.eps)
                lp.load_state_dict(child.state_dict())
                setattr(parent, name, lp)
                n += 1
    return n


def _measured(low_precision: bool) -> int:
    torch.manual_seed(0)
    model = build(CONFIG, device="cpu", dtype=torch.float32, attn="sdpa")
    if low_precision:
        assert _low_precision(model) == 2 * CONFIG["n_layer"] + 1  # ln_1, ln_2 per block and ln_f
    model.train()
    by_layer = saved_storages_by_layer(model, model.transformer.h)
    ids = random_ids(CONFIG["vocab_size"], BATCH, TOKENS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=ids, labels=ids, use_cache=False)
    return by_layer[LAYER]


def _counted(low_precision: bool) -> int:
    spec = spec_from_config(CONFIG, name="tiny-mpt")
    cast = 3 * 256 * 256 + 256 * 256 + 2 * 256 * 1024  # c_attn, c_proj, c_fc, mlp c_proj: autocast weight copies
    st = ActivationSetup(batch=BATCH, seq=TOKENS, residual=4, compute=2, expert=4, autocast=True, weight_copy=2,
                         full=True, attention="sdpa", lp_layernorm=low_precision)
    return sum(t.bytes for t in layer_saved_terms(spec, LAYER, st, cast))


@pytest.mark.parametrize("low_precision", [False, True], ids=["torch-layernorm", "lp-layernorm"])
def test_layer_saved_bytes(low_precision: bool, capsys: Any) -> None:
    measured = _measured(low_precision)
    counted = _counted(low_precision)
    cpu_stats = 2 * 2 * BATCH * TOKENS * (4 - CPU_STAT_BYTES) if low_precision else 0
    with capsys.disabled():
        print(f"\n[tiny MPT layer, bf16 autocast, {'LPLayerNorm' if low_precision else 'nn.LayerNorm'}] saved "
              f"{measured:,} B, counted {counted:,} B (CUDA statistics; {cpu_stats:,} B more than the CPU's)")
    assert counted - cpu_stats == measured


def test_low_precision_saves_the_half_copies() -> None:
    """What the low-precision norms save less: per norm T x h x (4 - 2) B of input, less the bf16 weight and bias
    copies (2 x h x 2 B) they keep; on the CPU also their bf16 statistics (module docstring)."""
    h, t = CONFIG["n_embd"], BATCH * TOKENS
    drop = _measured(False) - _measured(True)
    assert drop == 2 * (t * h * (4 - 2) - 2 * h * 2 + 2 * t * (4 - CPU_STAT_BYTES))

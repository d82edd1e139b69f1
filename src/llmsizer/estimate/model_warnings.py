"""Warnings an estimate carries because of what the model spec leaves out (one home for inference and training).

- Gemma 3n (``ModelSpec.gemma3n``): the activation formulas (formulas/activations.py, training_activations.py)
  model one residual stream per token; Gemma 3n keeps ``altup_inputs`` streams of the hidden width through every
  layer (Gemma3nTextModel.forward stacks them, transformers v5.24.0 modeling_gemma3n.py L1680-1692), the per-layer
  inputs [tokens, num_layers, per_layer_width] for the whole forward (``project_per_layer_inputs``), and LAuReL's and
  the per-layer gate's intermediates: activation memory is a lower bound, said by name.
- A per-layer ``intermediate_size`` list (``ModelSpec.ffn_sizes``): the activation terms take the widest layer's.
- A multimodal ``gemma3n`` config: its vision (MobileNetV5, timm) and audio towers are not counted
  (``Gemma3nSpec.uncounted``, readers/hf_gemma3n.py).
"""

from __future__ import annotations

from ..specs import ModelSpec

GEMMA3N_ACTIVATIONS = "gemma3n_activations"
GEMMA3N_TOWERS = "gemma3n_towers_not_counted"
GEMMA3N_FFN_WIDTHS = "gemma3n_per_layer_ffn_widths"


def model_warnings(spec: ModelSpec, training: bool) -> list[str]:
    """The named warnings ``spec``'s unmodelled parts put on an estimate (module docstring)."""
    g = spec.gemma3n
    if g is None:
        return []
    what = "training activation memory" if training else "the activation peak"
    out = [f"{GEMMA3N_ACTIVATIONS}: Gemma 3n's {g.altup_inputs} AltUp streams of {spec.hidden_size} per token, its "
           f"per-layer inputs ({spec.num_layers} x {g.per_layer_width} per token) and LAuReL are not in the "
           f"activation model: {what} is a lower bound"]
    if spec.ffn_sizes:
        out.append(f"{GEMMA3N_FFN_WIDTHS}: the feed-forward width differs per layer ({min(spec.ffn_sizes)}-"
                   f"{max(spec.ffn_sizes)}); weights follow each layer's, activation terms take the widest "
                   f"({spec.intermediate_size})")
    if g.uncounted:
        out.append(f"{GEMMA3N_TOWERS}: the {' and the '.join(g.uncounted)} of this multimodal gemma3n config are "
                   "not counted (weights, memory and speed are the language model's)")
    return out

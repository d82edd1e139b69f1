"""Warnings an estimate carries because of what the model spec leaves out (one home for inference and training).

- Gemma 3n (``ModelSpec.gemma3n``): the transformers forward's activation peak counts its ``altup_inputs`` AltUp
  streams, the per-layer inputs and LAuReL (formulas/activations.py ``gemma3n_prefill_terms``, within 0.5% of a real
  CPU forward: tests/formulas/test_gemma3n_activations_forward.py); the training activation terms count them too
  (formulas/training_activations.py ``gemma3n_saved_terms``: within 2% of what autograd saves in a full fp32 and
  bf16 training forward, tests/training/test_gemma3n_saved_tensors.py). Still one residual stream per token: the
  other engines' graphs (vLLM, SGLang, llama.cpp): there the activation peak is a lower bound, said by name.
- A per-layer ``intermediate_size`` list (``ModelSpec.ffn_sizes``): the activation terms take the widest layer's.
- A multimodal ``gemma3n`` config: its vision (MobileNetV5, timm) and audio towers are not counted
  (``Gemma3nSpec.uncounted``, readers/hf_gemma3n.py).

What the estimators refuse rather than size (``refuse_unmodelled``, one line, exit 2 / HTTP 400):

- Serving a T5-style encoder-decoder (``ModelSpec.encoder_decoder``: T5, mT5, T0, mT0). Its parameters, weights
  and tensor inventory are exact (formulas/tensors.py), but serving one keeps the decoder's self-attention K/V per
  generated token plus each decoder layer's cross-attention K/V over the source, which the serving estimate does
  not compose: no number is given.
- Training one other than as measured: its saved activations (formulas/encoder_decoder_activations.py eqs. E4, E5)
  are counted for ``T5_TRAINING`` alone (fp32, eager attention, no checkpointing, one device, plain cross-entropy),
  every weight trained or LoRA as ``T5_LORA`` (eq. E6); any other setting of those is refused.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs import ModelSpec, TrainingWorkload

# the training settings whose encoder-decoder activations are counted (measured in tests/training/test_t5_saved_tensors.py)
T5_TRAINING = {"precision": "fp32", "attention": "eager", "grad_checkpointing": "none", "tp": 1,
               "pp": 1, "context_parallel": 1, "loss": "ce", "loss_chunks": 1, "kernels": "pytorch",
               "compile": False, "float8": False, "activation_offload": False, "sequence_parallel": False}
# and under LoRA (eq. E6): PEFT's T5 default targets, each adapter with its own dropout
T5_LORA = {"targets": ("q", "v"), "lora_dropout": "per-module", "dora": False, "modules_to_save": ()}
GEMMA3N_ACTIVATIONS = "gemma3n_activations"
GEMMA3N_TOWERS = "gemma3n_towers_not_counted"
GEMMA3N_FFN_WIDTHS = "gemma3n_per_layer_ffn_widths"


def model_warnings(spec: ModelSpec, training: bool, engine: str = "transformers") -> list[str]:
    """The named warnings ``spec``'s unmodelled parts put on an estimate (module docstring); ``engine``: the
    inference engine profile (ignored for training)."""
    g = spec.gemma3n
    if g is None:
        return []
    out = []
    if not training and engine != "transformers":
        out.append(f"{GEMMA3N_ACTIVATIONS}: Gemma 3n's {g.altup_inputs} AltUp streams of {spec.hidden_size} per "
                   f"token, its per-layer inputs ({spec.num_layers} x {g.per_layer_width} per token) and LAuReL are "
                   f"not in the {engine} activation model: the activation peak is a lower bound")
    if spec.ffn_sizes:
        out.append(f"{GEMMA3N_FFN_WIDTHS}: the feed-forward width differs per layer ({min(spec.ffn_sizes)}-"
                   f"{max(spec.ffn_sizes)}); weights follow each layer's, activation terms take the widest "
                   f"({spec.intermediate_size})")
    if g.uncounted:
        out.append(f"{GEMMA3N_TOWERS}: the {' and the '.join(g.uncounted)} of this multimodal gemma3n config are "
                   "not counted (weights, memory and speed are the language model's)")
    return out


def refuse_unmodelled(spec: ModelSpec, training: bool, w: TrainingWorkload | None = None) -> None:
    """Raise one ``InputError`` line when ``spec`` has a structure the memory model does not cover (module
    docstring); return otherwise. ``w``: the training workload (an encoder-decoder trains as ``T5_TRAINING``)."""
    ed = spec.encoder_decoder
    if ed is None:
        return
    if training and w is not None:
        off = [f"{k} {getattr(w, k)!r} (counted: {v!r})" for k, v in T5_TRAINING.items() if getattr(w, k) != v]
        if w.method not in ("full", "lora"):
            off.append(f"method {w.method!r} (counted: 'full', 'lora')")
        elif w.method == "lora":
            off += [f"{k} {getattr(w, k)!r} (counted: {v!r})" for k, v in T5_LORA.items() if getattr(w, k) != v]
        if not off:
            return
        raise InputError(f"model {spec.name!r} is an encoder-decoder ({spec.model_type}): its training memory is "
                         "modelled as measured (formulas/encoder_decoder_activations.py) for "
                         f"{', '.join(f'{k} {v!r}' for k, v in T5_TRAINING.items())}, method 'full' or 'lora' with "
                         f"{', '.join(f'{k} {v!r}' for k, v in T5_LORA.items())} only; not modelled: "
                         f"{', '.join(off)}")
    if training:  # no workload: a hardware search (recommend --train), which tries settings outside T5_TRAINING
        raise InputError(f"model {spec.name!r} is an encoder-decoder ({spec.model_type}: {ed.encoder_layers} encoder + "
                         f"{ed.decoder_layers} decoder layers): its training memory is modelled for "
                         f"{', '.join(f'{k} {v!r}' for k, v in T5_TRAINING.items())} only, so no hardware search "
                         "is made for it; size a run with `llmsizer train` or `fit --train`")
    what = ("serving memory (decoder self-attention K/V per generated token plus cross-attention K/V over the "
            "encoder output)")
    raise InputError(f"model {spec.name!r} is an encoder-decoder ({spec.model_type}: {ed.encoder_layers} encoder + "
                     f"{ed.decoder_layers} decoder layers); llmsizer's memory formulas are decoder-only and its "
                     f"{what} is not modelled; `llmsizer inspect` gives its parameters and weights")

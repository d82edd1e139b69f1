"""A ModelSpec from fields the user types (``--params 7B --layers 32 --hidden 4096 --heads 32 ...``).

For models llmsizer does not know. The architecture is taken as a Llama-style decoder (RMSNorm, SwiGLU MLP,
GQA, untied embeddings) unless told otherwise. When ``params`` is given without ``intermediate_size``, the
MLP width is solved from the parameter count so that the total matches:

    params = V*d*(2 - tied) + L*(d*(h + 2*h_kv)*d_h + h*d_h*d + 3*d*I + 2*d) + d     ->  solve for I

Without ``head_dim``, d_h = d // h, floored as vLLM and transformers derive it for a config without one (a note says
so, and how many of the d hidden dimensions the heads span when h does not divide d).

Every value not given is named in the spec's ``notes`` (and so in the estimate's assumptions).
"""

from __future__ import annotations

from ..errors import InputError
from ..numbers import HEADS, LAYERS, PARAMS, VOCAB, WIDTH, WIDTH_OR_ZERO, check_number
from ..specs import ModelSpec

DEFAULT_VOCAB = 32000  # Llama/Mistral tokenizer size, the most common vocabulary of open 7B-class models


def spec_from_manual(*, params: int | None = None, layers: int | None = None, hidden: int | None = None,
                     heads: int | None = None, kv_heads: int | None = None, head_dim: int | None = None,
                     intermediate: int | None = None, vocab: int | None = None, tied: bool = False,
                     name: str = "manual") -> ModelSpec:
    """Build a Llama-style ModelSpec from manual fields (see module docstring)."""
    # every given number through the one validation layer, named by its flag, before any arithmetic
    for flag, v, rng in (("--params", params, PARAMS), ("--layers", layers, LAYERS), ("--hidden", hidden, WIDTH),
                         ("--heads", heads, HEADS), ("--kv-heads", kv_heads, HEADS), ("--head-dim", head_dim, WIDTH),
                         ("--intermediate", intermediate, WIDTH_OR_ZERO), ("--vocab", vocab, VOCAB)):
        if v is not None:
            check_number(v, flag, rng)
    missing = [n for n, v in (("--layers", layers), ("--hidden", hidden), ("--heads", heads)) if v is None]
    if missing:
        raise InputError(f"a manual model needs {', '.join(missing)} (the KV cache and activations depend on "
                         "them); --params alone only sizes the weights")
    assert layers and hidden and heads
    notes: list[str] = []
    if kv_heads is None:
        kv_heads = heads
        notes.append(f"num_kv_heads={heads} (not given: multi-head attention assumed)")
    if head_dim is None:
        # the rule of a config without head_dim: hidden_size // num_attention_heads, floored (transformers 5.24
        # models/llama/configuration_llama.py:86-87 LlamaConfig.__post_init__, which then refuses a hidden size that
        # is not a multiple of the heads, :95-100; vLLM model_executor/models/llama.py LlamaAttention
        # ``head_dim or hidden_size // total_num_heads``, which does not)
        head_dim = hidden // heads
        if head_dim < 1:
            raise InputError(f"--hidden {hidden} is smaller than --heads {heads}; give --head-dim")
        left = hidden - heads * head_dim
        notes.append(f"head_dim={head_dim} (not given: hidden_size // num_heads = {hidden} // {heads}, as transformers "
                     "and vLLM derive it)" if not left else
                     f"head_dim={head_dim} (not given: hidden_size // num_heads = {hidden} // {heads}, floored as vLLM "
                     f"does: the {heads} heads span {heads * head_dim} of the {hidden} hidden dimensions, a config "
                     "transformers 5 refuses; give --head-dim if the model's differs)")
    if heads % kv_heads:
        raise InputError(f"--heads {heads} is not a multiple of --kv-heads {kv_heads} (each KV head serves a whole "
                         "group of query heads)")
    if vocab is None:
        vocab = DEFAULT_VOCAB
        notes.append(f"vocab_size={DEFAULT_VOCAB} (not given: Llama-2/Mistral tokenizer size assumed)")
    per_layer_attn = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden
    embed = vocab * hidden * (1 if tied else 2)
    if intermediate is None:
        if params is None:
            raise InputError("give --intermediate or --params (the MLP width is solved from the parameter count)")
        rest = params - embed - hidden - layers * (per_layer_attn + 2 * hidden)
        intermediate = rest // (3 * hidden * layers)
        if intermediate <= 0:
            raise InputError(f"--params {params:,} is too small for {layers} layers of width {hidden} and a "
                             f"{vocab:,}-token vocabulary")
        notes.append(f"intermediate_size={intermediate} (solved from params={params:,} for a SwiGLU MLP)")
    return ModelSpec(name=name, model_type="manual", vocab_size=vocab, hidden_size=hidden, num_layers=layers,
                     num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=intermediate,
                     tie_word_embeddings=tied, source="manual fields", published_params=params,
                     notes=tuple(notes))

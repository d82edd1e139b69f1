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
- Gemma 4 (``ModelSpec.gemma4``): weights (per-layer inputs, both head sizes, the vision and audio towers) are
  counted exactly (tests/formulas/test_gemma4_params.py) and the KV cache follows each layer's head size and K/V
  sharing (tests/formulas/test_gemma4_kv_forward.py), but the activation terms are the generic decoder's with the
  sliding layers' head_dim: the per-layer-input tensors and the full-attention layers' wider heads are not in them
  (not measured: a lower bound, said by name), and the towers run no images or audio here (text prompts only).

What the estimators refuse rather than size (``refuse_unmodelled``, one line, exit 2 / HTTP 400):

- Serving a T5-style encoder-decoder (``ModelSpec.encoder_decoder``: T5, mT5, T0, mT0) other than as modelled
  (``refuse_serving``): it is sized on the transformers engine alone (estimate/inference/hf_transformers.py with
  formulas/encoder_decoder_serving.py), its weights in fp32, bf16 or fp16, on one device, text only. vLLM has no
  T5 (``_TEXT_GENERATION_MODELS`` of vllm/model_executor/models/registry.py @0002bff0 lists no
  T5ForConditionalGeneration / MT5ForConditionalGeneration); SGLang is not modelled for it (not checked); llama.cpp runs T5 (LLM_ARCH_T5) but keeps no cross-attention cache: every decode step
  projects the kept encoder output to K/V again (src/models/t5-dec.cpp L70-79 @e062ff9c: ``wk_cross`` L75 and
  ``wv_cross`` L78 over ``embd_enc``), a memory and time rule not modelled here. ``recommend`` (a search over engines and formats)
  refuses it too.
- Serving a family on an engine whose modelled release has no model for it (``ENGINE_LACKS_MODEL``: Jamba on SGLang
  0.5.23, Llama-3.2-Vision's mllama on llama.cpp and on vLLM since 0.10.2), refused by ``refuse_engine``; the default engine choice
  (estimate/device.py ``_default_engine_rule``) moves past such an engine to the next that serves the model. (A model with no attention layer, Mamba-Codestral, is served on SGLang:
  estimate/inference/sglang.py eq. 3m.)
  The refusals that hold whatever the device (the engine's, ``refuse_engine``) are said once by a hardware search
  (``recommend --engine``), not once per candidate; each is a ``FieldError`` naming its field as the surface does
  (``--engine`` on the CLI, ``engine`` in a request file, on the web and in Python).
- Training one other than as measured: its saved activations (formulas/encoder_decoder_activations.py eqs. E4, E5)
  are counted for ``T5_TRAINING`` alone (fp32, eager attention, no checkpointing, one device, plain cross-entropy),
  every weight trained or LoRA as ``T5_LORA`` (eq. E6); any other setting of those is refused.
"""

from __future__ import annotations

import re

from ..errors import FieldError, InputError
from ..result import Assumption
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
GEMMA4_ACTIVATIONS = "gemma4_activations"
GEMMA4_TOWERS = "gemma4_towers_weights_only"
GEMMA4_FFN_WIDTHS = "gemma4_per_layer_ffn_widths"


_KEYED_NOTE = re.compile(r"([A-Za-z_][\w.]*)=(.+)", re.S)
MODEL_NOTE_WHY = "not in the model's config: default or derived"
READER_NOTE = "model.reader_note"
# keyed notes that say what became of the user's own input, not a default: the catalog's ``name=`` note, the name
# given resolved to a release of the same architecture (catalog/models.py VARIANT_NOTE)
GIVEN_NOTE_WHY = {"name": "the name given, resolved to a catalog release of the same architecture"}


def model_note_assumptions(spec: ModelSpec) -> list[Assumption]:
    """The assumptions the model reader's notes (``spec.notes``) put on an estimate, inference and training alike: a
    ``key=value (source)`` note is ``model.key`` = ``value (source)``, a default, except the keys that report the
    user's own input (``GIVEN_NOTE_WHY``: the name resolved to a catalog release), which are given; a note in words (no ``key=`` before it: a
    GGUF shape that overrode its metadata, a folder without weights) is one ``model.reader_note`` whose value is
    the note, never the note split at an '=' inside its words."""
    out = []
    for note in spec.notes:
        keyed = _KEYED_NOTE.fullmatch(note)
        if keyed:
            given = GIVEN_NOTE_WHY.get(keyed.group(1))
            out.append(Assumption("model." + keyed.group(1), keyed.group(2), given is None, given or MODEL_NOTE_WHY))
        else:
            out.append(Assumption(READER_NOTE, note, True, "what the model reader derived or could not read"))
    return out


def mtp_assumptions(spec: ModelSpec, training: bool) -> list[Assumption]:
    """One assumption on an estimate of a model whose checkpoint stores multi-token-prediction layers
    (``spec.mtp_layers``, formulas/mtp.py): they are in its stored size, not in the memory sized here. Serving: vLLM's
    main-model loader skips every layer >= num_hidden_layers (deepseek_v2.py / glm4_moe.py ``load_weights``), so
    they are loaded only for MTP speculative decoding, which is not modelled. Training: transformers ignores them on
    load (``_keys_to_ignore_on_load_unexpected``); Megatron-LM trains them only with ``--mtp-num-layers``."""
    if not spec.mtp_layers:
        return []
    why = ("not built by transformers (its _keys_to_ignore_on_load_unexpected skips them); Megatron-LM trains MTP "
           "layers only with --mtp-num-layers, not modelled" if training else
           "the engines load them only for MTP speculative decoding (vLLM's load_weights skips layers >= "
           "num_hidden_layers), not modelled; they are in the checkpoint's stored size (inspect, plan storage)")
    return [Assumption("mtp_layers", f"{spec.mtp_layers} not loaded", True, why)]


def model_warnings(spec: ModelSpec, training: bool, engine: str = "transformers") -> list[str]:
    """The named warnings ``spec``'s unmodelled parts put on an estimate (module docstring); ``engine``: the
    inference engine profile (ignored for training)."""
    if spec.gemma4 is not None:
        return _gemma4_warnings(spec)
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


def _gemma4_warnings(spec: ModelSpec) -> list[str]:
    g = spec.gemma4
    assert g is not None
    out = [f"{GEMMA4_ACTIVATIONS}: Gemma 4's activation terms are the generic decoder's, with each layer's head size "
           f"({spec.head_dim} sliding, {spec.full_head_dim or spec.head_dim} full attention), its v_norm and one rotary "
           f"table pair per layer type; the per-layer inputs ({spec.num_layers} x {g.ple_width} per token) are not in "
           "them (not measured): the activation peak is a lower bound"]
    if spec.ffn_sizes:
        out.append(f"{GEMMA4_FFN_WIDTHS}: the feed-forward width differs per layer ({min(spec.ffn_sizes)}-"
                   f"{max(spec.ffn_sizes)}: use_double_wide_mlp doubles the K/V-sharing layers'); weights follow each "
                   f"layer's, activation terms take the widest ({spec.intermediate_size})")
    towers = [n for n, t in (("vision", g.vision), ("audio", g.audio)) if t is not None]
    if towers:
        out.append(f"{GEMMA4_TOWERS}: the {' and '.join(towers)} tower weights are counted; their activations and "
                   "the image/audio tokens they add to the context are not modelled (text prompts only)")
    return out


# The source length a T5-style model was pre-trained on. Its relative position buckets (T5Attention
# _relative_position_bucket) take any length, so no config key bounds the source and none is refused; past the
# pre-training length the model is used on inputs longer than it was trained on, which is said. The config's own
# n_positions wins where it states one (the original T5 configs: 512); otherwise the paper's figure by model_type.
T5_PRETRAINING_SOURCE = {
    "t5": (512, "T5 paper (Raffel et al. 2020, JMLR 21, sec. 3.1.2): pre-trained with a maximum sequence length of "
                "512 tokens"),
    "mt5": (1024, "mT5 paper (Xue et al. 2021, NAACL, sec. 3): pre-trained on batches of 1024 length-1024 input "
                  "sequences"),
}
T5_SOURCE_LENGTH = "encoder_decoder_source_length"


def source_length_warning(spec: ModelSpec, source_tokens: int) -> str | None:
    """A warning when an encoder-decoder's source (``source_tokens``, the encoder's input) is longer than the
    length ``spec`` states or was pre-trained on (``T5_PRETRAINING_SOURCE``); None otherwise. Not a refusal: the
    relative position buckets take any length, and the memory is sized for the length given."""
    ed = spec.encoder_decoder
    if ed is None:
        return None
    if ed.n_positions is not None:
        limit, why = ed.n_positions, f"the {ed.n_positions} tokens its config states (n_positions)"
    elif spec.model_type in T5_PRETRAINING_SOURCE:
        limit, cite = T5_PRETRAINING_SOURCE[spec.model_type]
        why = f"the {limit} tokens its family was pre-trained on: {cite}"
    else:
        return None
    if source_tokens <= limit:
        return None
    return (f"{T5_SOURCE_LENGTH}: the source (encoder input) is {source_tokens} tokens, more than {why}; its "
            "relative position buckets take any length and the memory is sized for the length given, but the "
            "model's quality past it is not known")


SERVING_ENGINE = "transformers"
SERVING_FORMATS = ("fp32", "bf16", "fp16")
# why an encoder-decoder's default engine is SERVING_ENGINE (estimate/device.py engine_rule): _ENGINE_REASON in short
SERVING_ENGINE_WHY = (f"an encoder-decoder (T5) is modelled on {SERVING_ENGINE} generate() only (vLLM has no T5; "
                      "SGLang's and llama.cpp's are not modelled)")
_ENGINE_REASON = {
    "vllm": "vLLM has no T5 (no T5ForConditionalGeneration in vllm/model_executor/models/registry.py "
            "_TEXT_GENERATION_MODELS @0002bff0)",
    "sglang": "SGLang's support for T5 is not checked or modelled",
    "llamacpp": "llama.cpp runs T5 without a cross-attention cache (each decode step re-projects the encoder output, "
                "src/models/t5-dec.cpp L70-79 @e062ff9c), which is not modelled",
}


def serving_formats(spec: ModelSpec) -> tuple[str, ...] | None:
    """The weight formats ``spec``'s serving is modelled with where that is a closed set (an encoder-decoder:
    ``SERVING_FORMATS``, the others ``refuse_serving`` refuses), else None: every format of the engine."""
    return SERVING_FORMATS if spec.encoder_decoder is not None else None


def one_device_serving(spec: ModelSpec) -> bool:
    """Whether ``spec``'s serving is modelled on one device only (an encoder-decoder: ``refuse_serving`` refuses
    tensor parallelism), so that ``fit`` lays several devices out as replicas of one device each."""
    return spec.encoder_decoder is not None


# Model families (config model_type) an engine's modelled release does not serve at all, whatever the device: engine
# -> model_type -> why. SGLang 0.5.23 (the PyPI wheel its profile reads) has no Jamba: no sglang/srt/models/jamba.py
# (its models/ has mamba.py, mamba2.py, falcon_h1.py, nemotron_h.py, granitemoehybrid.py, qwen3_next.py; no
# EntryClass names JambaForCausalLM), so get_model_architecture (model_loader/utils.py:198-233, :224-231) falls back to
# transformers, and with the default --model-impl auto resolve_transformers_arch raises "has no SGlang implementation
# and the Transformers implementation is not compatible with SGLang" (:181-188) because JambaPreTrainedModel does not
# set _supports_attention_backend (transformers 5.19.0, the wheel's pin: modeling_jamba.py:787, default False in
# modeling_utils.py:1145). Its MambaPool rules (estimate/inference/sglang.py eq. 4b) would size a server that
# does not start.
# llama.cpp has no mllama (Llama-3.2-Vision: MllamaForConditionalGeneration, a text model whose cross-attention
# layers read the image): src/llama-arch.cpp's LLM_ARCH_NAMES @00395eb2 has no mllama architecture and
# tools/mtmd/clip-impl.h's PROJECTOR_TYPE_NAMES @0024aa74 no projector for it; ggml-org/llama.cpp#9643 "Llama-3.2
# 11B Vision Support" was closed without it (Ollama serves it with its own Go implementation, ollama/ollama#6965).
# So no GGUF of it loads. The other catalog families with images have both there (probe21 D5 sweep at those
# commits): gemma3 (arch gemma3, projector gemma3), gemma4 (gemma4, gemma4v), llama4 (llama4, llama4),
# qwen2_5_vl (qwen2vl, qwen2.5vl_merger), qwen3_vl / qwen3_vl_moe (qwen3vl / qwen3vlmoe, qwen3vl_merger); and every
# text-only family of the catalog has its architecture in LLM_ARCH_NAMES (mistral and mixtral as llama, kimi_k2 as
# deepseek2, mt5 as t5, granitemoehybrid as granitehybrid). vLLM dropped mllama with its other encoder-decoder
# models at the V0 engine's removal: vllm/model_executor/models/registry.py @0002bff0 lists
# "MllamaForConditionalGeneration" in _PREVIOUSLY_SUPPORTED_MODELS (supported until 0.10.2), in no registry it loads.
ENGINE_LACKS_MODEL: dict[str, dict[str, str]] = {
    "sglang": {"jamba": "SGLang 0.5.23 has no Jamba model (no sglang/srt/models/jamba.py; its fallback to the "
                        "transformers implementation stops at load: JambaForCausalLM is not backend-compatible, "
                        "model_loader/utils.py:181-188)"},
    "vllm": {"mllama": "vLLM serves mllama no more since 0.10.2 (registry.py @0002bff0: "
                       "MllamaForConditionalGeneration in _PREVIOUSLY_SUPPORTED_MODELS)"},
    "llamacpp": {"mllama": "llama.cpp has no mllama architecture (Llama-3.2-Vision: no LLM_ARCH for it in "
                           "src/llama-arch.cpp @00395eb2, no mtmd projector; ggml-org/llama.cpp#9643), so no GGUF of "
                           "it loads"},
}


def engine_lacks(spec: ModelSpec, engine: str) -> str | None:
    """Why ``engine``'s modelled release does not serve ``spec`` at all, None where it does: its family
    (``ENGINE_LACKS_MODEL``), or a GPT-2 config with an attention flag vLLM's and SGLang's GPT2Model assert false
    (``ModelSpec.gpt2_attention_flags``; readers/hf_config.py ``GPT2_ENGINE_ASSERTED``)."""
    lacks = ENGINE_LACKS_MODEL.get(engine, {}).get(spec.model_type)
    if lacks is None and spec.gpt2_attention_flags and engine in ("vllm", "sglang"):
        where = ("vllm/model_executor/models/gpt2.py @e7dffa68" if engine == "vllm"
                 else "python/sglang/srt/models/gpt2.py @00b08c49")
        lacks = (f"its GPT2Model asserts {' and '.join(f'not config.{f}' for f in spec.gpt2_attention_flags)} "
                 f"({where} GPT2Model.__init__), and this config sets it")
    return lacks


def refuse_engine(spec: ModelSpec, engine: str) -> None:
    """Raise one ``FieldError`` line about the field ``engine`` when serving ``spec`` on ``engine`` is not modelled
    whatever the device, format or layout (an encoder-decoder off transformers; a family the engine's release does
    not serve, ``ENGINE_LACKS_MODEL``): said once by a hardware search (recommend) rather than once per
    candidate, and first by :func:`refuse_serving`. The field is named as each surface names it (``--engine`` on
    the CLI and in the web's detail (whose ``field`` is the body's key), the request file's key; errors.FieldError.renamed)."""
    if spec.encoder_decoder is not None and engine != SERVING_ENGINE:
        raise FieldError("engine", f"{_modelled_on(spec)}; not on {engine}: {_ENGINE_REASON.get(engine, 'not modelled')}",
                         also=("weights",))
    lacks = engine_lacks(spec, engine)
    if lacks is not None:
        others = [e for e in ("vllm", "transformers", "llamacpp") if engine_lacks(spec, e) is None]
        said = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} or {others[-1]}"
        raise FieldError("engine", f"model {spec.name!r} ({spec.model_type}) is not served on engine {engine}: "
                         f"{lacks}; give engine {said}")


def _modelled_on(spec: ModelSpec) -> str:
    """What an encoder-decoder's serving is modelled on, in the words of the fields ``engine`` and ``weights``."""
    return (f"model {spec.name!r} is an encoder-decoder ({spec.model_type}): its serving is modelled on engine "
            f"{SERVING_ENGINE} with weights {', '.join(SERVING_FORMATS)} on one device")


def refuse_serving(spec: ModelSpec, engine: str, fmt: str, tensor_parallel: int, media: bool) -> None:
    """Raise one ``InputError`` line when serving the encoder-decoder ``spec`` asks for what is not modelled
    (module docstring): another engine than transformers, a quantized format, tensor parallelism, images; and
    :func:`refuse_engine`'s refusals (an encoder-decoder on another engine). Each a ``FieldError`` naming its field."""
    refuse_engine(spec, engine)
    if spec.encoder_decoder is None:
        return
    what = _modelled_on(spec)
    if fmt not in (serving_formats(spec) or (fmt,)):
        raise FieldError("weights", f"{what}; not {fmt} (its quantized layers, e.g. bitsandbytes skipping the "
                         "fp32-kept wo, are not modelled)", also=("engine",))
    if tensor_parallel > 1 and one_device_serving(spec):
        raise FieldError("tensor_parallel", f"{what}; not tensor-parallel ({tensor_parallel} devices)",
                         also=("engine", "weights"))
    if media:
        raise InputError(f"{what}; it takes no images or video")  # images or video_frames: no one field


def refuse_unmodelled(spec: ModelSpec, training: bool, w: TrainingWorkload | None = None,
                      search: bool = False) -> None:
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
    if not search:  # served on transformers, checked by refuse_serving once the engine is known
        return
    raise InputError(f"model {spec.name!r} is an encoder-decoder ({spec.model_type}): recommend does not search "
                     f"it; its serving is modelled on --engine {SERVING_ENGINE} only (llmsizer infer/fit "
                     f"{spec.name} --engine {SERVING_ENGINE})")

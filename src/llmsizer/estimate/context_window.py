"""The longest sequence a serving engine accepts for a model (the model's window, as the engine derives it), and
what each engine does with a context past it.

A sequence's length here is the workload's ``context``: prompt + output (+ image/video tokens), what vLLM's
``max_model_len`` and SGLang's ``context_length`` bound ("Model context length (prompt and output)", vLLM
``ModelConfig.max_model_len``). llmsizer sizes a pool engine's KV for sequences of that length, so serving them
needs ``--max-model-len`` / ``--context-length`` at least that long.

vLLM 0.19.1 (the PyPI wheel; line numbers of that release; the same rule in vllm-project/vllm
vllm/config/model.py ``_get_and_verify_max_len`` @18ec662):

    derived = the smallest of the config's length keys (max_position_embeddings, n_positions, max_seq_len,
              seq_length, ...; Command-R's model_max_length in its place)
              (vllm/transformers_utils/model_arch_config_convertor.py:251-284 derive_max_model_len_and_key)
    for each rope_scaling entry whose rope_type is not su / longrope / llama3: factor (a yarn entry first sets
              derived = its original_max_position_embeddings); derived x factor; none of this for a model_type
              containing "gemma3" (its window is already scaled)                 (vllm/config/model.py:2098-2130)  (W1)
    max_model_len > derived: ValueError at start-up ("User-specified max_model_len (...) is greater than the derived
              max_model_len ...") unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, then a warning   (model.py:2153-2181)  (W2)

    The sliding window does not extend it: it lowers derived only under --disable-sliding-window (model.py:2060-
    2068), which llmsizer does not model; nor does the tokenizer's model_max_length, read for pooling models only
    (model.py:1655-1667).

SGLang 0.5.23 (the PyPI wheel; it pins transformers 5.19.0):

    derived = the first of (max_sequence_length, seq_length, max_seq_len, model_max_length,
              max_position_embeddings) x factor, where factor = rope_scaling's factor, 1 when the rope_scaling
              names original_max_position_embeddings or rope_type llama3, or has no top-level factor (transformers
              v5 nests Gemma 3's per layer type, so its factor is 1 there); a config with none of these keys (a pure
              Mamba-2 model: transformers' Mamba2Config has none) gets 2048
              (sglang/srt/utils/hf_transformers/common.py:668-694 get_context_length)                          (W3)
    context_length > derived: ValueError ("User-specified context_length (...) is greater than the derived
              context_length ...") unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, then a warning
              (sglang/srt/configs/model_config.py:1291-1316 _derive_context_length)                            (W4)

llama.cpp warns only: ``n_ctx_seq (...) > n_ctx_train (...) -- possible training context overflow``
(src/llama-context.cpp:327-330, llama.cpp as vendored in llama-cpp-python 0.3.36); llama-server then caps each
slot's context at n_ctx_train (tools/server/server-context.cpp:1190-1216 "the slot context (...) exceeds the training
context of the model (...) - capping", ``n_ctx_slot`` at 4007-4016), so a longer request does not fit a slot, while its KV
cache is still allocated for n_ctx. transformers' ``generate()`` has no check. Both keep the warning.

Only the fields a ModelSpec knows enter (W1, W3): ``max_position_embeddings`` (the reader's, from the config's
max_position_embeddings, or n_positions / a GGUF's context_length) and the config's rope_scaling entries; a spec
without a max_position_embeddings has no vLLM window here (vLLM then takes any given max_model_len), and SGLang's
fallback window of 2048 tokens (W3) only where every layer is recurrent (MambaConfig / Mamba2Config have no length
key; any other spec without one was described by hand: no window).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import ModelSpec
from ..specs.workload import ENGINE_NAMES

# what each pool engine does past the window, its override and where both are (W2, W4)
_CHECKS = {
    "vllm": ("max_model_len", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
             "vllm/config/model.py:2153-2181 _get_and_verify_max_len, vLLM 0.19.1"),
    "sglang": ("context_length", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
               "sglang/srt/configs/model_config.py:1291-1316 _derive_context_length, SGLang 0.5.23"),
}
ALLOW_FLAG = "--allow-long-context"  # the CLI's override flag (InferenceWorkload.allow_long_context)
# SGLang's context_length for a config with none of get_context_length's keys (W3: common.py:694 ``return 2048``)
SGLANG_NO_LENGTH_KEY_CONTEXT = 2048
# vLLM applies no rope factor to these rope types (W1)
_VLLM_UNSCALED = ("su", "longrope", "llama3")


@dataclass(frozen=True)
class Window:
    """The longest sequence ``engine`` accepts for a model [tokens] and how it derived it (``derivation``: the
    config fields and the rope factor, in words)."""

    engine: str
    tokens: int
    derivation: str

    @property
    def setting(self) -> str:
        """The engine's own name for the length it checks (max_model_len, context_length)."""
        return _CHECKS[self.engine][0]

    @property
    def override(self) -> str:
        """The environment variable that lets the engine start past the window."""
        return _CHECKS[self.engine][1]

    @property
    def check(self) -> str:
        """Where the engine's check is (file:lines function, release)."""
        return _CHECKS[self.engine][2]


def vllm_window(spec: ModelSpec) -> tuple[int, str] | None:
    """Eq. (W1): vLLM's derived max_model_len of ``spec`` and its derivation; None without a max_position_embeddings."""
    base = spec.max_position_embeddings
    if base is None:
        return None
    derived: float = base
    how = f"max_position_embeddings {base:,}"
    if spec.rope_scaling and "gemma3" not in spec.model_type:
        factor = 1.0
        for entry in spec.rope_scaling:
            if entry.rope_type in _VLLM_UNSCALED:
                continue
            factor = entry.factor if entry.factor is not None else factor
            if entry.rope_type == "yarn" and entry.original_max_position_embeddings is not None:
                derived = entry.original_max_position_embeddings
                how = f"yarn original_max_position_embeddings {derived:,}"
        if factor != 1.0:
            derived *= factor
            how += f" x rope_scaling factor {factor:g}"
    return int(derived), how


def sglang_window(spec: ModelSpec) -> tuple[int, str] | None:
    """Eq. (W3): SGLang's derived context_length of ``spec`` and its derivation; without a max_position_embeddings
    get_context_length's fallback (``SGLANG_NO_LENGTH_KEY_CONTEXT``)."""
    base = spec.max_position_embeddings
    if base is None:
        # the readers map every length key SGLang reads to max_position_embeddings, so a spec without one is a
        # config with none (a pure Mamba model: MambaConfig / Mamba2Config have none) or a model described by hand,
        # whose config is not known: SGLang's fallback for the former only (review24 D3: a hand-described Llama
        # shape was refused past 2048; a hybrid such as Falcon-H1, every layer recurrent and attending, has one)
        if not spec.attention_free:
            return None
        return (SGLANG_NO_LENGTH_KEY_CONTEXT, "no length key in the config: get_context_length's fallback, "
                "sglang/srt/utils/hf_transformers/common.py:690-694")
    factor = 1.0
    # transformers v5 nests Gemma 3's rope parameters per layer type: no top-level factor, so 1
    if len(spec.rope_scaling) == 1 and "gemma3" not in spec.model_type:
        entry = spec.rope_scaling[0]
        if entry.factor is not None and entry.original_max_position_embeddings is None \
                and entry.rope_type != "llama3":
            factor = entry.factor
    how = f"max_position_embeddings {base:,}" + (f" x rope_scaling factor {factor:g}" if factor != 1.0 else "")
    return int(factor * base), how


def engine_window(spec: ModelSpec, engine: str) -> Window | None:
    """The window ``engine`` derives for ``spec`` (W1 vLLM, W3 SGLang); None for an engine that does not refuse a
    longer context (llama.cpp, transformers) or, on vLLM, a spec without a max_position_embeddings."""
    derive = {"vllm": vllm_window, "sglang": sglang_window}.get(engine)
    found = derive(spec) if derive is not None else None
    return Window(engine, found[0], found[1]) if found is not None else None


def window_refusal(window: Window, context: int) -> str:
    """The refusal (W2, W4) of sequences of ``context`` tokens past ``window``, in words: the check, the limit and
    the override."""
    name = ENGINE_NAMES[window.engine]
    return (f"{name} will not start: {window.setting} {context:,} (the context, prompt + output) exceeds the model's "
            f"window, its derived {window.setting} {window.tokens:,} ({window.derivation}), and {name} refuses it "
            f"({window.check}) unless {window.override} is set ({ALLOW_FLAG}; allow_long_context in Python, "
            "engine_settings.allow_long_context in a request file)")


def refusal_reason(window: Window, context: int) -> str:
    """The refusal in a verdict's few words (the warning, ``window_refusal``, says where and why)."""
    return (f"{ENGINE_NAMES[window.engine]} will not start: {window.setting} {context:,} exceeds the model's window "
            f"{window.tokens:,} ({window.override} not set)")


def window_fits_at(details: dict[str, object]) -> dict[str, object] | None:
    """Fit's hint (``FitResult.fits_at``) when the engine refuses the context past the model's window (W2, W4; the
    estimate's ``engine_refusal_reason``): no weight format changes that, so the hint names the window -- a context
    of at most its tokens, or the override -- instead of a format search. None when the engine does not refuse."""
    window = details.get("context_window")
    if details.get("engine_refusal_reason") is None or not isinstance(window, dict):
        return None
    return {"window": {"engine": window["engine"], "tokens": window["tokens"], "override": window["override"]}}


def window_details(window: Window) -> dict[str, object]:
    """The window as an answer's details carry it (``context_window``)."""
    return {"engine": window.engine, "tokens": window.tokens, "setting": window.setting,
            "derivation": window.derivation, "override": window.override, "check": window.check}


def window_allowed(window: Window, context: int) -> str:
    """The warning when the override lets ``window.engine`` start past the window (W2, W4)."""
    name = ENGINE_NAMES[window.engine]
    return (f"context {context:,} exceeds the model's window, {name}'s derived {window.setting} {window.tokens:,} "
            f"({window.derivation}): {name} starts only with {window.override} (allow_long_context), and positions "
            "past the window may give wrong outputs (RoPE) or out-of-bounds errors (learned positions)")


def unchecked_warning(spec: ModelSpec, engine: str, context: int) -> str | None:
    """The warning of an engine that does not refuse a context past ``max_position_embeddings`` (llama.cpp:
    llama-context.cpp's warning and llama-server's slot cap; transformers: none), None within it."""
    window = spec.max_position_embeddings
    if not window or context <= window:
        return None
    text = f"context {context} exceeds the model's max_position_embeddings {window}"
    if engine == "llamacpp":
        text += (" (llama.cpp warns 'n_ctx_seq > n_ctx_train -- possible training context overflow' and starts; "
                 "llama-server caps each slot's context at n_ctx_train, so a longer request does not fit a slot "
                 "there)")
    return text

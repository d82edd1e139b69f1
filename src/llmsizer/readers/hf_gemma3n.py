"""config.json of Gemma 3n (``gemma3n_text``, and the language model of a multimodal ``gemma3n``) -> ModelSpec.

Read as transformers v5.24.0 reads it (models/gemma3n/configuration_gemma3n.py, modeling_gemma3n.py):

- ``intermediate_size``: one width for every layer or a list of one per layer (Gemma3nTextConfig.__post_init__,
  configuration_gemma3n.py L129-138); each Gemma3nTextMLP takes ``intermediate_size[layer_idx]`` (modeling L943).
- ``layer_types``: given, or every 5th layer full attention and the others sliding (L140-143), window
  ``sliding_window`` (default 512).
- ``num_kv_shared_layers`` (default 15): the last N layers reuse the K/V of the last earlier layer of the same
  attention type (``kv_sharing_modes``, L206-231, which raises when a shared type has no earlier producer). Such a
  layer builds no k_proj/v_proj/k_norm/v_norm (Gemma3nTextAttention, modeling L1166-1182) and keeps no cache of
  its own: transformers' cache makes it a ``DummyLayer`` (cache_utils.py L1981-1985), vLLM allocates none for a
  layer with ``kv_sharing_target_layer_name`` (cross-layer KV sharing, vllm PR #18212; vllm/model_executor/models/
  gemma3n.py), llama.cpp's ``hparams.has_kv(il)`` is false from ``n_layer_kv_from_start`` on (src/llama-hparams.cpp;
  src/llama-model.cpp sets it to 20 for LLM_ARCH_GEMMA3N, which is num_layers - num_kv_shared_layers of both
  published sizes). The published checkpoints still carry those layers' k/v tensors; transformers drops them on
  load (``_keys_to_ignore_on_load_unexpected``, modeling L1615-1621), so they are not parameters of the model.
- per-layer inputs, AltUp and LAuReL: ``Gemma3nSpec`` (specs/model.py), tensors in formulas/tensors.py.
- ``activation_sparsity_pattern`` (a Gaussian top-k on the gate of the first layers' MLPs, modeling L949-974)
  changes no weight: not read.
- q_norm and k_norm are RMSNorms with a weight over head_dim; v_norm has none (``with_scale=False``); four RMSNorms
  around attention and the MLP as Gemma 2/3 (Gemma3nTextDecoderLayer, modeling L1256-1259).

A multimodal ``gemma3n`` config (Gemma3nForConditionalGeneration) adds a MobileNetV5 vision tower built through
timm (TimmWrapperModel) and a Conformer audio encoder, each with a Gemma3nMultimodalEmbedder. Their parameters are
not counted here: the spec counts the language model (lm_head tied by the top-level ``tie_word_embeddings``,
default True) and names the towers in ``Gemma3nSpec.uncounted``, which every estimate turns into a warning.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..numbers import WIDTH, check_number
from ..specs import Gemma3nSpec, ModelSpec
from .hf_config import _Cfg
from .safe_io import shown

GEMMA3N_TYPES = ("gemma3n", "gemma3n_text")
FULL_EVERY = 5  # Gemma3nTextConfig.__post_init__: "full_attention" if (i + 1) % 5 == 0 (configuration L141-143)
UNCOUNTED_TOWERS = ("vision tower (MobileNetV5 via timm) and its embedder",
                    "audio tower (Gemma3nAudioEncoder) and its embedder")


def _intermediate(c: _Cfg, n_layers: int) -> tuple[int, tuple[int, ...]]:
    """(the widest layer's width, per-layer widths or () when uniform) from ``intermediate_size``. The tensors follow
    the per-layer list; the activation formulas, which take one width, get the widest (their per-layer peak)."""
    v = c.cfg["intermediate_size"] if "intermediate_size" in c.cfg else c.get("intermediate_size")
    if isinstance(v, list):
        if len(v) != n_layers:
            raise ModelFileError(f"{c.where}: intermediate_size has {len(v)} entries for {n_layers} layers "
                                 "(one per layer or one for all)")
        sizes = []
        for x in v:
            if not isinstance(x, int) or isinstance(x, bool):
                raise ModelFileError(f"{c.where}: intermediate_size entries must be integers, got {shown(x)}")
            sizes.append(int(check_number(x, "intermediate_size entry", WIDTH, c.where)))
        return max(sizes), (tuple(sizes) if len(set(sizes)) > 1 else ())
    if not isinstance(v, int) or isinstance(v, bool):
        raise ModelFileError(f"{c.where}: intermediate_size must be an integer or a list, got {shown(v)}")
    return int(check_number(v, "intermediate_size", WIDTH, c.where)), ()


def layer_types(c: _Cfg, n_layers: int, full_every: int = FULL_EVERY, config_class: str = "Gemma3nTextConfig",
                last_full: bool = False) -> tuple[str, ...]:
    """The config's ``layer_types`` as 'full' / 'sliding' (Gemma 3n, Gemma 4); absent: every ``full_every``-th layer
    full, the others sliding (``config_class``'s __post_init__, recorded as a default); ``last_full``: the last layer
    full whatever is given (Gemma 4)."""
    given = c.layer_list("layer_types", n_layers)
    if given is None:
        c.used_defaults.append(f"layer_types=every {full_every}th layer full attention, the others sliding "
                               f"({config_class}.__post_init__)")
        given = ["full_attention" if (i + 1) % full_every == 0 else "sliding_attention" for i in range(n_layers)]
    if len(given) != n_layers:
        raise ModelFileError(f"{c.where}: layer_types has {len(given)} entries for {n_layers} layers")
    kinds = []
    for t in given:
        if t not in ("full_attention", "sliding_attention"):
            raise ModelFileError(f"{c.where}: unknown layer type {shown(t)}; expected full_attention or "
                                 "sliding_attention")
        kinds.append("full" if t == "full_attention" else "sliding")
    if last_full and kinds:
        kinds[-1] = "full"
    return tuple(kinds)


def _kv_shared(c: _Cfg, kinds: tuple[str, ...]) -> tuple[bool, ...]:
    """Gemma3nTextConfig.kv_sharing_modes (configuration L206-231): the last N layers reuse; each attention type
    among them must have a producer before them."""
    n_layers = len(kinds)
    shared = c.req("num_kv_shared_layers")  # range-checked as NUMERIC_KEYS' LAYER_INDEX
    if shared > n_layers:
        raise ModelFileError(f"{c.where}: num_kv_shared_layers ({shared}) exceeds num_hidden_layers ({n_layers})")
    first = n_layers - shared
    if shared and set(kinds[:first]) != set(kinds):
        raise ModelFileError(f"{c.where}: the last {shared} layers share K/V, but a layer type among them "
                             f"({', '.join(sorted(set(kinds) - set(kinds[:first])))}) has no earlier layer "
                             "producing its cache")
    return tuple(i >= first for i in range(n_layers))


def text_config(cfg: dict[str, Any], family: str, where: str) -> tuple[_Cfg, bool]:
    """The text model's config of a ``family`` config (Gemma 3n, Gemma 4): its ``text_config`` when the top-level
    model_type is ``family`` (the multimodal checkpoint; True), else the config itself (the text-only one; False);
    a text_config of another model type is refused in one line."""
    text_type = family + "_text"
    if cfg.get("model_type") != family:
        return _Cfg(cfg, text_type, where), False
    text = cfg.get("text_config") or {}
    if not isinstance(text, dict):
        raise ModelFileError(f"{where}: text_config must be an object")
    mt = text.get("model_type", text_type)
    if mt != text_type:
        raise UnsupportedArchitectureError(f"{where}: text_config.model_type {shown(mt)} in a {family} config; "
                                           f"expected {text_type}")
    return _Cfg(text, text_type, where + " text_config"), True


def gemma3n_spec(cfg: dict[str, Any], *, name: str, where: str, source: str, published_params: int | None,
                 published_active_params: int | None) -> ModelSpec:
    """Gemma 3n (module docstring)."""
    c, multimodal = text_config(cfg, "gemma3n", where)
    hidden, n_layers = c.req("hidden_size"), c.req("num_hidden_layers")
    heads = c.req("num_attention_heads")
    inter, sizes = _intermediate(c, n_layers)
    kinds = layer_types(c, n_layers)
    g = Gemma3nSpec(  # each range-checked by _Cfg (NUMERIC_KEYS)
        per_layer_width=c.req("hidden_size_per_layer_input"), per_layer_vocab=c.req("vocab_size_per_layer_input"),
        altup_inputs=c.req("altup_num_inputs"), laurel_rank=c.req("laurel_rank"),
        uncounted=UNCOUNTED_TOWERS if multimodal else ())
    if multimodal:
        top = _Cfg(cfg, "gemma3n", where)
        tie = bool(top.get("tie_word_embeddings"))  # Gemma3nForConditionalGeneration ties by the top-level flag
    else:
        tie = bool(c.get("tie_word_embeddings"))
    bias = bool(c.get("attention_bias"))
    fields: dict[str, Any] = {
        "vocab_size": c.req("vocab_size"), "num_kv_heads": c.get("num_key_value_heads") or heads,
        "head_dim": c.get("head_dim") or hidden // heads,
        "sliding_window": c.get("sliding_window") if "sliding" in kinds else None,
        "kv_shared_layers": _kv_shared(c, kinds), "max_position_embeddings": c.get("max_position_embeddings")}
    notes = c.used_defaults + (top.used_defaults if multimodal else [])  # every key read by now
    return ModelSpec(
        name=name, model_type="gemma3n_text", hidden_size=hidden, num_layers=n_layers, num_heads=heads,
        intermediate_size=inter, ffn_sizes=sizes, tie_word_embeddings=tie, attention_qkv_bias=bias,
        attention_out_bias=bias, qk_norm="per_head", norms_per_layer=4, layer_types=kinds,  # type: ignore[arg-type]
        gemma3n=g, **fields,
        torch_dtype=c.cfg.get("torch_dtype") or c.cfg.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype"),
        published_params=published_params, published_active_params=published_active_params,
        source=source, notes=tuple(notes))

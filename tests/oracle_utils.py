"""Independent truth for the formula tests: real transformers models, built from the same config.json dict.

Nothing here calls llmsizer. Parameter counts come from ``nn.Module.parameters()`` of the model transformers
builds (tied weights are deduplicated by ``parameters()``); components come from the module names the
transformers definitions use (``model.layers.N.self_attn.*``, ``mlp.experts.*``, ``lm_head`` ...); KV bytes come
from the tensors a real forward pass leaves in the returned ``Cache``.
"""

from __future__ import annotations

import copy
import logging
import re
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

logging.getLogger("transformers").setLevel(logging.ERROR)
transformers.logging.set_verbosity_error()
warnings.filterwarnings("ignore", module="transformers")

MULTIMODAL_TYPES = {"gemma3", "gemma4", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "mllama",
                    "llama4"}
SEQ2SEQ_TYPES = {"t5", "mt5"}  # T5ForConditionalGeneration / MT5ForConditionalGeneration


# model_type values transformers itself reads as another family: Kimi K2's 'kimi_k2' (architectures
# DeepseekV3ForCausalLM) becomes 'deepseek_v3' (transformers models/kimi_k25/configuration_kimi_k25.py,
# Kimi_K25Config.__post_init__ "BC: load from remote config on the hub where the model-type points to remote config").
TRANSFORMERS_MODEL_TYPE_ALIASES = {"kimi_k2": "deepseek_v3"}


def hf_config(cfg: dict[str, Any]) -> Any:
    """The transformers config object for a config.json dict (the dict is not modified)."""
    d = copy.deepcopy(cfg)
    d["model_type"] = TRANSFORMERS_MODEL_TYPE_ALIASES.get(d.get("model_type"), d.get("model_type"))
    return transformers.AutoConfig.for_model(**d)


def build(cfg: dict[str, Any], device: str = "meta", dtype: Any = None, attn: str | None = None) -> Any:
    """Instantiate the real model class for ``cfg`` (meta device: shapes only, no memory, no weights)."""
    conf = hf_config(cfg)
    if attn is not None:
        conf._attn_implementation = attn
    if cfg.get("model_type") in SEQ2SEQ_TYPES and cfg.get("tie_word_embeddings") is False:
        # transformers 5.24 forces T5Config / MT5Config.tie_word_embeddings to True (configuration_t5.py L78-82,
        # configuration_mt5.py L78-79: "we tie weights always"); transformers 4.x (the release the published runs
        # used: modeling_t5.py T5ForConditionalGeneration builds its own lm_head and ties it only when the config
        # says so) and the T5 v1.1 / mT5 / T0 checkpoints (a separate lm_head.weight) keep it untied
        conf.tie_word_embeddings = False
    cls = (transformers.AutoModelForImageTextToText if cfg.get("model_type") in MULTIMODAL_TYPES
           else transformers.AutoModelForSeq2SeqLM if cfg.get("model_type") in SEQ2SEQ_TYPES
           else transformers.AutoModelForCausalLM)
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    with torch.device(device):
        model = cls.from_config(conf, **kwargs)
    if cfg.get("model_type") in SEQ2SEQ_TYPES:  # both stacks read the shared embedding (4.x: T5Stack(cfg, shared))
        model.encoder.embed_tokens = model.decoder.embed_tokens = model.shared
    return model.eval()


def real_param_count(model: Any) -> int:
    """Parameters of the model as PyTorch holds them: tied tensors counted once."""
    return sum(p.numel() for p in model.parameters())


# Module-name rules of the transformers definitions (first match wins). The names are those of
# modeling_llama.py, modeling_mixtral.py, modeling_qwen2_moe.py, modeling_qwen3_moe.py, modeling_deepseek_v3.py,
# modeling_gpt_oss.py, modeling_gemma3.py, modeling_qwen2_5_vl.py / modeling_qwen3_vl.py (the ``visual`` tower) and
# modeling_gpt_bigcode.py; modeling_mllama.py / modeling_llama4.py (the ``vision_model`` tower, ``cross_attn`` blocks
# and their ``cross_attn_attn_gate`` / ``cross_attn_mlp_gate``, Llama 4's ``language_model.lm_head``).
# Hybrid / state-space families (modeling_qwen3_next.py, modeling_jamba.py, modeling_falcon_h1.py,
# modeling_granitemoehybrid.py, modeling_nemotron_h.py, modeling_mamba2.py): the recurrent mixer is ``linear_attn`` /
# ``mamba``, or a ``mixer`` whose parameter names say which block it is (Nemotron-H puts attention, Mamba, MLP
# and MoE all under ``mixer``); the feed-forward block is ``feed_forward`` (Jamba, Falcon-H1),
# ``block_sparse_moe`` + ``shared_mlp`` (Granite-4.0-H) or ``mixer`` (Nemotron-H).
_FFN = r"(mlp|feed_forward|block_sparse_moe|mixer)"
_COMPONENT_RULES: tuple[tuple[str, str], ...] = (
    (r"(^|language_model\.)lm_head\.", "lm_head"),
    # Gemma 4 adds an audio tower and one embedder per tower (modeling_gemma4.py Gemma4Model: embed_vision,
    # embed_audio): llmsizer's "vision" component holds every multimodal encoder
    (r"(vision_tower|vision_model|multi_modal_projector|\bvisual|audio_tower|embed_vision|embed_audio)\.", "vision"),
    (r"\.cross_attn(\.|_attn_gate$|_mlp_gate$)", "attention"),
    (r"embed_tokens_per_layer\.", "per_layer_embedding"),  # Gemma 3n's per-layer input table
    (r"(embed_tokens|\bwte|\bwpe|\bembeddings|\bword_embeddings|\bembed_in)\.", "embedding"),
    (r"(^|\.)embed_out\.", "lm_head"),  # GPT-NeoX's untied output projection
    (r"\.(ln_attn|ln_mlp)\.", "norm"),  # Falcon new_decoder_architecture's two LayerNorms (before "mlp.")
    # T5 / mT5 (modeling_t5.py): the shared embedding, SelfAttention / EncDecAttention (with the relative position
    # bias table), DenseReluDense (wi / wi_0 / wi_1 / wo); layer_norm and final_layer_norm fall to "norm"
    (r"^shared\.", "embedding"),
    (r"\.(SelfAttention|EncDecAttention)\.", "attention"),
    (r"\.DenseReluDense\.", "mlp"),
    (r"\.(linear_attn|mamba)\.", "recurrent"),
    (r"\.mixer\.(in_proj|conv1d|dt_bias|A_log|D|norm|out_proj)\b", "recurrent"),
    (r"\.mixer\.(q_proj|k_proj|v_proj|o_proj)\.", "attention"),
    (_FFN + r"\.experts\.", "experts"),
    (_FFN + r"\.(gate|router)\.", "router"),
    (_FFN + r"\.(shared_expert|shared_experts|shared_expert_gate)\.", "shared_experts"),
    (r"\.mixer\.shared_experts\.", "shared_experts"),
    (r"\.shared_mlp\.", "shared_experts"),
    (r"\.(self_attn|attn|self_attention|attention)\.", "attention"),  # Falcon self_attention, GPT-NeoX attention
    (_FFN + r"\.", "mlp"),
    # Gemma 3n (modeling_gemma3n.py): AltUp's output scale is a norm-like vector; its and LAuReL's linears, the
    # per-layer input gate/projections and the model-level AltUp / per-layer projections are dense linears
    (r"\.altup\.correct_output_scale$", "norm"),
    (r"(\.altup\.(correction_coefs|prediction_coefs|modality_router)|\.laurel\.linear_|\.per_layer_input_gate\."
     r"|\.per_layer_projection\.|per_layer_model_projection|altup_projections|altup_unembed_projections)", "mlp"),
    (r"(norm|ln_\d|ln_f)", "norm"),
)


def component_of(name: str) -> str:
    for pattern, comp in _COMPONENT_RULES:
        if re.search(pattern, name):
            return comp
    raise AssertionError(f"parameter {name!r} matches no component rule")


def real_components(model: Any) -> dict[str, int]:
    """Parameter count per component, classified by transformers module names (tied tensors once)."""
    out: dict[str, int] = {}
    for name, p in model.named_parameters():  # remove_duplicate=True: a tied lm_head is not listed
        comp = component_of(name)
        out[comp] = out.get(comp, 0) + p.numel()
    if "shared_experts" in out and "experts" not in out:  # Granite-4.0-H without experts: shared_mlp is the MLP
        out["mlp"] = out.get("mlp", 0) + out.pop("shared_experts")
    return {k: v for k, v in out.items() if v}


def assert_params_equal(ours: Any, model: Any) -> None:
    """A count given from outside (``ours``: ``.total`` and ``.by_component``, as llmsizer's ``count_params`` returns)
    equals what transformers built in ``model``: the total (tied tensors once) and the split by component."""
    real = real_components(model)
    assert ours.total == real_param_count(model), (ours.by_component, real)
    assert ours.by_component == real, (ours.by_component, real)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    return cfg.get("text_config", cfg) if cfg.get("model_type") in MULTIMODAL_TYPES else cfg


def experts_per_token(cfg: dict[str, Any]) -> tuple[int, int]:
    """(k, E): routed experts a token visits and routed experts per MoE layer, from the config keys the
    transformers MoE blocks read (``num_experts_per_tok`` / ``top_k``; ``num_local_experts`` / ``num_experts`` /
    ``n_routed_experts``)."""
    conf = hf_config(cfg).get_text_config()
    k = getattr(conf, "num_experts_per_tok", None) or getattr(conf, "experts_per_token", None)
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        e = getattr(conf, key, None)
        if e:
            return int(k), int(e)
    raise AssertionError("not an MoE config")


# ---------------------------------------------------------------------------------------------------------
# KV cache measured from a real forward pass
# ---------------------------------------------------------------------------------------------------------

def cache_layers(cache: Any) -> list[tuple[Any, Any]]:
    """(keys, values) of every layer of a transformers 5 Cache that holds tensors."""
    out = []
    for layer in cache.layers:
        k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
        if k is not None and v is not None and k.numel():
            out.append((k, v))
    return out


def cache_indexer_keys(cache: Any) -> list[Any]:
    """The DSA indexer key tensors of a transformers 5 Cache (``DynamicIndexedLayer.indexer_keys``, DeepSeek-V3.2)."""
    out = []
    for layer in cache.layers:
        t = getattr(layer, "indexer_keys", None)
        if t is not None and t.numel():
            out.append(t)
    return out


def cache_logical_bytes(cache: Any) -> int:
    """Bytes of the key/value (and DSA indexer key) tensors as the cache exposes them (numel x element size)."""
    tensors = [t for kv in cache_layers(cache) for t in kv] + cache_indexer_keys(cache)
    return sum(t.numel() * t.element_size() for t in tensors)


def cache_storage_bytes(cache: Any) -> int:
    """Bytes of the storages those tensors keep alive (a sliced view keeps its whole base storage)."""
    seen: dict[int, int] = {}
    for kv in [*cache_layers(cache), cache_indexer_keys(cache)]:
        for t in kv:
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def saved_storages(skip: set[int]) -> tuple[dict[int, int], Any]:
    """(bytes by storage id of the distinct storages autograd saves, less those whose id is in ``skip``, the
    ``saved_tensors_hooks`` context that records them): enter the context around the forward to measure."""
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        st = t.untyped_storage()
        if st._cdata not in skip:
            saved[st._cdata] = st.nbytes()
        return t

    return saved, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def saved_storage_hooks(model: Any) -> tuple[dict[int, int], Any]:
    """``saved_storages`` of the non-parameter storages: what a forward of ``model`` saves for its backward."""
    return saved_storages({p.untyped_storage()._cdata for p in model.parameters()})


def saved_storages_by_layer(model: Any, layers: Any) -> dict[int, int]:
    """Bytes of the non-parameter storages autograd saves while each of ``layers`` (decoder layers of ``model``) runs
    its forward, each storage counted once, at the first layer that saves it; filled in as the forward runs."""
    saved, hooks = saved_storage_hooks(model)
    by_layer: dict[int, int] = {}
    for i, layer in enumerate(layers):
        def enter(mod: Any, args: Any) -> None:
            hooks.__enter__()

        def leave(mod: Any, args: Any, out: Any, i: int = i) -> None:
            hooks.__exit__(None, None, None)
            by_layer[i] = sum(saved.values()) - sum(by_layer.values())

        layer.register_forward_pre_hook(enter)
        layer.register_forward_hook(leave)
    return by_layer


def mamba_saved_by_layer(cfg: dict[str, Any], batch: int, tokens: int, dtype: Any, autocast: bool = False,
                         before: Any = None, frozen: bool = False) -> tuple[Any, dict[int, int]]:
    """Build the tiny hybrid/Mamba model of ``cfg`` (seed 0, CPU, ``dtype`` weights; SDPA where it has attention),
    run one training forward of ``batch`` random sequences of ``tokens`` (under CPU bf16 autocast if ``autocast``;
    ``before()`` called just before it) and return its decoder layers and ``saved_storages_by_layer`` of them: the
    measurement the Mamba saved-tensor tests share, on transformers' torch path or on the kernels' stand-ins.
    ``frozen``: every parameter but the input embedding's frozen, so that each layer's input needs a gradient and no
    layer weight does (a LoRA layer's frozen base past its first adapter, without the adapters)."""
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=dtype, attn=None if cfg["model_type"] == "mamba2" else "sdpa")
    model.train()
    if frozen:
        for p in model.parameters():
            p.requires_grad_(False)
        model.get_input_embeddings().weight.requires_grad_(True)
    layers = model.backbone.layers if hasattr(model, "backbone") else model.model.layers
    by_layer = saved_storages_by_layer(model, layers)
    ids = random_ids(cfg["vocab_size"], batch, tokens)
    if before is not None:
        before()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        model(input_ids=ids, labels=ids, use_cache=False)
    return layers, by_layer


def random_ids(vocab: int, batch: int, tokens: int, seed: int = 0) -> Any:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, tokens), generator=g)


def prefill_peak_bytes(cfg: dict[str, Any], dtype: Any, attn: str, batch: int, tokens: int) -> int:
    """Peak bytes of live tensors (``torch.distributed._tools.mem_tracker.MemTracker``: parameters, buffers, the
    KV cache and every intermediate) during a no-grad prefill of the model built from ``cfg`` (seed 0, CPU) over
    ``batch`` random sequences of ``tokens`` with ``logits_to_keep=1``, what ``generate()`` asks for at prefill."""
    from torch.distributed._tools import mem_tracker

    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=dtype, attn=attn)
    ids = random_ids(cfg["vocab_size"], batch, tokens)
    tracker = mem_tracker.MemTracker()
    tracker.track_external(model)
    with torch.no_grad(), tracker:
        # per-row position ids, as generate() passes them (so the rotary tables are [B, T, head_dim])
        pos = torch.arange(tokens).unsqueeze(0).expand(batch, tokens)
        model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1)
    return int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])


# A small Gemma 3n text model (hidden 256, 4 AltUp streams, per-layer inputs 6 x 32, LAuReL rank 8, 2 of 6 layers
# sharing K/V, 4 sliding with window 128): tests/formulas/test_gemma3n_activations_forward.py (inference peak) and
# tests/training/test_gemma3n_saved_tensors.py (training saved tensors) measure the same model.
GEMMA3N_SMALL: dict[str, Any] = {
    "model_type": "gemma3n_text", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 1024,
    "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "vocab_size_per_layer_input": 1024, "hidden_size_per_layer_input": 32, "laurel_rank": 8,
    "num_kv_shared_layers": 2, "sliding_window": 128, "max_position_embeddings": 1024,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
}


# ---------------------------------------------------------------------------------------------------------
# Tiny configs, one per attention/FFN family (hidden 64, 2-4 layers, vocab 128)
# ---------------------------------------------------------------------------------------------------------

_BASE = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 96, "max_position_embeddings": 512}

TINY_CONFIGS: dict[str, dict[str, Any]] = {
    "llama-gqa": {**_BASE, "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2},
    "llama-mha-bias-tied": {**_BASE, "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 4, "attention_bias": True, "mlp_bias": True,
                            "tie_word_embeddings": True},
    "llama-mqa-headdim": {**_BASE, "model_type": "llama", "num_hidden_layers": 3, "num_attention_heads": 4,
                          "num_key_value_heads": 1, "head_dim": 24},
    "qwen2-bias": {**_BASE, "model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2},
    "qwen3-qknorm": {**_BASE, "model_type": "qwen3", "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "head_dim": 32},
    "qwen2-sliding-upper-layers": {**_BASE, "model_type": "qwen2", "num_hidden_layers": 4,
                                   "num_attention_heads": 4, "num_key_value_heads": 2, "use_sliding_window": True,
                                   "sliding_window": 8, "max_window_layers": 2},
    "mistral-sliding": {**_BASE, "model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "sliding_window": 8},
    "phi3-sliding": {**_BASE, "model_type": "phi3", "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 4, "sliding_window": 8, "pad_token_id": 0},
    "gemma2-alternating": {**_BASE, "model_type": "gemma2", "num_hidden_layers": 4, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8},
    "gemma3-text-pattern3": {**_BASE, "model_type": "gemma3_text", "num_hidden_layers": 4,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                             "sliding_window": 8, "sliding_window_pattern": 3},
    "gemma3-text-layer-types": {**_BASE, "model_type": "gemma3_text", "num_hidden_layers": 3,
                                "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
                                "sliding_window": 6,
                                "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]},
    "gpt-oss-layer-types": {**_BASE, "model_type": "gpt_oss", "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
                            "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 32,
                            "layer_types": ["sliding_attention", "full_attention"]},
    "mixtral-moe": {**_BASE, "model_type": "mixtral", "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3-moe": {**_BASE, "model_type": "qwen3_moe", "num_hidden_layers": 3, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "mlp_only_layers": [1]},
    "qwen2-moe-shared": {**_BASE, "model_type": "qwen2_moe", "num_hidden_layers": 2, "num_attention_heads": 4,
                         "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                         "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48},
    "deepseek-v3-mla": {**_BASE, "model_type": "deepseek_v3", "num_hidden_layers": 3, "num_attention_heads": 4,
                        "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                        "qk_rope_head_dim": 8, "v_head_dim": 12, "n_routed_experts": 8, "num_experts_per_tok": 2,
                        "n_group": 2, "topk_group": 1, "moe_intermediate_size": 24, "n_shared_experts": 1,
                        "first_k_dense_replace": 1},
    "deepseek-v32-dsa": {**_BASE, "model_type": "deepseek_v32", "num_hidden_layers": 3, "num_attention_heads": 4,
                         "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                         "qk_rope_head_dim": 8, "v_head_dim": 12, "n_routed_experts": 8, "num_experts_per_tok": 2,
                         "n_group": 2, "topk_group": 1, "moe_intermediate_size": 24, "n_shared_experts": 1,
                         "first_k_dense_replace": 1, "index_n_heads": 2, "index_head_dim": 8, "index_topk": 4},
    "deepseek-v2-no-q-lora": {**_BASE, "model_type": "deepseek_v2", "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": None,
                              "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
                              "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                              "n_shared_experts": 2, "first_k_dense_replace": 1, "topk_method": "greedy"},
    # MiniMax-M2: rotary on half of each head (the published rotary_dim 64 of 128), q/k RMSNorm over all heads at once,
    # sigmoid router with the score-correction bias, every layer MoE
    "minimax-m2": {**_BASE, "model_type": "minimax_m2", "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16, "rotary_dim": 8, "num_local_experts": 4,
                   "num_experts_per_tok": 2, "intermediate_size": 32, "use_routing_bias": True, "use_qk_norm": True,
                   "qk_norm_type": "per_layer"},
    "gpt-bigcode-mqa": {"model_type": "gpt_bigcode", "vocab_size": 128, "n_embd": 64, "n_layer": 2, "n_head": 4,
                        "n_positions": 512, "multi_query": True},
    # GPT-2 (readers/hf_config.py _gpt2): Conv1D c_attn / c_proj / c_fc with biases, learned positions, lm_head tied,
    # n_inner None (4 x n_embd), gelu_new
    "gpt2-mha": {"model_type": "gpt2", "vocab_size": 128, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 512},
    # parallel attention + MLP blocks (readers/hf_parallel.py): Falcon-7B-style multi-query with one shared norm,
    # Falcon-40B-style new_decoder_architecture (grouped K/V, two norms), Phi-2-style partial rotary with biases and
    # an lm_head bias, GPT-NeoX with two norms of the same input and partial rotary
    "falcon-mqa": {**_BASE, "model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4,
                   "multi_query": True, "parallel_attn": True, "new_decoder_architecture": False, "alibi": False},
    "falcon-new-arch": {**_BASE, "model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_kv_heads": 2, "new_decoder_architecture": True, "alibi": False, "bias": True},
    "phi-partial-rotary": {**_BASE, "model_type": "phi", "num_hidden_layers": 2, "num_attention_heads": 4,
                           "partial_rotary_factor": 0.5, "resid_pdrop": 0.1, "hidden_act": "gelu_new"},
    "gpt-neox-parallel": {**_BASE, "model_type": "gpt_neox", "num_hidden_layers": 2, "num_attention_heads": 4,
                          "rotary_pct": 0.25, "use_parallel_residual": True},
    # StableLM-2-style: sequential LayerNorm block, q/k/v biases, grouped K/V, partial rotary, SwiGLU
    "stablelm-gqa": {**_BASE, "model_type": "stablelm", "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "use_qkv_bias": True, "partial_rotary_factor": 0.25},
}


# Tiny hybrid / state-space configs, one per family (tests/formulas/test_recurrent_state_forward.py,
# tests/readers/test_hybrid_checkpoints.py); use_mamba_kernels off so Jamba runs its torch path on the CPU
HYBRID_TINY: dict[str, dict[str, Any]] = {
    "qwen3_next": {"model_type": "qwen3_next", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                   "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                   "linear_value_head_dim": 12, "num_experts": 8, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48},
    "jamba": {"model_type": "jamba", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 8,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "num_experts": 4,
              "num_experts_per_tok": 2, "attn_layer_period": 4, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1, "mamba_d_state": 8, "use_mamba_kernels": False},
    "falcon_h1": {"model_type": "falcon_h1", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_d_ssm": 128,
                  "mamba_n_heads": 8, "mamba_d_state": 16, "mamba_n_groups": 2, "mamba_d_conv": 3},
    "nemotron_h": {"model_type": "nemotron_h", "vocab_size": 128, "hidden_size": 64,
                   "hybrid_override_pattern": "M-M*ME", "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "intermediate_size": 96, "mamba_num_heads": 8, "mamba_head_dim": 16,
                   "ssm_state_size": 16, "n_groups": 2, "n_routed_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48},
    "granitemoehybrid": {"model_type": "granitemoehybrid", "vocab_size": 128, "hidden_size": 64,
                         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "intermediate_size": 32, "shared_intermediate_size": 96, "num_local_experts": 4,
                         "num_experts_per_tok": 2, "layer_types": ["mamba", "mamba", "attention", "mamba"],
                         "mamba_n_heads": 8, "mamba_d_state": 16},
    "mamba2": {"model_type": "mamba2", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3, "num_heads": 8,
               "head_dim": 16, "state_size": 16, "n_groups": 2, "conv_kernel": 5},
}

# Qwen3.5 / Qwen3.6 (qwen3_5, qwen3_5_moe): a multimodal config whose text_config is Qwen3-Next's hybrid decoder
# (dense MLP / sparse block on every layer) and a one-block Qwen3-VL vision tower without deepstack mergers
_TINY_QWEN3_5_VISION = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": 16,
                        "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 64,
                        "num_position_embeddings": 64, "deepstack_visual_indexes": []}
_TINY_QWEN3_5_TEXT = {"vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                      "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                      "linear_key_head_dim": 8, "linear_value_head_dim": 12,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 10000, "partial_rotary_factor": 0.25,
                                          "mrope_section": [1, 1, 0], "mrope_interleaved": True}}
TINY_QWEN3_5 = {"model_type": "qwen3_5", "tie_word_embeddings": False,
                "text_config": {**_TINY_QWEN3_5_TEXT, "model_type": "qwen3_5_text", "intermediate_size": 96},
                "vision_config": {**_TINY_QWEN3_5_VISION, "model_type": "qwen3_5"}}
TINY_QWEN3_5_MOE = {"model_type": "qwen3_5_moe", "tie_word_embeddings": False,
                    "text_config": {**_TINY_QWEN3_5_TEXT, "model_type": "qwen3_5_moe_text", "num_experts": 8,
                                    "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                    "shared_expert_intermediate_size": 48},
                    "vision_config": {**_TINY_QWEN3_5_VISION, "model_type": "qwen3_5_moe"}}


# Small Mamba models, one per family, and the Mamba layer whose saved tensors tests/training/test_mamba_saved_tensors.py
# (transformers' torch path) and test_mamba_kernel_saved_tensors.py (mamba_ssm's kernels) compare: chunk 64 so that
# a few hundred tokens make several chunks; state 24 != head_dim 16 in the Mamba-2 model tells their terms apart.
_M2 = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16, n_groups=2, conv_kernel=4)
MAMBA_LAYER_CASES: dict[str, tuple[dict[str, Any], int]] = {
    # name: (config, Mamba layer compared)
    "mamba2": ({**_M2, "model_type": "mamba2", "state_size": 24, "chunk_size": 64}, 1),
    "nemotron_h": ({"model_type": "nemotron_h", "vocab_size": 128, "hidden_size": 64, "hybrid_override_pattern": "M-M*",
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                    "mamba_num_heads": 8, "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2,
                    "chunk_size": 64}, 2),
    "falcon_h1": ({"model_type": "falcon_h1", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_d_ssm": 128,
                   "mamba_n_heads": 8, "mamba_d_state": 16, "mamba_n_groups": 2, "mamba_d_conv": 3,
                   "mamba_chunk_size": 64}, 1),
    "falcon_h1_rms_norm": ({"model_type": "falcon_h1", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
                            "mamba_d_ssm": 128, "mamba_n_heads": 8, "mamba_d_state": 16, "mamba_n_groups": 2,
                            "mamba_chunk_size": 64, "mamba_rms_norm": True}, 1),
    "granitemoehybrid": ({"model_type": "granitemoehybrid", "vocab_size": 128, "hidden_size": 64,
                          "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                          "intermediate_size": 32, "shared_intermediate_size": 96, "num_local_experts": 0,
                          "num_experts_per_tok": 2, "layer_types": ["mamba", "mamba", "attention"],
                          "mamba_n_heads": 8, "mamba_d_state": 16, "mamba_chunk_size": 64}, 1),
    "jamba": ({"model_type": "jamba", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "num_experts": 1,
               "attn_layer_period": 4, "attn_layer_offset": 3, "expert_layer_period": 2, "expert_layer_offset": 1,
               "mamba_d_state": 8}, 1),
}


# Tiny configs of the hybrid (linear attention / state-space) and MoE families, shared by the parameter-count,
# saved-tensor and QLoRA-quantization tests.
# Gemma 3's text config and a SigLIP tower small enough for a CPU (the multimodal tests build Gemma3 from both)
TINY_GEMMA3_TEXT = {"model_type": "gemma3_text", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                    "sliding_window": 8}
TINY_SIGLIP_VISION = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                      "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                      "vision_use_head": False}
TINY_QWEN3_NEXT = {"model_type": "qwen3_next", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                   "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                   "linear_value_head_dim": 12, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "shared_expert_intermediate_size": 48}
TINY_JAMBA = {"model_type": "jamba", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 8,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "num_experts": 4,
              "num_experts_per_tok": 2, "attn_layer_period": 4, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1, "mamba_d_state": 8}
TINY_FALCON_H1 = {"model_type": "falcon_h1", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_d_ssm": 128,
                  "mamba_n_heads": 8, "mamba_d_state": 16, "mamba_n_groups": 2}
TINY_NEMOTRON_H = {"model_type": "nemotron_h", "vocab_size": 128, "hidden_size": 64, "hybrid_override_pattern": "M-M*ME",
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                   "mamba_num_heads": 8, "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2,
                   "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "moe_shared_expert_intermediate_size": 48}


def module_prefill_peak_bytes(cfg: dict[str, Any], dtype: Any, batch: int, tokens: int, module_class: str,
                              attention_mask: bool = False) -> int:
    """Peak bytes of the storages created inside the first ``module_class`` module's forward during a no-grad
    prefill of ``batch`` random sequences of ``tokens`` (seed 0, CPU, ``use_cache=True``, ``logits_to_keep=1``; with
    ``attention_mask`` the all-ones mask ``generate()`` passes for an unpadded batch):
    a TorchDispatchMode follows every storage an op returns (weak references tell when it is freed), leaving out the
    module's parameters, buffers and inputs, and, at the peak, the storages the cache still holds when the module
    returns (its conv state)."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Live(TorchDispatchMode):
        def __init__(self, skip: set[int]) -> None:
            super().__init__()
            self.skip, self.live, self.owner = skip, {}, {}
            self.cur = self.peak = 0
            self.at: dict[int, tuple[tuple[int, tuple[int, ...]], Any]] = {}

        def _gone(self, key: int) -> None:
            entry = self.live.pop(key, None)
            if entry is not None:
                self.cur -= entry[0]

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    key = st.data_ptr()
                    if not key or key in self.skip:
                        continue
                    if key in self.live:
                        if self.owner[key]() is st:  # the same storage again (a view): counted once
                            continue
                        # another storage at a live entry's address: that one was freed and its memory reused,
                        # though its weak reference has not fired yet (a wrapper a reference cycle keeps until the
                        # garbage collector runs, which depends on what ran before in the process)
                        self._gone(key)
                    self.live[key] = (st.nbytes(), tuple(t.shape))
                    self.cur += st.nbytes()
                    self.owner[key] = weakref.ref(st, lambda r, k=key: self._gone(k) if self.owner.get(k) is r
                                                  else None)
            if self.cur > self.peak:  # each entry with the weak reference of its storage (which one it was)
                self.peak, self.at = self.cur, {k: (v, self.owner[k]) for k, v in self.live.items()}
            return out

    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=dtype)
    module = next(m for m in model.modules() if type(m).__name__ == module_class)
    state: dict[str, Any] = {}

    def enter(mod: Any, args: Any, kwargs: Any) -> None:
        given = [x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)]
        skip = {p.untyped_storage().data_ptr() for p in (*model.parameters(), *model.buffers(), *given)}
        state["mode"] = Live(skip)
        state["mode"].__enter__()

    def leave(mod: Any, args: Any, kwargs: Any, out: Any) -> None:
        state["mode"].__exit__(None, None, None)
        state["end"] = {k: (v, state["mode"].owner[k]) for k, v in state["mode"].live.items()}

    hooks = (module.register_forward_pre_hook(enter, with_kwargs=True),
             module.register_forward_hook(leave, with_kwargs=True))
    try:
        with torch.no_grad():
            ids = random_ids(cfg["vocab_size"], batch, tokens)
            mask = {"attention_mask": torch.ones_like(ids)} if attention_mask else {}
            model(input_ids=ids, use_cache=True, logits_to_keep=1, **mask)
    finally:
        for h in hooks:
            h.remove()
    mode, end = state["mode"], state["end"]
    # alive at the peak and still at the return: the same storage (its weak reference), not another one of the same
    # size the allocator later placed at the freed one's address (that subtracted a [b, h, 64, 64] fp32 temporary in
    # some runs: the fresh-clone CI of 33d3752a)
    held = sum(v[0] for k, (v, ref) in mode.at.items() if k in end and end[k][1] is ref)
    return int(mode.peak - held)


def profiled_allocations(prof: Any) -> list[tuple[int, int, int]]:
    """Every allocation event (time ns, address, size; a free has a negative size) a torch ``profile(...,
    profile_memory=True)`` recorded, in time order: the trace the allocator replays read
    (formulas/caching_allocator.py), walked from the profiler's event tree."""
    from torch._C._profiler import _EventType

    raw: list[tuple[int, int, int]] = []

    def walk(node: Any) -> None:
        if node.tag == _EventType.Allocation:
            f = node.extra_fields
            raw.append((node.start_time_ns, f.ptr, f.alloc_size))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    return sorted(raw)

"""``ModelSpec.applies_rotary`` / ``rotary_layers``: which layers rotate q/k by position, and the rotary work that
only those layers do (formulas/elementwise_traffic.py eqs. (E1)/(E2), (E4)/(E5); formulas/launch_overhead.py eqs.
(K2)/(K3) through estimate/launch.py kernel_linears).

Independent truths:

- Which layers rotate: the transformers model built from the same config.json runs a forward on the CPU with every
  module-level ``apply_rotary*`` function of its modeling modules wrapped, and each decoder layer records whether it
  called one. Qwen3-Next's Gated DeltaNet layers call none (Qwen3NextGatedDeltaNet), Llama-3.2-Vision's
  cross-attention layers neither (MllamaTextCrossAttention), Llama 4's NoPE layers skip theirs
  (Llama4TextAttention ``if self.use_rope``, modeling_llama4.py L350), Mamba-2 / Nemotron-H / Jamba have none.
- The traffic and kernels a layer without rotary does not run: SmolLM3, transformers' Llama-architecture model with
  NoPE layers (SmolLM3Attention ``if self.use_rope: apply_rotary_pos_emb(...)``, modeling_smollm3.py; the same
  rotate_half rotary, RMSNorm and SwiGLU as LlamaDecoderLayer), one rotary and one NoPE decoder layer traced forward
  and backward as tests/formulas/test_elementwise_traffic.py traces a Llama layer (eager: every non-view, non-GEMM
  aten op's tensor bytes; compiled: inductor's own byte count of its kernels), and its kernels counted op by op.
- The saved tensors of a training step do not depend on the layer's rotary (the rotated q and k replace the
  projections' outputs as SDPA's saved inputs; rotary's products keep only cos/sin): a rotary and a NoPE layer save
  the same bytes, so formulas/training_activations.py keeps no per-layer rotary term, and the cos/sin tables stay
  model-wide (Llama4TextModel.forward makes ``freq_cis`` once, modeling_llama4.py L552; ``ModelSpec.rotary``).
- Hand counts on the catalog's Llama 4 Scout and Qwen3-Next: the bytes (E1)/(E2) charge per rotary layer, times the
  layers that do not rotate.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from llmsizer.catalog.models import find_spec  # noqa: E402
from llmsizer.errors import ModelFileError  # noqa: E402
from llmsizer.estimate.launch import inference_kernels  # noqa: E402
from llmsizer.formulas.elementwise_traffic import LayerWidths, layer_bytes, step_bytes_per_token  # noqa: E402
from llmsizer.formulas.launch_overhead import layer_kernels  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import HYBRID_TINY, TINY_CONFIGS, build  # noqa: E402

_LLAMA4_TEXT: dict[str, Any] = {
    "model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 8,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
    "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1, "attention_chunk_size": 16,
    "pad_token_id": 0}
_MLLAMA_TEXT: dict[str, Any] = {
    "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 96, "cross_attention_layers": [1, 3], "pad_token_id": 0}
_MLLAMA: dict[str, Any] = {
    "model_type": "mllama", "text_config": _MLLAMA_TEXT,
    "vision_config": {"hidden_size": 32, "num_hidden_layers": 1, "num_global_layers": 1, "attention_heads": 4,
                      "intermediate_size": 48, "vision_output_dim": 96, "image_size": 56, "patch_size": 14,
                      "max_num_tiles": 4, "intermediate_layers_indices": [0]}}

CASES: dict[str, dict[str, Any]] = {
    **{f"hybrid-{k}": v for k, v in HYBRID_TINY.items()}, **TINY_CONFIGS,
    "granitemoehybrid-rope": {**HYBRID_TINY["granitemoehybrid"], "position_embedding_type": "rope"},
    # Llama4TextConfig's default: a NoPE layer every no_rope_layer_interval (4) layers, chunked attention elsewhere
    "llama4-text-interval": _LLAMA4_TEXT,
    "llama4-text-list": {**_LLAMA4_TEXT, "no_rope_layers": [1, 0, 1, 1, 0, 0, 1, 1]},
    # no chunked attention: every layer global, the NoPE ones still without rotary
    "llama4-text-no-chunks": {**_LLAMA4_TEXT, "attention_chunk_size": None},
    # layer_types stated beside no_rope_layers: use_rope follows no_rope_layers alone (modeling_llama4.py L318)
    "llama4-text-layer-types": {**_LLAMA4_TEXT, "no_rope_layers": [1, 1, 0, 1, 1, 1, 0, 1],
                                "layer_types": ["chunked_attention"] * 2 + ["full_attention"] * 6},
    "mllama-cross-attention": _MLLAMA,
}


def _model(cfg: dict[str, Any]) -> Any:
    """The CPU model whose decoder layers the spec describes (Mllama: its text model, MllamaForCausalLM)."""
    if cfg["model_type"] == "mllama":
        torch.manual_seed(0)
        text = transformers.MllamaTextConfig(**cfg["text_config"])
        return transformers.MllamaForCausalLM(text).eval()
    torch.manual_seed(0)
    return build(cfg, device="cpu", dtype=torch.float32)


def _rotating_layers(cfg: dict[str, Any]) -> tuple[bool, ...]:
    """Per decoder layer, whether its forward called an ``apply_rotary*`` function of a modeling module."""
    model = _model(cfg)
    layers = next(m for name, m in model.named_modules() if name.rsplit(".", 1)[-1] in ("layers", "h")
                  and isinstance(m, torch.nn.ModuleList))
    current = [-1]
    called = [False] * len(layers)
    for i, layer in enumerate(layers):
        layer.register_forward_pre_hook(lambda _m, _a, i=i: current.__setitem__(0, i))
    modules = {sys.modules[type(m).__module__] for m in model.modules()}
    patched: list[tuple[Any, str, Callable[..., Any]]] = []
    for mod in modules:
        for name in [n for n in vars(mod) if n.startswith("apply_rotary") and callable(getattr(mod, n))]:
            original = getattr(mod, name)

            def wrapped(*a: Any, _f: Callable[..., Any] = original, **k: Any) -> Any:
                if current[0] >= 0:
                    called[current[0]] = True
                return _f(*a, **k)
            patched.append((mod, name, original))
            setattr(mod, name, wrapped)
    try:
        ids = torch.randint(1, 100, (1, 24), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        for mod, name, original in patched:
            setattr(mod, name, original)
    return tuple(called)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_rotary_layers_are_the_layers_whose_forward_rotates(name: str) -> None:
    cfg = CASES[name]
    spec = spec_from_config(cfg, name=name)
    assert spec.rotary_layers == _rotating_layers(cfg)


def test_llama4_nope_layers_from_the_config() -> None:
    """The reader's rule against the config class's own (Llama4TextConfig.__post_init__ fills ``no_rope_layers``)."""
    for cfg in (CASES["llama4-text-interval"], CASES["llama4-text-list"], CASES["llama4-text-layer-types"]):
        conf = transformers.Llama4TextConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
        spec = spec_from_config(cfg, name="l4")
        assert spec.nope_layers == tuple(not r for r in conf.no_rope_layers)
    assert sum(find_spec("llama-4-scout-17b-16e-instruct").nope_layers) == 12  # every 4th of 48 (interval 4)


def test_a_bad_no_rope_layers_entry_is_a_one_line_error() -> None:
    cfg = {**_LLAMA4_TEXT, "no_rope_layers": [1, 2, 1, 1, 0, 1, 1, 1]}
    with pytest.raises(ModelFileError, match=r"no_rope_layers entries must be 1 \(rotary\) or 0 \(no rotary\), got 2"):
        spec_from_config(cfg, name="l4")


# --- the traffic and kernels of a layer without rotary: SmolLM3's NoPE layer, traced ---

GQA = dict(hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=2)
TOKENS = 512
# aten ops that launch no kernel (as tests/formulas/test_training_step_kernels.py NO_KERNEL: aliases, allocations)
NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided", "_record_function_enter_new", "_record_function_exit"}


def _smollm3() -> Any:
    torch.manual_seed(0)
    conf = transformers.SmolLM3Config(**GQA, num_hidden_layers=2, vocab_size=512, no_rope_layers=[1, 0],
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")
    model = transformers.SmolLM3ForCausalLM(conf).to(torch.bfloat16).train()
    assert [layer.self_attn.use_rope for layer in model.model.layers] == [1, 0]
    return model


def _run(model: Any, layer: Any) -> Callable[[], None]:
    x = torch.randn(1, TOKENS, GQA["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(TOKENS)[None]
    pe = tuple(p.detach() for p in model.model.rotary_emb(x, pos))

    def run() -> None:
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))
    return run


def _widths(rotary: bool) -> LayerWidths:
    d = GQA["hidden_size"] // GQA["num_attention_heads"]
    return LayerWidths(GQA["hidden_size"], GQA["intermediate_size"], GQA["num_attention_heads"] * d,
                       GQA["num_key_value_heads"] * d, d, rotary=rotary)


@pytest.mark.slow
def test_a_nope_layer_moves_the_eager_bytes_of_e1_e2_without_rotary() -> None:
    from test_elementwise_traffic import _traced_bytes

    model = _smollm3()
    traced = [_traced_bytes(_run(model, layer)) for layer in model.model.layers]
    counted = [sum(layer_bytes(_widths(rot), 2, compiled=False, norms_trained=True)) * TOKENS for rot in (True, False)]
    assert counted[0] == pytest.approx(traced[0], rel=0.005)
    assert counted[1] == pytest.approx(traced[1], rel=0.005)
    # the rotary's share: (10 + 16) c (q_w + k_w) + 8 c d_h per token; measured 8,781,824 B at 512 tokens
    assert counted[0] - counted[1] == pytest.approx(traced[0] - traced[1], rel=0.001)


@pytest.mark.slow
def test_a_nope_layer_moves_inductors_bytes_without_rotary() -> None:
    from test_elementwise_traffic import _inductor_bytes

    model = _smollm3()
    measured = [_inductor_bytes(_run(model, torch.compile(layer))) for layer in model.model.layers]
    counted = [sum(layer_bytes(_widths(rot), 2, compiled=True, norms_trained=True)) * TOKENS for rot in (True, False)]
    assert counted[0] == pytest.approx(measured[0], rel=0.02)
    assert counted[1] == pytest.approx(measured[1], rel=0.02)


@pytest.mark.slow
def test_a_nope_layer_launches_the_eager_kernels_without_rotary() -> None:
    """The kernels a rotary layer launches beyond a NoPE one, forward and backward: eq. (K2)/(K3)'s rotary share
    (traced: 26, the rotary's mul, neg, cat and add, their backward's slice_backward and gradient sums, and the
    contiguous copies of the q and k gradients)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    model = _smollm3()
    n = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL:
                n[0] += 1
            return out

    counts = []
    for layer in model.model.layers:
        run = _run(model, layer)
        n[0] = 0
        with Count():
            run()
        counts.append(n[0])
    lin = [(name, True, False) for name in ("q", "k", "v", "o", "gate", "up", "down")]
    per = [sum(layer_kernels(_widths(rot), lin, False, True)) for rot in (True, False)]
    assert per[0] - per[1] == counts[0] - counts[1]


@pytest.mark.slow
def test_a_nope_layer_saves_what_a_rotary_layer_saves() -> None:
    """No per-layer rotary term in the saved activations (module docstring): the same bytes with and without, the
    cos/sin tables apart (the rotary layer's products keep them; they are the model's one shared pair,
    training_activations.py ``_shared_terms``)."""
    model = _smollm3()
    saved = []
    for layer in model.model.layers:
        x = torch.randn(1, TOKENS, GQA["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
        pos = torch.arange(TOKENS)[None]
        pe = tuple(p.detach() for p in model.model.rotary_emb(x, pos))
        storages: dict[int, int] = {}

        tables = {p.untyped_storage().data_ptr() for p in pe}

        def pack(t: Any, storages: dict[int, int] = storages, tables: set[int] = tables) -> Any:
            s = t.untyped_storage()
            if s.data_ptr() not in tables:
                storages[s.data_ptr()] = s.nbytes()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            layer(x, attention_mask=None, position_ids=pos, position_embeddings=pe)
        saved.append(sum(storages.values()))
    assert saved[0] == saved[1] > 0


# --- hand counts on the catalog models ---

@pytest.mark.parametrize(("name", "layers", "q_w", "k_w", "d_h", "r"), [
    # 36 of 48 layers rotate: every 4th is NoPE (no_rope_layer_interval 4); 40 heads and 8 K/V heads of 128
    ("llama-4-scout-17b-16e-instruct", 36, 40 * 128, 8 * 128, 128, 128),
    # 12 of 48: the full-attention layers (full_attention_interval 4), not the 36 Gated DeltaNet layers; 16 heads and
    # 2 K/V heads of 256, of whose channels 64 rotate (partial_rotary_factor 0.25, config.json)
    ("qwen3-next-80b-a3b-thinking", 12, 16 * 256, 2 * 256, 256, 64),
    # 32 of 40: not the 8 cross-attention layers (3, 8, ..., 38); 32 heads and 8 K/V heads of 128
    ("llama-3.2-11b-vision-instruct", 32, 32 * 128, 8 * 128, 128, 128),
])
def test_only_the_rotating_layers_carry_rotary_bytes_and_kernels(name: str, layers: int, q_w: int, k_w: int,
                                                                 d_h: int, r: int) -> None:
    """The model less the same model without positions (``rope`` False): the rotary bytes and kernels of the layers
    that rotate, and no others."""
    spec = find_spec(name)
    bare = dataclasses.replace(spec, rope=False)
    c = 2
    # eager (E1) + (E2): 10c (q_w + k_w) + 4c d_h forward, 16c (q_w + k_w) + 4c d_h backward; a partial rotary's
    # forward (E1r, transformers' apply_rotary_pos_emb on the r rotated channels, then torch.cat with the rest):
    # 10c (q_w + k_w) r / d_h + 4c r + 2c (q_w + k_w)
    fwd = 10 * c * (q_w + k_w) + 4 * c * d_h if r == d_h else 10 * c * (q_w + k_w) * r // d_h + 4 * c * r + 2 * c * (q_w + k_w)
    eager = (fwd + 16 * c * (q_w + k_w) + 4 * c * d_h) * layers
    assert step_bytes_per_token(spec, c, False, True, {}, 0) - step_bytes_per_token(bare, c, False, True, {}, 0) == eager
    # compiled (E4) + (E5): 5c (q_w + k_w) + 4c d_h forward, 2c (q_w + k_w) + 4c d_h backward
    compiled = (7 * c * (q_w + k_w) + 8 * c * d_h) * layers
    assert step_bytes_per_token(spec, c, True, True, {}, 0) - step_bytes_per_token(bare, c, True, True, {}, 0) == compiled
    # an inference forward: 10 rotary kernels a rotating layer (q * cos, rotate_half's neg and cat, * sin, +; then
    # k's; a partial rotary concatenates q's and k's pass-through channels back: 2 more), and the model's cos/sin
    # tables once (10 kernels against a position-free model's 2: forward_head_kernels)
    assert inference_kernels(spec) - inference_kernels(bare) == (10 + 2 * (r < d_h)) * layers + 8

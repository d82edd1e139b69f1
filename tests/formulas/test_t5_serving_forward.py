"""Serving a T5 with transformers ``generate()`` (formulas/encoder_decoder_serving.py eqs. S1-S6, kv_cache.py eqs.
1 and 4) against real CPU runs of tiny T5s (transformers 5.24, torch 2.13).

Independent truth: a TorchDispatchMode that registers the storage of every tensor an operator returns and drops it
when the storage is freed (the method of tests/training/measure_step.py's LiveTensorBytes), with the model's
parameter storages left out (the weights are checked on their own, against ``from_pretrained``): the peak of
activation bytes of ``model.encoder(...)`` and of ``model.generate(...)``; the tensors of the ``EncoderDecoderCache``
``generate()`` returns; the parameter bytes of a tiny T5 saved and loaded back in fp16 / bf16. The full-size check
runs the same tracker under FakeTensorMode (shapes and lifetimes only) on T0_3B's catalog config.
"""

from __future__ import annotations

import weakref
from typing import Any

import pytest

from llmsizer.formulas.encoder_decoder_serving import (
    decode_transient_bytes,
    encoder_output_bytes,
    encoder_peak,
    fp32_kept_extra_bytes,
)
from llmsizer.formulas.kv_cache import cross_attention_kv, kv_cache
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, cache_layers, hf_config, random_ids, torch, transformers

pytestmark = pytest.mark.slow

_SMALL = {"vocab_size": 512, "d_model": 128, "d_kv": 32, "d_ff": 256, "num_heads": 4, "num_layers": 2,
          "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}
CONFIGS = {
    "t5-v1_1-like": {**_SMALL, "model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
    # original T5: ReLU, tied (decoder depth = encoder depth: transformers 5.24's generate() sizes its cache by
    # num_layers and fails on a deeper decoder, cache_utils.py L1620)
    "t5-relu": {**_SMALL, "model_type": "t5"},
    "mt5-like": {**_SMALL, "model_type": "mt5", "num_layers": 3, "d_ff": 320, "tie_word_embeddings": False},
}
DTYPES = {"fp32": ("float32", 4), "bf16": ("bfloat16", 2)}


class _Live:
    """Peak bytes of live tensor storages created inside the mode, parameters excluded."""

    def __init__(self, exclude: set[int]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        live = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        live.track(t)
                return out

        self.mode = _Mode()
        self.exclude = exclude
        self.sizes: dict[int, int] = {}
        self.refs: dict[int, Any] = {}
        self.current = self.peak = 0

    def track(self, t: Any) -> None:
        st = t.untyped_storage()
        key = st._cdata
        if key in self.exclude:
            return
        n = st.nbytes()
        if key in self.sizes:
            self.current += n - self.sizes[key]
            self.sizes[key] = n
        else:
            self.sizes[key] = n
            self.current += n
            self.refs[key] = weakref.ref(st, lambda _r, key=key: self._free(key))
        self.peak = max(self.peak, self.current)

    def _free(self, key: int) -> None:
        self.current -= self.sizes.pop(key, 0)
        self.refs.pop(key, None)


def _params(model: Any) -> set[int]:
    return {p.untyped_storage()._cdata for p in model.parameters()} | \
        {b.untyped_storage()._cdata for b in model.buffers()}


def _model(cfg: dict[str, Any], dtype: str, attention: str) -> Any:
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=getattr(torch, DTYPES[dtype][0]), attn=attention)
    model.generation_config.eos_token_id = None  # generate exactly max_new_tokens
    return model


def _encoder_peak(model: Any, batch: int, source: int) -> int:
    ids = random_ids(model.config.vocab_size, batch, source)
    live = _Live(_params(model))
    with torch.no_grad(), live.mode:
        model.encoder(input_ids=ids)
    return live.peak


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize(("batch", "source"), [(2, 64), (2, 256), (1, 160)])
def test_encoder_forward_peak_is_eq_s4(name, dtype, attention, batch, source, capsys):
    cfg = CONFIGS[name]
    measured = _encoder_peak(_model(cfg, dtype, attention), batch, source)
    pred = encoder_peak(spec_from_config(cfg, name=name), batch, source, DTYPES[dtype][1], attention)
    with capsys.disabled():
        print(f"\n[{name} {dtype} {attention} b{batch} s{source}] measured {measured:,} predicted "
              f"{pred.peak_bytes:,} ({pred.phase})")
    assert pred.peak_bytes == measured


def _generate(model: Any, batch: int, source: int, target: int) -> tuple[int, Any]:
    ids = random_ids(model.config.vocab_size, batch, source)
    live = _Live(_params(model))
    with torch.no_grad(), live.mode:
        out = model.generate(input_ids=ids, max_new_tokens=target, do_sample=False, num_beams=1,
                             return_dict_in_generate=True)
    assert out.sequences.shape == (batch, target + 1)  # the start token and the target tokens
    return live.peak, out.past_key_values


def _bytes(cache: Any) -> int:
    return sum(t.numel() * t.element_size() for kv in cache_layers(cache) for t in kv)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("batch", "source", "target"), [(2, 32, 24), (2, 160, 6), (3, 16, 40)])
def test_generate_kv_and_peak(name, dtype, batch, source, target, capsys):
    """The cache generate() leaves: the self-attention K/V over the target tokens fed to the decoder (the start
    token and all but the last generated one: ``target`` in all) and the cross-attention K/V over the source, exact.
    The peak: max(encoder forward (S4), the decoding end's caches + encoder output + logits (S5)); the first
    decoding step's transient cross k/v projections (2 c b s i before the cache copies them) and the decoder's
    one-token activations (a few [b, 1, d]) are not counted: within 1 %."""
    cfg = CONFIGS[name]
    model = _model(cfg, dtype, "sdpa")
    measured, cache = _generate(model, batch, source, target)
    spec = spec_from_config(cfg, name=name)
    elem = DTYPES[dtype][1]
    self_kv = kv_cache(spec, target, batch, dtype).total_bytes
    cross_kv = cross_attention_kv(spec, source, batch, dtype)
    assert self_kv == _bytes(cache.self_attention_cache)
    assert cross_kv == _bytes(cache.cross_attention_cache)
    decode = (self_kv + cross_kv + encoder_output_bytes(spec, batch, source, elem)
              + decode_transient_bytes(spec, batch, target, elem))
    pred = max(encoder_peak(spec, batch, source, elem, "sdpa").peak_bytes, decode)
    with capsys.disabled():
        print(f"\n[{name} {dtype} b{batch} s{source} t{target}] generate peak measured {measured:,} predicted "
              f"{pred:,} ratio {pred / measured:.4f}")
    assert abs(pred / measured - 1) <= 0.01


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["t5-v1_1-like", "t5-relu"])
def test_weights_as_from_pretrained_loads_them(name, dtype, tmp_path):
    """transformers keeps every ``wo`` in fp32 on an fp16 load, not on a bf16 one (eq. S6)."""
    cfg = CONFIGS[name]
    torch.manual_seed(0)
    build(cfg, device="cpu").save_pretrained(tmp_path)
    cls = transformers.AutoModelForSeq2SeqLM
    model = cls.from_pretrained(tmp_path, dtype=getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[dtype]))
    real = sum(p.numel() * p.element_size() for p in model.parameters())
    spec = spec_from_config(cfg, name=name)
    assert weight_bytes(spec, dtype).total + fp32_kept_extra_bytes(spec, dtype) == real
    assert (fp32_kept_extra_bytes(spec, dtype) > 0) == (dtype == "fp16")


def test_full_size_encoder_peak_under_fake_tensors(capsys):
    """T0_3B's shapes (catalog config) at one source of 512 tokens in bf16: the encoder's live peak under
    FakeTensorMode (no arithmetic, real lifetimes) equals eq. (S4)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from llmsizer.catalog.models import find

    cfg = dict(find("t0_3b").config, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    conf = hf_config(cfg)
    conf._attn_implementation = "sdpa"
    with FakeTensorMode(), torch.device("cpu"):
        model = transformers.AutoModelForSeq2SeqLM.from_config(conf, dtype=torch.bfloat16).eval()
        ids = torch.zeros((1, 512), dtype=torch.long)
        live = _Live(_params(model))
        with torch.no_grad(), live.mode:
            model.encoder(input_ids=ids)
    pred = encoder_peak(spec_from_config(cfg, name="t0_3b"), 1, 512, 2, "sdpa")
    with capsys.disabled():
        print(f"\n[t0_3b bf16 sdpa b1 s512 fake] measured {live.peak:,} predicted {pred.peak_bytes:,} ({pred.phase})")
    assert pred.peak_bytes == live.peak


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("batch", "source", "target"), [(2, 160, 6), (3, 16, 40)])
def test_estimate_inference_on_cpu_equals_a_real_generate(dtype, batch, source, target, capsys):
    """The whole estimate (estimate_inference on a CPU, transformers engine: weights + K/V + activations, less the
    named host runtime constant) against a real generate(): the parameter bytes plus the live peak."""
    from llmsizer import estimate_inference

    cfg = CONFIGS["t5-v1_1-like"]
    model = _model(cfg, dtype, "sdpa")
    measured, _ = _generate(model, batch, source, target)
    measured += sum(p.numel() * p.element_size() for p in model.parameters())
    est = estimate_inference(spec_from_config(cfg, name="tiny-t5"), device="cpu", engine="transformers",
                             weights=dtype, dtype=dtype, context=source + target, output_tokens=target,
                             concurrency=batch)
    pred = est.total("host")[1] - est.item("host_runtime").bytes
    with capsys.disabled():
        print(f"\n[estimate {dtype} b{batch} s{source} t{target}] measured {measured:,} predicted {pred:,} "
              f"({est.details['peak_phase']})")
    assert abs(pred / measured - 1) <= 0.01


@pytest.mark.parametrize("name", list(CONFIGS))
def test_parameter_groups_of_eq_s7_are_the_real_modules(name):
    """Eq. (S7)'s groups against the modules transformers builds (meta device): the encoder's and decoder's block
    linears, the decoder's EncDecAttention k and v, the lm_head (the shared embedding when tied), every wo."""
    from llmsizer.formulas.encoder_decoder_serving import t5_params

    cfg = CONFIGS[name]
    model = build(cfg)
    lin = {n: m.weight.numel() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    p = t5_params(spec_from_config(cfg, name=name))
    assert p.encoder == sum(v for n, v in lin.items() if n.startswith("encoder.block."))
    assert p.decoder == sum(v for n, v in lin.items() if n.startswith("decoder.block."))
    assert p.cross_kv == sum(v for n, v in lin.items() if "EncDecAttention.k" in n or "EncDecAttention.v" in n)
    assert p.wo == sum(v for n, v in lin.items() if n.endswith(".wo"))
    assert p.head == model.lm_head.weight.numel()


def test_decode_step_reads_the_caches_and_weights_a_real_step_uses():
    """estimate_speed's decode step (eq. S7) for a tiny T5 in bf16 mid-generation: the K/V it reads are the
    EncoderDecoderCache of a real generate() stopped after target/2 tokens; the weights it reads are the decoder's
    linears less EncDecAttention k and v (their K/V are cached: T5Attention reuses them once ``is_updated``) plus the
    lm_head, in the real model's bytes."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.speed import estimate_speed

    cfg = CONFIGS["t5-v1_1-like"]
    batch, source, target = 2, 48, 20
    model = _model(cfg, "bf16", "sdpa")
    _, cache = _generate(model, batch, source, target // 2)
    real_kv = _bytes(cache.self_attention_cache) + _bytes(cache.cross_attention_cache)
    read = sum(m.weight.numel() * m.weight.element_size() for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and (n.startswith("decoder.block.") or n == "lm_head")
               and ".EncDecAttention.k" not in n and ".EncDecAttention.v" not in n)
    sp = estimate_speed(spec_from_config(cfg, name="tiny-t5"), builtin_catalog().devices["h100-sxm"],
                        weights_format="bf16", prompt_tokens=source, output_tokens=target, concurrency=batch,
                        kv_dtype="bf16", engine="transformers")
    assert sp.details["kv_bytes_per_decode_step"] == real_kv
    assert sp.details["decode_read_weight_bytes"] == read

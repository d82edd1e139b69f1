"""Per-GPU weight bytes under tensor parallelism on vLLM / SGLang against the real module shapes.

Independent truth: the parameters of the transformers 5.24 model built on the meta device (``oracle_utils.build``,
shapes only) and, for each, whether the serving engine keeps it whole on every rank, by its Hugging Face module
name, as the engines' model code builds it (vllm 0.19.1 and sglang 0.5.6 PyPI wheels):

- replicated: ``self_attn.q_a_proj`` + ``self_attn.kv_a_proj_with_mqa`` (vLLM deepseek_v2.py:870-883, a
  MergedColumnParallelLinear with ``disable_tp=True`` at :786, or a ReplicatedLinear; SGLang deepseek_v2.py:1217-1250
  ReplicatedLinear), the router ``mlp.gate`` (vLLM deepseek_v2.py:263 GateLinear, a ReplicatedLinear; mixtral.py:120
  and qwen3_moe.py:176 ReplicatedLinear; SGLang deepseek_v2.py:513-525 MoEGate's full [E, H] parameter, mixtral.py:81,
  qwen3_moe.py:123) and every 1-D parameter (RMSNorm weights);
- the attention's K/V projections split by KV head, one whole head per rank where tp exceeds the KV heads
  (``QKVParallelLinear``, vLLM layers/linear.py:1010-1027, SGLang layers/linear.py:817-834: max(1, kv // tp) / kv);
- everything else split tp ways (column/row-parallel linears, FusedMoE over the intermediate size, the
  vocabulary-parallel embedding and lm_head).

Beside the parameters, the router's score-correction bias (transformers' ``e_score_correction_bias`` buffer), which
both engines build as an fp32 parameter [n_routed_experts], whole on every rank, where the config routes with it (vLLM
deepseek_v2.py:268-273 and SGLang deepseek_v2.py:526-538: ``topk_method == "noaux_tc"``, DeepSeek-V3 and V3.2): 4
bytes per element (``_with_bias``).

Bytes per parameter in the checkpoint's format, written out here from the format's definition: DeepSeek-V3's FP8
checkpoint (config.json quantization_config: fp8 e4m3, weight_block_size [128, 128]) stores every linear of the decoder
layers but the router as one byte per element plus one fp32 scale per 128 x 128 block (per expert for the fused
expert tensors); the router, norms, embedding and lm_head stay bf16. bf16 models: 2 bytes per element.
"""

from __future__ import annotations

import math

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import entries
from llmsizer.models import load_model
from oracle_utils import build

REPLICATED = (".self_attn.q_a_proj.", ".self_attn.kv_a_proj_with_mqa.", ".mlp.gate.")


def _fp8_block_bytes(name: str, shape: tuple[int, ...]) -> int:
    """One parameter of DeepSeek-V3's FP8 checkpoint: fp8 + fp32 128 x 128 block scales for the decoder layers'
    linears (not the router), bf16 for the rest."""
    n = math.prod(shape)
    if ".layers." not in name or len(shape) < 2 or ".mlp.gate." in name:
        return 2 * n
    experts = shape[0] if len(shape) == 3 else 1
    out_f, in_f = shape[-2], shape[-1]
    return n + 4 * experts * math.ceil(out_f / 128) * math.ceil(in_f / 128)


def _with_bias(cfg, model):  # type: ignore[no-untyped-def]
    """The model's parameters and, where the config routes with it (module docstring), the fp32 bias buffers."""
    routes = cfg.get("topk_method") == "noaux_tc"
    return [*model.named_parameters(),
            *((n, b) for n, b in model.named_buffers() if routes and n.endswith("e_score_correction_bias"))]


def _bytes(name: str, shape: tuple[int, ...], bytes_of) -> float:  # type: ignore[no-untyped-def]
    return 4 * math.prod(shape) if name.endswith("e_score_correction_bias") else bytes_of(name, shape)


def _per_gpu(model_name: str, tp: int, bytes_of) -> float:  # type: ignore[no-untyped-def]
    cfg = entries()[model_name].config
    model = build(cfg)
    kv = cfg["num_key_value_heads"]
    total = 0.0
    for name, p in _with_bias(cfg, model):
        b = _bytes(name, tuple(p.shape), bytes_of)
        whole = p.dim() == 1 or any(r in name for r in REPLICATED)
        # QKVParallelLinear (vLLM layers/linear.py:1010-1027, SGLang layers/linear.py:817-834): one whole KV head per
        # rank where tp > the KV heads (Qwen3-235B-A22B: 4 KV heads at TP 8)
        kv_proj = any(r in name for r in (".self_attn.k_proj.", ".self_attn.v_proj."))
        total += b if whole else b * max(1, kv // tp) / kv if kv_proj else b / tp
    return total


def _served(model_name: str, engine: str, tp: int) -> int:
    e = estimate_inference(load_model(model_name), engine=engine, tensor_parallel=tp, context=4096)
    return next(i.bytes for i in e.items if i.name == "weights")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_deepseek_v3_fp8_tp8_per_gpu_weights_keep_mla_down_projections_and_router_whole(engine):
    pytest.importorskip("torch")
    expected = _per_gpu("deepseek-v3", 8, _fp8_block_bytes)
    got = _served("deepseek-v3", engine, 8)
    assert got == pytest.approx(expected, rel=1e-6, abs=64)
    # what splitting every matrix would miss: 61 q_a + kv_a [1536 + 576, 7168] fp8 and 58 routers [256, 7168] bf16,
    # 7/8 of each, about 1 GB per GPU
    split_all = _per_gpu("deepseek-v3", 8, lambda n, s: _fp8_block_bytes(n, s) / (1 if len(s) == 1 else 8))
    assert expected - split_all > 0.9e9


# DeepSeek-V3.2's DSA indexer: wq_b, wk (fp8 in the checkpoint, ReplicatedLinear with the quant config) and
# weights_proj, which both engines build without the quant config in a dtype of their own: vLLM deepseek_v2.py:635-655
# (quant_config=None: bf16, 2 B), SGLang nsa_indexer.py:149-155 (params_dtype=torch.float32: 4 B); SGLang's k_norm
# (weight and bias) in fp32 too (nsa_indexer.py:156 LayerNorm(dtype=torch.float32), layernorm.py:288-305).
INDEXER = (".self_attn.indexer.wq_b.", ".self_attn.indexer.wk.", ".self_attn.indexer.weights_proj.")
WEIGHTS_PROJ_BYTES = {"vllm": 2, "sglang": 4}


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_deepseek_v32_fp8_tp8_indexer_whole_and_weights_proj_in_the_engines_dtype(engine):
    pytest.importorskip("torch")

    def bytes_of(name: str, shape: tuple[int, ...]) -> float:
        if ".indexer.weights_proj." in name:
            return WEIGHTS_PROJ_BYTES[engine] * math.prod(shape)
        if ".indexer.k_norm." in name and engine == "sglang":  # nsa_indexer.py:156 LayerNorm(dtype=torch.float32)
            return 4 * math.prod(shape)
        return _fp8_block_bytes(name, shape)

    cfg = entries()["deepseek-v3.2"].config
    model = build(cfg)
    expected = 0.0
    weights_proj = 0
    for name, p in _with_bias(cfg, model):
        b = _bytes(name, tuple(p.shape), bytes_of)
        whole = p.dim() == 1 or any(r in name for r in REPLICATED + INDEXER)
        expected += b if whole else b / 8
        weights_proj += p.numel() if ".indexer.weights_proj." in name else 0
    assert weights_proj == 61 * 64 * 7168  # the cited shapes: 61 layers x [index_n_heads, hidden]
    k_norm = [tuple(p.shape) for name, p in model.named_parameters() if ".indexer.k_norm." in name]
    assert k_norm == [(128,)] * (2 * 61)  # weight and bias of [index_head_dim] in each of the 61 layers
    assert _served("deepseek-v3.2", engine, 8) == pytest.approx(expected, rel=1e-7, abs=64)


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "tp"), [("deepseek-v2-lite", 2), ("mixtral-8x7b-v0.1", 2),
                                                ("qwen3-235b-a22b", 8)])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_bf16_per_gpu_weights_keep_the_replicated_modules_whole(model_name, tp, engine):
    """DeepSeek-V2-Lite has no q LoRA: its q_proj is column-parallel, kv_a_proj_with_mqa replicated; Mixtral and
    Qwen3-MoE replicate only the router (and the norms)."""
    pytest.importorskip("torch")
    expected = _per_gpu(model_name, tp, lambda n, s: 2 * math.prod(s))
    assert _served(model_name, engine, tp) == pytest.approx(expected, rel=1e-6, abs=64)

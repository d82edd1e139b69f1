"""Bytes alive while one bf16 matrix is quantized to NF4 on the device, by quantizer [bytes].

QLoRA quantizes the frozen base matrix by matrix when the model is built or moved to the device. What exists for a
moment on top of the already-quantized weights depends on the quantizer's code:

- ``bitsandbytes`` (PEFT / transformers ``BitsAndBytesConfig``): ``Params4bit._quantize`` moves the bf16 source to
  the device (``w = self.data.contiguous().to(device)``) and ``quantize_4bit``'s CUDA kernel writes the packed
  output directly (bitsandbytes/nn/modules.py ``Params4bit._quantize``):

      T_bnb = 2 n                                                                                      (1)

- ``torchao`` (``to_nf4`` / ``NF4Tensor.from_tensor``, what torchtune's QLoRA builds; torchao/dtypes/nf4tensor.py
  @ v0.2.0, CHUNK_SIZE line 33, convert_to_norm_float_weight lines 627-660; unchanged in 0.18
  quantization/quantize_/workflows/nf4/nf4_tensor.py lines 84, 816-853, 884-890): the bf16 source (2 n; torchtune
  builds an ``nn.Linear`` on the device and quantizes its weight), ``scaled_blocks = blocks / scales`` (2 n), a
  uint8 index buffer of n elements, and per chunk of ``CHUNK_SIZE = 1024**2`` elements
  ``diff = (value - nf4).abs()``, two bf16 [chunk, 16] tensors alive together (the subtraction's result until
  ``abs`` has run), 2 x 32 B per element:

      T_torchao = 2 n + 2 n + n + 64 min(n, 2^20)                                                     (2)

- ``torchao-0.1`` (torchao v0.1, 2024-04-04, the version torchtune pinned until 2024-05: ``torchao==0.1`` in
  torchtune pyproject.toml @ 0217d44c2 line 28): the same lines without the chunk loop and without the uint8
  buffer (nf4tensor.py @ v0.1 lines 394-398, 444: ``quantize_tensor_nearest`` on the whole flattened matrix;
  chunking came with pytorch/ao pull 196, 2024-05-01):

      T_torchao-0.1 = 2 n + 2 n + 64 n                                                                (3)

- ``bitsandbytes-0.42`` (before 0.43.2): ``Params4bit.cuda`` casts the source to fp16 on its way to the device
  (``w = self.data.contiguous().half().cuda(device)``, bitsandbytes/nn/modules.py @ 0.42.0 line 168): eq. (1).
- ``lightning-bnb-0.42`` (litgpt: Lightning Fabric's ``BitsandbytesPrecision`` over bitsandbytes 0.42.0, the version
  litgpt pins: litgpt pyproject.toml @ 00af8b0d ``bitsandbytes==0.42.0``, finetune/lora.py lines 132-138): litgpt
  builds the model on the device (``fabric.init_module(empty_init=False)`` on one device, lora.py line 197), so each
  ``_Linear4bit`` first makes its bf16 weight there and then quantizes an fp16 copy of it
  (lightning/fabric/plugins/precision/bitsandbytes.py @ 12881e8 lines 305-312, 334):

      T_lightning = 2 n + 2 n                                                                          (1b)

For Llama-2-7B's largest matrix (11008 x 4096 = 45.1 M elements), eq. 3 is 3.07 GB, eq. 2 0.29 GB, eq. 1 0.09 GB.
The double quantization of the block scalers (n / 64 elements) is below 0.1 n and not counted.

**What the 4-bit matmul keeps** (the step, not the model init). bitsandbytes' ``MatMul4Bit`` dequantizes the weight
for each GEMM, forward and backward (``F.dequantize_4bit(B, quant_state).to(A.dtype)``, bitsandbytes/autograd/
_functions.py @ 0.42.0 lines 516, 546). Before 0.43.2 its forward also kept its input for the backward whenever any
input needed a gradient (``ctx.tensors = (A, B)``, line 523), although the 4-bit weight takes no gradient: with LoRA
the input needs one, so every quantized linear keeps its input until its backward. bitsandbytes pull 1270 ("fix
QLoRA mem bug: delete useless buffered activation", commit 9e75374, 2024-07-16, released in 0.43.2) keeps
``(None, B)`` instead:

    kept by a quantized linear = its input (c B per element)   for bitsandbytes-0.42, lightning-bnb-0.42   (4)
                               = nothing                        otherwise

(``formulas/training_activations.py`` counts each such input once per distinct tensor.) The dequantized weight is
made in the quantization dtype and cast to the compute dtype: bitsandbytes 0.42 quantized an fp16 copy (above), so
under bf16 compute the fp16 dequantized matrix and its bf16 cast exist together (``dequantize_4bit`` allocates its
output in ``quant_state.dtype``, bitsandbytes/functional.py @ 0.42.0 line 1026); since 0.43 the weight is quantized
in its own dtype and the cast is a no-op:

    D = n c          (bitsandbytes >= 0.43.2, torchao; bitsandbytes 0.42 under fp16 compute)               (5)
    D = n (2 + c)    (bitsandbytes 0.42 under bf16/fp32 compute: the fp16 matrix and its cast)

**transformers 5.0-5.3's threaded loader** (``load_in_4bit`` quantizing on the fly; model init, not the step).
transformers 5.3.0 ``core_model_loading.py`` starts a 4-worker ``ThreadPoolExecutor`` unless
``HF_DEACTIVATE_ASYNC_LOAD`` is set (lines 1105-1110) and submits every checkpoint tensor to it at once
(``spawn_materialize``, lines 1198-1199: slice from the safetensors file, ``.to(device, dtype)``) before its main loop
quantizes them one by one (``mapping.convert``, lines 1210-1216). Nothing bounds how far the workers run ahead of
the quantizing loop, so the full-precision matrices waiting on the device are anything from one to all of them:

    T_async <= the checkpoint in the load dtype (2 B per weight in bf16)                               (6)

and the caching allocator keeps those blocks reserved after they are freed (``max_memory_reserved``, nvidia-smi).
transformers pull 44576 (merged 2026-03-10, after 5.3.0) loads synchronously whenever a quantizer runs on the fly
(5.24.0 ``core_model_loading.py`` lines 1865-1873), which is eq. (1). Its own measurement, Qwen2.5-7B-Instruct,
async on: 5.46 GB allocated, 13.47 GB reserved (the bf16 checkpoint is 15.2 GB). Eq. (6) is a bound, not an
estimate (the lead is a race between disk, copies and the main loop): a warning, not a memory item.

Lightning Fabric replaces every ``torch.nn.Linear`` built under ``fabric.init_module`` (``_ClassReplacementContextManager
({"torch.nn.Linear": ...})``, bitsandbytes.py line 140; ``_convert_layers`` lines 415-436 with no ``ignore_modules``):
litgpt's lm_head is an ``nn.Linear`` (litgpt/model.py @ 00af8b0d line 25; lora.py line 509 wraps one in LoRALinear), so
it is quantized too, unlike transformers' (``get_keys_to_not_convert`` keeps lm_head in bf16).

**Fused MoE experts stay in the model dtype** under ``bitsandbytes`` (transformers 5 ``load_in_4bit``, which needs
bitsandbytes >= 0.46.1: utils/import_utils.py line 166). transformers replaces only modules whose type *is*
``nn.Linear`` (or GPT-2's ``Conv1D``): ``replace_with_bnb_linear``, integrations/bitsandbytes.py @ 5.24.0 line 189
``if isinstance(module, Conv1D) or type(module) is nn.Linear``; ``param_needs_quantization`` takes only
``Linear4bit`` weights (quantizers/quantizer_bnb_4bit.py line 87). Transformers 5 stores the routed experts of every
MoE family as fused 3-D ``nn.Parameter``s (``gate_up_proj`` [E, 2I, H], ``down_proj`` [E, H, I]: e.g.
models/qwen3_next/modeling_qwen3_next.py lines 797-798, mixtral, qwen3_moe, deepseek_v3, gpt_oss, jamba, llama4,
nemotron_h's ``up_proj``) and the router as an ``nn.Parameter`` [E, H] (qwen3_next line 835; Llama4Router subclasses
``nn.Linear``, which the ``type(...) is`` test also skips), so both stay bf16/fp16 beside the NF4 attention and
shared-expert linears; bitsandbytes 0.50 has no expert module and PEFT only wraps such parameters
(``target_parameters``). The bitsandbytes-0.42 era (transformers 4.x) built experts and router as ``nn.Linear``s,
Lightning/litgpt's LLaMAMoE too: there they are quantized. torchao (torchtune) is left as before.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs import ModelSpec
from ..specs.training import NF4_QUANTIZERS as QUANTIZERS
from ..suggest import unknown_choice
from .weight_formats import BNB_FORMATS

TORCHAO_CHUNK = 1024**2  # torchao nf4tensor.py CHUNK_SIZE (v0.2.0 line 33; 0.18 line 84)
SOURCE = ("bitsandbytes nn/modules.py Params4bit._quantize; torchao dtypes/nf4tensor.py @ v0.1 lines 394-398, 444 "
          "and @ v0.2.0 lines 33, 627-660 (formulas/nf4_quantization.py)")


KEEPS_INPUT = frozenset({"bitsandbytes-0.42", "lightning-bnb-0.42"})  # eq. (4)
QUANTIZES_LM_HEAD = frozenset({"lightning-bnb-0.42"})  # Lightning's nn.Linear replacement
KEEPS_FUSED_EXPERTS = frozenset({"bitsandbytes"})  # transformers 5: experts/router are nn.Parameters
FP16_QUANTIZED = frozenset({"bitsandbytes-0.42", "lightning-bnb-0.42"})  # eq. (5): the fp16 source of 0.42


def _check(quantizer: str) -> None:
    if quantizer not in QUANTIZERS:
        raise InputError(unknown_choice("nf4_quantizer", quantizer, QUANTIZERS))


def matmul_keeps_input(quantizer: str) -> bool:
    """Eq. (4): whether each quantized linear keeps its input for the backward (bitsandbytes before 0.43.2)."""
    _check(quantizer)
    return quantizer in KEEPS_INPUT


def quantizes_lm_head(quantizer: str) -> bool:
    """Whether the quantizer takes the lm_head too (Lightning Fabric replaces every nn.Linear; transformers and
    torchtune keep it in bf16)."""
    _check(quantizer)
    return quantizer in QUANTIZES_LM_HEAD


def keeps_fused_experts(quantizer: str) -> bool:
    """Whether the quantizer leaves routed experts and router in the model dtype (transformers 5 stores them as fused
    ``nn.Parameter``s, which ``replace_with_bnb_linear`` does not replace; see the module docstring)."""
    _check(quantizer)
    return quantizer in KEEPS_FUSED_EXPERTS


def fused_experts_kept(spec: ModelSpec, fmt: str, quantizer: str) -> bool:
    """The one rule for the ``fused_experts`` flag of ``weight_formats.bnb_quantizes`` / ``weight_bytes`` /
    ``largest_quantized_matrix``: whether loading ``spec`` in the bitsandbytes format ``fmt`` through ``quantizer``
    leaves its routed experts and router in the model dtype (an MoE model, a bitsandbytes format, a quantizer that
    keeps fused experts: :func:`keeps_fused_experts`). Training's QLoRA base (estimate/training/setup.py
    ``qlora_fused_experts``) and serving on transformers (estimate/formats.py ``serving_fused_experts``) both ask
    it."""
    return spec.moe is not None and fmt in BNB_FORMATS and keeps_fused_experts(quantizer)


FUSED_EXPERTS_SOURCE = ("transformers 5.24.0 integrations/bitsandbytes.py line 189 (replace_with_bnb_linear: only "
                        "type(module) is nn.Linear); models/qwen3_next/modeling_qwen3_next.py lines 797-798, 835 "
                        "(fused expert and router nn.Parameters)")
# the assumption training's QLoRA base and transformers serving name (value: the dtype the experts stay in)
FUSED_EXPERTS_WHY = ("routed experts and router stay unquantized: transformers 5 stores them as fused nn.Parameters "
                     "and bitsandbytes replaces only nn.Linear (" + FUSED_EXPERTS_SOURCE + ")")


ASYNC_LOAD_SOURCE = ("transformers 5.3.0 core_model_loading.py lines 1105-1110, 1198-1199, 1210-1216; fixed by "
                     "transformers pull 44576, 5.24.0 lines 1865-1873 (formulas/nf4_quantization.py eq. 6)")
ASYNC_LOAD_WARNING = ("transformers 5.0-5.3 quantize a QLoRA base on the fly behind a 4-thread loader that can put "
                      "the whole {dtype} checkpoint, up to {bound}, on the device before the main loop quantizes it "
                      "(eq. 6); the caching allocator then keeps it reserved, so nvidia-smi and max_memory_reserved "
                      "can show that much through training. Not counted here: the step's peak is the model after loading; set HF_DEACTIVATE_ASYNC_LOAD=1 "
                      "or use transformers after 5.3 (" + ASYNC_LOAD_SOURCE + ")")


def async_load_bound_bytes(checkpoint_bytes: int, quantizer: str) -> int:
    """Eq. (6): the most the transformers 5.0-5.3 threaded loader can hold on the device while quantizing on the
    fly: every tensor of the checkpoint in its load dtype (``checkpoint_bytes``); 0 for a quantizer that is not
    transformers' (torchao, Lightning: they quantize as the model is built, eqs. 1b-3)."""
    _check(quantizer)
    return checkpoint_bytes if quantizer == "bitsandbytes" else 0


def dequant_bytes(numel: int, quantizer: str, compute: int, compute_fp16: bool = False) -> int:
    """Eq. (5): bytes of one matrix of ``numel`` elements dequantized for a GEMM in the compute dtype (``compute``
    bytes per element; ``compute_fp16``: it is fp16, so bitsandbytes 0.42's fp16 dequantized matrix needs no cast)."""
    _check(quantizer)
    if quantizer in FP16_QUANTIZED and not compute_fp16:
        return numel * (2 + compute)
    return numel * compute


def quantize_transient_bytes(numel: int, quantizer: str) -> int:
    """Eq. (1)-(3): bytes above the quantized weights while a bf16 matrix of ``numel`` elements is quantized."""
    _check(quantizer)
    n = numel
    if quantizer == "lightning-bnb-0.42":
        return 4 * n
    if quantizer in ("bitsandbytes", "bitsandbytes-0.42"):
        return 2 * n
    if quantizer == "torchao":
        return 5 * n + 64 * min(n, TORCHAO_CHUNK)
    return 68 * n

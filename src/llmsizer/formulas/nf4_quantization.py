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

For Llama-2-7B's largest matrix (11008 x 4096 = 45.1 M elements), eq. 3 is 3.07 GB, eq. 2 0.29 GB, eq. 1 0.09 GB.
The double quantization of the block scalers (n / 64 elements) is below 0.1 n and not counted.
"""

from __future__ import annotations

from ..errors import InputError
from ..specs.training import NF4_QUANTIZERS as QUANTIZERS

TORCHAO_CHUNK = 1024**2  # torchao nf4tensor.py CHUNK_SIZE (v0.2.0 line 33; 0.18 line 84)
SOURCE = ("bitsandbytes nn/modules.py Params4bit._quantize; torchao dtypes/nf4tensor.py @ v0.1 lines 394-398, 444 "
          "and @ v0.2.0 lines 33, 627-660 (formulas/nf4_quantization.py)")


def quantize_transient_bytes(numel: int, quantizer: str) -> int:
    """Eq. (1)-(3): bytes above the quantized weights while a bf16 matrix of ``numel`` elements is quantized."""
    if quantizer not in QUANTIZERS:
        raise InputError(f"unknown nf4_quantizer {quantizer!r}; choose one of: {', '.join(QUANTIZERS)}")
    n = numel
    if quantizer == "bitsandbytes":
        return 2 * n
    if quantizer == "torchao":
        return 5 * n + 64 * min(n, TORCHAO_CHUNK)
    return 68 * n

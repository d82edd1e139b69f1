"""Bytes per element of the floating-point dtypes weights, activations, gradients and states are kept in: the one
table every formula reads (IEEE 754 binary32 / binary16; bfloat16 is 16 bits, Google Brain / PyTorch
``torch.bfloat16``). Quantized formats carry their own layouts (``weight_formats.py``, ``kv_cache.py``)."""

from __future__ import annotations

from ..errors import InputError
from ..suggest import unknown_choice

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (fp32, fp16, bf16)."""
    if dtype not in DTYPE_BYTES:
        raise InputError(unknown_choice("dtype", dtype, DTYPE_BYTES))
    return DTYPE_BYTES[dtype]

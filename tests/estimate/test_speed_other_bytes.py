"""The speed reads the bytes the memory estimate holds for the tensors a quantized format leaves unquantized
(embedding, lm_head, norms). Before, estimate/speed.py sized them from its own compute dtype, fp32 on a CPU (4
bytes), while the memory estimate holds them in its dtype (bf16 by default): llama-3.1-8b gptq-int4 on a CPU, the
memory held 5.73 GB of weights and a decode step read 7.83 GB (int8: 9.08 vs 11.19 GB).

Truth: transformers 5.24 loads a quantized checkpoint's unquantized tensors in the checkpoint's dtype whatever the
device: ``from_pretrained`` defaults to ``dtype = "auto"`` (modeling_utils.py 4186-4187), which ``_get_dtype`` reads
from the config (830-831) and hands to ``hf_quantizer.update_dtype`` (883), which GPTQ (quantizer_gptq.py 75-78), AWQ
off CUDA/XPU (quantizer_awq.py 54-62) and bitsandbytes (quantizers/base.py 100-110) return unchanged; nothing casts
to fp32 on a CPU. So a decode step reads the same weight bytes on a CPU as on a GPU, and those are the bytes held."""

from __future__ import annotations

import pytest

from llmsizer import fit

MODEL = "llama-3.1-8b"  # bf16 checkpoint (config torch_dtype bfloat16)
CPU, GPU = "intel-core-i9-13900k", "h100-sxm"


def _weights(fmt: str, device: str) -> tuple[int, int, str]:
    """(memory estimate's weight bytes, the speed's weight bytes per step, the speed's compute dtype)."""
    r = fit(MODEL, device, engine="transformers", weights=fmt, memory=64 * 2**30 if device == CPU else None)
    assert r.estimate is not None and r.speed is not None and r.weights_format == fmt
    return (int(r.estimate.details["weights_bytes"]), int(r.speed.details["weights_bytes_per_device"]),
            r.speed.compute_dtype)


@pytest.mark.parametrize("fmt", ["gptq-int4", "awq-int4", "int8"])
def test_the_speed_reads_the_unquantized_tensors_the_memory_holds(fmt: str) -> None:
    held_cpu, read_cpu, dtype_cpu = _weights(fmt, CPU)
    held_gpu, read_gpu, _ = _weights(fmt, GPU)
    assert dtype_cpu == "fp32"  # the CPU's matmuls run in fp32: the case where the two sizings parted
    assert read_cpu == held_cpu
    assert read_gpu == held_gpu
    assert read_cpu == read_gpu  # loaded in the checkpoint's dtype on either device (transformers source above)

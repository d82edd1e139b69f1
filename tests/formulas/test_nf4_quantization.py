"""formulas/nf4_quantization.py against torchao's real ``to_nf4`` on the CPU (torchao 0.18.0, the test extra): the
bytes alive above the bf16 source while one matrix is quantized, read from the CPU allocator
(tests/training/measure_step.py ``AllocatorBytes``).

- 'torchao' (eq. 2): the installed code, one matrix below and one above ``CHUNK_SIZE`` (2^20 elements);
- 'torchao-0.1' (eq. 3): torchao v0.1's ``convert_to_norm_float_weight`` is the same code without the chunk loop
  and without its uint8 index buffer (nf4tensor.py @ v0.1 lines 394-398 vs @ v0.2.0 lines 627-660): the installed
  code with ``CHUNK_SIZE`` above the matrix size runs v0.1's single ``quantize_tensor_nearest`` call, plus that
  buffer (n bytes).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from tests.training.measure_step import AllocatorBytes  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.nf4_quantization import TORCHAO_CHUNK, quantize_transient_bytes  # noqa: E402


def _nf4_module():  # type: ignore[no-untyped-def]
    from torchao.quantization.quantize_.workflows.nf4 import nf4_tensor

    return nf4_tensor


def _peak_above_source(rows: int, cols: int) -> int:
    to_nf4 = _nf4_module().to_nf4
    w = torch.randn(rows, cols, dtype=torch.bfloat16)
    with AllocatorBytes() as alloc:  # the source exists before: the bytes above it
        q = to_nf4(w)
        assert q.shape == w.shape
    return alloc.peak()


@pytest.mark.parametrize("shape", [(1024, 512), (2048, 1280)])
def test_torchao_chunked_transient(shape: tuple[int, int]) -> None:
    n = shape[0] * shape[1]
    assert _nf4_module().CHUNK_SIZE == TORCHAO_CHUNK
    measured = _peak_above_source(*shape)
    assert measured == pytest.approx(quantize_transient_bytes(n, "torchao") - 2 * n, rel=0.005)


def test_torchao_0_1_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    rows, cols = 2048, 1280  # above 2^20 elements: the chunk loop of >= 0.2 would bound it
    n = rows * cols
    monkeypatch.setattr(_nf4_module(), "CHUNK_SIZE", 1 << 40)
    measured = _peak_above_source(rows, cols)
    uint8_buffer = n  # v0.2's torch.empty(numel, dtype=torch.uint8), absent from v0.1
    assert measured == pytest.approx(quantize_transient_bytes(n, "torchao-0.1") - 2 * n + uint8_buffer, rel=0.005)


def test_model_init_phase_and_reserved_floor() -> None:
    fields = dict(method="qlora", rank=8, targets="q,k,v,o,gate,up,down", precision="bf16", micro_batch=2,
                  seq_len=512, grad_checkpointing="full", optimizer="adamw")
    est = estimate_training("llama-2-7b-hf", **fields, nf4_quantizer="torchao-0.1")
    largest = 11008 * 4096  # Llama-2-7B's MLP matrices
    init = est.details["phases"]["model init"]
    assert init == est.item("weights").bytes + est.item("adapter_weights").bytes + 68 * largest
    assert est.details["peak_phase"] == "model init" and est.details["tensor_peak_bytes"] == init
    reserved = estimate_training("llama-2-7b-hf", **fields, nf4_quantizer="torchao-0.1", metric="reserved")
    assert reserved.details["tensor_peak_bytes"] + reserved.item("allocator_reserve").bytes >= init
    chunked = estimate_training("llama-2-7b-hf", **fields, nf4_quantizer="torchao")
    assert chunked.details["phases"]["model init"] == init - 68 * largest + 5 * largest + 64 * 2**20

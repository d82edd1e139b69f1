"""Unsloth's memory-bound kernels (formulas/elementwise_traffic.py eqs. E8/E9, #12). Unsloth's kernels are Triton
on CUDA, not runnable here: the test lists each cited kernel's loads and stores (unsloth @015bdef) and checks the
formula is their sum, and orders it against the PyTorch counts that test_elementwise_traffic checks against real
runs."""

from __future__ import annotations

from llmsizer.formulas.elementwise_traffic import layer_bytes


def test_unsloth_kernel_bytes_follow_their_loads_and_stores() -> None:
    """Eqs. E8/E9 as the sum of the tensors each cited Unsloth kernel loads and stores (unsloth @015bdef), listed
    here kernel by kernel for a Llama layer with LoRA on all seven projections; and the ordering against PyTorch's
    counts of the same layer: Unsloth's fused kernels move far less than eager PyTorch, a little more than inductor
    (its residual adds and addmm_ input-gradient sums are not fused)."""
    from llmsizer.formulas.elementwise_traffic import LayerWidths

    c, h, q, k, i, d = 2, 4096, 4096, 1024, 14336, 128
    w = LayerWidths(h, i, q, k, d)
    adapters = ((h, q), (h, k), (h, k), (q, h), (h, i), (h, i), (i, h))
    forward = {
        "rms_layernorm fwd x2: X, Y, fp32 r": 2 * (c * h + c * h + 4),
        "rope_embedding_QK in place: q, k read + written": 2 * c * (q + k),
        "swiglu _fg_kernel: e, g, h": 3 * c * i,
        "residual adds x2: two reads, one write": 2 * 3 * c * h,
        "matmul_lora out.addmm_: out read + written": sum(2 * c * o for _, o in adapters),
    }
    backward = {
        "rms_layernorm bwd x2: dY, X, r, dX": 2 * (3 * c * h + 4),
        "rope in place": 2 * c * (q + k),
        "swiglu _DWf_DW_dfg_kernel: DW, e, g read, three written": 6 * c * i,
        "residual-gradient sums x2": 2 * 3 * c * h,
        "dX.addmm_ of the k, v and gate base products": 3 * 2 * c * h,
        "dX.addmm_ per adapter": sum(2 * c * n for n, _ in adapters),
    }
    fwd, bwd = layer_bytes(w, c, compiled=False, norms_trained=False, adapters=adapters, unsloth=True)
    assert (fwd, bwd) == (sum(forward.values()), sum(backward.values()))
    eager = sum(layer_bytes(w, c, compiled=False, norms_trained=False, adapters=adapters))
    compiled = sum(layer_bytes(w, c, compiled=True, norms_trained=False, adapters=adapters))
    assert compiled < fwd + bwd < 0.5 * eager

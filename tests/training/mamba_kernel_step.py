"""Run by tests/training/test_mamba_kernel_saved_tensors.py in a fresh interpreter: the saved storages of each decoder
layer of the tiny models when transformers 5.24 dispatches to mamba_ssm / causal-conv1d, on the CPU.

Usage: python mamba_kernel_step.py MAMBA_SSM_SRC CAUSAL_CONV1D_SRC CASES_JSON -> JSON {case: {layer: bytes}} on stdout;
a case is [config, batch, tokens] (pure bf16), [config, batch, tokens, "autocast"] (fp32 weights, CPU bf16 autocast),
[config, batch, tokens, "fp32"] (pure fp32, no autocast) or [config, batch, tokens, "frozen"] (pure bf16, every weight
but the embedding frozen: oracle_utils.mamba_saved_by_layer).

The packages' Python code (their ``torch.autograd.Function`` forwards and the wrappers that allocate the outputs) runs
as published; what needs a GPU is stood in for: ``triton`` (every ``@triton.jit`` kernel launch does nothing, so the
Triton wrappers still allocate their outputs with their own ``torch.empty`` calls), the ``causal_conv1d_cuda`` extension
(a no-op: the wrapper's ``torch.empty_like`` output is kept) and ``selective_scan_cuda.fwd``, whose outputs are
allocated as csrc/selective_scan/selective_scan.cpp lines 300-313 (@ e9594ce) does. Values are garbage; only which
tensors ``save_for_backward`` and autograd keep, and their sizes, are read.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock


def _stub_modules() -> None:
    triton = mock.MagicMock(name="triton")
    triton.__version__ = "3.1.0"
    triton.cdiv = lambda a, b: -(-a // b)
    triton.next_power_of_2 = lambda n: 1 << max(0, (int(n) - 1).bit_length())

    class Config:  # autotune configs are read at import (layer_norm.py config_prune reads num_warps)
        def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 2, **more: Any) -> None:
            self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages

    class Kernel:  # a @triton.jit / @triton.autotune kernel: launching it (kernel[grid](...)) does nothing
        def __init__(self, fn: Any = None, configs: Any = ()) -> None:
            self.fn, self.configs = fn, list(configs)

        def __getitem__(self, grid: Any) -> Any:
            return lambda *args, **kwargs: None

    def jit(fn: Any = None, **kwargs: Any) -> Any:
        return Kernel(fn) if fn is not None else (lambda f: Kernel(f))

    def autotune(configs: Any, key: Any = None, **kwargs: Any) -> Any:
        return lambda k: Kernel(getattr(k, "fn", k), configs)

    triton.Config, triton.jit, triton.autotune = Config, jit, autotune
    triton.heuristics = lambda values: (lambda k: k)
    sys.modules["triton"] = triton
    for sub in ("language", "language.extra", "language.extra.cuda", "language.math", "runtime", "runtime.autotuner",
                "testing", "compiler"):
        sys.modules[f"triton.{sub}"] = getattr(triton, sub.split(".")[-1])
    import torch

    def scan_fwd(u: Any, delta: Any, A: Any, B: Any, C: Any, D: Any, z: Any, delta_bias: Any, softplus: Any) -> list[Any]:
        # selective_scan.cpp (mamba_fwd): out = empty_like(delta); x = empty({batch, dim, n_chunks, dstate * 2},
        # weight_type) with n_chunks = (seqlen + 2048 - 1) / 2048; out_z = empty_like(z) when z is given
        batch, dim, seqlen = u.shape
        n_chunks = (seqlen + 2048 - 1) // 2048
        out = torch.empty_like(delta)
        x = torch.empty((batch, dim, n_chunks, A.shape[1] * 2), dtype=A.dtype)
        return [out, x] + ([torch.empty_like(z)] if z is not None else [])

    torch.cuda.device = lambda index: contextlib.nullcontext()  # the wrappers' `with torch.cuda.device(x.device.index)`
    # the Functions ask the GPU's autocast state without naming a device (ssd_combined.py lines 876-879: under it,
    # MambaSplitConv1dScanCombinedFn casts out_proj's weight with .to() and saves that copy, line 883): on a GPU that
    # is CUDA's autocast; here the CPU autocast the step runs under stands for it
    enabled = torch.is_autocast_enabled
    torch.is_autocast_enabled = lambda *device: enabled(*device) if device else enabled("cpu")  # type: ignore[assignment]
    torch.get_autocast_gpu_dtype = lambda: torch.get_autocast_dtype("cpu")  # type: ignore[assignment]
    sys.modules["selective_scan_cuda"] = types.SimpleNamespace(fwd=scan_fwd)  # type: ignore[assignment]
    sys.modules["causal_conv1d_cuda"] = mock.MagicMock(name="causal_conv1d_cuda")


def _record_calls(calls: list[str]) -> None:
    """Wrap the packages' autograd Functions' forwards to record which of them ran."""
    from causal_conv1d import causal_conv1d_interface as cci
    from mamba_ssm.ops import selective_scan_interface as ssi
    from mamba_ssm.ops.triton import ssd_combined

    for fn in (ssd_combined.MambaSplitConv1dScanCombinedFn, ssi.SelectiveScanFn, cci.CausalConv1dFn):
        original = fn.forward

        def wrapped(ctx: Any, *a: Any, _name: str = fn.__name__, _original: Any = original, **kw: Any) -> Any:
            calls.append(_name)
            return _original(ctx, *a, **kw)

        fn.forward = staticmethod(wrapped)  # type: ignore[method-assign]


def main() -> None:
    mamba_src, conv_src, cases_json = sys.argv[1:4]
    sys.path[:0] = [mamba_src, conv_src, str(Path(__file__).resolve().parents[1])]  # + tests/ (oracle_utils)
    from transformers.generation import GenerateDecoderOnlyOutput  # noqa: F401  (torch inductor, imported on the
    # way by mamba_ssm.utils.generation, must not see the triton stand-in)
    _stub_modules()
    calls: list[str] = []
    _record_calls(calls)  # fails loudly if the stand-ins miss something the packages import
    from oracle_utils import mamba_saved_by_layer, torch

    out: dict[str, dict[str, Any]] = {}
    for name, (cfg, batch, tokens, *mode) in json.loads(cases_json).items():
        autocast = mode == ["autocast"]  # fp32 weights under CPU bf16 autocast; else pure bf16 or pure fp32
        dtype = torch.float32 if mode in (["autocast"], ["fp32"]) else torch.bfloat16
        layers, by_layer = mamba_saved_by_layer(cfg, batch, tokens, dtype,
                                                autocast=autocast, before=calls.clear, frozen=mode == ["frozen"])
        # the weights whose autocast copies are kept, per layer (the autocast cases' weight copies): those of two or
        # more dimensions but the Mamba-2 mixer's conv1d weight (the Function passes it to causal-conv1d as it is);
        # its out_proj weight is cast with .to() inside MambaSplitConv1dScanCombinedFn's forward and that copy saved
        # (Jamba's out_proj is a plain nn.Linear after SelectiveScanFn: autocast copies its weight too); Mamba-1's
        # 2-D A_log is no linear's weight: it enters as -exp(A_log.float()), no autocast op, no copy
        casts = {f"cast{i}": sum(p.numel() for n, p in lay.named_parameters() if p.ndim >= 2 and not (
            n.split(".")[0] in ("mixer", "mamba") and n.split(".", 1)[1] in ("conv1d.weight", "A_log")))
            for i, lay in enumerate(layers)}
        out[name] = {**{str(i): v for i, v in by_layer.items()}, "-1": sorted(set(calls)), **casts}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

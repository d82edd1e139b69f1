"""Peak bytes of live tensors, with the split by role at the peak: a TorchDispatchMode (torch imported lazily).

Every tensor an operator returns is registered by its storage (views share one storage and count once); a
weak reference to the storage drops it from the count when the storage is freed, so ``current`` is the bytes
of all live tensor storages that were created under the mode or registered with :meth:`LiveTensorBytes.track`.
On CPU this is the exact working set of tensors of the run as traced; on CUDA it is what
``torch.cuda.max_memory_allocated`` counts before the caching allocator rounds each block up to 512 bytes.
The mode itself changes one thing autograd does: every output gets a Python wrapper holding a reference, so the
engine's input-buffer sums, in place untraced when nothing else references the buffered gradient
(torch/csrc/autograd/input_buffer.cpp ``can_accumulate_inplace``, pytorch @ 4537ef6 lines 73-84, as
formulas/training_activations.py cites it), are made out of place: one more gradient-sized
tensor while such a sum runs (and a CUDA run's ``max_memory_allocated`` over a traced pass sees it too). Against the
CPU allocator's own records (tests/training/measure_step.py ``AllocatorBytes``) the step peaks of the tiny test
models agree (0 to 15 kB less here: RNG states a checkpoint keeps); a moment such as a tied fp32 embedding's
backward end under bf16 autocast reads one [V, h] gradient too many (tests/training/test_allocator_truth.py).

At a new peak the live storages are split into the groups returned by ``groups()`` (weights, KV cache,
gradients, optimizer state); the rest is activations and temporaries. To keep the cost low the split is taken
again only when the peak has grown by more than max(``resolution`` bytes, ``relative`` x peak) since the last
split (about a thousand splits for a model whose live bytes grow from 16 to 45 GB), so the split describes a moment at most
that far below the exact peak (``peak`` itself is exact).

Same idea as PyTorch's ``torch.distributed._tools.mem_tracker.MemTracker`` (which the test-suite uses as the
independent check); this one needs no module hooks, so it follows decode loops and training steps that call
the same modules many times.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

Groups = Callable[[], dict[str, Iterable[Any]]]


class LiveTensorBytes:
    def __init__(self, groups: Groups | None = None, resolution: int = 1 << 20, relative: float = 0.001) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                tracker._track_tree(out)
                return out

        self.mode = _Mode()
        self.groups = groups
        self.resolution = resolution
        self.relative = relative
        self.live: dict[int, int] = {}
        self._refs: dict[int, Any] = {}
        self.current = 0
        self.peak = 0
        self.peak_split: dict[str, int] = {}
        self._split_at = -1

    # -- registration ----------------------------------------------------------------------------------------
    def _track_tree(self, out: Any) -> None:
        import torch
        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)

    def track(self, t: Any) -> None:
        """Count ``t``'s storage (once) until it is freed."""
        if t.device.type == "meta":
            return
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse / exotic subclass without a plain storage
            return
        key = st._cdata
        nbytes = st.nbytes()
        old = self.live.get(key)
        if old is None:
            self.live[key] = nbytes
            self.current += nbytes
            self._refs[key] = weakref.ref(st, self._on_free(key))
        elif old != nbytes:  # resized in place
            self.current += nbytes - old
            self.live[key] = nbytes
        if self.current > self.peak:
            self.peak = self.current
            if self.groups is not None and self.peak - self._split_at > max(self.resolution,
                                                                             self.relative * self.peak):
                self._split()

    def track_all(self, tensors: Iterable[Any]) -> None:
        for t in tensors:
            self.track(t)

    def _on_free(self, key: int) -> Callable[[Any], None]:
        return lambda _ref: self._free(key)

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)
        self._refs.pop(key, None)

    # -- the split at the peak --------------------------------------------------------------------------------
    def _split(self) -> None:
        if self.groups is None:
            return
        out: dict[str, int] = {}
        seen: set[int] = set()
        for name, tensors in self.groups().items():
            total = 0
            for t in tensors:
                try:
                    key = t.untyped_storage()._cdata
                except (RuntimeError, NotImplementedError):
                    continue
                if key in self.live and key not in seen:
                    seen.add(key)
                    total += self.live[key]
            out[name] = total
        out["activations"] = self.current - sum(out.values())
        self.peak_split = out
        self._split_at = self.current

    def reset_peak(self) -> None:
        self.peak = self.current
        self._split_at = -1
        if self.groups is not None:
            self._split()

    def __enter__(self) -> LiveTensorBytes:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)

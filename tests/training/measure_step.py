"""Measured truth for training memory: real training steps of a small random-weight transformers model.

Run as a script in a fresh process (``python measure_step.py '<case json>'``); prints one JSON object (a JSON list
of cases prints a list of results, one per case, from one process).
Nothing here imports llmsizer: every number comes from PyTorch's own tensors.

- ``peak_bytes``: the peak of live tensor bytes over all steps (the parameters, buffers and input ids included).
  A real run (the default, ``"truth": "allocator"``) reads it from the CPU allocator (:class:`AllocatorBytes`:
  torch.profiler's allocation records, no dispatch mode, so autograd's input-buffer sums stay in place as they do
  untraced); ``peak_by_category`` is then empty. ``"truth": "tracker"`` (and every ``fake`` run, whose tensors
  the allocator never sees) follows it with :class:`LiveTensorBytes` instead, a ``TorchDispatchMode`` that
  registers the storage of every tensor an operator returns and drops it when the storage is freed (the method of
  ``torch.distributed._tools.mem_tracker.MemTracker``, which refuses models with frozen parameters, so it cannot
  follow LoRA), with the split at that peak into parameters, gradients, optimizer state and the rest. Only the
  float8 runs ask for it (test_activation_offload_float8: on a CPU ``aten::_scaled_mm`` dequantizes to fp32 inside
  the operator, temporaries CUDA's kernel does not make and the allocator would count). On the real-run cases of
  test_measured.py both agree at the step peak: the allocator reads 0 to +15,336 B more (+0.03 %: the CPU RNG state, 5,056 B, each checkpointed layer
  keeps, and the loss's 0-d tensors), never less (2026-12-02, torch 2.13.0). The dispatch mode reads more where a
  sum in place is at the moment measured (a tied fp32 embedding under bf16 autocast at the backward end:
  G - t h 4 B, tests/formulas/test_tied_embedding_grad.py). ``truth`` in the result says which measured.
- ``param_bytes`` / ``grad_bytes`` / ``optimizer_state_bytes``: counted from the real tensors (unique parameter
  storages, ``p.grad`` after the first backward, every distinct storage in ``optimizer.state``).
- ``rss_train_delta_bytes``: process peak RSS (``ru_maxrss``) minus RSS just before the first step, a
  cross-check; the caller sets ``MALLOC_MMAP_THRESHOLD_=65536 MALLOC_TRIM_THRESHOLD_=0`` so that freed tensors
  go back to the OS.
- ``fake``: the whole run under ``FakeTensorMode`` (shapes, dtypes and lifetimes without arithmetic), for a
  full-size model in seconds.
"""

from __future__ import annotations

import contextlib
import copy
import json
import resource
import sys
import threading
from typing import Any


def _status_bytes(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key}")


def _rss_bytes() -> int:
    return _status_bytes("VmRSS")


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so the training loop's peak is not the model build's
    (Linux /proc/PID/clear_refs, value 5). False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _holds_memory(storage: Any) -> bool:
    """Whether a tensor storage has memory behind it: a wrapper subclass's storage (``_make_wrapper_subclass``) is
    an "invalid python storage" whose ``data_ptr()`` raises; its ``nbytes()`` is only the wrapper's nominal size."""
    try:
        storage.data_ptr()
    except RuntimeError:
        return False
    return True


def _tensor_bytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


class LiveTensorBytes:
    """A TorchDispatchMode that follows the bytes of every live tensor storage and records the peak.

    Every tensor an operator returns is registered by its storage (views share one storage); a weak
    reference to the storage object drops it from the count when the storage is freed. At each new peak the
    live bytes are split into parameters, gradients, optimizer state and the rest (activations and
    temporaries), by asking which live storages ``classify`` attributes to which category.
    """

    def __init__(self, classify: Any) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                tracker._track_tree(out)
                return out

        self.mode = _Mode()
        self.classify = classify
        # the largest storage freed on a thread other than the one that made this tracker, since the last reset:
        # a storage a gloo worker thread held last (a collective's output) is freed when that thread lets it go,
        # a moment the process's own steps do not fix (tests/training/deepspeed_step.py)
        self._thread = threading.get_ident()
        self.off_thread_freed_max = 0
        self.live: dict[int, int] = {}
        self._refs: dict[int, Any] = {}
        self.current = 0
        self.peak = 0
        self.peak_breakdown: dict[str, int] = {}

    def _track_tree(self, out: Any) -> None:
        import torch
        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)

    def track(self, t: Any) -> None:
        import weakref

        from torch.utils._python_dispatch import is_traceable_wrapper_subclass

        if t.device.type == "meta":
            return
        st = t.untyped_storage()
        if is_traceable_wrapper_subclass(t) and not _holds_memory(st):
            # A wrapper subclass made by ``_make_wrapper_subclass`` (torchao's Float8TrainingTensor, torch's
            # AsyncCollectiveTensor around a functional collective's result) owns no memory: its untyped_storage()
            # reports numel x the wrapper's nominal dtype, bytes with no allocation behind them (its data pointer is
            # invalid); its inner tensors are the outputs of the operators that made them and are tracked there.
            return
        key = st._cdata
        nbytes = st.nbytes()
        if key in self.live:
            if self.live[key] != nbytes:  # resized in place
                self.current += nbytes - self.live[key]
                self.live[key] = nbytes
        else:
            self.live[key] = nbytes
            self.current += nbytes
            self._refs[key] = weakref.ref(st, lambda _r, key=key: self._free(key))
        if self.current > self.peak:
            self.peak = self.current
            self.peak_breakdown = self.classify(self.live)

    def _free(self, key: int) -> None:
        nbytes = self.live.pop(key, 0)
        if threading.get_ident() != self._thread:
            self.off_thread_freed_max = max(self.off_thread_freed_max, nbytes)
        self.current -= nbytes
        self._refs.pop(key, None)


class AllocatorBytes:
    """The bytes PyTorch's CPU allocator holds, followed without a dispatch mode: ``torch.profiler``'s allocation
    records (``profile_memory=True``: c10's ``ProfiledCPUMemoryReporter`` reports every allocation and free of the CPU
    allocator with its address and size), replayed in time order into a running sum after the context exits.

    Why: a ``TorchDispatchMode`` (:class:`LiveTensorBytes`) gives every tensor an operator returns a Python wrapper
    that holds a reference, so autograd's input-buffer sums, which are in place only when the buffered gradient has
    no other reference (torch/csrc/autograd/input_buffer.cpp ``can_accumulate_inplace``), become out of place under
    it: one more gradient-sized tensor at each sum (tests/training/test_allocator_truth.py). This measure leaves the
    engine as it runs untraced. It also sees what a kernel allocates inside itself and frees before returning (a
    workspace the dispatch mode never receives).

    Only blocks allocated inside the context are counted (a free of an older block is skipped, by its address):
    enter it before the tensors to count are made. ``mark()`` records a moment (a sentinel allocation of ``MARK``
    bytes, left out of the sum); ``level(i)`` is the live bytes at mark ``i``, ``peak(i)`` the highest live bytes
    from mark ``i`` on (``peak(i, j)``: up to mark ``j``; ``peak()``: over the whole context). Intra-op threads
    are set to 1 inside the context (the profiler follows the thread that entered it, which also runs a CPU
    backward). A block allocated on another thread is not seen (a 20,000 B ``torch.empty`` in a second Python
    thread reads 0 B; ``_ExperimentalConfig(profile_all_threads=True)`` records that thread's operators but no
    memory events, torch 2.13.0): gloo runs its collectives on worker threads, so the gloo-distributed step scripts
    (deepspeed_step, fsdp1_step, ring_attention_step) keep :class:`LiveTensorBytes`.
    """

    MARK = 999_983  # bytes of the sentinel allocation (a prime: no tensor in these tests has that size)

    def __enter__(self) -> AllocatorBytes:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._torch = torch
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self._prof.__enter__()
        return self

    def mark(self) -> None:
        self._torch.empty(self.MARK, dtype=self._torch.uint8)

    def __exit__(self, *exc: Any) -> None:
        from torch._C._profiler import _EventType

        self._prof.__exit__(*exc)
        self._torch.set_num_threads(self._threads)
        nodes, stack = [], list(self._prof.profiler.kineto_results.experimental_event_tree())
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.tag == _EventType.Allocation and n.extra_fields.device.type == "cpu":
                nodes.append(n)
        # time order; within one nanosecond an allocation before a free (a block is allocated before it is freed)
        nodes.sort(key=lambda n: (n.start_time_ns, n.extra_fields.alloc_size < 0))
        self.levels: list[int] = []  # live bytes after each allocation or free
        self.marks: list[int] = []  # index into levels of each mark
        self.events: list[tuple[int, int]] = []  # (address, signed size) of each counted allocation or free
        live: dict[int, int] = {}
        cur = 0
        for n in nodes:
            ptr, size = n.extra_fields.ptr, n.extra_fields.alloc_size
            if size == self.MARK:
                self.marks.append(len(self.levels))
                continue
            if size > 0:
                live[ptr] = size
                cur += size
            elif ptr in live:
                cur -= live.pop(ptr)
            else:
                continue  # a block allocated before the context (or the sentinel's free)
            self.levels.append(cur)
            self.events.append((ptr, size))

    def level(self, mark: int) -> int:
        i = self.marks[mark]
        return self.levels[i - 1] if i else 0

    def peak(self, since: int | None = None, until: int | None = None) -> int:
        """The highest live bytes over the context, or from mark ``since`` on (to mark ``until``, if given)."""
        if since is None:
            return max([0, *self.levels])
        end = None if until is None else self.marks[until]
        return max([self.level(since), *self.levels[self.marks[since]:end]])

    def fresh_peak(self, since: int) -> int:
        """The highest live bytes of the blocks allocated from mark ``since`` on (a free of an older block, e.g. a
        saved activation the backward releases, is left out): what the code after the mark makes and holds."""
        live: dict[int, int] = {}
        cur = best = 0
        for ptr, size in self.events[self.marks[since]:]:
            if size > 0:
                live[ptr] = size
                cur += size
                best = max(best, cur)
            elif ptr in live:
                cur -= live.pop(ptr)
        return best


def main(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(case.get("seed", 0))
    torch.set_num_threads(1)
    base_rss = _rss_bytes()

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[case.get("dtype", "fp32")]
    conf = transformers.AutoConfig.for_model(**copy.deepcopy(case["config"]))
    conf._attn_implementation = case.get("attn", "sdpa")
    fake: Any = contextlib.nullcontext()
    if case.get("fake"):  # shapes and lifetimes only: a full-size model in seconds (no arithmetic is done)
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake = FakeTensorMode()
    with fake, torch.device("cpu"):
        model = transformers.AutoModelForCausalLM.from_config(conf, dtype=dtype)
    model.train()
    lora = case.get("lora")
    if lora:
        import peft

        lcfg = peft.LoraConfig(r=lora["r"], lora_alpha=lora.get("alpha", 2 * lora["r"]),
                               target_modules=lora["targets"], lora_dropout=lora.get("dropout", 0.0),
                               use_dora=lora.get("dora", False), bias="none",
                               modules_to_save=lora.get("modules_to_save"))
        model = peft.get_peft_model(model, lcfg)
    if case.get("float8"):
        _float8(model)
    if case.get("grad_ckpt"):  # transformers' default is non-reentrant; "reentrant": torch's CheckpointFunction
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": bool(case.get("reentrant"))})
        if case.get("reentrant"):  # its recompute needs an input that requires grad (PEFT prepare_model_for_kbit_training)
            model.enable_input_require_grads()
    sac = case.get("sac")
    if sac is not None:
        _torchtitan_checkpointing(torch, model, sac)
    params = [p for p in model.parameters() if p.requires_grad]
    name = case.get("optimizer", "adamw")
    with fake:
        opt = _optimizer(torch, name, params, case.get("foreach", True))
    off = _offload(torch, model) if case.get("offload") else None
    out = _run(torch, case, model, opt, params, conf, fake, base_rss)
    if off is not None:
        out["offloaded_bytes_per_step"] = off.host_bytes // case.get("steps", 3)
    return out


def _torchtitan_save_ops(torch: Any) -> set[Any]:
    """torchtitan's op save set (torchtitan/distributed/activation_checkpoint.py ``_get_default_save_ops`` at
    b5bcd76, lines 31-94): the partitioner's compute-intensive ops, aten.linear, aten.max, aten.topk and the SDPA
    variants, plus ``_scaled_dot_product_flash_attention_for_cpu``, the CPU counterpart of the CUDA flash op
    (which is in the compute-intensive list), so that the CPU run keeps what the CUDA run keeps."""
    from torch._functorch.partitioners import get_default_op_list

    ops = {op.default for op in get_default_op_list().compute_intensive_ops}
    aten = torch.ops.aten
    ops |= {aten.linear.default, aten.max.default, aten.topk.default,
            aten._scaled_dot_product_attention_math.default, aten._scaled_dot_product_flash_attention_for_cpu.default}
    return ops


def torchtitan_op_policy(torch: Any) -> Any:
    """A factory of torchtitan's op-level policy (``SelectiveAC._wrap_block``, activation_checkpoint.py at b5bcd76,
    lines 214-287; ``_apply_ac_to_transformer_block`` in parallelisms/parallelize_llama.py at 9dec370, lines
    226-285): a fresh policy per checkpointed call that saves the outputs of the save ops except every second
    mm/linear (counted per call, from 1) and recomputes everything else."""
    from torch.utils.checkpoint import CheckpointPolicy

    save_ops = _torchtitan_save_ops(torch)
    mm_ops = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)

    def policy() -> Any:
        meta = {"forward_mm_count": 0, "recompute_mm_count": 0}

        def wrapped(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            key = ("recompute" if ctx.is_recompute else "forward") + "_mm_count"
            if func in mm_ops:
                meta[key] += 1
            if func in save_ops:
                if func in mm_ops and meta[key] % 2 == 0:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return wrapped

    return policy


def _torchtitan_checkpointing(torch: Any, model: Any, sac: Any) -> None:
    """Wrap the decoder layers as torchtitan does.

    ``sac == "op"``: every layer checkpointed with :func:`torchtitan_op_policy` through
    ``create_selective_checkpoint_contexts``.
    ``sac == N`` (int): torchtitan's per-layer selective option before the policy refactor (``selective_ac_option
    = "N"``, ``_apply_ac_to_transformer_block`` at 25413d2, lines 115-125): every N-th layer (counted from 1) is
    fully checkpointed, the others keep all their activations.
    """
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    policy = torchtitan_op_policy(torch)
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if sac == "op":
        kwargs["context_fn"] = lambda: create_selective_checkpoint_contexts(policy())
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if sac != "op":
        layers = model.get_decoder().layers
        for i, layer in enumerate(layers):
            layer.gradient_checkpointing = (i + 1) % int(sac) == 0


def _float8(model: Any) -> None:
    """torchao float8 training as torchtitan applies it: ``convert_to_float8_training`` on every nn.Linear except the
    output layer (torchtitan's float8 converter filters ``output``), dynamic tensorwise scaling (the default)."""
    from torchao.float8 import convert_to_float8_training

    convert_to_float8_training(model, module_filter_fn=lambda mod, fqn: fqn != "lm_head")


class OffloadActivations:
    """torchtune's ``OffloadActivations`` (torchtune/training/_activation_offloading.py at bd2a0fc, single-stream
    path) with the host copy made outside the measure: in the forward every saved tensor of at least
    ``min_offload_size`` = 1024 bytes that is not a Parameter is copied to a host buffer that neither the tracker
    nor the CPU allocator sees (a NumPy array: NumPy's own malloc, not c10's allocator; lines 152-199; autograd then
    holds only the id, so the original is freed unless a view keeps it), and the last ``max_fwd_stash_size`` = 5
    originals are kept alive as the streams path does (lines 165-172, 200-204); in the backward each tensor is
    copied back into a fresh contiguous tensor (counted; torchtune's ``.to(device)`` of its contiguous host copy)
    and freed by autograd after use (lines 213-238). ``host_bytes``: the bytes on the host at the end of the
    forward."""

    def __init__(self, torch: Any) -> None:
        import collections

        from torch.utils._python_dispatch import _disable_current_modes

        self.tracker: dict[int, tuple[Any, bool]] = {}
        self.stash: collections.deque[Any] = collections.deque(maxlen=5)
        self.host_bytes = 0
        self.next_id = 0
        hooks = self

        def pack(t: Any) -> int:
            hooks.next_id += 1
            n = t.element_size() * t.nelement()
            if n >= 1024 and not isinstance(t, torch.nn.Parameter):
                with _disable_current_modes():
                    src = t.detach()  # NumPy has no bfloat16: its bits travel as int16
                    host = (src.view(torch.int16) if src.dtype == torch.bfloat16 else src).numpy().copy()
                hooks.tracker[hooks.next_id] = ((host, t.dtype), True)
                hooks.host_bytes += n
                hooks.stash.append(t)
            else:
                hooks.tracker[hooks.next_id] = (t, False)
            return hooks.next_id

        def unpack(i: int) -> Any:
            hooks.stash.clear()  # lines 343-347: the forward stash is emptied once the backward runs
            t, moved = hooks.tracker.pop(i)
            if not moved:
                return t
            host, dtype = t
            return torch.from_numpy(host).view(dtype).clone()  # from_numpy wraps NumPy's buffer: no allocation

        self.ctx = torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def _offload(torch: Any, model: Any) -> Any:
    """Enter the offloading hooks around the decoder (embedding, layers, final norm) as torchtune's recipes do: the
    output projection runs under NoOpManager and the loss outside the context (lines 405-433)."""
    off = OffloadActivations(torch)
    body = model.get_decoder()
    body.register_forward_pre_hook(lambda *a: off.ctx.__enter__())
    body.register_forward_hook(lambda *a: off.ctx.__exit__(None, None, None), always_call=True)
    return off


def _optimizer(torch: Any, name: str, params: list[Any], foreach: bool) -> Any:
    if name == "adamw":
        opt: Any = torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    elif name == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3, foreach=foreach)
    elif name == "sgd-momentum":
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    elif name == "adafactor":
        opt = torch.optim.Adafactor(params, lr=1e-3, foreach=foreach)
    elif name == "adamw-8bit":
        import bitsandbytes as bnb

        opt = bnb.optim.AdamW8bit(params, lr=1e-4)
    else:
        raise ValueError(name)
    return opt


def _run(torch: Any, case: dict[str, Any], model: Any, opt: Any, params: list[Any], conf: Any, fake: Any,
         base_rss: int) -> dict[str, Any]:
    import time

    b, s = case["batch"], case["seq"]
    vocab = conf.get_text_config().vocab_size
    with fake:
        ids = torch.randint(0, vocab, (b, s))
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if case.get("autocast") == "bf16"
                else contextlib.nullcontext())

    seen: set[int] = set()
    param_bytes = trainable_bytes = 0
    for p in model.parameters():
        key = p.untyped_storage()._cdata
        if key in seen:
            continue
        seen.add(key)
        param_bytes += p.untyped_storage().nbytes()
        if p.requires_grad:
            trainable_bytes += p.untyped_storage().nbytes()
    buffer_bytes = sum(_tensor_bytes(x) for x in model.buffers())

    grad_bytes = state_bytes = 0
    t0 = time.time()
    peak_reset = _reset_peak_rss()
    rss_before = _rss_bytes()

    def storages(tensors: Any) -> dict[int, int]:
        return {t.untyped_storage()._cdata: t.untyped_storage().nbytes() for t in tensors}

    def classify(live: dict[int, int]) -> dict[str, int]:
        groups = {
            "parameters": storages(model.parameters()),
            "gradients": storages(p.grad for p in model.parameters() if p.grad is not None),
            "optimizer_state": storages(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)),
        }
        out = {k: sum(n for key, n in g.items() if key in live) for k, g in groups.items()}
        out["activations_and_temporaries"] = sum(live.values()) - sum(out.values())
        return out

    tracker = LiveTensorBytes(classify)
    for t in [*model.parameters(), *model.buffers(), ids]:
        tracker.track(t)
    start_bytes = tracker.current
    truth = "tracker" if case.get("fake") else case.get("truth", "allocator")
    if truth not in ("allocator", "tracker"):
        raise ValueError(f"truth {truth!r}")
    alloc = AllocatorBytes() if truth == "allocator" else None
    with fake, (alloc if alloc is not None else tracker.mode):
        for step in range(case.get("steps", 3)):
            with autocast:
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            del loss
            if step == 0:
                grad_bytes = sum(_tensor_bytes(p.grad) for p in params if p.grad is not None)
            opt.step()
            opt.zero_grad(set_to_none=True)
    state_bytes = sum(storages(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)).values())
    t1 = time.time()
    rss_peak = _status_bytes("VmHWM") if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    trainable_count = sum(p.numel() for p in params)
    peak, split = (tracker.peak, tracker.peak_breakdown) if alloc is None else (start_bytes + alloc.peak(), {})
    return {
        "peak_bytes": peak, "peak_by_category": split, "truth": truth,
        "param_bytes": param_bytes, "trainable_param_bytes": trainable_bytes, "buffer_bytes": buffer_bytes,
        "trainable_params": trainable_count, "grad_bytes": grad_bytes, "optimizer_state_bytes": state_bytes,
        "rss_delta_bytes": rss_peak - base_rss, "rss_train_delta_bytes": rss_peak - rss_before,
        "loop_secs": round(t1 - t0, 2),
    }


if __name__ == "__main__":
    arg = json.loads(sys.argv[1])
    # a list of cases runs them one after another in this process (FakeTensorMode cases: one import of torch,
    # transformers and torchao for all of them)
    print(json.dumps([main(c) for c in arg] if isinstance(arg, list) else main(arg)))

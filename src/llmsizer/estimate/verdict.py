"""Does it fit? The one rule every command uses: headroom, budget and verdict.

    budget = device memory x (1 - headroom)                                                   (1)
    llama.cpp on a GPU: budget = device memory - fit_target (bytes kept free per device)      (1')
    fits   = expected need <= budget                                                          (2)
    vLLM:  fits = sequences the KV pool admits >= sequences run at once, with gpu_memory_utilization = 1 - headroom
           (run at once: min(concurrency, max_num_seqs), estimate/inference/common.py eq. R1)                 (3)

(1)-(2): the headroom is a policy default (``DEFAULT_HEADROOM``, 10 %): memory kept free for other processes, the
allocator's fragmentation where the estimate expects none (training; the default device total of transformers
inference holds the calibrated reserve, estimate/allocator.py) and, for RAM, no swapping. It is recorded as an assumption wherever it applies,
and the verdict states that it uses the expected (middle) value of the range; when the high end does not fit a
warning says so, naming which high end: the components' ranges or, where the kind has validation rows, the
calibrated range (estimate/ranges.py via estimate/allocator.py ``calibrated_need``), whichever is higher. (3): vLLM reserves ``gpu_memory_utilization`` x memory at start-up and admits the sequences
its KV pool holds (vllm/worker/gpu_worker.py ``determine_available_memory``); its default 0.9 equals
1 - DEFAULT_HEADROOM, so the two conventions coincide when neither is given.

(1'): llama.cpp keeps its own margin, an absolute one: its ``--fit`` accepts a layout when each device's free
memory minus the projected use is at least ``--fit-target`` (ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f
common/fit.cpp:353 one device, :361 several, :650 the per-device targets ``free - margins[id]``), 1024 MiB per device
by default (common/common.h:483 ``fit_params_target``; common/arg.cpp:2896-2918 ``-fitt/--fit-target``, MiB per
device). A llama.cpp answer on a GPU takes that margin by default (``margin_rule``), so ``fit`` and ``fit --auto``
(estimate/llamacpp_fit.py) judge one layout alike; a headroom or fit_target the user gives applies to both. On a
CPU (device 'cpu', RAM) the headroom stays: the RAM also holds the system and must not swap, and llama.cpp's own
CPU-only check compares with the total, not the free, host memory (common/fit.cpp:318-326).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import InputError
from ..frozen import fast_init
from ..numbers import HEADROOM, SIZE
from ..result import Assumption
from ..specs.workload import MARGIN_CONFLICT, read_number
from ..units import MiB, compared_bytes, format_bytes

# Memory kept free on top of the estimate (allocator fragmentation, other processes, swap-free margin for RAM).
# A policy default, not a measurement: recorded as an assumption and settable (--headroom).
DEFAULT_HEADROOM = 0.10
HEADROOM_WHY = "memory kept free on each device (fragmentation, other processes, no swapping)"


def check_headroom(headroom: float | None) -> float:
    """The headroom in force: ``headroom`` validated, or DEFAULT_HEADROOM when None."""
    if headroom is None:
        return DEFAULT_HEADROOM
    # the range the command line and request files take (numbers.HEADROOM), with their words
    return float(read_number(headroom, "headroom", HEADROOM))


def headroom_assumption(headroom: float | None) -> Assumption:
    return Assumption("headroom", check_headroom(headroom), headroom is None, HEADROOM_WHY)


# llama.cpp's --fit-target default: common/common.h:483 (ggml-org/llama.cpp@0c1e57098) ``fit_params_target``,
# 1024 * 1024*1024 bytes per device; its help (common/arg.cpp:2896-2898) says "target margin per device for --fit"
LLAMACPP_FIT_TARGET = 1024 * MiB
FIT_TARGET_SOURCE = "llama.cpp --fit-target, common/common.h:483 (ggml-org/llama.cpp@0c1e57098)"
FIT_TARGET_WHY = (f"memory left free on each GPU: llama.cpp's own margin ({FIT_TARGET_SOURCE}; its --fit keeps free - "
                  "use >= it on every device, common/fit.cpp:353-361), the one margin of fit and fit --auto")
# the defaults in words, for the help texts and the pages (each engine's own)
MARGIN_DEFAULTS_TEXT = (f"{DEFAULT_HEADROOM:g}; llama.cpp on a GPU keeps its own {LLAMACPP_FIT_TARGET // MiB} MiB "
                        "per GPU instead (--fit-target)")


@fast_init
@dataclass(frozen=True)
class Margin:
    """The memory a verdict keeps free on each device: a share of it (``share``, the headroom, eq. 1) or a fixed
    amount (``fixed`` bytes, llama.cpp's --fit-target, eq. 1'). ``default``: not given by the user."""

    share: float | None
    fixed: int | None
    default: bool

    def budget(self, usable: int) -> int:
        """Eq. (1) or (1'): bytes a workload may use on a device of ``usable`` bytes."""
        if self.fixed is None:
            return memory_budget(usable, float(self.share or 0.0))
        return max(0, usable - self.fixed)

    def headroom(self, usable: int) -> float:
        """The share of ``usable`` kept free: the headroom given, or a fixed margin's share (4 decimals)."""
        if self.fixed is None:
            return float(self.share or 0.0)
        return round(min(1.0, self.fixed / usable), 4) if usable > 0 else 1.0

    def words(self, usable: int | str) -> str:
        """How the budget follows from the device memory (bytes, or its name), e.g. '24.00 GiB x (1 - 0.1 headroom)',
        '24.00 GiB - 1.00 GiB fit_target'."""
        memory = usable if isinstance(usable, str) else format_bytes(usable)
        if self.fixed is None:
            return f"{memory} x (1 - {float(self.share or 0.0):g} headroom)"
        return f"{memory} - {format_bytes(self.fixed)} fit_target"

    def assumption(self) -> Assumption:
        if self.fixed is None:
            return Assumption("headroom", self.share, self.default, HEADROOM_WHY)
        return Assumption("fit_target", format_bytes(self.fixed), self.default,
                          FIT_TARGET_WHY if self.default else
                          f"given: memory left free on each GPU, as llama.cpp --fit-target ({FIT_TARGET_SOURCE})")


def search_margin_assumption(headroom: float | None, fit_target: int | None = None) -> Assumption:
    """The margin a search over engines and devices states once (``recommend``): the headroom or llama.cpp
    ``fit_target`` given, or the default share with llama.cpp's own margin named (each option's verdict keeps its
    engine's, ``margin_rule``)."""
    if fit_target is not None:
        return margin_rule("llamacpp", "gpu", headroom, fit_target).assumption()
    if headroom is not None:
        return headroom_assumption(headroom)
    return Assumption("headroom", DEFAULT_HEADROOM, True,
                      f"{HEADROOM_WHY}; llama.cpp options on a GPU keep llama.cpp's own {LLAMACPP_FIT_TARGET // MiB} "
                      "MiB per GPU instead (--fit-target default), as fit does; each option's verdict says which")


def share_margin(headroom: float | None) -> Margin:
    """The margin of a headroom (None: DEFAULT_HEADROOM), eq. (1)."""
    return Margin(check_headroom(headroom), None, headroom is None)


def margin_rule(engine: str | None, device: str, headroom: float | None = None,
                fit_target: int | None = None) -> Margin:
    """The one rule for the memory a serving verdict keeps free on each device (module docstring): a ``headroom``
    given (a share) or a ``fit_target`` given (bytes, llama.cpp's) applies as given; none given, llama.cpp on a GPU
    keeps LLAMACPP_FIT_TARGET (eq. 1') and every other engine and device DEFAULT_HEADROOM (eq. 1). Both given is a
    conflict; a fit_target for another engine, or on a CPU (llama.cpp keeps it free on each GPU), is refused."""
    if fit_target is not None:
        if headroom is not None:
            raise InputError(MARGIN_CONFLICT)
        if engine is not None and engine != "llamacpp":
            raise InputError(f"fit_target applies to engine llamacpp, not {engine}")  # the workload's words
        if device == "cpu":  # llama.cpp's margin is per GPU (common/fit.cpp: each device's free memory)
            raise InputError("fit_target applies to a GPU (llama.cpp --fit-target keeps memory free on each GPU); "
                             "on a CPU give headroom")
        return Margin(None, int(read_number(fit_target, "fit_target", SIZE)), False)
    if headroom is None and engine == "llamacpp" and device == "gpu":
        return Margin(None, LLAMACPP_FIT_TARGET, True)
    return share_margin(headroom)


def budget_term(basis: str) -> str:
    """What a ``Verdict.budget`` is, in words (docs/nomenclature.md): eq. (1)'s "budget" (basis "expected"), or,
    under a pool engine's admission rule (eq. 3), the "device memory" the engine sizes its pool from. A pool engine's
    budget in the glossary's sense is what its pool offers the workload (``workload_budget_bytes``)."""
    return "budget" if basis == "expected" else "device memory"


def pool_budget_words(engine: str) -> str:
    """How a pool engine's budget (what its pool offers the workload, ``workload_budget_bytes``) is described."""
    return f"what {engine}'s pool offers the workload, with the CUDA context"


def memory_budget(usable: int, headroom: float) -> int:
    """Eq. (1): bytes a workload may use on a device of ``usable`` bytes."""
    return int(usable * (1 - headroom))


def vllm_pool_bytes(cuda_total: int, utilization: float) -> int:
    """Eq. (3)'s pool: the bytes vLLM reserves at start-up, gpu_memory_utilization ("the fraction of GPU memory to be
    used for the model executor", vllm 0.19.1 vllm/config/cache.py:41-48) x CUDA's total, torch.cuda.mem_get_info's
    (vllm/v1/worker/utils.py:408-410 ``request_memory``: ceil(MemorySnapshot.total_memory x gpu_memory_utilization);
    the total as estimate/device.py ``cuda_memory`` reads it, below nvidia-smi's memory.total by what the driver
    reserves). Truncated to a byte (vLLM rounds up: one byte apart at most)."""
    return int(utilization * cuda_total)


def vllm_pool_words(cuda_total: int, utilization: float) -> str:
    """``vllm_pool_bytes`` in words, as every answer says vLLM's pool: 'gpu_memory_utilization 0.90 x 79.18 GiB
    (CUDA's total) = 71.26 GiB'."""
    return (f"gpu_memory_utilization {utilization:.2f} x {format_bytes(cuda_total)} (CUDA's total) = "
            f"{format_bytes(vllm_pool_bytes(cuda_total, utilization))}")


def sglang_pool_words(mem_fraction_static: float, free_before_load: int, cuda_total: int, tp: int = 1) -> str:
    """SGLang's static share in words, of the base SGLang multiplies it by (probe33 D9: the device memory was named):
    the memory free before the weights load, torch.cuda.mem_get_info's free after the parallel groups exist (sglang
    0.5.23 python/sglang/srt/distributed/bootstrap.py:193-223 measure_pre_model_load_memory, srt/utils/common.py:427-456
    get_available_gpu_memory), so CUDA's total less the CUDA context (and NCCL's buffers with TP); the KV budget is
    that x mem_fraction_static less what is resident after loading (srt/mem_cache/kv_cache_configurator.py:2990-3039
    ``_profile_available_bytes``: free - pre_model_load_memory x (1 - mem_fraction_static)); estimate/inference/
    sglang.py sizes its pool so ('pre')."""
    less = "the CUDA context" + (" and NCCL's communicator buffers" if tp > 1 else "")
    return (f"mem_fraction_static {mem_fraction_static} x {format_bytes(free_before_load)} free before the weights "
            f"load (CUDA's total {format_bytes(cuda_total)} less {less}) = "
            f"{format_bytes(int(mem_fraction_static * free_before_load))}")


def fits_budget(need: int, usable: int, headroom: float | Margin) -> bool:
    """Eq. (2): whether an expected need [bytes per device] fits a device of ``usable`` bytes under ``headroom`` (a
    share, eq. 1, or a Margin, eq. 1 or 1'): ``memory_verdict``'s ``fits`` without its words (a search that only
    compares stages)."""
    budget = headroom.budget(usable) if isinstance(headroom, Margin) else memory_budget(usable, headroom)
    return need <= budget


@fast_init
@dataclass(frozen=True)
class Verdict:
    """The fit verdict for one device: need against budget, and why."""

    fits: bool
    need: int  # expected bytes per device
    need_high: int
    usable: int  # device memory
    headroom: float
    budget: int  # usable x (1 - headroom); vLLM: usable (its pool is utilization x usable, eq. 3)
    basis: str  # "expected" (eq. 2) or "vllm-admission" (eq. 3)
    reason: str
    warnings: tuple[str, ...] = ()
    high_basis: str = "high end"  # which high end the reason and warnings quote ("calibrated high end": ranges.py)

    @property
    def budget_left_bytes(self) -> int:
        """The budget the need leaves, budget - need [bytes]; negative when it does not fit. (Not the headroom: that
        is the share of the device kept free before the budget, ``usable - budget``.)"""
        return self.budget - self.need

    def details(self) -> dict[str, object]:
        # headroom_bytes: the deprecated name of budget_left_bytes (the same number), kept for one release
        # (docs/nomenclature.md)
        return {"fits": self.fits, "memory_budget": self.budget, "device_memory": self.usable,
                "headroom": self.headroom, "budget_left_bytes": self.budget_left_bytes,
                "headroom_bytes": self.budget_left_bytes, "verdict_basis": self.basis,
                "verdict_high": self.need_high, "verdict_high_basis": self.high_basis, "verdict": self.reason}


def decimal_memory_note(memory: int | None) -> str | None:
    """The warning of a device memory given in decimal units (a whole number of GB, 10^9 bytes: '24GB', '24 GB' in a
    request file or the web form), the classic GiB-vs-GB mistake: a card sold as '24 GB' has 24 GiB (2^30 bytes),
    and its driver (nvidia-smi, rocm-smi) reports MiB/GiB, so 24 GB sizes it 7 % (2^30/10^9 - 1) too small. Said with
    both figures and the binary size it likely meant; None for any other size (GiB, MiB, bytes not whole GB). No
    catalog device's memory is a whole number of GB (tests/consistency/test_probe7_verdict_basis.py), so only a size a
    user wrote in GB is warned."""
    if not memory or memory % 10**9:
        return None
    gb = memory // 10**9
    return (f"memory {gb} GB = {format_bytes(memory)} (GB = 10^9 bytes, GiB = 2^30); a device sold as {gb} GB "
            f"usually has {gb} GiB, which its driver reports (nvidia-smi): did you mean {gb}GiB?")


def high_end(need_high: int, calibrated: dict[str, object] | None = None) -> tuple[int, str]:
    """(the high end of a need per device [bytes], its name): the larger of the components' high end ``need_high``
    (the sum of the items' ranges) and the calibrated range's high (estimate/allocator.py ``calibrated_need``), the
    one high end a verdict quotes (eq. 2) and every surface names "high end"."""
    if calibrated is not None and int(calibrated["high"]) > need_high:  # type: ignore[call-overload]
        return int(calibrated["high"]), "calibrated high end"  # type: ignore[call-overload]
    return need_high, "high end"


def memory_verdict(need: int, need_high: int, usable: int, headroom: float | Margin,
                   calibrated: dict[str, object] | None = None) -> Verdict:
    """Eqs. (1)-(2) for an expected need and the high end of its range [bytes per device]; ``headroom`` a share
    (eq. 1) or a Margin (``margin_rule``: eq. 1 or 1'). With ``calibrated`` (the calibrated range of the need,
    estimate/allocator.py ``calibrated_need``) the high end is the larger of the components' high end and the
    calibrated high, and the reason names which one it is."""
    margin = headroom if isinstance(headroom, Margin) else Margin(headroom, None, False)
    budget, words = margin.budget(usable), margin.words(usable)
    fits = fits_budget(need, usable, margin)
    need_high, bound = high_end(need_high, calibrated)
    # each side said against the budget it is judged by (units.compared_bytes), so no rounding reverses the verdict
    need_said, high_said, budget_said = compared_bytes(need, need_high, budget)
    reason = (f"needs {need_said} per device (the expected value; {bound} {high_said}) "
              f"of a {budget_said} budget ({words})")
    warnings: tuple[str, ...] = ()
    if not fits:
        warnings = (f"does not fit: needs {need_said} ({bound} {high_said}) but the budget "
                    f"is {budget_said} ({words})",)
    elif need_high > budget:
        warnings = (f"fits at the expected {need_said} but not at the {bound} {high_said} "
                    f"of the range (budget {budget_said})",)
    return Verdict(fits, need, need_high, usable, margin.headroom(usable), budget, "expected", reason, warnings, bound)


# the engines whose verdict is eq. (3)'s pool admission (inference/compose.py ``_check_fit``): their
# ``budget_per_device`` is the device memory they size the pool from, the pool itself a share of it
POOL_ENGINES = ("vllm", "sglang")


def pool_admits(admitted: int, concurrency: int) -> bool:
    """Eq. (3)'s test: a pool engine's pool that holds ``admitted`` sequences of the context fits the ``concurrency``
    it runs at once (at least one: a pool that holds none serves nothing)."""
    return admitted >= max(concurrency, 1)


MAMBA_POOL = "MambaPool"  # SGLang's recurrent-state pool (estimate/inference/sglang.py eqs. 2b, 4b)
SWA_POOL = "SWA pool"  # SGLang's sliding-window pool sized from max_running_requests (sglang.py eq. 3s')


def binding_pool(details: dict[str, Any]) -> str | None:
    """The pool whose room binds an SGLang estimate's admitted sequences when it is the MambaPool (its
    max_mamba_cache_size // s fewer than the token pool's room: sglang.py eq. 4b, ``details["admits_bound"]``),
    else None (the token / KV pool): the one test the fit verdict (inference/compose.py), the plan's figures
    (plan/inference.py) and its text (render/plan_text.py) share."""
    return MAMBA_POOL if details.get("admits_bound") == MAMBA_POOL else None


def binding_pool_words(details: dict[str, Any]) -> str:
    """``binding_pool`` with its size, for the verdict's line: the MambaPool's state slots and slots per running
    request, the SWA pool's tokens where its room binds (sized from max_running_requests), else the token pool's
    tokens."""
    if binding_pool(details) is not None:
        return (f"{MAMBA_POOL} ({int(details['max_mamba_cache_size']):,} state slots, "
                f"{details['mamba_requests_ratio']} per running request)")
    if details.get("admits_bound") == SWA_POOL:
        return (f"{SWA_POOL} ({int(details.get('swa_pool_tokens', 0)):,} tokens, sized for max_running_requests "
                f"{details.get('running_cap')})")
    return f"token pool ({int(details.get('max_total_num_tokens', 0)):,} tokens)"


def admission_verdict(admitted: int, concurrency: int, context: int, need: int, usable: int,
                      utilization: float, *, engine: str = "vLLM", pool: str = "KV pool",
                      knob: str = "gpu_memory_utilization", requested: int | None = None,
                      bound: str | None = None, pool_words: str | None = None) -> Verdict:
    """Eq. (3): a pool engine (vLLM; SGLang with its token pool and mem_fraction_static) fits when its pool admits
    ``concurrency`` sequences of ``context`` tokens: those it runs at once (``requested`` more are asked, the others
    wait in its queue: estimate/inference/common.py eq. R1). A pool that admits no sequence serves nothing, whatever
    the engine's running cap (SGLang's default cap is tokens // 2, 0 for an empty pool: sglang.py eq. 4).
    ``bound``: which of the engine's pools admits ``admitted`` where it has several (SGLang's token pool or MambaPool,
    sglang.py eqs. 3, 4b), named in the 'does not fit' line. ``pool_words``: the pool in the engine's own words
    (vLLM's ``vllm_pool_words``: utilization x CUDA's total, the one way every answer says it), else the knob of
    ``usable``."""
    fits = pool_admits(admitted, concurrency)
    asked = ("requested" if requested is None or requested == concurrency
             else f"would run at once (its running cap) of {requested} requested")
    budget = usable  # the engine sizes its pool from the whole device (utilization x memory)
    at = "utilization" if knob == "gpu_memory_utilization" else knob
    queued = requested is not None and requested > concurrency  # its running cap runs fewer than were asked
    reason = (f"{engine} {pool} holds {admitted} sequence(s) of {context} tokens at {at} {utilization:.2f}"
              + (f"; {concurrency} {asked}" if not fits else
                 f"; it runs {concurrency} of the {requested} requested at once (its running cap), the others wait "
                 "in its queue" if queued else ""))
    warnings: tuple[str, ...] = ()
    if not fits:
        warnings = (f"does not fit: {engine}{'' if bound is None else chr(39) + 's ' + bound} admits {admitted} "
                    f"sequence(s) of {context} tokens at once, "
                    f"{concurrency} {asked} ("
                    + (pool_words or f"{knob} {utilization:.2f} of {format_bytes(usable)}") + ")",)
    basis = "vllm-admission" if engine == "vLLM" else f"{engine.lower()}-admission"
    # the headroom the pool leaves, 1 - utilization, to the digits a headroom is given in (0.1, not 1 - 0.9 in floats)
    return Verdict(fits, need, need, usable, round(1 - utilization, 9), budget, basis, reason, warnings)


# The margin kept free in host RAM wherever a host part is checked (eq. 1'' : host part + HOST_FIT_TARGET <= RAM):
# llama.cpp's --fit keeps its --fit-target margin (fit_params_target[0], 1024 MiB, common/common.h:483) of system
# memory free when the model runs on the host alone -- common/fit.cpp:317-326 (llama.cpp@0c1e57098): "will leave
# >= margin MiB of system memory" -- and checks nothing on the host beside GPUs; the same 1 GiB is kept there for
# the OS, the server process's other allocations and the page cache.
HOST_FIT_TARGET = LLAMACPP_FIT_TARGET
HOST_FIT_TARGET_WHY = ("host RAM kept free beside the host part (the OS, other processes, page cache): llama.cpp's "
                       "--fit keeps its 1024 MiB --fit-target of system memory free on a host-only run "
                       "(common/fit.cpp:317-326, common/common.h:483, llama.cpp@0c1e57098)")


def host_fit_target_assumption() -> Assumption:
    return Assumption("host_fit_target", format_bytes(HOST_FIT_TARGET), True, HOST_FIT_TARGET_WHY)


@cache
def largest_host() -> tuple[int, str]:
    """(RAM bytes, id) of the machine of the built-in catalog with the most host RAM (an instance's memory, a CPU
    device's): the most any host the catalog knows holds, the bound of a host part whose RAM was not given."""
    from ..catalog.hardware import builtin_catalog
    cat = builtin_catalog()
    sizes = [(int(i.memory.base), i.id) for i in cat.instances.values() if i.memory is not None]
    sizes += [(d.memory_bytes, d.id) for d in cat.devices.values() if d.kind == "cpu" and d.memory_bytes]
    return max(sizes)


def unchecked_host_verdict(host_bytes: int, held: str, rest: str = "with its KV cells, buffers and runtime") -> str | None:
    """llama.cpp's host part when no host RAM was given (``--host-memory``): None when some machine of the catalog
    could hold it (it is then only warned as unchecked), else the reason it fits no machine (host_memory_verdict
    against the catalog's largest host, :func:`largest_host`): before, `fit --auto --context 2147483647` answered
    FITS with 256 TiB on the host and a warning (probe13 D7)."""
    ram, ident = largest_host()
    if host_bytes + HOST_FIT_TARGET <= ram:
        return None
    return (f"host memory: needs {format_bytes(host_bytes)} on the host ({held}, {rest}), more than the largest "
            f"machine of the catalog holds ({ident}: {format_bytes(ram)} RAM less {format_bytes(HOST_FIT_TARGET)} "
            "host_fit_target); give --host-memory to check it against your RAM")


def host_memory_verdict(host_bytes: int, host_memory: int, held: str,
                        rest: str = "with its KV cells, buffers and runtime") -> str | None:
    """llama.cpp's host part against the host RAM given (``--host-memory``): None when it fits, else the reason.

    The host part is what llama.cpp keeps in host memory beside its GPUs (estimate/inference/llamacpp_split.py rules
    (3), (4) and (6)-(7): token embeddings, the layers not offloaded with ``-ngl``, the experts ``--n-cpu-moe`` keeps
    there, their KV cells and compute buffer, the host runtime). It fits when it leaves HOST_FIT_TARGET of the RAM
    free (eq. 1'', above: llama.cpp's own margin on a host-only run). ``held``: the placement's words for what the
    host holds ('token embd, layers 0-12, the experts of layers 0-3', estimate/inference/llamacpp.py ``_split_details``). The one
    check of ``fit --auto`` (estimate/llamacpp_fit.py) and of ``fit`` with the flags given (estimate/fit.py); a
    training run's host part (what offload= keeps in pinned host RAM, per machine) against an instance's RAM is
    checked by the same rule (estimate/fit.py ``training_host``), ``rest`` its words for what else is there."""
    if host_bytes + HOST_FIT_TARGET <= host_memory:
        return None
    return (f"host memory: needs {format_bytes(host_bytes)} of {format_bytes(host_memory)} RAM less "
            f"{format_bytes(HOST_FIT_TARGET)} host_fit_target (on the host: {held}, {rest})")

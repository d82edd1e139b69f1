"""InferenceWorkload: what the user wants to serve, validated up front (closed sets listed in errors)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from dataclasses import fields as dataclass_fields
from functools import cache
from itertools import combinations, compress, repeat
from operator import attrgetter, is_, is_not, itemgetter
from typing import Any

from ..errors import FieldError, InputError
from ..frozen import fast_init
from ..inputs import not_true_or_false
from ..numbers import (
    CONCURRENCY,
    COUNT,
    CPU_MOE_LAYERS,
    DEVICE_MEMORY,
    GPU_LAYERS,
    GROUP_SIZE,
    HEADROOM,
    IMAGE_TOKENS,
    IMAGES,
    LLAMACPP_GPUS,
    MEMORY_RATIO,
    SIZE,
    TOKENS,
    UTILIZATION,
    VIDEO_FRAMES,
    FieldNumberError,
    NumberError,
    Range,
    check_number,
)
from ..suggest import unknown_choice
from ..units import format_bytes, parse_bytes, parse_count, parse_image_size, parse_share, parse_tokens
from .given import tracks_given

ENGINES = ("transformers", "vllm", "llamacpp", "sglang")
# what a memory figure is compared with (estimate/allocator.py eqs. 1-3)
MEMORY_METRICS = ("allocated", "reserved", "nvidia-smi")
# Other spellings users write for an engine -> its name in ENGINES (the project calls itself "llama.cpp").
ENGINE_ALIASES = {"llama.cpp": "llamacpp", "llama-cpp": "llamacpp", "llama_cpp": "llamacpp"}
# estimate/device.py engine_rule in one line (the engine a serving workload runs on when none is named), for --help
# and the request field's description: kept beside ENGINES so every surface below and above the core quotes one text
def engine_rule_text(generic: str = "no --device") -> str:
    """The engine rule in words; ``generic``: how the text's reader names a GPU known only by its kind (infer:
    "no --device", fit: "--device gpu", models: "--fits-on gpu"), so a help names only its command's flags."""
    return ("the engine of the requested format (GGUF: llama.cpp), else vLLM on data-center GPUs and several devices, "
            f"llama.cpp on Apple, CPUs and single consumer cards, transformers on a GPU known only by its kind "
            f"({generic}); where that engine refuses the checkpoint's format on the GPU (vLLM: MXFP4 below compute "
            "capability 8.0) and llama.cpp has its GGUF counterpart, llama.cpp; an MoE model in llm.int8, which vLLM "
            "does not load: transformers")


ENGINE_RULE_TEXT = engine_rule_text()
# How each engine calls itself in prose (what a rendered sentence names).
ENGINE_NAMES = {"transformers": "transformers", "vllm": "vLLM", "llamacpp": "llama.cpp", "sglang": "SGLang"}
DEVICES = ("gpu", "cpu")
# The runtime a GPU workload runs under, which decides the fixed context its device holds beside the tensors
# (estimate/allocator.py ``device_context``): NVIDIA's CUDA, or Apple's Metal (an Apple chip named from the catalog:
# estimate/device.py ``device_fields``). A CPU (device 'cpu') has neither.
GPU_RUNTIMES = ("cuda", "metal", "rocm", "hpu", "xla")  # estimate/device.py gpu_runtime
ATTENTION_IMPLS = ("sdpa", "flash", "eager")
# the attention a serving workload runs when none is given: transformers' default attn_implementation (only
# transformers reads the setting: ENGINE_SETTINGS)
DEFAULT_ATTENTION = "sdpa"
# where a training word given to a serving question is asked instead (InferenceWorkload.ELSEWHERE: the Python API,
# the command line and the web API say these texts). Every word but three is a flag of both training commands under
# its own name (train_cmd.py / fit_cmd.py: workload_args.add_training_args); ``train`` is fit's --train, ``batch``
# (Python's spelling of the --batch flag) is micro_batch, and a LoRA fine-tune is --method lora --rank N (TRAINING_SPELLING: what a training command says to its own --lora).
TRAINING_SPELLING = {"lora": "--method lora --rank N"}
_PYTHON = "Python: llmsizer.fit_training / estimate_training"
TRAINING_ELSEWHERE = f"a training option: training is sized by `llmsizer train` or `llmsizer fit --train` ({_PYTHON})"
# a training batch word given to a serving question: serving's batch is its concurrency (the sequences at once)
BATCH_ELSEWHERE = (f"{TRAINING_ELSEWHERE}; for serving, the sequences served at once are concurrency "
                   "(--concurrency)")
_TRAIN_ELSEWHERE = f"a training option: training is sized by `llmsizer fit --train` or `llmsizer train` ({_PYTHON})"
_LORA_ELSEWHERE = (f"a training option: a LoRA fine-tune is `{TRAINING_SPELLING['lora']}` of `llmsizer train` or "
                   f"`llmsizer fit --train` ({_PYTHON} with method='lora', rank=N)")
DTYPES = ("bf16", "fp16", "fp32")
# InferenceWorkload fields that only some engines' profiles read -> those engines (one home: the workload's own
# check refuses them on another engine, and ``recommend``, whose candidates may each run another engine, asks for
# the engine up front). The llama.cpp split fields (split_mode, tensor_split, n_cpu_moe; gpus > 1) are llama.cpp's.
ENGINE_SETTINGS: dict[str, tuple[str, ...]] = {
    "n_gpu_layers": ("llamacpp",), "n_ubatch": ("llamacpp",), "kv_unified": ("llamacpp",),
    "mem_fraction_static": ("sglang",), "gpu_memory_utilization": ("vllm",), "paged_block_size": ("vllm",),
    # SGLang's recurrent-state pool of hybrid models (estimate/inference/sglang.py eq. 2b)
    "max_mamba_cache_size": ("sglang",), "mamba_full_memory_ratio": ("sglang",),
    "mamba_radix_cache_strategy": ("sglang",),  # its state slots per running request (eq. 4b)
    # SGLang's overlap scheduler off (the strategy "auto" resolves, eq. 4b's tracking slots) and its radix cache off
    # (eq. 4b's 1 slot, eq. 2b'' sized from max_running_requests): flags, unset when False
    "disable_overlap_schedule": ("sglang",), "disable_radix_cache": ("sglang",),
    "max_num_seqs": ("vllm", "sglang"), "max_num_batched_tokens": ("vllm", "sglang"),
    "split_mode": ("llamacpp",), "tensor_split": ("llamacpp",), "n_cpu_moe": ("llamacpp",),
    "engine_version": ("vllm", "sglang"),  # the releases of estimate/engines.py STEP_HOST
    # vLLM --async-scheduling: the host step overlapped on 0.10-0.13 (estimate/engines.py VLLM_ASYNC_OPT_IN); a flag
    "async_scheduling": ("vllm",),
    "fit_target": ("llamacpp",),  # llama.cpp --fit-target: bytes kept free per GPU (estimate/verdict.py eq. 1')
    # the pool engines' override of the model's window (estimate/context_window.py); a flag, unset when False
    "allow_long_context": ("vllm", "sglang"),
    # transformers' attn_implementation: the [b, heads, s, s] scores of eager (estimate/inference/hf_transformers.py);
    # vLLM, SGLang and llama.cpp pick their own attention kernels and the estimate models none of them by name
    "attention": ("transformers",),
    # llama.cpp --image-min-tokens / --image-max-tokens: its mtmd's token bounds of a dynamic-resolution model's
    # images (estimate/inference/media.py; the transformers processor of the other engines reads no such bound)
    "image_min_tokens": ("llamacpp",), "image_max_tokens": ("llamacpp",),
}
LLAMACPP_SPLIT_FIELDS = ("split_mode", "tensor_split", "n_cpu_moe")
# engine settings that are flags: unset is None or False
ENGINE_FLAGS = ("allow_long_context", "disable_overlap_schedule", "disable_radix_cache", "async_scheduling")
_ENGINE_SETTING_VALUES = attrgetter(*(n for n in ENGINE_SETTINGS if n not in LLAMACPP_SPLIT_FIELDS + ENGINE_FLAGS))


def engine_setting_given(name: str, value: object) -> bool:
    """Whether the ENGINE_SETTINGS value of ``name`` is set: not None, and for a flag (ENGINE_FLAGS) not False either
    (kv_unified False is a setting: --no-kv-unified)."""
    return value is not None and not (value is False and name in ENGINE_FLAGS)


# settings of a serving question, not ENGINE_SETTINGS fields, that one engine reads: the GPUs llama.cpp splits one
# model over (gpus above 1; the others shard with tensor_parallel), and fit's llama.cpp host part (its CPU and host
# RAM: estimate/fit.py refuses them on another engine)
OTHER_ENGINE_SETTINGS: dict[str, tuple[str, ...]] = {"gpus": ("llamacpp",), "host_device": ("llamacpp",),
                                                     "host_memory": ("llamacpp",)}
_OWNERS = {**ENGINE_SETTINGS, **OTHER_ENGINE_SETTINGS}


def setting_engines(given: Mapping[str, object] | object) -> tuple[list[str], set[str]]:
    """(the engine settings given, the engines that read every one of them): ENGINE_SETTINGS and
    OTHER_ENGINE_SETTINGS (gpus only above 1). ``given``: the fields (a mapping) or a workload (its attributes). No
    setting given: ([], set()); an empty set with settings given: no one engine reads them together."""
    read: Callable[[str], object]
    if isinstance(given, Mapping):  # a name the fields lack reads None, which is no setting: only those present
        read, names = given.get, [n for n in _OWNERS if n in given]  # looked at (the same names, in _OWNERS' order)
    else:
        read, names = (lambda n: getattr(given, n, None)), list(_OWNERS)
    gpus = read("gpus")
    named = [n for n in names if (engine_setting_given(n, read(n)) if n != "gpus"
                                  else isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 1)]
    if not named:
        return [], set()
    return named, set(_OWNERS[named[0]]).intersection(*(_OWNERS[n] for n in named[1:]))


def implied_engine(given: Mapping[str, object] | object) -> tuple[str, str] | None:
    """(engine, why) the engine settings given imply when no engine is named: the one engine that reads every
    setting given (ENGINE_SETTINGS and OTHER_ENGINE_SETTINGS; gpus only above 1), so
    ``tensor_split`` alone means llama.cpp, ``attention`` transformers. ``given``: the fields (a mapping) or a
    workload (its attributes). None when no setting is given, or when more than one engine reads them all
    (``max_num_seqs``: vLLM or SGLang; the device's rule then chooses where its engine reads them, and
    ``refuse_default_not_reading`` asks for the engine where it does not). Settings no one engine reads together (``tensor_split`` and ``gpu_memory_utilization``) are refused,
    naming both (FieldError: the CLI and the web say the flags, a request file its keys). The one rule infer, fit, recommend, the
    Python API, request files and the web apply (estimate/device.py ``engine_rule`` asks it first)."""
    named, engines = setting_engines(given)
    if not named:
        return None
    owners_of = _OWNERS
    if not engines:  # the first two settings no engine reads together, named
        first, other = next(((a, b) for a, b in combinations(named, 2) if not set(owners_of[a]) & set(owners_of[b])),
                            (named[0], named[-1]))
        whose = {n: " or ".join(owners_of[n]) for n in (first, other)}
        raise FieldError(first, also=(other,), message=(
            f"{first} applies to engine {whose[first]} and {other} to engine {whose[other]}: no engine reads both; "
            "give the settings of one engine"))
    if len(engines) > 1:
        return None
    eng = engines.pop()
    shown = ", ".join(named)
    one = len(named) == 1
    return eng, (f"implied by {shown}: {'a ' if one else ''}{ENGINE_NAMES[eng]} setting{'' if one else 's'} (the one engine that reads "
                 f"{'it' if one else 'them'}; no engine given)")


def refuse_default_not_reading(engine: str, given: Mapping[str, object] | object, where: str,
                               runs_here: Callable[[str], bool] = lambda _: True) -> None:
    """Refuse (FieldError naming the settings and ``engine``, exit 2) settings several engines read
    (``max_num_seqs``: vLLM or SGLang, so ``implied_engine`` names none) when the engine chosen for them by default
    (``engine``: the device's rule, estimate/device.py ``engine_rule``, for ``where``) reads none of them: which
    of the readers was meant is the user's to say, not a default's. The default is kept where it reads them
    (``max_num_seqs`` on a data-center GPU: vLLM, stated as the default). ``runs_here``: whether an engine runs on
    the device (estimate/device.py ``engine_runs_on``); where none of the readers does (vLLM and SGLang on a CPU),
    the line says so and asks to drop the settings, not for an engine the device then refuses."""
    named, engines = setting_engines(given)
    if not named or not engines or engine in engines:
        return
    readers = [e for e in _OWNERS[named[0]] if e in engines]
    shown = ", ".join(named)
    one = len(named) == 1
    what = f"{shown} {'is a' if one else 'are'} {' or '.join(ENGINE_NAMES[e] for e in readers)} setting{'' if one else 's'}"
    it = "it" if one else "them"
    if not any(map(runs_here, readers)):
        raise FieldError(named[0], also=tuple(named[1:]), message=(
            f"{what}, and no engine that reads {it} runs on {where} (the default there is {ENGINE_NAMES[engine]}): "
            f"drop {it}"))
    raise FieldError(named[0], also=(*named[1:], "engine"), message=(
        f"{what}, and with no engine given the default on {where} is {ENGINE_NAMES[engine]}, which does not read "
        f"{it}: give " + " or ".join(f"engine {e}" for e in readers if runs_here(e))))


# SGLang --mamba-radix-cache-strategy past its "auto" (SGLang 0.5.23 arg_groups/fields/exec_.py:512-519): a hybrid
# model's MambaPool slots per running request (estimate/inference/sglang.py eq. 4b)
MAMBA_RADIX_CACHE_STRATEGIES = ("no_buffer", "extra_buffer", "extra_buffer_lazy")
SPLIT_MODES = ("none", "layer", "row")  # llama.cpp -sm (common/arg.cpp:2807-2829; "tensor" is experimental, not modelled)


# a release as the engines tag them (PEP 440's public version, the subset the engines use): major.minor[.patch[.hotfix]]
# and an optional pre/post/dev suffix (0.8.5.post1, 0.7.0rc1, 0.6.4.dev0; vLLM's hotfix tag v0.10.1.1, whose rules
# are its patch release's); ASCII digits only, at most 32 characters
_ENGINE_VERSION = re.compile(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6})(?:\.\d{1,6})?)?(?:[.-]?(?:post|rc|dev|a|b)\d{0,6})?",
                             re.ASCII)


def parse_engine_version(version: str) -> tuple[int, int]:
    """(major, minor) of an engine release as written: '0.19', '0.19.1', 'v0.8.5.post1', '0.10.1.1'; InputError
    naming the field for anything else (a number, 'latest', '0.5e3'). The syntax only: which rule a release follows is
    estimate/engines.py ``step_host``'s (the one home of the rule)."""
    if not isinstance(version, str):
        raise InputError(f"engine_version must be a release such as '0.19' or '0.19.1' (text), got {version!r}")
    text = version.strip().lower()
    m = _ENGINE_VERSION.fullmatch(text) if len(text) <= 32 else None
    if m is None:
        raise InputError(f"engine_version must look like 0.19 or 0.19.1, got {version!r}")
    return int(m.group(1)), int(m.group(2))


def engine_version_patch(version: str) -> int:
    """The patch number of an engine release as written ('0.11.1' and '0.10.1.1' -> 1; '0.11' and '0.11.0' -> 0), for
    the rules that changed inside a minor release (estimate/engines.py ``release_patch``); the syntax is checked as above."""
    parse_engine_version(version)
    m = _ENGINE_VERSION.fullmatch(version.strip().lower())
    return int(m.group(3) or 0) if m is not None else 0


# headroom and fit_target both given (estimate/verdict.py margin_rule; the workload refuses it up front)
MARGIN_CONFLICT = ("give headroom or fit_target, not both: each is the memory kept free on each device (a share, or "
                   "bytes as llama.cpp's --fit-target)")


def check_fit_target(fit_target: int | None, memory: int | None) -> None:
    """llama.cpp's --fit-target is kept free on each GPU (estimate/verdict.py eq. 1': budget = memory - fit_target):
    one not below the GPU's ``memory`` leaves nothing to place, so it is refused in one line naming both, not
    clamped to a 0 B budget. The one check of the workload (infer, fit, plan) and of fit --auto (each GPU's free)."""
    if fit_target is not None and memory is not None and fit_target >= memory:
        raise FieldError("fit_target", f"fit_target {format_bytes(fit_target)} is not less than the GPU memory "
                                        f"{format_bytes(memory)}: it is the memory kept free on each GPU (llama.cpp "
                                        f"--fit-target), which would leave none to use; give less than "
                                        f"{format_bytes(memory)}")


def check_pool_shares(engine: str | None, headroom: float | None, gpu_memory_utilization: float | None) -> None:
    """vLLM's pool is 1 - headroom of the memory (gpu_memory_utilization): both given is a conflict, refused
    (estimate/inference/compose.py once the engine is chosen; recommend up front, before any option is tried)."""
    if engine == "vllm" and headroom is not None and gpu_memory_utilization is not None:
        raise InputError("give headroom or gpu_memory_utilization, not both: vLLM's pool is 1 - headroom of the "
                         "memory")


def normalize_engine(name: str) -> str:
    """The ENGINES name for ``name`` (case-insensitive, aliases such as 'llama.cpp' accepted); other text is
    returned as written, for the caller's validation to reject with the list of engines."""
    key = name.strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    return key if key in ENGINES else name


DEFAULT_OUTPUT_TOKENS = 256  # generated tokens per sequence when none are given (capped at half the context)
# tokens generated per sequence, the one bound of the CLI's --output-tokens, the request's traffic.output and
# InferenceWorkload.output_tokens: 0 is a prefill-only workload (embeddings, scoring, reranking: no decode step)
OUTPUT_TOKENS = Range(0, 2**31, True, "tokens generated per sequence; 0 = prefill only (embeddings, scoring)")


def default_output_tokens(context: int) -> int:
    """Tokens generated per sequence of ``context`` tokens when none are given: min(256, context / 2), the one
    default (memory, speed, fit, plan, the web calculator); 0 given is prefill only (``OUTPUT_TOKENS``)."""
    return min(DEFAULT_OUTPUT_TOKENS, context // 2)


def prompt_and_output(context: int, output_tokens: int | None) -> tuple[int, int]:
    """(prompt tokens, output tokens) of a sequence of ``context`` tokens: output_tokens when given, else
    ``default_output_tokens``; the prompt at least one token and the two summing to ``context`` (an output of the
    whole context leaves one prompt token and one output token fewer). The one split of memory (an encoder-decoder's
    source and target, a decoder's prompt), speed (fit's TTFT and decode) and plans."""
    prompt = max(1, context - (output_tokens if output_tokens is not None else default_output_tokens(context)))
    return prompt, context - prompt


# how a workload field given as text is read: the CLI flag's and the request field's reader (units.py), so Python's
# memory="24GiB", context="128K", headroom="10%" are the numbers --memory 24GiB, --context 128K, --headroom 10% are;
# every other numeric field is a count (parse_count: "32k", "8")
TEXT_READERS: dict[str, Callable[[str, str, Range], float | int]] = {
    **dict.fromkeys(("memory", "cuda_memory", "fit_target", "free", "host_memory"),
                    lambda t, n, r: parse_bytes(t, what=n, rng=r)),
    **dict.fromkeys(("context", "output_tokens", "max_num_batched_tokens", "n_ubatch", "seq_len", "target_len",
                     "doc_len"),
                    lambda t, n, r: parse_tokens(t, what=n, rng=r)),
    **dict.fromkeys(("headroom", "gpu_memory_utilization", "mem_fraction_static"), lambda t, n, r: _share(t, n, r)),
}


def _share(text: str, name: str, rng: Range) -> float:
    try:
        return parse_share(text, rng)
    except InputError as e:  # parse_share's message has no field name (argparse and the request reader add it)
        raise NumberError(f"{name}: {e}") from None


def read_number(value: object, name: str, rng: Range) -> float | int:
    """``value`` of the numeric field ``name`` in ``rng``: a number as it is, text through the field's reader
    (:data:`TEXT_READERS`, else ``parse_count``); a one-line InputError naming the field otherwise."""
    if isinstance(value, str):
        reader = TEXT_READERS.get(name)
        return reader(value, name, rng) if reader is not None else parse_count(value, what=name, rng=rng)
    return check_number(value, name, rng)


def read_field(value: object, name: str, rng: Range) -> float | int:
    """:func:`read_number` of a named field or argument, its error a FieldError naming ``name`` (FieldNumberError):
    the CLI and the web write it as the flag the user gave. The entry check of the workloads' numeric fields
    (:func:`check_numbers`) and of the public formulas' arguments (``kv_cache(spec, tokens, sequences)``)."""
    try:
        return read_number(value, name, rng)
    except NumberError as e:
        raise FieldNumberError(name, str(e)) from None


@cache
def _defaults(cls: type) -> dict[str, Any]:
    """The dataclass ``cls``'s field defaults (those it has)."""
    return {f.name: f.default for f in dataclass_fields(cls) if f.default is not MISSING}


def _refuse_none(workload: object, names: list[str]) -> None:
    """A field given None whose default is a value (``context=None``: the default is 4096): refused naming it (before,
    a TypeError '<=' deep in a formula, probe13 D6); a field whose default is None takes None as "the default"."""
    defaults = _defaults(type(workload))  # type: ignore[arg-type]
    for name in names:
        if name in defaults and defaults[name] is not None:
            raise FieldError(name, f"{name}: None is not a value; leave it out for the default, {defaults[name]!r}")


def check_numbers(workload: object, fields: tuple[tuple[str, Range], ...]) -> None:
    """Each named numeric field of a workload (None: not given) through the one number check (numbers.py): a Python
    caller's ``context="8k"`` or ``memory="24GiB"`` is read as the CLI's flags and request files read it
    (:func:`read_number`); ``concurrency=2.5``, NaN or unreadable text gets one line naming the field and the allowed
    range, instead of a TypeError deep in a formula."""
    values = list(map(getattr, repeat(workload), map(itemgetter(0), fields)))
    if None in values:
        _refuse_none(workload, [name for (name, _), v in zip(fields, values, strict=True) if v is None])
    # only the fields given a value (None: not given) reach the Python loop; a frozen dataclass's fields are stored
    # in its instance dict (frozen.fast_init does the same), written there directly
    for (name, rng), value in compress(zip(fields, values, strict=True), map(is_not, values, repeat(None))):
        workload.__dict__[name] = read_field(value, name, rng)  # named as a field: written as the flag given


def check_memory_target(memory: int | None, headroom: float | None, metric: str | None) -> None:
    """The memory a workload is sized against, as both workloads take it: ``memory`` bytes per device (positive),
    ``headroom`` the share kept free (numbers.HEADROOM, checked with the workload's other numbers by
    ``check_numbers`` before this) and ``metric`` the figure compared (MEMORY_METRICS)."""
    if memory is not None and memory <= 0:
        raise InputError(f"memory must be positive, got {memory}")
    if metric is not None and metric not in MEMORY_METRICS:
        raise InputError(unknown_choice("metric", metric, MEMORY_METRICS))


# engines whose serving splits a replica's decoder layers over pipeline stages (vLLM --pipeline-parallel-size,
# SGLang --pp-size); llama.cpp splits layers over one machine's GPUs its own way (gpus, split_mode) and transformers'
# serving has no pipeline stages
PIPELINE_ENGINES = ("vllm", "sglang")


# SGLang 0.5.23 runs on no TPU (the PyPI wheel: srt/arg_groups/fields/device.py lines 24-27, --device 'cuda', 'xpu',
# 'hpu', 'npu', 'cpu', 'musa'; srt/platforms/ has cuda, rocm, cpu, xpu, musa, npu, mps and sail platforms and no TPU
# one -- PlatformEnum.TPU, platforms/device_mixin.py line 54, is left to an out-of-tree plugin found by entry points,
# platforms/__init__.py lines 111-140 -- and its one TPU method refuses, layers/quantization/unquant.py lines 1462-1463),
# so it is refused on a TPU with or without pipeline stages; vLLM 0.19.1 hands a TPU to tpu-inference
# (vllm/platforms/tpu.py lines 9-15), whose 0.19.0 release runs pipeline stages (platforms/tpu_platform.py lines
# 253-262: MultiprocExecutor on one host, Ray across hosts); ROCm and Gaudi take the engines' own PP path, which
# neither refuses there
SGLANG_NO_TPU = ("SGLang 0.5.23 srt/arg_groups/fields/device.py lines 24-27: --device cuda, xpu, hpu, npu, cpu or "
                 "musa; srt/platforms/ has no TPU platform")
SGLANG_TPU_REFUSAL = f"engine sglang: SGLang has no TPU backend ({SGLANG_NO_TPU}); vLLM serves TPUs (tpu-inference): use engine vllm"


def refuse_sglang_tpu(engine: str | None, gpu_runtime: str | None) -> None:
    """One line (:data:`SGLANG_TPU_REFUSAL`) where SGLang meets a TPU (``gpu_runtime`` 'xla'): the workload's check
    and estimate/device.py ``check_engine_on_device`` (a named device) say the same."""
    if engine == "sglang" and gpu_runtime == "xla":
        raise FieldError("engine", SGLANG_TPU_REFUSAL)


def refuse_pipeline_engine(engine: str | None, device: str | None, gpu_runtime: str | None = None) -> None:
    """One line where pipeline_parallel > 1 meets an engine or device that does not take it (None: not decided):
    llama.cpp and transformers, a CPU, SGLang on a TPU (:func:`refuse_sglang_tpu`: SGLang is refused there with or
    without stages)."""
    if engine is not None and engine not in PIPELINE_ENGINES:
        raise FieldError("pipeline_parallel", also=("engine",), message=(
            f"pipeline_parallel applies to vLLM (--pipeline-parallel-size) and SGLang (--pp-size), not {engine}"
            + (": llama.cpp splits layers over one machine's GPUs itself (gpus N, split_mode layer)"
               if engine == "llamacpp" else "")))
    if device == "cpu":
        raise FieldError("pipeline_parallel", "pipeline_parallel applies to GPUs (vLLM, SGLang), not device cpu")
    refuse_sglang_tpu(engine, gpu_runtime)


# The first vLLM release with --async-scheduling, and the first whose explicit flag takes pipeline stages: vLLM
# 0.10.0-0.11.0 stop at start with both (engine/arg_utils.py 0.10.0:1144-1146, 0.11.0:1295-1297 "Async scheduling is
# not supported with pipeline-parallel-size > 1"), 0.14.1 too (config/vllm.py:562-568); 0.15.1's check has no
# pipeline condition left (config/vllm.py:568-588), nor 0.19.1's (:731-753).
VLLM_ASYNC_SCHEDULING_SINCE = (0, 10)
VLLM_ASYNC_WITH_PP_SINCE = (0, 15)


DATA_PARALLEL_ENGINES = ("vllm", "sglang")


def refuse_data_parallel(w: InferenceWorkload) -> None:
    """One line where data_parallel > 1 or expert_parallel meets what does not take it: an engine other than vLLM
    and SGLang (their flags: vLLM --data-parallel-size / --enable-expert-parallel, SGLang --attn-dp-size /
    --ep-size), a CPU, or pipeline stages (not modelled together); the model (an MoE for expert_parallel) is the
    estimate's check (estimate/inference/compose.py)."""
    if not isinstance(w.expert_parallel, bool):
        raise InputError(f"expert_parallel: {not_true_or_false(w.expert_parallel)}")
    named = [n for n, v in (("data_parallel", w.data_parallel > 1), ("expert_parallel", w.expert_parallel)) if v]
    if not named:
        return
    if w.engine is not None and w.engine not in DATA_PARALLEL_ENGINES:
        raise FieldError(named[0], also=(*named[1:], "engine"), message=(
            f"{' and '.join(named)} appl{'y' if len(named) > 1 else 'ies'} to vLLM (--data-parallel-size, "
            f"--enable-expert-parallel) and SGLang (--attn-dp-size, --ep-size), not {w.engine}"))
    if w.device == "cpu":
        raise FieldError(named[0], f"{named[0]} applies to GPUs (vLLM, SGLang), not device cpu")
    if w.pipeline_parallel > 1:
        raise FieldError(named[0], also=("pipeline_parallel",), message=(
            f"{named[0]} with pipeline_parallel {w.pipeline_parallel}: data / expert parallelism over pipeline "
            "stages is not modelled; give one of them"))


def refuse_async_scheduling(engine: str | None, version: str | None, pipeline_parallel: int = 1) -> None:
    """One line where ``async_scheduling`` (vLLM's --async-scheduling) meets a release without the flag (< 0.10) or
    pipeline stages on a release that stops at them (0.10-0.14); the engine is the workload's check
    (ENGINE_SETTINGS: vLLM's only)."""
    if engine != "vllm" or version is None:  # None: the current release (estimate/engines.py CURRENT_VERSION), >= 0.15
        return
    v = parse_engine_version(version)
    if v < VLLM_ASYNC_SCHEDULING_SINCE:
        raise FieldError("async_scheduling", also=("engine_version",), message=(
            f"async_scheduling: vLLM {version} has no --async-scheduling: vLLM 0.10.0 added it (vllm/config.py:2358, "
            "engine/arg_utils.py:821; 0.9.2 has none); give engine_version 0.10 or later, or drop async_scheduling"))
    why = async_pipeline_refusal(engine, version) if pipeline_parallel > 1 else None
    if why is not None:
        raise FieldError("async_scheduling", also=("pipeline_parallel", "engine_version"),
                         message=f"async_scheduling: {why}: drop one")


def async_pipeline_refusal(engine: str | None, version: str | None) -> str | None:
    """Why ``engine`` at ``version`` runs no pipeline stages with async_scheduling (vLLM 0.10-0.14), in the words of
    ``refuse_async_scheduling`` and of fit's line on the pipeline layouts it leaves out; None where it runs them."""
    if engine != "vllm" or version is None or parse_engine_version(version) >= VLLM_ASYNC_WITH_PP_SINCE:
        return None
    return (f"vLLM {version} stops at start with --async-scheduling and pipeline_parallel above 1 (0.11.0 "
            "engine/arg_utils.py:1295-1297, 0.14.1 config/vllm.py:562-568: \"Async scheduling is not supported with "
            "pipeline-parallel-size > 1\"; 0.15.1 takes both)")


# the numeric fields of InferenceWorkload and their ranges (the CLI flags' and request fields' ranges)
INFERENCE_NUMBERS: tuple[tuple[str, Range], ...] = (
    ("context", TOKENS), ("concurrency", CONCURRENCY), ("output_tokens", OUTPUT_TOKENS), ("memory", DEVICE_MEMORY),
    ("cuda_memory", DEVICE_MEMORY), ("headroom", HEADROOM), ("gpu_memory_utilization", UTILIZATION),
    ("mem_fraction_static", UTILIZATION), ("group_size", GROUP_SIZE), ("paged_block_size", COUNT),
    ("max_num_seqs", CONCURRENCY), ("max_num_batched_tokens", TOKENS),
    ("n_gpu_layers", GPU_LAYERS), ("n_ubatch", TOKENS), ("tensor_parallel", COUNT), ("pipeline_parallel", COUNT),
    ("data_parallel", COUNT), ("gpus", LLAMACPP_GPUS),
    ("n_cpu_moe", CPU_MOE_LAYERS), ("fit_target", SIZE), ("max_mamba_cache_size", COUNT),
    ("mamba_full_memory_ratio", MEMORY_RATIO), ("gpu_capability", COUNT), ("image_min_tokens", IMAGE_TOKENS),
    ("image_max_tokens", IMAGE_TOKENS))


@tracks_given
@fast_init
@dataclass(frozen=True)
class InferenceWorkload:
    """A serving workload.

    context: tokens each sequence holds at the end (prompt + output) [tokens].
    concurrency: sequences served at once [sequences].
    output_tokens: tokens generated per sequence (part of ``context``); None: ``default_output_tokens(context)``,
        min(256, context / 2), the one default of every estimate, plan and page; 0: prefill only (``OUTPUT_TOKENS``).
    weights: weight format (see ``llmsizer formats``); None: the checkpoint's stored format.
    kv_dtype: KV cache dtype; None: the engine default.
    memory: device memory [bytes] (GPU memory, or RAM for device='cpu'); None: not checked.
    cuda_memory: the total CUDA reports for the device [bytes] (cudaMemGetInfo's total, torch.cuda.mem_get_info()[1]:
        nvidia-smi's memory.total less what the driver reserves), which vLLM's pool (gpu_memory_utilization x it) and
        SGLang's pre-load free memory are read from; set from the catalog for a named device of a sourced figure
        (estimate/device.py ``cuda_memory``); None: ``memory`` is taken as it.
    headroom: share of ``memory`` kept free (estimate/verdict.py eq. 1); None: the engine's own margin
        (estimate/verdict.py ``margin_rule``): llama.cpp on a GPU LLAMACPP_FIT_TARGET bytes (eq. 1'), vLLM
        1 - gpu_memory_utilization, the others DEFAULT_HEADROOM.
    max_mamba_cache_size: SGLang --max-mamba-cache-size, the request slots of a hybrid model's recurrent-state pool
        (MambaPool); stated, it replaces the mamba_full_memory_ratio split (estimate/inference/sglang.py eq. 2b);
        SGLang only, models with recurrent layers only; None: SGLang's split.
    mamba_full_memory_ratio: SGLang --mamba-full-memory-ratio r: the MambaPool gets r / (1 + r) of the memory left
        after the weights (eq. 2b); SGLang only, models with recurrent layers only; None: SGLang's 0.9.
    mamba_radix_cache_strategy: SGLang --mamba-radix-cache-strategy (no_buffer | extra_buffer | extra_buffer_lazy):
        the MambaPool slots each running request holds, 3, 5 or 4 (estimate/inference/sglang.py eq. 4b); SGLang
        only, models with recurrent layers only; None: SGLang's "auto" (extra_buffer for Qwen3-Next, Nemotron-H,
        Falcon-H1 and Granite-4.0-H with its default overlap scheduler, else no_buffer).
    disable_overlap_schedule: SGLang --disable-overlap-schedule: its overlap scheduler off, so "auto" gives the four
        families above no_buffer (3 slots) and an extra_buffer holds 4 (eq. 4b); SGLang only. False by default.
    disable_radix_cache: SGLang --disable-radix-cache: no prefix cache; a hybrid model's running requests hold 1
        MambaPool slot each, and with max_num_seqs given the MambaPool is max_num_seqs slots (eq. 2b'');
        SGLang only. False by default.
    async_scheduling: vLLM --async-scheduling: the engine schedules step n + 1 while the device runs step n, so a
        decode step takes max(device, host) (formulas/speed.py eq. 14; estimate/engines.py VLLM_ASYNC_OPT_IN); an
        opt-in on vLLM 0.10-0.13, the default from 0.14 (nothing changes there); refused before 0.10 and with
        pipeline_parallel above 1 before 0.15 (``refuse_async_scheduling``). vLLM only. False by default.
    fit_target: bytes of ``memory`` kept free on each GPU instead of a headroom, as llama.cpp's --fit-target
        (estimate/verdict.py eq. 1'); llama.cpp only; None: ``margin_rule``'s default.
    images: images in each sequence's prompt [images]; their tokens (formulas/vision_tokens.py) add to ``context``.
    image_size: (width, height) of each image [pixels]; None: the vision encoder's own input size.
    video_frames: sampled frames of one video in each sequence's prompt [frames]; 0: no video.
    video_size: (width, height) of each frame [pixels]; None: the vision encoder's own input size.
    pan_and_scan: Gemma 3's processor also crops wide and tall images (do_pan_and_scan); off, as by default.
    image_min_tokens, image_max_tokens: llama.cpp --image-min-tokens / --image-max-tokens, the bounds of merged
        tokens per image (and video frame) of a dynamic-resolution model (Qwen2/2.5/3-VL) in its mtmd preprocessing
        (formulas/vision_tokens.py); llama.cpp only, with images or video; None: the model's own (8 .. 4096).
    kv_unified: llama.cpp's KV layout for several sequences: True one buffer shared by all (-kvu), False one stream
        per sequence (-no-kvu); None: llama-server's with -np N (estimate/engines.py LLAMACPP_KV_UNIFIED).
    engine: the serving engine (ENGINES); None: the default for the device, chosen by the estimate
        (estimate/device.py ``engine_rule``, the rule fit, recommend and plan use) and recorded as an assumption.
    engine_version: the release of ``engine`` (vllm, sglang), e.g. '0.10.1'; None: the current release
        (estimate/engines.py ``CURRENT_VERSION``). It picks the engine's host work per decode step
        (estimate/engines.py ``step_host``), read by the speed estimate; the memory profile is the current release's.
    identical_sequences: every sequence carries the same tokens (benchmarks such as llama-batched-bench feed token 0
        to all); changes which MoE experts a decode step reads (formulas/speed.py eqs. 5, 11), not the memory.
        False (a server's distinct prompts) by default.
    allow_long_context: the pool engine (vLLM, SGLang) is started with its override of the model's window
        (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1), so a context past the
        window is estimated with a warning instead of refused (estimate/context_window.py); llama.cpp and
        transformers refuse none and need no override. False by default.
    gpu_capability: the CUDA GPU's compute capability (major x 10 + minor: 80 on an A100, 90 on an H100), set from
        the named device (estimate/device.py ``inference_device_fields``); None where not known or not a CUDA GPU.
        What reads it: vLLM's fp32 router gate off Hopper and Blackwell (formulas/weight_formats.py
        ``vllm_gate_fp32``: Nemotron-H), sized as on Hopper when None on a CUDA GPU.
    given: the names of the fields the caller passed (set by the constructor, specs/given.py).
    """

    # the command line's and the web API's spellings of fields named otherwise here (specs/given.py: a Python
    # caller who writes one is told the field's name)
    # (a class attribute, not a field: unannotated)
    OTHER_NAMES = {"tp": "tensor_parallel", "pp": "pipeline_parallel", "ubatch": "n_ubatch",
                   "block_size": "paged_block_size",
                   "ngl": "n_gpu_layers", "max_running_requests": "max_num_seqs",
                   "precision": "dtype"}  # a request file's inference job says precision (request/fields.py)
    # training's words: a Python caller sizing a fine-tune through fit / estimate_inference is sent to training's
    # entry points (specs/given.py)
    # (cli/main.py says the same to a serving command's `--method lora` -- infer, fit and recommend without --train --
    # and so the web API to a field ``method``)
    ELSEWHERE = {**dict.fromkeys(("method", "optimizer", "seq_len", "grad_checkpointing", "grad_accumulation", "rank",
                                  "zero"), TRAINING_ELSEWHERE),
                 # train's --batch is micro_batch: the command line reads it as micro_batch, Python as itself
                 **dict.fromkeys(("micro_batch", "batch"), BATCH_ELSEWHERE),
                 "train": _TRAIN_ELSEWHERE, "lora": _LORA_ELSEWHERE}
    context: int = 4096
    concurrency: int = 1
    output_tokens: int | None = None
    weights: str | None = None
    kv_dtype: str | None = None
    device: str = "gpu"
    gpu_runtime: str = "cuda"  # GPU_RUNTIMES: 'metal' on an Apple chip (estimate/device.py device_fields)
    engine: str | None = None  # None: the default for the device (estimate/device.py engine_rule)
    engine_version: str | None = None  # vllm/sglang release (estimate/engines.py step_host); None: the current one
    memory: int | None = None
    cuda_memory: int | None = None  # CUDA's total for the device (docstring); None: memory
    headroom: float | None = None
    fit_target: int | None = None  # llama.cpp --fit-target: bytes kept free per GPU (estimate/verdict.py eq. 1')
    metric: str | None = None  # 'allocated' | 'reserved' | 'nvidia-smi' (estimate/allocator.py); None: device total
    attention: str | None = None  # transformers' attn_implementation (ENGINE_SETTINGS); None: DEFAULT_ATTENTION
    dtype: str | None = None  # compute dtype for activations and unquantized tensors: bf16 | fp16 | fp32
    group_size: int = 128  # GPTQ/AWQ group when none is stated: formulas/weight_formats.py GROUP_SIZE_DEFAULT
    paged_block_size: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None  # SGLang --mem-fraction-static; None: SGLang's default for the GPU
    # SGLang --max-mamba-cache-size: request slots of a hybrid model's recurrent-state pool (replaces the ratio's
    # split); None: SGLang's, from mamba_full_memory_ratio (estimate/inference/sglang.py eq. 2b)
    max_mamba_cache_size: int | None = None
    # SGLang --mamba-full-memory-ratio r: the state pool gets r / (1 + r) of the memory after the weights; None: 0.9
    mamba_full_memory_ratio: float | None = None
    # SGLang --mamba-radix-cache-strategy: MambaPool slots per running request (eq. 4b); None: SGLang's "auto"
    mamba_radix_cache_strategy: str | None = None
    disable_overlap_schedule: bool = False  # SGLang --disable-overlap-schedule (eq. 4b's strategy and slots)
    disable_radix_cache: bool = False  # SGLang --disable-radix-cache (eq. 4b: 1 slot; eq. 2b'')
    async_scheduling: bool = False  # vLLM --async-scheduling (estimate/engines.py step_host: the host step overlapped)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    n_gpu_layers: int | None = None
    n_ubatch: int | None = None
    kv_unified: bool | None = None  # llama.cpp -kvu / -no-kvu: one KV buffer for all sequences; None: llama-server's
    identical_sequences: bool = False  # every sequence carries the same tokens (a benchmark); MoE routing at decode
    # vLLM / SGLang started with the env var that lets them run past the model's window (estimate/context_window.py)
    allow_long_context: bool = False
    tensor_parallel: int = 1  # devices one model replica is sharded over (Megatron-style TP); memory is per device
    # pipeline stages one replica's decoder layers are split over (vLLM --pipeline-parallel-size, SGLang --pp-size),
    # each stage tensor_parallel devices: a replica takes tensor_parallel x pipeline_parallel devices; memory is the
    # worst stage's (estimate/inference/pipeline.py)
    pipeline_parallel: int = 1
    # data-parallel engine ranks of one replica (vLLM --data-parallel-size, SGLang --attn-dp-size), each running its
    # own batch over tensor_parallel devices: a replica takes data_parallel x tensor_parallel devices; an MoE model's
    # routed experts are split over all of them (formulas/serving_expert_parallel.py eqs. EP1-EP3)
    data_parallel: int = 1
    # vLLM --enable-expert-parallel (SGLang --ep-size data_parallel x tensor_parallel): the routed experts whole on
    # each device, split over data_parallel x tensor_parallel devices, rather than each expert tensor-parallel
    expert_parallel: bool = False
    gpus: int = 1  # llama.cpp: GPUs one model is split over (layer or row split); memory is per GPU
    split_mode: str | None = None  # llama.cpp -sm: none | layer | row; None: layer
    tensor_split: tuple[float, ...] | None = None  # llama.cpp -ts proportions per GPU; None: by free memory
    n_cpu_moe: int | None = None  # llama.cpp --n-cpu-moe: experts of the first N layers in host memory
    images: int = 0
    image_size: tuple[int, int] | None = None
    video_frames: int = 0
    video_size: tuple[int, int] | None = None
    pan_and_scan: bool = False
    image_min_tokens: int | None = None  # llama.cpp --image-min-tokens; None: the model's own bound
    image_max_tokens: int | None = None  # llama.cpp --image-max-tokens; None: the model's own bound
    gpu_capability: int | None = None  # estimate/device.py inference_device_fields
    # the fields the caller gave (specs/given.py): what the assumptions mark as given rather than "(default)"
    given: frozenset[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_numbers(self, INFERENCE_NUMBERS)  # a string, NaN or 2.5 sequences: one line naming the field
        if isinstance(self.engine, str):
            object.__setattr__(self, "engine", normalize_engine(self.engine))
        if self.engine_version is not None:
            parse_engine_version(self.engine_version)
        if self.context <= 0:
            raise InputError(f"context must be a positive number of tokens, got {self.context}")
        if self.concurrency <= 0:
            raise InputError(f"concurrency must be a positive number of sequences, got {self.concurrency}")
        if self.output_tokens is not None and not 0 <= self.output_tokens <= self.context:
            raise FieldError("output_tokens", f"output_tokens must be between 0 and context ({self.context}), got "
                             f"{self.output_tokens}")
        if self.attention == "flex":
            raise FieldError("attention", "attention 'flex' (torch FlexAttention, torchtune's packed path) is a "
                             "training choice, sized for training only (`llmsizer train`, `llmsizer fit --train`); "
                             f"serving takes {', '.join(ATTENTION_IMPLS[:-1])} or {ATTENTION_IMPLS[-1]}")
        for name, value, allowed in (("engine", self.engine, ENGINES), ("device", self.device, DEVICES),
                                     ("attention", self.attention, ATTENTION_IMPLS),
                                     ("gpu_runtime", self.gpu_runtime, GPU_RUNTIMES)):
            if value not in allowed and not (name in ("engine", "attention") and value is None):
                raise InputError(unknown_choice(name, value, allowed))
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InputError(unknown_choice("dtype", self.dtype, DTYPES))
        check_memory_target(self.memory, self.headroom, self.metric)
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise FieldError("gpu_memory_utilization",
                             f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static <= 1:
            raise FieldError("mem_fraction_static", f"mem_fraction_static must be in (0, 1], got {self.mem_fraction_static}")
        for name in ("paged_block_size", "max_num_seqs", "max_num_batched_tokens", "n_ubatch", "group_size",
                     "tensor_parallel", "pipeline_parallel", "data_parallel"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise FieldError(name, f"{name} must be positive, got {v}")
        object.__setattr__(self, "images", check_number(self.images, "images", IMAGES))
        object.__setattr__(self, "video_frames", check_number(self.video_frames, "video_frames", VIDEO_FRAMES))
        for name in ("image_size", "video_size"):
            v = getattr(self, name)
            if v is not None:  # the one reader the CLI, web and request files use: (w, h), [w, h] or "WxH"
                if not isinstance(v, (tuple, list, str)):
                    raise InputError(f"{name} must be (width, height) in pixels or 'WIDTHxHEIGHT', got {v!r}")
                object.__setattr__(self, name, parse_image_size(v, what=name))
        if self.image_size is not None and not self.images:
            raise FieldError("image_size", "image_size is given but images is 0; give the number of images per sequence")
        if not isinstance(self.pan_and_scan, bool):
            raise InputError(f"pan_and_scan: {not_true_or_false(self.pan_and_scan)}")
        if self.pan_and_scan and not self.images:
            raise FieldError("pan_and_scan", "pan_and_scan is set but images is 0; give the number of images per sequence")
        if self.image_min_tokens is not None and self.image_max_tokens is not None and \
                self.image_min_tokens > self.image_max_tokens:
            # llama.cpp refuses to load the projector then (tools/mtmd/clip.cpp L2057-2059 @ 0c1e5709)
            raise FieldError("image_min_tokens", also=("image_max_tokens",), message=(
                f"image_min_tokens ({self.image_min_tokens}) is above image_max_tokens ({self.image_max_tokens}): "
                "llama.cpp refuses that (image_max_pixels is less than image_min_pixels)"))
        if self.video_size is not None and not self.video_frames:
            raise FieldError("video_size", "video_size is given but video_frames is 0; give the sampled frames per video")
        if self.n_gpu_layers is not None and self.n_gpu_layers < 0:
            raise FieldError("n_gpu_layers", f"n_gpu_layers must not be negative, got {self.n_gpu_layers}")
        if self.gpus <= 0:
            raise FieldError("gpus", f"gpus must be positive, got {self.gpus}")
        if self.n_cpu_moe is not None and self.n_cpu_moe < 0:
            raise FieldError("n_cpu_moe", f"n_cpu_moe must not be negative, got {self.n_cpu_moe}")
        if self.mamba_radix_cache_strategy is not None and \
                self.mamba_radix_cache_strategy not in MAMBA_RADIX_CACHE_STRATEGIES:
            raise FieldError("mamba_radix_cache_strategy", unknown_choice(
                "mamba_radix_cache_strategy", self.mamba_radix_cache_strategy, MAMBA_RADIX_CACHE_STRATEGIES))
        if self.split_mode is not None and self.split_mode not in SPLIT_MODES:
            raise FieldError("split_mode", unknown_choice("split_mode", self.split_mode, SPLIT_MODES))
        if self.tensor_split is not None:
            if isinstance(self.tensor_split, (str, bytes)) or not hasattr(self.tensor_split, "__iter__"):
                # the command line's "3,1" is one proportion per GPU here, as a tuple (a string would be its characters)
                raise FieldError("tensor_split", f"tensor_split: expected one proportion per GPU, e.g. (3, 1) (the "
                                 f"command line's -ts 3,1), got {self.tensor_split!r}")
            # proportions of any scale (fit passes free bytes), so no range here: the command line's is SPLIT_SHARE
            bad = next((x for x in self.tensor_split if isinstance(x, bool) or not isinstance(x, (int, float))), None)
            if bad is not None:
                raise FieldError("tensor_split", f"tensor_split: expected a number per GPU, got {bad!r}")
            ts = tuple(float(x) for x in self.tensor_split)
            if not ts or any(not x >= 0 or x == float("inf") for x in ts) or not sum(ts) > 0:
                raise FieldError("tensor_split", f"tensor_split: expected non-negative proportions with a positive "
                                 f"sum, got {list(ts)}")
            object.__setattr__(self, "tensor_split", ts)
        llamacpp_only = [name for name, v in (("gpus", self.gpus > 1), ("split_mode", self.split_mode),
                                              ("tensor_split", self.tensor_split), ("n_cpu_moe", self.n_cpu_moe))
                         if v not in (None, False)]
        if self.kv_unified is not None and not isinstance(self.kv_unified, bool):
            raise InputError(f"kv_unified: {not_true_or_false(self.kv_unified)}")
        if not isinstance(self.identical_sequences, bool):
            raise InputError(f"identical_sequences: {not_true_or_false(self.identical_sequences)}")
        for flag in ENGINE_FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise InputError(f"{flag}: {not_true_or_false(getattr(self, flag))}")
        # (the loop only when an engine is named and one of its settings is given: every value read at once, in C)
        settings = () if self.engine is None or (all(map(is_, _ENGINE_SETTING_VALUES(self), repeat(None)))
                                                 and not (self.allow_long_context or self.disable_overlap_schedule
                                                          or self.disable_radix_cache or self.async_scheduling)) \
            else ENGINE_SETTINGS.items()
        for name, owners in settings:
            if name in LLAMACPP_SPLIT_FIELDS:
                continue  # refused below with the split's own message
            if engine_setting_given(name, getattr(self, name)) and self.engine not in owners:  # read by these
                # profiles only: refused, not ignored (engine None: checked once the estimate has chosen it)
                raise FieldError(name, f"{name} applies to engine {' or '.join(owners)}, not {self.engine}")
        if self.headroom is not None and self.fit_target is not None:  # two margins for one device: refused
            raise InputError(MARGIN_CONFLICT)
        if self.device != "cpu":  # (on a CPU fit_target is refused as such: estimate/verdict.py margin_rule)
            check_fit_target(self.fit_target, self.memory)
        if self.max_mamba_cache_size is not None and self.mamba_full_memory_ratio is not None:
            # SGLang reads the ratio only when no size is stated (kv_cache_configurator.py:3303-3386): refused, not
            # ignored
            raise FieldError("mamba_full_memory_ratio", also=("max_mamba_cache_size",), message=(
                "mamba_full_memory_ratio is not read when max_mamba_cache_size is given (SGLang then sizes the "
                "recurrent-state pool from max_mamba_cache_size alone); give one of them"))
        if self.disable_radix_cache and self.mamba_radix_cache_strategy is not None:
            # without the radix cache SGLang reads no strategy (arg_groups/overrides.py:473-474,
            # model_override_base.py:260-265, kv_cache_configurator.py:3063-3064): refused, not ignored
            raise FieldError("mamba_radix_cache_strategy", also=("disable_radix_cache",), message=(
                "mamba_radix_cache_strategy is not read when disable_radix_cache is given (SGLang then keeps 1 "
                "recurrent-state slot per running request and no radix-cache buffer); give one of them"))
        if self.disable_radix_cache and self.max_num_seqs is not None and self.mamba_full_memory_ratio is not None \
                and self.max_mamba_cache_size is None:
            # SGLang sizes the MambaPool from max_running_requests then, not from the ratio
            # (kv_cache_configurator.py:3325-3335): refused, not ignored
            raise FieldError("mamba_full_memory_ratio", also=("disable_radix_cache", "max_num_seqs"), message=(
                "mamba_full_memory_ratio is not read when disable_radix_cache and max_num_seqs are given (SGLang then "
                "sizes the recurrent-state pool as max_num_seqs slots); drop one of them"))
        if self.headroom is not None and self.engine == "sglang":  # its pool takes a fraction of the memory: no
            raise InputError("headroom does not apply to engine sglang: its token pool takes mem_fraction_static of "
                             "the memory; give mem_fraction_static instead")  # margin to keep free (refused, not ignored)
        if llamacpp_only and self.engine is not None and self.engine != "llamacpp":
            verb = "apply" if len(llamacpp_only) > 1 else "applies"
            raise FieldError(llamacpp_only[0], also=tuple(llamacpp_only[1:]),
                             message=f"{', '.join(llamacpp_only)} {verb} to engine llamacpp; {self.engine} "
                             "shards a model with tensor_parallel (--tp N; `fit --count N` places it over N devices)")
        refuse_sglang_tpu(self.engine, self.gpu_runtime)
        if self.async_scheduling:
            refuse_async_scheduling(self.engine, self.engine_version, self.pipeline_parallel)
        if self.pipeline_parallel > 1:
            refuse_pipeline_engine(self.engine, self.device, self.gpu_runtime)
        refuse_data_parallel(self)
        offload = [name for name, v in (("gpus", self.gpus > 1), ("split_mode", self.split_mode),
                                        ("tensor_split", self.tensor_split), ("n_cpu_moe", self.n_cpu_moe),
                                        ("n_gpu_layers", bool(self.n_gpu_layers))) if v not in (None, False)]
        if offload and self.device == "cpu":  # were ignored (exit 0, the CPU answer) or refused with a wrong hint
            raise FieldError(offload[0], also=tuple(offload[1:]),
                             message=f"{', '.join(offload)} appl{'ies' if len(offload) == 1 else 'y'} to GPU "
                             "offload; on device cpu every tensor is in host memory (use device gpu)")

    def without_memory(self) -> InferenceWorkload:
        """``dataclasses.replace(self, memory=None)`` (``given`` kept) without running ``__post_init__`` again: no
        check there reads ``memory`` but its own range, and every normalisation it made is kept as made, so the
        copy is the one replace builds, field by field with the same types (tests/consistency/test_fast_copies.py);
        an estimate composes a budget-independent breakdown from it for every memory size it is asked about."""
        new = object.__new__(InferenceWorkload)
        new.__dict__.update(self.__dict__, memory=None)
        return new

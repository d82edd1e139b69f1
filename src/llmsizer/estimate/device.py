"""What a workload's device means, the one home of the rules every command shares for it:

- ``--device NAME`` (``infer``, ``train``, ``fit``, the web API's ``device`` field, the Python API's ``device=``): a
  catalog device or instance, or ``cpu``/``gpu`` for a device known only by its kind (``catalog/hardware.py``
  ``GENERIC_DEVICES``): ``resolve_target``, ``workload_on_device``;
- where the tensors live on it (``workload_device_kind``) and the memory a workload may use (``usable_memory``,
  ``target_memory``: the catalog's, a CPU instance's RAM, Apple's Metal working set);
- the engine a serving workload runs on when none is named (``engine_rule``): ``fit``, ``infer``, ``recommend``,
  ``plan`` and ``estimate_inference`` all ask it, so one question gets one engine everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..catalog.hardware import GENERIC_DEVICES, Device, Instance, load_catalog, names_detected
from ..errors import DeviceCannotRunError, FieldError, InputError, UnknownNameError
from ..formulas.float8_training import TE_MXFP8, mxfp8_supported
from ..formulas.network import nccl_nvlink_share
from ..formulas.weight_formats import VLLM_FP32_GATE, normalize_format
from ..inputs import short
from ..numbers import DEVICE_MEMORY
from ..result import Assumption, Notes
from ..specs import ModelSpec, TrainingWorkload
from ..specs.workload import implied_engine, read_number, refuse_default_not_reading, refuse_sglang_tpu
from ..units import format_bytes
from . import efficiency as E
from .formats import (
    bnb_moe_refused,
    engine_refuses,
    file_kernel_format,
    gguf_stand_in,
    requested_format,
    runs_on_llamacpp_instead,
)
from .model_warnings import SERVING_ENGINE, SERVING_ENGINE_WHY, engine_lacks

# what a form names as the default engine (InferenceWorkload.engine None: engine_rule's for the device)
ENGINE_DEFAULT_NAME = "by device"
def engine_rule(device: Device, count: int, weights: str | None, spec: ModelSpec | None,
                settings: Mapping[str, Any] | object) -> tuple[str, str]:
    """The engine the settings given imply (``settings``: the fields given, or a workload; specs/workload.py
    ``implied_engine``: ``tensor_split`` is llama.cpp's, ``attention`` transformers'), stated as such; else
    ``_device_engine_rule``'s engine unless it refuses the requested format on this GPU (``engine_refuses``: vLLM
    gates MXFP4 at compute capability 8.0, AWQ/FP8 at 7.5): then the next engine that runs it there, llama.cpp,
    when the checkpoint (``spec``, no format named) has a GGUF counterpart (gpt-oss MXFP4 -> MXFP4_MOE), with the
    refusal in the reason, and without one (an FP8, GPTQ or AWQ checkpoint: ``gguf_stand_in``) llama.cpp on its
    default GGUF quant where llama.cpp runs that on this GPU; an MoE model in llm.int8, which vLLM and SGLang do not load (``bnb_moe_refused``), runs on
    transformers. A format named (``weights``) is the user's: the first choice stays and ``check_engine_runs``
    says why it cannot run (exit 2). Every argument is required: ``spec`` is the model being served (None only where there is
    none, e.g. a hardware question with no model), so no caller can skip the fallback by leaving it out. An
    encoder-decoder (T5) is served on transformers, the one engine it is modelled on (model_warnings.refuse_serving).
    """
    implied = implied_engine(settings)
    if implied is not None:  # a setting only one engine reads: the user chose that engine by giving it
        return implied
    eng, why = _default_engine_rule(device, count, weights, spec)
    # settings several engines read (max_num_seqs: vLLM or SGLang) that the default does not: refused, naming them
    refuse_default_not_reading(eng, settings, device.id, lambda e: engine_runs_on(e, device))
    return eng, why


def _default_engine_rule(device: Device, count: int, weights: str | None,
                         spec: ModelSpec | None) -> tuple[str, str]:
    """``engine_rule``'s choice when the settings imply no engine: :func:`_format_engine_rule`'s, unless the
    model's family is one that engine's modelled release does not serve at all (model_warnings.ENGINE_LACKS_MODEL:
    Llama-3.2-Vision's mllama on llama.cpp and vLLM); then the next engine that serves the model and runs the
    format on this device (vLLM on a GPU that runs it, else transformers: ``engine_refuses``), the reason naming why.
    A GGUF format, which only llama.cpp runs, keeps llama.cpp: ``refuse_engine`` then says why it cannot serve the
    model (exit 2)."""
    eng, why = _format_engine_rule(device, count, weights, spec)
    lacks = engine_lacks(spec, eng) if spec is not None else None
    if lacks is None or spec is None:
        return eng, why
    fmt = requested_format(spec, weights)
    for nxt in ("vllm", "transformers"):
        if nxt == eng or engine_lacks(spec, nxt) is not None or \
                nxt != "transformers" and not engine_runs_on(nxt, device):
            continue
        if fmt is not None and (fmt.startswith("gguf:") or engine_refuses(nxt, fmt, device, spec) is not None):
            continue
        return nxt, f"{why}, but {lacks}: {nxt}, the next engine that serves it there"
    return eng, why


def _format_engine_rule(device: Device, count: int, weights: str | None,
                        spec: ModelSpec | None) -> tuple[str, str]:
    """:func:`_default_engine_rule`'s choice by the device, the format and the checkpoint."""
    if spec is not None and spec.encoder_decoder is not None:
        return SERVING_ENGINE, SERVING_ENGINE_WHY
    fw = spec.file_weights if spec is not None else None
    if weights is None and fw is not None and fw.gguf:
        # a .gguf file is the GGUF format requested: the engine of that format, as for --weights q4_k_m (on
        # transformers it would be dequantized on load, formats.engine_weights, not the file's bytes)
        return "llamacpp", "a GGUF file runs on llama.cpp"
    if weights is None and spec is not None and fw is not None:
        # a safetensors folder: the rule reads its stored format (quantization_config / torch_dtype) as it reads the
        # same format named with --weights, so a folder and the catalog model with that format get one engine
        return _folder_engine_rule(device, count, file_kernel_format(spec)[0])
    eng, why = _device_engine_rule(device, count, weights)
    fmt = requested_format(spec, weights)
    refused = engine_refuses(eng, fmt, device, spec) if fmt is not None else None
    if refused is None:
        return eng, why
    if bnb_moe_refused(eng, fmt or "", spec) is not None:  # transformers loads bitsandbytes MoE models in 8-bit
        return "transformers", f"{refused}, so transformers, the engine that loads it"
    gguf = runs_on_llamacpp_instead(spec, weights)
    if gguf is not None:
        return "llamacpp", f"{refused}, so llama.cpp, the next engine that runs {fmt} there (as {gguf})"
    # no counterpart: llama.cpp's default for the checkpoint, its ladder's first rung (formats.gguf_stand_in), where
    # llama.cpp runs it on this GPU; a format named is the user's and stays refused (check_engine_runs, exit 2)
    stand_in = gguf_stand_in(spec) if spec is not None and weights is None else None
    if stand_in is None or engine_refuses("llamacpp", stand_in[0], device, spec) is not None:
        return eng, why
    return "llamacpp", (f"{refused}, so llama.cpp, the next engine that runs the model there (as "
                        f"{stand_in[0].removeprefix('gguf:').upper()}, llama.cpp's default for it: {stand_in[1]})")


def _folder_engine_rule(device: Device, count: int, fmt: str) -> tuple[str, str]:
    """``_device_engine_rule``'s engine for a safetensors folder stored in ``fmt``, the format read as if named with
    ``--weights``; where that is llama.cpp, which loads GGUF files only (``formats.engine_weights`` refuses a folder
    there), the next engine that loads the folder: vLLM on a GPU, transformers on CPUs and Apple."""
    eng, why = _device_engine_rule(device, count, fmt)
    if eng != "llamacpp":
        return eng, f"{why} (the folder's stored format)"
    nxt = "vllm" if engine_runs_on("vllm", device) else "transformers"
    return nxt, (f"{why}, but llama.cpp loads GGUF files, not a safetensors folder: "
                 f"{'vLLM' if nxt == 'vllm' else 'transformers'}, the next engine that loads it")


def _device_engine_rule(device: Device, count: int, weights: str | None) -> tuple[str, str]:
    """(engine, why) a serving workload on ``count`` x ``device`` runs on when none is named: the one that runs the
    requested weight format (GGUF: llama.cpp; GPTQ/AWQ/FP8/bitsandbytes: vLLM on GPUs, transformers on CPUs and
    Apple); otherwise vLLM on data-center accelerators and any replica over several devices, llama.cpp on Apple,
    CPUs and one consumer card (where GGUF formats are the usual way to fit). One GPU known only by its kind
    (``gpu``, or no device named) or a hardware file's GPU without ``form_factor`` (``unknown``: not guessed from its
    memory, which does not tell a 24 GB L4 from a 32 GB RTX 5090) gives the rule nothing to choose by: transformers,
    the reference implementation, and the reason says so."""
    fmt = normalize_format(weights) if weights else None
    quantized = fmt is not None and fmt not in ("fp32", "fp16", "bf16")
    if fmt is not None and fmt.startswith("gguf:"):
        return "llamacpp", f"{fmt} weights run on llama.cpp"
    if device.kind in ("apple", "cpu"):
        where = "Apple" if device.kind == "apple" else "CPUs"
        if quantized:
            return "transformers", f"{fmt} weights run in transformers on {where} (vLLM and SGLang model GPUs)"
        return "llamacpp", f"llama.cpp on {where}"
    if device.form_factor == "datacenter" and device.origin != "generic":
        return "vllm", "vLLM on data-center accelerators"
    if count > 1:
        return "vllm", f"vLLM for a replica over {count} devices"
    if quantized:
        return "vllm", f"{fmt} weights run on vLLM on GPUs"
    if device.origin == "generic":
        return "transformers", ("a GPU known only by its kind has no form factor to choose vLLM (data centre) or "
                                "llama.cpp (consumer card) by; transformers, the reference implementation")
    if device.form_factor == "unknown":  # a hardware file's device without form_factor (catalog/hardware.py)
        return "transformers", (f"{device.id}'s form factor is not given (no form_factor in its hardware file), so "
                                "neither vLLM (data-centre card) nor llama.cpp (one consumer card) is chosen by it; "
                                "transformers, the reference implementation (give form_factor: datacenter, desktop or "
                                "laptop to choose)")
    return "llamacpp", "llama.cpp on one consumer card (GGUF formats are the usual way to fit)"


def engine_runs_on(engine: str, device: Device) -> bool:
    """Whether ``engine`` runs on ``device``: a GPU-serving engine (vLLM, SGLang: CUDA/ROCm servers) not on a CPU
    or Apple silicon, and SGLang on no TPU (specs/workload.py ``SGLANG_NO_TPU``); the one rule of
    ``check_engine_on_device`` and of ``engine_rule``'s refusal."""
    return not (engine in ("vllm", "sglang") and device.kind in ("cpu", "apple")
                or engine == "sglang" and gpu_runtime(device) == "xla")


def check_engine_on_device(engine: str, device: Device) -> None:
    """Refuse (InputError, exit 2) an engine that does not run on ``device`` (``engine_runs_on``): the one check
    ``fit``, ``infer --device``, the web API and ``estimate_inference`` apply."""
    refuse_sglang_tpu(engine, gpu_runtime(device))
    if not engine_runs_on(engine, device):
        where = f"device {device.kind}" if device.origin == "generic" else f"{device.id} ({device.kind})"
        raise InputError(f"the {engine} profile models GPU serving, not {where}: use engine llamacpp or transformers")


def default_engine(device: Device, count: int, weights: str | None, spec: ModelSpec | None,
                   settings: Mapping[str, Any] | object) -> str:
    """The engine of ``engine_rule``."""
    return engine_rule(device, count, weights, spec, settings)[0]


def engine_assumption(engine: str | None, device: Device, count: int, weights: str | None, target: str | None,
                      spec: ModelSpec | None, settings: Mapping[str, Any] | object) -> tuple[str, Assumption]:
    """(engine, its assumption): ``engine`` when given, else ``engine_rule``'s for ``spec``'s checkpoint and the
    ``settings`` given, recorded as the default for ``target`` (the device or instance named; ``count`` x it for
    several), or as the engine those settings imply (``engine=llamacpp: tensor_split is llama.cpp's ...``)."""
    if engine is not None:
        return engine, Assumption("engine", engine, False, "given")
    implied = implied_engine(settings)
    if implied is not None:
        return implied[0], Assumption("engine", implied[0], True, implied[1])
    eng, why = engine_rule(device, count, weights, spec, settings)
    where = target or device.id
    where = f"{count} x {where}" if count > 1 and target is None else where
    return eng, Assumption("engine", eng, True, f"default for {where}: {why}")


# On an Apple chip llama.cpp's CPU part (-ngl below all layers, --n-cpu-moe) runs on the chip's own CPU cores, which
# read the same unified memory as its GPU (ggml's CPU backend on the host buffers; no copy over a link): the chip is its
# own host. Its CPU cores' share of the chip's memory bandwidth is not stated for every chip (no source gives it per
# configuration), so the chip's whole bandwidth is used, named as an assumption and said in a warning (an upper
# bound: the decode of the host part is at least this slow). The one rule fit, fit --auto and the search read.
APPLE_OWN_HOST_WARNING = ("the layers or experts on the CPU run on {chip}'s own CPU cores over the same unified memory: "
                          "their decode assumes the chip's whole memory bandwidth ({bw}); no source states the CPU "
                          "cores' share of it, which is likely lower, so this decode is an upper bound")


def apple_own_host(device: Device) -> Device:
    """The host of llama.cpp's CPU part on Apple chip ``device``: the chip itself seen from its CPU cores (kind cpu,
    so the CPU decode share applies; the chip's memory bandwidth, APPLE_OWN_HOST_WARNING)."""
    return replace(device, kind="cpu", id=f"{device.id}:cpu", name=f"{device.name} (CPU cores)", flops={},
                   flops_sparse={}, origin=device.origin)


def is_own_host(device: Device | None) -> bool:
    """Whether ``device`` is its own host for llama.cpp's CPU part (an Apple chip: ``apple_own_host``). The one
    predicate: fit (``host_part``), the auto-fit's hint (llamacpp_fit.py ``auto_fits_at``) and the split decode
    (``is_apple_own_host``) read it."""
    return device is not None and device.kind == "apple"


def is_apple_own_host(host: Device | None) -> bool:
    """Whether ``host`` is an Apple chip's own CPU side (``apple_own_host``: the chip seen from its CPU cores)."""
    return host is not None and host.id.endswith(":cpu")


def says_apple_own_host(warning: str) -> bool:
    """Whether ``warning`` is APPLE_OWN_HOST_WARNING (its text before the chip's name)."""
    return warning.startswith(APPLE_OWN_HOST_WARNING.split("{", 1)[0])


def own_memory_refusal(device: Device) -> str | None:
    """Why host RAM (``host_memory``: llama.cpp's host part beside GPUs) is refused on ``device``, None on a GPU: a
    CPU's RAM and an Apple chip's unified memory are the device's own (--memory). The one wording fit, the search
    (``host_part``) and ``models --fits-on`` give."""
    if device.kind == "gpu":
        return None
    own = {"apple": "the CPU part's memory is the unified memory outside the Metal working set, read from the chip's "
                    "memory",
           "cpu": "llama.cpp keeps the whole model in the CPU's RAM"}.get(device.kind, "its memory is its own")
    return (f"host_memory is the host RAM beside GPUs; on {device.id} ({device.kind}) {own}: give that instead "
            "(--memory; memory= in Python)")


_HOST_WHY = "layers or experts kept on the CPU"


def host_holds_weights(split: Mapping[str, Any]) -> bool:
    """Whether llama.cpp's host part of placement ``split`` (an estimate's ``details['split']``) holds layers or
    experts: its decode then reads them on a host CPU, which must be known (``host_part``: named, or an Apple chip's
    own) for a speed. The one test fit's split decode (fit.py ``_split_speed``) and the auto-fit's hint (llamacpp_fit.py
    ``auto_fits_at``, which skips timing a rung whose speed cannot be known) apply."""
    return any(d["device"] == "host" and (d["n_layers"] or d.get("experts")) for d in split["devices"])


def host_part(engine: str | None, device: Device, host_device: str | Device | None, host_memory: int | str | None,
              hardware_files: Sequence[str | Path] = ()) -> tuple[Device | None, int | None]:
    """llama.cpp's host part beside GPUs, read and checked up front (FieldError naming the field: the CLI and the
    web say --host-device / --host-memory): ``host_device`` a CPU from the catalog (or a hardware file),
    ``host_memory`` a size in DEVICE_MEMORY's range beside a GPU (a CPU's or an Apple chip's own memory is --memory),
    each read only by llama.cpp (``engine``: the one the workload runs on; None where it is not known yet: a search
    whose candidates each take their own, the settings then implying llama.cpp, specs/workload.py
    ``implied_engine``). The one check fit and the search (recommend.best_option_on, format_search.format_on) apply:
    before, a typo or another engine was ignored when no layer ran on the CPU (exit 0)."""
    host: Device | None = None
    if host_device is not None:
        if engine is not None and engine != "llamacpp":
            raise FieldError("host_device", f"host_device applies to engine llamacpp ({_HOST_WHY}), not {engine}")
        if isinstance(host_device, str):
            try:
                found = load_catalog(hardware_files).find(host_device)
            except UnknownNameError as e:
                raise FieldError("host_device", f"host_device: {e}") from None
        else:
            found = host_device
        if is_own_host(device):  # the chip is its own host (APPLE_OWN_HOST_WARNING): only itself may be named
            if isinstance(found, Device) and found.id == apple_own_host(device).id:
                found = device  # already read once (a search reads a candidate's host part again)
            if isinstance(found, Instance) or found.id != device.id:
                raise FieldError("host_device", f"host_device: on {device.id} (apple) llama.cpp's CPU part runs on "
                                 f"the chip's own CPU cores; drop it or name {device.id}, not "
                                 f"{getattr(found, 'id', found)}")
            found = apple_own_host(device)
        elif isinstance(found, Instance) or found.kind != "cpu":
            raise FieldError("host_device", f"host_device must be a CPU from the catalog (the host of llama.cpp's "
                             f"CPU part), got {getattr(found, 'id', found)} ({getattr(found, 'kind', 'an instance')})")
        host = found
    elif is_own_host(device) and engine == "llamacpp":
        # the chip as its own host only where the engine is llama.cpp: derived for a search (engine None) it would
        # name llama.cpp for every candidate (implied_engine), over the rule for an encoder-decoder or a format
        # llama.cpp does not load; each llama.cpp rung's fit derives it here itself
        host = apple_own_host(device)
    memory = None
    if host_memory is not None:  # llama.cpp's host part beside GPUs (verdict.py host_memory_verdict), as fit --auto
        memory = int(read_number(host_memory, "host_memory", DEVICE_MEMORY))
        if engine is not None and engine != "llamacpp":
            raise FieldError("host_memory", f"host_memory applies to engine llamacpp ({_HOST_WHY}), not {engine}")
        if device.kind in ("cpu", "apple"):  # (a CPU's RAM, an Apple chip's unified memory: the device's own)
            raise FieldError("host_memory", own_memory_refusal(device) or "")
    return host, memory


# A MIG device (a GPU instance's compute instance of a GPU in MIG mode) shares no model with another: a CUDA process
# enumerates one MIG device, however many are created or made visible (NVIDIA MIG User Guide, "MIG Device Names /
# Device Enumeration", docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html), and "No GPU to GPU P2P
# (either PCIe or NVLink) is supported" between them (same guide, "Deployment Considerations / Application
# Considerations"); NCCL, which vLLM's and SGLang's tensor- and pipeline-parallel groups and torch.distributed's
# training groups run on, has no MIG support: its topology code takes one PCI device as one GPU and one rank, and
# MIG devices of one GPU share that PCI device (NVIDIA/nccl#1716, maintainer's comment of 2025-05-23: "Our topology
# detection code associates one PCI device with one GPU and one rank ... Communication between MIG instances cannot
# use CUDA P2P"). So several MIG devices serve as replicas, one model each: tensor or pipeline parallelism over them
# is refused (``refuse_tensor_parallel_apart``, ``refuse_pipeline_apart``), as is a training run over several.
MIG_PARALLEL_RULE = ("a CUDA process enumerates one MIG device and MIG devices have no GPU-to-GPU P2P or NVLink "
                     "(NVIDIA MIG User Guide: Device Enumeration; Application Considerations), and NCCL takes one "
                     "PCI device as one rank, so it runs no group over MIG devices of one GPU (NVIDIA/nccl#1716)")


def mig_device(device: Device) -> bool:
    """Whether ``device`` is a MIG device (its ``mig`` flag: `hardware detect` states it for each MIG device of a GPU
    in MIG mode, catalog/detect.py ``_Builder.mig``); ``MIG_PARALLEL_RULE`` says what follows."""
    return device.mig is not None and bool(device.mig.base)


def one_replica_per_device(device: Device) -> bool:
    """Whether several of ``device`` serve as that many replicas, one model each, rather than one model split or
    sharded over them: CPUs and Apple chips (each its own machine or socket; llama.cpp's -ngl/-ts split and vLLM's
    tensor parallelism are GPU features) and MIG devices (``MIG_PARALLEL_RULE``). The one rule fit and plan apply
    to a count of them."""
    return device.kind in ("cpu", "apple") or mig_device(device)


def _apart_why(device: Device) -> str:
    """Why ``device`` runs one model per device (``one_replica_per_device``), in the words of its refusals."""
    return (f"{device.id} is a MIG device ({MIG_PARALLEL_RULE})" if mig_device(device)
            else f"{device.id} ({device.kind}) runs no tensor parallelism")


def refuse_tensor_parallel_apart(device: Device, tensor_parallel: int) -> None:
    """A tensor-parallel degree above 1 on a device that runs one model per device (``one_replica_per_device``): the
    tensor_parallel field's error, the same line from infer, fit, the web API and the Python API."""
    if tensor_parallel > 1 and one_replica_per_device(device):  # (a MIG device's: rejected where a search tries it)
        raise (DeviceCannotRunError if mig_device(device) else FieldError)("tensor_parallel", f"tensor_parallel {tensor_parallel}: {_apart_why(device)}; several of "
                         "them serve as replicas, one model each (give 1 or leave it out)")


def refuse_pipeline_apart(device: Device, pipeline_parallel: int) -> None:
    """Pipeline stages on MIG devices (``MIG_PARALLEL_RULE``: no NCCL group over them): the pipeline_parallel
    field's error, the same line from infer, fit and the web API. (A CPU's or Apple chip's stages are the engine's
    rule: specs/workload.py ``refuse_pipeline_engine``.)"""
    if pipeline_parallel > 1 and mig_device(device):
        raise DeviceCannotRunError("pipeline_parallel", f"pipeline_parallel {pipeline_parallel}: {_apart_why(device)}; several "
                         "of them serve as replicas, one model each (give 1 or leave it out)")


def refuse_training_apart(device: Device, count: int, field: str = "count") -> None:
    """A training run over several MIG devices (``MIG_PARALLEL_RULE``: data, tensor or pipeline parallelism all
    need an NCCL group over them): the error of ``field``, the one the devices were given in, one line (a search's
    rejected option: ``DeviceCannotRunError``)."""
    if count > 1 and mig_device(device):
        raise DeviceCannotRunError(field, f"{field} {count}: {_apart_why(device)}; a training run takes one of them (give 1 "
                         "or leave it out)")


# llama.cpp on MIG devices: its CUDA backend takes the devices it splits over from cudaGetDeviceCount (ggml_cuda_init,
# ggml-org/llama.cpp@0c1e57098 as vendored in llama-cpp-python 0.3.36, ggml/src/ggml-cuda/ggml-cuda.cu:221-234;
# GGML_CUDA_DEVICES, :236-258, only maps more "virtual" devices round-robin onto those same physical ones), and
# CUDA enumerates one MIG device to a process (``MIG_PARALLEL_RULE``: MIG User Guide, Device Enumeration). So one
# llama.cpp process holds one MIG device, and its -sm layer|row / --tensor-split split, over its own process's
# devices (specs/training.py ``llamacpp_split_gpus``), has no second MIG device to put layers on; another one joins
# only through the RPC backend (a second process, rpc-server), which is not timed here. Several MIG devices are
# llama.cpp replicas as well, the layout fit gives them (``one_replica_per_device``); an Apple chip is a machine of
# its own, and a split does not span machines (``llamacpp_split_gpus``).
LLAMACPP_MIG_RULE = ("llama.cpp's CUDA backend splits over the devices cudaGetDeviceCount gives its process "
                     "(ggml-cuda.cu ggml_cuda_init, llama.cpp@0c1e57098), and CUDA gives a process one MIG device "
                     "(NVIDIA MIG User Guide: Device Enumeration)")


def llamacpp_split_apart_why(device: Device) -> str | None:
    """Why llama.cpp splits no model over several of ``device`` (each of them a replica, one model each:
    ``one_replica_per_device``), in the words of its refusals and of fit's notes; None where it does (GPUs)."""
    if mig_device(device):
        return f"{device.id} is a MIG device ({LLAMACPP_MIG_RULE})"
    if device.kind == "apple":
        return (f"{device.id} ({device.kind}) is a machine of its own, and llama.cpp splits a model over one machine's "
                "devices (specs/training.py llamacpp_split_gpus)")
    return None


def refuse_split_apart(device: Device, gpus: int, field: str = "gpus") -> None:
    """A llama.cpp split (``gpus`` above 1, or a ``tensor_split`` of that many shares: ``field``) over devices that
    serve as replicas (``llamacpp_split_apart_why``: MIG devices, Apple chips): the field's error, one line from
    infer, fit, the web API and the Python API (a MIG device's: ``DeviceCannotRunError``, rejected where a search
    tries it). A CPU's is the workload's own refusal (specs/workload.py: gpus apply to GPU offload)."""
    why = llamacpp_split_apart_why(device) if gpus > 1 else None
    if why is not None:
        said = f"{field} {gpus}" if field == "gpus" else f"{field} of {gpus} shares"
        raise (DeviceCannotRunError if mig_device(device) else FieldError)(field, f"{said}: {why}; several of them "
                         "serve as replicas, one model each (" + ("give 1" if field == "gpus" else "give one share")
                         + " or leave it out)")


def workload_device_kind(device: Device) -> str:
    """The workload's ``device`` (InferenceWorkload, TrainingWorkload) for a catalog device: 'cpu' for a CPU (every
    tensor in host RAM, no CUDA context), else 'gpu'. The one rule infer, train, fit, recommend and plan use."""
    return "cpu" if device.kind == "cpu" else "gpu"


def device_fields(device: Device) -> dict[str, str]:
    """The workload fields a catalog device decides: its ``device`` kind (``workload_device_kind``) and, for a GPU,
    the runtime whose context it holds (``gpu_runtime``). Every caller that puts a workload on a named device sets
    both through this."""
    return {"device": workload_device_kind(device), "gpu_runtime": gpu_runtime(device)}


# NVIDIA's BF16 tensor cores start with Ampere, compute capability 8.0 (the PTX ISA's mma .bf16 shapes need sm_80;
# torch 2.13.0 torch/cuda/__init__.py is_bf16_supported, lines 191-211, answers True natively from major >= 8 and
# below it only by creating a bf16 tensor, "including_emulation")
BF16_TENSOR_CORE_MIN_CAPABILITY = 80
FP16_DEFAULT_WHY = ("the default on a GPU without BF16 tensor cores (NVIDIA below compute capability 8.0: Volta, "
                    "Turing): fp16 autocast with a loss scaler, what HF Trainer's --fp16 runs there")


# the default switched, said where it is read (serving says its own, estimate/formats.py engine_dtype_note): a model
# pre-trained in bf16 may overflow fp16's range (max 65,504) when fine-tuned in fp16 (transformers docs @v4.13.0,
# docs/source/performance.md, "bf16": "If you use a model pretrained in bf16 ... fp16 ... overflow"), which the loss
# scaler does not cure for activations
FP16_DEFAULT_WARNING = ("no BF16 tensor cores on this GPU ({cc}): trained as fp16-mixed (fp16 autocast with a loss "
                        "scaler), not the bf16-mixed default elsewhere; a model pre-trained in bf16 may overflow "
                        "fp16's range (inf/NaN loss: transformers' performance docs, bf16); give precision to choose")


def _capability_text(cc: int | None) -> str:
    return f"compute capability {cc // 10}.{cc % 10}, below 8.0" if cc is not None else "compute capability below 8.0"


def bf16_tensor_cores(device: Device) -> bool:
    """Whether ``device`` runs bf16 matmuls on tensor cores: False only for a CUDA GPU whose sourced compute
    capability is below :data:`BF16_TENSOR_CORE_MIN_CAPABILITY` (V100, T4); True for every other device (AMD's ROCm
    GPUs run bf16 natively, a CPU's bf16 is its own rule: estimate/duration.py training_peak)."""
    cc = device.capability
    return not (device.kind == "gpu" and gpu_runtime(device) == "cuda" and cc is not None
                and cc < BF16_TENSOR_CORE_MIN_CAPABILITY)


# Where torch._scaled_mm (the float8 GEMM of torchao's Float8Linear; TransformerEngine's te.Linear gates the same
# GPUs: transformer_engine/pytorch/fp8.py check_fp8_support, 9.0+ or 8.9) runs on a GPU: torch
# aten/src/ATen/native/cuda/ScaledBlas.cpp @2bec3bdf lines 90-111 (``_scaled_mm_allowed_device``): on CUDA compute
# capability major >= 9 or exactly 8.9 (Ada, Hopper, Blackwell); on ROCm the gfx942 (MI300, CDNA3; float8 there is
# e4m3fnuz, ``_scaled_mm_is_fnuz`` lines 113-117), gfx950 (MI350, CDNA4; ROCm >= 6.5) and gfx1200/1201 (RDNA4; ROCm
# >= 6.3) architectures. Any other GPU raises "torch._scaled_mm is only supported on ..." at the first float8 linear.
FP8_GEMM_MIN_CAPABILITY = 89
FP8_GEMM_ROCM_ARCHITECTURES = ("cdna3", "cdna4", "rdna4")


def float8_not_modelled(device: Device) -> str | None:
    """Why float8 training on ``device`` is not modelled, or None: an Intel Gaudi (``hpu``) runs FP8 training, but
    through Intel's own TransformerEngine (optimum-habana optimum/habana/accelerate/utils/transformer_engine.py
    @1d8504c6 line 34 imports ``habana_frameworks.torch.hpex.experimental.transformer_engine``, a closed wheel of
    Intel's Gaudi software), not either recipe llmsizer sizes (torchao's Float8Linear, NVIDIA's TransformerEngine:
    CUDA/ROCm code), and no source here states its saved tensors and weight copies (``NotModelledError``)."""
    if gpu_runtime(device) != "hpu":
        return None
    return (f"float8 training on {device.id} (an Intel Gaudi) is not modelled: it runs Intel Gaudi's "
            "TransformerEngine (habana_frameworks, optimum-habana's fp8), not torchao's Float8Linear "
            "(torch._scaled_mm on CUDA/ROCm) or NVIDIA's TransformerEngine, whose memory llmsizer sizes; train "
            "without float8")


def float8_refusal(device: Device, recipe: str = "torchao", capability: int | None = None) -> str | None:
    """Why float8 training (``TrainingWorkload.float8``) cannot run on ``device``, or None where it runs or the device
    does not say (a hardware file's GPU without capability or architecture): a GPU without FP8 tensor cores by
    :func:`fp8_tensor_cores`, the one rule (a CUDA GPU below compute capability :data:`FP8_GEMM_MIN_CAPABILITY`:
    A100, V100, T4; an AMD GPU of another architecture than :data:`FP8_GEMM_ROCM_ARCHITECTURES`: MI250X, CDNA2),
    whose capability or architecture is known, and a TPU: torch_xla lowers no ``_scaled_mm`` (pytorch/xla
    codegen/xla_native_functions.yaml @0192ff75 lists ``mm``, ``addmm``, ``bmm`` but no ``_scaled_mm``), so torchao's
    float8 training, whose GEMM is that op, has no XLA path. A CPU and an Apple GPU are refused by the workload
    itself (specs/training.py, from ``device``/``gpu_runtime``). An Intel Gaudi runs FP8 training, through a stack
    llmsizer does not model: :func:`float8_not_modelled`, not a refusal here. TransformerEngine's MXFP8 recipe
    (``recipe`` 'transformer-engine-mxfp8') runs on CUDA compute capability 10.x / 11.x only
    (formulas/float8_training.py ``mxfp8_supported``: TE's ``_compute_mxfp8_support``): refused on every other
    GPU (``capability``: the workload's ``gpu_capability``, read where ``device`` is the generic GPU a fit sizes on;
    a CUDA GPU that says neither passes, as above)."""
    runtime = gpu_runtime(device)
    cc = device.capability if device.capability is not None else capability
    if (recipe == TE_MXFP8 and device.kind == "gpu" and (runtime != "cuda" or cc is not None)
            and not (runtime == "cuda" and mxfp8_supported(cc))):
        where = f"compute capability {cc // 10}.{cc % 10}" if runtime == "cuda" and cc is not None else f"{runtime}"
        return (f"float8_recipe {recipe} (TransformerEngine MXFP8BlockScaling) runs on datacenter Blackwell only, "
                f"compute capability 10.x/11.x (B200, GB200, B300), not on {device.id} ({where}; TransformerEngine "
                "quantization.py _compute_mxfp8_support); use transformer-engine-current there")
    if runtime == "xla":
        return (f"float8 training runs torch._scaled_mm, which torch_xla does not lower, so it has no path on "
                f"{device.id} (a TPU): torchao's Float8Linear runs on CUDA and ROCm GPUs only; train without float8")
    if device.kind != "gpu" or fp8_tensor_cores(device):
        return None
    # the hardware rule is fp8_tensor_cores' alone (one home); what stays here is whether the GPU says enough to
    # refuse: a CUDA GPU whose capability is known, an AMD GPU whose architecture is known. A GPU that says neither
    # (a hardware file's) passes: fp8_peak then has no FP8 rate and the run is timed at 16 bits, with a warning.
    cc = device.capability
    if runtime == "cuda" and cc is not None:
        return (f"float8 training runs torch._scaled_mm on FP8 tensor cores, which {device.id} (compute capability "
                f"{cc // 10}.{cc % 10}) lacks: torch allows it from 8.9 (Ada, Hopper, Blackwell); train without float8")
    if runtime == "rocm" and device.architecture:
        return (f"float8 training runs torch._scaled_mm on FP8 matrix cores, which {device.id} ({device.architecture}) "
                "lacks: on ROCm torch allows it on MI300 (CDNA3), MI350 (CDNA4) and RDNA4 only; train without float8")
    return None


# Whether a device executes FP8 GEMMs (both operands e4m3/e5m2 on tensor or matrix cores), one rule for the serving
# format ladder (estimate/format_search.py), the prefill's matmul dtype (estimate/speed.py) and float8 training's
# GEMM rate (estimate/duration.py), read from the hardware, not from whether the catalog row lists an FP8 figure:
# - NVIDIA: FP8 MMA exists from compute capability 8.9 (Ada, Hopper, Blackwell): NVIDIA's PTX ISA (8.4 and later,
#   docs.nvidia.com/cuda/parallel-thread-execution, "Warp-level matrix multiply-accumulate instructions: mma",
#   target ISA notes: mma with the .e4m3/.e5m2 types requires sm_89 or higher); torch's _scaled_mm
#   (FP8_GEMM_MIN_CAPABILITY above) and vLLM (vllm/model_executor/layers/quantization/fp8.py Fp8LinearMethod
#   ``use_marlin = not current_platform.has_device_capability(89)``: "For GPUs that lack FP8 hardware support, we
#   can leverage the Marlin kernel for fast weight-only FP8 quantization") draw the same line. Below it vLLM serves
#   FP8 checkpoints weight-only (FP8 Marlin, 16-bit activations and matmuls): an fp8 prefill there is timed at the
#   16-bit rate (estimate/speed.py compute_dtype_for) and the serving ladder offers no fp8 rung (format_ladder).
# - AMD: MI300 (CDNA3), MI350 (CDNA4) and RDNA4 (FP8_GEMM_ROCM_ARCHITECTURES, torch's own list above).
# - any other device: FP8 only where its row sources an FP8 figure (Intel Gaudi 2/3).
# A device with FP8 tensor cores and no sourced FP8 figure (the catalog's rtx-4080-super, dgx-spark, h20: NVIDIA
# publishes none for them) is timed at FP8_TENSOR_RATIO x its dense 16-bit tensor peak, a named assumption
# (fp8_peak), never silently at the 16-bit rate.
FP8_TENSOR_RATIO = 2.0
FP8_TENSOR_RATIO_SOURCE = (
    "NVIDIA's architecture whitepapers and datasheets give the dense FP8 tensor rate as 2x the dense FP16/BF16 one at "
    "the same accumulation on every FP8 generation: Hopper (H100 SXM5 1,979 vs 989.4 TFLOPS), Ada (L40S 733 vs 362; "
    "RTX 4090 330.3 vs 165.2 with FP32 accumulate), Blackwell (B200 4.5 vs 2.25 PFLOPS)")


def fp8_tensor_cores(device: Device) -> bool:
    """Whether ``device`` executes FP8 GEMMs (the module rule above): a CUDA GPU whose compute capability is known,
    by that capability (>= :data:`FP8_GEMM_MIN_CAPABILITY`); an AMD GPU whose architecture is known, by that
    architecture (:data:`FP8_GEMM_ROCM_ARCHITECTURES`); any other device by a sourced FP8 figure. The hardware
    decides where it is known: a hardware file's capability-8.0 GPU that states an FP8 figure still has no FP8 tensor
    cores (torch's ``_scaled_mm`` refuses it; review20 D5). False for a CPU, an Apple chip, a TPU without a figure,
    and a GPU that names neither ``compute_capability`` nor ``architecture`` and gives no ``flops.fp8``."""
    if device.kind == "gpu":
        runtime = gpu_runtime(device)
        if runtime == "cuda" and device.capability is not None:
            return device.capability >= FP8_GEMM_MIN_CAPABILITY
        if runtime == "rocm" and device.architecture:
            return device.architecture in FP8_GEMM_ROCM_ARCHITECTURES
    return "fp8" in device.flops


def fp8_peak(device: Device) -> tuple[float | None, Assumption | None]:
    """(the dense FP8 peak FLOP/s ``device``'s FP8 GEMMs are timed at, the assumption that stands in for a figure):
    its sourced ``flops.fp8`` (no assumption); on a device with FP8 tensor cores (:func:`fp8_tensor_cores`) but no
    sourced figure, :data:`FP8_TENSOR_RATIO` x its dense 16-bit tensor peak (``bf16``, else ``fp16``), named as
    ``fp8_peak`` with why; (None, None) where the device has no FP8 tensor cores or no 16-bit figure either."""
    p, _ = device.peak_flops("fp8")
    if p is not None:
        return p, None
    if not fp8_tensor_cores(device):
        return None, None
    cc = device.capability if gpu_runtime(device) == "cuda" else None
    has = (f"compute capability {cc // 10}.{cc % 10} >= 8.9" if cc is not None
           else device.architecture or "an FP8 architecture")
    return _ratio_peak(device, "bf16", FP8_TENSOR_RATIO, "fp8_peak", "TFLOP/s", f"FP8 tensor cores ({has})",
                       "FP8", "flops.fp8", FP8_TENSOR_RATIO_SOURCE)


def _ratio_peak(device: Device, key16: str, ratio: float, name: str, unit: str, cores: str, fmt: str, field: str,
                source: str) -> tuple[float | None, Assumption | None]:
    """(``ratio`` x ``device``'s dense 16-bit tensor peak ``key16``, the named assumption ``name`` saying so) for a
    format whose rate the catalog row does not source (:func:`fp8_peak`, :func:`int8_peak`: each decides first
    whether the device has the format's tensor cores); (None, None) where the row has no 16-bit figure either."""
    p16, used = device.peak_flops(key16)
    if p16 is None:
        return None, None
    peak = ratio * p16
    return peak, Assumption(
        name, f"{peak / 1e12:.4g} {unit}", True,
        f"{device.id} has {cores} and no sourced {fmt} figure: {ratio:g} x its dense {used} tensor peak "
        f"{p16 / 1e12:.4g} TFLOP/s (give {field} in a --hardware-file entry to replace it); {source}")

# The dense INT8 tensor rate where a device row gives none (every built-in NVIDIA row with INT8 MMA now gives one,
# quoted or derived and saying how, tests/hardware/test_int8_peak.py; a --hardware-file entry may not): INT8_TENSOR_RATIO x the dense
# FP16 tensor peak (FP16 accumulate where the row gives it, ``Device.peak_flops('fp16_acc16')``) on a CUDA GPU with
# INT8 MMA (tensor cores taking int8 operands: compute capability >= 7.2, Turing's 7.5 and later; the PTX ISA's
# mma.sync .s8 shapes need sm_72+); none below it (Volta 7.0: FP16 tensor cores only) nor on Blackwell Ultra (10.3),
# whose sourced rows (b300, gb300) show NVIDIA cut INT8 to 0.07 x the FP16 rate. A named assumption (``int8_peak``),
# never a silent fallback to a 16-bit rate at another kernel's efficiency (probe18 D1a).
INT8_TENSOR_RATIO = 2.0
INT8_MMA_CAPABILITY = 72
_NO_INT8_CAPABILITIES = (103,)
INT8_TENSOR_RATIO_SOURCE = (
    "every catalog row with INT8 MMA that sources both figures gives the dense INT8 tensor rate as 2x the dense FP16 "
    "one (H100 SXM 1,979 vs 989.4, A100 624 vs 312, L40S 733 vs 362, RTX 4090 660.6 vs 330.3 with FP16 accumulate, "
    "T4 130 vs 65, B200 4,500 vs 2,250; tests/hardware/test_int8_peak.py checks every such row)")


def int8_peak(device: Device) -> tuple[float | None, Assumption | None]:
    """(the dense INT8 peak ops/s llama.cpp's MMQ kernels are timed at on ``device``, the assumption that stands in for
    a figure): its sourced ``flops.int8`` (no assumption); on a CUDA GPU of compute capability >= INT8_MMA_CAPABILITY
    (not Blackwell Ultra) with no sourced figure, INT8_TENSOR_RATIO x its dense FP16 tensor peak, named as
    ``int8_peak``; (None, None) where the GPU has no INT8 MMA (Volta) or no 16-bit figure either."""
    p, _ = device.peak_flops("int8")
    if p is not None:
        return p, None
    cc = cuda_capability(device)
    if cc is None or cc < INT8_MMA_CAPABILITY or cc in _NO_INT8_CAPABILITIES:
        return None, None
    return _ratio_peak(device, "fp16_acc16", INT8_TENSOR_RATIO, "int8_peak", "TOPS",
                       f"INT8 tensor cores (compute capability {cc // 10}.{cc % 10} >= 7.2)", "INT8", "flops.int8",
                       INT8_TENSOR_RATIO_SOURCE)


def training_device_fields(device: Device) -> dict[str, Any]:
    """:func:`device_fields` for a training workload, with ``bf16_tensor_cores`` (:func:`bf16_tensor_cores`) and
    ``gpu_capability`` (:func:`cuda_capability`): every caller that puts a training workload on a named device (train,
    fit --train, recommend --train, plan, the web's answers through them, the duration) sets them through this."""
    return {**device_fields(device), "bf16_tensor_cores": bf16_tensor_cores(device),
            "gpu_capability": cuda_capability(device)}


def inference_device_fields(device: Device) -> dict[str, Any]:
    """:func:`device_fields` for an inference workload, with ``gpu_capability`` (:func:`cuda_capability`): every
    caller that puts a serving workload on a named device (infer --device, fit, the web's answers through them) sets
    them through this, and every sizing of its weights outside the estimate reads them through
    :func:`device_weights_capability`."""
    return {**device_fields(device), "gpu_capability": cuda_capability(device)}


def weights_capability(device: str, runtime: str, capability: int | None, engine: str | None,
                       model_type: str, fmt: str | None = None) -> int | None:
    """The one rule of the CUDA compute capability the weights' dtype rules read (formulas/weight_formats.py
    ``engine_tensor_bytes``: vLLM's fp32 gate, ``vllm_gate_fp32``) for model type ``model_type`` served by ``engine``
    on device kind ``device`` ('gpu', 'cpu') of runtime ``runtime`` (``gpu_runtime``) and capability ``capability``
    (``gpu_capability``): None (the weights are the same on every device) unless the model has a router whose dtype
    the device decides on this engine (``engine == 'vllm'`` and ``model_type`` in ``VLLM_FP32_GATE``: the only
    reader of the capability), so the weight caches (``weight_bytes``, ``replicated_matrix_bytes``) hold one entry
    per model, not one per device; for such a model 0 where the engine runs without CUDA (a CPU, ROCm, Metal, a TPU:
    vLLM's ``current_platform.is_cuda()`` False), else the GPU's (None: not known, sized as on Hopper). The estimate
    (inference/compose.py) reads it from the workload, every other sizing of the same weights (the format ladder's
    weights-alone check, the speed model's weight reads, plan's need) from the Device through
    :func:`device_weights_capability`, so one device gives one dtype. The same capability picks vLLM's MXFP4 MoE
    backend (formulas/vllm_mxfp4.py ``vllm_mxfp4_backend``: what the experts keep resident), so on vLLM it is also
    returned for any model at format ``fmt`` 'mxfp4' (None elsewhere: a weight cache entry per device only there)."""
    if engine != "vllm" or (model_type not in VLLM_FP32_GATE and fmt != "mxfp4"):
        return None
    return 0 if device == "cpu" or runtime != "cuda" else capability


def device_weights_capability(device: Device, engine: str | None, model_type: str,
                              fmt: str | None = None) -> int | None:
    """:func:`weights_capability` of the workload fields a named ``device`` decides (:func:`inference_device_fields`,
    the fields `infer --device`, fit and the web put in the workload), for ``model_type`` at format ``fmt`` on
    ``engine``: the same capability the estimate reads."""
    f = inference_device_fields(device)
    return weights_capability(f["device"], f["gpu_runtime"], f["gpu_capability"], engine, model_type, fmt)


def cuda_capability(device: Device) -> int | None:
    """The compute capability (major x 10 + minor) of a CUDA GPU, from its catalog row's ``compute_capability`` (else
    its ``architecture``'s first: ``Device.capability``); None for any other device (ROCm, Apple, a TPU, a CPU)."""
    return device.capability if device.kind == "gpu" and gpu_runtime(device) == "cuda" else None


def with_device_precision(w: TrainingWorkload) -> TrainingWorkload:
    """The one rule of the precision a device without BF16 tensor cores trains in (``w.bf16_tensor_cores`` False):
    the default ``bf16-mixed`` becomes ``fp16-mixed`` where the caller gave no precision (``given`` travels with
    the copy, so it stays a default; :func:`precision_notes` says why). Applied with the framework profile's
    defaults (estimate/framework.py ``with_framework``), so the memory estimate, the duration and every face read
    the same workload. Not with ``float8``: float8 training needs bf16 compute (specs/training.py), so its default
    stays bf16-mixed and such a GPU is refused for the float8 GEMM itself (:func:`float8_refusal`: every GPU without
    BF16 tensor cores is below the FP8 one's compute capability 8.9), in train as in each candidate of recommend.
    Idempotent."""
    if (w.bf16_tensor_cores or w.float8 or w.precision != "bf16-mixed"
            or (w.given is not None and "precision" in w.given)):
        return w
    return replace(w, precision="fp16-mixed")


def precision_notes(w: TrainingWorkload) -> tuple[str | None, str | None]:
    """(the ``why`` of a defaulted fp16-mixed, a warning: ``FP16_DEFAULT_WARNING`` for that default, another for a bf16
    precision given) on a GPU without BF16 tensor cores (``w.bf16_tensor_cores`` False); (None, None) elsewhere. torch accepts bf16 there:
    ``torch.cuda.is_bf16_supported()`` defaults to including_emulation=True and then only creates a bf16 tensor
    (torch 2.13.0 torch/cuda/__init__.py lines 207-220), so HF Trainer's bf16 check (transformers 5.24.0
    training_args.py line 1778, ``is_torch_bf16_gpu_available``: utils/import_utils.py lines 656-665) passes; but its
    bf16 matmuls have no tensor-core path, so they do not run at the FP16 tensor peak the duration is timed at."""
    if w.bf16_tensor_cores or w.device != "gpu":
        return None, None
    if w.precision == "fp16-mixed" and (w.given is None or "precision" not in w.given):
        return FP16_DEFAULT_WHY, FP16_DEFAULT_WARNING.format(cc=_capability_text(w.gpu_capability))
    if "bf16" in w.precision:
        return None, (f"precision {w.precision} on a GPU without BF16 tensor cores (compute capability below 8.0): "
                      "torch accepts it (torch.cuda.is_bf16_supported counts emulation, so HF Trainer's bf16 check "
                      "passes) but its bf16 matmuls do not run at the FP16 tensor peak the duration is timed at: the "
                      "time is a lower bound; use precision fp16-mixed")
    return None, None


def hardware_decides(device: Device, fields: dict[str, Any]) -> None:
    """The :func:`device_fields` a caller also gave beside the named ``device`` (``fit(model, 'h100-sxm',
    device=...)``): one the device has is dropped (the device sets it), another refused in one line (an H100 sized
    by a CPU's rules was a silent second answer; on the inference path the keyword reached the estimate twice).
    ``fields`` is updated in place."""
    for k, v in device_fields(device).items():
        given = fields.pop(k, None)
        if given is not None and given != v:
            raise InputError(f"{k} {given!r}: fit sizes the hardware it is given ({device.id}: {k} {v!r}; fit "
                             f"--device on the command line), so {k} follows from it; drop {k}=")


def gpu_runtime(device: Device) -> str:
    """The runtime a device's memory is driven by (specs/workload.py GPU_RUNTIMES): 'metal' on an Apple chip, 'xla'
    on a TPU, 'hpu' on an Intel Gaudi, 'rocm' on an AMD GPU, else 'cuda' (NVIDIA, and any device of a hardware file
    that names no other vendor). estimate/allocator.py device_context adds what each one holds."""
    vendor = device.vendor.lower()
    if device.kind == "apple":
        return "metal"
    if device.kind == "tpu":
        return "xla"
    if device.kind == "accelerator" and vendor == "intel":
        return "hpu"
    return "rocm" if vendor == "amd" and device.kind == "gpu" else "cuda"


def llamacpp_backend(device: Device) -> str:
    """The ggml backend llama.cpp runs a model's layers on ``device`` with: 'cpu' on a CPU (ggml-cpu), else the
    device's ``gpu_runtime`` ('metal' on an Apple chip: ggml-metal; 'cuda' on NVIDIA: ggml-cuda; 'rocm', 'xla',
    'hpu' elsewhere); 'other' where CUDA only stands in for a runtime no rule names (``runtime_stand_in``: a
    hardware file's Intel Arc or unknown vendor, which llama.cpp runs through SYCL or Vulkan, not ggml-cuda, so no
    CUDA row speaks for it). The key of llama.cpp's calibrated speed bands (estimate/ranges.py ``llamacpp_band``):
    the kernels, and so the error, are the backend's."""
    if device.kind == "cpu":
        return "cpu"
    return "other" if runtime_stand_in(device) is not None else gpu_runtime(device)


def runtime_stand_in(device: Device) -> Assumption | None:
    """The named assumption when ``gpu_runtime`` takes CUDA for a GPU or accelerator it has no rule for: one whose
    vendor is not NVIDIA (a hardware file's entry with no ``vendor``, or one no rule above maps to its runtime), so
    CUDA's context (estimate/engines.py CUDA_CONTEXT) stands in for its runtime's; None for an NVIDIA device, a
    device of another runtime, and a GPU known only by its kind (``gpu``: CUDA is the default every estimate
    names)."""
    if (device.kind not in ("gpu", "accelerator") or device.origin == "generic" or gpu_runtime(device) != "cuda"
            or device.vendor.lower() == "nvidia"):
        return None
    vendor = f"unknown vendor {device.vendor!r}" if device.vendor else "no vendor"
    where = "the catalog" if device.origin == "catalog" else device.origin
    # 'default for DEVICE: ' is the prefix Assumption.mark prints in the text answer, as for the engine's default
    return Assumption("gpu_runtime", "cuda", True,
                      f"default for {device.id}: {vendor} ({device.kind}) in {where}, CUDA's context used as stand-in (runtime "
                      "rules: NVIDIA -> CUDA, AMD GPU -> ROCm, Intel accelerator -> Gaudi, TPU -> XLA, Apple -> Metal; "
                      "give the entry's vendor)")


def usable_memory(device: Device, memory: int | None = None, source: str = "given", record: bool = True
                  ) -> tuple[int | None, list[Assumption]]:
    """Bytes a model may use on one ``device`` (before headroom), and the assumptions behind it: ``memory`` when
    given (``source`` says by whom: the user, or a CPU instance's RAM), else the catalog's device memory; an Apple
    GPU only the Metal working-set share of it. ``record=False``: the bytes alone (no assumptions written, for a
    caller that reads only the number: a catalog search's candidates)."""
    notes: list[Assumption] = []
    if memory is not None:
        memory = int(read_number(memory, "memory", DEVICE_MEMORY))  # a Python caller's "24GiB": one line naming it
        if record:
            notes.append(Assumption("device_memory", format_bytes(memory), not source.startswith("given"), source))
        base = memory
    else:
        base_opt = device.memory_bytes
        if base_opt is None:
            return None, notes
        base = base_opt
        if record:
            notes.append(Assumption("device_memory", format_bytes(base), True, device.memory_basis_text()))
    if device.kind == "apple":
        frac = E.apple_gpu_working_set(base)
        if record:
            notes.append(Assumption(E.APPLE_WORKING_SET_NAME, round(frac, 4), True, E.APPLE_WORKING_SET_SOURCE))
        base = int(base * frac)
    return base, notes


# llama.cpp on an Apple chip: its Metal device is a GPU-type backend device (ggml-metal.cpp
# ggml_backend_metal_device_get_type: GGML_BACKEND_DEVICE_TYPE_GPU) whose memory is recommendedMaxWorkingSetSize
# (ggml/src/ggml-metal/ggml-metal-device.m ggml_metal_device_get_memory: total = recommendedMaxWorkingSetSize, free =
# total - currentAllocatedSize), so -ngl and llama.cpp's --fit fill it as they fill a CUDA GPU's free memory (the GPU
# budget here: usable_memory), and the CPU part (layers kept off the GPU, token embeddings) sits in the same unified memory, outside
# that working set. The auto-fit's host memory there is the rest of the unified memory: memory - working set (1/3 up to
# 32 GB, 1/4 above), named as an assumption: the OS and other processes share it, so it is an upper bound.
APPLE_HOST_MEMORY_NAME = "apple_host_memory"


def apple_host_memory(device: Device, memory: int | str | None = None) -> tuple[int | None, Assumption | None]:
    """The host memory of llama.cpp's CPU part on Apple chip ``device`` (the unified memory, ``memory`` when given,
    outside the Metal working set) and the assumption naming it; (None, None) for another device or no memory."""
    if device.kind != "apple":
        return None, None
    unified = int(read_number(memory, "memory", DEVICE_MEMORY)) if memory is not None else device.memory_bytes
    gpu, _ = usable_memory(device, unified, record=False)
    if unified is None or gpu is None:
        return None, None
    rest = unified - gpu
    return rest, Assumption(APPLE_HOST_MEMORY_NAME, format_bytes(rest), True,
                            f"the unified memory {format_bytes(unified)} outside the Metal working set "
                            f"{format_bytes(gpu)}: llama.cpp's CPU part shares the chip's memory (OS and other "
                            "processes included, so an upper bound)")


def cuda_memory(device: Device, memory: int | str | None) -> int | None:
    """The total CUDA reports for one ``device`` (cudaMemGetInfo's total: nvidia-smi's memory.total less what the
    driver reserves for itself, nvidia-smi -q 'FB Memory Usage / Reserved'), the workload's ``cuda_memory``: the
    catalog's sourced ``memory_cuda`` when the memory sized against is the catalog's own (``memory`` None); None
    otherwise (no sourced figure, or a memory given, which is taken as what the engine reads).

    vLLM sizes its pool from it: requested_memory = ceil(MemorySnapshot.total_memory x gpu_memory_utilization)
    (vllm 0.19.1 vllm/v1/worker/utils.py:408-410 ``request_memory``; total_memory from
    current_platform.mem_get_info, vllm/utils/mem_utils.py:104, which the platform forwards to torch.cuda.mem_get_info,
    vllm/platforms/interface.py:643-655); SGLang its token pool from the free memory before the weights load
    (sglang 0.5.6 srt/utils/common.py:491-518 ``get_available_gpu_memory``: torch.cuda.mem_get_info's free), while
    its default mem_fraction_static reads nvidia-smi's memory.total (srt/utils/common.py:1610
    ``get_nvgpu_memory_capacity``), the catalog's memory."""
    if memory is not None or device.memory_cuda is None or not device.memory_cuda.base:
        return None
    return int(device.memory_cuda.base)


# A given --memory above what the device can hold is most likely a typo or another device (a "200GiB" H100), but
# a device's memory is also written by its nominal figure: 80 GiB for an H100 whose driver reports 79.65 GiB, 24 GiB
# for an A10 whose driver reports 22.49 GiB (the largest nominal/driver ratio in the catalog, 1.072, is the B300's
# 288 GiB vs 268.6 GiB). So the reference is the larger of the vendor's figure and the driver's (``Device.memory``,
# ``Device.memory_bytes``), and only more than this fraction above it is said. A named threshold, not a measurement:
# a warning, never an error (the answer is still computed with the memory given). CPUs are left out: their
# ``memory`` is one machine's RAM, not the chip's.
MEMORY_ABOVE_DEVICE_TOLERANCE = 0.10


def memory_above_device(device: Device, memory: int | str | None) -> str | None:
    """A warning when the ``memory`` given for one ``device`` exceeds its catalog memory (the larger of the
    vendor's and the driver's figure) by more than ``MEMORY_ABOVE_DEVICE_TOLERANCE``; None otherwise, for a CPU,
    or when the device's memory is not known."""
    if memory is None or device.kind == "cpu" or device.origin == "generic":
        return None
    figures = [int(v.base) for v in (device.memory, device.memory_usable) if v is not None and v.base]
    if not figures:
        return None
    given = int(read_number(memory, "memory", DEVICE_MEMORY))
    held = max(figures)
    if given <= held * (1 + MEMORY_ABOVE_DEVICE_TOLERANCE):
        return None
    return (f"the memory given, {format_bytes(given)}, is {given / held:.2f}x what one {device.id} holds "
            f"({format_bytes(held)} in the catalog; more than {MEMORY_ABOVE_DEVICE_TOLERANCE:.0%} above it): the "
            "estimate uses the memory given; check the device or the figure")


def instance_memory(device: Device, instance: Instance | None, memory: int | None) -> int | None:
    """The memory a workload gets: ``memory`` when given, else a CPU instance's RAM, else None (the device's)."""
    if memory is None and instance is not None and device.kind == "cpu" and instance.memory is not None:
        return int(instance.memory.base)
    return memory


def memory_given_source(device: Device, memory: int | str | None) -> str:
    """The source of a ``memory`` given beside a named ``device`` whose own memory is known and differs: the
    given memory overrides the device's (``given; overrides h100-sxm's 79.65 GiB ...``), said in the
    device_memory assumption so no answer silently sizes a chosen device by another figure; plain ``given``
    otherwise (no memory, a device known by its kind only, or the same figure)."""
    own = device.memory_bytes
    if memory is None or own is None or device.origin == "generic":
        return "given"
    if int(read_number(memory, "memory", DEVICE_MEMORY)) == own:
        return "given"
    return (f"given; overrides {device.id}'s own {format_bytes(own)} (leave the memory out for the device's; give "
            "it for what is free on yours)")


def target_memory(device: Device, instance: Instance | None, memory: int | None) -> tuple[int | None, Notes]:
    """``usable_memory`` of a device or instance: ``memory`` when given, else a CPU instance's RAM (named as its
    source), else the catalog's device memory; with the notes behind it: the assumptions naming where the memory
    came from and, for a ``memory`` given above what the device holds, ``memory_above_device``'s warning. The one
    place a given memory meets its device (``workload_on_device``, so ``estimate_inference`` / ``estimate_training``
    with a named device; ``fit``, ``fit_training``): every answer carries these notes first, so the warning is said
    once and in the same place by infer, train, fit, fit --train and the web."""
    notes = Notes()
    mem = instance_memory(device, instance, memory)
    if memory is None and mem is not None and instance is not None and instance.memory is not None:
        usable, notes.assumptions = usable_memory(
            device, mem, f"{instance.id} RAM: {instance.memory.describe()} [{instance.memory.source}]")
        return usable, notes
    usable, notes.assumptions = usable_memory(device, mem, memory_given_source(device, memory))
    over = memory_above_device(device, memory)
    if over is not None:
        notes.warnings.append(over)
    return usable, notes


def detected_machine(hardware: Any, count: int | None, hardware_files: Sequence[Any]
                     ) -> tuple[Any, int | None, Sequence[Any]]:
    """``fit``'s and ``fit_training``'s hardware when it is ``"detected"`` (this machine, detected now) or a
    ``Detection`` (``detect_hardware()``'s): the detected machine's target device, its count when none is given and
    its hardware file as text (catalog/detect.py ``detected_target``, the rule ``models --fits-on detected`` and
    ``--device detected`` follow); anything else as given. Detection is imported only for those."""
    if isinstance(hardware, (Device, Instance, str)) and not names_detected(hardware):
        return hardware, count, hardware_files
    from ..catalog.detect import Detection, detected_target
    if isinstance(hardware, (str, Detection)):
        return detected_target(hardware, count, hardware_files)
    return hardware, count, hardware_files


def detect_named(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with a ``device`` named ``"detected"`` replaced by this machine's ``Detection``, detected once
    (catalog/detect.py ``detect_hardware``): what ``estimate_inference(device='detected')`` and
    ``estimate_training(device='detected')`` size, as `infer` / `train --device detected` (cli/main.py
    ``detected_device``) and ``fit(model, 'detected')`` do; the rest of the resolution is ``detected_machine``'s."""
    if not names_detected(fields.get("device")):
        return fields
    from ..catalog.detect import detect_hardware
    return {**fields, "device": detect_hardware()}


def resolve_target(hardware: str | Device | Instance, hardware_files: Sequence[str | Path] = ()
                   ) -> tuple[Device, int | None, str, Instance | None]:
    """(device, instance device count or None, target id, instance) for a name, Device or Instance."""
    if isinstance(hardware, str) and not hardware_files and hardware.strip().lower() in GENERIC_DEVICES:
        # what the built-in catalog's find answers for 'cpu'/'gpu' (it names no entry so), without loading it: an
        # estimate with no device or a device kind stays well under a millisecond from a cold start
        return resolve_target(GENERIC_DEVICES[hardware.strip().lower()])
    if not isinstance(hardware, (str, Device, Instance)):  # fit(spec, None, 1): one line naming the argument (before,
        # an AttributeError '.id', probe13 D6)
        raise InputError(f"hardware: expected a device or instance name (text), a Device or an Instance, got "
                         f"{type(hardware).__name__} {short(hardware, 40)}")
    hw = load_catalog(hardware_files).find(hardware) if isinstance(hardware, str) else hardware
    if isinstance(hw, Instance):
        return hw.device, hw.device_count, hw.id, hw
    return hw, None, hw.id, None


def device_budget(hardware: str | Device | Instance, memory: int | None = None,
                  hardware_files: Sequence[str | Path] = ()) -> tuple[Device, int, int | None, Notes]:
    """What ``--device NAME`` means for a one-device estimate (``infer --device``, ``train --device``), the same as
    for ``fit``: the catalog device (an instance: its device; ``cpu``/``gpu``: a device known only by its kind), the
    devices it names (an instance's count, else 1), its usable memory (``memory`` when given, else a CPU instance's
    RAM, else the catalog's; fit's ``usable_memory`` rule) or None when none is known, and the notes behind that
    memory (``target_memory``)."""
    device, count, _, instance = resolve_target(hardware, hardware_files)
    usable, notes = target_memory(device, instance, memory)
    return device, count or 1, usable, notes


def workload_on_device(fields: dict[str, Any], asker: str, hardware_files: Sequence[str | Path] = ()
                       ) -> tuple[dict[str, Any], Device, str, Notes]:
    """The one resolver of a one-device estimate's ``device`` field (``infer``/``train --device``, the web API's
    ``device``, ``estimate_inference(device=...)``, ``estimate_training(device=...)``): ``fields`` (workload keyword
    fields; ``device`` a catalog device or instance, a Device or Instance, ``cpu``/``gpu``, or absent: ``gpu``) ->
    (the fields with ``device`` the workload's kind and ``memory`` the device's usable memory when one is known,
    the Device, the name it goes by (an instance's id, else the device's), the notes: the assumptions naming the
    device and where its memory came from, and ``target_memory``'s warnings). ``asker`` names the caller in the refusal of an instance of several devices."""
    hardware = fields.get("device")
    if hardware is None:
        hardware = "gpu"
    # 'detected' (or a Detection): this machine's target device, its hardware file as text (``detected_machine``, as
    # `infer --device detected` and fit read it); one device of it (several: estimate_training's fit_training)
    hardware, _, hardware_files = detected_machine(hardware, None, hardware_files)
    device, count, target, instance = resolve_target(hardware, hardware_files)
    if count is not None and count > 1:
        how = {"infer": f"(--device {device.id}, with --tp for a replica over several) or use `fit --device "
                        f"{target}`, which places the model over all {count}",
               "estimate_training": f"(device={device.id!r}, gpus={count}) or use `llmsizer train --device {target}`, "
                                    "which also picks the least-sharded ZeRO stage that fits"}.get(
            asker, f"(device={device.id!r}, with tensor_parallel for a replica over several) or use fit(model, "
                   f"{target!r}), which places the model over all {count}")
        raise InputError(f"{target} is an instance of {count} x {device.id}; {asker} sizes one device: name it {how}")
    usable, notes = target_memory(device, instance, fields.get("memory"))
    # the runtime a caller already decided (a named device resolved to its kind 'gpu' before) stays: 'gpu' itself
    # says none
    decided = training_device_fields(device) if asker == "estimate_training" else inference_device_fields(device)
    if device.origin != "generic":  # a named device decides its runtime and capability: one answer (review35 D6)
        device_decides(device, decided, fields)
    out = {**decided, **{k: v for k, v in fields.items()
                         if v is not None or k not in ("gpu_runtime", "gpu_capability")},
           "device": workload_device_kind(device)}
    if usable is not None:
        out["memory"] = usable
        cuda = cuda_memory(device, fields.get("memory")) if asker != "estimate_training" else None
        if cuda is not None and out.get("cuda_memory") is None:  # CUDA's total of the catalog's memory (serving)
            out["cuda_memory"] = cuda
    elif device.origin != "generic":  # a named device of no sourced memory: the estimate stands, no verdict (fit refuses)
        notes.warnings.append(no_memory_checked(device))
    return out, device, target, named_device_notes(device, notes, hardware)


def device_decides(device: Device, decided: dict[str, Any], fields: dict[str, Any]) -> None:
    """Refuse a ``gpu_runtime`` or ``gpu_capability`` given beside a named ``device`` that differs from the one the
    device decides (``decided``: ``inference_device_fields`` / ``training_device_fields``); the same value passes. The
    given one used to win in the estimate (``estimate_inference(..., device='h100-sxm', gpu_capability=80)`` sized
    vLLM's router weights as on an A100: 63,171,713,408 B vs 63,155,886,464 B for nemotron-3-nano-30b-a3b bf16) while
    the speed model and the format search read the device's, two answers for one device (review35 D6); a device
    known only by its kind (``gpu``, ``cpu``: origin 'generic') takes the fields given. ``fit``'s rule is
    :func:`hardware_decides`."""
    for k in ("gpu_runtime", "gpu_capability"):
        given, own = fields.get(k), decided.get(k)
        if k in decided and given is not None and given != own:
            raise InputError(f"{k} {given!r}: the device {device.id} decides it ({k} {own!r}), so the estimate "
                             f"and its speed read one device; drop {k}= or name a device that has it")


def alias_why(typed: object, device: Device) -> str:
    """The ``device`` assumption's why: where ``typed`` is one of the device's catalog aliases (not its id or name),
    that alias resolved to the id, which the answer is for (an alias such as 'h100' picks one of several variants:
    the catalog's, catalog/data/hardware); else the device's name."""
    if isinstance(typed, str):
        key = typed.strip().lower()
        if key not in (device.id.lower(), device.name.lower()) and key in (a.lower() for a in device.aliases):
            return (f"alias {typed.strip()!r} -> {device.id}: {device.name}; name another variant by its id "
                    f"(llmsizer hardware list {typed.strip()})")
    return device.name


def no_memory_checked(device: Device) -> str:
    """The warning of a one-device estimate on a named device with no sourced memory size and none given
    (``workload_on_device``): the breakdown is answered, but no memory budget was checked against it (``fit``, and the
    plan, refuse such a device instead: no verdict can be given)."""
    return (f"no memory budget was checked: {device.id} has no sourced memory size, so this estimate says nothing of "
            "whether it fits; give the memory with --memory (memory= in Python) or in a hardware file "
            "(--hardware-file)")


def named_device_notes(device: Device, notes: Notes, typed: object = None) -> Notes:
    """``target_memory``'s notes as an estimate on ``device`` states them: the device named first, then where its
    memory came from; cpu / gpu (known only by kind) add nothing to the answer. `infer --device`, `fit` (through
    ``fit_memory``), `train --device` (through ``fit_training``), ``estimate_inference(device=)`` and
    ``estimate_training(device=)`` name it so. ``typed``: the name the device was given by; one of its catalog
    aliases is said resolved (``--device h100``: "alias 'h100' -> h100-sxm", its PCIe and NVL variants being others)."""
    if device.origin == "generic":
        return Notes()
    notes.assumptions.insert(0, Assumption("device", device.id, False, alias_why(typed, device)))
    stand_in = runtime_stand_in(device)
    if stand_in is not None:  # the runtime whose context the estimate holds, when no rule knew the device's
        notes.assumptions.insert(1, stand_in)
    return notes


def numa_assumption(device: Device) -> Assumption | None:
    """What a detected CPU machine of several sockets computes and reads memory with, as its hardware file states it
    (``hardware detect --numa``; the bandwidth marked with ``sockets`` and llama.cpp's ``numa`` mode,
    catalog/detect.py ``_all_sockets``): the memory bandwidth (one socket's unless 'distribute') and the sockets whose
    cores, FLOP/s and TDP the file counts (``sockets_used``: one under 'isolate', where every thread runs on one node;
    the idle sockets still draw power, which that TDP leaves out). None for any other device. The speed and
    training-duration estimates name it, so a time at one socket's FLOP/s says so."""
    v = device.memory_bandwidth
    extra = dict(v.extra) if v is not None and device.kind == "cpu" else {}
    sockets, numa = extra.get("sockets"), extra.get("numa")
    if v is None or not isinstance(sockets, int) or sockets < 2 or not isinstance(numa, str):
        return None
    from ..catalog.detect import sockets_used  # the detect rule (subprocess and readers: loaded only here)

    share = "every socket's" if numa == "distribute" else "one socket's"
    used = sockets_used(sockets, numa)
    cores = f"{device.cores.base:g} cores, " if device.cores is not None and device.cores.base else ""
    watts = device.tdp.base if device.tdp is not None else None
    tdp = f" and TDP ({float(watts):g} W)" if watts else ""
    idle = (f"; the TDP counts the socket that computes, the {sockets - 1} idle socket(s) still draw power, not "
            "counted" if watts else "")
    compute = (f"{cores}FLOP/s{tdp} one socket's of {sockets} (numa isolate, as the file was detected: every thread on one node"
               f"{idle})" if used == 1 else f"{cores}FLOP/s{tdp} all {sockets} sockets'")
    return Assumption("numa", f"memory bandwidth {float(v.base) / 1e9:,.1f} GB/s ({share}: numa {numa}, as hardware "
                      "detect --numa states it; a process without NUMA pinning reads one socket's memory); "
                      + compute, numa == "off", v.derived)


def generic_device(kind: str) -> Device:
    """The device a workload's ``device`` kind ('gpu', 'cpu') names when no catalog device is given."""
    return GENERIC_DEVICES[kind]


# Interconnects that join GPUs in pairs only (an NVLink bridge: interconnects.json "nvlink-bridge", H100 NVL pair, RTX
# A6000): more than two such GPUs are no full NVLink mesh (vLLM's is_full_nvlink tests every pair).
PAIR_ONLY_LINKS = ("nvlink-bridge",)
# The GPU architectures whose Infinity Fabric (xGMI) board is a full mesh, every pair one xGMI hop: the 8-GPU OAM
# platforms of CDNA 3 (MI300X, MI325X) and CDNA 4 (MI350X, MI355X), each GPU with seven xGMI links, one to each peer
# (gpu.blog MI300X, the catalog's gpublog-mi300x: "Fully-connected 8-GPU xGMI mesh"; TechPowerUp's MI350 detail as
# techaiapp.com reprints it: "a point-to-point network of 153.6 GB/s links connecting each package with every other
# package on the node"; AMD's GIM 8.5.0.K release note, amd/MxGPU-Virtualization: XGMI "between 8 GPUs" for MI300X,
# MI325X, MI350X and MI355X). That is what vLLM and SGLang ask on ROCm before their custom all-reduce: every pair
# 1 hop of link type XGMI (vllm/platforms/rocm.py RocmPlatform.is_fully_connected, lines 341-359 @e2a00c7b; SGLang
# 0.5.23 distributed/device_communicators/custom_all_reduce_utils.py:354-371 is_full_nvlink under HIP, no P2P test
# there: "p2p is always enabled between XGMI connected GPUs"), and vLLM enables the kernel on gfx94x/gfx95x only
# (RocmPlatform.use_custom_allreduce, lines 467-472 @e2a00c7b), these same two generations. CDNA 2 (MI250X: two GCDs
# per package, not every GCD pair one hop) is not in it.
XGMI_MESH_ARCHITECTURES = ("cdna3", "cdna4")


def peer_to_peer(device: Device) -> bool:
    """Whether GPUs of ``device`` map each other's memory (NCCL's P2P transport; vLLM's and SGLang's ``_can_p2p``):
    the device's ``peer_to_peer`` field where its row or hardware file states it (the catalog's GeForce RTX 4090:
    false, NVIDIA/nccl#1127), else taken to have it (:func:`peer_to_peer_why` says which, where it is used)."""
    return device.peer_to_peer is None or bool(device.peer_to_peer.base)


def peer_to_peer_why(device: Device) -> str:
    """The words for :func:`peer_to_peer` on ``device`` in the assumptions that read it (``collective_bandwidth``,
    a custom ``tp_allreduce``): the stated flag and its source, or that none is stated."""
    v = device.peer_to_peer
    if v is None:
        return (f"peer-to-peer access assumed: {device.id} states no peer_to_peer (a hardware file's device entry may "
                "give peer_to_peer: false, as the catalog's rtx-4090 does: GeForce RTX 40, NVIDIA/nccl#1127)")
    return (f"peer-to-peer access {'stated' if v.base else 'none'}: {device.id} peer_to_peer {str(bool(v.base)).lower()}"
            f" ({v.source}, {v.date})")


# A memcpy within one memory (an Apple chip's unified memory, ``host_link``) passes each byte through it twice: read
# from the source, written to the destination.
APPLE_COPY_PASSES = 2


def host_link(device: Device) -> tuple[float, str]:
    """The one rule for the bandwidth [B/s per direction] between ``device`` and host memory, and the words naming
    the link, read by every host-transfer term (estimate/duration.py: paged optimizer states, formulas/
    training_time.py eq. (12); FSDP / ZeRO CPU-offload copies, formulas/cpu_offload_time.py eqs. (H1)-(H3);
    activation offload, formulas/activation_offload.py eq. (AO1)):

    - a device whose catalog row names a ``host_interconnect`` (a Grace superchip's GPU: NVLink-C2C to its Grace CPU,
      not a PCIe slot): that interconnects.json link's stated per-direction figure (gb200: nvlink-c2c-gb200-gpu,
      NVIDIA's 900 GB/s bidirectional / 2 directions / the superchip's 2 GPUs sharing its Grace CPU's link = 225 GB/s,
      and gb300, two GPUs per Grace too; gh200: nvlink-c2c, the whole 450 GB/s, one GPU per Grace; its source and date
      in the words);
    - a card whose catalog interconnect is a PCIe link: that link's stated per-direction figure (its
      ``interconnect_bandwidth``, else the interconnect's), the card's own slot, so an electrically x8 card keeps its
      half link (rtx-5060: PCIe Gen5 x8, 32 GB/s);
    - else the x16 link of the device's ``pcie`` generation: the catalog's ``pcie<N>`` interconnect (interconnects.json:
      Gen3 16, Gen4 32, Gen5 64, Gen6 128 GB/s per direction). These are PCI-SIG's published x16 rates halved
      (PCI-SIG, "PCI Express 6.0 Specification" announcement table: x16 bidirectional 32 / 64 / 128 / 256 GB/s at
      8 / 16 / 32 / 64 GT/s); after Gen3-5's 128b/130b encoding the exact line rate is 15.75 / 31.5 / 63 GB/s, 1.6 %
      under them. The line rate, no achievable share (none is sourced for host copies);
    - an Apple chip: no link; its host memory is the same unified memory (``apple_host_memory``), and a weight
      that llama.cpp keeps in a CPU buffer is copied into a Metal buffer before Metal runs its product
      (ggml-org/llama.cpp@0048056b ggml/src/ggml-metal/ggml-metal.cpp ``ggml_backend_metal_device_supports_buft``
      takes only Metal's shared, private and mapped buffer types, and ``ggml_backend_metal_device_offload_op`` runs a
      MUL_MAT / MUL_MAT_ID of 32 rows or more on Metal; ggml-metal-device.m ``ggml_metal_buffer_set_tensor``: into a
      shared buffer that copy is a ``memcpy``): a copy within one memory reads and writes each byte, so it moves at
      half the chip's memory bandwidth (``APPLE_COPY_PASSES``; the line rate, no achievable share, as for PCIe);
    - else (no ``pcie`` field: a user's hardware file, a generic ``gpu``) efficiency.HOST_LINK_BANDWIDTH, PCIe Gen4
      x16, stated as the fallback."""
    if device.kind == "apple" and device.bandwidth:
        rate = float(device.bandwidth) / APPLE_COPY_PASSES
        return rate, (f"{device.id}'s unified memory: no link, a memcpy from llama.cpp's CPU buffer into a Metal "
                      f"buffer (ggml-metal.cpp supports_buft / offload_op), each byte read and written: "
                      f"{float(device.bandwidth) / 1e9:.4g} GB/s / {APPLE_COPY_PASSES} = {rate / 1e9:.4g} GB/s")
    cat = load_catalog()
    host = cat.interconnect(device.host_interconnect)
    if host is not None:
        v = host.bandwidth
        return float(v.base), (f"{device.id}'s host link: {host.name}, {float(v.base) / 1e9:.4g} GB/s per direction "
                               f"(interconnects.json {host.id}, {v.source}, {v.date})")
    ic = cat.interconnect(device.interconnect)
    if ic is not None and ic.kind == "pcie":
        v = device.interconnect_bandwidth or ic.bandwidth
        return float(v.base), (f"{device.id}'s own PCIe link: interconnect {ic.id} at {float(v.base) / 1e9:.4g} GB/s "
                               f"per direction ({v.source})")
    gen = cat.interconnect(f"pcie{device.pcie[3:]}") if device.pcie else None
    if gen is not None:
        v = gen.bandwidth
        return float(v.base), (f"{device.id}'s host link: pcie {device.pcie}, {gen.name} at {float(v.base) / 1e9:.4g} "
                               f"GB/s per direction (interconnects.json {gen.id}, {v.source}; PCI-SIG x16 rate)")
    return E.HOST_LINK_BANDWIDTH, (f"{device.id} states no PCIe generation: the fallback {E.HOST_LINK_SOURCE}")


def nvlink_link_bandwidth(device: Device, link_bandwidth: float) -> tuple[float, float | None]:
    """The one rule for what bandwidth a collective between GPUs of one machine reaches on ``device``'s link of line
    rate ``link_bandwidth`` [B/s per direction], read by training's collectives (estimate/duration.py
    ``nccl_bus_bandwidth``) and serving's tensor-parallel all-reduces (estimate/speed.py ``layout``): on an NVLink GPU
    of known compute capability (the device's catalog interconnect an NVLink) formulas/network.py eq. (12), NCCL's
    per-link NVLink figure over the line rate (NVIDIA/nccl src/graph/topo.h ``ncclTopoNVLinkBw``); else the line rate.
    Returns (bandwidth, the share s(cc) applied or None)."""
    ic = load_catalog().interconnect(device.interconnect) if device.kind == "gpu" else None
    share = nccl_nvlink_share(device.capability) if ic is not None and ic.kind == "nvlink" else None
    return (link_bandwidth, None) if share is None else (link_bandwidth * share, share)


def nvlink_link_why(device: Device, link_bandwidth: float, share: float) -> str:
    """The words for :func:`nvlink_link_bandwidth`'s share where an assumption states it."""
    return (f"formulas/network.py eq. (12): NCCL's per-link NVLink bandwidth on compute capability {device.capability} "
            f"over the line rate (NVIDIA/nccl src/graph/topo.h ncclTopoNVLinkBw), {share:.3f} x "
            f"{link_bandwidth / 1e9:.4g} GB/s per direction")


def nvlink_mesh_for(device: Device, instance: Instance | None, count: int,
                    hardware_files: Sequence[str | Path] = ()) -> bool | None:
    """Whether every pair of ``count`` GPUs of one replica is joined directly by the GPU fabric, what vLLM's and
    SGLang's is_full_nvlink / is_fully_connected ask before their custom all-reduce (estimate/engines.py
    ``tp_allreduce``): NVLink (not a pair-only bridge past two GPUs), or Infinity Fabric on a CDNA 3 / CDNA 4 board
    (``XGMI_MESH_ARCHITECTURES``, every pair one xGMI hop). Read from the instance's interconnect, else the device's
    (as ``fit.link_bandwidth_for``); None when neither names one."""
    cat = load_catalog(hardware_files)
    ident = instance.interconnect if instance is not None and instance.interconnect else device.interconnect
    ic = cat.interconnect(ident)
    if ic is None:
        return None
    if ic.kind == "infinity-fabric":
        return device.architecture in XGMI_MESH_ARCHITECTURES
    return ic.kind == "nvlink" and (ident not in PAIR_ONLY_LINKS or count <= 2)


# What an fp32 matmul (cuBLAS sgemm / bmm) runs at on a CUDA GPU: IEEE fp32 on the CUDA cores by default, since
# PyTorch 1.12: torch 2.13.0 include/ATen/Context.h lines 496-499 (float32_matmul_precision HIGHEST unless
# TORCH_ALLOW_TF32_CUBLAS_OVERRIDE), torch/backends/cuda/__init__.py lines 159-189 (matmul.allow_tf32 reads and sets
# it); TF32 tensor cores only where the run turns them on (allow_tf32 = True, torch.set_float32_matmul_precision
# ("high"), torch/__init__.py line 1618; HF Trainer --tf32). TF32 tensor cores exist from compute capability 8.0
# (NVIDIA Ampere architecture whitepaper); below it allow_tf32 changes nothing.
TF32_DEFAULT_WHY = ("PyTorch's default since 1.12: fp32 matmuls in IEEE fp32 (torch.backends.cuda.matmul.allow_tf32 "
                    "False, float32_matmul_precision 'highest': torch 2.13.0 ATen/Context.h lines 496-499)")
TF32_MIN_CAPABILITY = 80


# On ROCm, torch's allow_tf32 is inert unless the process sets HIPBLASLT_ALLOW_TF32=1 (pytorch aten/src/ATen/
# Context.cpp setAllowTF32CuBLAS / allowTF32CuBLAS under USE_ROCM: "torch.backends.cuda.matmul.allow_tf32 is not
# supported on ROCm by default. Please set environment variable HIPBLASLT_ALLOW_TF32=1 to enable it."; test_linalg.py
# _hip_allow_tf32: "tf32 is behind a flag because the TF32 support is new and only for MI300+").
ROCM_TF32_ENV = "HIPBLASLT_ALLOW_TF32=1"


def fp32_matmul_peak(device: Device, tf32: bool = False) -> tuple[float | None, str, str | None]:
    """(dense peak FLOP/s, its key, a warning or None) an fp32 matmul is timed at on ``device``: the one rule of the
    training GEMMs of precision 'fp32', SDPA's math kernel's fp32 score matmuls (estimate/duration.py) and an fp32
    prefill (estimate/speed.py). Without ``tf32``, and on a non-GPU: the FP32 peak. ``tf32`` on a GPU:

    - its sourced dense TF32 tensor peak (an AMD part: warned that ROCm torch needs ``HIPBLASLT_ALLOW_TF32=1``);
    - no TF32 units (compute capability below 8.0, or a catalog ``flops.tf32`` of null whose note says the
      architecture has none, e.g. CDNA 2 / CDNA 4): the FP32 peak, warned that tf32 changes nothing;
    - TF32 units but no sourced figure: None, refused with a warning (the caller does not time it): the FP32 peak
      would be a silent 2-8x under-rate on a data-centre part, the BF16 one a 2x over-rate.

    None is also returned where the FP32 peak needed is unsourced (the caller warns what it cannot time)."""
    warning = None
    if tf32 and device.kind == "gpu":
        p, key = device.peak_flops("tf32")
        if p is not None:
            rocm = (f"{device.id} is an AMD GPU: ROCm torch applies allow_tf32 only with {ROCM_TF32_ENV} in the "
                    "environment (pytorch ATen/Context.cpp setAllowTF32CuBLAS); without it its fp32 matmuls run at the "
                    "FP32 peak" if device.vendor == "AMD" else None)
            return p, key, rocm
        cap = device.capability
        none_why = device.missing.get("flops.tf32")
        if cap is not None and cap < TF32_MIN_CAPABILITY:
            warning = (f"{device.id} has no TF32 tensor cores (compute capability {cap // 10}.{cap % 10} < 8.0): tf32 "
                       "changes nothing, its fp32 matmuls are timed at the FP32 peak")
        elif none_why is not None and none_why.startswith("no TF32"):
            warning = (f"{device.id} has no TF32 matrix units ({none_why}): tf32 changes nothing, its fp32 matmuls "
                       "are timed at the FP32 peak")
        else:
            return None, key, (f"{device.id} has no sourced TF32 peak: its fp32 matmuls under tf32 are not timed "
                               "(the FP32 peak would under-rate them, the BF16 one over-rate them; give flops.tf32 in a "
                               "--hardware-file entry)")
    elif tf32:
        warning = f"tf32 is a CUDA GPU setting (cuBLAS): it changes nothing on {device.id} ({device.kind})"
    p, key = device.peak_flops("fp32")
    return p, key, warning

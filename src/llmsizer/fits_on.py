"""Which catalog models fit one machine ("what fits my machine"): for each model, recommend's evaluation of that one
candidate (``recommend.best_option_on``: the highest-quality format on the engine's ladder that fits and serves every
sequence at reading speed or faster), ranked. The one answer that ``llmsizer models --fits-on --json`` prints, the
web's ``/api/v1/models/fits-on`` returns and ``llmsizer.models_that_fit`` gives (``ModelsThatFit.to_dict``); the
CLI's table and the web page render it.

The hardware is a catalog device or instance name (with ``hardware_files``' entries), a Device or Instance,
``"detected"`` (this machine, detected in-process by ``catalog/detect.py``: no file written) or a ``Detection``
(``llmsizer.detect_hardware()``'s answer): a detected machine is answered for its first device (its GPUs, else its
CPU or Apple chip), that device's count when no count is given (``Detection.target``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import models as catalog
from .catalog.detect import Detection, detected_target
from .catalog.hardware import DETECTED, Device, HardwareText, Instance, names_detected
from .errors import FieldError
from .estimate.device import own_memory_refusal
from .estimate.engines import newer_release_note
from .estimate.fit import devices_text, instances_for, target_and_count
from .estimate.formats import format_quality
from .formulas.params import count_params
from .formulas.weight_formats import stored_format
from .recommend import Constraints, Option, best_option_on, experts_in_host, reading_floor_unchecked
from .result import envelope, json_data
from .specs import InferenceWorkload, normalize_engine

# The order of ``models --fits-on``'s rows (CLI table, JSON ``models``, the web page and ``models_that_fit`` alike:
# ``ranked``), stated in the answer (``order``) so that a large model in a low-quality format is not read as the best
# choice.
FITS_ON_ORDER = ("ranked: the models that fit first, then by parameter count, largest first (not by quality: a "
                 "bigger model may fit only in a lossy format; the quality column is that format's perplexity "
                 "increase on Llama-3-8B from llama.cpp's quantize table, 'below Q4_0' where it loses more than Q4_0; "
                 "a model published quantized: 'as released' in its own format, else not rated)")

@dataclass(frozen=True)
class ModelsThatFit:
    """The answer of :func:`models_that_fit`: ``answer`` is the JSON object ``models --fits-on --json`` prints
    (``to_dict``); ``options`` the (catalog entry, recommend ``Option``) pairs in the answer's order."""

    answer: dict[str, Any]
    options: tuple[tuple[Any, Option], ...]

    @property
    def fitting(self) -> list[str]:
        """The ids of the models that fit (on the GPUs, or with experts in host memory whose RAM was checked)."""
        return list(self.answer["fitting"])

    @property
    def models(self) -> list[dict[str, Any]]:
        """One row per model, ranked (:data:`FITS_ON_ORDER`): format, quality, engine, memory, tokens/s, reasons."""
        return list(self.answer["models"])

    @property
    def devices_text(self) -> str:
        """The devices the models were sized on, as fit names them ('8 x h100-sxm (aws-p5.48xlarge)')."""
        return str(self.answer["devices_text"])

    def to_dict(self) -> dict[str, Any]:
        return json_data(dict(self.answer))

    def __str__(self) -> str:
        from .render.fits_on_text import fits_on_text
        return fits_on_text(self)


def ranked(opts: list[tuple[Any, Option]]) -> list[tuple[Any, Option]]:
    """The answer's rows in :data:`FITS_ON_ORDER`: fits first, then the most parameters first (stable)."""
    return sorted(opts, key=lambda p: (p[1].status != "meets", -count_params(p[0].spec()).total))


def fitting(models: list[dict[str, Any]]) -> list[str]:
    """The ids of the models (the answer's rows) that fit: on the GPUs (status meets), or with the experts of
    some layers in host memory whose RAM was checked (``host_memory``: what ``fit --auto --host-memory`` calls
    FITS, exit 0). Unchecked host RAM is no claim (fit --auto without it does not say FITS either)."""
    return [m["id"] for m in models if m["status"] == "meets"
            or (m["experts_in_host"] or {}).get("host_memory_checked")]


def models_that_fit(hardware: str | Device | Instance | Detection, query: str = "", *, count: int | None = None,
                    context: int | None = None, concurrency: int | None = None, output_tokens: int | None = None,
                    kv_dtype: str | None = None, engine: str | None = None, engine_version: str | None = None,
                    allow_long_context: bool | None = None, memory: int | None = None,
                    host_memory: int | None = None, headroom: float | None = None, metric: str | None = None,
                    fit_target: int | None = None, gpus_per_node: int | None = None,
                    images: int | None = None, image_size: tuple[int, int] | None = None,
                    video_frames: int | None = None, video_size: tuple[int, int] | None = None,
                    pan_and_scan: bool | None = None,
                    hardware_files: Sequence[str | Path | HardwareText] = ()) -> ModelsThatFit:
    """Which catalog models (those ``query`` matches, every one by default) fit ``count`` x ``hardware``, each at the
    highest-quality weight format that fits and serves ``concurrency`` sequences of ``context`` tokens at reading
    speed or faster, with its engine, memory per device and tokens/s; ranked (:data:`FITS_ON_ORDER`).

    ``hardware``: a device or instance name (``hardware_files`` add entries), a Device or Instance, ``"detected"``
    (this machine, detected now) or a ``Detection`` (``detect_hardware()``'s). Every other argument is
    ``llmsizer models --fits-on``'s option of that name (None: its default): ``memory``, ``host_memory`` and
    ``fit_target`` in bytes, ``headroom`` a share, ``engine`` one of the engines (None: each model's default on
    that hardware), ``metric`` allocated / reserved / nvidia-smi. ``.to_dict()`` is the CLI's ``--json`` answer."""
    asked = hardware
    # 'detected' with hardware files: this machine is sized, the files only add entries (probe27 N3: said once)
    files_aside = (f"'{DETECTED}' sizes this machine (detected now), not a device of the hardware file(s) given, "
                   "which only add entries: name the file's device to size it") \
        if names_detected(asked) and hardware_files else None
    hardware, count, detected_files = detected_target(hardware, count, hardware_files)
    files: list[Any] = detected_files  # paths, or HardwareText (the web's pasted entry, a detected machine)
    found = catalog.search_some(query)
    context = context or InferenceWorkload.context
    concurrency = concurrency or InferenceWorkload.concurrency
    engine = normalize_engine(engine) if engine else None
    # fit's rule for the target and count: an instance's own, or the whole instances a multiple of it is
    device, n, _, instance = target_and_count(hardware, count, files, instances=True)
    if host_memory is not None and (refused := own_memory_refusal(device)) is not None:
        raise FieldError("host_memory", refused)  # host RAM beside GPUs: fit's words (estimate/device.py)
    constraints = Constraints(headroom=headroom)
    media: dict[str, Any] = {k: v for k, v in (("images", images), ("image_size", image_size), ("video_frames", video_frames),
                               ("video_size", video_size), ("pan_and_scan", pan_and_scan)) if v is not None}
    text_only = 0
    if media.get("images") or media.get("video_frames"):  # images apply to models with a vision encoder only
        seen = len(found)
        found = [e for e in found if e.spec().vision is not None]
        text_only = seen - len(found)
    opts = [(e, best_option_on(e.spec(), hardware, count, context=context, concurrency=concurrency,
                               output_tokens=output_tokens, hardware_files=files, engine=engine,
                               memory=memory, constraints=constraints, engine_version=engine_version,
                               kv_dtype=kv_dtype, allow_long_context=allow_long_context, metric=metric,
                               fit_target=fit_target, gpus_per_node=gpus_per_node, **media))
            for e in found]
    given = {k: v for k, v in (("output_tokens", output_tokens), ("kv_dtype", kv_dtype), ("engine", engine),
                               ("engine_version", engine_version),
                               ("allow_long_context", allow_long_context), ("memory", memory),
                               ("host_memory", host_memory), ("headroom", constraints.headroom), ("metric", metric),
                               ("fit_target", fit_target), ("gpus_per_node", gpus_per_node), *media.items())
             if v is not None}
    if text_only:
        given["text_only_left_out"] = text_only
    newer = newer_release_note(engine, engine_version) if engine else None  # fit's warning, as recommend's
    # a device of unknown bandwidth: judged on memory only, said once (each fitting model's reasons say it too)
    unchecked = reading_floor_unchecked(device)
    host_args: dict[str, Any] = {"context": context, "concurrency": concurrency, "memory": memory, "headroom": constraints.headroom,
                 "fit_target": fit_target, "host_memory": host_memory, "hardware_files": files,
                 "kv_dtype": kv_dtype, "output_tokens": output_tokens, "gpus_per_node": gpus_per_node, **media}
    # the devices the models are sized on, fit's count (an instance: its devices, count / them the instances it is),
    # and the line that names them, the core's (estimate/fit.py devices_text): the CLI's header and the web page
    # show it verbatim
    k = instances_for(n, instance)
    on = {"device": device.id, "count": n, "instances": k,
          **({"devices_per_instance": instance.device_count} if instance else {}),
          "devices_text": devices_text(n, device.id, k, instance.id if instance else None)}
    opts = ranked(opts)
    # the hardware as asked ('detected' stays so; the device it resolved to is ``device``)
    named = asked if isinstance(asked, str) else hardware if isinstance(hardware, str) else hardware.id
    data: dict[str, Any] = envelope("models-fits-on", {"hardware": named, **on, "context": context,
                                                       "concurrency": concurrency, **given,
            "order": FITS_ON_ORDER,
            "models": [{"id": e.id, **o.to_dict(), "params": count_params(e.spec()).total,
                        "quality": format_quality(o.weights_format, stored_format(e.spec())[0])
                        if o.status == "meets" else None,
                        "experts_in_host": experts_in_host(e.spec(), o, hardware, count, **host_args)}
                       for e, o in opts],
            "warnings": [w for w in (files_aside, unchecked, newer) if w]})
    data["fitting"] = fitting(data["models"])  # the count the CLI and the web page print
    return ModelsThatFit(data, tuple(opts))


__all__ = ["FITS_ON_ORDER", "ModelsThatFit", "fitting", "models_that_fit", "ranked"]

"""`llmsizer infer`: inference memory for a model and workload, and the reverse questions."""

from __future__ import annotations

import argparse
from typing import Any

from ..estimate.device import resolve_target
from ..estimate.inference import estimate_inference
from ..estimate.inference.compose import inference_workload
from ..result import Estimate
from ..specs import InferenceWorkload, ModelSpec
from .commands import COMMAND_HELP
from .common import add_model_args, bytes_arg, emit_json, exit_code, resolve_model
from .workload_args import (
    add_fit_target_arg,
    add_headroom_arg,
    add_inference_args,
    add_metric_arg,
    inference_fields,
    refuse_hardware_file_alone,
)

EPILOG = """examples:
  llmsizer infer llama-3.1-8b --context 8192 --concurrency 4
  llmsizer infer qwen3-30b-a3b --weights q4_k_m --engine llamacpp --memory 24GiB
  llmsizer infer qwen2.5-7b --engine vllm --memory 80GiB --context 32k --json
  llmsizer infer llama-3.1-8b --memory 24GiB --max-context
  llmsizer infer mistral-7b-v0.1 --device cpu --weights q4_0 --engine llamacpp
  llmsizer infer --params 7B --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --context 16k
  llmsizer infer gemma-3-27b-it --images 4 --context 8k --concurrency 4
  llmsizer infer qwen2.5-vl-7b-instruct --images 2 --image-size 1920x1080 --engine vllm --memory 24GiB
"""


def register(sub: Any) -> None:
    p = sub.add_parser("infer", help=COMMAND_HELP["infer"],
                       description="Memory needed to serve MODEL: weights + KV cache + activations + runtime "
                                   "overhead, each with its formula, source and range.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    add_inference_args(p)
    p.add_argument("--device", help="a device or instance from `llmsizer hardware list`, as in `fit` and `train`: "
                   "where the tensors live (cpu: all in RAM) and, without --memory, its memory is the budget; "
                   "cpu and gpu name a device known only by its kind; 'detected' this machine, as `hardware detect` reads it "
                   "(default gpu)")
    p.add_argument("--memory", type=bytes_arg, help="device memory (or RAM for --device cpu), e.g. 24GiB, 80GB; "
                   "with it the answer says whether it fits (exit code 1 when it does not)")
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                   help="extra hardware (JSON/YAML) for --device, as in `fit` and `train`")
    add_headroom_arg(p)
    add_fit_target_arg(p)
    add_metric_arg(p)
    p.add_argument("--max-context", action="store_true", help="report the largest context that fits --memory")
    p.add_argument("--max-concurrency", action="store_true", help="report the largest concurrency that fits --memory")
    p.add_argument("--verbose", "-v", action="store_true", help="show full formulas")
    p.add_argument("--json", action="store_true", help="machine-readable output (same structure as Estimate.to_dict())")
    p.set_defaults(func=cmd_infer)


def infer_answer(spec: ModelSpec, args: argparse.Namespace) -> tuple[dict[str, Any], int, Estimate, InferenceWorkload]:
    """The answer of `infer` (its ``--json`` data and exit code) for ``spec`` and the parsed flags; the web API
    returns the same data."""
    fields = inference_fields(args)
    for k in ("memory", "headroom", "fit_target"):
        if getattr(args, k) is not None:
            fields[k] = getattr(args, k)
    refuse_hardware_file_alone(args)
    if args.device is not None:  # what fit and train size for (estimate/device.py workload_on_device)
        fields["device"] = args.device
        if args.hardware_file:  # the file's entry itself (an instance, else a device), as fit and train read it
            device, _, _, instance = resolve_target(args.device, args.hardware_file)
            fields["device"] = instance or device
    # the core decides the device's kind and memory and, with no --engine, the engine fit would run there
    workload, _ = inference_workload(fields, "infer", spec)
    est = estimate_inference(spec, **fields)
    data = est.to_dict()
    reverse: dict[str, int] = {}
    if args.max_context or args.max_concurrency:
        from ..estimate.inference.reverse import max_concurrency, max_context, reverse_notes

        # the fields the estimate was asked with, as they were given: a named device stays named (its memory and
        # CUDA's total of it are the core's, estimate/device.py), --memory stays a given budget (CUDA's total taken as
        # it). Handing the named device's memory on as a given budget asked another question: vLLM's pool then read
        # 79.65 GiB, not the device's CUDA total 79.18 GiB, and deepseek-r1 at TP 16 on h100 answered 96 sequences
        # beside the estimate's 94 (servepp report). The engine is the one the estimate chose.
        memory: Any = fields.get("memory")  # None: a named device's memory, else the budget is asked for
        rest = {k: v for k, v in fields.items() if k != "memory"}
        rest["engine"] = workload.engine
        if args.max_context:
            reverse["max_context"] = max_context(spec, memory, **{k: v for k, v in rest.items() if k != "context"})
            if "media_tokens" in est.details:  # text tokens above; each sequence holds its images' too (media.py)
                reverse["max_context_media_tokens"] = int(est.details["media_tokens"])
        if args.max_concurrency:
            reverse["max_concurrency"] = max_concurrency(spec, memory,
                                                         **{k: v for k, v in rest.items() if k != "concurrency"})
        data["reverse"] = reverse
        data["reverse_notes"] = reverse_notes(spec, est, reverse)
    # the engine's refusal of the context (estimate/context_window.py) is an answer that it will not run, with or
    # without a memory to check: exit 1, as a verdict that it does not fit
    return data, exit_code(False if est.details.get("engine_refusal") else est.details.get("fits")), est, workload


def cmd_infer(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    data, code, est, workload = infer_answer(spec, args)
    if args.json:
        emit_json(data)
        return code
    from ..render.safe import say  # the text answer only (--json is the start-up the benchmark times)
    from ..render.text import render_estimate

    reverse = data.get("reverse", {})
    say(render_estimate(est, verbose=args.verbose))
    if "max_context" in reverse:
        # the exact count, as `train --max-seq` says it: "40.19K" (decimal) read back as --context 40k (= 40,960:
        # k is 1024 for tokens) would not fit
        # with images, the count is text tokens: the core's reverse note (below) says what each sequence adds
        plus = " text tokens" if reverse.get("max_context_media_tokens") else " tokens"
        say(f"largest context that fits: {reverse['max_context']:,}{plus} at concurrency {workload.concurrency}"
            if reverse["max_context"] else
            f"no context fits: even {max(1, workload.output_tokens or 0):,} token(s) (the shortest context, which "
            f"holds the output) at concurrency {workload.concurrency} do not")
    if "max_concurrency" in reverse:
        say(f"largest concurrency that fits: {reverse['max_concurrency']:,} sequences of {workload.context:,} tokens"
              if reverse["max_concurrency"] else f"no concurrency fits: one sequence of {workload.context:,} tokens "
              "does not")
    for note in data.get("reverse_notes", ()):  # the core's (estimate/inference/reverse.py reverse_notes)
        say(f"note: {note}")
    return code

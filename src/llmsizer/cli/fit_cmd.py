"""`llmsizer fit MODEL --device NAME [--count N]`: does a workload fit on N x device, and how fast will it run."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..numbers import COUNT, KWH_PRICE, MAX_GPUS, REQUEST_RATE
from ..render.safe import say
from ..specs import ModelSpec
from ..specs.workload import InferenceWorkload, engine_rule_text, normalize_engine
from ..units import format_usd
from .commands import COMMAND_HELP
from .common import (
    add_model_args,
    bytes_arg,
    emit_json,
    exit_code,
    float_arg,
    int_arg,
    list_of,
    money_arg,
    resolve_model,
)
from .workload_args import (
    add_fit_target_arg,
    add_headroom_arg,
    add_inference_args,
    add_metric_arg,
    add_training_args,
    inference_fields,
    refuse_serving_flags,
    refuse_training_flags,
    refuse_untimed_utilization,
    training_fields,
)

if TYPE_CHECKING:
    from ..estimate.duration import Duration
    from ..estimate.fit import FitResult
    from ..estimate.llamacpp_fit import LlamaCppFit

# the estimators and the text renderer are imported where a fit is made, not with the parser (probe33 D7: `fit
# --help` imported every estimator, estimate.fit and estimate.duration, to print its help)

EPILOG = """examples:
  llmsizer fit llama-3.1-70b-instruct --device h100-sxm --count 2     # exit 1, does not fit: the hint names fp8
  llmsizer fit llama-3.1-70b-instruct --device p5.48xlarge --concurrency 64 --json
  llmsizer fit llama-3.1-8b --device rtx-4090 --weights q4_k_m --context 8k
  llmsizer fit qwen2.5-1.5b-instruct --device desktop-ddr5-4800-2ch --memory 16GiB --weights q8_0
  llmsizer fit llama-3.1-8b --device apple-m3-max-36gb --headroom 0.2
  llmsizer fit llama-3.1-8b --device a100-sxm-80gb --count 8 --train --tokens 10B --seq 4096
  llmsizer fit llama-3.1-8b --device h100-sxm --train --method lora --batch 4 --seq 4096 --tokens 1B --grad-checkpointing full
  llmsizer fit llama-3.1-70b-instruct --device rtx-3090 --count 2 --engine llamacpp --weights q4_k_m -ts 1,1
  llmsizer fit qwen3-30b-a3b --device rtx-4090 --engine llamacpp --weights q4_k_m --auto --context 64k
  llmsizer fit llama-3.3-70b-instruct --device rtx-3090 --engine llamacpp --weights q4_k_m --auto --free 23GiB,11GiB

serving on several devices (vLLM, SGLang, transformers): of the tensor-parallel degrees that divide --count and
that vLLM can shard the heads over, each replica runs the one whose layout delivers the most output tokens/s at
--concurrency (every replica at its share of it, idle ones adding none; a tie to the smaller degree that fits at its high end too) among those
that fit within one machine (an instance's devices, or 8), else the smallest across machines that fits; the other
devices run replicas. The text lists each layout's tokens/s, fastest first.

--auto (llama.cpp): choose the context (unless --context is given), -ngl, --tensor-split and --n-cpu-moe so that
each GPU keeps --fit-target free, in the order of llama.cpp's own --fit (common/fit.cpp), and print the flags.
Every llama.cpp answer on a GPU keeps llama.cpp's margin, --fit-target (default 1024 MiB per GPU,
common/common.h:483), or the --headroom share given instead: fit of the printed flags gives --auto's verdict.

exit code: 0 it fits, 1 it does not, 2 bad input
"""


def register(sub: Any) -> None:
    p = sub.add_parser("fit", help=COMMAND_HELP["fit"],
                       description="Check that MODEL fits on COUNT x DEVICE (a device or a cloud instance) with a "
                                   "stated headroom, and estimate TTFT and tokens/s there (or, with --train, the "
                                   "training memory and duration). Memory and verdict are the same as `infer "
                                   "--memory` / `train --memory` give for the device's memory.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--device", required=True, help="device or instance (see `llmsizer hardware list`); 'detected': this machine, detected "
                   "as `hardware detect` reads it (its GPUs, else its CPU), no file written")
    p.add_argument("--count", type=int_arg(COUNT), help="devices (default: the instance's count, else 1); with an "
                   "instance, a whole multiple of its devices is that many instances")
    add_headroom_arg(p)
    add_fit_target_arg(p)  # fit and fit --auto keep the same margin (estimate/verdict.py margin_rule)
    add_metric_arg(p)
    p.add_argument("--memory", type=bytes_arg, help="memory per device, overriding the catalog (RAM for a CPU)")
    p.add_argument("--train", action="store_true", help="fit a training run instead of serving")
    a = p.add_argument_group("llama.cpp auto-fit")
    a.add_argument("--auto", action="store_true",
                   help="llama.cpp: choose -c, -ngl, -ts and --n-cpu-moe to fit each GPU, or an Apple chip's Metal "
                        "working set (prints the flags)")
    a.add_argument("--free", type=list_of(bytes_arg, "sizes", MAX_GPUS),
                   help="free memory of each GPU for --auto, e.g. 23GiB,11GiB, each at most the --device's memory "
                        "(mixed cards: name the largest) (default: --memory or the catalog memory, x --count)")
    a.add_argument("--host-memory", type=bytes_arg, help="llama.cpp on GPUs: host RAM for what it keeps on the CPU (-ngl below all layers, "
                        "--n-cpu-moe, token embeddings), checked with or without --auto")
    p.add_argument("--host-device", help="llama.cpp: the host CPU (catalog name) whose memory bandwidth runs the "
                   "layers and experts kept on the CPU, for the decode speed of the split (an Apple chip is its own "
                   "host: the default there)")
    add_inference_args(p, tensor_parallel=False, attention=False, speed=True,
                       engine_default=f"default: {engine_rule_text('--device gpu')}")
    p.add_argument("--request-rate", type=float_arg(REQUEST_RATE),
                   help="requests arriving per second at random (a Poisson process, as `vllm bench serve "
                        "--request-rate`) instead of --concurrency: the requests in flight are derived (Little's law, "
                        "formulas/serving_queue.py eq. Q10), with the wait for admission where vLLM / SGLang admit "
                        "fewer (a load-dependent server, eq. Q13); a rate this deployment cannot carry (the server's capacity, the "
                        "decode's, or what the admitted sequences serve) does not fit: exit 1, "
                        "naming the requests/s it carries; a malformed rate, or one given with --concurrency, exit 2")
    add_training_args(p)
    p.add_argument("--kwh-price", type=money_arg(KWH_PRICE, "kWh"),
                   help="USD per kWh ('0.12', '$0.12/kWh'; 0: free power): adds the power cost of owned hardware "
                        "(TDP x count)")
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_fit)


def fit_answer(spec: ModelSpec, args: argparse.Namespace
               ) -> tuple[dict[str, Any], int, FitResult | LlamaCppFit, Duration | None]:
    """The answer of `fit` (its ``--json`` data and exit code) for ``spec`` and the parsed flags; the web API
    returns the same data. With --auto the result is llama.cpp's auto-fit (LlamaCppFit)."""
    from ..estimate.fit import fit, fit_training
    if args.train:
        refuse_serving_flags(args)
        refuse_untimed_utilization(args)
        fields = training_fields(args)
        r = fit_training(spec, args.device, args.count, headroom=args.headroom, memory=args.memory,
                         hardware_files=args.hardware_file, tokens=args.tokens, utilization=args.utilization,
                         kwh_price=args.kwh_price, **fields)
        return r.to_dict(), exit_code(r.fits), r, r.duration
    fields = inference_fields(args)
    fields.pop("gpus", None)  # --gpus is the training flag here; serving uses --count
    # --tp serving: the degree each replica runs (estimate/fit.py fit's ``tensor_parallel``, as the Python API takes
    # it); left out, fit picks it from --count and --concurrency
    pinned_tp, args.tp = args.tp, None
    # --pp serving: the pipeline stages of each replica (InferenceWorkload.pipeline_parallel); without --tp, fit picks
    # each stage's degree as it picks --tp (estimate/fit.py _fit_setup: the degrees of count / pp)
    if args.pp is not None:
        fields["pipeline_parallel"] = args.pp
        args.pp = None
    # --gpus-per-node serving: the devices of one machine fit's layout reads (estimate/fit.py serving_machine_size:
    # the tensor-parallel degrees within a machine, the spanning warning, the GPUs one llama.cpp copy is split over,
    # --auto's too: estimate/fit.py llamacpp_copy), as a plan's resources.nodes tells it
    per_node, args.gpus_per_node = args.gpus_per_node, None
    if per_node is not None:
        fields["gpus_per_node"] = per_node
    # --network serving: the network of each machine to the others, which times a replica's traffic that crosses
    # machines (estimate/fit.py fit_memory's ``network``: a TP group's all-reduces, a pipeline's sends), as a
    # plan's resources.network tells it
    network, args.network = args.network, None
    if network is not None:
        fields["network"] = network
    refuse_training_flags(args)
    if args.auto or args.free:
        if network is not None:
            raise InputError("--network applies to a tensor-parallel or pipeline layout (vLLM, SGLang), not to "
                             "llama.cpp's --auto")
        if pinned_tp is not None:
            raise InputError("--tp applies to a tensor-parallel layout (vLLM, SGLang), not to llama.cpp's --auto")
        if args.engine_version is not None:
            raise InputError("--engine-version applies to vllm and sglang, not to llama.cpp's --auto")
        if args.request_rate is not None:
            raise InputError("--request-rate applies to a serving speed at a load, not to llama.cpp's --auto")
        auto = _auto(spec, args, fields, per_node)
        return auto.to_dict(), exit_code(auto.fits), auto, None
    if args.attention is not None:
        fields["attention"] = args.attention
    if args.fit_target is not None:  # a workload field (InferenceWorkload.fit_target): llama.cpp's margin
        fields["fit_target"] = args.fit_target
    r = fit(spec, args.device, args.count, headroom=args.headroom, memory=args.memory,
            hardware_files=args.hardware_file, host_device=args.host_device,
            kwh_price=args.kwh_price, tensor_parallel=pinned_tp, host_memory=args.host_memory,
            request_rate=args.request_rate, **fields)
    return r.to_dict(), exit_code(r.fits), r, None


def cmd_fit(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    data, code, r, dur = fit_answer(spec, args)
    if args.json:
        emit_json(data)
        return code
    from ..estimate.llamacpp_fit import LlamaCppFit
    from ..render.fit_text import render_fit
    from .train_cmd import render_duration
    if isinstance(r, LlamaCppFit):
        say(str(r))
        return code
    say(render_fit(r))  # with the fits_at hint (FitResult.fits_at, estimate/fit.py)
    if args.train:
        if dur is not None:
            say(render_duration(dur))
            if data["training_time"]["cost"] is not None:
                say(f"cost: {format_usd(data['training_time']['cost'])} at "
                    f"${data['training_time']['price_per_hour']:,.2f}/h")
    return code


def _auto(spec: Any, args: argparse.Namespace, fields: dict[str, Any], per_node: int | None) -> LlamaCppFit:
    """`fit --auto`: llama.cpp's auto-fit (estimate/llamacpp_fit.py) on the GPUs named by --free or --device: one
    copy over one machine's GPUs (estimate/fit.py ``llamacpp_copy``, the layout `fit` sizes; machines of
    --gpus-per-node, the instance's or 8), at its share of the load, the other machines replicas of it."""
    from ..estimate.device import llamacpp_split_apart_why
    from ..estimate.fit import llamacpp_copy, per_replica, target_and_count
    from ..estimate.llamacpp_fit import copies_note, fit_llamacpp, gpu_free
    if not args.auto:
        raise InputError("--free applies to --auto")
    if fields.get("engine") is not None and normalize_engine(fields["engine"]) != "llamacpp":
        raise InputError("--auto fits llama.cpp; drop --engine or use --engine llamacpp")
    count = args.count if args.count is not None else (len(args.free) if args.free else None)
    device, count, _, instance = target_and_count(args.device, count, args.hardware_file, instances=True)
    if device.kind == "cpu":
        raise InputError(f"--auto places layers on GPUs; {device.id} is a CPU: llama.cpp keeps the whole model in its "
                         "RAM (drop --auto; --max-context gives the longest context that fits)")
    gpus, copies = llamacpp_copy(device, count, instance, per_node)
    if args.free and len(args.free) != gpus:  # --free lists the GPUs of one copy: one machine's
        raise InputError(f"--free gives {len(args.free)} GPU(s) but --count is {count}" if copies == 1 else
                         f"--free gives {len(args.free)} GPU(s), but llama.cpp splits one copy over one machine's "
                         f"{gpus} (the {copies} machines are replicas): give the free memory of one machine's GPUs "
                         "(--count, --gpus-per-node)")
    free = gpu_free(device, gpus, args.free, args.memory)
    context = fields.pop("context", None)
    fields.pop("gpus_per_node", None)  # (read above: the auto-fit is one machine's GPUs)
    total = int(fields.get("concurrency") or InferenceWorkload.concurrency)
    if copies > 1:  # each machine a replica at its share of the sequences (fit's per_replica)
        fields["concurrency"] = per_replica(total, copies)
    # with the decode of the printed flags, as `fit` with them times it (one answer: llamacpp_fit.py with_speed)
    r = fit_llamacpp(spec, free, fit_target=args.fit_target, headroom=args.headroom, context=context,
                     host_memory=args.host_memory, device=device, host_device=args.host_device,
                     hardware_files=args.hardware_file, memory=args.memory, **fields)
    if copies > 1:
        r = replace(r, assumptions=(*r.assumptions, copies_note(count, gpus, copies, fields["concurrency"], total,
                                                               llamacpp_split_apart_why(device))))
    return r

"""`llmsizer train`: per-device memory of a training or fine-tuning run, and the reverse questions."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InputError
from ..estimate.device import device_budget, training_device_fields
from ..estimate.duration import Duration, training_time_on
from ..estimate.fit import fit_training, refuse_unknown_memory, training_estimate, training_on_memory
from ..estimate.training import estimate_training, max_micro_batch, max_seq_len
from ..estimate.training.reverse import reverse_notes, seq_len_step
from ..numbers import COUNT
from ..render.safe import say
from ..render.text import coverage_lines, render_estimate
from ..result import Estimate
from ..specs import ModelSpec
from ..specs.training import TrainingWorkload, check_whole_machines
from ..units import format_bytes, format_count, format_seconds, format_seconds_range, format_usd
from .commands import COMMAND_HELP
from .common import add_model_args, bytes_arg, emit_json, exit_code, int_arg, resolve_model
from .workload_args import (
    add_headroom_arg,
    add_metric_arg,
    add_training_args,
    refuse_hardware_file_alone,
    refuse_untimed_utilization,
    training_fields,
)

EPILOG = """examples:
  llmsizer train llama-3.1-8b --method full --batch 4 --seq 4096 --grad-checkpointing full
  llmsizer train llama-3.1-8b --method lora --rank 16 --targets q,k,v,o,gate,up,down --seq 2048
  llmsizer train llama-3.1-8b --method qlora --rank 64 --batch 1 --seq 4096 --memory 24GiB
  llmsizer train qwen2.5-7b --gpus 8 --zero 3 --batch 2 --seq 8192 --grad-checkpointing full
  llmsizer train llama-3.1-70b-instruct --gpus 16 --tp 4 --pp 2 --precision megatron-bf16 --grad-accumulation 8
  llmsizer train qwen3-30b-a3b --gpus 8 --ep 8 --fsdp full --seq 4096
  llmsizer train llama-3.1-8b --zero 2 --gpus 4 --offload optimizer --json
  llmsizer train llama-3.1-8b --method lora --memory 24GiB --max-batch --seq 2048 --grad-checkpointing full
  llmsizer train llama-3.1-8b --method lora --memory 80GiB --max-seq
"""


def register(sub: Any) -> None:
    p = sub.add_parser("train", help=COMMAND_HELP["train"],
                       description="Per-device peak memory of a training step: weights, master weights, gradients, "
                                   "optimizer states, saved activations and transient peaks, each with its formula, "
                                   "source and range; host RAM when offloading.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    add_training_args(p)
    p.add_argument("--memory", type=bytes_arg, help="device memory, e.g. 24GiB, 80GB; with it the answer says "
                   "whether it fits (exit code 1 when it does not)")
    add_headroom_arg(p, engines="none")
    add_metric_arg(p)
    p.add_argument("--device", help="a device or instance from `llmsizer hardware list`, as in `infer` and `fit`: "
                   "where the step runs (cpu: in RAM, no CUDA context), its memory the budget (as in `fit --train`) "
                   "and, with --tokens, the duration on it (a device of no sourced memory needs --memory, as in "
                   "`fit --train`); cpu and gpu name a device known only by its kind (sized with no verdict); 'detected' "
                   "this machine, as `hardware detect` reads it")
    p.add_argument("--count", type=int_arg(COUNT), help="devices (default: the instance's count, else --gpus, else 1)")
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    p.add_argument("--max-batch", action="store_true", help="report the largest micro-batch that fits --memory")
    p.add_argument("--max-seq", action="store_true", help="report the longest sequence that fits --memory")
    p.add_argument("--verbose", "-v", action="store_true", help="show full formulas")
    p.add_argument("--json", action="store_true", help="machine-readable output (Estimate.to_dict())")
    p.set_defaults(func=cmd_train)


def train_answer(spec: ModelSpec, args: argparse.Namespace
                 ) -> tuple[dict[str, Any], int, Estimate, Duration | None, dict[str, Any]]:
    """The answer of `train` (its ``--json`` data and exit code) for ``spec`` and the parsed flags; the web API
    returns the same data."""
    fields = training_fields(args)
    duration, timing = None, None
    refuse_hardware_file_alone(args)
    refuse_untimed_utilization(args)
    if fields.get("gpus_per_node") is not None:  # a machine size stated: whole machines, with or without a device
        # (fit --train's one rule, estimate/fit.py serving_machine_size), naming the flag the devices came in
        check_whole_machines(int(args.count or fields.get("gpus") or 1), int(fields["gpus_per_node"]),
                             "count" if args.count else "gpus")
    if args.device:
        count = args.count or fields.get("gpus")
        device, _, usable, _ = device_budget(args.device, args.memory, args.hardware_file)
        if usable is None:  # a device known only by its kind (cpu, gpu): sized for it, no verdict, as `infer --device`
            memory, n = None, count or 1
            if args.count is not None:  # the devices named, as fit_training takes them
                fields.setdefault("gpus", n)
            w = TrainingWorkload(**{**training_device_fields(device), **fields}, headroom=args.headroom)
            est = estimate_training(spec, w, device=device)  # a kernel this GPU cannot run refused, as fit's
            if device.origin != "generic":  # a named device: its memory is the budget, as fit --train's (exit 2)
                refuse_unknown_memory(device, usable)
            if args.tokens:  # fit --train's rule (estimate/duration.py training_time_on), no ZeRO stage chosen
                duration, price, cost = training_time_on(spec, args.device, n, args.tokens, fields, args.utilization,
                                                         hardware_files=args.hardware_file)
                timing = {**duration.to_dict(), "price_per_hour": price, "cost": cost}
        else:  # fit --train's answer: the memory, the ZeRO stage it chose, and the run timed and priced at it
            # (the devices as given: --count, else --gpus in fields, so a refusal names the flag the user gave)
            r = fit_training(spec, args.device, args.count, headroom=args.headroom, memory=args.memory,
                             hardware_files=args.hardware_file, tokens=args.tokens, utilization=args.utilization,
                             **fields)
            # its verdict fit's: the host part against the machine's RAM too (probe28 D2)
            est, memory, duration, timing = (training_estimate(r), r.details["usable_memory_per_device"], r.duration,
                                             r.training_time)
    else:
        if args.tokens:
            raise InputError("--tokens needs --device (the duration depends on the device's peak FLOP/s)")
        memory = args.memory
        if memory is not None:  # the one rule fit --train uses (several devices: least-sharded ZeRO that fits)
            TrainingWorkload(**fields)  # validates the flags first
            est = training_on_memory(spec, fields, memory, args.headroom)
        else:
            est = estimate_training(spec, TrainingWorkload(**fields, headroom=args.headroom))
    data = est.to_dict()
    if timing is not None:
        data["duration"] = timing
    reverse: dict[str, int] = {}
    if args.max_batch or args.max_seq:
        if memory is None:
            raise InputError("--max-batch and --max-seq need --memory or --device")
        rest = {k: v for k, v in est_fields(est, fields).items()}
        if args.device:  # where the step runs (a CPU: in RAM, no CUDA context; Apple: Metal), as the estimate above;
            rest.update(training_device_fields(device))  # `memory` is the device's usable memory already
        if args.max_batch:
            reverse["max_micro_batch"] = max_micro_batch(spec, memory, headroom=args.headroom,
                                                         **{k: v for k, v in rest.items() if k != "micro_batch"})
        if args.max_seq:
            reverse["max_seq_len"] = max_seq_len(spec, memory, headroom=args.headroom,
                                                 **{k: v for k, v in rest.items() if k != "seq_len"})
        data["reverse"] = reverse
        data["reverse_notes"] = reverse_notes(spec, reverse)
    fits = est.details.get("fits")
    if reverse and 0 in reverse.values():
        fits = False
    return data, exit_code(fits), est, duration, fields


def cmd_train(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    data, code, est, duration, fields = train_answer(spec, args)
    if args.json:
        emit_json(data)
        return code
    reverse = data.get("reverse", {})
    say(render_estimate(est, verbose=args.verbose))
    seq = fields.get("seq_len", TrainingWorkload.seq_len)
    batch = fields.get("micro_batch", TrainingWorkload.micro_batch)
    if "max_micro_batch" in reverse:
        say(f"largest micro-batch that fits: {reverse['max_micro_batch']:,} sequences of {seq:,} tokens"
              if reverse["max_micro_batch"] else f"batch 1 does not fit: one sequence of {seq:,} tokens needs more "
              "than the budget")
    if "max_seq_len" in reverse:
        cp = int(fields.get("context_parallel") or 1)
        shortest = seq_len_step(cp)  # the search's shortest length
        say(f"longest sequence that fits: {reverse['max_seq_len']:,} tokens at micro-batch {batch}"
              if reverse["max_seq_len"] else f"no sequence fits at micro-batch {batch}: even {shortest:,} token(s) "
              "do not" + (f" (context parallelism {cp} splits a sequence into 2 x {cp} chunks)" if cp > 1 else ""))
    for note in data.get("reverse_notes", ()):  # the core's (estimate/training/reverse.py reverse_notes)
        say(f"note: {note}")
    if duration is not None:
        say(render_duration(duration))
        if data["duration"]["cost"] is not None:  # the price fit --train prints (estimate/fit.py hourly_price)
            say(f"cost: {format_usd(data['duration']['cost'])} at ${data['duration']['price_per_hour']:,.2f}/h")
    return code


def est_fields(est: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """The workload fields for the reverse questions: the user's plus the ZeRO stage fit chose, if any."""
    from ..estimate.fit import zero_chosen

    out = dict(fields)
    taken = zero_chosen(est) if "zero" not in out and "fsdp" not in out else None
    if taken is not None:
        out["zero"] = taken.value
    return out


def _base_format(d: Duration) -> str:
    """'GPTQ' or 'NF4': the QLoRA base the duration's dequantization assumption names."""
    return "GPTQ" if any(a.name == "gptq_dequant_bytes_per_weight" for a in d.assumptions) else "NF4"


def _timed_kernel(d: Duration) -> str:
    """The fused attention kernel the duration times (its ``attention_kernel_timed`` assumption), 'fused' without
    one."""
    return next((str(a.value) for a in d.assumptions if a.name == "attention_kernel_timed"), "fused")


def _masked_tiles(d: Duration) -> str:
    """What the duration times for the layers SDPA gets an explicit mask (its ``attention_masked_layers``
    assumption, estimate/duration.py: packing or a window under SDPA): every tile of the s x s scores, none skipped."""
    n = next((a.value for a in d.assumptions if a.name == "attention_masked_layers"), 0)
    return (f", {n} layers under an explicit mask timed over every tile of the s x s scores (no causal or document "
            "tile skipped: attention_masked_layers)") if n else ""


def render_duration(d: Duration) -> str:
    from ..render.markdown import format_value  # a count as the plan shows it (one spelling)

    if d.seconds is None:
        return "duration: " + "; ".join(d.warnings)
    line = (f"duration: {format_count(d.tokens)} tokens x {d.flops_per_token:.3g} FLOP/token ({d.flops_formula}) "
            f"on {d.devices} device(s) at {d.utilization:.1%} of {d.peak_flops or 0:.3g} FLOP/s ({d.peak_name}) on "
            f"{d.utilization_applies_to}")
    st = d.step
    if st is not None:
        line += (f" x GEMM shape efficiency {st.shape_efficiency:.3f}" if st.shape_efficiency < 1 else "")
        line += (f"; per micro-step {st.compute_seconds:.3g} s compute"
                 + (f" (of it {st.dequant_seconds:.3g} s {_base_format(d)} dequantization)" if st.dequant_seconds
                    else "")
                 + (f" (of it {st.elementwise_seconds:.3g} s memory-bound kernels)" if st.elementwise_seconds else "")
                 + (f" (of it {st.attention_seconds:.3g} s "
                    + ("eager attention's score GEMMs with their s x s traffic)"
                       if any(a.name == "eager_score_gemm_seconds_per_token" for a in d.assumptions)
                       else f"attention in {_timed_kernel(d)} at its executed FLOPs{_masked_tiles(d)})")
                    if st.attention_seconds else "")
                 + (f" (of it {st.float8_cast_seconds:.3g} s float8 casts; the float8 linears at the FP8 peak)"
                    if st.float8_cast_seconds else "")
                 + (" (host-bound: the kernel launches take longer than the device's work)"
                    if st.launch_seconds and st.launch_seconds >= st.compute_seconds else "")
                 + (f", {st.comm_seconds:.3g} s {st.topology} communication ({st.exposed_comm_seconds:.3g} s not "
                    "hidden by compute)" if st.comm_seconds and st.model_parallel is None else "")
                 + (f" on the slowest stage; per micro-batch {mp.tp_seconds:.3g} s tensor-parallel and "
                    f"{mp.p2p_seconds:.3g} s pipeline communication ("
                    + ("tensor-parallel overlapping the GEMMs" if mp.tp_overlap
                       else f"{mp.tp_hidden_seconds:.3g} s tensor-parallel behind the backward GEMMs, the rest not "
                       "overlapped" if mp.tp_hidden_seconds else "not overlapped")
                    + f"), pipeline bubble {mp.bubble:.3g}, "
                    + (f"{mp.dp_seconds:.3g} s FSDP all-gathers + reduce-scatters per step "
                       f"({mp.dp_exposed_seconds:.3g} s not hidden by compute)" if mp.fsdp
                       else f"{mp.dp_seconds:.3g} s gradient all-reduce per step")
                    if (mp := st.model_parallel) is not None else "")
                 # transfer bytes decimal, as the plan's network rows (cp_ring_bytes, dp/tp/pp: plan/result.py
                 # B_disk) write them: one number, one convention (review36 N3: 75.00 GiB here, 80.53 GB there)
                 + (f", ring attention {format_bytes(st.ring_bytes, binary=False)} K/V exchange per micro-step "
                    f"({st.ring_seconds:.3g} s, {st.ring_exposed_seconds:.3g} s not hidden by the attention, in the "
                    "compute)" if st.ring_bytes else "")
                 + "".join(f" over {a.why.split(':')[0]}" for a in d.assumptions if a.name == "inter_node_network")
                 + (f", {st.paging_seconds:.3g} s optimizer paging per step" if st.paging_seconds else "")
                 + (f", {st.optimizer_seconds:.3g} s optimizer update per step"
                    + (" on the host (CPU offload, not overlapped)"
                       if any(a.name == "offload_host_memory_bandwidth" for a in d.assumptions) else "")
                    if st.optimizer_seconds else "")
                 + f" -> {st.tokens_per_second:,.0f} tokens/s")
    rng = d.seconds_range
    line += (f" = {format_seconds(d.seconds)} wall clock"
             + (f" ({format_seconds_range(rng[0], rng[1])} calibrated range)" if rng else "")
             + f", {format_value(d.device_hours or 0, 'count')} device-hours"  # the plan's spelling of it
             # the MFU this wall clock implies (Duration.mfu: the model FLOPs without recomputation at the peak)
             + (f"; MFU {d.mfu:.1%} ({d.model_flops_formula} per token, no recomputation, over the wall clock at "
                f"the {d.peak_name})" if d.mfu is not None else ""))
    cov = d.seconds_range_coverage  # the range's coverage under it, as every printed calibrated range has
    return "\n".join([line, *(coverage_lines(cov) if rng and cov else []), *(f"warning: {w}" for w in d.warnings)])

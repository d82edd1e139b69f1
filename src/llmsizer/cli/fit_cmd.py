"""`llmsizer fit MODEL --device NAME [--count N]`: does a workload fit on N x device, and how fast will it run."""

from __future__ import annotations

import argparse
from typing import Any

from ..formulas.training_time import RECOMPUTE_MODES, device_hours, training_flops_per_token, training_seconds
from ..hardware import efficiency as E
from ..hardware.fit import FitResult, fit, fit_training, resolve_target
from ..hardware.performance import attention_width
from ..render.fit_text import render_fit
from ..specs import DTYPES, ENGINES
from ..units import format_count
from .common import add_model_args, bytes_arg, count_arg, emit_json, resolve_model, tokens_arg

EPILOG = """examples:
  llmsizer fit llama-3.1-70b-instruct --device h100-sxm --count 2
  llmsizer fit llama-3.1-70b-instruct --device p5.48xlarge --concurrency 64 --json
  llmsizer fit llama-3.1-8b --device rtx-4090 --weights q4_k_m --context 8k
  llmsizer fit qwen2.5-1.5b-instruct --device desktop-ddr5-4800-2ch --memory 16GiB --weights q8_0
  llmsizer fit llama-3.1-8b --device apple-m3-max-36gb --headroom 0.2
  llmsizer fit llama-3.1-8b --device a100-sxm-80gb --count 8 --train --tokens 10B --seq-len 4096
"""


def register(sub: Any) -> None:
    p = sub.add_parser("fit", help="does a workload fit on N x device; memory per device, speed",
                       description="Check that MODEL fits on COUNT x DEVICE (a device or a cloud instance) with a "
                                   "stated headroom, and estimate TTFT and tokens/s there. Memory per device comes "
                                   "from the inference estimate under tensor parallelism.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--device", required=True, help="device or instance (see `llmsizer hardware list`)")
    p.add_argument("--count", type=int, help="devices (default: the instance's count, else 1)")
    p.add_argument("--headroom", type=float, help=f"share of memory kept free (default {E.DEFAULT_HEADROOM})")
    p.add_argument("--memory", type=bytes_arg, help="memory per device, overriding the catalog (RAM for a CPU)")
    p.add_argument("--weights", help="weight format (default: the checkpoint's; GGUF for llama.cpp)")
    p.add_argument("--engine", choices=ENGINES, help="default: vllm on data-center GPUs, llamacpp elsewhere")
    p.add_argument("--context", type=tokens_arg, default=4096, help="tokens per sequence (default 4096)")
    p.add_argument("--concurrency", type=count_arg, default=1, help="sequences at once (default 1)")
    p.add_argument("--output-tokens", type=tokens_arg, help="tokens generated per sequence (default min(256, context/2))")
    p.add_argument("--kv-dtype", help="KV cache dtype (default: the engine's)")
    p.add_argument("--dtype", choices=DTYPES, help="compute dtype")
    p.add_argument("--train", action="store_true", help="fit training instead (memory needs llmsizer.training)")
    p.add_argument("--tokens", type=count_arg, help="training tokens, for time and device-hours (e.g. 10B)")
    p.add_argument("--seq-len", type=tokens_arg, default=4096, help="training sequence length (default 4096)")
    p.add_argument("--recompute", choices=RECOMPUTE_MODES, default="none", help="activation recomputation")
    p.add_argument("--kwh-price", type=float, help="USD per kWh: adds the power cost of owned hardware (TDP x count)")
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_fit)


def cmd_fit(args: argparse.Namespace) -> int:
    spec = resolve_model(args)
    if args.train:
        r = fit_training(spec, args.device, args.count, headroom=args.headroom, hardware_files=args.hardware_file)
        data = r.to_dict()
        if args.tokens:
            data["training_time"] = _training_time(spec, args)
        if args.json:
            emit_json(data)
            return 0
        print(f"{spec.name} training on {r.count} x {r.device} ({r.target})")
        for why in r.reasons:
            print(f"  {why}")
        if args.tokens:
            t = data["training_time"]
            print(f"  {format_count(args.tokens)} tokens: {t['seconds'] / 3600:,.1f} h wall clock, "
                  f"{t['device_hours']:,.0f} device-hours at {t['utilization']:.1%} utilization"
                  + (f", ${t['cost']:,.0f}" if t.get("cost") is not None else ""))
        for w in r.warnings:
            print(f"warning: {w}")
        return 0
    r = fit(spec, args.device, args.count, headroom=args.headroom, engine=args.engine, weights=args.weights,
            context=args.context, concurrency=args.concurrency, output_tokens=args.output_tokens, memory=args.memory,
            kv_dtype=args.kv_dtype, dtype=args.dtype, hardware_files=args.hardware_file)
    data = r.to_dict()
    data["cost"] = _cost(r, args)
    if args.json:
        emit_json(data)
        return 0
    print(render_fit(r))
    c = data["cost"]
    if c.get("price_per_hour") is not None:
        line = f"cost: ${c['price_per_hour']:,.2f}/h ({c['basis']})"
        if c.get("per_million_tokens") is not None:
            line += f", ${c['per_million_tokens']:,.2f} per million output tokens at concurrency {args.concurrency}"
        print(line)
    return 0 if r.fits else 1


def _cost(r: FitResult, args: argparse.Namespace) -> dict[str, Any]:
    """Hourly cost of the target: the instance's on-demand price, or power for owned hardware (--kwh-price)."""
    from ..formulas.cost import cost_per_million_tokens, power_price_per_hour
    device, _, _, instance = resolve_target(args.device, args.hardware_file)
    price, basis = None, "unknown"
    if instance is not None and instance.price_per_hour is not None:
        price, basis = instance.price_per_hour, f"on-demand {instance.region}"
    elif device.price is not None:
        price, basis = float(device.price.base) * r.count, "given"
    elif args.kwh_price is not None and device.tdp is not None:
        price = power_price_per_hour(float(device.tdp.base), args.kwh_price, r.count)
        basis = f"power: {device.tdp.raw} W x {r.count} at ${args.kwh_price}/kWh"
    tps = r.speed.tokens_per_second if r.speed else None
    return {"price_per_hour": price, "basis": basis,
            "per_million_tokens": cost_per_million_tokens(price, tps) if price is not None and tps else None}


def _training_time(spec: Any, args: argparse.Namespace) -> dict[str, Any]:
    from ..formulas.params import count_params
    device, inst_count, _, instance = resolve_target(args.device, args.hardware_file)
    n = args.count or inst_count or 1
    peak, key = device.peak_flops("fp32" if device.kind == "cpu" else "bf16")
    factor = E.TRAINING_HFU if args.recompute == "full" else E.TRAINING_MFU
    fpt = training_flops_per_token(count_params(spec).active, spec.num_layers, attention_width(spec), args.seq_len,
                                   args.recompute)
    if peak is None:
        return {"error": f"{device.id} has no sourced {key} peak FLOP/s"}
    secs = training_seconds(args.tokens, fpt, n, peak, factor.expected)
    price = instance.price_per_hour if instance is not None else None
    return {"tokens": args.tokens, "flops_per_token": fpt, "devices": n, "peak_flops": peak, "peak_key": key,
            "utilization": factor.expected, "utilization_source": factor.source, "seconds": secs,
            "device_hours": device_hours(secs, n), "price_per_hour": price,
            "cost": price * secs / 3600 if price is not None else None}

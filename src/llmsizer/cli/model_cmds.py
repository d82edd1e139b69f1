"""`llmsizer models` (list/search the catalog) and `llmsizer inspect` (architecture and parameters)."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from ..catalog import models as catalog
from ..errors import InputError
from ..formulas.mtp import mtp_params, mtp_unique_params, stored_file_bytes
from ..formulas.params import count_params
from ..formulas.tensors import gemma4_tower_params
from ..formulas.weight_formats import file_weight_bytes, format_names, stored_format, weight_bytes
from ..numbers import CONCURRENCY, COUNT, MACHINE_GPUS
from ..render.safe import say
from ..render.text import table
from ..result import envelope
from ..specs import ENGINES, InferenceWorkload, ModelSpec, TrainingWorkload
from ..specs.workload import OUTPUT_TOKENS, engine_rule_text
from ..suggest import NAME_QUERY_HELP
from ..units import bytes_text, format_bytes, format_count
from .commands import COMMAND_HELP
from .common import (
    add_model_args,
    bytes_arg,
    count_in,
    emit_json,
    exit_code,
    int_arg,
    resolve_model,
    tokens_arg,
    tokens_in,
)

if TYPE_CHECKING:
    from ..fits_on import ModelsThatFit

from .workload_args import (
    add_allow_long_context_arg,
    add_engine_version_arg,
    add_fit_target_arg,
    add_headroom_arg,
    add_media_args,
    add_metric_arg,
    kv_dtype_arg,
    media_fields,
)


def register(sub: Any) -> None:
    p = sub.add_parser("models", help=COMMAND_HELP["models"],
                       description="List the built-in catalog (published config.json values with sources).",
                       epilog="examples:\n  llmsizer models\n  llmsizer models qwen3 --json\n"
                              "  llmsizer models --fits-on rtx-4090 --context 8k\n"
                              "  llmsizer models qwen --fits-on apple-m3-max-36gb --concurrency 2\n"
                              "  llmsizer models --fits-on rtx-3090 --memory 20GiB --headroom 0.15\n"
                              "  llmsizer models qwen3 --fits-on detected --context 8k\n\n"
                              "--fits-on answers 'which models fit my machine': for each model, the highest-quality "
                              "weight format\nthat fits and serves every user at reading speed or faster (the "
                              "evaluation `recommend` makes of that\nhardware); a device of unknown memory bandwidth (--fits-on gpu or "
                              "cpu, a detected machine)\nis judged on memory only, its speed 'unknown' and the reason "
                              "stated; exit code 0 when at least\none model fits, 1 when none does.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("query", nargs="?", default="", help=NAME_QUERY_HELP)
    p.add_argument("--fits-on", metavar="DEVICE", help="a device or instance: which models fit it, at which format "
                   "and speed; 'detected': this machine, detected as `hardware detect` reads it (its GPUs, else its "
                   "CPU), no file written")
    p.add_argument("--count", type=int_arg(COUNT), help="devices, with --fits-on (default: the instance's count, else 1; a "
                   "multiple of an instance's: that many instances, as `fit --count`)")
    p.add_argument("--context", type=tokens_arg, help=f"tokens per sequence, with --fits-on (default "
                   f"{InferenceWorkload.context})")
    p.add_argument("--concurrency", type=count_in(CONCURRENCY), help=f"sequences at once, with --fits-on (default "
                   f"{InferenceWorkload.concurrency})")
    p.add_argument("--output-tokens", type=tokens_in(OUTPUT_TOKENS), help="tokens generated per sequence (part of "
                   "--context), with --fits-on, as `fit --output-tokens` (default min(256, context / 2))")
    p.add_argument("--kv-dtype", type=kv_dtype_arg, help="KV cache dtype, with --fits-on, as `fit --kv-dtype` "
                   "(default: the engine's)")
    p.add_argument("--engine", choices=ENGINES, help="serving engine, with --fits-on (default: each model's on that "
                   f"hardware: {engine_rule_text('--fits-on gpu')})")
    add_engine_version_arg(p)
    add_allow_long_context_arg(p)
    add_media_args(p.add_argument_group("images and video, with --fits-on (as `fit`; only models with a vision "
                                        "encoder are listed)"))
    p.add_argument("--memory", type=bytes_arg, help="memory per device, with --fits-on, overriding the catalog (RAM "
                   "for a CPU), as `fit --memory`")
    p.add_argument("--host-memory", type=bytes_arg, help="host RAM beside the GPUs, with --fits-on, as fit's "
                   "llama.cpp auto-fit checks it: a model that fits only with experts in host memory is named at the "
                   "highest-quality format whose host share fits it (default: not checked, the smallest format)")
    p.add_argument("--gpus-per-node", type=int_arg(MACHINE_GPUS), help="devices per machine, with --fits-on, as `fit "
                   "--gpus-per-node`: the machine the tensor-parallel degrees are chosen within and a llama.cpp split "
                   f"stays inside; at most {MACHINE_GPUS.high:g}, a GB200/GB300 NVL72 rack (default: the "
                   "instance's count, else "
                   f"{TrainingWorkload.gpus_per_node})")
    add_headroom_arg(p, engines="defaults")
    add_metric_arg(p)  # with --fits-on, as `fit --metric` and `recommend --metric`
    add_fit_target_arg(p)
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE", help="extra hardware (JSON/YAML)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("inspect", help=COMMAND_HELP["inspect"],
                       description="Show the architecture and the exact parameter breakdown of a catalog model, "
                                   "a config.json, a model folder (safetensors headers) or a GGUF file.",
                       epilog="examples:\n  llmsizer inspect meta-llama/Llama-3.1-8B\n"
                              "  llmsizer inspect ./my-model/config.json --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("formats", help=COMMAND_HELP["formats"],
                       description="List the weight formats llmsizer knows.")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: emit_json(formats_answer()) if a.json else say("\n".join(format_names())))


def formats_answer() -> dict[str, Any]:
    """`formats --json` (and the web's GET /formats): ``{schema_version, kind: "formats", formats: [names]}``."""
    return envelope("formats", {"formats": format_names()})


def models_answer(args: argparse.Namespace) -> tuple[Any, int]:
    """`models [QUERY] [--fits-on ...] --json` data and exit code (the web API's model list returns the same):
    ``{schema_version, kind: "models", models: [...]}``, with --fits-on ``kind: "models-fits-on"``."""
    _fits_on_flags_need_fits_on(args)
    if args.fits_on:
        data, code, _ = fits_on_answer(args)
        return data, code
    found = catalog.search_some(args.query)
    return envelope("models", {"models": [
        {"id": e.id, "name": e.name, "aliases": list(e.aliases), "params": count_params(e.spec()).total,
         "published_params": e.published_params, "model_type": e.config.get("model_type"),
         "source": e.public_source, "retrieved": e.retrieved} for e in found]}), 0


def cmd_models(args: argparse.Namespace) -> int:
    if args.json:
        data, code = models_answer(args)
        emit_json(data)
        return code
    _fits_on_flags_need_fits_on(args)
    if args.fits_on:
        return _fits_on(args)
    found = catalog.search_some(args.query)
    rows = []
    for e in found:
        pc = count_params(e.spec())
        act = f"{format_count(pc.active)}" if pc.active != pc.total else ""
        rows.append([e.name, e.id, format_count(pc.total), act, e.spec().attention_kind, e.config.get("model_type", "")])
    say(table(rows, ["name", "id", "params", "active", "attention", "model_type"]))
    say(f"{len(found)} model" + ("" if len(found) == 1 else "s"))
    return 0


def _fits_on_flags_need_fits_on(args: argparse.Namespace) -> None:
    """The workload flags only --fits-on reads are refused without it (exit 2), not ignored."""
    if args.fits_on:
        return
    given = [f for f, v in (("--count", args.count), ("--context", args.context), ("--concurrency", args.concurrency),
                            ("--output-tokens", args.output_tokens), ("--kv-dtype", args.kv_dtype),
                            ("--engine", args.engine), ("--engine-version", args.engine_version),
                            ("--allow-long-context", args.allow_long_context), ("--memory", args.memory),
                            ("--host-memory", args.host_memory), ("--headroom", args.headroom), ("--metric", args.metric), ("--fit-target", args.fit_target),
                            ("--gpus-per-node", args.gpus_per_node),
                            *(("--" + k.replace("_", "-"), v) for k, v in media_fields(args).items())) if v is not None]
    if given:
        raise InputError(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} --fits-on DEVICE (the hardware the "
                         "models are sized on)")


def _experts_in_host_args(args: argparse.Namespace, context: int, concurrency: int) -> dict[str, Any]:
    """The workload ``recommend.experts_in_host`` is asked for: the one source of its answer and of the
    ``fit ... --auto`` command printed with it (``_fit_auto_command``), so running that command gives the same flags."""
    return {"context": context, "concurrency": concurrency, "memory": args.memory, "headroom": args.headroom,
            "fit_target": args.fit_target, "host_memory": args.host_memory, "hardware_files": args.hardware_file, "kv_dtype": args.kv_dtype,
            "output_tokens": args.output_tokens, "gpus_per_node": args.gpus_per_node, **media_fields(args)}


_SIZES = ("memory", "fit_target", "host_memory")  # the byte-valued arguments of ``_experts_in_host_args``


def _fit_auto_command(name: str, args: argparse.Namespace, weights: str) -> str:
    """``llmsizer fit ... --auto`` with every argument ``_experts_in_host_args`` passes (None: not given)."""
    host_args = _experts_in_host_args(args, args.context or InferenceWorkload.context,
                                      args.concurrency or InferenceWorkload.concurrency)
    words = ["llmsizer", "fit", name, "--device", args.fits_on] + (["--count", str(args.count)] if args.count else [])
    words += ["--engine", "llamacpp", "--weights", weights.removeprefix("gguf:")]
    for f in args.hardware_file:
        words += ["--hardware-file", f]
    for k, v in host_args.items():
        if k == "hardware_files" or v is None or (k == "concurrency" and args.concurrency is None):
            continue
        flag = "--" + k.replace("_", "-")
        if v is True:  # --pan-and-scan
            words.append(flag)
        elif k in _SIZES:  # a size as text that reads back to the same bytes (24GiB, not 25769803776)
            words += [flag, bytes_text(v)]
        else:
            words += [flag, "x".join(map(str, v)) if isinstance(v, tuple) else str(v)]
    return shlex.join([*words, "--auto"])


def fits_on_answer(args: argparse.Namespace) -> tuple[dict[str, Any], int, ModelsThatFit]:
    """``models [QUERY] --fits-on HARDWARE``'s answer: the core's (``fits_on.models_that_fit``, which the Python API
    and the web's /api/v1/models/fits-on give too) over the parsed options, its JSON and exit code."""
    from ..fits_on import models_that_fit

    res = models_that_fit(args.fits_on, args.query, count=args.count, context=args.context,
                          concurrency=args.concurrency, output_tokens=args.output_tokens, kv_dtype=args.kv_dtype,
                          engine=args.engine, engine_version=args.engine_version,
                          allow_long_context=args.allow_long_context, memory=args.memory,
                          host_memory=args.host_memory, headroom=args.headroom, metric=args.metric,
                          fit_target=args.fit_target, gpus_per_node=args.gpus_per_node,
                          hardware_files=args.hardware_file, **media_fields(args))
    data = res.to_dict()
    return data, exit_code(bool(data["fitting"])), res


def _fits_on(args: argparse.Namespace) -> int:
    """``models --fits-on`` as text: the core's answer rendered (render/fits_on_text.py), each model that fits with
    experts in host memory with the ``fit ... --auto`` command that gives it."""
    from ..render.fits_on_text import fits_on_text

    _, code, res = fits_on_answer(args)
    say(fits_on_text(res, lambda name, weights: _fit_auto_command(name, args, weights)))
    return code


def inspect_data(spec: ModelSpec) -> dict[str, Any]:
    pc = count_params(spec)
    if spec.file_weights is not None:
        wb = file_weight_bytes(spec)
        fmt, why = "file", f"exact tensor bytes read from {spec.file_weights.path}"
    else:
        fmt, group, why = stored_format(spec)
        wb = weight_bytes(spec, fmt, group)
    stored_bytes, mtp = (wb.total, 0) if fmt == "file" else stored_file_bytes(spec, fmt, group)
    n_sliding = sum(1 for k in spec.layer_types if k == "sliding")
    arch: dict[str, Any] = {
        "model_type": spec.model_type, "layers": spec.num_layers, "hidden_size": spec.hidden_size,
        "attention": spec.attention_kind, "num_heads": spec.num_heads, "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim, "intermediate_size": spec.intermediate_size, "vocab_size": spec.vocab_size,
        "tie_word_embeddings": spec.tie_word_embeddings, "sliding_window": spec.sliding_window,
        "sliding_layers": n_sliding, "max_position_embeddings": spec.max_position_embeddings,
    }
    if spec.mla:
        arch["mla"] = vars(spec.mla)
    if spec.moe:
        arch["moe"] = vars(spec.moe) | {"moe_layers": sum(spec.moe_layers)}
    if spec.recurrent is not None and spec.recurrent_layer_count:
        # one letter per layer: A attention, R recurrent mixer, H both (Falcon-H1), F feed-forward only
        sched = "".join("H" if a != "none" and r else "A" if a != "none" else "R" if r else "F"
                        for a, r in zip(spec.layer_types, spec.recurrent_layers, strict=True))
        arch["recurrent"] = vars(spec.recurrent) | {"recurrent_layers": spec.recurrent_layer_count,
                                                    "attention_layers": spec.attention_layers,
                                                    "layer_schedule": sched}
    if spec.encoder_decoder is not None:
        # "layers" counts the blocks of both stacks; the stacks as the model has them
        arch["encoder_decoder"] = vars(spec.encoder_decoder)
    if spec.gemma3n is not None:
        arch["gemma3n"] = vars(spec.gemma3n) | {"kv_shared_layers": sum(spec.kv_shared_layers),
                                                "kv_cache_layers": spec.kv_cache_layers,
                                                "ffn_sizes": list(spec.ffn_sizes) or None}
    if spec.gemma4 is not None:
        g4 = spec.gemma4
        arch["gemma4"] = {"per_layer_width": g4.ple_width, "per_layer_vocab": g4.ple_vocab,
                          "full_attention_head_dim": spec.full_head_dim or spec.head_dim,
                          "kv_shared_layers": sum(spec.kv_shared_layers), "kv_cache_layers": spec.kv_cache_layers,
                          "ffn_sizes": list(spec.ffn_sizes) or None,
                          "towers": [n for n, t in (("vision", g4.vision), ("audio", g4.audio)) if t is not None],
                          "tower_params": gemma4_tower_params(spec)}
    data = envelope("inspect", {
        "model": spec.name, "source": spec.source, "architecture": arch,
        "params": {"total": pc.total, "active": pc.active, "by_component": pc.by_component},
        "published_params": spec.published_params, "published_params_source": spec.published_params_source or None,
        "stored_format": {"format": fmt, "why": why, "bytes": stored_bytes},
        "notes": list(spec.notes),
    })
    if mtp:
        data["mtp"] = {"layers": spec.mtp_layers, "params": mtp_params(spec), "unique_params": mtp_unique_params(spec),
                       "bytes": mtp}
    if spec.file_weights is not None:
        fw = spec.file_weights
        data["file_weights"] = {"path": fw.path, "bytes": fw.total_bytes, "params_stored": fw.params,
                                "by_dtype": dict(fw.by_dtype), "note": fw.note}
    return data


def cmd_inspect(args: argparse.Namespace) -> int:
    d = inspect_data(resolve_model(args))
    if args.json:
        emit_json(d)
        return 0
    a, p = d["architecture"], d["params"]
    say(f"{d['model']}  [{a['model_type']}]  source: {d['source']}")
    ed = a.get("encoder_decoder")
    layers = f"{ed['encoder_layers']} encoder + {ed['decoder_layers']} decoder" if ed else a["layers"]
    say(f"layers {layers}, hidden {a['hidden_size']}, {a['attention']} heads {a['num_heads']}/"
          f"{a['num_kv_heads']} kv x head_dim {a['head_dim']}, intermediate {a['intermediate_size']}, "
          f"vocab {a['vocab_size']}, tied embeddings {a['tie_word_embeddings']}")
    if a["sliding_layers"]:
        say(f"sliding window {a['sliding_window']} on {a['sliding_layers']} of {a['layers']} layers")
    if "moe" in a:
        m = a["moe"]
        say(f"MoE: {m['num_experts']} experts, top-{m['experts_per_token']}, expert intermediate "
              f"{m['expert_intermediate_size']}, shared intermediate {m['shared_intermediate_size']}, "
              f"{m['moe_layers']} MoE layers")
    if "mla" in a:
        say("MLA: " + ", ".join(f"{k} {v}" for k, v in a["mla"].items()))
    if "recurrent" in a:
        r = a["recurrent"]
        say(f"{r['kind']} mixer on {r['recurrent_layers']} layers, attention on {r['attention_layers']}: d_inner "
            f"{r['d_inner']}, d_state {r['d_state']}, d_conv {r['d_conv']}, heads {r['num_heads']}, groups "
            f"{r['n_groups']}; layers (A attention, R recurrent, H both, F feed-forward only): {r['layer_schedule']}")
    if "gemma4" in a:
        g = a["gemma4"]
        say(f"Gemma 4: full-attention layers head_dim {g['full_attention_head_dim']}; per-layer inputs "
            f"{g['per_layer_width']} x {a['layers']} layers (table of {g['per_layer_vocab']} rows); the last "
            f"{g['kv_shared_layers']} layers reuse earlier layers' K/V (KV cache on {g['kv_cache_layers']})"
            + (f"; per-layer intermediate sizes {min(g['ffn_sizes'])}-{max(g['ffn_sizes'])}" if g["ffn_sizes"] else "")
            + (f"; towers counted: {', '.join(g['towers'])}" if g["towers"] else ""))
    if "gemma3n" in a:
        g = a["gemma3n"]
        say(f"Gemma 3n: per-layer inputs {g['per_layer_width']} x {a['layers']} layers (table of "
            f"{g['per_layer_vocab']} rows), AltUp {g['altup_inputs']} streams, LAuReL rank {g['laurel_rank']}; "
            f"the last {g['kv_shared_layers']} layers reuse earlier layers' K/V (KV cache on {g['kv_cache_layers']})"
            + (f"; per-layer intermediate sizes {g['ffn_sizes']}" if g["ffn_sizes"] else ""))
        for part in g["uncounted"]:
            say(f"not counted: {part}")
    comps = dict(p["by_component"])
    towers = a.get("gemma4", {}).get("tower_params") or {}
    if len(towers) > 1 and sum(towers.values()) == comps.get("vision"):  # component "vision" holds every tower
        comps = {k2: v2 for k, v in comps.items() for k2, v2 in
                 ({f"{t} tower": n for t, n in towers.items()} if k == "vision" else {k: v}).items()}
    rows = [[k, f"{v:,}", f"{100 * v / p['total']:.2f}%"] for k, v in comps.items()]
    rows.append(["TOTAL", f"{p['total']:,}", "100%"])
    if p["active"] != p["total"]:
        rows.append(["active per token", f"{p['active']:,}", f"{100 * p['active'] / p['total']:.2f}%"])
    say(table(rows, ["component", "parameters", "share"]))
    if d["published_params"]:
        said = d.get("published_params_source")
        say(f"published: {d['published_params']:,}" + (f" (source: {said})" if said else ""))
    sf = d["stored_format"]
    say(f"stored as {sf['format']} ({sf['why']}): {format_bytes(sf['bytes'])}")
    if "mtp" in d:
        m = d["mtp"]
        say(f"  of which {m['layers']} multi-token-prediction layer(s): {m['params']:,} parameters with the copies "
            f"of the embedding and output head the checkpoint stores ({m['unique_params']:,} unique), "
            f"{format_bytes(m['bytes'])} (stored after the {a['layers']} decoder layers; not in the parameter "
            "count above, which is the model transformers builds; serving loads them only for MTP speculative "
            "decoding)")
    if "file_weights" in d:
        fw = d["file_weights"]
        say(f"files: {format_bytes(fw['bytes'])} in {fw['path']} ({', '.join(fw['by_dtype'])})")
    for n in d["notes"]:
        say(f"note: {n}")
    return 0

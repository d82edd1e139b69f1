"""`llmsizer hardware [list|show NAME|detect]`: the hardware catalog, every value with its source and date; `detect`
describes the machine it runs on as a hardware file (catalog/detect.py)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ..catalog.detect import COMMANDS, NUMA_MODES, detect_machine
from ..catalog.hardware import MEMORY_CONVENTION, Device, Instance, load_catalog, search
from ..errors import InputError
from ..estimate.device import host_link, target_memory
from ..render.safe import say
from ..render.text import table
from ..result import envelope
from ..suggest import NAME_QUERY_HELP
from ..units import format_bytes
from .commands import COMMAND_HELP
from .common import check_output_file, emit_json, write_atomic

EPILOG = """examples:
  llmsizer hardware list
  llmsizer hardware list --kind gpu
  llmsizer hardware list --provider azure
  llmsizer hardware list m3 --kind apple
  llmsizer hardware show h100-sxm
  llmsizer hardware show p5.48xlarge --json
  llmsizer hardware list --hardware-file my-hardware.json
  llmsizer hardware detect -o my-hardware.json
"""

DETECT_EPILOG = f"""outputs read (under --from DIR, one machine's: a file with one of these names, an extension
allowed, or a folder of that name holding one file, with the command that printed it in FILE.cmd.txt beside it):
{chr(10).join(f"  {name:36} {' '.join(argv)}" for name, argv in COMMANDS.items())}

examples:
  llmsizer hardware detect
  llmsizer hardware detect -o my-hardware.json
  llmsizer fit qwen2.5-7b --device detected-cpu --hardware-file my-hardware.json
  llmsizer recommend qwen2.5-7b --hardware-file my-hardware.json
  llmsizer hardware detect --from saved-outputs/ --json
  llmsizer models qwen3 --fits-on detected
  llmsizer fit qwen2.5-7b --device detected

'detected' (models --fits-on, fit/infer/train --device) detects this machine in-process: no file is written.
"""

KIND_CHOICES = ("gpu", "tpu", "accelerator", "apple", "cpu", "instance")


def register(sub: Any) -> None:
    p = sub.add_parser("hardware", help=COMMAND_HELP["hardware"],
                       description="The hardware catalog: accelerators, Apple silicon, CPUs and cloud instances. "
                                   "Every value carries its source and date; null means no source was found.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    hs = p.add_subparsers(dest="hw_command", metavar="{list,show,detect}")
    lp = hs.add_parser("list", help="list devices and instances", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    lp.add_argument("query", nargs="?", default="", help=NAME_QUERY_HELP)
    _common(lp)
    lp.add_argument("--kind", choices=KIND_CHOICES, help="only this kind")
    lp.add_argument("--provider", help="only instances of this provider (aws, gcp, azure); with --kind, those whose "
                    "accelerator is of that kind")
    sp = hs.add_parser("show", help="every value of one entry with source and date", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("name", help="device or instance id, name or alias (case-insensitive)")
    _common(sp)
    dp = hs.add_parser("detect", help="describe this machine as a hardware file (GPUs, CPU, RAM, Apple chip)",
                       description="Describe the machine as a hardware file that every command accepts with "
                                   "--hardware-file: GPUs from nvidia-smi/rocm-smi (driver-reported memory), the CPU "
                                   "from lscpu and RAM from /proc/meminfo, an Apple chip from system_profiler/sysctl. "
                                   "Devices found in the catalog keep its bandwidth and FLOP/s; others get the "
                                   "detected memory and null bandwidth/FLOP/s (never guessed). A GPU in MIG mode "
                                   "is its MIG devices (nvidia-smi -q), one per process. Only the fixed, "
                                   "read-only commands below are run, each if installed, without a shell.",
                       epilog=DETECT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dp.add_argument("--from", dest="from_dir", metavar="DIR",
                    help="read saved command outputs from DIR instead of running the commands")
    dp.add_argument("-o", "--output", metavar="FILE", help="write the hardware file here (JSON)")
    dp.add_argument("--force", action="store_true", help="overwrite an existing -o file (as `request new`)")
    dp.add_argument("--numa", choices=NUMA_MODES, default="off",
                    help="how llama.cpp runs on a machine of several sockets (its --numa): 'distribute' gives the CPU "
                         "every socket's memory bandwidth; 'off' (llama.cpp's default) and 'isolate' one socket's, "
                         "what one process without NUMA placement reads its weights at; 'isolate' also one socket's "
                         "cores, FLOP/s and TDP (its threads on one node) (default: off)")
    dp.add_argument("--json", action="store_true", help="machine-readable output (the file and what was read)")
    _common(p)
    p.set_defaults(func=cmd_hardware, query="", kind=None, provider=None)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hardware-file", action="append", default=[], metavar="FILE",
                   help="JSON (or YAML) file adding or overriding entries; repeatable")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_hardware(args: argparse.Namespace) -> int:
    if getattr(args, "hw_command", None) == "show":
        return cmd_show(args)
    if getattr(args, "hw_command", None) == "detect":
        return cmd_detect(args)
    return cmd_list(args)


def _fmt(v: Any, kind: str) -> str:
    if v is None:
        return ""
    if kind == "bytes":
        return format_bytes(v)  # memory capacity: always GiB (MEMORY_CONVENTION)
    if kind == "bw":
        return f"{v / 1e9:,.0f} GB/s"
    if kind == "flops":
        return f"{v / 1e12:,.1f}"
    return str(v)


_BASIS_LABEL = {"driver": "driver", "vendor-binary": "vendor GB=GiB", "stated": "as stated", "": ""}


def _found(args: argparse.Namespace) -> tuple[list[Device], list[Instance]]:
    """The entries ``hardware list`` shows: ``--kind`` alone filters devices by kind (``instance``: the instances);
    ``--provider`` keeps only that provider's instances, and with ``--kind`` too both apply: the instances whose
    accelerator is of that kind (``--kind instance``: all of the provider's)."""
    if not args.provider:
        found = search(args.query, [args.kind] if args.kind else [], args.hardware_file)
        return [d for d in found if isinstance(d, Device)], [i for i in found if isinstance(i, Instance)]
    provider = args.provider.lower()
    # a provider the catalog has no instance of is said with those it has (not an empty list)
    has = sorted({i.provider for i in load_catalog(args.hardware_file).instances.values()})
    if provider not in has:
        raise InputError(f"the catalog has no instances of provider {args.provider!r}; its providers: " + ", ".join(has))
    found = search(args.query, [provider], args.hardware_file)
    return [], [i for i in found if isinstance(i, Instance) and args.kind in (None, "instance", i.device.kind)]


def list_answer(args: argparse.Namespace) -> dict[str, Any]:
    """`hardware list --json` (and the web API's hardware list)."""
    devices, instances = _found(args)
    return envelope("hardware-list", {"devices": [d.to_dict() for d in devices],
                                      "instances": [i.to_dict() for i in instances]})


def show_answer(args: argparse.Namespace) -> dict[str, Any]:
    """`hardware show NAME --json` (and the web API's one hardware entry)."""
    cat = load_catalog(args.hardware_file)
    hw = cat.find(args.name)
    data = hw.to_dict()
    data.pop("kind", None)  # a device's ``kind`` (deprecated alias of ``device_kind``): here the answer's kind
    data["sources"] = {k: cat.sources.get(k, {}) for k in sorted({v["source"] for v in data["values"].values()})}
    data["usable_memory"] = usable_memory_of(hw)
    return envelope("hardware", data)


def usable_memory_of(hw: Device | Instance) -> dict[str, Any]:
    """The memory a workload gets on one of this entry's devices, as every estimate takes it (estimate/device.py
    ``target_memory``: the catalog's, a CPU instance's RAM, Apple's Metal working-set share), with its reasons: what
    fit's budget (x (1 - headroom)) starts from."""
    device, instance = (hw.device, hw) if isinstance(hw, Instance) else (hw, None)
    usable, notes = target_memory(device, instance, None)
    return {"bytes": usable, "assumptions": [a.to_dict() for a in notes.assumptions]}


def cmd_list(args: argparse.Namespace) -> int:
    if args.json:
        emit_json(list_answer(args))
        return 0
    devices, instances = _found(args)
    if devices:
        rows = []
        for d in devices:
            peak, key = d.peak_flops("fp32" if d.kind == "cpu" else "bf16")
            rows.append([d.id, d.kind, d.form_factor, _fmt(d.memory_bytes, "bytes"), _BASIS_LABEL[d.memory_basis],
                         _fmt(d.bandwidth, "bw"), f"{_fmt(peak, 'flops')} {key}" if peak else "",
                         _fmt(d.tdp.raw, "") + " W" if d.tdp else ""])
        say(table(rows, ["device", "kind", "form", "memory", "memory basis", "bandwidth", "dense TFLOP/s", "TDP"]))
        say("memory (GiB) basis: 'driver' = the capacity a driver reports (nvidia-smi memory.total, rocm-smi VRAM "
              "total, cloud GpuInfo SizeInMiB), sourced per device; 'vendor GB=GiB' = no driver report sourced, the "
              "vendor's GB read as GiB (JEDEC JESD100B.01 binary prefix); 'as stated' = given in GiB or bytes")
    if instances:
        if devices:
            say()
        rows = [[i.id, i.provider, f"{i.device_count} x {i.device.id}",
                 f"${i.price_per_hour:,.2f}/h" if i.price_per_hour is not None else "", i.region] for i in instances]
        say(table(rows, ["instance", "provider", "accelerators", "on-demand", "region"]))
    say(f"{len(devices)} devices, {len(instances)} instances")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    if args.json:
        emit_json(show_answer(args))
        return 0
    cat = load_catalog(args.hardware_file)
    hw = cat.find(args.name)
    say(f"{hw.name}  ({hw.id})")
    if isinstance(hw, Instance):
        say(f"provider {hw.provider}; {hw.device_count} x {hw.device.name} ({hw.device.id})"
              + (f"; interconnect {hw.interconnect}" if hw.interconnect else ""))
    else:
        say(f"{hw.vendor} {hw.kind}, {hw.form_factor}" + (f"; interconnect {hw.interconnect}" if hw.interconnect else ""))
        if hw.memory_bytes is not None:
            say(f"memory: {format_bytes(hw.memory_bytes)} ({hw.memory_bytes:,} B), {hw.memory_basis_text()}")
            say(f"  convention: {MEMORY_CONVENTION}")
        link = cat.interconnect(hw.host_interconnect) if hw.host_interconnect else None
        if link is not None:  # the link host-transfer terms read (estimate/device.py host_link), with its basis
            say(f"host link: {host_link(hw)[1]}" + (f"; derived: {link.bandwidth.derived}" if link.bandwidth.derived
                                                    else "") + (f"; {link.bandwidth.note}" if link.bandwidth.note else ""))
    usable = usable_memory_of(hw)  # shown where it is not the memory line above: Apple's share, an instance's
    if usable["bytes"] is not None and (isinstance(hw, Instance) or usable["bytes"] != hw.memory_bytes):
        why = "; ".join(f"{a['name']} {a['value']}: {a['why']}" for a in usable["assumptions"])
        say(f"memory a workload gets per device: {format_bytes(usable['bytes'])} ({why}); fit's budget is this x "
            "(1 - headroom)")
    rows = []
    for name, v in hw.values().items():
        extra = dict(v.extra)
        note = "; ".join(x for x in (v.derived and f"derived: {v.derived}", extra.get("where", ""),
                                     extra.get("region", "") and f"region {extra['region']}", v.note,
                                     v.confidence and f"{v.confidence} confidence") if x)
        rows.append([name, v.describe(), v.source, f"{v.date} ({v.date_kind})", note])
    for name, why in hw.missing.items():
        rows.append([name, "null", "", "", why])
    say(table(rows, ["field", "value", "source", "date", "notes"]))
    used = sorted({v.source for v in hw.values().values()})
    for k in used:
        s = cat.sources.get(k, {})
        say(f"  [{k}] {s.get('title', '')} {s.get('url', '')}")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    why = "a hardware file may hold values added by hand: bandwidth, FLOP/s"  # the user may have filled in its nulls
    if args.output:
        check_output_file(args.output, force=args.force, why=why)
    det = detect_machine(args.from_dir, args.numa)
    text = det.hardware_text().text
    with tempfile.TemporaryDirectory() as tmp:  # it must load as every command will read it, before it is written
        check = Path(tmp) / "detected.json"
        check.write_text(text, "utf-8")
        load_catalog([check])
    if args.output:
        write_atomic(Path(args.output), text, force=args.force, why=why)
    if args.json:
        emit_json(det.to_dict(args.output))  # the object's own shape (Detection.to_dict), one home
        return 0
    rows = [[d.id, d.kind, str(d.count), format_bytes(d.memory_bytes) if d.memory_bytes else "unknown",
             d.catalog_id or (f"one of {len(d.candidates)} (see the warning)" if d.candidates else "not in catalog"),
             d.note] for d in det.devices]
    say(table(rows, ["device", "kind", "count", "memory", "catalog", "notes"]))
    for o in det.outputs:
        say(f"read: {o.command}  [{o.origin}, {o.date}]")
    for s in det.skipped:
        say(f"skipped: {s}")
    for w in det.warnings:
        say(f"warning: {w}")
    if args.output:
        say(f"wrote {args.output}; use it with --hardware-file {args.output}, e.g. "
              f"`llmsizer fit MODEL --device {det.devices[0].id}"
              + (f" --count {det.devices[0].count}" if det.devices[0].count > 1 else "")
              + f" --hardware-file {args.output}`")
    else:
        say("write it as a hardware file with -o FILE (or see it with --json)")
    return 0

"""Side-by-side benchmark: llmsizer against the tools users would pick instead, on the same cases.

Tools (installed into a separate venv, versions pinned below): Hugging Face accelerate ``estimate-memory``,
hf-mem, llm-analysis; and llmsizer from this repository's ``src/``. For each case: each tool's answer, its error
against the measured value (from ``validation/*.csv`` or ``validation/measured/*.jsonl``), the wall time per
answer (in-process, warm, median) and the cold start (a fresh process: imports + one answer, median).

Offline, honestly: this machine reaches PyPI but not the Hugging Face Hub.
- ``accelerate estimate-memory`` always calls ``huggingface_hub.model_info`` (``verify_on_hub``) before anything
  else, so the CLI cannot run offline, not even on a local folder. Its answer is reproduced with its own functions
  on the same config: ``AutoConfig`` -> ``AutoModel.from_config`` under ``init_empty_weights()`` (exactly what
  ``create_empty_model`` does: note *AutoModel*, the base model without ``lm_head``), then
  ``calculate_maximum_sizes`` and ``estimate_training_usage``, printed as the CLI would.
- ``hf-mem`` fetches ``https://huggingface.co/...`` URLs (hard-coded in ``hf_mem/run.py``; no local-path option):
  the CLI needs the network. Its answer is reproduced with its own parser and KV formula
  (``parse_safetensors_metadata``, ``resolve_kv_cache_dtype``, ``compute_safetensors_kv_cache_size``) fed with the
  safetensors header the checkpoint would have (tensor names/shapes/dtypes of the transformers model built on the
  meta device, tied weights stored once).
- ``llm-analysis`` runs offline through its Python API; its Hub lookup (``get_model_config_from_hf``) is replaced by
  building the same ``ModelConfig`` from the config dict with the same fields that function copies (so, as there,
  ``ffn_embed_dim`` defaults to 4 x hidden). It pins transformers<5 and huggingface-hub<0.15, which conflict with
  accelerate, so it is installed with ``--no-deps`` (+ ``fire``); its optional transformers import is unused.

    python3 bench/compare_tools.py --setup                      # make /tmp/llmsizer-bench-venv (pinned)
    /tmp/llmsizer-bench-venv/bin/python bench/compare_tools.py --markdown bench/compare_tools.md
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
VENV = Path("/tmp/llmsizer-bench-venv")
PINS = ["torch==2.13.0", "transformers==5.24.0", "accelerate==1.15.0", "hf-mem==0.5.6", "fire==0.5.0"]
NO_DEPS = ["llm-analysis==0.2.2"]
GiB, GB = 2**30, 10**9


# -- cases -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    id: str
    title: str
    kind: str  # weights | inference | training
    model: str  # catalog name, or "octocoder"
    measured: float | None  # bytes
    measured_src: str
    dtype: str = "bf16"
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""


def _csv_value(rid: str) -> tuple[float, str]:
    from llmsizer.validation_cases import public_rows, vllm_rows

    if rid.startswith("VL"):
        row = next(r for r in vllm_rows() if r["id"] == rid)
        return float(row["weights_gib"]) * GiB, f"{rid} (vLLM log 'Loading weights took ... GiB')"
    row = public_rows()[rid]
    unit = GiB if row["unit"].startswith("GiB") else GB
    return float(row["value"]) * unit, f"{rid} ({row['framework']} {row['metric']}, {row['value']} {row['unit']})"


def _measured_record(model: str, kind: str, **want: Any) -> dict[str, Any] | None:
    from llmsizer.measure.store import read_jsonl

    for rec in read_jsonl(sorted(glob.glob(str(ROOT / "validation" / "measured" / "*.jsonl")))):
        s = rec.get("settings", {})
        if rec.get("status") == "ok" and rec["kind"] == kind and rec["model"]["name"].lower().endswith(model) and \
                all(s.get(k) == v for k, v in want.items()):
            return rec
    return None


def cases() -> list[Case]:
    out = []
    for rid, model, title in (("VL03", "qwen3-0.6b", "Qwen3-0.6B weights, bf16"),
                              ("VL01", "llama-3.1-8b", "Llama-3.1-8B weights, bf16"),
                              ("VL04", "qwen3-32b", "Qwen3-32B weights, bf16")):
        v, src = _csv_value(rid)
        out.append(Case(rid, title, "weights", model, v, src))
    v, src = _csv_value("PM0083")
    out.append(Case("PM0083", "octocoder 15.5B bf16, transformers generate 24+60 tokens: peak allocated", "inference",
                    "octocoder", v, src, settings=dict(prompt=24, output=60, batch=1)))
    from llmsizer.validation_cases import TRAINING_ROWS

    tt = "torchtune Llama-2-7B, 1 x RTX 4090, batch 4 x 2048 tokens"
    for rid, title in (("PM0019", f"{tt}, LoRA: peak memory"), ("PM0017", f"{tt}, QLoRA: peak memory"),
                       ("PM0023", f"{tt}, full bf16, PagedAdamW: peak memory")):
        v, src = _csv_value(rid)
        _, fields, note, _, _ = TRAINING_ROWS[rid]
        out.append(Case(rid, title, "training", "llama-2-7b-hf", v, src, settings=dict(fields),
                        note="settings the README row leaves out, as tests/validation/test_public_training.py "
                             f"assumes them (llmsizer.validation_cases.TRAINING_ROWS): {note}"))
    rec = _measured_record("qwen2.5-0.5b", "inference", device="cpu")
    if rec:
        s = rec["settings"]
        out.append(Case("M-infer", f"Qwen2.5-0.5B fp32 on CPU, {s['context']} tokens x {s['concurrency']}: "
                        "peak live tensors", "inference", "qwen2.5-0.5b", rec["measured"]["peak_tensor_bytes"],
                        f"validation/measured ({Path(rec['source_file']).name}:{rec['source_line']})", "fp32",
                        dict(prompt=s["context"] - s["output_tokens"], output=s["output_tokens"],
                             batch=s["concurrency"])))
    rec = _measured_record("smollm2-135m", "training", device="cpu", method="full", grad_checkpointing="none")
    if rec:
        s = rec["settings"]
        out.append(Case("M-train", f"SmolLM2-135M full fp32 AdamW on CPU, batch {s['micro_batch']} x "
                        f"{s['seq_len']}: peak live tensors", "training", "smollm2-135m",
                        rec["measured"]["peak_tensor_bytes"],
                        f"validation/measured ({Path(rec['source_file']).name}:{rec['source_line']})", "fp32",
                        dict(micro_batch=s["micro_batch"], seq_len=s["seq_len"], method="full", precision="fp32",
                             grad_checkpointing="none", optimizer="adamw", optimizer_impl=s.get("optimizer_impl"))))
    return out


def config_of(model: str) -> dict[str, Any]:
    if model == "octocoder":
        from llmsizer.validation_cases import STARCODER

        return dict(STARCODER, architectures=["GPTBigCodeForCausalLM"])
    from llmsizer.catalog.models import find

    return dict(find(model).config)


# -- the tools (each returns bytes or raises NotApplicable) --------------------------------------------------------

class NotApplicable(Exception):
    pass


def ask_llmsizer(case: Case) -> float:
    from llmsizer import estimate_inference
    from llmsizer.catalog.models import find

    if case.model == "octocoder":
        from llmsizer.validation_cases import octocoder_prediction

        return float(octocoder_prediction("PM0083")[0])
    spec = find(case.model).spec()
    if case.kind == "weights":
        return float(estimate_inference(spec, weights=case.dtype, dtype=case.dtype).item("weights").bytes)
    if case.kind == "inference":
        s = case.settings
        est = estimate_inference(spec, context=s["prompt"] + s["output"], concurrency=s["batch"],
                                 output_tokens=s["output"], dtype=case.dtype, weights=case.dtype,
                                 device="cpu" if case.id.startswith("M-") else "gpu")
        return float(sum(i.bytes for i in est.items if i.name in ("weights", "kv_cache", "activations",
                                                                   "dequant_buffer")))
    from llmsizer.estimate.training import estimate_training
    from llmsizer.validation_cases import TRAINING_ROWS, training_prediction

    if case.id in TRAINING_ROWS:
        return float(training_prediction(case.id))
    est = estimate_training(spec, **{k: v for k, v in case.settings.items() if v is not None})
    return float(est.details["tensor_peak_bytes"])


def _meta_model(config: dict[str, Any], base: bool, dtype: Any) -> Any:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    cfg = dict(config)
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    cls = transformers.AutoModel if base else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        return cls.from_config(conf, dtype=dtype)


def ask_accelerate(case: Case) -> float:
    import torch
    from accelerate import init_empty_weights
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    if case.kind == "training" and case.settings.get("method") != "full":
        raise NotApplicable("no LoRA/QLoRA: 'Training using Adam' is full training only")
    with init_empty_weights():  # create_empty_model: AutoModel (no lm_head) in float32
        model = _meta_model(config_of(case.model), True, torch.float32)
    total, _ = calculate_maximum_sizes(model)
    dtype = "float32" if case.dtype == "fp32" else "float16"
    if case.kind == "training":
        return float(max(estimate_training_usage(total, dtype).values()))
    return float(total if dtype == "float32" else total / 2)  # 'Total Size' (weights only, also for inference)


def _header(config: dict[str, Any], dtype: str) -> dict[str, Any]:
    import torch

    td = torch.float32 if dtype == "fp32" else torch.bfloat16
    model = _meta_model(config, False, td)
    st = "F32" if dtype == "fp32" else "BF16"
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, p in model.named_parameters():  # shared (tied) tensors once, as save_pretrained stores them
        n = p.numel() * p.element_size()
        header[name] = {"dtype": st, "shape": list(p.shape), "data_offsets": [off, off + n]}
        off += n
    return header


def ask_hf_mem(case: Case, _cache: dict[str, Any] = {}) -> float:  # noqa: B006 - per-process header cache
    from hf_mem.safetensors.kv_cache import compute_safetensors_kv_cache_size, resolve_kv_cache_dtype
    from hf_mem.safetensors.metadata import parse_safetensors_metadata

    if case.kind == "training":
        raise NotApplicable("inference only")
    config = config_of(case.model)
    key = f"{case.model}:{case.dtype}"
    if key not in _cache:
        _cache[key] = _header(config, case.dtype)
    meta = parse_safetensors_metadata(raw_metadata={"Transformer": _cache[key]})
    if case.kind == "weights":
        return float(meta.bytes_count)
    s = case.settings
    cfg = dict(config, torch_dtype="float32" if case.dtype == "fp32" else "bfloat16")
    if not all(k in cfg for k in ("hidden_size", "num_hidden_layers", "num_attention_heads")):
        return float(meta.bytes_count)  # hf-mem warns and leaves the KV cache out (GPT-BigCode's n_embd/n_layer)
    dt = resolve_kv_cache_dtype(config=cfg, kv_cache_dtype="auto", metadata=meta, model_id=case.model)
    kv = compute_safetensors_kv_cache_size(config=cfg, cache_dtype=dt, max_model_len=s["prompt"] + s["output"],
                                           batch_size=s["batch"])
    return float(meta.bytes_count + kv)


def _llm_analysis(config: dict[str, Any], bits: int) -> Any:
    import logging

    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name

    logging.getLogger("llm_analysis").setLevel(logging.ERROR)
    c = config
    mc = ModelConfig(name="case", max_seq_len=c.get("max_position_embeddings", c.get("n_positions")),
                     num_layers=c.get("num_hidden_layers", c.get("n_layer")),
                     n_head=c.get("num_attention_heads", c.get("n_head")),
                     hidden_dim=c.get("hidden_size", c.get("n_embd")), vocab_size=c["vocab_size"],
                     model_type=c.get("model_type"),
                     num_key_value_heads=c.get("num_key_value_heads", 1 if c.get("multi_query") else None))
    gpu = dataclasses.replace(get_gpu_config_by_name("h100-sxm-80gb"), mem_per_GPU_in_GB=10_000)
    return LLMAnalysis(mc, gpu, DtypeConfig(f"w{bits}a{bits}e{bits}", bits, bits, bits), ParallelismConfig())


def ask_llm_analysis(case: Case) -> float:
    from llm_analysis.analysis import ActivationRecomputation

    bits = 32 if case.dtype == "fp32" else 16
    if bits == 32:  # DtypeConfig accepts it, then the analysis asserts "weight_bits ... must be 4, 8, or 16"
        raise NotApplicable("no fp32: weight/activation bits must be 4, 8 or 16")
    a = _llm_analysis(config_of(case.model), bits)
    s = case.settings
    if case.kind == "training":
        if s.get("method") != "full":
            raise NotApplicable("no PEFT/LoRA (README: 'future')")
        d = a.training(batch_size_per_gpu=s["micro_batch"], seq_len=s["seq_len"],
                       total_num_tokens=s["micro_batch"] * s["seq_len"],
                       activation_recomputation=ActivationRecomputation.FULL
                       if s.get("grad_checkpointing") == "full" else ActivationRecomputation.NONE,
                       flash_attn=True)
        return float(d["(weight+op_state+grad+act)_memory_per_gpu"])
    if case.kind == "weights":
        return float(a.get_num_params_total() * bits // 8)
    d = a.inference(batch_size_per_gpu=s["batch"], seq_len=s["prompt"], num_tokens_to_generate=s["output"])
    return float(d["weight_memory_per_gpu"] + d["kv_cache_memory_per_gpu"]
                 + max(d["prefill_activation_memory_per_gpu"], d["decode_activation_memory_per_gpu"]))


TOOLS: dict[str, Callable[[Case], float]] = {"llmsizer": ask_llmsizer, "accelerate": ask_accelerate,
                                             "hf-mem": ask_hf_mem, "llm-analysis": ask_llm_analysis}
IMPORTS = {"llmsizer": "import llmsizer, llmsizer.estimate.training", "accelerate": "import accelerate.commands.estimate",
           "hf-mem": "import hf_mem.run", "llm-analysis": "import llm_analysis.analysis"}
OFFLINE = {"llmsizer": "yes (catalog / config.json; nothing downloaded)",
           "accelerate": "CLI: no (verify_on_hub -> huggingface_hub.model_info first); reproduced with its functions",
           "hf-mem": "CLI: no (https://huggingface.co URLs, no local path); reproduced with its parser + KV formula",
           "llm-analysis": "yes via the Python API (its Hub lookup replaced by the same ModelConfig fields)"}


def timed(fn: Callable[[Case], float], case: Case, repeat: int) -> tuple[float | None, str, float | None]:
    try:
        value = fn(case)
    except NotApplicable as e:
        return None, str(e), None
    except Exception as e:  # noqa: BLE001 - a tool that fails on a case is a result
        return None, f"fails: {type(e).__name__}: {str(e)[:80]}", None
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(case)
        times.append(time.perf_counter() - t)
    return value, "", statistics.median(times)


def cold_start(tool: str, case_id: str, repeat: int) -> float:
    c = next(x for x in cases() if x.id == case_id)
    args = ", ".join(repr(v) for v in (c.id, c.title, c.kind, c.model, c.measured, "", c.dtype, c.settings))
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import compare_tools as C; "
            f"C.TOOLS[{tool!r}](C.Case({args}))")
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                       env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error"))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cli_cold_start(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "llmsizer.cli.main", "infer", "llama-3.1-8b", "--json"], check=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for p in ("torch", "transformers", "accelerate", "hf-mem", "llm-analysis", "fire", "huggingface_hub"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "missing"
    return out


def run(repeat: int, cold_repeat: int) -> dict[str, Any]:
    cs = cases()
    rows = []
    for c in cs:
        row: dict[str, Any] = {"case": c, "answers": {}}
        for tool, fn in TOOLS.items():
            rep = 3 if tool in ("accelerate", "hf-mem") else repeat
            value, why, secs = timed(fn, c, rep)
            err = None if value is None or not c.measured else (value - c.measured) / c.measured
            row["answers"][tool] = {"value": value, "why": why, "seconds": secs, "error": err}
        rows.append(row)
        print(f"{c.id:8s} " + "  ".join(
            f"{t}: {a['value'] / GiB:7.2f} GiB {a['error']:+.0%}" if a["value"] is not None else f"{t}: n/a"
            for t, a in row["answers"].items()), flush=True)
    cold = {t: cold_start(t, "VL01", cold_repeat) for t in TOOLS}
    return {"rows": rows, "cold": cold, "cli": cli_cold_start(cold_repeat), "versions": versions()}


def markdown(res: dict[str, Any]) -> str:
    def gib(v: float | None) -> str:
        return "-" if v is None else f"{v / GiB:.2f}"

    lines = ["| case | measured GiB | " + " | ".join(TOOLS) + " |", "|---|---:|" + "---:|" * len(TOOLS)]
    for r in res["rows"]:
        c = r["case"]
        cells = []
        for t in TOOLS:
            a = r["answers"][t]
            cells.append(f"n/a ({a['why']})" if a["value"] is None else
                         f"{gib(a['value'])} ({a['error']:+.0%})" if a["error"] is not None else gib(a["value"]))
        lines.append(f"| {c.id}: {c.title} | {gib(c.measured)} | " + " | ".join(cells) + " |")
    med = ["| median abs error over the cases it answers | |"]
    for t in TOOLS:
        errs = [abs(r["answers"][t]["error"]) for r in res["rows"] if r["answers"][t]["error"] is not None]
        med.append(f" {statistics.median(errs):.1%} ({len(errs)} cases) |" if errs else " - |")
    lines.append("".join(med))
    timing = ["", "| | " + " | ".join(TOOLS) + " |", "|---|" + "---:|" * len(TOOLS)]
    per = []
    for t in TOOLS:
        ts = [r["answers"][t]["seconds"] for r in res["rows"] if r["answers"][t]["seconds"] is not None]
        per.append(f"{statistics.median(ts) * 1e3:.2f} ms" if ts else "-")
    timing.append("| wall time per answer (in-process, warm, median over cases) | " + " | ".join(per) + " |")
    timing.append("| cold start: fresh process, imports + one answer (VL01) | "
                  + " | ".join(f"{res['cold'][t]:.2f} s" for t in TOOLS) + " |")
    timing.append("| runs offline | " + " | ".join(OFFLINE[t] for t in TOOLS) + " |")
    srcs = ["", "Measured values:"] + [f"- {r['case'].id}: {r['case'].measured_src}" for r in res["rows"]]
    notes = [f"- {r['case'].id}: {r['case'].note}" for r in res["rows"] if r["case"].note]
    ver = ", ".join(f"{k} {v}" for k, v in res["versions"].items())
    return "\n".join(lines + timing + srcs + (["", "Notes:"] + notes if notes else []) + [
        "", f"`llmsizer infer llama-3.1-8b --json` cold start (CLI, fresh process): {res['cli'] * 1e3:.0f} ms median.",
        "", f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; {ver}."])


def setup() -> None:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *PINS], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", *NO_DEPS], check=True)
    print(f"ready: {py} bench/compare_tools.py")


BEGIN, END = "<!-- results: begin (bench/compare_tools.py --markdown) -->", "<!-- results: end -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help=f"create {VENV} with the pinned tools and exit")
    ap.add_argument("--repeat", type=int, default=20, help="timed repeats per answer (accelerate, hf-mem: 3)")
    ap.add_argument("--cold-repeat", type=int, default=3)
    ap.add_argument("--markdown", help="replace the results section of this Markdown file")
    ap.add_argument("--json", help="write raw results here")
    a = ap.parse_args()
    if a.setup:
        setup()
        return
    res = run(a.repeat, a.cold_repeat)
    text = markdown(res)
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps({**res, "rows": [{**r, "case": dataclasses.asdict(r["case"])}
                                                             for r in res["rows"]]}, indent=1, default=str))
    if a.markdown:
        p = Path(a.markdown)
        old = p.read_text() if p.exists() else f"{BEGIN}\n{END}\n"
        head, _, rest = old.partition(BEGIN)
        _, _, tail = rest.partition(END)
        p.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# GPU validation matrix for llmsizer: real runs with random weights on one CUDA GPU (H100/H200 class), each
# compared with llmsizer's estimate, written as validation/measured/gpu-<device>-<date>.jsonl (under $OUT when
# set, which the device tool copies back; else in this repository). Target: under 8 minutes in all.
#
#   bash bench/gpu_validation.sh            # the matrix (needs CUDA)
#   bash bench/gpu_validation.sh --smoke    # two tiny cases on the CPU: checks the plumbing anywhere
#   bash bench/gpu_validation.sh --wheels   # here, before a device call: the wheels its offline image lacks, into .whl/
#
# Environment: PYTHON (interpreter to start from), LLMSIZER_GPU_VENV (default .venv-gpu), LLMSIZER_GPU_TOTAL
# (seconds for set-up + matrix, default 450; 180 for LLMSIZER_GPU_SET=moegemm), LLMSIZER_CASE_TIMEOUT (seconds per case, default 150), LLMSIZER_GPU_FROM
# (first case to run, default 1: a second device call resumes the matrix where the first call's budget ran out),
# LLMSIZER_GPU_SET (default 'all'; 'decode': the inference cases only, each timing 128 decode steps in 2 timed passes
# instead of 32, into gpu-<device>-<date>-decode.jsonl: 32 steps timed once left the 7-8B decode rows contradicting
# each other, validation/measured/README.md; 'hosttrain': the small-model training cases only (Qwen2.5-0.5B and
# 1.5B), 8 timed steps each, into gpu-<device>-<date>-hosttrain.jsonl: their step times, two timed steps right after
# the tracked ones, ran at 0.38-0.46 of the predicted rate, validation/measured/README.md; 'moegemm': no `measure`
# cases: bench/gpu_moe_gemm.py times the Megatron-Bridge MoE rows' per-expert GEMMs (one cuBLAS GEMM per local expert
# over 4 CUDA streams, as TransformerEngine's grouped GEMM runs them; the same FLOPs as one dense GEMM; the dense layer
# GEMMs of the row Hopper's u was fitted on), BF16 and, where the GPU has them, FP8 with per-tensor scales, in plain
# torch, beside llmsizer's predicted seconds for the same GEMMs, into validation/measured/gemm/gpu-<device>-<date>-
# moegemm.jsonl (a folder `llmsizer validate` does not read); under 3 minutes on an H100 (LLMSIZER_GPU_TOTAL caps it,
# default 180 for this set); needs torch alone, so no pinned package is checked or installed; `--smoke` runs one tiny
# case of it on the CPU, fp32, and a tinier FP8 one through torch._scaled_mm). The device command (15-minute budget):
#   export PYTHONUNBUFFERED=1 LLMSIZER_GPU_SET=moegemm LLMSIZER_GPU_TOTAL=240; timeout 300 bash bench/gpu_validation.sh
# with the device call's timeout_s >= 300 (330: the script stops its sweep at the 240 s budget, the set ordered so
# that the budget cuts the sweep first).
#
# Robustness: each case runs in its own process (`python -m llmsizer.cli.main measure ...`, which itself measures in a
# child process) under a timeout; a case that fails, runs out of memory or times out is recorded as such and the
# matrix goes on; cases that no longer fit the time budget are recorded as skipped. Nothing is downloaded at run
# time except, when missing, the pinned packages below (the GPU machine may be offline: then what is installed
# is used, and cases needing a missing package are recorded as failed).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMOKE=0
[ "${1:-}" = "--smoke" ] && SMOKE=1
GPU_SET="${LLMSIZER_GPU_SET:-all}"
case "$GPU_SET" in all|decode|hosttrain|moegemm) ;;
  *) printf "LLMSIZER_GPU_SET must be 'all', 'decode', 'hosttrain' or 'moegemm', not '%s'\n" "$GPU_SET" >&2; exit 2 ;; esac
if [ "${1:-}" = "--wheels" ]; then  # run here, before a device call that carries .whl (python 3.12, x86-64 manylinux)
  EXCLUDE="$(git rev-parse --git-path info/exclude)"; mkdir -p "$ROOT/.whl" "$(dirname "$EXCLUDE")"
  grep -qx '/.whl/' "$EXCLUDE" 2>/dev/null || echo /.whl/ >>"$EXCLUDE"  # never committed, yet carried by `carry`
  exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$ROOT/.whl" "bitsandbytes==0.50.2"
fi
DEFAULT_TOTAL=450; [ "$GPU_SET" = moegemm ] && DEFAULT_TOTAL=180  # the moegemm set: its own ~3 minutes
TOTAL="${LLMSIZER_GPU_TOTAL:-$DEFAULT_TOTAL}"
CASE_TIMEOUT="${LLMSIZER_CASE_TIMEOUT:-150}"
VENV="${LLMSIZER_GPU_VENV:-$ROOT/.venv-gpu}"
PINS=("transformers==5.24.0" "peft==0.21.2" "bitsandbytes==0.50.2" "nvidia-ml-py==13.615.71")
log() { printf '[gpu_validation %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
T0=$(date +%s)

# 1. An interpreter that has torch (a preinstalled CUDA torch wins; never an unpinned torch from PyPI).
# First pass: an interpreter whose torch sees a GPU (the matrix) or that also has transformers (the smoke run,
# e.g. the project's .venv); second pass: any torch.
has_torch() { "$1" -c "import torch" >/dev/null 2>&1; }
fits_run() {
  if [ "$SMOKE" = 1 ] && [ "$GPU_SET" = moegemm ]; then "$1" -c "import torch" >/dev/null 2>&1  # torch alone
  elif [ "$SMOKE" = 1 ]; then "$1" -c "import torch, transformers, peft" >/dev/null 2>&1
  else "$1" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; fi
}
CANDS=("${PYTHON:-}" "$VENV/bin/python" "$ROOT/.venv/bin/python" python3 python)
BASE=""
for check in fits_run has_torch; do
  for cand in "${CANDS[@]}"; do
    [ -n "$cand" ] || continue
    command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
    if "$check" "$cand"; then BASE="$cand"; break 2; fi
  done
done
if [ -z "$BASE" ]; then
  BASE="$(command -v python3 || command -v python)"
  log "no interpreter with torch found; will try to install torch==2.13.0 into $VENV"
fi
log "starting from $BASE ($("$BASE" -c 'import sys; print(sys.version.split()[0])'))"

# 2. A venv that sees the preinstalled packages (--system-site-packages), topped up with what is missing.
PY="$BASE"
# (an interpreter that already fits the run is used as it is: a venv made from a venv would not see its packages)
if [ "$BASE" != "$VENV/bin/python" ] && ! fits_run "$BASE"; then
  if [ ! -x "$VENV/bin/python" ]; then
    "$BASE" -m venv --system-site-packages "$VENV" >/dev/null 2>&1 || log "venv creation failed; using $BASE as is"
  fi
  [ -x "$VENV/bin/python" ] && PY="$VENV/bin/python"
fi
pip_try() {  # offline machines fail fast: no retries, short timeouts, 120 s in all
  timeout 120 "$PY" -m pip install --disable-pip-version-check --retries 0 --timeout 10 -q "$@" >/dev/null 2>&1
}
# 2a. Wheels carried in .whl/ (the lent GPU machine reaches no registry): `bash bench/gpu_validation.sh --wheels` here
# downloads the pinned ones that machine's image lacks (bitsandbytes; KINDS.md lists the rest as preinstalled).
if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
  WHL_SITE="${TMPDIR:-/tmp}/llmsizer-whl-site"
  if "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
      --target "$WHL_SITE" "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
    export PYTHONPATH="$WHL_SITE${PYTHONPATH:+:$PYTHONPATH}"; log "installed carried wheels: $(cd "$ROOT/.whl" && ls *.whl | tr '\n' ' ')"
  else log "carried wheels in .whl/ did not install"; fi
fi
if ! has_torch "$PY"; then
  pip_try "torch==2.13.0" || log "torch could not be installed (offline?)"
fi
MISSING=()
for pin in "${PINS[@]}"; do
  [ "$GPU_SET" = moegemm ] && break  # the moegemm set needs torch alone
  mod="${pin%%==*}"; mod="${mod//-/_}"; [ "$mod" = "nvidia_ml_py" ] && mod="pynvml"
  "$PY" -c "import $mod" >/dev/null 2>&1 || MISSING+=("$pin")
done
if [ "$SMOKE" = 1 ]; then
  [ "${#MISSING[@]}" -gt 0 ] && log "smoke run: not installing ${MISSING[*]}"
elif [ "${#MISSING[@]}" -gt 0 ]; then  # one pip call for all of them: an offline machine pays one timeout
  if pip_try "${MISSING[@]}"; then log "installed ${MISSING[*]}"
  else log "could not install ${MISSING[*]} (offline?); using what is there; cases needing them will fail"; fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
GPU_SET="$GPU_SET" "$PY" - <<'EOF' >&2
import importlib, os
for m in ("torch",) if os.environ["GPU_SET"] == "moegemm" else ("torch", "transformers", "peft", "bitsandbytes", "pynvml"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m:13s} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"  {m:13s} MISSING ({type(e).__name__})")
try:
    import torch
    print(f"  cuda available: {torch.cuda.is_available()}" + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
except Exception:  # noqa: BLE001
    pass
EOF

# 3. Where the results go.
if [ "$SMOKE" = 1 ]; then DEVICE_SLUG="cpu-smoke"; else
  DEVICE_SLUG="$("$PY" -c 'import torch,re; n=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-cuda"; print(re.sub(r"[^a-z0-9]+","-",n.lower().replace("nvidia","")).strip("-"))' 2>/dev/null || echo unknown)"
fi
DEST_DIR="${OUT:+$OUT/}validation/measured"
if [ -z "${OUT:-}" ]; then
  if [ "$SMOKE" = 1 ]; then DEST_DIR="$(mktemp -d)/validation/measured"; else DEST_DIR="$ROOT/validation/measured"; fi
fi
mkdir -p "$DEST_DIR"
OUTFILE="$DEST_DIR/gpu-$DEVICE_SLUG-$(date -u +%Y-%m-%d).jsonl"
[ "$SMOKE" = 1 ] && OUTFILE="$DEST_DIR/smoke-$(date -u +%Y-%m-%d).jsonl"
case "$GPU_SET" in all) ;; decode|hosttrain) OUTFILE="${OUTFILE%.jsonl}-$GPU_SET.jsonl" ;;
  moegemm) mkdir -p "$DEST_DIR/gemm"; OUTFILE="$DEST_DIR/gemm/$(basename "${OUTFILE%.jsonl}")-moegemm.jsonl" ;; esac
# 3a. The eager loss's hole in the caching allocator's pool (formulas/loss_allocations.py, bench/gpu_loss_hole.py):
# torchtitan's loss lines under expandable segments, max reserved - max allocated beside llmsizer's replay; < 30 s,
# before the matrix, so its time comes off the matrix's budget.
if [ "$SMOKE" = 0 ] && [ "${LLMSIZER_GPU_FROM:-1}" = 1 ] && [ "$GPU_SET" = all ]; then
  timeout 120 "$PY" "$ROOT/bench/gpu_loss_hole.py" >&2 || log "gpu_loss_hole.py failed (rc $?)"
fi
SETUP_SECONDS=$(( $(date +%s) - T0 ))
BUDGET=$(( TOTAL - SETUP_SECONDS ))
log "results -> $OUTFILE (set-up took ${SETUP_SECONDS}s; ${BUDGET}s left for the matrix, ${CASE_TIMEOUT}s per case)"

# 3b. The moegemm set: bench/gpu_moe_gemm.py, its own budget (what set-up left), under a timeout 30 s past it.
if [ "$GPU_SET" = moegemm ]; then
  SMOKE_ARG=""; [ "$SMOKE" = 1 ] && SMOKE_ARG=--smoke
  timeout $(( BUDGET + 30 )) "$PY" "$ROOT/bench/gpu_moe_gemm.py" --out "$OUTFILE" --budget "$BUDGET" $SMOKE_ARG
  rc=$?; [ "$rc" = 0 ] || log "gpu_moe_gemm.py failed (rc $rc)"; exit "$rc"
fi

# 4. The matrix (most informative first; the budget cuts from the end).
export OUTFILE BUDGET CASE_TIMEOUT SMOKE SETUP_SECONDS GPU_SET
exec "$PY" - <<'EOF'
import json, os, shlex, subprocess, sys, time

OUT, SMOKE = os.environ["OUTFILE"], os.environ["SMOKE"] == "1"
BUDGET, CASE_TIMEOUT = float(os.environ["BUDGET"]), float(os.environ["CASE_TIMEOUT"])
TINY = os.path.join(os.environ.get("TMPDIR", "/tmp"), "llmsizer-smoke-config.json")
if SMOKE:
    with open(TINY, "w") as f:
        json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128,
                   "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "vocab_size": 4096, "max_position_embeddings": 2048}, f)
    CASES = [("infer", TINY, "--device cpu --context 256 --concurrency 2 --output-tokens 8"),
             ("train", TINY, "--device cpu --method lora --seq-len 128 --micro-batch 2 --grad-checkpointing full")]
else:
    DECODE = os.environ["GPU_SET"] == "decode"  # longer decode timing, inference cases only
    I = "--device cuda --output-tokens 128 --steps 2" if DECODE else "--device cuda --output-tokens 32"
    HOSTTRAIN = os.environ["GPU_SET"] == "hosttrain"  # the small training steps, 8 timed steps each
    T = "--device cuda --steps 8" if HOSTTRAIN else "--device cuda --steps 2"
    CASES = [  # (command, model, settings)
        ("infer", "qwen2.5-0.5b", f"{I} --context 1024"),
        ("infer", "qwen2.5-7b", f"{I} --context 2048"),
        ("infer", "llama-3.1-8b", f"{I} --context 4096"),
        ("train", "qwen2.5-0.5b", f"{T} --method full --precision bf16 --micro-batch 4 --seq-len 1024"),
        ("train", "qwen2.5-0.5b", f"{T} --method full --precision bf16 --micro-batch 4 --seq-len 1024 --grad-checkpointing full"),
        ("train", "qwen2.5-7b", f"{T} --method lora --precision bf16 --micro-batch 2 --seq-len 2048"),
        ("train", "qwen2.5-7b", f"{T} --method lora --precision bf16 --micro-batch 2 --seq-len 2048 --grad-checkpointing full"),
        ("train", "llama-3.1-8b", f"{T} --method qlora --micro-batch 2 --seq-len 2048"),
        ("train", "llama-3.1-8b", f"{T} --method qlora --micro-batch 2 --seq-len 2048 --grad-checkpointing full"),
        ("infer", "qwen2.5-0.5b", f"{I} --context 8192 --concurrency 8"),
        ("infer", "qwen2.5-1.5b-instruct", f"{I} --context 4096 --concurrency 4"),
        ("infer", "qwen2.5-7b", f"{I} --context 8192 --concurrency 8"),
        ("infer", "llama-3.1-8b", f"{I} --context 16384 --concurrency 4"),
        ("infer", "llama-3.1-8b", f"{I} --context 2048 --concurrency 32"),
        ("infer", "llama-3.1-8b", f"{I} --context 4096 --weights nf4-dq"),
        ("train", "qwen2.5-1.5b-instruct", f"{T} --method full --precision bf16 --micro-batch 2 --seq-len 2048"),
        ("train", "qwen2.5-1.5b-instruct", f"{T} --method full --precision bf16 --micro-batch 2 --seq-len 2048 --grad-checkpointing full"),
        ("train", "qwen2.5-0.5b", f"{T} --method full --precision bf16-mixed --micro-batch 4 --seq-len 1024"),
        ("train", "qwen2.5-7b", f"{T} --method full --precision bf16 --micro-batch 1 --seq-len 2048 --grad-checkpointing full"),
        ("train", "llama-3.1-8b", f"{T} --method lora --precision bf16-mixed --micro-batch 1 --seq-len 4096 --grad-checkpointing full"),
        ("infer", "qwen2.5-1.5b-instruct", f"{I} --context 32768"),
        ("infer", "qwen2.5-7b", f"{I} --context 32768 --concurrency 2"),
        ("train", "qwen2.5-1.5b-instruct", f"{T} --method qlora --micro-batch 4 --seq-len 1024 --grad-checkpointing full"),
    ]
    if DECODE:
        CASES = [c for c in CASES if c[0] == "infer"]
    if HOSTTRAIN:
        CASES = [c for c in CASES if c[0] == "train" and c[1] in ("qwen2.5-0.5b", "qwen2.5-1.5b-instruct")]

def lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0

def failure(case, status, error):
    cmd, model, settings = case
    rec = {"schema": 1, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "kind": "training" if cmd == "train" else "inference", "status": status, "error": error,
           "case": f"{cmd} {model} {settings}", "model": {"name": model}, "settings": {}, "measured": {},
           "comparison": []}
    with open(OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")

start = time.monotonic()
spent_setup = float(os.environ.get("SETUP_SECONDS", "0"))
done = []
FROM = int(os.environ.get("LLMSIZER_GPU_FROM", "1"))  # a second call resumes where the first one's budget ran out
for n, case in enumerate(CASES, 1):
    if n < FROM:
        continue
    elapsed = time.monotonic() - start
    if elapsed + 20 > BUDGET:
        failure(case, "skipped", f"time budget of {BUDGET:.0f} s used up after {elapsed:.0f} s")
        print(f"[{n:2d}/{len(CASES)}] skipped (budget): {' '.join(case)}", file=sys.stderr, flush=True)
        continue
    before = lines(OUT)
    args = [sys.executable, "-m", "llmsizer.cli.main", "measure", case[0], case[1], *shlex.split(case[2]), "--json", "--no-store", "--quiet",
            "--timeout", str(CASE_TIMEOUT), "--jsonl", OUT]
    t = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=CASE_TIMEOUT + 60)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, "outer timeout"
    secs = time.monotonic() - t
    if lines(OUT) == before:  # the measure command died before writing its record
        failure(case, "timeout" if rc is None else "error", (err or "")[-1500:])
    status = "?"
    try:
        with open(OUT) as f:
            status = json.loads(f.readlines()[-1]).get("status", "?")
    except (OSError, IndexError, json.JSONDecodeError):
        pass
    done.append((case, status, secs))
    print(f"[{n:2d}/{len(CASES)}] {status:7s} {secs:5.1f}s  {' '.join(case)}", file=sys.stderr, flush=True)

# 5. Summary: the headline rows of what was measured.
print(f"\n{len(done)} cases run in {time.monotonic() - start:.0f} s (+{spent_setup:.0f} s set-up); results in {OUT}")
with open(OUT) as f:
    for line in f:
        rec = json.loads(line)
        if rec.get("status") != "ok":
            print(f"  {rec.get('status'):8s} {rec.get('case') or rec.get('model', {}).get('name')}: "
                  f"{str(rec.get('oom_at') or rec.get('error', ''))[:100]}")
            continue
        heads = [r for r in rec.get("comparison", []) if r.get("kind") and r.get("measured")]
        cells = []
        for r in heads:
            e = f"{r['error']:+.0%}" if r.get("error") is not None else "n/a"
            v = r["measured"] / 2**30 if r["unit"] == "bytes" else r["measured"]
            cells.append(f"{r['component']} {v:.2f}{'GiB' if r['unit'] == 'bytes' else ''} ({e})")
        print(f"  ok       {rec['model']['name'].split('/')[-1]} {rec['kind']}: " + "; ".join(cells))
EOF

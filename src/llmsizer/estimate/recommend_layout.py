"""The scale-out layout search of ``recommend --train``: for a training run no single instance of a type holds (the
search runs when no option meets every constraint, recommend.py ``_scale_out``; where one does, recommend.py
``_grow_stated`` runs it with every degree pinned to the workload's, for the types one instance of which is short of
memory), the fewest instances of one type (powers of two up to ``MAX_SCALE_INSTANCES``) and a model-parallel layout (TP, PP, EP) on
which ``fit_training`` says it fits -- the search Megatron-Bridge's recipes answer by hand (Qwen3-235B-A22B:
TP 4, PP 16, EP 8 with sequence parallelism; DeepSeek-V3: TP 2, PP 16, EP 64).

Every verdict is ``fit_training``'s (memory only, no duration: ``tokens`` left out), so an option's layout given
to ``fit --train`` with the same flags gives the same numbers. A layout the workload's checks refuse
(``TrainingWorkload``: gpus a multiple of tp x pp, ep dividing gpus / (tp x pp); the estimator: tp dividing the
attention heads, ep dividing the routed experts) is skipped as that call refuses it: the rules are not restated.

Search order and its assumptions (each named in the answer):
- instance counts 1, 2, 4, ... ``MAX_SCALE_INSTANCES`` (a policy cap: 64 instances = 512 GPUs of an 8-GPU
  instance); the first count where some layout fits is the answer.
- TP within one instance (powers of two up to its devices: TP's all-reduces on every layer need its link);
  PP up to ``MAX_PP`` (Megatron-Bridge's largest recipe PP) and the model's layers; EP (MoE only) any power of two.
- at each count, the most-sharded layout first: when it does not fit, no layout at that count is searched (it
  needs the least memory per device: ``NEEDS_LEAST`` below).
- of the layouts that fit at that count, the one with the least model parallelism (tp x pp, then pp, then tp: less
  communication first, as ``sharded_workload``'s ZeRO ladder), then the least EP (memory is not monotone in EP:
  the ZeRO stage ``fit_training`` takes changes with it, so every EP is tried in order).
- Megatron with TP > 1: sequence parallelism on and off are both layouts (``SP_SEARCH``), each where Megatron-Core
  takes it (estimate/training/setup.py ``megatron_sequence_parallel_refusal``, the one rule: on only for an MoE model,
  moe_layer.py:636-640; on only with ``tp_comm_overlap``, arguments.py:1441-1442; on only where tp divides a rank's
  sequence, mappings.py:60-74); off first at equal degrees (Megatron-Core's default, model_parallel_config.py:94). On
  needs no more memory than off (Korthikanti et al. 2022 sec. 4.2.2: the norms' and dropouts' activations split over
  the TP ranks, nothing added), so off is sized only where on fits, and is counted less sharded than on (EP_PRUNE).
  Megatron-Bridge's dense Llama-3 recipes run TP with it (NVIDIA-NeMo/Megatron-Bridge @067f987df
  src/megatron/bridge/recipes/llama/h100/llama3.py:717-740 ``llama3_70b_pretrain_32gpu_h100_bf16_config``: TP 4,
  ``sequence_parallel = True``); where it is faster, the timed ranking takes it (Llama-3.1-70B on 64 x g6e.48xlarge
  at TP 8 PP 8: 100.2 h off, 70.3 h on).
- then, at that count, the layouts that fit are ranked by ``fit_training``'s own run time (``tokens`` given: the
  one estimate, with its pipeline bubble, its TP all-reduces on the machine's link and its EP all-to-all over the
  link and the network), not by memory (review15 D2: on 64 x p4de, Qwen3-235B's least model-parallel fit TP 2 +
  EP 32 sends 28 of 31 EP peers over the network, 30.4 h; PP 8 EP 8 at the same global batch fits and takes
  17.6 h): ``fastest_layout``. Each is timed at the global batch of the memory-first layout (micro-batch x grad
  accumulation x DP kept: its grad accumulation scaled by DP_first / DP, ``SAME_GLOBAL_BATCH``; a layout whose DP
  does not divide it is skipped) -- at grad accumulation 1 a PP p layout is judged by a (p-1)/p bubble that its
  real run, accumulating, does not have. Every layout ``candidate_layouts`` gives at that count and batch is a
  contender (any TP within the machine, PP, EP; small38 / tpsearch: timing only the memory-first TP missed, on
  64 x p4de, TP 2 PP 8 EP 4 at 35.0 h against TP 8 EP 8 at 55.2 h), pruned so recommend stays fast
  (``EP_PRUNE``): sized for memory the most sharded first (memory-only verdicts, shared by the instance types of one
  device), a layout no more sharded in any of TP, PP, EP and sequence parallelism than one that does not fit is
  skipped (as ``NEEDS_LEAST``: more sharding needs less memory, so the verdict, at whichever ZeRO stage fits, cannot
  turn), and only the layouts that fit are timed. Ties (equal seconds): the memory-first layout, then the least
  model parallelism (``candidate_layouts``' order).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog.hardware import Instance
from ..errors import InputError
from ..specs import ModelSpec, TrainingWorkload
from .fit import FitResult, fit_training
from .training.setup import megatron_sequence_parallel_refusal

MAX_SCALE_INSTANCES = 64  # the cap on instances the scale-out search grows to (a policy default, named in answers)
MAX_PP = 16  # the largest pipeline degree searched (Megatron-Bridge's Qwen3-235B and DeepSeek-V3 recipes: PP 16)
LAYOUT_KEYS = ("tp", "pp", "ep", "sequence_parallel")  # the fields the search may choose (a stated one stays)
SAME_GLOBAL_BATCH = ("the layouts that fit at the fewest instances are timed at the global batch of the least "
                     "model-parallel one (micro-batch x grad accumulation x data-parallel ranks kept: grad accumulation "
                     "scaled by its data parallelism over theirs), so a pipelined layout accumulates as its run would "
                     "rather than paying a (pp-1)/pp bubble at grad accumulation 1; the fastest by fit --train --tokens "
                     "is chosen")
EP_PRUNE = ("every TP within an instance, PP and EP at that global batch is a contender; they are sized for memory "
            "the most sharded first (memory-only verdicts, shared by the instance types of one device), a layout no "
            "more sharded in any of TP, PP, EP and sequence parallelism than one that does not fit is skipped (it "
            "needs at least that memory), only those that fit are timed; ties go to the memory-first layout, then "
            "the least model parallelism")
SP_SEARCH = ("under Megatron with TP > 1, sequence parallelism on and off are both searched, each where Megatron-Core "
             "takes it (off not for an MoE model nor with tp_comm_overlap, on not where TP does not divide a rank's "
             "sequence: estimate/training/setup.py megatron_sequence_parallel_refusal), off first at equal degrees "
             "(Megatron-Core's default); "
             "off is sized only where on fits (on needs no more memory), and each option's layout says which it "
             "takes")
NEEDS_LEAST = ("the most-sharded layout (largest TP, PP and EP) needs the least memory per device, so a count "
               "where it does not fit is skipped")


@dataclass(frozen=True)
class ScaledLayout:
    """A layout the search found (``fits``) or the closest one at the cap (not ``fits``): ``instances`` of the
    instance type, ``devices`` in all, the searched ``fields`` (those the workload left open; a stated degree is
    the workload's) and the memory-only fit of it."""

    instances: int
    devices: int
    fields: dict[str, Any]
    fit: FitResult
    # the layouts (full TP / PP / EP / SP / grad-accumulation fields) ``fastest_layout`` timed to choose this one,
    # the memory-first one first; () where none was compared
    timed: tuple[dict[str, Any], ...] = ()

    @property
    def fits(self) -> bool:
        return self.fit.fits

    @property
    def load(self) -> float:
        """Memory need / budget per device (< 1 fits), how close a layout that does not fit comes."""
        need, budget = self.fit.memory_per_device, self.fit.budget_per_device
        return need / budget if need is not None and budget else float("inf")

    def flags(self) -> str:
        """The CLI flags that state this layout (``fit --train --device INSTANCE`` + these)."""
        out = [f"--count {self.devices}"]
        for key in ("tp", "pp", "ep"):
            if int(self.fields.get(key, 1)) > 1:
                out.append(f"--{key} {self.fields[key]}")
        if self.fields.get("sequence_parallel"):
            out.append("--sequence-parallel")
        if "grad_accumulation" in self.fields:  # chosen to keep the global batch (SAME_GLOBAL_BATCH)
            out.append(f"--grad-accumulation {self.fields['grad_accumulation']}")
        return " ".join(out)

    def command(self, model: str, target: str, workload: dict[str, Any], extra: Sequence[str] = ()) -> str:
        """The whole ``fit --train`` command that sizes this layout as the search did: ``model``, ``--device``
        ``target``, ``--count``, every ``workload`` field (``training_flags``) with the searched ones in place of
        the workload's, and ``extra`` (the question's own flags: --tokens, --headroom, --hardware-file); running it
        gives the option's numbers."""
        fields = {**{k: v for k, v in workload.items() if k != "gpus"}, **self.fields}
        argv = ["fit", model, "--train", "--device", target, "--count", str(self.devices),
                *training_flags(fields), *extra]
        return " ".join(map(shlex.quote, argv))


def training_flags(fields: dict[str, Any]) -> list[str]:
    """TrainingWorkload keyword ``fields`` as the CLI's training flags (``--field-name``, which ``fit --train`` and
    ``train`` accept for every field: cli/workload_args.py TRAINING_FIELDS): a true switch as its flag alone, a
    false or None one left out, a list comma-joined."""
    out: list[str] = []
    for k, v in fields.items():
        if v is None or v is False:
            continue
        out.append("--" + k.replace("_", "-"))
        if v is not True:
            out.append(",".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v))
    return out


def _powers(limit: int) -> list[int]:
    out, k = [], 1
    while k <= limit:
        out.append(k)
        k *= 2
    return out


def sequence_parallel_choices(spec: ModelSpec, workload: dict[str, Any], tp: int) -> tuple[bool, ...]:
    """The sequence-parallel settings the search gives a Megatron layout of ``tp`` ranks for ``workload`` (SP_SEARCH):
    off and on where Megatron-Core takes each (setup.py ``megatron_sequence_parallel_refusal``, the estimator's own
    refusal), off first; () where it takes neither (that TP is then not a layout)."""
    seq_len = int(workload.get("seq_len") or TrainingWorkload.seq_len)
    cp = int(workload.get("context_parallel") or 1)
    overlap = bool(workload.get("tp_comm_overlap"))
    return tuple(sp for sp in (False, True)
                 if megatron_sequence_parallel_refusal(spec, tp, sp, seq_len, cp, overlap) is None)


def candidate_layouts(spec: ModelSpec, workload: dict[str, Any], devices: int, per_node: int) -> list[dict[str, Any]]:
    """The (tp, pp, ep, sequence parallelism) layouts searched on ``devices`` (``per_node`` a machine), least model
    parallelism first (key tp x pp, pp, tp, ep, sequence parallelism off before on); a degree the workload states
    is kept. Under Megatron with TP > 1 and sequence parallelism not stated, each layout with it off and on where
    Megatron-Core takes it (``sequence_parallel_choices``, SP_SEARCH). Unchecked otherwise: ``fit_training``
    refuses the invalid ones."""
    megatron = str(workload.get("precision", "")).startswith("megatron-")
    sp_open = megatron and "sequence_parallel" not in workload
    tps = [int(workload["tp"])] if workload.get("tp") else _powers(min(per_node, devices))
    pps = [int(workload["pp"])] if workload.get("pp") else _powers(min(MAX_PP, spec.num_layers, devices))
    eps = [int(workload["ep"])] if workload.get("ep") else _powers(devices) if spec.moe is not None else [1]
    out: list[dict[str, Any]] = []
    for tp in tps:
        for pp in pps:
            if devices % (tp * pp):
                continue
            for ep in eps:
                if (devices // (tp * pp)) % ep and not workload.get("etp"):
                    continue  # (a stated etp: Megatron's expert grid, whose rule fit_training's refusal applies)
                lay: dict[str, Any] = {"tp": tp, "pp": pp, "ep": ep}
                if sp_open and tp > 1:
                    out.extend({**lay, "sequence_parallel": sp} for sp in sequence_parallel_choices(spec, workload, tp))
                else:
                    out.append(lay)
    out.sort(key=lambda f: (f["tp"] * f["pp"], f["pp"], f["tp"], f["ep"], bool(f.get("sequence_parallel"))))
    return out


def _sharding(lay: dict[str, Any]) -> tuple[int, ...]:
    """``lay``'s degrees (tp, pp, ep, sequence parallelism 0 / 1): one layout needs no more memory than another no
    more sharded in any of them (EP_PRUNE; SP_SEARCH: on needs no more than off)."""
    return (*(int(lay.get(k) or 1) for k in ("tp", "pp", "ep")), int(bool(lay.get("sequence_parallel"))))


def _pipeline_caps_zero(base: dict[str, Any]) -> bool:
    """Whether a pipelined layout (pp > 1) of ``base`` takes a lower ZeRO stage than an unpipelined one: the stage is
    chosen for memory (none stated, no fsdp) on DeepSpeed, whose pipeline engine refuses ZeRO-2/3
    (estimate/training/setup.py ``check_framework_layout``; deepspeed/runtime/pipe/engine.py:76-77), so more
    pipeline stages need not need less memory: a layout with pp > 1 and one with pp 1 bound neither the other
    (NEEDS_LEAST, EP_PRUNE hold within each). Megatron's distributed optimizer runs with its pipeline."""
    return (base.get("zero") is None and base.get("fsdp") is None
            and not str(base.get("precision", "")).startswith("megatron-"))


def _bounds(lay: dict[str, Any], other: dict[str, Any], caps: bool) -> bool:
    """Whether ``other`` not fitting says ``lay`` does not (``lay`` no more sharded in any degree, and under
    ``caps``, ``_pipeline_caps_zero``, on the same side of pp 1)."""
    if caps and (int(lay.get("pp") or 1) > 1) != (int(other.get("pp") or 1) > 1):
        return False
    return all(a <= b for a, b in zip(_sharding(lay), _sharding(other), strict=True))


def memory_fit(spec: ModelSpec, instance: Instance, devices: int, fields: dict[str, Any], *,
               headroom: float | None, hardware_files: Sequence[str | Path] = (),
               memo: dict[tuple[Any, ...], FitResult | None] | None = None) -> tuple[FitResult | None, int]:
    """``fit_training``'s memory verdict (no tokens) for the workload ``fields`` on ``devices`` of ``instance``,
    None where the workload's checks or the estimator refuse it (the one rule, not restated); beside it the count of
    fits made (0 from ``memo``). ``memo``: verdicts by (device, devices, fields), shared by the instance types of
    one device (a memory verdict does not read the devices per instance, except hybrid sharding's node) and one
    workload (the key holds only the fields the searches change)."""
    key = (instance.device.id, devices, tuple((k, fields.get(k)) for k in (*LAYOUT_KEYS, "grad_accumulation")),
           instance.device_count if fields.get("fsdp") == "hybrid" else None)
    if memo is not None and key in memo:
        return memo[key], 0
    try:
        fr: FitResult | None = fit_training(spec, instance, devices, headroom=headroom,
                                            hardware_files=hardware_files, fits_at=False, **fields)
    except InputError:
        fr = None
    if memo is not None:
        memo[key] = fr
    return fr, 1


def search_layout(spec: ModelSpec, instance: Instance, workload: dict[str, Any], *, headroom: float | None,
                  hardware_files: Sequence[str | Path] = (),
                  cap: int = MAX_SCALE_INSTANCES,
                  min_devices: int = 1,
                  memo: dict[tuple[Any, ...], FitResult | None] | None = None
                  ) -> tuple[ScaledLayout | None, ScaledLayout | None, int]:
    """The fewest ``instance``s (1, 2, 4, ... ``cap``; none with fewer than ``min_devices`` devices in all: a
    bound another search gave) and the layout there on which ``workload`` fits
    (``fit_training``'s verdict, memory only), else None; beside it the closest layout tried that does not fit
    (the least need / budget, None when every layout was refused) and the count of ``fit_training`` calls made.
    ``memo``: verdicts by (device, devices, layout), shared by the instance types of one device (a memory verdict
    does not read the devices per instance, except hybrid sharding's node: not shared then)."""
    per_node = instance.device_count
    calls = 0
    closest: ScaledLayout | None = None
    memo = {} if memo is None else memo  # (the SP-on layout sized ahead of its SP-off twin is sized once)
    base = {k: v for k, v in workload.items() if k != "gpus"}

    def sized(n: int, lay: dict[str, Any]) -> ScaledLayout | None:
        nonlocal calls, closest
        fr, made = memory_fit(spec, instance, n * per_node, {**base, **lay}, headroom=headroom,
                              hardware_files=hardware_files, memo=memo)
        calls += made
        if fr is None:
            return None
        out = ScaledLayout(n, n * per_node, {k: v for k, v in lay.items() if k not in base}, fr)
        if not out.fits and (closest is None or out.load < closest.load):
            closest = out
        return out

    for n in _powers(cap):
        if n * per_node < min_devices:
            continue
        layouts = candidate_layouts(spec, base, n * per_node, per_node)
        most = None
        # the most-sharded valid layout: a bound on the count (NEEDS_LEAST); where a pipeline caps the ZeRO stage
        # (_pipeline_caps_zero) the most-sharded unpipelined one is a bound of its own
        groups = ([[lay for lay in layouts if int(lay.get("pp") or 1) > 1],
                   [lay for lay in layouts if int(lay.get("pp") or 1) == 1]] if _pipeline_caps_zero(base)
                  else [layouts])
        for group in groups:
            for lay in reversed(group):
                most = sized(n, lay)
                if most is not None:
                    break
            if most is not None and most.fits:
                break
        if most is None or not most.fits:
            continue
        for lay in layouts:  # least model parallelism first, then the least EP: the first that fits
            if lay.get("sequence_parallel") is False and {**lay, "sequence_parallel": True} in layouts:
                on = sized(n, {**lay, "sequence_parallel": True})  # needs no more memory (SP_SEARCH)
                if on is not None and not on.fits:
                    continue
            got = sized(n, lay)
            if got is not None and got.fits:
                return got, closest, calls
        return most, closest, calls  # (unreached: the bound is one of the layouts)
    return None, closest, calls


def _dp(devices: int, lay: dict[str, Any], base: dict[str, Any]) -> int:
    """The data-parallel ranks of ``lay`` on ``devices`` (devices / (tp x pp x cp), TrainingWorkload's rule)."""
    return devices // (int(lay.get("tp", 1)) * int(lay.get("pp", 1)) * int(base.get("cp") or 1))


def same_batch_layouts(spec: ModelSpec, found: ScaledLayout, workload: dict[str, Any], per_node: int
                       ) -> list[dict[str, Any]]:
    """The layouts ``fastest_layout`` may time for ``found`` (the memory-first fit at its count), its own first:
    every layout ``candidate_layouts`` gives on ``found.devices`` (TP within a machine of ``per_node``, PP, EP; a
    degree the workload states kept) at ``found``'s global batch (SAME_GLOBAL_BATCH: grad accumulation x DP kept,
    ``grad_accumulation`` set where it changes; one whose DP does not divide that batch is left out), in
    ``candidate_layouts``' order. Unchecked: ``fit_training`` sizes each (its verdict and its time)."""
    base = {k: v for k, v in workload.items() if k != "gpus"}
    first = {**{k: base[k] for k in LAYOUT_KEYS if k in base}, **found.fields}
    ga0 = int(base.get("grad_accumulation") or 1)
    batch = ga0 * _dp(found.devices, first, base)  # micro-batches per step over all ranks (x micro_batch)
    key0 = _sharding(first)
    out = [first]
    for lay in candidate_layouts(spec, base, found.devices, per_node):
        dp = _dp(found.devices, lay, base)
        if _sharding(lay) == key0 or not dp or batch % dp:
            continue
        lay = {**{k: base[k] for k in LAYOUT_KEYS if k in base}, **lay}
        if batch // dp != ga0:
            lay["grad_accumulation"] = batch // dp
        out.append(lay)
    return out


def fastest_layout(spec: ModelSpec, instance: Instance, workload: dict[str, Any], found: ScaledLayout,
                   tokens: float, *, headroom: float | None, hardware_files: Sequence[str | Path] = (),
                   utilization: float | None = None,
                   memo: dict[tuple[Any, ...], FitResult | None] | None = None) -> tuple[ScaledLayout, int]:
    """Of ``same_batch_layouts`` of ``found`` (``search_layout``'s memory-first fit), the one ``fit_training`` on
    ``instance`` with ``tokens`` says runs fastest and fits, as a ScaledLayout whose ``fields`` hold what it chose
    (grad accumulation too when it changed) and whose ``timed`` the layouts timed (``found``'s first); beside it the
    count of fits made. Pruned (EP_PRUNE): sized for memory the most sharded (TP x PP x EP) first
    (``memory_fit``, ``memo`` shared with ``search_layout``: the verdict does not read the instance's network), a
    layout no more sharded in any degree than one that does not fit skipped; only those that fit are timed. Ties (equal
    seconds): ``found``'s layout, then ``candidate_layouts``' order (the least model parallelism). The time is the
    one estimate's (``training_time['seconds']``), so the option ``fit --train --tokens`` prints for it is the time
    it was ranked by."""
    base = {k: v for k, v in workload.items() if k != "gpus"}
    lays = same_batch_layouts(spec, found, workload, instance.device_count)
    if len(lays) == 1:  # nothing to compare: the memory-first layout, timed by the option itself
        return found, 0
    calls = 0
    degrees = [_sharding(lay) for lay in lays]
    caps = _pipeline_caps_zero(base)
    short: list[dict[str, Any]] = []  # the layouts sized that do not fit
    fitting = {0}  # found fits (its memory verdict is search_layout's)
    # the most sharded first (sequence parallelism on before off), so that a layout's every more-sharded one is
    # sized before it (EP_PRUNE)
    for i in sorted(range(1, len(lays)),
                    key=lambda j: (-degrees[j][0] * degrees[j][1] * degrees[j][2], -degrees[j][3], j)):
        if any(_bounds(lays[i], d, caps) for d in short):
            continue  # no more sharded in any degree than a layout that does not fit: needs at least its memory
        fr, n = memory_fit(spec, instance, found.devices, {**base, **lays[i]}, headroom=headroom,
                           hardware_files=hardware_files, memo=memo)
        calls += n
        if fr is None:  # refused (an EP not dividing the experts...): bounds nothing
            continue
        if fr.fits:
            fitting.add(i)
        else:
            short.append(lays[i])
    best: tuple[float, int, FitResult] | None = None
    timed: list[dict[str, Any]] = []
    for i in sorted(fitting):
        lay = lays[i]
        calls += 1
        try:
            fr = fit_training(spec, instance, found.devices, headroom=headroom, hardware_files=hardware_files,
                              tokens=tokens, utilization=utilization, fits_at=False, **{**base, **lay})
        except InputError:  # a layout the workload's checks or the estimator refuse
            continue
        timed.append(lay)
        secs = (fr.training_time or {}).get("seconds")
        if fr.fits and secs is not None and (best is None or secs < best[0]):  # ties: the earlier (found, then order)
            best = (secs, i, fr)
    if best is None:  # none timed (no duration for this device): the memory-first answer
        return found, calls
    _, i, fr = best
    fields = {k: v for k, v in lays[i].items() if k not in base or base[k] != v}
    return ScaledLayout(found.instances, found.devices, fields, fr, tuple(timed)), calls

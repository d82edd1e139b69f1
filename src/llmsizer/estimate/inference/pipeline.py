"""Serving pipeline parallelism (vLLM ``--pipeline-parallel-size``, SGLang ``--pp-size``): a replica's decoder layers
split over ``pipeline_parallel`` stages of ``tensor_parallel`` devices each.

Every stage is its engine's composition over its own weights and KV cache (compose.py ``_compose`` with a stage):

- layers: ``formulas/parallelism.py`` ``serving_stage_layers`` (vLLM / SGLang ``get_pp_indices``);
- weights: eq. PP1 (``serving_stage_weight_bytes``): its layers' bytes per device, the embedding on the first stage,
  the final norm and lm_head on the last;
- KV cache per token: its layers' share of the model's (``kv_stage_share``: the layers holding a cache of their own;
  with several cache kinds (sliding and full attention, recurrent state pages), vLLM's KV cache groups projected on
  the stage, formulas/kv_groups.py eq. 8; what the engines refuse is refused in one line, ``pipeline_refusal``);
- the pool: each stage's worker profiles its own memory (vLLM 0.19.1 ``v1/core/kv_cache_utils.py``
  ``get_kv_cache_configs`` lines 1508-1535: one config per worker) and the engine takes the smallest block count
  of all workers for every one (lines 1599-1612, "Change the num_blocks of each rank to the smallest among all
  ranks"): the sequences admitted are the minimum over the stages, eq. PP2. SGLang 0.5.23 sizes each rank's pool
  from the minimum free memory over all ranks (``mem_cache/kv_cache_configurator.py`` lines 3000-3004,
  ``utils/common.py`` ``get_available_gpu_memory(distributed=True)`` lines 428-432) over its own cell size: the
  stage taken here is the one whose own memory admits the fewest tokens, which is that minimum where the stage
  with the most weights also holds the most cache layers (the usual case; otherwise SGLang admits fewer).

The answer is the binding stage's estimate (``worst_stage``): the fewest KV-pool tokens, else the most memory per
device; ``details["pipeline_stages"]`` lists every stage. vLLM's profile run samples on the last stage only
(``v1/worker/gpu_model_runner.py`` ``profile_run`` lines 5785-5789: ``Context.last_stage``); its forward over
max_num_batched_tokens is counted on every stage, as one stage's layers' peak is one layer's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...errors import FieldError
from ...formulas.kv_groups import vllm_group_size, vllm_stage_group_size
from ...formulas.parallelism import serving_stage_layers, serving_stage_weight_bytes
from ...formulas.tensors import model_tensors
from ...formulas.weight_formats import WeightBytes
from ...result import Estimate
from ...specs import InferenceWorkload, ModelSpec

# vLLM 0.19.1 refuses a model class without SupportsPP (vllm/config/model.py lines 1122-1128): Gemma 3n
# (models/gemma3n.py line 1103, gemma3n_mm.py line 467) and Whisper (models/whisper.py line 797) have none
VLLM_NO_PP = "vLLM 0.19.1 config/model.py lines 1122-1128: the model class does not implement SupportsPP"
# SGLang 0.5.23 sizes a sliding-window model's two pools from every decoder layer's self_attn
# (model_executor/model_runner.py lines 1571-1579: a PPMissingLayer of another stage has none) and its hybrid
# recurrent pool from the whole model's layer ids (mem_cache/memory_pool.py HybridLinearKVPool lines 995-996,
# "TODO support pp?", start_layer = 0)
SGLANG_NO_MIXED_PP = ("SGLang 0.5.23 model_runner.py lines 1571-1579 (sliding-window pools) and memory_pool.py "
                      "lines 995-996 (hybrid recurrent pool, 'TODO support pp?') size them from the whole model's "
                      "layers")


def pipeline_refusal(spec: ModelSpec, w: InferenceWorkload) -> None:
    """One line where ``w.pipeline_parallel`` cannot be served (the engine refuses) or modelled for ``spec``."""
    pp = w.pipeline_parallel
    if pp > spec.num_layers:
        raise FieldError("pipeline_parallel", f"pipeline_parallel {pp} exceeds the model's {spec.num_layers} decoder "
                         "layers (each stage holds at least one)")
    kinds = {k for k in spec.kv_cache_layer_types if k != "none"}
    if spec.encoder_decoder is not None or any(spec.kv_shared_layers):
        what = "an encoder-decoder model" if spec.encoder_decoder is not None else "a model sharing K/V across layers"
        raise FieldError("pipeline_parallel", f"{spec.name} is {what}, which {w.engine} does not split in pipeline "
                         f"stages ({VLLM_NO_PP if w.engine == 'vllm' else 'not modelled for SGLang'})")
    mixed = spec.recurrent_layer_count > 0 or len(kinds) > 1
    if mixed and w.engine == "sglang":
        raise FieldError("pipeline_parallel", f"SGLang does not split {spec.name}'s mix of cache kinds (sliding/full "
                         f"attention or recurrent layers) over pipeline stages ({SGLANG_NO_MIXED_PP}); use "
                         "--engine vllm or tensor parallelism alone")


def stage_layers(spec: ModelSpec, w: InferenceWorkload) -> tuple[range, ...]:
    """The decoder layers of each of ``w``'s pipeline stages, by its engine's rule."""
    return serving_stage_layers(spec.num_layers, w.pipeline_parallel, str(w.engine))


def kv_stage_share(spec: ModelSpec, w: InferenceWorkload, stage: int) -> float:
    """The share of the model's per-sequence cache (K/V and recurrent state pages, and of its pool's bytes per block)
    pipeline stage ``stage`` keeps: its cache layers / all for layers of one kind; for vLLM's KV cache groups of
    several kinds (sliding and full attention, attention and recurrent layers) g_s / g, formulas/kv_groups.py eq. (8):
    a block on the stage is its largest projected group's pages."""
    kinds, rec = spec.kv_cache_layer_types, spec.recurrent_layers if spec.recurrent_layer_count else ()
    layers = stage_layers(spec, w)[stage]
    counts: dict[str, int] = {k: kinds.count(k) for k in set(kinds) if k != "none"}
    if rec:
        counts["recurrent"] = sum(rec)
    if len(counts) > 1:
        g = vllm_group_size(counts)
        return vllm_stage_group_size(kinds, layers, rec) / g if g else 1.0
    own = [k != "none" or (i < len(rec) and rec[i]) for i, k in enumerate(kinds)]
    total = sum(own)
    return sum(own[i] for i in layers) / total if total else 1.0


def stage_weights(spec: ModelSpec, wb: WeightBytes, w: InferenceWorkload, stage: int,
                  act_bytes: int) -> WeightBytes:
    """``wb`` (per device, after tensor parallelism) cut to pipeline stage ``stage``: eq. PP1 over the layers'
    bytes; by component and storage in proportion (the embedding and lm_head exact)."""
    pp, ranges = w.pipeline_parallel, stage_layers(spec, w)
    n = spec.num_layers
    emb, head = wb.by_component.get("embedding", 0), wb.by_component.get("lm_head", 0)
    norm = sum(t.numel for t in model_tensors(spec) if t.layer < 0 and t.role.startswith("output_norm")) * act_bytes
    known = len(wb.layer_bytes) == n and sum(wb.layer_bytes) > 0
    per: tuple[int, ...] | None = tuple(wb.layer_bytes) if known else None
    layers_total = sum(per) if per is not None else max(wb.total - emb - head - norm, 0)
    layer_bytes = per if per is not None else (layers_total // n,) * n  # no per-layer bytes (a file): even
    other = max(wb.total - layers_total - emb - head - norm, 0)
    total = serving_stage_weight_bytes(layer_bytes, ranges[stage], stage, pp, emb, head, norm, other,
                                       spec.tie_word_embeddings)
    frac = total / wb.total if wb.total else 0.0
    layer_frac = sum(layer_bytes[i] for i in ranges[stage]) / layers_total if layers_total else 0.0
    last = stage == pp - 1
    comps = {k: (emb if stage == 0 or (spec.tie_word_embeddings and last) else 0) if k == "embedding"
             else (head if last else 0) if k == "lm_head" else int(v * layer_frac)
             for k, v in wb.by_component.items()}
    return replace(wb, total=total, by_component={k: v for k, v in comps.items() if v},
                   by_storage={k: int(v * frac) for k, v in wb.by_storage.items()},
                   notes=wb.notes + (f"pipeline stage {stage} of {pp}: layers {ranges[stage].start}-"
                                     f"{ranges[stage].stop - 1} (eq. PP1)",),
                   layer_bytes=tuple(layer_bytes[i] if i in ranges[stage] else 0 for i in range(n)),
                   layer_expert_bytes=(), layer_matrix_bytes=())


def worst_stage(spec: ModelSpec, w: InferenceWorkload, run: Callable[[int], Estimate]) -> Estimate:
    """The binding stage's estimate of ``w`` over its pipeline stages (``run(stage)`` composes one):

        admitted = min over stages s of admitted_s,   memory per device = the binding stage's          (PP2)

    the binding stage: the fewest KV-pool tokens (vLLM and SGLang give every stage that count), ties and no pool:
    the most memory per device. ``details["pipeline_stages"]``: each stage's layers, weights, total and pool."""
    ests = [run(k) for k in range(w.pipeline_parallel)]
    ranges = stage_layers(spec, w)

    def order(k: int) -> tuple[float, float]:
        tokens = ests[k].details.get("kv_tokens")
        return (float("inf") if tokens is None else float(tokens), -float(ests[k].total_bytes))

    k = min(range(len(ests)), key=order)
    est = ests[k]
    stages = [{"stage": i, "layers": [r.start, r.stop - 1], "weights_bytes": int(e.details["weights_bytes"]),
               "total_bytes": e.total_bytes, "kv_tokens": e.details.get("kv_tokens"),
               "admitted_sequences": e.details.get("admitted_sequences")}
              for i, (r, e) in enumerate(zip(ranges, ests, strict=True))]
    details = dict(est.details)
    details.update({"pipeline_stages": stages, "pipeline_binding_stage": k,
                    "devices_per_replica": w.tensor_parallel * w.pipeline_parallel})
    counts = "/".join(str(len(r)) for r in ranges)
    warning = (f"memory is per device, for the worst of {w.pipeline_parallel} pipeline stages (stage {k}: layers "
               f"{ranges[k].start}-{ranges[k].stop - 1}; layers per stage {counts}, estimate/inference/pipeline.py "
               f"eqs. PP1-PP2), each of {w.tensor_parallel} tensor-parallel device(s): "
               f"{w.tensor_parallel * w.pipeline_parallel} devices per replica")
    out = Estimate(est.kind, est.model, est.items, est.assumptions, est.warnings + (warning,), details)
    return out

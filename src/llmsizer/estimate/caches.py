"""Every memo of the composition core and the formulas it calls, cleared in one place: benchmarks measure a
"cold" estimate (a model seen for the first time) by calling ``clear_caches()`` first. The catalogs' own caches
(model and hardware catalogs loaded once) are kept: loading them is start-up, not estimation."""

from __future__ import annotations


def clear_caches(estimates_only: bool = False) -> None:
    """Forget every memoized estimate, tensor inventory, weight-byte table, KV size and speed estimate; with
    ``estimates_only`` only the finished estimates and the memos keyed on workload settings (LoRA adapters, a
    llama.cpp ring's last cell, a search's weight-format ladder, the MMQ expert tiles of a ubatch): the model's tensor inventory and weight bytes stay, and the per-(model, TP/PP/EP
    layout) training states (training/states.py) and the per-(model, LoRA target set) adapted modules, which do not
    depend on the rank (formulas/lora.py ``_alike_modules``, ``adapted_roles``, training/states.py
    ``_stage_adapters``, duration.py ``_adapted_linears``): "warm", the same model asked again with other settings."""
    from ..formulas import (
        compressed_tensors,
        encoder_decoder_serving,
        expert_parallel_time,
        float8_training,
        kv_cache,
        lora,
        modelopt_exclusions,
        parallelism,
        params,
        tensor_parallel,
        tensors,
        weight_formats,
    )
    from ..formulas import speed as speed_formulas
    from ..units import format_bytes
    from . import duration, engines, fit, formats, framework, launch, model_parallel, ranges, verdict
    from .inference import compose as inference_compose
    from .inference import llamacpp_split
    from .training import compose as training_compose
    from .training import gather_units as training_gather_units
    from .training import states as training_states

    for memo in (fit._SPEED_MEMO, fit._PIPELINED_MEMO, fit._SPEED_MODELS, fit._DEVICE_SPEED_KEYS, fit._CLOSED_MEMO, fit._GRID_MEMO, fit._RATE_SECONDS_MEMO, fit._RATE_ENGINE,
                 fit._FIT_SETUPS,
                 fit._TRAINING_CACHE,
                 inference_compose._MEMO, inference_compose._SIZED, training_compose._MEMO, training_compose._MEASURED,
                 training_compose._ITEMS, training_compose._CONTEXTS, training_compose._STAGE_STATES,
                 training_compose._WORKLOADS, training_gather_units._UNITS):
        memo.clear()
    # keyed on workload settings (LoRA adapters, a llama.cpp sliding window's ring, the device-independent parts of
    # a training step; a serving engine's release scope), not on the model alone
    for g in (duration._matmul_setup, engines._ring_last_cell, lora.lora_params, lora.expert_adapter_work,
              duration.flops_per_token, duration.step_linear_blocks, duration.elementwise_bytes_per_token,
              duration.kernels_per_micro_step, duration.synced_span, duration.float8_time, duration._optimizer_step_setup,
              duration.fsdp_volume, duration.deepspeed_volume, ranges.serving_scope, model_parallel.column_parallel_block_flops,
              model_parallel.micro_pipelined_layer,  # eq. T5: an async tensor-parallel layer (model, layer, tp, shapes)
              formats.format_ladder, speed_formulas._expected_tiles, float8_training.float8_layer_backward_peak,
              framework._applied,  # a framework profile applied to (model, workload)
              launch.inference_kernels):  # an eager transformers step's kernels (model, tp, dtype, loop, weight format, GPU, rows)
        g.cache_clear()
    if estimates_only:
        return
    for f in (tensors.model_layout, tensors.layer_groups, tensors.layer_keys, tensors.layer_kind_firsts,
              params.count_params, weight_formats.normalize_format, weight_formats.weight_bytes,
              weight_formats.gguf_product_weights, formats._all_layers_own_kv,  # vLLM's Gemma 3n / 4 spec with every layer's k/v
              verdict.largest_host,  # the catalog's largest instance RAM (llama.cpp's unchecked host part)
              tensor_parallel.replicated_elements, tensor_parallel.replicated_by_place,
              tensor_parallel.replicated_matrix_bytes, tensor_parallel.full_token_replicated_elements,
              tensor_parallel.whole_elements_by_component, tensor_parallel.plan_rank_shares,
              tensor_parallel.transformers_plan_collectives,  # per spec: the collectives of its plan
              tensor_parallel.head_replica_bytes, tensor_parallel.head_replica_elements, tensor_parallel.replica_shares,
              tensor_parallel._block_checked,  # per spec and engine: the linears eq. TP5 checks
              tensor_parallel.split_widths,  # per spec and engine: the widths eq. TP6 checks
              tensor_parallel.moe_wna16_extra_bytes,  # per spec and layout: MoeWNA16's experts (eq. TP5b)
              lora.adapted_layout,
              lora.adapted_modules,
              lora._alike_modules, lora.adapted_roles, duration._adapted_linears, lora.vision_role_targets,
              lora._role_target, kv_cache.kv_cache, format_bytes, llamacpp_split._layer_devices,
              training_states._layer_stages, parallelism.pipeline_stage_layers, model_parallel._layer_kind_loads,
              parallelism.interleaved_backward_states, parallelism.interleaved_forward_accumulating,
              parallelism.pipeline_rank_boundary_bytes, parallelism.interleaved_peak_inflight, parallelism.megatron_interleaved_split, training_states._expert_elements, training_states._embedding_and_head,
              training_states._trained_base, training_states._autocast_copies,
              training_states._stage_adapters, training_compose._stages_to_evaluate,
              training_compose.stage_representatives, duration.quantized_weights,
              weight_formats.largest_quantized_matrix, weight_formats.largest_quantized_layer,
              encoder_decoder_serving.t5_params, float8_training.layer_linears, float8_training.float8_weight_elements,
              expert_parallel_time.machine_shares,  # an EP group's ranks per machine (eq. E3')
              modelopt_exclusions.excluded_roles, modelopt_exclusions._wildcard,  # a ModelOpt NVFP4 config's bf16 layers
              compressed_tensors._ct_config, weight_formats.ct_layer_classes):  # a compressed-tensors config's groups
        f.cache_clear()
    tensor_parallel._SHARD_MEMO.clear()
    fit._VM_SHARE.clear()

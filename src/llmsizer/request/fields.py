"""The request format as one table of fields: the reader validates against it, ``schema.py`` publishes it as a
JSON Schema and ``template.py`` writes the commented template from it. Change a field here and all three follow.

Each :class:`Field` has a value type (see ``TYPES``), a one-line doc, an example (used by the template; every
example must validate) and, for sections, child fields. ``kinds`` limits a job-level field to training or
inference jobs. The seed items each field carries are named in ``SEED_ITEMS`` (tests check every one is here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog.frameworks import framework_profiles
from ..numbers import (
    CONCURRENCY,
    COUNT,
    CPU_MOE_LAYERS,
    DAYS_PER_WEEK,
    FSDP_VERSION,
    GPU_LAYERS,
    HEADROOM,
    HOURS_PER_DAY,
    IMAGE_TOKENS,
    IMAGES,
    LORA_ALPHA,
    LORA_RANK,
    MEMORY_RATIO,
    PASSES,
    TOKENS,
    UTILIZATION,
    VIDEO_FRAMES,
    ZERO_STAGE,
    Range,
)
from ..specs.training import (
    BATCH_SHAPES,
    CHECKPOINT_IMPLS,
    COMPILE_SCOPES,
    CP_KINDS,
    DEEPSPEED_GATHERS,
    FLOAT8_RECIPES,
    FSDP1_LORA_WRAPS,
    FSDP2_UNITS,
    GRAD_SYNC,
    KERNELS,
    LAYERNORMS,
    LORA_DROPOUTS,
    LOSSES,
    MAMBA_PATHS,
    MOE_DISPATCHERS,
    NF4_FORMATS,
    NF4_QUANTIZERS,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PIPELINE_SPLITS,
    STATE_DTYPES,
    TRAIN_ATTENTION,
    TRAIN_ATTENTION_KERNELS,
    ZERO_GRADS,
)
from ..specs.workload import (
    ENGINE_RULE_TEXT,
    ENGINES,
    MAMBA_RADIX_CACHE_STRATEGIES,
    MEMORY_METRICS,
    OUTPUT_TOKENS,
    SPLIT_MODES,
)

# value types; the reader's converter and the schema's JSON type for each
TYPES = {
    "str": "free text",
    "name": "a name: letters, digits, '-', '_', '.'",
    "int": "a whole number",
    "number": "a number",
    "bool": "true or false",
    "enum": "one of the listed choices",
    "size": "a size: '2 TB', '80GiB', '500 GB' (GB = 10^9 B, GiB = 2^30 B)",
    "count": "a count: 40000, '40k', '1.5M'",
    "tokens": "a token count: '500k tokens' (= 500,000), '2B tokens'",
    "context": "a sequence length in tokens: 4096, '8k' (= 8192), '128k'",
    "duration": "a duration with a unit: '3 days', '12h', '90 min', '6 months' (month = 730 h)",
    "interval": "a time ('2h') or a step count ('500 steps')",
    "money": "US dollars: 20000, '20000 USD', '$20k'",
    "money_h": "US dollars per hour: 12.5, '$12.5/h'",
    "money_month": "US dollars per month: '$5k/month'",
    "bandwidth": "a bandwidth: '10 Gb/s' (bits), '500 MB/s' (bytes)",
    "network": "a network between machines: a catalog interconnect ('efa-p5', 'ib-ndr') or a bandwidth per machine "
               "('400 Gb/s', '8x400Gb/s')",
    "rate": "requests per time: 5 (per second), '300/min', '10000/day'",
    "share": "a share: 0.4 or '40%'",
    "date": "a date YYYY-MM-DD",
    "deadline": "a date (2025-07-01) or a duration from the start ('3 weeks')",
    "str_list": "a list of text items (one item may be written without the list)",
    "targets": "LoRA target modules: 'all-linear', or a list such as [q, k, v, o] / [q_proj, v_proj]",
    "image_size": "an image size in pixels, width x height: '1024x768'",
    "ratios": "proportions, one per GPU: [3, 1] or '3,1'",
    "weights": "'none' or a weight format (fp8, awq-int4, gptq-int4, int8, nf4, q4_k_m, q8_0, ...)",
    "dist": "typical and peak values: {typical: X, peak: Y} (a single value means typical only)",
    "section": "a mapping of the listed keys",
    "jobs": "a list of jobs",
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    doc: str
    example: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    fields: tuple[Field, ...] = ()
    kinds: tuple[str, ...] = ("training", "inference")
    item: str = ""  # value type of a 'dist' (typical/peak) pair
    minimum: float | None = None
    maximum: float | None = None
    template: bool = True  # written into the template (examples only for the fields that read well there)
    # the CLI flag's own range (numbers.py) when the field is that flag: its bounds and its reason, one message
    bounds: Range | None = None

    def __post_init__(self) -> None:
        if self.bounds is not None:
            object.__setattr__(self, "minimum", self.bounds.low)
            object.__setattr__(self, "maximum", self.bounds.high)
        if self.type not in TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type}")
        if self.type == "dist" and not self.item:
            raise ValueError(f"field {self.name}: a dist needs an item type")

    def child(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


def F(name: str, type_: str, doc: str, example: Any = None, **kw: Any) -> Field:
    return Field(name, type_, doc, example, **kw)


SENSITIVITY = ("public", "internal", "confidential", "restricted")
DATASET_FORMATS = ("jsonl", "json", "parquet", "csv", "text", "arrow", "webdataset", "tfrecord", "megatron-bin",
                   "other")
PURPOSES = ("knowledge", "style", "task", "format", "language", "domain", "pretraining", "other")
ACCESS_METHODS = ("public-api", "private-api", "vpn", "intranet", "batch", "other")
ISOLATION = ("none", "vpc", "dedicated-network", "air-gapped")
PRICING_MODELS = ("hourly", "reserved", "undecided")
ADAPTER_MODES = ("merged", "dynamic")
INFER_PRECISIONS = ("bf16", "fp16", "fp32")

# Training settings mirror specs/training.py TrainingWorkload (kept in step by tests/request).
_METHODS = ("full", "lora", "dora", "qlora")
_PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "fsdp-bf16-mixed", "bf16", "fp16", "deepspeed-bf16", "deepspeed-fp16",
               "megatron-bf16", "megatron-fp16")
_OPTIMIZERS = OPTIMIZERS
_GC = ("none", "full", "selective", "selective-op")
_LOSSES = LOSSES
_KERNELS = KERNELS
_ATTN = TRAIN_ATTENTION
_FSDP = ("full", "grad_op", "hybrid")
_OFFLOAD = ("none", "optimizer", "params")

MODEL = F("model", "section", "the model: catalog name, Hugging Face id, config.json or model folder", required=True,
          fields=(
              F("name", "str", "catalog name, Hugging Face id, or a path to config.json / a model folder / .gguf",
                "llama-3.1-8b"),
              F("size", "count", "parameter count as you know it ('8B'); checked against the model's own count",
                "8B"),
              F("revision", "str", "checkpoint revision or version tag", template=False),
              F("from_job", "name", "serve the model a training job of this request produces", kinds=("inference",),
                template=False),
          ))

RESOURCES = F("resources", "section", "the resources you have in mind (optional: without them llmsizer suggests some)",
              fields=(
                  F("device", "str", "device from `llmsizer hardware list` (h100-sxm, a100-sxm-80gb, l40s, a CPU...)",
                    "h100-sxm"),
                  F("instance", "str", "a cloud instance from the catalog (aws-p5.48xlarge, ...); brings its devices",
                    template=False),
                  F("count", "int", "devices in total (default: the instance's devices x nodes, else 1); with an "
                    "instance and no nodes, a whole multiple of its devices is that many instances", 1,
                    minimum=1),
                  F("nodes", "int", "machines the devices are spread over (default: the instances; devices named bare are "
                    "machines of 8, fit's gpus_per_node: 16 are 2)", 1, minimum=1),
                  F("memory", "size", "memory per device (overrides the catalog; RAM for a CPU); alone, with no device or "
                    "instance: a GPU of that memory, as `infer --memory` answers", template=False),
                  F("headroom", "share", "share of each device's memory kept free, as `fit --headroom` (default: "
                    "fit's; vLLM: gpu_memory_utilization = 1 - headroom; SGLang keeps none: engine_settings."
                    "mem_fraction_static)", 0.2, bounds=HEADROOM, template=False),
                  F("fit_target", "size", "llama.cpp (engine: llamacpp): memory kept free on each GPU instead of a "
                    "headroom share, as `fit --fit-target` / llama.cpp --fit-target (default: llama.cpp's own "
                    "when no headroom is given); inference jobs only", template=False),
                  F("storage", "size", "disk space requested for the job (datasets, checkpoints, models, logs)",
                    "2 TB"),
                  F("pool", "str", "name of the machines or cluster the job runs on; jobs naming the same pool share "
                    "hardware", "training-cluster"),
                  F("jurisdiction", "str", "where the job must run: a jurisdiction or region (DE, EU); a provider "
                    "places it only at sites of that jurisdiction or region", template=False),
                  F("interconnect", "str", "link between the devices of one machine (nvlink4, pcie5, ...)",
                    template=False),
                  F("network", "network", "network of each machine to the others, as `fit --network` reads it (ib-ndr: "
                    "one port per device; efa-p5: per machine)",
                    template=False),
                  F("price_per_hour", "money_h", "hourly price of all these resources together (overrides the "
                    "catalog's on-demand price; for owned hardware: your cost)", template=False),
              ))

BUDGET = F("budget", "section", "money available", fields=(
    F("total", "money", "the whole budget", "$20k"),
    F("per_month", "money_month", "a monthly limit (services)", template=False),
    F("per_hour", "money_h", "an hourly limit", template=False),
))

PRICING = F("pricing", "section", "how the resources are paid for", fields=(
    F("model", "enum", "hourly (pay as you go), reserved (for a period), or undecided", "undecided",
      choices=PRICING_MODELS),
    F("reserved_discount", "share", "discount of a reservation against the hourly price, if you have a quote "
      "('35%')", template=False),
    F("reserved_term", "duration", "length of the reservation you would take ('1 year')", template=False),
))

COMMON = (
    F("name", "name", "unique name of the job", required=True),
    F("kind", "enum", "training or inference", required=True, choices=("training", "inference")),
    F("description", "str", "what the job is for", template=False),
    MODEL,
    RESOURCES,
    F("start", "date", "when the job starts (YYYY-MM-DD)", template=False),
    F("deadline", "deadline", "when it must be done (training) or live (inference): a date or a duration",
      template=False),
    BUDGET,
    PRICING,
)

TRAINING = (
    F("method", "enum", "full training, or parameter-efficient: lora, dora, qlora", "lora", required=True,
      choices=_METHODS, kinds=("training",)),
    F("purpose", "enum", "what training should add: knowledge, style, task, format, language, domain, pretraining",
      "task", choices=PURPOSES, kinds=("training",)),
    F("baseline_tried", "bool", "was the base model with prompt design and retrieval tried first?", True,
      kinds=("training",)),
    F("peft", "section", "parameter-efficient settings (lora, dora, qlora)", kinds=("training",), fields=(
        F("rank", "int", "LoRA rank r", 16, bounds=LORA_RANK),
        F("alpha", "number", "LoRA alpha (scaling; no memory effect)", 32, bounds=LORA_ALPHA),
        F("targets", "targets", "adapted modules", "q,k,v,o,gate,up,down"),
        F("modules_to_save", "str_list", "whole modules trained beside the adapters: embed, lm_head (PEFT "
          "modules_to_save)", template=False),
        F("dropout", "share", "LoRA dropout", template=False),
        F("adapter_dtype", "enum", "dtype of the LoRA weights (default fp32 under mixed precision; `train "
          "--adapter-dtype`)", template=False, choices=STATE_DTYPES),
        F("base_dtype", "enum", "dtype of the frozen base weights for lora/dora (default bf16, fp32 under precision "
          "fp32), of qlora's unquantized tensors (default fp32 as PEFT's prepare_model_for_kbit_training casts "
          "them, bf16 with kernels unsloth, a framework profile or sharded qlora; `train --base-dtype`)",
          template=False, choices=STATE_DTYPES),
    )),
    F("settings", "section", "training settings (each optional; defaults are stated in the plan)",
      kinds=("training",), fields=(
          F("precision", "enum", "precision recipe", "bf16-mixed", choices=_PRECISIONS),
          F("tf32", "bool", "fp32 matmuls on the TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32, HF "
            "Trainer --tf32): precision fp32's GEMMs timed at the TF32 peak; default off (PyTorch's default)",
            template=False),
          F("optimizer", "enum", "optimizer", "adamw", choices=_OPTIMIZERS),
          F("optimizer_state_dtype", "enum", "dtype of the optimizer's states (default: the dtype of the parameters "
            "it updates, fp32 master weights included; fp32 for bitsandbytes' optimizers; `train "
            "--optimizer-state-dtype`)", template=False, choices=STATE_DTYPES),
          F("optimizer_impl", "enum", "torch optimizer kernel: fused (default), foreach or for-loop (`train "
            "--optimizer-impl`)", template=False, choices=OPTIMIZER_IMPLS),
          F("optimizer_in_backward", "bool", "each parameter updated during the backward as soon as its gradient "
            "is ready, the gradient freed (`train --optimizer-in-backward`)", template=False),
          F("micro_batch", "int", "sequences per device per forward pass", 4, minimum=1),
          F("seq_len", "context", "tokens per training sequence", "4k"),
          F("target_len", "context", "an encoder-decoder's (T5, mT5) target tokens per sequence, the decoder's "
            "length; seq_len is then the source (encoder) length (default: seq_len; `train --target-len`)",
            template=False),
          F("grad_accumulation", "int", "micro-batches per optimizer step", 4, minimum=1),
          F("grad_checkpointing", "enum", "activation checkpointing", "full", choices=_GC),
          F("checkpoint_every", "int", "checkpoint only every N-th layer (torchtitan selective_ac_option N)",
            template=False, minimum=1),
          F("recompute_modules", "str_list", "with grad_checkpointing selective and a megatron precision, "
            "Megatron-Core's --recompute-modules: core_attn, mla_up_proj, moe_act, layernorm, mlp, moe (default core_attn; "
            "`train --recompute-modules`)", template=False),
          F("attention", "enum", "attention kernel", template=False, choices=_ATTN),
          F("attention_kernel", "enum", "the kernel that runs the attention, for the duration: sdpa (torch's "
            "dispatch), flash-attn-2, flash-attn-3, triton-flash, cudnn, mem-efficient, eager or flex-attention, one "
            "the attention runs (default: sdpa for sdpa, flash-attn-2 for flash; `train --attention-kernel`)", template=False,
            choices=TRAIN_ATTENTION_KERNELS),
          F("packing", "bool", "several documents packed per sequence", template=False),
          F("doc_len", "context", "with packing, the tokens of each packed document; the attention of a kernel "
            "that masks per document is timed over documents of this length (default: one document fills the row; "
            "`train --doc-len`)", template=False),
          F("loss", "enum", "loss head: ce (the model returns logits), linear-ce (torchtune LinearCrossEntropyLoss), "
            "cut-ce (Cut Cross-Entropy, Unsloth), ce-kept-logits (ce, the loop keeps the shifted fp32 logits: "
            "torchtune 2024-05), ce-loss-parallel (ce under torch loss_parallel over the tp vocabulary shards: torchtitan "
            "with tp > 1), fused-xentropy (flash-attn's fused cross-entropy kernel: llm-foundry's default), megatron-ce "
            "(Megatron-Core's vocab-parallel cross-entropy: the default under the megatron precisions), liger-flce "
            "(Liger-Kernel's fused linear cross-entropy: no [tokens, vocab] logits)",
            template=False, choices=_LOSSES),
          F("layernorm", "enum", "LayerNorm precision under autocast: torch (nn.LayerNorm, in fp32) or low-precision "
            "(llm-foundry's LPLayerNorm, in the autocast dtype)", template=False, choices=LAYERNORMS),
          F("loss_chunks", "int", "cross-entropy chunks (torchtune: 8)", template=False, minimum=1),
          F("train_metric_passes", "int", "eager cross-entropy passes over each micro-batch's logits after its "
            "backward, for the loop's training metrics (Composer: 2 for llm-foundry's MPT; `train "
            "--train-metric-passes`)", template=False, bounds=PASSES),
          F("framework", "enum", "a training framework profile: its defaults (loss, norm, attention kernel, metric "
            "passes, its model code's K/V layout; catalog/data/frameworks.json, each with its source) applied to the "
            "settings not given here (`train --framework`)", template=False, choices=tuple(framework_profiles())),
          F("checkpoint_offload", "bool", "checkpointed layer inputs in host RAM (Unsloth)", template=False),
          F("checkpoint_impl", "enum", "torch.utils.checkpoint implementation: non-reentrant, reentrant or "
            "non-reentrant-no-early-stop (torch 1.13's)",
            template=False, choices=CHECKPOINT_IMPLS),
          F("nf4_quantizer", "enum", "QLoRA: the code quantizing the base on the device and running its matmuls "
            "(bitsandbytes, bitsandbytes-0.42, lightning-bnb-0.42, torchao, torchao-0.1)", template=False,
            choices=NF4_QUANTIZERS),
          F("lora_dropout", "enum", "LoRA dropout on the adapters' inputs: none, per-module (PEFT lora_dropout > 0) "
            "or fused-qkv (litgpt: one adapter on the fused q/k/v linear)", template=False, choices=LORA_DROPOUTS),
          F("nf4_format", "enum", "QLoRA base format: nf4-dq (double-quantized block scales, the QLoRA paper) or "
            "nf4 (transformers' default, litgpt bnb.nf4)", template=False, choices=NF4_FORMATS),
          F("loop_keeps_graph", "bool", "with method qlora: the training loop keeps the step's loss and logits (and "
            "so its autograd graph) referenced into the next forward (litgpt)", template=False),
          F("deepspeed_gather", "enum", "with zero 3: DeepSpeed's parameter gather, current (>= 0.9: one rank uses "
            "its partition in place) or pre-0.9 (a gather buffer beside the partition; `train --deepspeed-gather`)",
            template=False, choices=DEEPSPEED_GATHERS),
          F("zero_grad", "enum", "what the loop's optimizer.zero_grad does between steps: set-to-none (frees the "
            "gradients) or zeros (set_to_none=False: kept into the next forward; accelerate <= 0.27, torch < 2.0)",
            template=False, choices=ZERO_GRADS),
          F("kernels", "enum", "layer implementation: pytorch, unsloth (fused LoRA kernels) or liger (Liger-Kernel's "
            "RMSNorm, SwiGLU/GeGLU and RoPE)", template=False,
            choices=_KERNELS),
          F("mamba_path", "enum", "what runs Mamba layers: cuda-kernels (mamba_ssm + causal-conv1d on a CUDA GPU, "
            "or built on ROCm) or torch (transformers' reference functions); default by device", template=False, choices=MAMBA_PATHS),
          F("zero", "int", "DeepSpeed ZeRO stage 0-3", template=False, bounds=ZERO_STAGE),
          F("fsdp", "enum", "PyTorch FSDP sharding", template=False, choices=_FSDP),
          F("tp", "int", "tensor-parallel degree", template=False, minimum=1),
          F("pp", "int", "pipeline-parallel degree", template=False, minimum=1),
          F("virtual_stages", "int", "with pp: model chunks per device of Megatron's interleaved schedule (pipeline "
            "bubble (p - 1)/(v m)); 1 = plain 1F1B", template=False, minimum=1),
          F("pipeline_split", "enum", "with pp: how the layers are split over the stages: even (Megatron, DeepSpeed "
            "uniform), torchtitan-9dec370 or torchtitan (its generated split points)", template=False,
            choices=PIPELINE_SPLITS),
          F("tp_comm_overlap", "bool", "with tp: tensor-parallel collectives overlap the GEMMs (Megatron "
            "--tp-comm-overlap, torchtitan async TP); default not overlapped", template=False),
          F("tp_backward_overlap", "bool", "with tp: Megatron-LM's backward overlap of each column-parallel linear's "
            "input-gradient all-reduce / reduce-scatter with its GEMMs (on in Megatron since 2021-09); default off "
            "(PyTorch tensor parallelism)", template=False),
          F("ep", "int", "expert-parallel degree of an MoE model: the experts split over N devices of the "
            "data-parallel group (`train --ep`; default 1)", template=False, bounds=COUNT),
          F("etp", "int", "with Megatron-Core (precision megatron-bf16/-fp16), an MoE model: the routed experts' own "
            "tensor-parallel size, Megatron expert_tensor_parallel_size (`train --etp`; Megatron-Bridge's MoE recipes "
            "set 1); etp x ep x pp must divide gpus; default the framework's rule (Megatron: tp)", template=False,
            bounds=COUNT),
          F("moe_dispatcher", "enum", "with ep: the MoE token dispatcher, Megatron-Core moe_token_dispatcher_type "
            "(`train --moe-dispatcher`): alltoall (a copy per chosen expert), allgather (all tokens of the EP x ETP "
            "group; Megatron-Core's own default) or flex (DeepEP / HybridEP: once per destination rank and machine); "
            "default alltoall (Megatron-Bridge's and Megatron-LM's MoE recipes, torchtitan)", template=False,
            choices=MOE_DISPATCHERS),
          F("ep_comm_overlap", "bool", "with ep: Megatron-Core --overlap-moe-expert-parallel-comm, the expert-parallel "
            "exchange overlaps another micro-batch's compute (combined 1F1B); default off", template=False),
          F("overlap_grad_reduce", "bool", "with a megatron precision: Megatron --overlap-grad-reduce (`train "
            "--overlap-grad-reduce`), the grad buffer reduced bucket by bucket while the last micro-batch's backward "
            "runs; default off (Megatron-LM's default; Megatron-Bridge's recipes turn it on)", template=False),
          F("overlap_param_gather", "bool", "with overlap_grad_reduce and zero >= 1: Megatron --overlap-param-gather "
            "(`train --overlap-param-gather`), the updated parameters all-gathered bucket by bucket during the next "
            "step's first forward; default off (Megatron-LM's default)", template=False),
          F("gradient_accumulation_fusion", "bool", "Megatron gradient_accumulation_fusion (`train "
            "--[no-]gradient-accumulation-fusion`): TE's wgrad GEMMs accumulate into the fp32 main_grad, no separate "
            "accumulation pass; default on under megatron precisions (Megatron-LM's and Megatron-Bridge's), true "
            "needs one", template=False),
          F("moe_router_fusion", "bool", "Megatron-Core moe_router_fusion (`train --[no-]moe-router-fusion`): the MoE "
            "router's top-k and score function in TE's fused kernels; default off (Megatron-Core's TransformerConfig "
            "default and Megatron-Bridge's recipes'; Megatron-Bridge's performance configs of GPT-OSS, Qwen3, "
            "DeepSeek, Kimi and Qwen-VL turn it on), true needs an MoE model and a megatron precision",
            template=False),
          F("sequence_parallel", "bool", "with tp: Megatron sequence parallelism (`train --sequence-parallel`)",
            template=False),
          F("offload", "enum", "ZeRO-Offload to host memory", template=False, choices=_OFFLOAD),
          F("grad_sync", "enum", "DDP with grad_accumulation: gradients all-reduced once per optimizer-step (no_sync: "
            "HF accelerate / Trainer, the default) or every micro-step; FSDP1 optimizer-step: no_sync, unsharded "
            "gradients accumulate", template=False, choices=GRAD_SYNC),
          F("fsdp_version", "int", "FSDP implementation: 2 fully_shard (default), 1 FullyShardedDataParallel flat "
            "parameters", template=False, bounds=FSDP_VERSION),
          F("fsdp2_units", "enum", "with FSDP2: which units are unsharded when (largest-two; torchtitan: the root "
            "unit kept unsharded from forward to backward; torchtitan-resharded: torch >= 2.8; torchtune: root kept, "
            "every block resharded)", template=False,
            choices=FSDP2_UNITS),
          F("fsdp1_lora_wrap", "enum", "with FSDP1 and LoRA: adapters-apart (every LoRA matrix its own unit: "
            "torchtune, PEFT; the default) or with-layers (the adapters in their decoder layer's unit, "
            "use_orig_params)", template=False, choices=FSDP1_LORA_WRAPS),
          F("context_parallel", "int", "context-parallel degree (each sequence split over N devices): torchtitan's, "
            "or Megatron-Core's under a megatron precision",
            template=False, minimum=1),
          F("cp_kind", "enum", "how context parallelism runs the attention: ring (the default) or ulysses "
            "(DeepSpeed-Ulysses all-to-alls under ZeRO, Arctic Long Sequence Training)", template=False,
            choices=CP_KINDS),
          F("activation_offload", "bool", "saved activations offloaded to host memory (torchtune)", template=False),
          F("tiled_mlp", "bool", "each dense gated MLP over ceil(seq / hidden) sequence shards (DeepSpeed TiledMLP, "
            "Arctic Long Sequence Training)", template=False),
          F("float8", "bool", "torchao float8 training (float8 all-gather with FSDP)", template=False),
          F("float8_recipe", "enum", "with float8: torchao Float8Linear (tensorwise, rowwise, rowwise with bf16 "
            "grad_weight) or transformer-engine te.Linear (delayed scaling; -current: current scaling; -mxfp8: "
            "MXFP8 block scaling, Blackwell only)",
            template=False, choices=FLOAT8_RECIPES),
          F("fp8_param_gather", "bool", "Megatron --fp8-param-gather (`train --[no-]fp8-param-gather`): the te "
            "linears' weights kept as float8 parameters (1 B + the transpose on Hopper, no bf16 weight, no float8 "
            "copy), the optimizer's shard cast once per step, the all-gather at 1 B; default off, Megatron-LM's own "
            "flag default (Megatron-Bridge's float8 recipes turn it on); true needs a megatron precision, float8, a "
            "transformer-engine recipe, zero >= 1 and no fsdp", template=False),
          F("compile", "bool", "the model runs under torch.compile", template=False),
          F("compile_scope", "enum", "with compile: the decoder layers and the loss (torchtune), the loss with the "
            "logits' upcast (torchtitan e7c0cae) or the layers alone "
            "(torchtitan)", template=False, choices=COMPILE_SCOPES),
          F("batch_shapes", "enum", "variable (padded to the longest sample) or fixed (the same shapes every step: "
            "packed fixed-length sequences); what the caching allocator keeps reserved", template=False,
            choices=BATCH_SHAPES),
          F("metric", "enum", "what the memory is compared with: allocated (torch.cuda.max_memory_allocated), "
            "reserved (max_memory_reserved) or nvidia-smi (reserved + CUDA context); default: live tensors + CUDA "
            "context (`train --metric`)", template=False, choices=MEMORY_METRICS),
          F("epochs", "number", "passes over the dataset", 3, minimum=0),
          F("train_tokens", "tokens", "tokens to train on in total (instead of dataset tokens x epochs)",
            template=False),
          F("utilization", "share", "model FLOPs utilization you measured, as `train --utilization` (default: "
            "calibrated on published runs)", bounds=UTILIZATION, template=False),
      )),
    F("dataset", "section", "the training data", required=True, kinds=("training",), fields=(
        F("size", "size", "size on disk as delivered", "20 GB"),
        F("tokens", "tokens", "tokens in one pass", "60M tokens"),
        F("examples", "count", "documents or examples", "40k"),
        F("format", "enum", "file format", "jsonl", choices=DATASET_FORMATS),
        F("location", "str", "where the data lives now and where it will be read from",
          "on-premises NAS, /data/tickets (copied to the training cluster)"),
        F("sensitivity", "enum", "public, internal, confidential or restricted", "confidential",
          choices=SENSITIVITY),
        F("personal_data", "bool", "contains personal data", False),
        F("access", "str", "who may read it, and how", "read-only service account of the ML team"),
        F("offsite_allowed", "bool", "may the data sit in a partner data center?", False),
        F("read_speed", "bandwidth", "read speed of the storage the data is read from", "1 GB/s"),
    )),
    F("expected_duration", "duration", "how long you expect the run to take", "12h", kinds=("training",)),
    F("checkpoints", "section", "checkpoints and resuming", kinds=("training",), fields=(
        F("resume", "bool", "can the run resume from a checkpoint after an interruption?", True),
        F("interval", "interval", "time or steps between checkpoints", "1h"),
        F("keep", "int", "checkpoints kept (older ones deleted)", 3, minimum=0),
        F("storage", "size", "disk space set aside for checkpoints", "100 GB"),
        F("location", "str", "where checkpoints are written", "/scratch/checkpoints"),
        F("save_optimizer", "bool", "checkpoints include optimizer states (needed to resume exactly)", True),
    )),
    F("handover", "section", "where the results go when training ends, and how the environment is cleaned up",
      kinds=("training",), fields=(
          F("model_destination", "str", "where the trained model or adapter files go",
            "s3://ml-models/support-assistant/"),
          F("artifacts", "str_list", "what is handed over: adapter, merged-model, model, checkpoints, logs, "
            "metrics", ["adapter", "logs"]),
          F("logs_destination", "str", "where training logs and metrics go", "s3://ml-logs/support-assistant/"),
          F("data_disposal", "str", "what happens to the copies of the dataset", "deleted from the cluster after "
            "hand-over"),
          F("cleanup", "str", "how the environment is cleaned up", "scratch and checkpoints wiped; jobs and "
            "credentials removed"),
          F("owner", "str", "who receives the results", "ML team lead"),
      )),
)

INFERENCE = (
    F("precision", "enum", "dtype of unquantized weights and compute", "bf16", choices=INFER_PRECISIONS,
      kinds=("inference",)),
    F("quantization", "weights", "the weight format served (fp8, awq-int4, q4_k_m, ...), or 'none': unquantized, "
      "pinned at the precision (else the checkpoint's dtype); left out, the plan may choose a format", "none",
      kinds=("inference",)),
    F("engine", "enum", f"serving engine (default: {ENGINE_RULE_TEXT})", "vllm",
      choices=ENGINES, kinds=("inference",)),
    F("tensor_parallel", "int", "tensor-parallel devices per replica on the devices in resources, the others "
      "running replicas of it, as `fit --tp` (a divisor of the devices in resources that the model shards over: its "
      "attention heads divide by it, its KV heads split or replicate evenly; one larger than a machine's devices spans machines, taken with a warning: its all-reduces cross the "
      "network; 1 on CPUs and Apple chips, and for llama.cpp, which splits layers instead; default: fit's choice, "
      "the most output tokens/s of all replicas together among the layouts that fit)", 2, bounds=COUNT, template=False, kinds=("inference",)),
    F("pipeline_parallel", "int", "pipeline stages of each replica, as `fit --pp` (vLLM --pipeline-parallel-size, "
      "SGLang --pp-size): each stage tensor_parallel devices holding its share of the layers, a replica "
      "tensor_parallel x pipeline_parallel devices (vLLM and SGLang on GPUs, the devices in resources; without "
      "tensor_parallel, fit's choice of it among the degrees whose replicas fill the devices; default 1: no "
      "pipeline)", 2, bounds=COUNT, template=False, kinds=("inference",)),
    F("data_parallel", "int", "data-parallel engine ranks of each replica, as `fit --dp` (vLLM --data-parallel-size; "
      "SGLang --attn-dp-size, its TP group all tensor_parallel x data_parallel devices): each rank tensor_parallel "
      "devices serving its share of the sequences, a replica tensor_parallel x data_parallel devices (vLLM and "
      "SGLang on GPUs, the devices in resources; default: fit's choice, 1 unless an MoE model's tensor parallelism "
      "does not fit within one machine or has a degree refused by its quantization blocks (eq. TP5), where the "
      "expert-parallel layouts within a machine join the ranking and the one with the most output tokens/s of all "
      "replicas together is taken, even where a smaller tensor-parallel degree fits; on SGLang only layouts that "
      "split the routed experts evenly)", 8, bounds=COUNT, template=False, kinds=("inference",)),
    F("expert_parallel", "bool", "the routed experts split over every rank of a replica (tensor_parallel x "
      "data_parallel devices), as `fit --enable-expert-parallel` (vLLM --enable-expert-parallel, SGLang --ep-size; "
      "an MoE model; SGLang refuses a split that leaves the experts uneven; default: fit's choice, as "
      "data_parallel)", True, template=False, kinds=("inference",)),
    F("engine_version", "str", "the engine's release (vllm, sglang), e.g. '0.10.1': its host work per decode step, "
      "which the speed follows (default: the current release)", "0.10.1", template=False, kinds=("inference",)),
    F("kv_cache_dtype", "str", "KV cache dtype (bf16, fp8, q8_0, ...; default: the engine's)", template=False,
      kinds=("inference",)),
    F("engine_settings", "section", "the serving engine's own settings, as its flags (each optional; default: the "
      "engine's); each applies to the engine named", kinds=("inference",), fields=(
        F("split_mode", "enum", "llama.cpp -sm: whole layers (layer) or each matrix by rows (row) over the GPUs",
          "layer", choices=SPLIT_MODES, template=False),
        F("tensor_split", "ratios", "llama.cpp -ts: share of the model per GPU, one per GPU of one machine (the "
          "machines are replicas) (default: by free memory, equal for identical GPUs)", [3, 1], template=False),
        F("n_cpu_moe", "int", "llama.cpp --n-cpu-moe: keep the MoE expert tensors of the first N layers in host "
          "memory", 8, bounds=CPU_MOE_LAYERS, template=False),
        F("image_min_tokens", "int", "llama.cpp --image-min-tokens: fewest tokens per image (and video frame) of a "
          "dynamic-resolution model, Qwen2/2.5/3-VL (default: the model's, 8)", 1024, bounds=IMAGE_TOKENS,
          template=False),
        F("image_max_tokens", "int", "llama.cpp --image-max-tokens: most tokens per image (and video frame) of a "
          "dynamic-resolution model, Qwen2/2.5/3-VL (default: the model's, 4096)", 1024, bounds=IMAGE_TOKENS,
          template=False),
        F("n_gpu_layers", "int", "llama.cpp -ngl: layers offloaded to the GPUs, the output layer counting as the "
          "last, as `fit -ngl` and the flags `fit --auto` prints (default: all)", 36, bounds=GPU_LAYERS,
          template=False),
        F("n_ubatch", "int", "llama.cpp -ub (`fit --ubatch`): tokens per physical batch, which sizes the compute "
          "buffer (default 512)", 512, bounds=TOKENS, template=False),
        F("mem_fraction_static", "share", "SGLang --mem-fraction-static: share of the memory free before loading "
          "for weights + token pool (default: SGLang's, by GPU memory and TP)", 0.85, bounds=UTILIZATION,
          template=False),
        F("max_mamba_cache_size", "int", "SGLang --max-mamba-cache-size: request slots of a hybrid model's "
          "recurrent-state pool (MambaPool), instead of mamba_full_memory_ratio's split (default: SGLang's split)",
          256, bounds=COUNT, template=False),
        F("mamba_full_memory_ratio", "number", "SGLang --mamba-full-memory-ratio r: a hybrid model's recurrent-state "
          "pool gets r / (1 + r) of the memory after the weights (default: SGLang's 0.9)", 0.5, bounds=MEMORY_RATIO,
          template=False),
        F("mamba_radix_cache_strategy", "enum", "SGLang --mamba-radix-cache-strategy: recurrent-state slots each "
          "running request of a hybrid model holds: no_buffer 3 (with disable_overlap_schedule), extra_buffer 5, "
          "extra_buffer_lazy 4 (default: SGLang's auto: extra_buffer for Qwen3-Next, Nemotron-H, Falcon-H1, "
          "Granite-4.0-H, else no_buffer)", "no_buffer", choices=MAMBA_RADIX_CACHE_STRATEGIES, template=False),
        F("disable_overlap_schedule", "bool", "SGLang --disable-overlap-schedule: its overlap scheduler off; the "
          "default strategy (auto) then gives Qwen3-Next, Nemotron-H, Falcon-H1 and Granite-4.0-H no_buffer (3 "
          "recurrent-state slots per running request), extra_buffer 4; the speed is not changed (default: on)", True,
          template=False),
        F("disable_radix_cache", "bool", "SGLang --disable-radix-cache: no prefix cache; each running request of a "
          "hybrid model holds 1 recurrent-state slot, and with max_num_seqs the state pool is that many slots "
          "(default: on)", True, template=False),
        F("async_scheduling", "bool", "vLLM --async-scheduling: the next decode step is scheduled while the device "
          "runs this one, so the engine's host time per step overlaps the device step; an opt-in on vLLM 0.10-0.13 "
          "(engine_version), the default from 0.14 (default: the release's own)", True, template=False),
        F("kv_unified", "bool", "llama.cpp -kvu: one KV buffer shared by all sequences; default: llama-server's "
          "with -np N, one stream per sequence", True, template=False),
        F("max_num_seqs", "int", "vLLM --max-num-seqs / SGLang --max-running-requests: sequences run at once, the "
          "other requests wait in the engine's queue (default: the engine's)", 256, bounds=CONCURRENCY,
          template=False),
        F("allow_long_context", "bool", "vLLM / SGLang started with their override of the model's window "
          "(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1): a context past it is "
          "sized with a warning instead of refused (default: refused, as the engines do)", True, template=False),
    )),
    F("adapters", "section", "LoRA adapters on the served model", kinds=("inference",), template=False, fields=(
        F("mode", "enum", "merged into the weights, or loaded dynamically by the server", "merged",
          choices=ADAPTER_MODES),
        F("count", "int", "adapters served", 1, minimum=1),
        F("max_loaded", "int", "adapters resident on the device at once (dynamic; vLLM --max-loras)", minimum=1),
        F("rank", "int", "largest adapter rank (vLLM --max-lora-rank)", bounds=LORA_RANK),
        F("fully_sharded", "bool", "vLLM --fully-sharded-loras: the adapter slots' A and B both split over the "
          "tensor-parallel devices (default: vLLM's, column layers keep A whole and row layers keep B whole)", True,
          template=False),
    )),
    F("media", "section", "images and video in each request's prompt (multimodal models): their tokens add to the "
      "context", kinds=("inference",), fields=(
        F("images", "int", "images in each request's prompt (a multimodal model only)", 2, bounds=IMAGES,
          template=False),
        F("image_size", "image_size", "width x height of each image (default: the vision encoder's input size)",
          "1024x768", template=False),
        F("video_frames", "int", "sampled frames of one video in each prompt", 16, bounds=VIDEO_FRAMES,
          template=False),
        F("video_size", "image_size", "width x height of each video frame", "640x360", template=False),
        F("pan_and_scan", "bool", "Gemma 3: the processor also crops wide/tall images (more tokens; default off)",
          template=False),
    )),
    F("traffic", "section", "the load: typical and peak", kinds=("inference",), fields=(
        F("concurrency", "dist", "requests being served at the same moment", {"typical": 8, "peak": 32},
          item="count", bounds=CONCURRENCY),
        F("context", "dist", "tokens per request, prompt + output", {"typical": "2k", "peak": "8k"},
          item="context"),
        F("output", "dist", "tokens generated per request; 0: prefill only (embeddings, scoring)",
          {"typical": 300, "peak": 1000}, item="context", bounds=OUTPUT_TOKENS),
        F("requests_per_second", "dist", "requests arriving per second at random (as `vllm bench serve "
          "--request-rate`). Without concurrency: the service is sized as `fit --request-rate` sizes it (open "
          "arrivals, the requests in flight derived; a rate the devices cannot carry is the error check 'Peak load "
          "does not fit', naming the requests/s they carry). With concurrency: the plan is sized at that concurrency, "
          "this rate feeds the network figures, a rate above what that concurrency carries (Little's law) is warned "
          "about, naming both, and one past the devices' capacity is the same error check (default: from concurrency "
          "and speed)", item="rate", template=False),
        F("users", "count", "people or client systems using the service", 200),
    )),
    F("latency", "section", "what users must see", kinds=("inference",), fields=(
        F("ttft", "duration", "time to first token, at most", "2 s"),
        F("tokens_per_second_per_user", "number", "generation speed each user sees, at least", 15, minimum=0),
    )),
    F("service", "section", "how long and when the service runs", kinds=("inference",), fields=(
        F("duration", "duration", "how long the service runs ('12 months'); omit with ongoing: true",
          "12 months"),
        F("ongoing", "bool", "runs with no planned end", template=False),
        F("hours_per_day", "number", "hours per day it must be up (more than 0; left out: 24)", 24,
          bounds=HOURS_PER_DAY),
        F("days_per_week", "number", "days per week it must be up (more than 0; left out: 7)", 7,
          bounds=DAYS_PER_WEEK),
        F("interruptible", "str_list", "periods when an interruption is acceptable", ["weekdays 01:00-05:00 UTC"]),
        F("maintenance_windows", "str_list", "agreed maintenance windows", ["Sundays 02:00-04:00 UTC"]),
        F("availability", "str", "availability target", "99.5%"),
    )),
    F("access", "section", "how clients reach the service", kinds=("inference",), fields=(
        F("method", "enum", "public-api, private-api, vpn, intranet, batch", "private-api",
          choices=ACCESS_METHODS),
        F("clients", "str", "who connects", "the support web app (about 200 agents)"),
        F("isolation", "enum", "network isolation: none, vpc, dedicated-network, air-gapped", "vpc",
          choices=ISOLATION),
        F("fixed_address", "bool", "a fixed IP address is required (allow-lists, firewall rules)", True),
        F("allowlist", "str_list", "networks allowed to connect", ["10.20.0.0/16"]),
        F("stream", "bool", "responses are streamed token by token", True),
    )),
    F("operations", "section", "monitoring, logs and incidents", kinds=("inference",), fields=(
        F("monitoring", "str", "what is monitored, and where", "Prometheus metrics, Grafana dashboards, alerts"),
        F("logs", "section", "request logs", fields=(
            F("location", "str", "where logs are kept", "central log store"),
            F("retention", "duration", "how long logs are kept", "30 days"),
            F("content", "bool", "prompts and outputs are logged (not only metadata)", False),
        )),
        F("incident_contacts", "str_list", "who is called when it breaks", ["oncall-ml@example.com"]),
    )),
)

JOB_FIELDS: tuple[Field, ...] = COMMON + TRAINING + INFERENCE

TOP: tuple[Field, ...] = (
    F("version", "int", "request format version", 1, minimum=1, maximum=1),
    F("title", "str", "what the request is for", "Support assistant: fine-tune and serve"),
    F("team", "str", "who is asking", "Customer support ML team"),
    F("contact", "str", "how to reach the team", "ml-team@example.com"),
    F("start", "date", "default start date of the jobs", template=False),
    F("budget", "section", "budget for the whole request", fields=(
        F("total", "money", "the whole budget", "$60k"),
        F("per_month", "money_month", "a monthly limit", template=False),
    )),
    F("pricing", "section", "default for the jobs: how resources are paid for", fields=PRICING.fields,
      template=False),
    F("jobs", "jobs", "the training and inference jobs, each described separately", required=True),
)

# The seed's "what to state for each", mapped to fields (tests check every path exists and parses).
SEED_ITEMS: dict[str, tuple[str, ...]] = {
    "training: base model and size": ("model.name", "model.size"),
    "training: full or parameter-efficient": ("method", "peft.rank", "peft.targets"),
    "training: dataset size, format, location and sensitivity": (
        "dataset.size", "dataset.tokens", "dataset.format", "dataset.location", "dataset.sensitivity",
        "dataset.access", "dataset.offsite_allowed", "dataset.read_speed"),
    "training: expected duration and whether it can resume from checkpoints": (
        "expected_duration", "checkpoints.resume"),
    "training: number of checkpoints to keep and storage needed": (
        "checkpoints.keep", "checkpoints.interval", "checkpoints.storage"),
    "training: where model files go at the end and how the environment is cleaned up": (
        "handover.model_destination", "handover.cleanup", "handover.data_disposal", "handover.logs_destination"),
    "inference: model, precision and whether it is quantized": ("model.name", "precision", "quantization"),
    "inference: distribution of concurrency, context length and output length": (
        "traffic.concurrency.typical", "traffic.concurrency.peak", "traffic.context.typical",
        "traffic.context.peak", "traffic.output.typical", "traffic.output.peak"),
    "inference: duration, interruptible periods and maintenance windows": (
        "service.duration", "service.interruptible", "service.maintenance_windows"),
    "inference: access method, network isolation and fixed-address needs": (
        "access.method", "access.isolation", "access.fixed_address"),
    "inference: monitoring, logs and incident contacts": (
        "operations.monitoring", "operations.logs.retention", "operations.incident_contacts"),
    "optional: resources in mind (device, count, instance)": ("resources.device", "resources.count",
                                                              "resources.instance"),
    "optional: budget, deadline, hourly vs reserved": ("budget.total", "deadline", "pricing.model"),
}


def job_fields(kind: str | None) -> tuple[Field, ...]:
    """Fields allowed in a job of ``kind`` (all job fields when the kind is unknown)."""
    return tuple(f for f in JOB_FIELDS if kind is None or kind in f.kinds)

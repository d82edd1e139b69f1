"""Typed, validated request specs (frozen; no I/O). Built by ``reader.py`` from the field table in ``fields.py``;
every section class has one attribute per field of its section (a test keeps the two in step). Values are in
base units: bytes, tokens, seconds, USD, bytes/s, requests/s; dates are ``datetime.date``.

A section that the file leaves out is an instance with every attribute None, so checks can ask "was the
checkpoint storage stated?" without guarding against a missing section.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelRef:
    name: str | None = None
    size: int | None = None  # parameters, as the team states it
    revision: str | None = None
    from_job: str | None = None


@dataclass(frozen=True)
class Resources:
    device: str | None = None
    instance: str | None = None
    count: int | None = None
    nodes: int | None = None
    memory: int | None = None  # bytes per device
    headroom: float | None = None  # share of each device's memory kept free (estimate/verdict.py; None: its default)
    fit_target: int | None = None  # llama.cpp: bytes kept free on each GPU instead of a headroom (estimate/verdict.py)
    storage: int | None = None  # bytes
    pool: str | None = None
    jurisdiction: str | None = None
    interconnect: str | None = None
    network: str | None = None  # as `fit --network` reads it (request/quantities.py parse_network)
    price_per_hour: float | None = None  # USD/h for all of it

    @property
    def given(self) -> bool:
        return self.device is not None or self.instance is not None


@dataclass(frozen=True)
class Budget:
    total: float | None = None
    per_month: float | None = None
    per_hour: float | None = None


@dataclass(frozen=True)
class Pricing:
    model: str | None = None
    reserved_discount: float | None = None
    reserved_term: float | None = None  # seconds


@dataclass(frozen=True)
class Deadline:
    date: _dt.date | None = None
    seconds: float | None = None  # from the start


@dataclass(frozen=True)
class Peft:
    rank: int | None = None
    alpha: float | None = None
    targets: tuple[str, ...] | None = None
    modules_to_save: tuple[str, ...] | None = None
    dropout: float | None = None
    adapter_dtype: str | None = None  # TrainingWorkload.adapter_dtype (`train --adapter-dtype`)
    base_dtype: str | None = None  # TrainingWorkload.base_dtype (`train --base-dtype`)


@dataclass(frozen=True)
class TrainingSettings:
    precision: str | None = None
    tf32: bool | None = None
    optimizer: str | None = None
    optimizer_state_dtype: str | None = None
    optimizer_impl: str | None = None
    optimizer_in_backward: bool | None = None
    micro_batch: int | None = None
    seq_len: int | None = None
    target_len: int | None = None  # an encoder-decoder's decoder length (TrainingWorkload.target_len)
    grad_accumulation: int | None = None
    grad_checkpointing: str | None = None
    checkpoint_every: int | None = None
    recompute_modules: tuple[str, ...] | None = None  # TrainingWorkload.recompute_modules (`train --recompute-modules`)
    attention: str | None = None
    attention_kernel: str | None = None
    packing: bool | None = None
    doc_len: int | None = None  # tokens per packed document (TrainingWorkload.doc_len)
    loss: str | None = None
    layernorm: str | None = None
    train_metric_passes: int | None = None
    framework: str | None = None  # a training framework profile (catalog/data/frameworks.json)
    loss_chunks: int | None = None
    checkpoint_offload: bool | None = None
    checkpoint_impl: str | None = None
    kernels: str | None = None
    mamba_path: str | None = None
    nf4_quantizer: str | None = None
    lora_dropout: str | None = None
    nf4_format: str | None = None
    loop_keeps_graph: bool | None = None
    deepspeed_gather: str | None = None
    zero_grad: str | None = None
    zero: int | None = None
    fsdp: str | None = None
    tp: int | None = None
    pp: int | None = None
    virtual_stages: int | None = None
    pipeline_split: str | None = None
    tp_comm_overlap: bool | None = None
    tp_backward_overlap: bool | None = None
    ep: int | None = None
    etp: int | None = None
    moe_dispatcher: str | None = None
    ep_comm_overlap: bool | None = None
    overlap_grad_reduce: bool | None = None
    overlap_param_gather: bool | None = None
    gradient_accumulation_fusion: bool | None = None
    moe_router_fusion: bool | None = None
    sequence_parallel: bool | None = None
    offload: str | None = None
    fsdp_version: int | None = None
    fsdp2_units: str | None = None
    fsdp1_lora_wrap: str | None = None
    grad_sync: str | None = None
    context_parallel: int | None = None
    cp_kind: str | None = None
    activation_offload: bool | None = None
    tiled_mlp: bool | None = None
    float8: bool | None = None
    float8_recipe: str | None = None
    fp8_param_gather: bool | None = None
    compile: bool | None = None
    compile_scope: str | None = None
    batch_shapes: str | None = None
    metric: str | None = None
    epochs: float | None = None
    train_tokens: int | None = None
    utilization: float | None = None


@dataclass(frozen=True)
class Dataset:
    size: int | None = None  # bytes
    tokens: int | None = None
    examples: int | None = None
    format: str | None = None
    location: str | None = None
    sensitivity: str | None = None
    personal_data: bool | None = None
    access: str | None = None
    offsite_allowed: bool | None = None
    read_speed: float | None = None  # bytes/s


@dataclass(frozen=True)
class Interval:
    seconds: float | None = None
    steps: int | None = None


@dataclass(frozen=True)
class Checkpoints:
    resume: bool | None = None
    interval: Interval | None = None
    keep: int | None = None
    storage: int | None = None  # bytes
    location: str | None = None
    save_optimizer: bool | None = None


@dataclass(frozen=True)
class Handover:
    model_destination: str | None = None
    artifacts: tuple[str, ...] | None = None
    logs_destination: str | None = None
    data_disposal: str | None = None
    cleanup: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class Dist:
    """Typical and peak of one traffic quantity."""

    typical: float | None = None
    peak: float | None = None

    @property
    def worst(self) -> float | None:
        return self.peak if self.peak is not None else self.typical


@dataclass(frozen=True)
class Adapters:
    mode: str | None = None
    count: int | None = None
    max_loaded: int | None = None
    rank: int | None = None
    fully_sharded: bool = False


@dataclass(frozen=True)
class Traffic:
    concurrency: Dist = field(default_factory=Dist)
    context: Dist = field(default_factory=Dist)
    output: Dist = field(default_factory=Dist)
    requests_per_second: Dist = field(default_factory=Dist)
    users: int | None = None


@dataclass(frozen=True)
class Media:
    """Images and video in each request's prompt (InferenceWorkload's fields of the same names)."""

    images: int | None = None
    image_size: tuple[int, int] | None = None  # (width, height) pixels
    video_frames: int | None = None
    video_size: tuple[int, int] | None = None
    pan_and_scan: bool | None = None

    def fields(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class EngineSettings:
    """The serving engine's own settings (InferenceWorkload's fields of the same names, the CLI's flags)."""

    split_mode: str | None = None  # llama.cpp -sm
    tensor_split: tuple[float, ...] | None = None  # llama.cpp -ts
    n_cpu_moe: int | None = None  # llama.cpp --n-cpu-moe
    image_min_tokens: int | None = None  # llama.cpp --image-min-tokens (a dynamic-resolution model's images)
    image_max_tokens: int | None = None  # llama.cpp --image-max-tokens
    n_gpu_layers: int | None = None  # llama.cpp -ngl (the output layer counting as the last)
    n_ubatch: int | None = None  # llama.cpp -ub (CLI --ubatch)
    mem_fraction_static: float | None = None  # SGLang --mem-fraction-static
    max_mamba_cache_size: int | None = None  # SGLang --max-mamba-cache-size (hybrid models' recurrent-state pool)
    mamba_full_memory_ratio: float | None = None  # SGLang --mamba-full-memory-ratio
    mamba_radix_cache_strategy: str | None = None  # SGLang --mamba-radix-cache-strategy (eq. 4b's slots)
    disable_overlap_schedule: bool | None = None  # SGLang --disable-overlap-schedule (eq. 4b's strategy and slots)
    disable_radix_cache: bool | None = None  # SGLang --disable-radix-cache (eq. 4b's 1 slot, eq. 2b'')
    async_scheduling: bool | None = None  # vLLM --async-scheduling (estimate/engines.py step_host: host step overlapped)
    max_num_seqs: int | None = None  # vLLM --max-num-seqs / SGLang --max-running-requests: the rest queue
    kv_unified: bool | None = None  # llama.cpp -kvu: one KV buffer for all sequences; None: llama-server's with -np N
    # vLLM / SGLang started with their override of the model's window (InferenceWorkload.allow_long_context)
    allow_long_context: bool | None = None

    def fields(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Latency:
    ttft: float | None = None  # seconds
    tokens_per_second_per_user: float | None = None


# a service that states no hours_per_day / days_per_week runs around the clock, every day: the one home of that
# default (the plan's cost, its network and storage per month and its operations section read ``hours_up``)
ALL_DAY_HOURS = 24.0
ALL_WEEK_DAYS = 7.0


@dataclass(frozen=True)
class Service:
    duration: float | None = None  # seconds
    ongoing: bool | None = None
    hours_per_day: float | None = None
    days_per_week: float | None = None
    interruptible: tuple[str, ...] | None = None
    maintenance_windows: tuple[str, ...] | None = None
    availability: str | None = None

    @property
    def hours_up(self) -> tuple[float, float]:
        """(hours per day, days per week) the service runs: as given, around the clock where not given (the reader
        refuses 0, request/fields.py ``HOURS_PER_DAY`` / ``DAYS_PER_WEEK``: a service never up is bad input)."""
        return (ALL_DAY_HOURS if self.hours_per_day is None else self.hours_per_day,
                ALL_WEEK_DAYS if self.days_per_week is None else self.days_per_week)


@dataclass(frozen=True)
class Access:
    method: str | None = None
    clients: str | None = None
    isolation: str | None = None
    fixed_address: bool | None = None
    allowlist: tuple[str, ...] | None = None
    stream: bool | None = None


@dataclass(frozen=True)
class Logs:
    location: str | None = None
    retention: float | None = None  # seconds
    content: bool | None = None


@dataclass(frozen=True)
class Operations:
    monitoring: str | None = None
    logs: Logs = field(default_factory=Logs)
    incident_contacts: tuple[str, ...] | None = None


@dataclass(frozen=True)
class _JobBase:
    name: str
    kind: str
    description: str | None = None
    model: ModelRef = field(default_factory=ModelRef)
    resources: Resources = field(default_factory=Resources)
    start: _dt.date | None = None
    deadline: Deadline | None = None
    budget: Budget = field(default_factory=Budget)
    pricing: Pricing = field(default_factory=Pricing)
    line: int = 0  # line of the job in the request file


@dataclass(frozen=True)
class TrainingJob(_JobBase):
    method: str = "full"
    purpose: str | None = None
    baseline_tried: bool | None = None
    peft: Peft = field(default_factory=Peft)
    settings: TrainingSettings = field(default_factory=TrainingSettings)
    dataset: Dataset = field(default_factory=Dataset)
    expected_duration: float | None = None
    checkpoints: Checkpoints = field(default_factory=Checkpoints)
    handover: Handover = field(default_factory=Handover)

    def workload_fields(self) -> dict[str, Any]:
        """The TrainingWorkload keyword fields this job states: its settings (not the run's length, epochs and
        train_tokens, nor the duration's utilization), the method and, for an adapter method, the peft settings;
        the workload's own defaults fill the rest. The one mapping the reader's check and the plan use."""
        fields: dict[str, Any] = {k: v for k, v in vars(self.settings).items()
                                  if v is not None and k not in RUN_SETTINGS}
        fields["method"] = self.method
        if self.method != "full":
            fields.update({k: v for k, v in (("rank", self.peft.rank), ("targets", self.peft.targets),
                                             ("modules_to_save", self.peft.modules_to_save),
                                             ("adapter_dtype", self.peft.adapter_dtype),
                                             ("base_dtype", self.peft.base_dtype)) if v is not None})
        return fields


RUN_SETTINGS = ("epochs", "train_tokens", "utilization")  # settings of the run, not of its workload


UNQUANTIZED = "none"  # quantization: none (also no / false / off): unquantized, the format pinned


@dataclass(frozen=True)
class InferenceJob(_JobBase):
    precision: str | None = None
    # the weight format asked for: None when the key is absent (the plan may search formats), UNQUANTIZED for
    # 'none' (unquantized: pinned at the precision or the checkpoint's dtype), else a normalized weight format
    quantization: str | None = None
    engine: str | None = None
    engine_version: str | None = None  # vllm/sglang release (InferenceWorkload.engine_version); None: the current
    kv_cache_dtype: str | None = None
    tensor_parallel: int | None = None  # devices per stage of a replica (fit's tensor_parallel, `fit --tp`); None: fit's
    # choice
    # pipeline stages of each replica (fit's pipeline_parallel, `fit --pp`; vLLM, SGLang): a replica is tensor_parallel x
    # pipeline_parallel devices; None: 1 (no pipeline)
    pipeline_parallel: int | None = None
    # data-parallel ranks of each replica (fit's data_parallel, `fit --dp`; vLLM --data-parallel-size): a replica is
    # tensor_parallel x data_parallel devices; None: 1. expert_parallel: the routed experts split over all of its
    # ranks (`fit --enable-expert-parallel`); None: False
    data_parallel: int | None = None
    expert_parallel: bool | None = None
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    adapters: Adapters = field(default_factory=Adapters)
    media: Media = field(default_factory=Media)
    traffic: Traffic = field(default_factory=Traffic)
    latency: Latency = field(default_factory=Latency)
    service: Service = field(default_factory=Service)
    access: Access = field(default_factory=Access)
    operations: Operations = field(default_factory=Operations)


Job = TrainingJob | InferenceJob


@dataclass(frozen=True)
class TopBudget:
    total: float | None = None
    per_month: float | None = None


@dataclass(frozen=True)
class Request:
    """A whole request: any number of jobs, each described separately so each can be checked."""

    jobs: tuple[Job, ...]
    version: int = 1
    title: str | None = None
    team: str | None = None
    contact: str | None = None
    start: _dt.date | None = None
    budget: TopBudget = field(default_factory=TopBudget)
    pricing: Pricing = field(default_factory=Pricing)
    source: str = "<request>"
    base_dir: str = "."
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def _job_index(self) -> tuple[dict[str, Job], dict[int, int] | None]:
        """(name -> first job of that name, id(job) -> position), built once: the jobs tuple never changes. The
        position map is None when two jobs share a name (then two jobs may be equal, and a lookup by equality,
        as ``tuple.index`` does, is the only exact one)."""
        hit: tuple[dict[str, Job], dict[int, int] | None] | None = self.__dict__.get("_jobs_by")
        if hit is None:
            by_name: dict[str, Job] = {}
            for j in self.jobs:
                by_name.setdefault(j.name, j)
            pos: dict[int, int] | None = None
            if len(by_name) == len(self.jobs):
                pos = {id(j): i for i, j in enumerate(self.jobs)}
            hit = (by_name, pos)
            self.__dict__["_jobs_by"] = hit
        return hit

    def job(self, name: str) -> Job:
        return self._job_index()[0][name]

    def job_position(self, job: Job) -> int:
        """Index of ``job`` in ``jobs`` (as ``jobs.index(job)``, without the linear search)."""
        pos = self._job_index()[1]
        i = pos.get(id(job)) if pos is not None else None
        return i if i is not None else self.jobs.index(job)

    def line_of(self, job: Job | None, path: str = "") -> int | None:
        """The line of ``path`` inside ``job`` (or at the top level), falling back to the nearest parent given."""
        prefix = f"jobs[{self.job_position(job)}]" if job is not None else ""
        parts = path.split(".") if path else []
        while True:
            key = ".".join(x for x in (prefix, *parts) if x)
            if key in self.lines:
                return self.lines[key]
            if not parts:
                return job.line if job is not None else None
            parts = parts[:-1]

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        def clean(x: Any) -> Any:
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items() if v is not None and k != "lines"}
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, _dt.date):
                return x.isoformat()
            return x
        return clean(asdict(self))  # type: ignore[no-any-return]

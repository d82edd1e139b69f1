"""``SpeedEstimate``: the answer of ``estimate_speed`` for one layout (prefill, decode, roofline, assumptions)
and what it derives (TTFT, tokens per second, calibrated ranges). Built by ``speed_layout.layout_speed``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..formulas import network as NW
from ..formulas.speed import PhaseTime, Roofline
from ..frozen import fast_init
from ..result import Assumption, json_data
from . import ranges as R


@fast_init
@dataclass(frozen=True)
class SpeedEstimate:
    """Prefill / time-to-first-token and decode speed for one replica on ``count`` devices."""

    model: str
    device: str
    count: int
    tensor_parallel: int
    weights_format: str
    compute_dtype: str
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    prefill: PhaseTime | None
    decode: PhaseTime | None
    decode_single: PhaseTime | None
    roofline_prefill: Roofline | None
    roofline_decode: Roofline | None
    assumptions: tuple[Assumption, ...] = ()
    warnings: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    serving_engine: str | None = None  # vllm / sglang: the engine whose release scope picks the decode band
    engine_version: str | None = None  # its release (None: engines.CURRENT_VERSION)
    eager_engine: str | None = None  # transformers: its step is timed with the launch rule (launch_overhead eq. K4)
    # the engine prefills the ``concurrency`` prompts in one forward before decoding them together (transformers'
    # generate() of a padded batch, and the measure worker: measure/workloads.py inference_pass): its TTFT and
    # prefill rate are the batch prefill's (eq. P1 at concurrency), the quantity its prefill rows measured
    batch_prefill: bool = False
    # a continuous-batching engine at ``concurrency`` requests, each replaced when it finishes: the steady state of
    # formulas/serving_queue.py eqs. Q4-Q9 (estimate/serving_load.py under_load), whose TTFT and per-user rate are
    # what those users see; None where not modelled (one sequence, a static batch, no prefill or decode speed)
    load: dict[str, Any] | None = None

    @property
    def under_load(self) -> dict[str, Any] | None:
        """``load`` by the name its JSON gives it (``to_dict``'s ``under_load``): one name on every surface."""
        return self.load

    @property
    def ttft_idle_seconds(self) -> float | None:
        """Time to first token with no other prompt competing: one request's prefill on an idle replica, or, where
        the engine prefills the ``concurrency`` prompts together (``batch_prefill``), the prefill of all of them (eq.
        P1): no prompt's first token comes before the forward over the batch ends."""
        if self.prefill is None:
            return None
        return self.prefill_batch_seconds() if self.batch_prefill else self.prefill.seconds

    @property
    def ttft_seconds(self) -> float | None:
        """Time to first token at ``concurrency``: the loaded mean (``load``, formulas/serving_queue.py eq. Q6: its
        own prefill plus the other requests' prompts ahead of it) where modelled, else ``ttft_idle_seconds``."""
        return self.load["ttft_seconds"] if self.load is not None else self.ttft_idle_seconds

    @property
    def tokens_per_second_per_user(self) -> float | None:
        """Output tokens/s one user sees: one per decode step, the steps stretched by the other requests' prefill
        chunks where the load is modelled (formulas/serving_queue.py eq. Q5), else one per decode step."""
        if self.load is not None:  # a prefill-only load (output 0) has no step: no per-user rate
            return 1.0 / self.load["step_seconds"] if self.load["step_seconds"] else None
        return self.decode_tokens_per_second_per_user

    @property
    def decode_tokens_per_second_per_user(self) -> float | None:
        """Output tokens/s one user sees with no prompt competing, 1 / t_d [tokens/s]: one token per decode step
        (formulas/speed.py eq. 4's step); ``tokens_per_second_per_user`` where no load is modelled."""
        return 1.0 / self.decode.seconds if self.decode else None

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Aggregate decode rate of ``concurrency`` sequences with no prompt competing, C / t_d [tokens/s]
        (formulas/speed.py eq. 4's step): the quantity the decode and batched-decode validation rows measure (a
        benchmark's time per output token excludes the first token), so the calibrated decode band
        (``decode_band``) multiplies this figure; not the output a loaded service delivers (``tokens_per_second``)."""
        return self.concurrency / self.decode.seconds if self.decode else None

    @property
    def tokens_per_second(self) -> float | None:
        """Output tokens/s of the replica in total at ``concurrency``: where the load is modelled, the loaded output
        rate (``load["output_tokens_per_second"]``, formulas/serving_queue.py eq. Q7: requests/s x output tokens,
        each request's TTFT and its steps stretched by the other prompts' prefill chunks, eq. Q5b), so it never
        exceeds C x ``tokens_per_second_per_user``; else the decode rate ``decode_tokens_per_second``."""
        if self.load is not None:  # a prefill-only service (no output tokens) has no token rate, as unloaded
            return float(self.load["output_tokens_per_second"]) if self.output_tokens else None
        return self.decode_tokens_per_second

    @property
    def single_stream_tokens_per_second(self) -> float | None:
        return 1.0 / self.decode_single.seconds if self.decode_single else None

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Prompt tokens prefilled per second over the TTFT: one prompt's, or the ``concurrency`` prompts' of a batch
        prefill (``batch_prefill``). The prefill band (estimate/ranges.py) multiplies this figure, the one its rows
        measured (measure/compare.py throughput_rows reads it)."""
        t = self.ttft_idle_seconds
        if not t:
            return None
        return (self.concurrency if self.batch_prefill else 1) * self.prompt_tokens / t

    def prefill_batch_seconds(self, prompts: int | None = None, steps: int = 1) -> float | None:
        """Wall time of ``prompts`` (default: ``concurrency``) prompts prefilled together: eq. (3) of
        formulas/speed.py over the b prompts, b times one prompt's FLOPs, attention and communication against one
        read of the weights::

            T_prefill(b) = max(b t_c, t_m) + b (t_comm + t_attn + t_elementwise) + t_overhead        (P1)

        (b = 1: the TTFT). A compute-bound prefill (b t_c >= t_m) so takes b times one prompt's: batching prompts
        adds no prefill throughput beyond 1 / t_c prompts per second. An engine that splits the b prompts into
        ``steps`` s forwards of max_num_batched_tokens (vLLM's chunked prefill: vllm/v1/core/sched/scheduler.py
        @00024d31 Scheduler.schedule, ``token_budget = self.max_num_scheduled_tokens``, the step's tokens; the steps:
        estimate/serving_load.under_load) runs
        b / s prompts' work per forward, and each forward reads the weights, pays the fixed part t_overhead (eq. 7;
        the Gated DeltaNet calls of eq. 17) and the host's launches t_host (eq. K1, overlapping it) again::

            T_prefill(b, s) = s max(max((b / s) t_c, t_m) + (b / s)(t_comm + t_attn + t_elementwise)
                                    + t_overhead, t_host)                                            (P1s)

        (s = 1: P1 with its host overlap)."""
        if self.prefill is None:
            return None
        p, b = self.prefill, self.concurrency if prompts is None else prompts
        if b < 1 or steps < 1:
            raise InputError(f"prompts and steps must be >= 1, got {b} prompts in {steps} steps")
        share = b / steps  # the prompts' work one step carries
        device = (max(share * p.compute_seconds, p.memory_seconds)
                  + share * (p.comm_seconds + p.attention_seconds + p.elementwise_seconds) + p.overhead_seconds)
        return steps * max(device, p.host_seconds)  # each step's launches overlap its device work (eq. K1)

    @property
    def request_seconds(self) -> float | None:
        """Time one of the ``concurrency`` requests in service is held (formulas/network.py eq. 9, the W of
        Little's law and of formulas/serving_queue.py eqs. Q1-Q3): its TTFT then its output tokens at the decode
        speed (both at ``concurrency`` where ``load`` is modelled: eqs. Q5b, Q8), and never less than the prefill of every prompt in service (eq. P1 at ``concurrency``): the replica
        cannot finish its C requests faster than it prefills their C prompts, so C / W stays within its prefill
        throughput / prompt tokens. A prefill-only request (output 0) is held for exactly that batch prefill, not for
        one prompt's alone on an idle replica. (Chunked prefill, which shares decode steps with prefill chunks, is not
        modelled beyond that bound.) None without the speeds it needs."""
        if self.ttft_seconds is None or (self.output_tokens and not self.tokens_per_second_per_user):
            return None
        return NW.request_seconds(self.ttft_seconds, self.output_tokens, self.tokens_per_second_per_user,
                                  self.prefill_batch_seconds())

    @property
    def static_batch_seconds(self) -> float | None:
        """Wall time of one static batch: ``concurrency`` prompts prefilled together (eq. P1), then decoded to
        ``output_tokens`` each (an offline batch job; vLLM's benchmarks/benchmark_latency.py times this); the first
        token comes from the prefill, the other output_tokens - 1 from decode steps of the b sequences at the
        mid-generation context."""
        prefill = self.prefill_batch_seconds()
        if prefill is None or self.decode is None:
            return None
        return prefill + max(self.output_tokens - 1, 0) * self.decode.seconds

    @property
    def engine(self) -> str | None:
        """The engine whose validation rows calibrate this estimate's ranges (estimate/ranges.py)."""
        if self.eager_engine is not None:
            return self.eager_engine
        return R.LLAMACPP if self.weights_format.startswith("gguf:") and self.serving_engine is None else None

    @property
    def prefill_band(self) -> R.Band | None:
        """The calibrated band of the prefill rate (estimate/ranges.py); None without validation rows."""
        if "split_prefill" in self.details:  # eq. 8p: no validation row measures a split's prefill
            return None
        if self.engine == R.LLAMACPP:  # its backend's band, else the engine-wide one (ranges.llamacpp_band)
            return R.llamacpp_band(R.PREFILL, self.details.get("llamacpp_backend"))[0]
        return R.band_for(R.PREFILL, self.engine or "")

    @property
    def decode_band(self) -> R.Band | None:
        """The calibrated band of the aggregate decode rate (batched band above one sequence): a serving engine's
        from its release scope, or the pooled serving band where that scope has no rows (ranges.serving_band)."""
        kind = R.BATCHED if self.concurrency > 1 else R.DECODE
        if self.details.get("split_decode_on_host"):  # eq. 8 with host-held weights: no validation row measures it
            return None
        if self.serving_engine in R.SERVING_ENGINES:
            return R.serving_band(kind, self.serving_engine, self.engine_version, self.device,
                                  self.tensor_parallel, bool(self.details.get("mla_moe")),
                                  bool(self.details.get("kernel_floor_bound")))[0]
        if self.engine == R.LLAMACPP:
            return R.llamacpp_band(kind, self.details.get("llamacpp_backend"))[0]
        return R.band_for(kind, self.engine or "")

    @property
    def prefill_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] prefill tokens/s (``prefill_band``); None without validation rows."""
        return R.band_range(self.prefill_band, self.prefill_tokens_per_second)

    @property
    def decode_range(self) -> tuple[float, float] | None:
        """Calibrated [low, high] aggregate decode tokens/s with no prompt competing (``decode_band`` x
        ``decode_tokens_per_second``, the figure its rows measured). A release whose host step is not established but
        bounded (details ``host_range_seconds``, estimate/engines.py HOST_RANGE_STAND_IN): the low end is the band's
        low x the rate with that host step in the release's composition -- added to the step (eq. 7, serial) or
        max(step, host) (eq. 14, overlapped)."""
        r = R.band_range(self.decode_band, self.decode_tokens_per_second)
        h = self.details.get("host_range_seconds")
        if r is None or h is None or self.decode is None:
            return r
        t = self.decode.seconds
        slow = t + h if self.details.get("host_range_mode") == "serial" else max(t, h)
        return r[0] * t / slow, r[1]

    @property
    def range_coverage(self) -> dict[str, dict[str, Any] | None]:
        """The coverage of each calibrated range (``ranges.range_coverage``: its band's ``Band.coverage``; None where
        that range is None), keyed as ``to_dict``'s calibrated_ranges; JSON and text print these. ``tokens_per_second``
        is a deprecated alias of ``decode_tokens_per_second`` (the decode range's key before the loaded total took
        that name), kept for one release."""
        decode = R.range_coverage(self.decode_band, self.decode_tokens_per_second)
        return {"prefill_tokens_per_second": R.range_coverage(self.prefill_band, self.prefill_tokens_per_second),
                "decode_tokens_per_second": decode, "tokens_per_second": decode}

    def to_dict(self) -> dict[str, Any]:
        return json_data({
            "kind": "speed", "model": self.model, "device": self.device, "count": self.count,
            "tensor_parallel": self.tensor_parallel, "weights_format": self.weights_format,
            "compute_dtype": self.compute_dtype, "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens, "concurrency": self.concurrency,
            "ttft_seconds": self.ttft_seconds, "ttft_idle_seconds": self.ttft_idle_seconds,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "tokens_per_second_per_user": self.tokens_per_second_per_user,
            "tokens_per_second": self.tokens_per_second,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "single_stream_tokens_per_second": self.single_stream_tokens_per_second,
            "prefill": self.prefill.to_dict() if self.prefill else None,
            "decode": self.decode.to_dict() if self.decode else None,
            "roofline": {"prefill": self.roofline_prefill.to_dict() if self.roofline_prefill else None,
                         "decode": self.roofline_decode.to_dict() if self.roofline_decode else None},
            "assumptions": [a.to_dict() for a in self.assumptions], "warnings": list(self.warnings),
            "details": self.details, "under_load": self.load,
            "calibrated_ranges": {"prefill_tokens_per_second": self.prefill_range,
                                  "decode_tokens_per_second": self.decode_range,
                                  "tokens_per_second": self.decode_range,  # deprecated alias (one release)
                                  "coverage": self.range_coverage,
                                  "source": "estimate/ranges.py: the band of this engine's validation rows; "
                                            "coverage: the share of measured runs it holds, against its target"},
        })

"""Requests a serving engine does not run at once: the wait in its queue.

A server that runs R sequences at once (estimate/inference/common.py eq. R1: min(C, its running cap -- vLLM
``max_num_seqs``, SGLang ``max_running_requests`` --, the sequences its KV pool holds)) while C > R requests are in
flight keeps C - R of them waiting. With every running request in service for W seconds (its time
to first token plus its output tokens at the decode speed, formulas/network.py eq. 9's W) and the server saturated
(a finished request's slot goes to the next waiting one), Little's law (Little 1961, Operations Research 9(3):
L = lambda x W) applied to the R requests in service gives the throughput, and applied to all C in flight their
time in the system::

    X = R / W                              [requests/s]                                       (Q1)
    T = C / X = W x C / R                  [s]                                                (Q2)
    wait = T - W = W x (C / R - 1)         [s], 0 when C <= R                                 (Q3)

So the output tokens/s are the R running sequences' (the queued ones add none), and a queued request's time to
first token is its wait (Q3) plus the TTFT in service. This is the mean over a closed, saturated system (every
request in flight is replaced when it finishes: the "concurrency" llmsizer sizes for), not a burst's worst case.
W is the loaded one where the engine batches continuously: eqs. Q4-Q9 below give the TTFT and the decode step of R
running requests whose prompts compete with the decode for the device; eq. Q14 a burst of more requests than
the engine admits, passing through its slots. Preemption is not modelled.
"""

from __future__ import annotations

import math

from ..errors import InputError


def queue_throughput(running: int, request_seconds: float) -> float:
    """Eq. (Q1): requests completed per second [1/s] by ``running`` sequences each in service ``request_seconds``."""
    if running < 1 or request_seconds <= 0:
        raise InputError("running must be >= 1 and request_seconds > 0")
    return running / request_seconds


def queue_wait_seconds(in_flight: int, running: int, request_seconds: float) -> float:
    """Eq. (Q3): mean seconds a request waits for a running slot when ``in_flight`` requests share ``running`` slots,
    each held ``request_seconds``; 0 when every request runs at once."""
    if in_flight <= running:
        return 0.0
    return in_flight / queue_throughput(running, request_seconds) - request_seconds


# --- prefill demand under load (eqs. Q4-Q9) -------------------------------------------------------------------
#
# A continuous-batching server (vLLM, SGLang, llama.cpp's server) at C requests in flight, each replaced when it
# finishes, spends device time on every request's prompt as well as on its output. Per request it needs
#
#     D = P x tau                          prefill device time of its P prompt tokens [s]                 (Q4)
#
# (tau: the prefill seconds per prompt token, compute-bound), and its decode phase lasts Z = N x t_step, N output
# tokens at one token per scheduler step. Steps come in two kinds: a pure decode step of the running sequences,
# t_d, and a step that also carries a prefill chunk of up to B prompt tokens. A decoding request sees the prefills
# of the other C - 1 requests (its own came before it decoded): in the share u' = u (C - 1) / C of device time they
# take (u: all prompts' share, Q7), it gets a token only per prefill-carrying step:
#
#   one forward per step (vLLM v1, llama.cpp server: the decode tokens and the chunk go into one batch, the
#   weights are read once and the step costs its roofline, ~ the chunk's compute, t_mix = max(B x tau, t_d)):
#       1 / t_step = u' / t_mix + (1 - u') / t_d                                                        (Q5a)
#   prefill batches run on their own (SGLang without --enable-mixed-chunk: a prefill batch is run instead of
#   the decode batch whenever one is ready, so decode waits for it):
#       t_step = t_d / (1 - u')                                                                         (Q5b)
#
# The prefill is a single server every request visits once (demand D) and the decode a delay of Z: the closed
# interactive system of C customers with think time Z. Schweitzer's approximate mean value analysis (Schweitzer
# 1979; Lazowska et al. 1984, "Quantitative System Performance", sec. 6.4.2: R = D (1 + Q (C - 1) / C),
# Q = X R, X = C / (R + Z)) has for one queue the closed form
#
#     TTFT = R = [(C D - Z) + sqrt((C D - Z)^2 + 4 D Z)] / 2                                             (Q6)
#
# (C = 1: D, the idle prompt's; C D >> Z: C D - Z, the saturated server's), and then
#
#     X = C / (R + Z)   [requests/s],   u = X D   (the prefill's share of device time)                 (Q7)
#
# with u the fixed point of Q5-Q7 (X falls as u rises: one root in [0, 1), found by bisection). The mean request
# takes R + Z = C / X (Little's law), of which the first token waits R.


def interactive_response_seconds(in_flight: int, demand: float, think: float) -> float:
    """Eq. (Q6): mean response time [s] of a single queue of service demand ``demand`` visited by ``in_flight``
    customers who each spend ``think`` seconds elsewhere between visits (Schweitzer's approximate MVA, closed
    form for one queue). 1 customer: ``demand``; no think time: ``in_flight`` x ``demand``."""
    if in_flight < 1 or demand < 0 or think < 0:
        raise InputError("in_flight must be >= 1, demand and think >= 0")
    a = in_flight * demand - think
    return (a + (a * a + 4.0 * demand * think) ** 0.5) / 2.0


def loaded_step_seconds(decode_step: float, prefill_share: float, mixed_step: float | None) -> float:
    """Eq. (Q5): mean seconds between two output tokens of a decoding sequence when the prefill takes
    ``prefill_share`` of device time: steps that carry a prefill chunk of ``mixed_step`` seconds (Q5a, one forward
    holding the decode tokens too), or, ``mixed_step`` None, prefill batches the decode waits for (Q5b)."""
    if decode_step <= 0 or not 0.0 <= prefill_share < 1.0:
        raise InputError("decode_step must be > 0 and prefill_share in [0, 1)")
    if mixed_step is None:
        return decode_step / (1.0 - prefill_share)
    return 1.0 / (prefill_share / max(mixed_step, decode_step) + (1.0 - prefill_share) / decode_step)


# With the server's own time per request (eq. Q9's H, below) the network has two queueing stations: the API server's
# one process (demand H) and the device's prefill (demand D), beside the decode delay. Schweitzer's approximation for
# K stations (Lazowska et al. 1984, sec. 6.4.2, per station k: R_k = D_k (1 + Q_k (C - 1) / C), Q_k = X R_k) gives
# each station's residence in closed form in X,
#
#     R_k(X) = D_k / (1 - X D_k (C - 1) / C),     X = C / (sum_k R_k(X) + Z)                             (Q6')
#
# and X (R_H + R_D + Z) - C rises with X (every R_k and Z do): one root in [0, min_k C / ((C - 1) D_k)), found by
# bisection. With H = 0 it is Q6 (one station). u = X D and the step of Q5 follow from X, so one bisection on X
# solves Q5-Q7 and Q9a together.


# Not all of the server's time per request H is work its one process does one request after another (eq. Q11). Part is
# transit that overlaps other requests' work -- the HTTP round trip, the hand-off to the engine core over its socket and
# the wait for the engine core's first output, the asyncio event loop switching to other requests while one awaits --
# and only the serial part s H (the Python work the process cannot overlap: parsing, tokenizing the prompt, the
# output handler's detokenizing and the SSE chunks, vllm/v1/engine/async_llm.py generate / output_handler) queues:
#
#     H = (1 - s) H  [a delay, each request's own]  +  s H  [the single-server station's demand],  s in [0, 1]     (Q11)
#
# so the server caps the throughput at 1 / (s H), not 1 / H. s = 1: all of H serial (eqs. Q6', Q9b, Q10 as first
# written); s = 0: a pure delay. One request sees H either way (H's calibration at one request is unchanged). s is a
# named parameter (estimate/efficiency.py VLLM_API_SERVER_SERIAL_SHARE, calibrated on one named row).


def split_host(host_seconds: float, serial_share: float) -> tuple[float, float]:
    """Eq. (Q11): (s H, (1 - s) H) -- the server's serial demand [s] per request and its delay [s] -- of
    ``host_seconds`` H of which ``serial_share`` s is done one request after another."""
    if host_seconds < 0 or not 0.0 <= serial_share <= 1.0:
        raise InputError("host_seconds must be >= 0 and serial_share in [0, 1]")
    return host_seconds * serial_share, host_seconds * (1.0 - serial_share)


def _residence(throughput: float, demand: float, in_flight: int) -> float:
    """Eq. (Q6'): Schweitzer's residence time [s] at one queueing station of ``demand`` at ``throughput``."""
    return demand / (1.0 - throughput * demand * (in_flight - 1) / in_flight) if demand else 0.0


def _throughput_bound(in_flight: int, demands: tuple[float, ...]) -> float:
    """The largest throughput Q6' admits: below every station's pole and 1 / D of the busiest (u < 1)."""
    poles = [1.0 / d for d in demands if d > 0]
    poles += [in_flight / ((in_flight - 1) * d) for d in demands if d > 0 and in_flight > 1]
    return min(poles)


def _solve_throughput(in_flight: int, demands: tuple[float, ...], think: object) -> float:
    """The root X of X (sum_k R_k(X) + Z(X)) = C (eq. Q6'), ``think`` a function of X (rising or constant)."""
    lo, hi = 0.0, _throughput_bound(in_flight, demands)
    others = in_flight - 1
    for _ in range(64):  # the excess rises with X: bisection to 2^-64 of the bound
        mid = (lo + hi) / 2.0
        # sum_k R_k(mid) + Z(mid), each R_k ``_residence``'s expression, summed in the same order from 0 (one
        # bisection step per solve of a rate's climb: written out, without a generator and a call per station)
        cycle: float = 0
        for d in demands:
            cycle += d / (1.0 - mid * d * others / in_flight) if d else 0.0
        cycle += think(mid)  # type: ignore[operator]
        # a step that leaves (lo, hi) as they were ends the search: each step is a function of (lo, hi) alone
        # (``think`` a function of X), so every later step repeats it and returns this lo. In floating point the
        # interval stops shrinking once lo and hi are adjacent doubles (mid rounds onto one of them): after 53 to
        # 60 of the 64 steps on recommend's rate search
        if mid * cycle < in_flight:
            if lo == mid:
                break
            lo = mid
        else:
            if hi == mid:
                break
            hi = mid
    return lo


def station_responses(in_flight: int, demands: tuple[float, ...], think: float) -> tuple[float, ...]:
    """Eq. (Q6'): the mean residence time [s] at each single-server queueing station of ``demands`` (each visited
    once per cycle) of ``in_flight`` customers who also spend ``think`` seconds in a delay between visits
    (Schweitzer's approximate MVA). One station: eq. Q6."""
    if in_flight < 1 or think < 0 or not demands or min(demands) < 0 or not any(demands) and not think:
        raise InputError("in_flight must be >= 1, demands >= 0 (one > 0 or think > 0), think >= 0")
    if not any(demands):
        return tuple(0.0 for _ in demands)
    x = _solve_throughput(in_flight, demands, lambda _x: think)
    return tuple(_residence(x, d, in_flight) for d in demands)


def loaded_serving(in_flight: int, prefill_seconds: float, decode_step: float, output_tokens: int,
                   mixed_step: float | None, host_seconds: float = 0.0,
                   carrying_steps: int = 0, host_serial_share: float = 1.0) -> dict[str, float]:
    """Eqs. (Q4-Q7, Q9a): the steady state of ``in_flight`` requests, each a prompt of ``prefill_seconds`` of device
    time (Q4) then ``output_tokens`` tokens at ``decode_step`` seconds a step when no prompt is prefilled (0 tokens: a
    prefill-only service, whose think time is the server's alone; ``decode_step`` unused); the steps that carry
    prefill chunks are ``mixed_step`` seconds (None: the prefill runs apart from the decode, or beside it at an
    additive cost); ``host_seconds`` the server's own time per request in its one process (eq. Q9's H, a queueing
    station of eq. Q6'); ``carrying_steps`` the steps carrying the request's own prompt that also run the others'
    decode (the additive one-forward step: each pays a decode step more, eq. Q9a's k); ``host_serial_share`` s, the
    share of H done serially in that process (eq. Q11: s H the station's demand, (1 - s) H a delay). Returns the mean
    ``ttft_seconds`` (Q9a), ``device_ttft_seconds`` (R_D), ``api_server_seconds`` (R_H), ``api_server_busy``
    (X H), ``step_seconds`` (Q5; 0 without output: no step), ``step_wait_seconds`` (w), ``carry_seconds`` (k t_d),
    ``requests_per_second`` (Q7), ``request_seconds`` (C / X) and ``prefill_share`` (u)."""
    if (in_flight < 1 or prefill_seconds <= 0 or output_tokens < 0 or host_seconds < 0 or carrying_steps < 0
            or (output_tokens and decode_step <= 0) or not 0.0 <= host_serial_share <= 1.0):
        raise InputError("in_flight >= 1, output_tokens >= 0; prefill_seconds > 0 and decode_step > 0 with output; "
                         "host_seconds, carrying_steps >= 0; host_serial_share in [0, 1]")
    serial, transit = split_host(host_seconds, host_serial_share)  # eq. Q11
    others = (in_flight - 1) / in_flight
    decoding = output_tokens > 0 and in_flight > 1  # others keep the decode steps running

    def delays(x: float) -> tuple[float, float, float, float]:
        """(step, w, k t_d, Z') at throughput ``x``: Q5's step at the others' prefill share, eq. Q9a's waits."""
        if not output_tokens:
            return 0.0, 0.0, 0.0, 0.0
        busy = min(x * prefill_seconds * others, 1.0 - 1e-12)  # u' (below 1 inside the bound)
        step = loaded_step_seconds(decode_step, busy, mixed_step)
        wait = step_wait_seconds(in_flight, decode_step, busy) if decoding else 0.0
        carry = carrying_steps * decode_step if decoding else 0.0
        return step, wait, carry, output_tokens * step + wait + carry + transit

    demands = (serial, prefill_seconds)
    x = _solve_throughput(in_flight, demands, lambda v: delays(v)[3])
    step, wait, carry, _ = delays(x)
    r_host, r_device = (_residence(x, d, in_flight) for d in demands)
    return {"ttft_seconds": transit + r_host + wait + r_device + carry, "device_ttft_seconds": r_device,
            "api_server_seconds": transit + r_host, "api_server_busy": x * serial, "step_seconds": step,
            "step_wait_seconds": wait, "carry_seconds": carry, "requests_per_second": x,
            "request_seconds": in_flight / x, "prefill_share": x * prefill_seconds}


# Requests that arrive together (a benchmark's closed loop of fixed-length requests, all started at once, stays in
# lockstep: those prefilled in one step finish their N tokens in one step and return together) meet the other extreme:
# each round the C prompts are prefilled together in k = ceil(C P / B) steps of B prompt tokens, T_P(C) in all (eq.
# P1 of estimate/speed.py), the j-th step's prompts getting their first token after j / k of it, then decode together:
#
#     TTFT_burst = T_P(C) (k + 1) / (2 k)        X_burst = C / (T_P(C) + (N - 1) t_d)                   (Q8)
#
# (a prompt's first token comes after the step holding its last token: the i-th of the C prompts, in order, ends in
# step ceil(i P / B), so exactly TTFT_burst = T_P(C) / k x mean_i ceil(i P / B); (k + 1) / (2 k) where each step holds
# whole prompts, T_P(C) where one prompt spans every step, C = 1 with P > B.)
#
# The mean TTFT of independent requests (Q6) and of a burst (Q8) bracket what a server sees: arrivals spread at
# random at one end, all together at the other (each with the server's own time, eq. Q9).


def burst_serving(in_flight: int, batch_prefill_seconds: float, steps: int, decode_step: float,
                  output_tokens: int, host_seconds: float = 0.0,
                  prompt_chunk: tuple[int, int] | None = None, host_serial_share: float = 1.0) -> dict[str, float]:
    """Eqs. (Q8, Q9b): mean ``ttft_seconds`` and ``requests_per_second`` of ``in_flight`` requests arriving together
    each round: their prompts prefilled in ``steps`` steps taking ``batch_prefill_seconds`` in all, then
    ``output_tokens`` - 1 decode steps of ``decode_step`` seconds (the first token comes from the prefill); with
    the server's own ``host_seconds`` (H) per request done one request after another (the j-th waits j H) and a whole
    running step before admission (Q9b), in the TTFT and in each round; ``prompt_chunk`` (P, B): each prompt's first
    token after the step holding its last token (None: the j-th step's prompts after j of the ``steps``);
    ``host_serial_share`` s: only s H is done one request after another, (1 - s) H is each one's own delay (eq. Q11)."""
    if (in_flight < 1 or steps < 1 or batch_prefill_seconds <= 0 or output_tokens < 0 or host_seconds < 0
            or (output_tokens and decode_step <= 0) or not 0.0 <= host_serial_share <= 1.0):
        raise InputError("in_flight, steps >= 1, output_tokens >= 0; batch_prefill_seconds > 0 and decode_step > 0 "
                         "with output; host_seconds >= 0, host_serial_share in [0, 1]")
    serial, transit = split_host(host_seconds, host_serial_share)  # eq. Q11
    # Q9b: at most one whole running step; a prefill-only round (no output) has no decode step running
    step_wait = decode_step if in_flight > 1 and output_tokens else 0.0
    decode = max(output_tokens - 1, 0) * decode_step
    round_seconds = in_flight * serial + transit + step_wait + batch_prefill_seconds + decode
    if prompt_chunk is None:
        done = (steps + 1) / 2  # the mean step in which a prompt's prefill ends
    else:
        prompt, chunk = prompt_chunk
        done = sum(-(-i * prompt // chunk) for i in range(1, in_flight + 1)) / in_flight
    return {"ttft_seconds": transit + serial * (in_flight + 1) / 2 + step_wait + batch_prefill_seconds * done / steps,
            "requests_per_second": in_flight / round_seconds, "request_seconds": round_seconds}


# What a served request's TTFT holds beyond the device (eq. Q9). A benchmark client times the first token from the
# moment it sends the request to the moment the first streamed chunk arrives (vLLM vllm/benchmarks/lib/
# endpoint_request_func.py @3aee4a4f, the OpenAI completions request: ``ttft = timestamp - st`` at the first chunk,
# ``st = time.perf_counter()`` before the POST). Beside the device time it holds:
# - H, the server's own time per request: HTTP parsing, tokenizing the prompt and handing it to the engine (vLLM's
#   OpenAI server is one Python process: AsyncLLM.generate -> add_request, vllm/v1/engine/async_llm.py @8ef0b5f5),
#   the first token's trip back (the engine core's output socket; AsyncLLM's output_handler task, one per server,
#   running OutputProcessor.process_outputs: detokenize and queue per request), and the SSE chunk written back. A
#   named parameter per engine (estimate/engines.py API_SERVER_SECONDS; vLLM's CALIBRATED on one named row).
# - w, the wait for the running step: the engine admits new requests only between steps (vLLM EngineCoreProc
#   .run_busy_loop, vllm/v1/engine/core.py @00080ee1: ``_process_input_queue()`` then ``_process_engine_step()``;
#   the scheduler's waiting queue is read at the next Scheduler.schedule; llama.cpp's update_slots and SGLang's
#   event loop likewise take new requests once per iteration). With C >= 2 the others keep the steps running back to
#   back. The device's time splits into the others' prefill (share u' = u (C - 1) / C, Q5) and decode (1 - u'): a
#   request arriving during another's prefill waits for it inside R_D already (eq. Q6' counts the prefill work ahead
#   of it), so only one arriving during a decode step (probability 1 - u') waits for that step's residual, half of
#   one (one length: the residual of a deterministic renewal, L / 2); alone (C = 1) it finds the engine idle.
# - k t_d, the decode its own prompt's steps carry: a one-forward engine (vLLM v1, llama.cpp's server) puts the
#   others' decode tokens in the steps that prefill its prompt, k = ceil(P / B) of them, and where such a step is
#   timed additively (estimate/serving_load.py MIXED_STEP_ROOFLINE False: the chunk's prefill then the decode step's
#   own time) each pays t_d beyond the prefill of D before the first token comes out; an engine whose prefill
#   batches run apart (SGLang without mixed chunks) or a roofline step (Q5a) has k = 0.
#
#     TTFT_low  = R_H + w + R_D + k t_d,  w = (1 - u') t_d / 2, k t_d as above (C >= 2; both 0 at C = 1)    (Q9a)
#     TTFT_high = H (C + 1) / 2 + t_d + TTFT_burst,   round_high = C H + t_d + T_P(C) + (N - 1) t_d           (Q9b)
#
# (Q9a: independent arrivals. The API server is one Python process (vLLM's OpenAI server: one asyncio event loop,
# AsyncLLM above), so it is a single-server queueing station of demand H in eq. Q6', not a pure delay: at C requests
# its residence R_H = H / (1 - X H (C - 1) / C) grows as its busy share X H nears 1, the same serial server Q9b
# assumes. w and k t_d are time the request spends off both queues, so they join the think time:
# Z' = N t_step + w + k t_d, and the mean request takes R_H + R_D + Z' = C / X. Q9b: arriving together, Q8's burst
# after at most one whole running step, and the C requests' server work done one after another in that process, the
# j-th waiting j H: as if all of H were that process's serial work; part of it is transit that overlaps, so Q9b is an
# upper bound of the pattern, not a calibrated figure. H holds the per-request work only: what the server does per
# output token (detokenizing, an SSE chunk per token) is not in it, and neither is any per-step host work beyond the
# engine's own step time.)
#
# A prefill-only service (N = 0: embeddings-like, or a scoring pass) has no decode: Z' = 0, no step wait, and the
# C requests cycle through the two queues alone; saturated, R_D -> C D - R_H (the busiest station's cycle C D).


def step_wait_seconds(in_flight: int, decode_step: float, others_prefill_share: float = 0.0) -> float:
    """Eq. (Q9a)'s w: the mean wait of an arriving request for the decode step the engine is running, half a step
    when it arrives during one (share 1 - ``others_prefill_share`` of the time, the others' prefill being queued
    for in eq. Q6') and other requests keep the steps running (``in_flight`` >= 2); none when it is alone."""
    return (1.0 - others_prefill_share) * decode_step / 2.0 if in_flight > 1 else 0.0


# --- open arrivals at a request rate (eq. Q10) ------------------------------------------------------------------
#
# A benchmark that sends requests at a rate lambda (vLLM ``vllm bench serve --request-rate``: gaps drawn from a gamma
# distribution of shape ``burstiness``, 1 = exponential, a Poisson process; vllm/benchmarks/serve.py get_request)
# whatever the server does is an OPEN system: the requests in flight are an output, not an input. The same stations as
# eq. Q6' (the API server's one process, demand H; the device's prefill, demand D; the decode a delay of N t_step) then
# form an open product-form network (Jackson 1957; Lazowska et al. 1984, "Quantitative System Performance", sec. 6.2,
# the open model's solution: U_k = lambda D_k, R_k = D_k / (1 - U_k) at a queueing centre, R_k = D_k at a delay),
# the limit of Q6' as C -> infinity at X = lambda:
#
#     u = lambda D,   R_H = H / (1 - lambda H),   R_D = D / (1 - u)                                        (Q10a)
#     t_step = Q5 at the prefill share u (Poisson arrivals see time averages, Wolff 1982: all of the prefill an
#              arriving request meets is the others')
#     p = 1 - exp(-lambda N t_step)   the chance the engine is running decode steps when it arrives: the decoding
#              requests of an M/G/inf delay are Poisson of mean lambda N t_step (Little), PASTA again
#     TTFT = R_H + p ((1 - u) t_d / 2 + k t_d) + R_D                                                     (Q10b)
#     C = lambda (TTFT + N t_step)   the mean requests in flight (Little's law, Little 1961)            (Q10c)
#
# (Q9a's w and k t_d weighted by p: a request alone finds no step running.) A stable server needs every queueing
# centre below saturation: lambda H < 1 and lambda D < 1; at or above it the queue grows without bound and no mean
# exists (the rate exceeds the capacity, ``open_capacity``).


class OverCapacityError(InputError):
    """A request rate at or above eq. (Q10a)'s bound (no steady state): ``capacity`` [requests/s], that bound. An
    answer about the hardware (it does not carry the rate), not malformed input: callers report it as not fitting."""

    def __init__(self, message: str, capacity: float) -> None:
        super().__init__(message)
        self.capacity = capacity


def open_capacity(prefill_seconds: float, host_seconds: float = 0.0, host_serial_share: float = 1.0) -> float:
    """Eq. (Q10a)'s bound with eq. Q11: the largest request rate [1/s] whose queues stay finite, 1 / max(D, s H)
    (only the serial share s of H queues)."""
    if prefill_seconds <= 0 or host_seconds < 0 or not 0.0 <= host_serial_share <= 1.0:
        raise InputError("prefill_seconds must be > 0, host_seconds >= 0 and host_serial_share in [0, 1]")
    return 1.0 / max(prefill_seconds, host_seconds * host_serial_share)


def open_serving(rate: float, prefill_seconds: float, decode_step: float, output_tokens: int,
                 mixed_step: float | None, host_seconds: float = 0.0, carrying_steps: int = 0,
                 host_serial_share: float = 1.0) -> dict[str, float]:
    """Eq. (Q10): the steady state of requests arriving at ``rate`` per second (a Poisson process), each a prompt of
    ``prefill_seconds`` of device time then ``output_tokens`` tokens at ``decode_step`` seconds a step when no prompt
    is prefilled (the arguments of ``loaded_serving``, ``host_serial_share`` s of eq. Q11 among them). Returns the mean ``ttft_seconds`` (Q10b),
    ``device_ttft_seconds`` (R_D), ``api_server_seconds`` (R_H), ``api_server_busy`` (lambda H), ``step_seconds``,
    ``step_wait_seconds``, ``carry_seconds``, ``requests_per_second`` (= ``rate``), ``request_seconds``,
    ``prefill_share`` (u), ``decoding_probability`` (p) and ``in_flight`` (Q10c, a real number). Raises
    OverCapacityError where ``rate`` reaches ``open_capacity``."""
    if (rate <= 0 or prefill_seconds <= 0 or output_tokens < 0 or host_seconds < 0 or carrying_steps < 0
            or (output_tokens and decode_step <= 0)):
        raise InputError("rate > 0, output_tokens >= 0; prefill_seconds > 0 and decode_step > 0 with output; "
                         "host_seconds, carrying_steps >= 0")
    cap = open_capacity(prefill_seconds, host_seconds, host_serial_share)
    serial, transit = split_host(host_seconds, host_serial_share)  # eq. Q11
    if rate >= cap:
        raise OverCapacityError(
            f"request rate {rate:g}/s per replica is at or above the server's capacity, {cap:.4g} requests/s per "
            f"replica (1 / max(prefill {prefill_seconds:.4g} s, the API server's serial {serial:.4g} s per request), "
            "eq. Q10a): its queue grows without bound; lower the rate, add replicas or shorten the prompts", cap)
    share = rate * prefill_seconds
    r_host = transit + serial / (1.0 - rate * serial)
    r_device = prefill_seconds / (1.0 - share)
    step = loaded_step_seconds(decode_step, share, mixed_step) if output_tokens else 0.0
    busy = 1.0 - math.exp(-rate * output_tokens * step) if output_tokens else 0.0
    wait = busy * (1.0 - share) * decode_step / 2.0
    carry = busy * carrying_steps * decode_step
    ttft = r_host + wait + r_device + carry
    seconds = ttft + output_tokens * step
    return {"ttft_seconds": ttft, "device_ttft_seconds": r_device, "api_server_seconds": r_host,
            "api_server_busy": rate * serial, "step_seconds": step, "step_wait_seconds": wait,
            "carry_seconds": carry, "requests_per_second": rate, "request_seconds": seconds,
            "prefill_share": share, "decoding_probability": busy, "in_flight": rate * seconds}


# --- M/M/c: Erlang C (eq. Q12), the bound and special case of the wait for admission (eq. Q13) --------------------
#
# A pool engine admits at most c sequences at once (vLLM: its KV pool's blocks or max_num_seqs; SGLang: its token
# pool or max_running_requests; estimate/inference/common.py eq. R1); a request that finds c running waits in the
# engine's queue (vLLM: Scheduler.add_request appends to ``self.waiting``, the queue made in Scheduler.__init__,
# vllm/v1/core/sched/scheduler.py:158 @00024d31, and Scheduler.schedule takes none from it while
# ``len(self.running) == self.max_num_running_reqs``). Where the requests in flight at a rate lambda (eq. Q10c) exceed
# c, the c admitted slots are c servers fed by one queue: with Poisson arrivals and exponential service of mean T
# (each slot held T seconds) the M/M/c queue (Kleinrock 1975, "Queueing Systems" vol. 1, sec. 3.5; Gross & Harris,
# "Fundamentals of Queueing Theory", sec. 2.3), of offered load a = lambda T < c, has
#
#     B(0) = 1,  B(k) = a B(k-1) / (k + a B(k-1))          Erlang B by its recursion (the loss of k servers)
#     P_wait = C(c, a) = c B(c) / (c - a (1 - B(c)))       Erlang C: the chance an arrival finds all c busy  (Q12a)
#     W_q = C(c, a) T / (c - a)                            the mean wait for admission [s]                   (Q12b)
#     L = a + lambda W_q                                   the mean requests in flight: in service + waiting (Q12c)
#
# and no steady state where a >= c (lambda >= c / T: the queue grows without bound). The service is a model: the
# arrivals a Poisson process (a benchmark's --request-rate with burstiness 1), the service times exponential (a fixed
# length's service is less variable, and M/M/c's wait then an over-estimate: for M/D/c about half, by the Lee-Longton
# approximation W_q(M/G/c) ~ W_q(M/M/c) (1 + c_s^2) / 2, c_s the service time's coefficient of variation). The wait
# llmsizer reports is eq. Q13's (below), where the time per request depends on how many run; eq. Q12 at the longest
# time, T(c), bounds it from above.


def erlang_c(servers: int, offered: float) -> float:
    """Eq. (Q12a): the chance that an arrival waits in an M/M/c queue of ``servers`` c and offered load ``offered``
    a = lambda T (Erlang C, via Erlang B's recursion, stable for any c); a >= c is refused (no steady state). Used as
    the upper bound of eq. Q13's chance (each slot held T(c), the longest), which skips Q13's grid below the floor."""
    if servers < 1 or offered < 0 or offered >= servers:
        raise InputError("servers must be >= 1 and 0 <= offered load < servers")
    loss = 1.0
    for k in range(1, servers + 1):  # Erlang B: B(k) = a B(k-1) / (k + a B(k-1))
        loss = offered * loss / (k + offered * loss)
    return servers * loss / (servers - offered * (1.0 - loss))


# --- the wait for admission as a load-dependent server (eq. Q13) -------------------------------------------------
#
# Eq. Q12 holds each of the c slots T(c), the time per request with all c running; with fewer running the decode
# step is shorter and a request leaves sooner, so Q12 over-states the wait, by a factor that swings on the one T it
# is given. The engine is instead a load-dependent service centre, its flow-equivalent server (Chandy, Herzog & Woo
# 1975, "Parametric analysis of queuing networks", IBM J. Res. Dev. 19(1); Lazowska et al. 1984, "Quantitative System
# Performance" ch. 8): with k requests present it completes X(min(k, c)) requests per second, X(k) the closed load's
# completions with k running, each replaced as it finishes (eq. Q7; the c admitted are all that run). Requests
# arriving at random at lambda make a birth-death chain (Kleinrock 1975, "Queueing Systems" vol. 1, sec. 3.1:
# births lambda, deaths mu_k = X(min(k, c))), whose stationary distribution, for rho = lambda / X(c) < 1, is
#
#     p_k = p_0 prod_{i=1..k} lambda / X(min(i, c))                                                          (Q13a)
#     p_k = p_c rho^(k - c)  for k >= c,  sum_{k>=c} p_k = p_c / (1 - rho)      the geometric tail past c
#     P_wait = sum_{k>=c} p_k = p_c / (1 - rho)     an arrival finds c present and waits (Poisson arrivals see
#                                                   time averages, Wolff 1982)                              (Q13b)
#     L_q = sum_{k>c} (k - c) p_k = p_c rho / (1 - rho)^2,   W_q = L_q / lambda   (Little's law)             (Q13c)
#     L = sum_k min(k, c) p_k + L_q                 the mean present: running and waiting                    (Q13d)
#
# and no steady state where lambda >= X(c) (the refusal of eq. Q12, c / T(c) = X(c)). With X(k) = k / T for every
# k <= c it is M/M/c (Erlang C, eq. Q12); with X constant, M/M/1. The products are summed in logarithms (c in the
# thousands overflows them). X is given at a grid of k (every k where c <= ADMISSION_GRID_DENSE, else doubling: 1, 2,
# 4, ..., and c, ``admission_grid``: log2(c) + 2 evaluations of the closed load) and read between by straight lines (``grid_throughputs``): X rises
# with k (more running, more completions per second), and a line between two rising samples rises too, so the
# interpolant keeps X's order and meets every sample exactly.
ADMISSION_GRID_DENSE = 8


def admission_grid(servers: int) -> tuple[int, ...]:
    """The k at which eq. Q13's X(k) is evaluated for ``servers`` c: every k where c <= ADMISSION_GRID_DENSE, else
    1, 2, 4, ... (doubling) and c."""
    if servers < 1:
        raise InputError("servers must be >= 1")
    if servers <= ADMISSION_GRID_DENSE:
        return tuple(range(1, servers + 1))
    ks = [1]
    while ks[-1] * 2 < servers:
        ks.append(ks[-1] * 2)
    return (*ks, servers)


def grid_throughputs(samples: dict[int, float], servers: int) -> list[float]:
    """X(1) .. X(c) for eq. Q13 from ``samples`` {k: X(k)} at ``admission_grid(servers)``: each sample kept, the k
    between two samples read on the straight line through them."""
    ks = admission_grid(servers)
    if any(k not in samples or not samples[k] > 0 for k in ks):
        raise InputError("grid_throughputs needs X(k) > 0 at every k of admission_grid")
    out: list[float] = []
    for lo, hi in zip(ks, ks[1:], strict=False):
        out.extend(samples[lo] + (samples[hi] - samples[lo]) * (k - lo) / (hi - lo) for k in range(lo, hi))
    out.append(samples[ks[-1]])
    return out


def load_dependent_queue(rate: float, throughputs: list[float]) -> dict[str, float]:
    """Eq. (Q13): requests at ``rate`` per second (Poisson) served by a load-dependent centre that completes
    ``throughputs[k - 1]`` = X(k) per second with k present (k <= c = len(throughputs); X(c) past c, the others
    waiting): ``wait_probability`` (Q13b), ``wait_seconds`` W_q and ``waiting`` L_q (Q13c), ``in_service`` and
    ``in_flight`` L (Q13d). OverCapacityError, its capacity X(c), where ``rate`` reaches it."""
    servers = len(throughputs)
    if rate <= 0 or servers < 1 or min(throughputs) <= 0:
        raise InputError("rate and every throughput must be > 0, with at least one")
    cap = throughputs[-1]
    if rate >= cap:
        raise OverCapacityError(
            f"request rate {rate:g}/s per replica is at or above what {servers} admitted sequences serve, "
            f"{cap:.4g} requests/s (X(c), the closed load's completions with all c running, eq. Q13): the queue for "
            "admission grows without bound", cap)
    rho = rate / cap
    logs = [0.0]  # log(p_k / p_0), k = 0 .. c (eq. Q13a)
    for x in throughputs:
        logs.append(logs[-1] + math.log(rate / x))
    top = max(logs)
    w = [math.exp(v - top) for v in logs]
    tail = w[-1] / (1.0 - rho)  # sum_{k>=c} of the unnormalised p_k
    total = sum(w[:-1]) + tail
    p_wait = tail / total
    waiting = w[-1] * rho / (1.0 - rho) ** 2 / total
    in_service = (sum(k * wk for k, wk in enumerate(w[:-1])) + servers * tail) / total
    return {"wait_probability": p_wait, "wait_seconds": waiting / rate, "waiting": waiting,
            "in_service": in_service, "in_flight": in_service + waiting}


# --- a closed burst larger than the engine admits (eq. Q14) ------------------------------------------------------
#
# N requests sent at once and not replaced (a benchmark without a rate or a concurrency cap: ``vllm bench serve``
# with --request-rate inf sends every prompt at once), on an engine that runs at most c of them (estimate/inference/
# common.py eq. R1: its running cap, the sequences of the full context its KV pool holds). vLLM v1 keeps the rest in
# its waiting queue (vllm/v1/core/sched/scheduler.py @00024d31, Scheduler.schedule: "Next, schedule the WAITING
# requests", a request whose ``kv_cache_manager.allocate_slots`` returns None ends the loop and stays in
# ``self.waiting``; none is taken while ``len(self.running) == self.max_num_running_reqs``), and takes them first come,
# first served as finished requests free their blocks. The burst's N requests then pass through c slots; two
# patterns bound what a request waits for admission, as eqs. Q9a / Q9b bound the TTFT of the c running:
#
#   continuous admission (the c running a closed load at c, eq. Q7's X(c), each slot handed to the next waiting
#   request as one finishes): the i-th request (i = 0 .. N - 1, in order) is admitted at the (i - c + 1)-th
#   completion, 1 / X(c) apart:
#       wait_i = max(0, i - c + 1) / X(c),   mean wait = (N - c)(N - c + 1) / (2 N X(c))                  (Q14a)
#       TTFT = eq. Q9a's TTFT at c + mean wait,   requests/s = X(c)
#   waves in lockstep (the c admitted prefilled together and finishing together, eq. Q8's round at c, then the next
#   c admitted): k = ceil(N / c) waves, the j-th (j = 0 .. k - 1) waiting j rounds:
#       mean wait = round(c) x mean_i floor(i / c),   TTFT = eq. Q9b's TTFT at c + mean wait,
#       requests/s = N / (k round(c))                                                                      (Q14b)
#   (every wave, the last one of N - (k - 1) c requests too, timed as a full wave of c: an upper bound of the
#   pattern, as Q9b is.)
#
# Not modelled: preemption. vLLM v1 admits a waiting request once its next prompt chunk's blocks fit, not its whole
# context, and a running request that cannot grow preempts the newest running one (Scheduler.schedule:
# ``preempted_req = self.running.pop()``, ``_preempt_request``), which goes back to the waiting queue and recomputes
# its prompt from the start; that recomputed prefill is device time neither pattern counts, so a burst that preempts
# can exceed Q14b.


def burst_admission_wait(in_flight: int, admitted: int, throughput: float) -> float:
    """Eq. (Q14a): the mean wait [s] for admission of a burst of ``in_flight`` requests through ``admitted`` slots
    handed on first come, first served as requests complete at ``throughput`` [1/s]; 0 where all are admitted."""
    if in_flight < 1 or admitted < 1 or throughput <= 0:
        raise InputError("in_flight and admitted must be >= 1, throughput > 0")
    queued = max(0, in_flight - admitted)
    return queued * (queued + 1) / (2.0 * in_flight * throughput)


def burst_waves(in_flight: int, admitted: int, round_seconds: float) -> dict[str, float]:
    """Eq. (Q14b): a burst of ``in_flight`` requests run in waves of ``admitted``, each a round of ``round_seconds``
    (eq. Q8/Q9b's round at ``admitted``): ``waves`` k, ``wait_seconds`` (the mean wait for the request's wave) and
    ``requests_per_second`` (N / (k round))."""
    if in_flight < 1 or admitted < 1 or round_seconds <= 0:
        raise InputError("in_flight and admitted must be >= 1, round_seconds > 0")
    waves = -(-in_flight // admitted)
    # mean_i floor(i / c) over i = 0 .. N - 1: full waves 0 .. k - 2 of c each, the last of N - (k - 1) c
    last = in_flight - (waves - 1) * admitted
    mean_index = (admitted * (waves - 1) * (waves - 2) / 2 + last * (waves - 1)) / in_flight
    return {"waves": float(waves), "wait_seconds": round_seconds * mean_index,
            "requests_per_second": in_flight / (waves * round_seconds)}

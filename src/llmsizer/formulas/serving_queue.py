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
running requests whose prompts compete with the decode for the device. Preemption is not modelled.
"""

from __future__ import annotations

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


def loaded_serving(in_flight: int, prefill_seconds: float, decode_step: float, output_tokens: int,
                   mixed_step: float | None, host_seconds: float = 0.0) -> dict[str, float]:
    """Eqs. (Q4-Q7, Q9a): the steady state of ``in_flight`` requests, each a prompt of ``prefill_seconds`` of device
    time (Q4) then ``output_tokens`` tokens at ``decode_step`` seconds a step when no prompt is prefilled; the
    steps that carry prefill chunks are ``mixed_step`` seconds (None: the prefill runs in batches of its own);
    ``host_seconds`` the server's own time per request off the device (eq. Q9's H). Returns the mean
    ``ttft_seconds`` (Q9a: H, the running step's residual and Q6's R), ``device_ttft_seconds`` (R), ``step_seconds``
    (Q5), ``step_wait_seconds`` (w), ``requests_per_second`` (Q7), ``request_seconds`` (R + Z') and
    ``prefill_share`` (u)."""
    if in_flight < 1 or prefill_seconds <= 0 or decode_step <= 0 or output_tokens < 1 or host_seconds < 0:
        raise InputError("in_flight, output_tokens >= 1; prefill_seconds and decode_step > 0; host_seconds >= 0")

    def state(u: float) -> tuple[float, float, float, float]:
        step = loaded_step_seconds(decode_step, u * (in_flight - 1) / in_flight, mixed_step)
        think = output_tokens * step + host_seconds + step_wait_seconds(in_flight, step)  # Z' of eq. Q9
        r = interactive_response_seconds(in_flight, prefill_seconds, think)
        x = in_flight / (r + think)
        return r, step, x, x * prefill_seconds

    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(40):  # g(u) = u - X(u) D rises with u: bisection on its root (to 1e-12 of the share)
        mid = (lo + hi) / 2.0
        if mid - state(mid)[3] < 0.0:
            lo = mid
        else:
            hi = mid
    u = (lo + hi) / 2.0
    r, step, x, _ = state(u)
    wait = step_wait_seconds(in_flight, step)
    return {"ttft_seconds": host_seconds + wait + r, "device_ttft_seconds": r, "step_seconds": step,
            "step_wait_seconds": wait, "requests_per_second": x, "request_seconds": in_flight / x,
            "prefill_share": u}


# Requests that arrive together (a benchmark's closed loop of fixed-length requests, all started at once, stays in
# lockstep: those prefilled in one step finish their N tokens in one step and return together) meet the other extreme:
# each round the C prompts are prefilled together in k = ceil(C P / B) steps of B prompt tokens, T_P(C) in all (eq.
# P1 of estimate/speed.py), the j-th step's prompts getting their first token after j / k of it, then decode together:
#
#     TTFT_burst = T_P(C) (k + 1) / (2 k)        X_burst = C / (T_P(C) + (N - 1) t_d)                   (Q8)
#
# The mean TTFT of independent requests (Q6) and of a burst (Q8) bracket what a server sees: arrivals spread at
# random at one end, all together at the other (each with the server's own time, eq. Q9).


def burst_serving(in_flight: int, batch_prefill_seconds: float, steps: int, decode_step: float,
                  output_tokens: int, host_seconds: float = 0.0) -> dict[str, float]:
    """Eqs. (Q8, Q9b): mean ``ttft_seconds`` and ``requests_per_second`` of ``in_flight`` requests arriving together
    each round: their prompts prefilled in ``steps`` steps taking ``batch_prefill_seconds`` in all, then
    ``output_tokens`` - 1 decode steps of ``decode_step`` seconds (the first token comes from the prefill); with
    the server's own ``host_seconds`` (H) per request done one request after another (the j-th waits j H) and a whole
    running step before admission (Q9b), in the TTFT and in each round."""
    if (in_flight < 1 or steps < 1 or batch_prefill_seconds <= 0 or decode_step <= 0 or output_tokens < 1
            or host_seconds < 0):
        raise InputError("in_flight, steps, output_tokens >= 1; batch_prefill_seconds and decode_step > 0; "
                         "host_seconds >= 0")
    step_wait = decode_step if in_flight > 1 else 0.0  # Q9b: at most one whole running step
    round_seconds = in_flight * host_seconds + step_wait + batch_prefill_seconds + (output_tokens - 1) * decode_step
    return {"ttft_seconds": host_seconds * (in_flight + 1) / 2 + step_wait
            + batch_prefill_seconds * (steps + 1) / (2 * steps),
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
#   back, so a request arriving at a random moment waits the mean residual of a step, half of one (steps of one
#   length: the residual of a deterministic renewal, L / 2); alone (C = 1) it finds the engine idle.
#
#     TTFT_low  = H + w + R,     w = t_step / 2 (C >= 2), 0 (C = 1)                                       (Q9a)
#     TTFT_high = H (C + 1) / 2 + t_d + TTFT_burst,   round_high = C H + t_d + T_P(C) + (N - 1) t_d           (Q9b)
#
# (Q9a: independent arrivals, R of eq. Q6; H and w are time the request spends off the prefill queue, so they join
# the think time of Q6 / Q7: Z' = N t_step + H + w, and the mean request takes R + Z' = C / X. Q9b: arriving
# together, Q8's burst after at most one whole running step, and the C requests' server work done one after another
# in the server's one process (vLLM's API server is one asyncio event loop, AsyncLLM above), the j-th waiting j H:
# the upper end, as if all of H were that process's work; part of it is transit that overlaps.)


def step_wait_seconds(in_flight: int, step: float) -> float:
    """Eq. (Q9a)'s w: the mean wait of an arriving request for the step the engine is running, half a step when
    other requests keep the steps running (``in_flight`` >= 2), none when it is alone."""
    return step / 2.0 if in_flight > 1 else 0.0

"""Prefill demand at the requested load: a continuous-batching engine's TTFT and per-user rate at C requests.

A speed estimate times one prompt on an idle replica and the decode step of the C sequences; at C requests in flight,
each replaced when it finishes (the closed, saturated system llmsizer sizes for), every request's prompt takes device
time too. ``under_load`` applies formulas/serving_queue.py eqs. Q4-Q9 with the engine's scheduling
(estimate/engines.py PREFILL_SCHEDULING: whether a prefill chunk shares one forward with the decode tokens, and its
chunk budget), so the estimate's TTFT and per-user rate are the loaded ones, and warns when the prompts take a large
share of device time (PREFILL_SHARE_WARN).

What the module holds: the TTFT, per-user rate and requests/s at C requests in flight (every prompt's prefill
competing with the decode): ``formulas/serving_queue.py`` eqs. Q4-Q9 with the engine's scheduling, and the
prefill-bound warning; a burst of more requests than the engine admits passing through its slots (eq. Q14,
``burst_over_pool``, which fit's ``burst_figure`` reports beside a pool that does not hold the stated concurrency at
once and the validation's burst rows are judged by); at a request rate (open arrivals, eq. Q10: ``at_rate``,
``under_rate``, the requests in flight derived by ``rate_fixed_point``, which fit's ``request_rate`` uses too, its
refusal past the decode's capacity, ``sustained_rate``, llama.cpp's slots at the tail, ``slots_for``, and the wait for
the c sequences a pool engine admits, the replica a load-dependent server, eq. Q13: ``admission_wait``,
``closed_throughputs``, ``ADMISSION_WAIT_FLOOR``, which ``fit.admission_queued`` applies and ``fit.rate_seconds``
ranks layouts by; eq. Q12's Erlang C its upper bound); ``q5_inputs``, the engine's inputs to eqs. Q5-Q10 both loads
share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from ..errors import InputError
from ..formulas.arrival_tail import slots_for_tail
from ..formulas.serving_queue import (
    OverCapacityError,
    admission_grid,
    burst_admission_wait,
    burst_serving,
    burst_waves,
    erlang_c,
    grid_throughputs,
    load_dependent_queue,
    loaded_serving,
    open_capacity,
    open_serving,
)
from ..frozen import replace_fields
from ..numbers import CONCURRENCY
from ..result import Assumption
from ..units import format_chance, format_rate
from . import engines as ENG
from .speed import SpeedEstimate

DEFAULT_CHUNKS = {"llamacpp": ENG.LLAMACPP_N_BATCH}


# The cost of a step that carries a prefill chunk beside the decode tokens. vLLM v1 and llama.cpp's server put both
# in one forward, whose roofline would hide the decode's weight read behind the chunk's compute (eq. Q5a); the
# published vLLM sweep on an RTX 4090 (validation/serving_load.csv SL14-SL22) completes the requests/s of the
# additive cost (eq. Q5b: 6.44 / 9.73 / 11.87 requests/s measured at c 16 / 32 / 48 against Q5b's 6.44 / 10.5 / 13.4
# and Q5a's 7.3 / 13.4 / 18.6), so the step is timed additively for every engine: the chunk's prefill, then the decode
# step's own time. A mechanism chosen on the rows, no constant fitted.
MIXED_STEP_ROOFLINE = False

# Which end of the loaded TTFT's range (eq. Q9a independent arrivals .. eq. Q9b arriving together) is the expected
# figure: independent arrivals. Traffic of users with varied prompt and output lengths spreads the arrivals at random
# (each user sends when its last answer ends, at its own moment); only a closed loop of equal lengths started at once
# (a fixed-length benchmark's --ignore-eos sweep) keeps the requests in lockstep, towards arriving together, and
# such runs are expected anywhere up to the high end (validation/serving_load.csv: the kind "serving TTFT under load"
# reports the rows inside the range as well as the error of this figure).
TTFT_RULE = "independent arrivals; a closed loop of equal lengths moves towards arriving together"


class Q5Inputs(NamedTuple):
    """What eqs. Q5-Q10 take from an engine's scheduling and a speed estimate (``q5_inputs``), the one derivation
    the closed load (``under_load``) and the open one (``at_rate``) share."""
    one_forward: bool  # a prefill chunk shares one forward with the decode tokens (engines.PREFILL_SCHEDULING)
    chunk_name: str  # the engine's name for its prompt tokens per step
    source: str  # where the scheduling rule is read
    chunk: int  # prompt tokens per step
    prefill: float  # D: one prompt's idle prefill [s]
    step: float  # t_d: the decode step of sp.concurrency sequences [s] (0 without output)
    mixed_step: float | None  # eq. Q5a's step carrying a chunk (None: additive, eq. Q5b)
    host: float  # eq. Q9's H [s]
    carrying: int  # eq. Q9a's k: the steps carrying the request's own prompt that also run the others' decode
    host_note: str  # H and its stated range, said


def q5_inputs(sp: SpeedEstimate | None, engine: str, chunk_tokens: int | None = None) -> Q5Inputs | None:
    """The engine's inputs to eqs. Q5-Q10 from ``sp`` (its idle prefill and the decode step of ``sp.concurrency``
    sequences): None where ``engine`` does not batch continuously, a speed is missing or no chunk is known
    (``chunk_tokens``: vLLM max_num_batched_tokens, SGLang chunked_prefill_size, llama.cpp n_batch; None: llama.cpp's
    default)."""
    sched = ENG.PREFILL_SCHEDULING.get(engine)
    if sched is None or sp is None or sp.prefill is None or (sp.output_tokens and sp.decode is None):
        return None
    one_forward, chunk_name, source = sched
    chunk = int(chunk_tokens or DEFAULT_CHUNKS.get(engine) or 0)
    if chunk < 1:
        return None
    prefill, step = sp.prefill.seconds, (sp.decode.seconds if sp.decode is not None else 0.0)
    # a step carrying a prefill chunk: min(chunk, prompt) prompt tokens at the idle prompt's seconds per token
    mixed_step = (prefill * min(chunk, sp.prompt_tokens) / sp.prompt_tokens
                  if one_forward and MIXED_STEP_ROOFLINE else None)
    host = ENG.API_SERVER_SECONDS.get(engine, 0.0)  # eq. Q9's H
    low, high = ENG.API_SERVER_RANGE
    host_note = (f"the server's own {host * 1e3:.1f} ms per request, a queue of its own (stated range "
                 f"{low * 1e3:.0f} .. {high * 1e3:.0f} ms; {ENG.API_SERVER_SOURCE[engine]}; not in it: the server's "
                 "work per output token)" if host else
                 f"no server time per request ({engine}'s HTTP server is not measured: 0 s)")
    # the steps carrying its own prompt also run the others' decode at the additive step's cost (eq. Q9a's k)
    carrying = math.ceil(sp.prompt_tokens / chunk) if one_forward and not MIXED_STEP_ROOFLINE else 0
    return Q5Inputs(one_forward, chunk_name, source, chunk, prefill, step, mixed_step, host, carrying, host_note)


def server_assumption(q: Q5Inputs) -> tuple[Assumption, ...]:
    """The assumption stating H and its range (eqs. Q6', Q9, Q10), where the engine has one; both loads state it."""
    low, high = ENG.API_SERVER_RANGE
    return (Assumption("api_server_seconds_per_request",
                       f"{q.host * 1e3:.1f} ms ({low * 1e3:.0f} .. {high * 1e3:.0f} ms)", True,
                       q.host_note + "; formulas/serving_queue.py eqs. Q6', Q9, Q10"),) if q.host else ()


def prefill_levers(sp: SpeedEstimate, alone: bool) -> str:
    """What lowers a prefill-bound load's TTFT: shorter prompts, fewer requests per replica (not where one request is
    in flight, ``alone``) or more replicas, and, where a llama.cpp split's prefill is mostly the host weights copied
    to the GPU once per ubatch (eq. 8p, ``speed.split_prefill``), a larger --ubatch: fewer ubatches, fewer copies."""
    levers = ["shorter prompts", *([] if alone else ["fewer requests per replica"]), "more replicas"]
    split = sp.details.get("split_prefill")
    if isinstance(split, dict) and split.get("transfer_seconds", 0.0) * 2 >= split.get("seconds", float("inf")):
        levers.insert(0, f"a larger --ubatch (each of the {split['ubatches']} ubatches of {split['ubatch']} tokens "
                         f"copies the host's weights over the link: {split['transfer_seconds']:.1f} s of the "
                         f"{split['seconds']:.1f} s prefill, formulas/speed.py eq. 8p)")
    return ", ".join(levers[:-1]) + " or " + levers[-1]


def prefill_bound_warning(share: float, at: str, ttft: str, user: float, step: float, output_tokens: int,
                          idle: float | None, levers: str, closed: bool = False) -> tuple[str, ...]:
    """The warning of a load whose prompts take PREFILL_SHARE_WARN or more of device time (eq. Q7 / Q10a's u), at
    ``at`` (the load, said), ``ttft`` its TTFT said, ``levers`` what lowers it (``prefill_levers``); both loads warn
    alike. ``closed``: the closed loop at a concurrency of more than one request with output (eq. Q6), whose TTFT
    grows as the decode time per request Z falls (dR/dZ < 0 for C > 1), which the warning then says: a faster
    decode on a device with the same prefill shows a longer TTFT at the same concurrency (probe21 C4)."""
    if share < ENG.PREFILL_SHARE_WARN:
        return ()
    return (f"prefill-bound at {at}: the prompts' prefill takes {share:.0%} of device time (formulas/serving_queue.py "
            f"eqs. Q7, Q10a), so a request waits {ttft} for its first token (alone: {idle or 0.0:.2f} s)"
            + (f" and gets {format_rate(user)} tokens/s (decoding alone: {format_rate(1 / step)})" if output_tokens else "")
            + f"; {levers} lower it"
            + ("; at a fixed concurrency each finished request is replaced at once, so a faster decode returns "
               "requests sooner and more prompts queue for the prefill: on a device with the same prefill and a "
               "faster decode this TTFT is longer, with more tokens/s (eq. Q6: the TTFT grows as the decode time "
               "falls)" if closed and output_tokens else ""),)


def under_load(sp: SpeedEstimate | None, engine: str, chunk_tokens: int | None = None) -> SpeedEstimate | None:
    """``sp`` with its ``load`` (formulas/serving_queue.py eqs. Q4-Q9) where ``engine`` batches continuously
    (vllm, sglang, llamacpp) at more than one sequence (at one where the server's own time per request is not 0)
    with both a prefill and a decode time; ``chunk_tokens``:
    the engine's prompt tokens per step (``q5_inputs``). Unchanged elsewhere (transformers' static batch already
    times the batch prefill, eq. P1).

    The TTFT is the mean of requests arriving independently (eqs. Q6, Q9a: users, each sending its next request when
    its last one ends; TTFT_RULE), with the burst's (eqs. Q8, Q9b: the C requests arriving together, as a closed-loop
    benchmark of fixed lengths keeps them) as its high end, both with the server's own time per request
    (engines.API_SERVER_SECONDS) and the wait for the running step; the per-user rate and requests/s are eqs. Q5b / Q7's (the other requests'
    prefills stretch the steps)."""
    # one request alone waits for no other prompt and no running step: its TTFT is the idle prefill plus the
    # server's own time per request (eq. Q9's H), so a single request is loaded only where H is not 0, and
    # a service's TTFT does not jump by H between one request and two
    alone = sp is not None and sp.concurrency < 2 and not ENG.API_SERVER_SECONDS.get(engine)
    # a prefill-only service (output 0) is loaded too: its requests cycle through the server and the prefill alone
    q = q5_inputs(sp, engine, chunk_tokens)
    if q is None or sp is None or sp.batch_prefill or alone or sp.load is not None:
        return sp
    one_forward, chunk_name, source, chunk, prefill, step, mixed_step, host, carrying, host_note = q
    steps = math.ceil(sp.concurrency * sp.prompt_tokens / chunk)
    # eq. P1s: the C prompts of a burst in the engine's steps, each paying its fixed part and launches again
    batch = sp.prefill_batch_seconds(steps=steps)
    if not batch:
        return sp
    serial = ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0)  # eq. Q11's s
    state = loaded_serving(sp.concurrency, prefill, step, sp.output_tokens, mixed_step, host, carrying, serial)
    share = state["prefill_share"]
    burst = burst_serving(sp.concurrency, batch, steps, step, sp.output_tokens, host, (sp.prompt_tokens, chunk),
                          serial)
    load = {"ttft_seconds": state["ttft_seconds"], "ttft_burst_seconds": burst["ttft_seconds"],
            # the two arrival patterns' TTFTs, lower first (bounds, not a calibrated range: Q9b takes all of H as
            # serial work): arriving together is the higher except near saturation, where independent requests
            # queue behind all the others' prompts (Q6 -> C D - Z) and a burst's average prompt waits for half
            # of them (Q8)
            "ttft_bounds_seconds": tuple(sorted((state["ttft_seconds"], burst["ttft_seconds"]))),
            "ttft_rule": TTFT_RULE,
            "api_server_seconds": host, "api_server_residence_seconds": state["api_server_seconds"],
            "api_server_busy": state["api_server_busy"], "carry_seconds": state["carry_seconds"],
            "step_wait_seconds": state["step_wait_seconds"],
            "ttft_idle_seconds": sp.ttft_idle_seconds, "step_seconds": state["step_seconds"] or None,
            "decode_step_seconds": step or None, "requests_per_second": state["requests_per_second"],
            "requests_per_second_burst": burst["requests_per_second"], "request_seconds": state["request_seconds"],
            "output_tokens_per_second": state["requests_per_second"] * sp.output_tokens,
            "prefill_share": share, "concurrency": sp.concurrency, "chunk_tokens": chunk, "chunk_name": chunk_name,
            "prefill_steps": steps, "one_forward": one_forward,
            "step_cost": "one forward's roofline (eq. Q5a)" if mixed_step is not None else "additive (eq. Q5b)",
            "source": "formulas/serving_queue.py eqs. Q4-Q9; " + source}
    if sp.output_tokens:
        user = 1 / state["step_seconds"]
        rate = (f"{format_rate(user)} tokens/s per user ({format_rate(1 / step)} decoding alone) and "
                f"{state['requests_per_second']:.3g} requests/s (eqs. Q5b, Q7)")
    else:  # prefill only: no decode, the requests cycle through the server and the prefill (eq. Q9a at N = 0)
        user = 0.0
        rate = f"{state['requests_per_second']:.3g} requests/s (prefill only: eqs. Q6', Q7 at 0 output tokens)"
    note = Assumption("prefill_under_load", f"{share:.0%} of device time", True,
                      f"derived: {sp.concurrency} requests in flight, each replaced when it finishes: every "
                      f"{sp.prompt_tokens:,}-"
                      f"token prompt takes {prefill:.3f} s of device time. TTFT {state['ttft_seconds']:.3f} s when they "
                      f"arrive independently (eqs. Q6', Q9a: the expected figure, {TTFT_RULE}), "
                      f"{burst['ttft_seconds']:.3f} s when they arrive together (eqs. Q8, Q9b, an upper bound: their "
                      f"prompts in {steps} steps of {chunk_name} {chunk:,}), {sp.ttft_idle_seconds:.3f} s for one "
                      f"prompt's prefill alone; each with {host_note} and the wait for the running step; {rate}: the "
                      "TTFT and per-user rate shown are at this concurrency; formulas/serving_queue.py eqs. Q4-Q9; "
                      + source)
    warnings = (*sp.warnings, *prefill_bound_warning(
        share, f"concurrency {sp.concurrency}",
        f"{state['ttft_seconds']:.1f} s (arriving together: {burst['ttft_seconds']:.1f} s)", user, step,
        sp.output_tokens, sp.ttft_idle_seconds, prefill_levers(sp, sp.concurrency < 2), sp.concurrency > 1))
    server = server_assumption(q)
    return replace_fields(sp, load=load, assumptions=(*sp.assumptions, note, *server), warnings=warnings)



def burst_over_pool(sp: SpeedEstimate | None, engine: str, in_flight: int,
                    chunk_tokens: int | None = None) -> SpeedEstimate | None:
    """A closed burst of ``in_flight`` requests sent at once and not replaced, on an engine that admits only
    ``sp.concurrency`` = c of them (estimate/inference/common.py eq. R1: ``running_sequences``, the KV pool's
    sequences of the full context or the running cap; ``sp`` the speed at c): ``under_load`` at c, its TTFT and
    requests/s then those of the N requests passing through c slots (formulas/serving_queue.py eq. Q14a, the expected
    figure: each slot handed to the next waiting request as one finishes; eq. Q14b, the upper bound: waves of c in
    lockstep, each eq. Q8's round). ``sp`` unchanged where all N are admitted (``under_load`` at N is the answer) or
    no closed load is known."""
    if sp is None or in_flight <= sp.concurrency:
        return sp
    at_c = under_load(sp, engine, chunk_tokens)
    if at_c is None or at_c.load is None:
        return at_c
    c, load = sp.concurrency, at_c.load
    x = float(load["requests_per_second"])
    wait = burst_admission_wait(in_flight, c, x)  # eq. Q14a
    waves = burst_waves(in_flight, c, c / float(load["requests_per_second_burst"]))  # eq. Q14b
    ttft, ttft_waves = float(load["ttft_seconds"]) + wait, float(load["ttft_burst_seconds"]) + waves["wait_seconds"]
    burst = {**load, "ttft_seconds": ttft, "ttft_burst_seconds": ttft_waves,
             "ttft_bounds_seconds": tuple(sorted((ttft, ttft_waves))),
             "requests_per_second_burst": waves["requests_per_second"],
             "burst_requests": in_flight, "admitted": c, "admission_wait_seconds": wait,
             "waves": int(waves["waves"]), "wave_wait_seconds": waves["wait_seconds"],
             "ttft_rule": "a burst larger than the engine admits: each slot handed on as a request finishes "
                          "(eq. Q14a), waves in lockstep the upper bound (eq. Q14b)",
             "source": "formulas/serving_queue.py eqs. Q4-Q9, Q14; " + str(load["source"]).removeprefix(
                 "formulas/serving_queue.py eqs. Q4-Q9; ")}
    note = Assumption(
        "burst_over_pool", f"{in_flight} requests, {c} admitted", True,
        f"derived: {in_flight} requests sent at once, {engine} runs {c} (estimate/inference/common.py eq. R1: its "
        f"running cap, the sequences of the full context its KV pool holds) and keeps the others in its waiting "
        f"queue (vLLM: Scheduler.schedule, vllm/v1/core/sched/scheduler.py @00024d31). Each slot handed on as a "
        f"request finishes ({x:.3g} requests/s at {c} running, eq. Q7): {wait:.3g} s of waiting on average, TTFT "
        f"{ttft:.3f} s (eq. Q14a); in {waves['waves']:.0f} waves of {c} in lockstep: TTFT {ttft_waves:.3f} s, "
        f"{waves['requests_per_second']:.3g} requests/s (eq. Q14b, an upper bound without preemption: a request "
        "preempted to free blocks recomputes its prompt, device time neither counts)")
    return replace_fields(at_c, load=burst, assumptions=(*at_c.assumptions, note))


# Open arrivals (formulas/serving_queue.py eq. Q10): requests sent at a rate, whatever the server does. The requests in
# flight C are then an output (eq. Q10c, Little's law), and the decode step t_d depends on how many sequences it
# carries: C must satisfy C = f(C) = ceil(lambda x R(C)), R(C) the mean request seconds with the step timed at C
# (``rate_fixed_point``, the one search fit and the validation share). f rises with C (the step grows with the
# sequences it carries), so the iteration C <- f(C) from one request climbs to the least fixed point from below
# (Knaster-Tarski / Kleene: a monotone map's iterates from the bottom), usually in a few rounds (RATE_ROUNDS). Near
# the decode's capacity the climb slows (f's slope nears 1) and past it there is no fixed point at all: lambda exceeds
# the closed-loop throughput X(C) = C / R(C) at every C (Little's law), so the requests in flight grow without bound.
# After RATE_ROUNDS the search doubles C (to CONCURRENCY.high, past any service) until f(C) <= C and bisects down to
# the least such C (f monotone: f(C - 1) > C - 1 and f(C) <= C give f(C) = C); where no C up to the bound has
# f(C) <= C the rate is refused (RateCapacityError), the capacity named as the most C / R(C) seen.
RATE_ROUNDS = 8

# What lowers the load on each ceiling of a rate (estimate/rate_capacity.py): every refusal of a rate ends with the
# remedy of the ceiling that binds.
RATE_REMEDY = {
    "server": "lower the rate, add replicas or shorten the prompts",
    "admission": "lower the rate, add replicas or shorten the context (more KV room per replica admits more "
                 "sequences at once)",
    "decode": "lower the rate, add replicas or shorten the outputs",
    "memory": "lower the rate, add replicas or shorten the context or the outputs (each sequence in flight holds "
              "its KV cache)",
}
T = TypeVar("T")


class RateCapacityError(OverCapacityError):
    """A request rate above what the decode sustains (no fixed point of eq. Q10c): ``capacity`` [requests/s], the
    most C / R(C) over the in-flight counts tried, and the ``in_flight`` count it was seen at."""

    def __init__(self, message: str, capacity: float, in_flight: int) -> None:
        super().__init__(message, capacity)
        self.in_flight = in_flight


def rate_fixed_point(run: Callable[[int], T], in_flight: Callable[[T], float | None], rate: float,
                     served: Callable[[T], float | None] | None = None, limit: int = int(CONCURRENCY.high),
                     said: Callable[[T], str] | None = None) -> T:
    """``run(C)`` at the least C (1 .. ``limit``) with ceil(``in_flight`` of its answer) <= C (``in_flight`` None: no
    load to follow, that answer): the answer whose decode step is timed at the requests in flight it derives (eq.
    Q10c) for requests arriving at ``rate`` per second. RateCapacityError where none up to ``limit`` has one, naming
    the most ``served`` over the C tried (an answer's sustained rate at its C, ``sustained_rate``; None: C / R(C)
    at ``rate``, Little's law, R = in flight / ``rate``) and what ``in_flight`` counts (``said`` of an answer:
    ``in_flight_said`` of its engine; None: the mean in flight)."""
    tried: dict[int, tuple[T, int]] = {}  # C -> (answer, ceil(in flight))

    def at(c: int) -> tuple[T, int | None]:
        if c not in tried:
            answer = run(c)
            flight = in_flight(answer)
            if flight is None:  # no load to follow: this answer
                return answer, None
            tried[c] = (answer, max(1, math.ceil(flight)) if math.isfinite(flight) else limit + 1)
        return tried[c]

    concurrency = 1
    for _ in range(RATE_ROUNDS):  # the climb from below
        answer, nxt = at(concurrency)
        if nxt is None or nxt <= concurrency:
            return answer
        concurrency = min(nxt, limit)
        if concurrency in tried:  # the limit reached again: no fixed point below it
            break
    low, high = concurrency, None  # every iterate is at or below the least fixed point
    c = concurrency
    while c <= limit:  # doubling
        answer, nxt = at(c)
        if nxt is None:
            return answer
        if nxt <= c:
            high = c
            break
        if c == limit:
            break
        low, c = c, min(2 * c, limit)
    if high is None:
        def most(k: int) -> float:  # the rate C in flight sustain
            x = served(tried[k][0]) if served is not None else None
            return x if x is not None else rate * k / tried[k][1]  # X = C / R, R = in flight / rate (Little)
        best = max(tried, key=most)
        cap = most(best)
        seen = f"{best:,} in flight" if best < limit else "the most in flight tried"
        counted = said(tried[best][0]) if said is not None else "mean in flight"
        raise RateCapacityError(
            f"request rate {rate:g}/s is at or above the decode's capacity, about {cap:.4g}/s (the most requests/s "
            f"with its {counted} within the sequences the step is timed at, here at {seen}: lambda = "
            "C / R_lambda(C), Little's law, formulas/serving_queue.py eq. Q10c; each request in flight slows the "
            f"decode step): its queue grows without bound; {RATE_REMEDY['decode']}", cap, best)
    while high - low > 1:  # bisection to the least C with f(C) <= C
        mid = (low + high) // 2
        answer, nxt = at(mid)
        if nxt is None:
            return answer
        low, high = (low, mid) if nxt <= mid else (mid, high)
    return tried[high][0]


def at_rate(sp: SpeedEstimate | None, engine: str, rate: float, chunk_tokens: int | None = None,
            replicas: int = 1, closed: list[list[float]] | None = None) -> SpeedEstimate | None:
    """``sp`` (its prefill and the decode step of ``sp.concurrency`` sequences) with the ``load`` of requests
    arriving at ``rate`` per second at this replica, one of ``replicas`` sharing the rate typed (a Poisson process:
    formulas/serving_queue.py eq. Q10): the mean TTFT, step, requests/s (= ``rate``) and mean requests in flight
    (``in_flight``; ``concurrency``: the one the step was timed at). ``sp`` unchanged where ``engine`` does not batch
    continuously or a speed is missing (``q5_inputs``). OverCapacityError where ``rate`` reaches the server's capacity
    (eq. Q10a: no steady state, no mean to state). ``closed``: the replica's closed-load X(k) at eq. Q13's grid
    (``closed_throughputs``), carried in the load for the wait for admission (``admission_wait``)."""
    q = q5_inputs(sp, engine, chunk_tokens)
    if q is None or sp is None:
        return sp
    one_forward, chunk_name, source, chunk, prefill, step, mixed_step, host, carrying, host_note = q
    state = open_serving(rate, prefill, step, sp.output_tokens, mixed_step, host, carrying,
                         ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0))
    typed = rate * replicas
    load = {"ttft_seconds": state["ttft_seconds"], "request_rate": typed, "request_rate_per_replica": rate,
            "replicas": replicas, "in_flight": state["in_flight"],
            "concurrency": sp.concurrency, "api_server_seconds": host,
            "api_server_residence_seconds": state["api_server_seconds"], "api_server_busy": state["api_server_busy"],
            "carry_seconds": state["carry_seconds"], "step_wait_seconds": state["step_wait_seconds"],
            "decoding_probability": state["decoding_probability"], "ttft_idle_seconds": sp.ttft_idle_seconds,
            "step_seconds": state["step_seconds"] or None, "decode_step_seconds": step or None,
            "requests_per_second": rate, "request_seconds": state["request_seconds"],
            "output_tokens_per_second": rate * sp.output_tokens, "prefill_share": state["prefill_share"],
            "chunk_tokens": chunk, "chunk_name": chunk_name, "one_forward": one_forward,
            "step_cost": "one forward's roofline (eq. Q5a)" if mixed_step is not None else "additive (eq. Q5b)",
            "ttft_rule": "open arrivals at the request rate (Poisson, eq. Q10)",
            "source": "formulas/serving_queue.py eqs. Q5, Q10; " + source,
            **({"closed_throughputs": closed} if closed else {})}
    note, warned = rate_notes(sp, load, host_note)
    return replace_fields(sp, load=load, assumptions=(*sp.assumptions, note, *server_assumption(q)),
                          warnings=(*sp.warnings, *warned))


def rate_notes(sp: SpeedEstimate, load: dict[str, Any], host_note: str) -> tuple[Assumption, tuple[str, ...]]:
    """The ``request_rate`` assumption and the prefill-bound warning of the open ``load`` on ``sp`` (``at_rate``),
    said from that load: its TTFT and requests in flight, the wait for admission included where ``load`` carries
    it (``admission_wait``: the one answer, composed once)."""
    replicas = int(load.get("replicas", 1))
    said = rate_said(float(load["request_rate"]), replicas)
    queued = "admission_wait_seconds" in load
    note = Assumption(
        "request_rate", said, False,
        f"requests arrive at {said} at random (a Poisson process): {load['in_flight']:.1f} in flight on average"
        f"{' per replica' if replicas > 1 else ''} (Little's law"
        + (f"; {load['waiting']:.1f} of them waiting for admission" if queued else "")
        + f"), the decode step timed at {sp.concurrency}; the prompts take {load['prefill_share']:.0%} of device "
        f"time; TTFT {load['ttft_seconds']:.3f} s ({sp.ttft_idle_seconds:.3f} s for one prompt's prefill alone"
        + (f"; {load['admission_wait_seconds']:.3g} s of it the wait for admission, eq. Q13" if queued else "")
        + f"), with {host_note}; open network of " + str(load["source"]))
    step = load.get("step_seconds")
    user = 1 / step if sp.output_tokens and step else 0.0
    warned = prefill_bound_warning(
        float(load["prefill_share"]), said, f"{load['ttft_seconds']:.1f} s", user,
        float(load.get("decode_step_seconds") or 0.0), sp.output_tokens, sp.ttft_idle_seconds,
        prefill_levers(sp, False))
    return note, warned


# The slots a rate needs where the engine's slots are sized from the concurrency llmsizer passes it (llama.cpp's
# server: -np sequences, each its share of the KV cache; vLLM's and SGLang's pools are sized by memory, their admission
# checked apart, fit.admission_refusal): at ceil(mean in flight) an arrival finds every slot busy and waits about half
# the time (Poisson of mean 2.7 in flight: P(N >= 3) = 51 %), a wait eq. Q10 does not count. The slots are sized so
# that at most 1 - SLOT_TAIL of arrivals find none free (formulas/arrival_tail.py eq. T1: the M/G/inf occupancy,
# Poisson of the mean in flight); a policy default, not fitted. The decode step is then timed with every slot busy,
# an upper bound of the mean step.
SLOT_TAIL = 0.99
SLOTS_FROM_CONCURRENCY = ("llamacpp",)


def in_flight_said(engine: str) -> str:
    """The name of the statistic of the requests in flight ``slots_for`` sizes and times ``engine``'s load at: the
    one home of that name, which every refusal and ceiling of a rate says (estimate/rate_capacity.py, fit.py)."""
    if engine in SLOTS_FROM_CONCURRENCY:
        return f"slots (the {SLOT_TAIL:.0%} tail of the requests in flight, formulas/arrival_tail.py eq. T1)"
    return "mean in flight"


def slots_for(engine: str, mean_in_flight: float) -> float:
    """The sequences per replica a rate's load is sized and timed at: the mean in flight (eq. Q10c), or where
    ``engine``'s slots are sized from it (SLOTS_FROM_CONCURRENCY), the slots of eq. T1 at SLOT_TAIL."""
    if engine in SLOTS_FROM_CONCURRENCY and math.isfinite(mean_in_flight) and mean_in_flight <= CONCURRENCY.high:
        return float(slots_for_tail(mean_in_flight, SLOT_TAIL))
    return mean_in_flight


# The wait for admission (formulas/serving_queue.py eq. Q13): a pool engine (vLLM, SGLang) runs at most the c
# sequences it admits (eq. R1's bounds: its running cap, its pool's room); a request that finds c running waits in its
# queue, which eq. Q10 (every request in flight running) does not count. The replica is a load-dependent server (its
# flow-equivalent server, eq. Q13): with k present it completes X(min(k, c)) requests/s, X(k) = k / T(k) the closed
# load's completions with k running, each replaced as it finishes (``under_load`` at exactly k, eq. Q7: fit.py ``layout_grid``), so a replica running
# fewer than c serves each at its own, shorter time per request (not eq. Q12's T(c) for every slot, which over-states
# the wait: Llama-3.1-8B on an H100 at 3 requests/s, 35 running of 51, waited 3.0 s by it). The mean wait W_q is added
# to the open load's TTFT and time per request, and lambda W_q to its mean in flight (Little's law); the open load is
# the one at min(C, c) running (C: eq. Q10c's fixed point, as if all ran). No steady state where lambda >= X(c).
#
# The wait is counted wherever it can matter, not only past the mean (near c most arrivals wait; counting it only
# where the mean passes c would make the TTFT jump there). It is left out where eq. Q13b falls below
# ADMISSION_WAIT_FLOOR (a policy threshold, not fitted: one arrival in 10,000 waits). Eq. Q12's M/M/c at T(c) bounds
# eq. Q13 from above where T(k) <= T(c) (every departure rate at least M/M/c's: the chain is stochastically smaller,
# Kleinrock 1975 vol. 1 sec. 3.1), so where even it is below the floor the chain is not summed.
ADMISSION_WAIT_FLOOR = 1e-4


def closed_throughputs(closed_at: Callable[[int], dict[str, Any] | None], servers: int) -> list[list[float]] | None:
    """Eq. Q13's X(k) for ``servers`` c at formulas/serving_queue.py ``admission_grid``: [[k, X(k)], ...], X(k) =
    k / the time per request of ``closed_at(k)`` (the closed load with k running per replica, eq. Q7). None where a
    closed load is missing."""
    samples = []
    for k in admission_grid(servers):
        load = closed_at(k)
        if load is None or not float(load["request_seconds"]) > 0:
            return None
        samples.append([k, k / float(load["request_seconds"])])
    return samples


def admission_queue(closed: list[list[float]], rate: float) -> tuple[int, float, list[float], dict[str, float]] | None:
    """Eq. Q13 at ``rate`` per second per replica on a replica's X(k) ``closed`` (``closed_throughputs``: [[k, X(k)],
    ...] at ``admission_grid(c)``): c, T(c) = c / X(c), X(1) .. X(c) (``grid_throughputs``) and the queue
    (``load_dependent_queue``); None where the chance of waiting is below ADMISSION_WAIT_FLOOR (eq. Q12's bound
    first, then eq. Q13's own). OverCapacityError (capacity X(c)) where ``rate`` reaches X(c). It reads ``closed``
    and ``rate`` only: ``admission_wait``'s refusal of a rate is this one's (``admission_over_capacity``)."""
    samples = {int(k): float(x) for k, x in closed}
    c = max(samples)
    service = c / samples[c]  # T(c) = c / X(c) (eq. Q7)
    if rate * service < c and erlang_c(c, rate * service) < ADMISSION_WAIT_FLOOR:  # eq. Q12: an upper bound
        return None
    xs = grid_throughputs(samples, c)
    queue = load_dependent_queue(rate, xs)  # eq. Q13 (OverCapacityError at rate >= X(c))
    if queue["wait_probability"] < ADMISSION_WAIT_FLOOR:
        return None
    return c, service, xs, queue


def admission_over_capacity(closed: list[list[float]], rate: float) -> OverCapacityError | None:
    """What ``admission_queue`` raises where ``rate`` reaches X(c) of ``closed`` (its refusal alone: the wait is not
    summed), None where it does not refuse. Below X(c) it cannot (X(c) is ``load_dependent_queue``'s capacity:
    ``grid_throughputs`` keeps the sample at c last); at or above it, ``admission_queue`` itself decides."""
    samples = {int(k): float(x) for k, x in closed}
    if rate < samples[max(samples)]:
        return None
    try:
        admission_queue(closed, rate)
    except OverCapacityError as e:
        return e
    except InputError:  # (a grid eq. Q13 cannot read: no refusal of the rate)
        return None
    return None


def admission_wait(sp: SpeedEstimate | None, engine: str, rate: float) -> SpeedEstimate | None:
    """``sp`` (the open load of ``at_rate`` at ``rate`` per second per replica, timed at min(C, c) running, its
    ``closed_throughputs`` the X(k) of eq. Q13 for its c = ``admitted`` per replica) with the wait for admission of
    eq. Q13 added, the X(k) between samples on straight lines (``grid_throughputs``); ``sp`` unchanged where the
    chance of waiting is below ADMISSION_WAIT_FLOOR. None without a load or X; OverCapacityError (capacity X(c))
    where ``rate`` reaches it."""
    if sp is None or not sp.load or not sp.load.get("closed_throughputs"):
        return None
    counted = admission_queue(sp.load["closed_throughputs"], rate)
    if counted is None:
        return sp
    c, service, xs, queue = counted
    wait = queue["wait_seconds"]
    load = {**sp.load, "ttft_seconds": sp.load["ttft_seconds"] + wait,
            "request_seconds": sp.load["request_seconds"] + wait,
            "in_flight": sp.load["in_flight"] + queue["waiting"], "admitted": c, "service_seconds": service,
            "admission_wait_seconds": wait, "admission_wait_probability": queue["wait_probability"],
            "waiting": queue["waiting"],
            "ttft_rule": "open arrivals at the request rate (Poisson, eq. Q10) and the wait for c admitted slots "
                         "(a load-dependent server, eq. Q13)",
            "source": "formulas/serving_queue.py eqs. Q5, Q10, Q13; " + str(sp.load["source"]).removeprefix(
                "formulas/serving_queue.py eqs. Q5, Q10; ")}
    several = int(sp.load.get("replicas", 1)) > 1
    said = rate_said(float(sp.load["request_rate"]), int(sp.load.get("replicas", 1)))
    admit = Assumption(
        "admission_wait", f"{wait:.3g} s", False,
        f"{engine} admits {c} requests at once{' per replica' if several else ''}; the others wait in its queue "
        f"(vLLM: Scheduler.waiting, vllm/v1/core/sched/scheduler.py:158 @00024d31). Modelled as a load-dependent "
        f"server (formulas/serving_queue.py eq. Q13, the flow-equivalent server: Poisson arrivals; with k present "
        f"it completes the closed load's X(min(k, {c})) requests/s, eq. Q7, read at k = "
        f"{', '.join(str(k) for k in admission_grid(c))} and on straight lines between: X(1) = {xs[0]:.3g}/s, "
        f"X({c}) = {xs[-1]:.4g}/s): at {said} a request waits with probability "
        f"{format_chance(queue['wait_probability'])}, {wait:.3g} s on average, in its TTFT ({load['ttft_seconds']:.3f} s); "
        f"{queue['waiting']:.2g} waiting on average, in the {load['in_flight']:.1f} in flight (Little's law); "
        f"at {xs[-1]:.4g} requests/s{' per replica' if several else ''} or more the queue grows without bound")
    prefix = f"prefill-bound at {said}:"
    kept = replace_fields(sp, assumptions=tuple(a for a in sp.assumptions if a.name != "request_rate"),
                          warnings=tuple(w for w in sp.warnings if not w.startswith(prefix)))
    q = q5_inputs(sp, engine, int(sp.load["chunk_tokens"]))
    note, warned = rate_notes(kept, load, q.host_note if q is not None else "no API server time")
    return replace_fields(kept, load=load, assumptions=(*kept.assumptions, note, admit),
                          warnings=(*kept.warnings, *warned))


RATE_BISECTIONS = 60  # halvings of (0, eq. Q10a's bound): past double precision


def sustained_rate(sp: SpeedEstimate | None, engine: str, sized: bool = False) -> float | None:
    """The largest request rate lambda whose mean in flight (eq. Q10c) stays within the ``sp.concurrency``
    sequences ``sp``'s decode step is timed at: lambda R_lambda(C) = C, R_lambda the mean request seconds of eq. Q10
    (lambda R_lambda rises with lambda, so bisection on (0, eq. Q10a's bound)); ``sp`` carrying an open load
    (``at_rate``: its chunk). The decode's capacity is its sup over C. ``sized``: the slots a rate's load is sized
    at (``slots_for``: eq. T1's tail where the engine sizes its slots from it), not the mean, stay within C, as a
    fit at that rate sizes its memory (rate_capacity.py's memory ceiling). None without one."""
    q = q5_inputs(sp, engine, int(sp.load["chunk_tokens"])) if sp is not None and sp.load else None
    if q is None or sp is None:
        return None
    serial = ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0)  # eq. Q11's s
    low, high = 0.0, server_capacity(sp, engine, q.chunk) or 0.0
    for _ in range(RATE_BISECTIONS):
        mid = (low + high) / 2
        if mid <= low or mid >= high:
            break
        state = open_serving(mid, q.prefill, q.step, sp.output_tokens, q.mixed_step, q.host, q.carrying, serial)
        held = slots_for(engine, state["in_flight"]) if sized else state["in_flight"]
        low, high = (mid, high) if held <= sp.concurrency else (low, mid)
    return low


def server_capacity(sp: SpeedEstimate | None, engine: str, chunk_tokens: int | None = None) -> float | None:
    """Eq. Q10a's bound with eq. Q11 for one replica [requests/s]: 1 / max(D, s H), D ``sp``'s idle prefill, H the
    engine's server time per request and s its serial share; it does not depend on the rate or the sequences in
    flight. None where ``engine`` does not batch continuously or a speed is missing (``q5_inputs``)."""
    q = q5_inputs(sp, engine, chunk_tokens)
    if q is None:
        return None
    return open_capacity(q.prefill, q.host, ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0))


def rate_said(rate: float, replicas: int = 1) -> str:
    """A request rate as typed, with each replica's share where there are several: '60 requests/s (30 per
    replica)'."""
    return f"{rate:g} requests/s" + (f" ({rate / replicas:g} per replica)" if replicas > 1 else "")


def under_rate(speed_at: Callable[[int], SpeedEstimate | None], engine: str, rate: float,
               chunk_tokens: int | None = None) -> SpeedEstimate | None:
    """``at_rate`` on ``speed_at(C)`` (the idle speed at C sequences) at the requests in flight C it derives
    (``rate_fixed_point``). None where ``engine`` does not batch continuously or a speed is missing."""
    def run(c: int) -> SpeedEstimate | None:
        sp = speed_at(c)
        out = at_rate(sp, engine, rate, chunk_tokens)
        return out if out is not None and out.load is not None else None

    return rate_fixed_point(run, lambda s: s.load["in_flight"] if s is not None and s.load else None, rate,
                            lambda s: sustained_rate(s, engine))

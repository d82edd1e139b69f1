"""Prefill demand at the requested load: a continuous-batching engine's TTFT and per-user rate at C requests.

A speed estimate times one prompt on an idle replica and the decode step of the C sequences; at C requests in flight,
each replaced when it finishes (the closed, saturated system llmsizer sizes for), every request's prompt takes device
time too. ``under_load`` applies formulas/serving_queue.py eqs. Q4-Q9 with the engine's scheduling
(estimate/engines.py PREFILL_SCHEDULING: whether a prefill chunk shares one forward with the decode tokens, and its
chunk budget), so the estimate's TTFT and per-user rate are the loaded ones, and warns when the prompts take a large
share of device time (PREFILL_SHARE_WARN).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from ..formulas.serving_queue import burst_serving, loaded_serving, open_serving
from ..frozen import replace_fields
from ..result import Assumption
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


def under_load(sp: SpeedEstimate | None, engine: str, chunk_tokens: int | None = None) -> SpeedEstimate | None:
    """``sp`` with its ``load`` (formulas/serving_queue.py eqs. Q4-Q9) where ``engine`` batches continuously
    (vllm, sglang, llamacpp) at more than one sequence (at one where the server's own time per request is not 0)
    with both a prefill and a decode time; ``chunk_tokens``:
    the engine's prompt tokens per step (vLLM max_num_batched_tokens, SGLang chunked_prefill_size, llama.cpp
    n_batch; None: llama.cpp's default). Unchanged elsewhere (transformers' static batch already times the batch
    prefill, eq. P1).

    The TTFT is the mean of requests arriving independently (eqs. Q6, Q9a: users, each sending its next request when
    its last one ends; TTFT_RULE), with the burst's (eqs. Q8, Q9b: the C requests arriving together, as a closed-loop
    benchmark of fixed lengths keeps them) as its high end, both with the server's own time per request
    (engines.API_SERVER_SECONDS) and the wait for the running step; the per-user rate and requests/s are eqs. Q5b / Q7's (the other requests'
    prefills stretch the steps)."""
    sched = ENG.PREFILL_SCHEDULING.get(engine)
    # one request alone waits for no other prompt and no running step: its TTFT is the idle prefill plus the
    # server's own time per request (eq. Q9's H), so a single request is loaded only where H is not 0, and
    # a service's TTFT does not jump by H between one request and two
    alone = sp is not None and sp.concurrency < 2 and not ENG.API_SERVER_SECONDS.get(engine)
    # a prefill-only service (output 0) is loaded too: its requests cycle through the server and the prefill alone
    if (sp is None or sched is None or sp.batch_prefill or alone or sp.prefill is None
            or (sp.output_tokens and sp.decode is None) or sp.load is not None):
        return sp
    one_forward, chunk_name, source = sched
    chunk = int(chunk_tokens or DEFAULT_CHUNKS.get(engine) or 0)
    batch = sp.prefill_batch_seconds()  # eq. P1 at concurrency: the C prompts of a burst
    if chunk < 1 or not batch:
        return sp
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
    serial = ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0)  # eq. Q11's s
    state = loaded_serving(sp.concurrency, prefill, step, sp.output_tokens, mixed_step, host, carrying, serial)
    share = state["prefill_share"]
    steps = math.ceil(sp.concurrency * sp.prompt_tokens / chunk)
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
        rate = (f"{user:.1f} tokens/s per user ({1 / step:.1f} decoding alone) and "
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
    warnings = sp.warnings
    if share >= ENG.PREFILL_SHARE_WARN:
        warnings = (*warnings, f"prefill-bound at concurrency {sp.concurrency}: the prompts' prefill takes "
                    f"{share:.0%} of device time (formulas/serving_queue.py eq. Q7), so a request waits "
                    f"{state['ttft_seconds']:.1f} s for its first token (arriving together: {burst['ttft_seconds']:.1f} "
                    f"s; alone: {sp.ttft_idle_seconds:.2f} s)"
                    + (f" and gets {user:.1f} tokens/s (decoding alone: {1 / step:.1f})" if sp.output_tokens else "")
                    + "; shorter prompts, fewer requests per replica or more replicas lower it")
    server = (Assumption("api_server_seconds_per_request", f"{host * 1e3:.1f} ms ({low * 1e3:.0f} .. {high * 1e3:.0f} ms)",
                         True, host_note + "; formulas/serving_queue.py eqs. Q6', Q9"),) if host else ()
    return replace_fields(sp, load=load, assumptions=(*sp.assumptions, note, *server), warnings=warnings)


# Open arrivals (formulas/serving_queue.py eq. Q10): requests sent at a rate, whatever the server does. The requests in
# flight C are then an output (eq. Q10c, Little's law), and the decode step t_d depends on how many sequences it
# carries: the speed is re-estimated at C = ceil(lambda x request seconds) until C repeats (``rate_fixed_point``, the
# one iteration fit and the validation share; the step rises with C, so it climbs from one request and stops within
# a few rounds). RATE_ROUNDS bounds it.
RATE_ROUNDS = 32
T = TypeVar("T")


def rate_fixed_point(run: Callable[[int], T], in_flight: Callable[[T], float | None]) -> T:
    """``run(C)`` at C = 1, then at ceil(``in_flight`` of the last answer) until C repeats (or ``in_flight`` is None:
    no load to follow): the answer whose decode step is timed at the requests in flight it derives (eq. Q10c)."""
    seen: set[int] = set()
    concurrency = 1
    for _ in range(RATE_ROUNDS):
        answer = run(concurrency)
        seen.add(concurrency)
        flight = in_flight(answer)
        if flight is None:
            break
        concurrency = max(1, math.ceil(flight))
        if concurrency in seen:
            break
    return answer


def at_rate(sp: SpeedEstimate | None, engine: str, rate: float, chunk_tokens: int | None = None
            ) -> SpeedEstimate | None:
    """``sp`` (its prefill and the decode step of ``sp.concurrency`` sequences) with the ``load`` of requests
    arriving at ``rate`` per second (a Poisson process: formulas/serving_queue.py eq. Q10): the mean TTFT, step,
    requests/s (= ``rate``) and mean requests in flight (``in_flight``; ``concurrency``: the one the step was timed
    at). ``sp`` unchanged where ``engine`` does not batch continuously or a speed is missing. InputError where
    ``rate`` reaches the server's capacity (eq. Q10a: no steady state, no mean to state)."""
    sched = ENG.PREFILL_SCHEDULING.get(engine)
    if sched is None or sp is None or sp.prefill is None or (sp.output_tokens and sp.decode is None):
        return sp
    one_forward, chunk_name, source = sched
    chunk = int(chunk_tokens or DEFAULT_CHUNKS.get(engine) or 0)
    if chunk < 1:
        return sp
    host = ENG.API_SERVER_SECONDS.get(engine, 0.0)
    prefill, step = sp.prefill.seconds, (sp.decode.seconds if sp.decode is not None else 0.0)
    mixed_step = (prefill * min(chunk, sp.prompt_tokens) / sp.prompt_tokens
                  if one_forward and MIXED_STEP_ROOFLINE else None)
    carrying = math.ceil(sp.prompt_tokens / chunk) if one_forward and not MIXED_STEP_ROOFLINE else 0
    state = open_serving(rate, prefill, step, sp.output_tokens, mixed_step, host, carrying,
                         ENG.API_SERVER_SERIAL_SHARE.get(engine, 1.0))
    load = {"ttft_seconds": state["ttft_seconds"], "request_rate": rate, "in_flight": state["in_flight"],
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
            "source": "formulas/serving_queue.py eqs. Q5, Q10; " + source}
    note = Assumption("request_rate", f"{rate:g} requests/s", False,
                      f"requests arrive at {rate:g}/s at random (a Poisson process): {state['in_flight']:.1f} in "
                      f"flight on average (Little's law), the decode step timed at {sp.concurrency}; the prompts take "
                      f"{state['prefill_share']:.0%} of device time; TTFT {state['ttft_seconds']:.3f} s "
                      f"({sp.ttft_idle_seconds:.3f} s for one prompt's prefill alone), open network of "
                      "formulas/serving_queue.py eq. Q10; " + source)
    return replace_fields(sp, load=load, assumptions=(*sp.assumptions, note))


def under_rate(speed_at: Callable[[int], SpeedEstimate | None], engine: str, rate: float,
               chunk_tokens: int | None = None) -> SpeedEstimate | None:
    """``at_rate`` on ``speed_at(C)`` (the idle speed at C sequences) at the requests in flight C it derives
    (``rate_fixed_point``). None where ``engine`` does not batch continuously or a speed is missing."""
    def run(c: int) -> SpeedEstimate | None:
        sp = speed_at(c)
        out = at_rate(sp, engine, rate, chunk_tokens)
        return out if out is not None and out.load is not None else None

    return rate_fixed_point(run, lambda s: s.load["in_flight"] if s is not None and s.load else None)

"""What a serving deployment carries: the one home of a request-rate refusal's capacity and remedy.

A rate is refused where no steady state exists (estimate/fit.py ``fit`` at ``request_rate``), by whichever ceiling
the search meets first at that rate. The capacity stated is the deployment's, independent of the rate asked: the
least of its ceilings, each per replica times the replicas (formulas/serving_queue.py):

- ``server``: eq. Q10a with eq. Q11, 1 / max(D, s H): the prompts' prefill and the API server's serial time
  (``serving_load.server_capacity``);
- ``admission``: eq. Q12's c / T(c), the c sequences a pool engine (vLLM, SGLang) admits per replica (eq. R1's
  bounds: its running cap, its KV pool's room), each held the closed load's time per request with c running (eq. Q7:
  the fit at c in flight, its ``speed.load['requests_per_second']`` = c / T(c));
- ``decode``: eq. Q10c, the most requests/s whose slots stay within the sequences the decode runs
  (``serving_load.sustained_rate`` ``sized``; ``_decode_ceiling``'s search for an engine with no admission bound,
  llama.cpp, where it can bind, not said where its sup lies past the slots that fit); where one admits c, the
  requests past c wait (eq. Q12) and the step stays timed at c, so c / T(c) is that engine's decode ceiling;
- ``memory``: for an engine with no admission bound (llama.cpp gives every sequence in flight its slot), eq. Q10c's
  rate at the most slots per replica whose memory fits (``_decode_ceiling``): a rate above it needs more slots than
  the device holds, refused as a rate (fit.py ``memory_refusal``), not with the plain memory verdict.

The one rule for an engine that sizes its slots from the requests in flight (serving_load.SLOTS_FROM_CONCURRENCY,
llama.cpp): every ceiling is computed on the statistic fit sizes its memory and times its step at, the slots of
eq. T1 at serving_load.SLOT_TAIL (the 99 % tail of the Poisson number in flight), never on the mean: a rate is
carried exactly where fit's fixed point exists and fits (``slots_for``), so the decode ceiling is the sup over C
of the rate whose slots stay within C, the memory ceiling that rate at the most C that fits, and decode >= memory
(so the decode's is said only where its peak comes before the slots outgrow the memory).
An engine whose slots are the mean in flight (vLLM, SGLang) is unchanged (``slots_for`` returns the mean).

The remedy names the ceiling that binds (RATE_REMEDY). A deployment whose pool holds no sequence does not start:
that is said first, as the memory verdict's reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import FieldError
from ..numbers import CONCURRENCY
from .serving_load import RATE_REMEDY, SLOTS_FROM_CONCURRENCY, in_flight_said, server_capacity, sustained_rate

if TYPE_CHECKING:
    from .fit import FitResult

# (the decode's as said for an engine whose statistic is the mean in flight; ``ceiling_said`` says each engine's)
RATE_CEILING_SAID = {
    "server": "the prompts' prefill and the API server (eq. Q10a: 1 / max(prefill, the server's serial time))",
    "admission": "the sequences the engine admits at once (eq. Q12: c / T(c))",
    "decode": "the decode (eq. Q10c: the most requests/s with its mean in flight within the sequences it runs)",
    "memory": "the memory (eq. Q10c's rate at the most sequences in flight whose KV cache fits on the device)",
}


def ceiling_said(kind: str, engine: str) -> str:
    """RATE_CEILING_SAID[kind], where ``engine`` sizes its slots from the requests in flight (llama.cpp) the decode's
    and memory's ceilings said on its slots (serving_load.in_flight_said: the one name of the statistic its fit sizes
    and refuses at)."""
    said = in_flight_said(engine)
    if kind == "decode":
        return f"the decode (eq. Q10c: the most requests/s with its {said} within the sequences it runs)"
    if engine not in SLOTS_FROM_CONCURRENCY or kind != "memory":
        return RATE_CEILING_SAID[kind]
    return (f"the memory (eq. Q10c's rate at the most slots whose KV cache fits on the device; its {said}, as its "
            "memory is sized)")


class Refusal(Protocol):
    """What a rate refusal carries (estimate/fit.py RateOverloadError)."""
    detail: str
    capacity: float | None
    in_flight: int
    kind: str


def ceilings(closed: Callable[[int, bool], FitResult],
             refusal: Refusal) -> tuple[dict[str, float], FitResult, int | None, int | None]:
    """The deployment's ceilings [requests/s, all replicas] by kind, a memory fit of the layout (``closed(c, speed)``:
    the fit at c in flight in all, no rate), the sequences admitted per replica (None: no admission bound; 0: its
    pool holds none) and, for an engine with no admission bound, the slots per replica its capacity is reached at
    (``_decode_ceiling``; None: not found). ``refusal``'s own capacity is one of them; the others are computed only where they can be lower:
    c / T(c) is never above the server's ceiling (eq. Q7: each request holds the device its prefill D and the server
    its serial s H, so X(c) <= 1 / max(D, s H)), and a rate the decode refused is below the server's (the search's
    first fit, at one request in flight, would have met eq. Q10a first). So an admission refusal needs no other fit, a
    server or decode refusal the fit at the c admitted (c / T(c)), and every refusal of an engine with no admission
    bound (server, decode, memory) the decode's search (``_decode_ceiling``: its server's, decode's and memory's
    ceilings on its slots, the same whichever refused the rate and whoever asks: fit, plan, recommend)."""
    first = closed(max(1, refusal.in_flight) if refusal.kind == "admission" else 1, False)
    n = first.ranks  # (each engine rank timed alone at its share: replicas x data-parallel ranks)
    found: dict[str, float] = {}
    if refusal.capacity is not None:
        found[refusal.kind] = refusal.capacity

    def add(kind: str, cap: float | None) -> None:
        if cap is not None and cap > 0:
            found[kind] = min(found.get(kind, cap), cap)

    d = first.estimate.details if first.estimate is not None else {}
    bounds = [int(b) for b in (d.get("running_cap"), d.get("max_concurrency_at_context")) if b is not None]
    admitted = min(bounds) if bounds else None
    slots: int | None = None
    if refusal.kind == "admission" or admitted == 0:
        return found, first, admitted, slots
    if admitted is not None:
        full = closed(admitted * n, True)
        load = full.speed.load if full.speed is not None else None
        if load and load.get("requests_per_second"):
            add("admission", float(load["requests_per_second"]) * n)
    else:  # no admission bound (llama.cpp): the three ceilings on its slots, the same at every rate refused
        kinds = ("server", "decode", "memory")
        *caps, slots = _decode_ceiling(closed, n)
        searched = {k: cap for k, cap in zip(kinds, caps, strict=True) if cap and cap > 0}
        if searched:  # (a decode refusal's own capacity: one C of the sup searched, or past the memory's C)
            found = searched
    return found, first, admitted, slots


# Sequences per replica the decode ceiling of an engine with no admission bound is searched over: doubling from one
# while the sustained rate still rises (its sup: the step's cost per sequence catches up with the sequences added), up
# to numbers.CONCURRENCY.high or the first C whose slots do not fit. Below that C the decode's ceiling can bind, so it
# is searched to its peak (the former stop at a gain under 1e-3 per doubling left it where the rate still crept
# towards eq. Q10a's bound: Qwen2.5-0.5B on an H100, 1k context, 44.44/s stated where fit carried 44.48/s); past
# it the memory's ceiling binds (the decode's sup is at least that rate, one C of it) and the decode's is not said
# (stopped by that gain it was a lower bound: Llama-3.1-8B on an H100, 4k context, 2.41/s stated where fit's fixed
# point exists at 2.416/s; searched on, its fits at millions of slots take seconds).


def _decode_ceiling(closed: Callable[[int, bool], FitResult],
                    n: int) -> tuple[float | None, float | None, float | None, int | None]:
    """The server's, the decode's and the memory's ceilings [requests/s, all ``n`` replicas] of an engine with no
    admission bound and the slots per replica its capacity is reached at (the largest C that fits where the memory
    binds, else the C of the decode's peak; None where neither was found), each on the slots its fit sizes
    (``sustained_rate`` ``sized``: serving_load.slots_for, the one rule). Server: eq. Q10a (``server_capacity``, the same at every C). Decode: the most requests/s whose slots stay
    within C (eq. Q10c at the fit at C per replica), over C doubling from 1 while it rises; None where a C on that
    way does not fit (its sup is then at least the memory's, which binds). Memory: at the first C on that way that
    does not fit (each slot holds its KV stream), the rate whose slots stay within the largest C that fits, bisected
    between the last C that fit and it (None where every C tried fits, or none does). None without a load."""
    server: list[float] = []

    def rate(c: int, sized: bool = True) -> tuple[bool, float | None]:
        r = closed(c * n, True)
        load = r.speed.load if r.speed is not None else None
        if not load or "chunk_tokens" not in load:
            return r.fits, None
        if not server:
            server.append(server_capacity(r.speed, r.engine, int(load["chunk_tokens"])) or 0.0)
        return r.fits, sustained_rate(r.speed, r.engine, sized)

    best: float | None = None
    memory: float | None = None
    c, fitting, peak = 1, 0, None
    while c <= CONCURRENCY.high:
        fits, x = rate(c)
        if not fits and fitting == c // 2:  # the first C that does not fit
            low, high = fitting, c
            while high - low > 1 and low > 0:  # the largest C that fits, between the last that did and c
                mid = (low + high) // 2
                low, high = (mid, high) if rate(mid)[0] else (low, mid)
            memory = rate(low, True)[1] if low > 0 else None  # the rate whose slots (as a fit sizes them) fit
            peak = low if memory is not None else None
            break  # the decode's sup is at least this rate (one C of it): the memory binds, the decode is not said
        if x is None and c > 1:
            break
        if x is not None:
            if best is not None and x <= best:  # past its peak
                break
            best, peak = x, c
        fitting = c if fits else fitting
        c *= 2
    return (server[0] * n if server and server[0] > 0 else None), \
        (None if best is None or memory is not None else best * n), (None if memory is None else memory * n), \
        (peak if memory is not None or best is not None else None)


def over_capacity(rate: float, refusal: Refusal, closed: Callable[[int, bool], FitResult]) -> FitResult:
    """The answer to a rate the deployment does not carry: the memory fit (``closed(c, False)``) not fitting, its
    first reason the rate, the capacity the least ceiling (``ceilings``) and the remedy of the one that binds; where
    the pool holds no sequence, the memory's reasons first (it does not start). No speed (no steady state)."""
    def sized(c: int, timed: bool) -> FitResult:  # a ceiling's fit within the requests in flight llmsizer sizes
        if c > CONCURRENCY.high:  # (admitted x replicas past it: a refusal of the rate, not of a concurrency given)
            why = refusal.detail.split("; lower the rate")[0]
            raise FieldError("request_rate", f"request_rate: {rate:g} requests/s is not carried ({why}), and this "
                             f"deployment's ceilings would be sized at {c:,} requests in flight in all, past the "
                             f"{CONCURRENCY.high:,} llmsizer sizes: lower request_rate, or size fewer devices")
        return closed(c, timed)

    found, one, admitted, slots = ceilings(sized, refusal)
    n = one.ranks  # (each engine rank timed alone at its share: replicas x data-parallel ranks)
    copies, unit = one.replicas, "data-parallel rank" if one.data_parallel > 1 else "replica"
    layout = f"{one.layout_text} x {copies} replica{'s' if copies != 1 else ''}"  # (review41 nit: PP named)
    if admitted == 0 or not found:
        shown = closed(n, False)
        why = (f"does not carry the rate: at {rate:g} requests/s this deployment ({layout}) serves no request: "
               + (f"{one.engine} admits none at once (its KV pool holds no sequence: it does not start, above); "
                  "fix the memory first" if admitted == 0 else f"{refusal.detail}"))
        details: dict[str, Any] = {**shown.details, "request_rate": rate, "rate_capacity": 0.0 if admitted == 0
                                   else None, "rate_ceilings": found, "rate_binding": None,
                                   "rate_refused_by": refusal.kind}
        return replace(shown, fits=False, speed=None, reasons=(*shown.reasons, why), details=details)
    binding = min(found, key=lambda k: found[k])
    cap = found[binding]
    per = f" ({cap / n:.3g} per {unit})" if n > 1 else ""
    others = ", ".join(f"{k} {found[k]:.3g}" for k in sorted(found, key=lambda k: found[k]) if k != binding)
    own = refusal.detail.split("; lower the rate")[0] if binding == refusal.kind and binding not in (
        "decode", "memory") else ""
    admits = (f"; {one.engine} admits {admitted} at once per {unit}" if binding == "admission" and admitted
              and not own else "")
    why = (f"does not carry the rate: at {rate:g} requests/s this deployment ({layout}) carries at most about "
           f"{cap:.3g} requests/s{per} (its capacity, the least of its ceilings, whatever the rate), bound by "
           f"{ceiling_said(binding, one.engine)}{admits}"
           + (f" (its other ceilings, requests/s: {others})" if others else "")
           + (f": {own}" if own else "") + f"; {RATE_REMEDY[binding]}")
    shown = closed(max(1, _shown_at(refusal, binding, admitted, slots, n)), False)
    # no steady state: the queue grows without bound, so no mean wait or number waiting is stated (None)
    details = {**shown.details, "request_rate": rate, "rate_capacity": cap, "rate_ceilings": found,
               "rate_binding": binding, "rate_refused_by": refusal.kind, "queued_sequences": None,
               "queue_wait_seconds": None}
    return replace(shown, fits=False, speed=None, reasons=(why, *shown.reasons), details=details)


def _shown_at(refusal: Refusal, binding: str, admitted: int | None, slots: int | None, n: int) -> int:
    """The requests in flight [all ``n`` replicas] a refused rate's memory is shown at. A memory refusal (fit.py
    ``memory_refusal``) has a fixed point: the slots the rate needs, more than fit, its own count. Otherwise past the
    capacity every sequence the deployment runs at once is busy and the rest wait, so the sequences it runs at its
    capacity: the ``admitted`` per replica (a pool engine's eq. R1 bound, where that binds), the ``slots`` per
    replica its capacity is reached at (an engine with no admission bound: the most that fit, or the decode's peak),
    else the refusal's own count within the admitted. Never the search's bound (numbers.CONCURRENCY.high), which a
    decode refusal of an engine with no admission bound meets where the rate has no fixed point."""
    if binding == "admission" and admitted:
        return admitted * n
    if admitted is None and slots is not None and refusal.kind != "memory":
        return slots * n
    return min(max(1, refusal.in_flight), (admitted or refusal.in_flight) * n)


# A rate at or above this share of the deployment's capacity is warned as near it: there the mean wait rises
# steeply (M/M/c: as 1 / (1 - rho)), so a small rise in traffic multiplies the TTFT. A policy default, not fitted.
NEAR_CAPACITY_SHARE = 0.9


def answer_ceilings(r: FitResult) -> dict[str, float]:
    """The ceilings [requests/s, all replicas] a fitting answer at a rate states without another fit: the server's
    (eq. Q10a, ``server_capacity``) and, where the wait for admission is counted (``load['admitted']``), c / T(c)
    (eq. Q12). The decode's ceiling of an engine with no admission bound needs a search (``ceilings``): not here."""
    load = r.speed.load if r.speed is not None else None
    if not load or "chunk_tokens" not in load:
        return {}
    found: dict[str, float] = {}
    server = server_capacity(r.speed, r.engine, int(load["chunk_tokens"]))
    if server is not None:
        found["server"] = server * r.ranks
    if load.get("admitted") and load.get("service_seconds"):
        found["admission"] = float(load["admitted"]) / float(load["service_seconds"]) * r.ranks
    return found


def capacity_share(r: FitResult, rate: float) -> tuple[str, float] | None:
    """(the ceiling that binds, ``rate`` / it) of a fitting answer at ``rate`` requests/s: the least of
    ``answer_ceilings``, the share fit's near-capacity warning compares with NEAR_CAPACITY_SHARE (``rate_warnings``)
    and recommend's scale-out line states (probe33 D5); None where no ceiling is stated without another fit."""
    found = answer_ceilings(r)
    if not found:
        return None
    binding = min(found, key=lambda k: found[k])
    return binding, rate / found[binding]


def share_words(share: float | None) -> str:
    """A rate's share of the deployment's capacity in words, near it at or above NEAR_CAPACITY_SHARE (fit's
    threshold, ``rate_warnings``' near_capacity): '98% of its capacity, near it (at or above 90%, ...)'; where no
    share is known, below its capacity only (no steady state otherwise, eq. Q10a)."""
    if share is None:
        return "below its capacity"
    return f"{share:.0%} of its capacity" + (
        f", near it (at or above {NEAR_CAPACITY_SHARE:.0%}, estimate/rate_capacity.py NEAR_CAPACITY_SHARE: "
        "the wait rises steeply with the rate)" if share >= NEAR_CAPACITY_SHARE else "")


def rate_warnings(r: FitResult, rate: float) -> dict[str, str]:
    """The warnings of a fitting answer at ``rate`` requests/s (fit, and plan at a traffic rate): its first token
    past efficiency.ATTENTION_LIMIT_SECONDS (the TTFT at the load, the wait for admission in it), and the rate at or
    above NEAR_CAPACITY_SHARE of a ceiling (``answer_ceilings``), each with the remedy of the ceiling nearest; by kind
    (``slow_first_token``, ``near_capacity``: fit's ``details['rate_warnings']``, plan's checks of those names)."""
    from .efficiency import past_attention_limit
    sp = r.speed
    if not r.fits or sp is None or not sp.load:
        return {}
    found = answer_ceilings(r)
    bound = capacity_share(r, rate)
    binding = bound[0] if bound is not None else None
    remedy = RATE_REMEDY[binding] if binding is not None else RATE_REMEDY["server"]
    out: dict[str, str] = {}
    past = past_attention_limit(sp.ttft_seconds)
    if past is not None:
        wait = float(sp.load.get("admission_wait_seconds", 0.0))
        out["slow_first_token"] = (f"at {rate:g} requests/s this deployment {past}"
                   + (f" ({wait / float(sp.ttft_seconds or 1):.0%} of it waiting for admission, formulas/"
                      "serving_queue.py eq. Q12)" if wait else "")
                   + f"; alone it answers in {sp.ttft_idle_seconds or 0.0:.2f} s; {remedy}")
    if bound is not None and binding is not None and bound[1] >= NEAR_CAPACITY_SHARE:
        out["near_capacity"] = (f"near capacity: this deployment carries at most about {found[binding]:.3g} requests/s, bound by "
                   f"{RATE_CEILING_SAID[binding]}; {rate:g} requests/s is {rate / found[binding]:.0%} of it (at or "
                   f"above {NEAR_CAPACITY_SHARE:.0%}, estimate/rate_capacity.py NEAR_CAPACITY_SHARE), where the wait "
                   f"rises steeply with the rate; {remedy}")
    return out

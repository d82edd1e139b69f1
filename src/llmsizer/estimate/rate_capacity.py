"""What a serving deployment carries: the one home of a request-rate refusal's capacity and remedy.

A rate is refused where no steady state exists (estimate/fit.py ``fit`` at ``request_rate``), by whichever ceiling
the search meets first at that rate. The capacity stated is the deployment's, independent of the rate asked: the
least of its ceilings, each per replica times the replicas (formulas/serving_queue.py):

- ``server``: eq. Q10a with eq. Q11, 1 / max(D, s H): the prompts' prefill and the API server's serial time
  (``serving_load.server_capacity``);
- ``admission``: eq. Q12's c / T(c), the c sequences a pool engine (vLLM, SGLang) admits per replica (eq. R1's
  bounds: its running cap, its KV pool's room), each held the closed load's time per request with c running (eq. Q7:
  the fit at c in flight, its ``speed.load['requests_per_second']`` = c / T(c));
- ``decode``: eq. Q10c, the most requests/s whose mean in flight stays within the sequences the decode runs
  (``serving_load.sustained_rate``), the refusal's own where it refused the rate: it binds an engine with no
  admission bound (llama.cpp); where one admits c, the requests past c wait (eq. Q12) and the step stays timed at c,
  so c / T(c) is that engine's decode ceiling;
- ``memory``: for an engine with no admission bound (llama.cpp gives every sequence in flight its slot), eq. Q10c's
  rate at the most sequences per replica whose memory fits (``_decode_ceiling``): a rate above it holds more in
  flight than the device holds, so the memory verdict refuses it.

The remedy names the ceiling that binds (RATE_REMEDY). A deployment whose pool holds no sequence does not start:
that is said first, as the memory verdict's reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from ..numbers import CONCURRENCY
from .serving_load import RATE_REMEDY, server_capacity, sustained_rate

if TYPE_CHECKING:
    from .fit import FitResult

RATE_CEILING_SAID = {
    "server": "the prompts' prefill and the API server (eq. Q10a: 1 / max(prefill, the server's serial time))",
    "admission": "the sequences the engine admits at once (eq. Q12: c / T(c))",
    "decode": "the decode (eq. Q10c: the most requests/s whose mean in flight stays within the sequences it runs)",
    "memory": "the memory (eq. Q10c's rate at the most sequences in flight whose KV cache fits on the device)",
}


class Refusal(Protocol):
    """What a rate refusal carries (estimate/fit.py RateOverloadError)."""
    detail: str
    capacity: float | None
    in_flight: int
    kind: str


def ceilings(closed: Callable[[int, bool], FitResult], refusal: Refusal,
             search: bool = False) -> tuple[dict[str, float], FitResult, int | None]:
    """The deployment's ceilings [requests/s, all replicas] by kind, a memory fit of the layout (``closed(c, speed)``:
    the fit at c in flight in all, no rate) and the sequences admitted per replica (None: no admission bound; 0: its
    pool holds none). ``refusal``'s own capacity is one of them; the others are computed only where they can be lower:
    c / T(c) is never above the server's ceiling (eq. Q7: each request holds the device its prefill D and the server
    its serial s H, so X(c) <= 1 / max(D, s H)), and a rate the decode refused is below the server's (the search's
    first fit, at one request in flight, would have met eq. Q10a first). So an admission refusal needs no other fit, a
    server or decode refusal the fit at the c admitted (c / T(c)), and a server refusal of an engine with no admission
    bound, and a decode refusal, the decode's search (``_decode_ceiling``, with the memory's ceiling; not where the caller is itself a search over many deployments,
    ``search``, recommend's copies: there the server's ceiling is stated as an upper bound, the decode's not searched)."""
    first = closed(max(1, refusal.in_flight) if refusal.kind == "admission" else 1, False)
    n = first.replicas
    found: dict[str, float] = {}
    if refusal.capacity is not None:
        found[refusal.kind] = refusal.capacity

    def add(kind: str, cap: float | None) -> None:
        if cap is not None and cap > 0:
            found[kind] = min(found.get(kind, cap), cap)

    d = first.estimate.details if first.estimate is not None else {}
    bounds = [int(b) for b in (d.get("running_cap"), d.get("max_concurrency_at_context")) if b is not None]
    admitted = min(bounds) if bounds else None
    if refusal.kind == "admission" or admitted == 0:
        return found, first, admitted
    if admitted is not None:
        full = closed(admitted * n, True)
        load = full.speed.load if full.speed is not None else None
        if load and load.get("requests_per_second"):
            add("admission", float(load["requests_per_second"]) * n)
    elif refusal.kind in ("server", "decode") and not search:
        decode, memory = _decode_ceiling(closed, n)  # a decode refusal carries its own decode ceiling
        add("decode", decode if refusal.kind == "server" else None)
        add("memory", memory)
    return found, first, admitted


# Sequences per replica the decode ceiling of an engine with no admission bound is searched over: doubling from one
# while the sustained rate still rises by more than DECODE_CEILING_GAIN (its sup: the step's cost per sequence
# catches up with the sequences added), up to numbers.CONCURRENCY.high.
DECODE_CEILING_GAIN = 1e-3


def _decode_ceiling(closed: Callable[[int, bool], FitResult], n: int) -> tuple[float | None, float | None]:
    """The decode's and the memory's ceilings [requests/s, all ``n`` replicas] of an engine with no admission bound.
    Decode: the most requests/s whose mean in flight stays within C (``sustained_rate`` of the fit at C per replica,
    eq. Q10c), over C doubling from 1 while it rises (DECODE_CEILING_GAIN), fitting or not. Memory: at the first C
    on that way that does not fit (each sequence in flight holds its KV slot), the rate whose slots (``sustained_rate``
    ``sized``, as a fit at a rate sizes them) stay within the largest C that fits, bisected between the last C that
    fit and it (None where every C tried fits, or none does). None without a load."""
    def rate(c: int, sized: bool = False) -> tuple[bool, float | None]:
        r = closed(c * n, True)
        load = r.speed.load if r.speed is not None else None
        return r.fits, (sustained_rate(r.speed, r.engine, sized) if load and "chunk_tokens" in load else None)

    best: float | None = None
    memory: float | None = None
    c, fitting = 1, 0
    while c <= CONCURRENCY.high:
        fits, x = rate(c)
        if not fits and fitting == c // 2:  # the first C that does not fit
            low, high = fitting, c
            while high - low > 1 and low > 0:  # the largest C that fits, between the last that did and c
                mid = (low + high) // 2
                low, high = (mid, high) if rate(mid)[0] else (low, mid)
            memory = rate(low, True)[1] if low > 0 else None  # the rate whose slots (as a fit sizes them) fit
        if x is None and c > 1:
            break
        if x is not None:
            if best is not None and x <= best * (1 + DECODE_CEILING_GAIN):
                break
            best = x
        fitting = c if fits else fitting
        c *= 2
    return (None if best is None else best * n), (None if memory is None else memory * n)


def over_capacity(rate: float, refusal: Refusal, closed: Callable[[int, bool], FitResult],
                  search: bool = False) -> FitResult:
    """The answer to a rate the deployment does not carry: the memory fit (``closed(c, False)``) not fitting, its
    first reason the rate, the capacity the least ceiling (``ceilings``) and the remedy of the one that binds; where
    the pool holds no sequence, the memory's reasons first (it does not start). No speed (no steady state).
    ``search``: the caller searches many deployments (``ceilings``)."""
    found, one, admitted = ceilings(closed, refusal, search)
    n = one.replicas
    layout = f"TP {one.tensor_parallel} x {n} replica{'s' if n != 1 else ''}"
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
    per = f" ({cap / n:.3g} per replica)" if n > 1 else ""
    others = ", ".join(f"{k} {found[k]:.3g}" for k in sorted(found, key=lambda k: found[k]) if k != binding)
    own = refusal.detail.split("; lower the rate")[0] if binding == refusal.kind and binding != "decode" else ""
    admits = (f"; {one.engine} admits {admitted} at once per replica" if binding == "admission" and admitted
              and not own else "")
    why = (f"does not carry the rate: at {rate:g} requests/s this deployment ({layout}) carries at most about "
           f"{cap:.3g} requests/s{per} (its capacity, the least of its ceilings, whatever the rate), bound by "
           f"{RATE_CEILING_SAID[binding]}{admits}"
           + (f" (its other ceilings, requests/s: {others})" if others else "")
           + (f": {own}" if own else "")
           + ("; the decode's ceiling, possibly lower, is not searched here" if search and admitted is None
              and binding == "server" else "") + f"; {RATE_REMEDY[binding]}")
    at = admitted * n if binding == "admission" and admitted else min(max(1, refusal.in_flight),
                                                                       (admitted or refusal.in_flight) * n)
    shown = closed(max(1, at), False)
    details = {**shown.details, "request_rate": rate, "rate_capacity": cap, "rate_ceilings": found,
               "rate_binding": binding, "rate_refused_by": refusal.kind}
    return replace(shown, fits=False, speed=None, reasons=(why, *shown.reasons), details=details)


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
        found["server"] = server * r.replicas
    if load.get("admitted") and load.get("service_seconds"):
        found["admission"] = float(load["admitted"]) / float(load["service_seconds"]) * r.replicas
    return found


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
    binding = min(found, key=lambda k: found[k]) if found else None
    remedy = RATE_REMEDY[binding] if binding is not None else RATE_REMEDY["server"]
    out: dict[str, str] = {}
    past = past_attention_limit(sp.ttft_seconds)
    if past is not None:
        wait = float(sp.load.get("admission_wait_seconds", 0.0))
        out["slow_first_token"] = (f"at {rate:g} requests/s this deployment {past}"
                   + (f" ({wait / float(sp.ttft_seconds or 1):.0%} of it waiting for admission, formulas/"
                      "serving_queue.py eq. Q12)" if wait else "")
                   + f"; alone it answers in {sp.ttft_idle_seconds or 0.0:.2f} s; {remedy}")
    if binding is not None and rate >= NEAR_CAPACITY_SHARE * found[binding]:
        out["near_capacity"] = (f"near capacity: this deployment carries at most about {found[binding]:.3g} requests/s, bound by "
                   f"{RATE_CEILING_SAID[binding]}; {rate:g} requests/s is {rate / found[binding]:.0%} of it (at or "
                   f"above {NEAR_CAPACITY_SHARE:.0%}, estimate/rate_capacity.py NEAR_CAPACITY_SHARE), where the wait "
                   f"rises steeply with the rate; {remedy}")
    return out

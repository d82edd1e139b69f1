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
request in flight is replaced when it finishes: the "concurrency" llmsizer sizes for), not a burst's worst case;
chunked prefill and preemption, which share steps between waiting and running requests, are not modelled.
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

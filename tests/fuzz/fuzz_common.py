"""Shared pieces of the reader fuzz suite (issue #15): hostile values, and the one property every reader keeps.

The property: any input ends either in a result or in an LlmsizerError whose message is one line -- never
another exception, never a hang (hypothesis ``deadline``), never a large allocation (``tracemalloc`` peak).
The big-claim cases that would need gigabytes are checked in capped child processes (tests/readers/
test_hostile_files.py); here each example is also held under a Python-allocation ceiling.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from llmsizer.errors import LlmsizerError

PEAK_BYTES = 256 << 20  # Python allocations one example may make (every input here is < 1 MB)
TIME_S = 3.0  # wall time one example may take (hypothesis deadline is per example too)

FUZZ = settings(max_examples=120, deadline=4000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HOSTILE_NUMBERS = st.sampled_from([0, -1, 1, 2, 3, 7, 2**31, 2**31 - 1, 2**63, 2**64 - 1, 10**30, -(10**30),
                                   0.5, 32.5, 1e30, -0.0, math.nan, math.inf, -math.inf, True, False])
SCALARS = st.one_of(HOSTILE_NUMBERS, st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=20))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)


def ends_cleanly(call: Callable[[], Any]) -> Any:
    """Run ``call``; a result or a one-line LlmsizerError pass, anything else fails (with its traceback)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        return call()
    except LlmsizerError as e:
        msg = str(e)
        assert msg and "\n" not in msg, repr(msg)
        return e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK_BYTES, f"peak Python allocation {peak:,} bytes"
        assert time.perf_counter() - t0 < TIME_S * 4  # tracemalloc slows Python code ~2-4x

"""The one validation layer for numbers: every CLI flag, request field and config field that is a number passes
through ``check_number`` (issue #15). A value must be a real number (booleans are not), finite, integral where it
must be, and within a stated range whose bounds carry their physical reason; the message names the field, where it
came from (flag, file:line or config key), the value and the allowed range.

The named ranges below are the documented maxima (docs/security.md): far above any real model or workload, low
enough that nothing proportional to them is ever allocated by mistake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class Range:
    """Allowed values of one kind of number, and why the bounds are what they are."""

    low: float
    high: float
    integral: bool
    why: str

    def describe(self) -> str:
        kind = "an integer" if self.integral else "a number"
        return f"{kind} in [{_fmt(self.low)}, {_fmt(self.high)}] ({self.why})"


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


# documented maxima: each far above published models and serving setups (docs/security.md)
LAYERS = Range(1, 10_000, True, "decoder layers; the deepest published LLMs have ~130")
HEADS = Range(1, 65_536, True, "attention heads; published models have <= 128")
WIDTH = Range(1, 2**20, True, "hidden / intermediate / head width; published models are <= 2^17")
VOCAB = Range(1, 2**24, True, "vocabulary entries; published tokenizers are <= 2^18")
EXPERTS = Range(1, 65_536, True, "MoE experts; published models have <= 512")
TOKENS = Range(1, 2**31, True, "tokens per sequence; 2^31 is past every published context window")
CONCURRENCY = Range(1, 2**24, True, "sequences at once")
COUNT = Range(1, 2**20, True, "devices, nodes, batch or steps")
FRACTION = Range(0, 1, False, "a share of a whole")
BYTES = Range(1, 2**60, True, "bytes; 2^60 B = 1 EiB")
POSITIVE = Range(0, 1e30, False, "a non-negative finite quantity")
# model-description fields that may be 0 (absent block / first layer index) and image sizes (readers, #15)
LAYER_INDEX = Range(0, 10_000, True, "a layer index or number of layers; 0 allowed, at most LAYERS' maximum")
TOKENS_OR_ZERO = Range(0, 2**31, True, "tokens; 0 means no sliding window")
PARAMS = Range(1, 10**15, True, "parameters; the largest published models have ~2*10^12")
WIDTH_OR_ZERO = Range(0, 2**20, True, "a width; 0 means the block is absent")
EXPERTS_OR_ZERO = Range(0, 65_536, True, "MoE experts; 0 means none")
PIXELS = Range(1, 2**16, True, "image side, patch side or channels of a vision encoder; published ones are <= 2^12")


def check_number(value: object, name: str, rng: Range, where: str = "") -> float | int:
    """``value`` as an int (integral ranges) or float, or one-line InputError naming ``name`` and ``where``."""
    at = f" ({where})" if where else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name}{at}: expected {rng.describe()}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{name}{at}: must be finite, got {value!r}; expected {rng.describe()}")
    if rng.integral and isinstance(value, float) and not value.is_integer():
        raise InputError(f"{name}{at}: must be a whole number, got {value!r}; expected {rng.describe()}")
    if not rng.low <= value <= rng.high:
        shown = value if abs(value) < 1e18 else f"{value:.3g}"
        raise InputError(f"{name}{at}: {shown} is out of range; expected {rng.describe()}")
    return int(value) if rng.integral else float(value)

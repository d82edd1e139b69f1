"""Sizes padded to a multiple: the one rounding helper that formulas share (kernels, allocators and weight
loaders all pad a dimension up to their tile or block size before they allocate)."""

from __future__ import annotations


def round_up(x: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` (> 0) that is >= ``x`` (integers; exact, no float rounding)."""
    return -(-x // multiple) * multiple

"""Inference memory estimates (composition layer) and the per-engine allocation rules."""

from .compose import estimate_inference

__all__ = ["estimate_inference"]

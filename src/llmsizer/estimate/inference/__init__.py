"""Inference memory estimates (composition layer) and the per-engine allocation rules."""

from .compose import estimate_inference, inference_sized, inference_sized_floor

__all__ = ["estimate_inference", "inference_sized", "inference_sized_floor"]

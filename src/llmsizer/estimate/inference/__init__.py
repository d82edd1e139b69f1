"""Inference memory estimates (composition layer) and the per-engine allocation rules."""

from .compose import estimate_inference, inference_sized

__all__ = ["estimate_inference", "inference_sized"]

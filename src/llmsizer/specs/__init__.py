"""Typed, validated specifications (no I/O)."""

from .model import (
    VISION_TOKEN_RULES,
    EncoderDecoderSpec,
    FileWeights,
    Gemma3nSpec,
    Gemma4AudioTower,
    Gemma4Spec,
    Gemma4VisionTower,
    LayerKey,
    LayerKind,
    MLASpec,
    ModelSpec,
    MoESpec,
    RecurrentSpec,
    RopeScaling,
    VisionSpec,
)

__all__ = ["VISION_TOKEN_RULES", "EncoderDecoderSpec", "FileWeights", "Gemma3nSpec", "Gemma4AudioTower", "Gemma4Spec", "Gemma4VisionTower", "LayerKey", "LayerKind", "MLASpec", "ModelSpec", "MoESpec", "RecurrentSpec",
           "RopeScaling", "VisionSpec"]
from .training import METHODS, OPTIMIZERS, PRECISIONS, TrainingWorkload
from .workload import (
    ATTENTION_IMPLS,
    DEVICES,
    DTYPES,
    ENGINE_ALIASES,
    ENGINES,
    MAMBA_RADIX_CACHE_STRATEGIES,
    SPLIT_MODES,
    InferenceWorkload,
    normalize_engine,
)

__all__ += ["ATTENTION_IMPLS", "DEVICES", "DTYPES", "MAMBA_RADIX_CACHE_STRATEGIES", "SPLIT_MODES", "ENGINE_ALIASES", "ENGINES", "InferenceWorkload",
            "normalize_engine"]
__all__ += ["METHODS", "OPTIMIZERS", "PRECISIONS", "TrainingWorkload"]

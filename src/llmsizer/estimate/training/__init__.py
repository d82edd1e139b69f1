"""Training and fine-tuning memory (``estimate_training``) and its reverse questions."""

from .compose import estimate_training
from .reverse import max_micro_batch, max_seq_len

__all__ = ["estimate_training", "max_micro_batch", "max_seq_len"]

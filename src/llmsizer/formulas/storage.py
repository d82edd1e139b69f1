"""Disk space of a training or serving job: model files, datasets, checkpoints, adapters, logs, headroom, and
when a disk fills if checkpoints are not pruned.

Units: bytes [B], tokens, parameters, seconds [s]. Pure functions; defaults that change an answer are
arguments (their cited values are the named constants below).

Equations
---------
Tokenized dataset in Megatron-LM's indexed format (``megatron/core/datasets/indexed_dataset.py``): token ids
stored as ``DType.optimal_dtype(vocab)`` = uint16 when the vocabulary has fewer than 65,500 entries, else int32;
the ``.idx`` file holds an int32 length and an int64 pointer per sequence and an int64 index per document (plus
one)::

    b_id = 2 if V < 65500 else 4                                                          (1)
    D_tok = T b_id + D (4 + 8) + 8 (D + 1)                                                (2)

for T tokens in D documents (one sequence per document).

Raw text from a token count, when only tokens are known: about 4 characters per token of English text
(OpenAI, "What are tokens and how to count them?": "1 token ~= 4 chars in English"), 1 byte per ASCII
character in UTF-8::

    D_raw ~= T c_tok,  c_tok = 4 B/token                                                  (3)

One checkpoint that can *resume* training holds, per trained parameter, the weights as stored, the separate fp32
master copy if the recipe keeps one, and the optimizer states; frozen weights are not re-saved (a PEFT
checkpoint holds the adapters only). Gradients are not saved. (HF Trainer ``_save_checkpoint`` writes the model,
``optimizer.pt``, ``scheduler.pt`` and RNG state; DeepSpeed writes bf16 model states plus per-rank
``*_optim_states.pt`` with the fp32 master and Adam moments, ZeRO paper section 3.1's K = 12)::

    C = N_t (b_w + b_m + b_o) + N_f b_f                                                   (4)

e.g. AdamW with PyTorch AMP: b_w = 4 (the fp32 model is the master), b_m = 0, b_o = 8: 12 B per parameter, six
times a bf16 model file; DeepSpeed bf16: 2 + 4 + 8 = 14 B. Sharded checkpoints (ZeRO, FSDP sharded state dict)
split the same bytes over R ranks::

    C_rank = ceil(C / R)                                                                  (5)

Keeping k checkpoints needs room for k + 1 at the moment a new one is written (the oldest is deleted only after
the new one is saved: transformers ``Trainer._save_checkpoint`` calls ``_rotate_checkpoints`` after saving)::

    S_kept = (k + 1) C                                                                    (6)

Checkpoints written by time t at interval Δ, and the disk-full point when none is deleted: with F bytes of other
files on a disk of S bytes, save number n fails when F + n C > S::

    n(t) = floor(t / Δ)                                                                   (7)
    n* = floor((S - F) / C) + 1,   t* = n* Δ                                              (8)

Adapter file (PEFT ``adapter_model.safetensors``): the LoRA parameters in their dtype::

    A = N_lora b_a                                                                        (9)

Logs: events x bytes per event (training: one line of metrics per logged step; serving: one line per request,
plus the text when prompts and outputs are logged, eq. 3)::

    L = n_events b_event                                                                  (10)

Total with a margin h on top of the parts (filesystems slow down and writes fail near full)::

    S_total = (sum of parts) (1 + h)                                                      (11)
"""

from __future__ import annotations

import math

from ..errors import InputError

MEGATRON_UINT16_LIMIT = 65500  # DType.optimal_dtype: uint16 below this vocabulary size
IDX_BYTES_PER_SEQUENCE = 4 + 8  # int32 length + int64 pointer (Megatron .idx)
IDX_BYTES_PER_DOCUMENT = 8  # int64 document index (Megatron .idx)
TEXT_BYTES_PER_TOKEN = 4.0  # OpenAI help: 1 token ~= 4 characters of English text (UTF-8: 1 byte each)
TRAINING_LOG_BYTES_PER_STEP = 1024  # policy default: one metrics line + event records per logged step
REQUEST_LOG_BYTES = 1024  # policy default: one structured access-log line per request (metadata only)
DISK_HEADROOM = 0.20  # policy default: share of the disk kept free (memory headroom: estimate/verdict.py)


def _nonneg(**values: float) -> None:
    for k, v in values.items():
        if v < 0:
            raise InputError(f"{k} must not be negative, got {v}")


def token_id_bytes(vocab_size: int) -> int:
    """Eq. (1): bytes per stored token id (Megatron-LM ``optimal_dtype``).

    >>> token_id_bytes(32000), token_id_bytes(128256)
    (2, 4)
    """
    if vocab_size <= 0:
        raise InputError(f"vocab_size must be positive, got {vocab_size}")
    return 2 if vocab_size < MEGATRON_UINT16_LIMIT else 4


def tokenized_dataset_bytes(tokens: int, vocab_size: int, documents: int = 0) -> int:
    """Eq. (2): a tokenized dataset (.bin token ids + .idx index) [B].

    >>> tokenized_dataset_bytes(1_000_000, 32000, 1000)
    2020008
    """
    _nonneg(tokens=tokens, documents=documents)
    idx = documents * IDX_BYTES_PER_SEQUENCE + IDX_BYTES_PER_DOCUMENT * (documents + 1) if documents else 0
    return tokens * token_id_bytes(vocab_size) + idx


def raw_text_bytes(tokens: int, bytes_per_token: float = TEXT_BYTES_PER_TOKEN) -> int:
    """Eq. (3): raw text size from a token count [B] (an estimate; give the real size when known)."""
    _nonneg(tokens=tokens, bytes_per_token=bytes_per_token)
    return int(round(tokens * bytes_per_token))


def checkpoint_bytes(trained_params: int, weight_bytes: float, master_bytes: float, optimizer_bytes: float,
                     frozen_params_saved: int = 0, frozen_bytes: float = 0.0) -> int:
    """Eq. (4): one resumable checkpoint [B].

    ``weight_bytes``, ``master_bytes``, ``optimizer_bytes`` are per trained parameter; ``frozen_params_saved``
    x ``frozen_bytes`` covers frozen weights a framework saves again (0 for PEFT adapters).

    >>> checkpoint_bytes(7_000_000_000, 4, 0, 8)   # 7B, PyTorch AMP + AdamW: 12 B/param
    84000000000
    """
    _nonneg(trained_params=trained_params, weight_bytes=weight_bytes, master_bytes=master_bytes,
            optimizer_bytes=optimizer_bytes, frozen_params_saved=frozen_params_saved, frozen_bytes=frozen_bytes)
    return int(math.ceil(trained_params * (weight_bytes + master_bytes + optimizer_bytes)
                         + frozen_params_saved * frozen_bytes))


def checkpoint_shard_bytes(checkpoint: int, ranks: int, own: int = 0) -> int:
    """Eq. (5): the part of one checkpoint the most loaded of ``ranks`` ranks writes [B]:

        written = max(ceil(checkpoint / ranks), own)

    A distributed checkpoint writes every tensor once and spreads the replicated ones over the ranks holding them:
    torch.distributed.checkpoint keeps each duplicate write item on the rank whose plan is smallest so far
    (torch/distributed/checkpoint/_dedup_save_plans.py ``dedup_save_plans`` @1baca9bc lines 12-37), Megatron-Core's
    dist-ckpt distributes the save "as uniformly as possible" over the ranks by their replication
    (megatron/core/dist_checkpointing/strategies/fully_parallel.py ``FullyParallelSaveStrategyWrapper``
    @008e9cdb lines 50-66). So each of ``ranks`` ranks writes an even share, but never less than ``own``: the bytes
    only it holds (its shard of sharded states), which no other rank can write for it.

    >>> checkpoint_shard_bytes(98_000_000_000, 64)
    1531250000
    >>> checkpoint_shard_bytes(100, 4, own=30)   # a rank holding 30 B no other rank has
    30
    """
    if ranks < 1:
        raise InputError(f"ranks must be >= 1, got {ranks}")
    _nonneg(own=own)
    return max(math.ceil(checkpoint / ranks), own)


def kept_checkpoints_bytes(checkpoint: int, keep: int) -> int:
    """Eq. (6): peak space of ``keep`` rotated checkpoints [B] (one extra while the newest is written).

    ``keep`` = 0 means none are kept after the run, but each is still written once: room for one.
    """
    _nonneg(checkpoint=checkpoint, keep=keep)
    return (keep + 1) * checkpoint


def checkpoints_written(seconds: float, interval: float) -> int:
    """Eq. (7): checkpoints saved by time ``seconds`` at one every ``interval`` seconds."""
    if interval <= 0:
        raise InputError(f"interval must be positive, got {interval}")
    _nonneg(seconds=seconds)
    return int(math.floor(seconds / interval + 1e-9))


def disk_full_at(capacity: int, fixed: int, checkpoint: int, interval: float) -> tuple[int, float]:
    """Eq. (8): (number of the save that fails, time it happens [s]) when no checkpoint is deleted.

    >>> disk_full_at(1000, 100, 300, 3600.0)   # room for 3 checkpoints; the 4th fails after 4 h
    (4, 14400.0)
    """
    if checkpoint <= 0:
        raise InputError(f"checkpoint must be positive, got {checkpoint}")
    if interval <= 0:
        raise InputError(f"interval must be positive, got {interval}")
    free = capacity - fixed
    n = 1 if free < 0 else free // checkpoint + 1
    return int(n), n * interval


def adapter_bytes(lora_params: int, bytes_per_param: float) -> int:
    """Eq. (9): a LoRA adapter file [B]."""
    _nonneg(lora_params=lora_params, bytes_per_param=bytes_per_param)
    return int(math.ceil(lora_params * bytes_per_param))


def log_bytes(events: float, bytes_per_event: float) -> int:
    """Eq. (10): log volume [B]."""
    _nonneg(events=events, bytes_per_event=bytes_per_event)
    return int(math.ceil(events * bytes_per_event))


def with_headroom(total: int, headroom: float = DISK_HEADROOM) -> int:
    """Eq. (11): space to provision with a margin ``headroom`` on top of ``total`` [B]."""
    if not 0 <= headroom < 1:
        raise InputError(f"headroom must be in [0, 1), got {headroom}")
    _nonneg(total=total)
    return int(math.ceil(total * (1 + headroom)))

"""Close-match suggestions for names the user mistyped: one helper, used by every "did you mean" message.

Similarity is :func:`difflib.get_close_matches` (Ratcliff/Obershelp ratio of matching characters), compared
case-insensitively; the original spelling of each option is returned. A name the serving engines or training
frameworks give one of our keys (``OTHER_PROGRAMS_NAMES``: vLLM's ``tensor_parallel_size`` for ``tp``) is offered that
key first, however unlike the spellings look.

A search of a catalog by name (``models QUERY``, ``hardware list QUERY``, their web calls and Python functions) asks
:func:`matches_name`, the one rule of what a query matches: whole name words, not any run of letters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

MAX_SUGGESTIONS = 3  # names offered at most in one "did you mean"
SUGGESTION_CUTOFF = 0.6  # difflib ratio below which a name is not offered (difflib's own default)
LONGEST_NAME = 100  # a word longer than any name is offered nothing (difflib on a 1 MB key would take seconds)

# The engines' and frameworks' own names for one setting, one group each (snake_case; a flag's dashes read as
# underscores): a word of a group is offered the names of its group the place asks for (a request section, a Python
# field, a command's options), whichever of our spellings that place uses ("tp" in a training request's settings,
# "tensor_parallel" in InferenceWorkload, --tp/--tensor-parallel on the command line). The one alias table of every
# "did you mean"; the flags as each program's argument parser declares them.
OTHER_PROGRAMS_NAMES: tuple[frozenset[str], ...] = tuple(frozenset(g) for g in (
    # vLLM --tensor-parallel-size; SGLang --tp-size; Megatron --tensor-model-parallel-size; torchtitan
    # parallelism.tensor_parallel_degree
    ("tp", "tensor_parallel", "tensor_parallel_size", "tp_size", "tensor_model_parallel_size",
     "tensor_parallel_degree"),
    ("pp", "pipeline_parallel", "pipeline_parallel_size", "pp_size", "pipeline_model_parallel_size",
     "pipeline_parallel_degree"),
    ("etp", "expert_tensor_parallel_size", "expert_tensor_parallel_degree"),
    ("moe_dispatcher", "moe_token_dispatcher_type"),  # Megatron-Core --moe-token-dispatcher-type
    ("ep_comm_overlap", "overlap_moe_expert_parallel_comm", "moe_a2a_overlap"),  # Megatron-Core; Megatron-Bridge
    ("ep", "expert_parallel", "expert_parallel_size", "ep_size", "expert_model_parallel_size",
     "expert_parallel_degree"),
    ("cp", "context_parallel", "context_parallel_size", "context_parallel_degree"),
    ("max_num_seqs", "max_running_requests"),  # vLLM --max-num-seqs; SGLang --max-running-requests
    ("max_num_batched_tokens", "chunked_prefill_size"),  # vLLM --max-num-batched-tokens; SGLang --chunked-prefill-size
    ("paged_block_size", "block_size", "page_size"),  # vLLM --block-size; SGLang --page-size
    ("kv_dtype", "kv_cache_dtype"),  # vLLM and SGLang --kv-cache-dtype
    ("context", "max_model_len", "context_length", "ctx_size", "n_ctx"),  # vLLM; SGLang; llama.cpp -c/--ctx-size
    ("n_gpu_layers", "ngl", "gpu_layers"),  # llama.cpp -ngl/--gpu-layers/--n-gpu-layers
    ("n_ubatch", "ubatch", "ubatch_size"),  # llama.cpp -ub/--ubatch-size
    ("split_mode", "sm"),  # llama.cpp -sm/--split-mode
    ("tensor_split", "ts"),  # llama.cpp -ts/--tensor-split
    # transformers TrainingArguments per_device_train_batch_size, gradient_accumulation_steps,
    # gradient_checkpointing; Megatron --micro-batch-size, --seq-length; TRL SFTConfig max_seq_length
    ("micro_batch", "per_device_train_batch_size", "micro_batch_size"),
    ("grad_accumulation", "gradient_accumulation_steps"),
    ("grad_checkpointing", "gradient_checkpointing", "activation_checkpointing"),
    ("seq_len", "seq_length", "max_seq_length", "max_seq_len"),
    # the devices a job runs on: DeepSpeed's launcher --num_gpus; our fit/train --count beside infer/train --gpus
    # (infer's device count is --gpus for a llama.cpp split, --tp for a sharded replica)
    ("gpus", "count", "num_gpus"),
))


def _plain(name: str) -> str:
    """A name as ``OTHER_PROGRAMS_NAMES`` spells it: lower case, no leading dashes, dashes as underscores."""
    return name.lstrip("-").replace("-", "_").lower()


def same_setting(word: str, options: Iterable[str]) -> list[str]:
    """The ``options`` that name the setting ``word`` names in another program (``OTHER_PROGRAMS_NAMES``), the most
    alike first; none when ``word`` is no other program's name or already one of ``options``."""
    import difflib

    plain = _plain(word)
    group = next((g for g in OTHER_PROGRAMS_NAMES if plain in g), None)
    opts = list(dict.fromkeys(options))
    if group is None or any(_plain(o) == plain for o in opts):
        return []
    hits = [o for o in opts if _plain(o) in group]
    return sorted(hits, key=lambda o: -difflib.SequenceMatcher(None, plain, _plain(o)).ratio())


# A memory size written after a name: digits and a G or T unit ('48gb', '80g', '24GiB', '1tb'), one word or two
# ('48 GB'); 'a40-48gb' is a40 with its memory said, as the catalog's own names write it ('NVIDIA A40 48GB')
_MEMORY_SIZE = re.compile(r"\d+(?:\.\d+)?[gt]i?b?")


def named_then_memory(word: str, spellings: Mapping[str, str]) -> list[str]:
    """The options ``word`` names followed by a memory size: ``spellings`` maps each spelling (an id, name or
    alias) to its option; ``'a40-48gb'`` -> the option spelt ``a40``, ``'nvidia-a40 48GB'`` -> the one whose alias is
    ``nvidia-a40``. Name words are compared (``name_words``: case and separators aside); none when ``word`` does not
    end in a memory size."""
    w = name_words(word)
    stems = {w[:k] for k in range(1, len(w)) if _MEMORY_SIZE.fullmatch("".join(w[k:]))}
    return list(dict.fromkeys(o for sp, o in spellings.items() if name_words(sp) in stems)) if stems else []


def close_matches(word: str, options: Iterable[str], n: int = MAX_SUGGESTIONS,
                  cutoff: float = SUGGESTION_CUTOFF, aliases: Mapping[str, str] | None = None) -> list[str]:
    """Up to ``n`` of ``options`` closest to ``word`` (case-insensitive), best first, without duplicates: first those
    naming the setting ``word`` names in another program (``same_setting``), then an option ``word`` names followed
    by a memory size (``named_then_memory``: ``a40-48gb`` -> ``a40``; ``aliases`` maps other spellings of the
    options to them), then the most alike spellings."""
    import difflib  # a miss only: kept off the start-up of every command

    if len(word) > LONGEST_NAME:
        return []
    by_key: dict[str, str] = {}
    for o in options:
        by_key.setdefault(o.lower(), o)
    same = same_setting(word, by_key.values())
    named = named_then_memory(word, {**(aliases or {}), **{o: o for o in by_key.values()}})
    first = list(dict.fromkeys([*same, *named]))
    hits = difflib.get_close_matches(word.lower(), [k for k in by_key if by_key[k] not in first], n=n, cutoff=cutoff)
    return [*first, *(by_key[h] for h in hits)][:n]


def did_you_mean(word: str, options: Iterable[str], n: int = MAX_SUGGESTIONS,
                 cutoff: float = SUGGESTION_CUTOFF) -> str:
    """``"; did you mean 'a'?"`` (or ``'a', 'b' or 'c'``) for the closest options, or ``""`` when none is close."""
    hits = close_matches(word, options, n, cutoff)
    if not hits:
        return ""
    quoted = [repr(h) for h in hits]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"; did you mean {listed}?"


def unknown_choice(what: str, value: object, options: Iterable[str]) -> str:
    """The one line for a value outside a fixed set of choices, as the command line words it (argparse's invalid
    choice plus :func:`did_you_mean`): ``"unknown engine 'vlm'; did you mean 'vllm'? (choose one of: transformers,
    vllm, ...)"``. Every face asks this, so a Python caller's typo gets the suggestion the CLI's gets."""
    names = [str(o) for o in options]
    return f"unknown {what} {value!r}{did_you_mean(str(value), names)} (choose one of: {', '.join(names)})"


# The one wording of the rule, in the commands' help and the web calls' descriptions
NAME_QUERY_HELP = ("words to find in ids, names and aliases, the last one a word's beginning: '7b' finds "
                   "qwen2.5-7b, not gemma-2-27b; 'qwen' finds qwen2.5-7b; an exact id finds itself (default: all)")

# A name's words: runs of letters and digits, parted by '-', '_', '.', '/', spaces or any other sign; a decimal
# number is one word ('1.7b' in Qwen3-1.7B, '3.1' in Llama-3.1-8B), so '7b' is not found in it.
_WORD = re.compile(r"(?<![^\W_])\d+(?:\.\d+)+[^\W_]*|[^\W_]+")
# The same name read with letters and the number after them parted ('Qwen2.5' -> 'qwen', '2.5'; 'h100' -> 'h', '100';
# 'DeepSeek-V3.1' -> 'deepseek', 'v', '3.1'), a number keeping what follows it ('8x7b', '7b', '5.48xlarge'): a query
# matches a name read either way, so 'qwen 2.5' and '2.5' find Qwen2.5 as '48xlarge' finds p5.48xlarge (review36 D3)
_SPLIT_WORD = re.compile(r"\d+(?:\.\d+)*(?:[^\W\d_]+\d+)*[^\W\d_]*|[^\W\d_]+")


@lru_cache(maxsize=8192)
def name_words(text: str) -> tuple[str, ...]:
    """``text``'s words, lower case: ``'Qwen/Qwen2.5-7B'`` -> ``('qwen', 'qwen2', '5', '7b')``,
    ``'Qwen3-1.7B'`` -> ``('qwen3', '1.7b')``."""
    return tuple(_WORD.findall(text.lower()))


@lru_cache(maxsize=8192)
def split_name_words(text: str) -> tuple[str, ...]:
    """``text``'s words with letters and the number after them parted: ``'Qwen/Qwen2.5-7B'`` -> ``('qwen', 'qwen',
    '2.5', '7b')``, ``'h100-sxm'`` -> ``('h', '100', 'sxm')``."""
    return tuple(_SPLIT_WORD.findall(text.lower()))


def _words_match(q: tuple[str, ...], w: tuple[str, ...]) -> bool:
    """Whether ``q``'s words are consecutive words of ``w``, the last one a word's beginning."""
    *whole, start = q
    n = len(q)
    return any(w[i + n - 1].startswith(start) and list(w[i:i + n - 1]) == whole for i in range(len(w) - n + 1))


def matches_name(query: str, names: Iterable[str]) -> bool:
    """Whether a search ``query`` matches one of ``names`` (an entry's id, name and aliases): the query's words are
    consecutive words of the name, the last a word's beginning, the others whole words, case and separators aside.
    So ``'7b'`` matches ``qwen2.5-7b`` and ``llama-2-7b-hf`` but not ``gemma-2-27b``; ``'m3'`` matches
    ``apple-m3-max`` but not a name holding ``HBM3``; ``'qwen'`` matches ``qwen2.5-7b`` (a word's beginning) and
    ``'llama 3.1'`` matches ``llama-3.1-8b``; an exact id matches itself. Query and name are read both ways
    (``name_words``, ``split_name_words``): ``'2.5'`` and ``'qwen 2.5'`` match ``qwen2.5-7b``. A blank query matches
    every name; a query with no letter or digit matches none."""
    if not query.strip():
        return True
    readings = [(q, words) for q, words in ((name_words(query), name_words), (split_name_words(query),
                                                                             split_name_words)) if q]
    return any(_words_match(q, words(name)) for name in names for q, words in readings)

"""Close-match suggestions for names the user mistyped: one helper, used by every "did you mean" message.

Similarity is :func:`difflib.get_close_matches` (Ratcliff/Obershelp ratio of matching characters), compared
case-insensitively; the original spelling of each option is returned.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_SUGGESTIONS = 3  # names offered at most in one "did you mean"
SUGGESTION_CUTOFF = 0.6  # difflib ratio below which a name is not offered (difflib's own default)
LONGEST_NAME = 100  # a word longer than any name is offered nothing (difflib on a 1 MB key would take seconds)


def close_matches(word: str, options: Iterable[str], n: int = MAX_SUGGESTIONS,
                  cutoff: float = SUGGESTION_CUTOFF) -> list[str]:
    """Up to ``n`` of ``options`` closest to ``word`` (case-insensitive), best first, without duplicates."""
    import difflib  # a miss only: kept off the start-up of every command

    if len(word) > LONGEST_NAME:
        return []
    by_key: dict[str, str] = {}
    for o in options:
        by_key.setdefault(o.lower(), o)
    hits = difflib.get_close_matches(word.lower(), list(by_key), n=n, cutoff=cutoff)
    return [by_key[h] for h in hits]


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

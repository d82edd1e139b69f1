"""Which fields of a workload the caller gave: "given" is a fact of the call, not a comparison with the default (a
value given equal to its default is still given, and must not be labelled "(default)" in the assumptions).

:func:`tracks_given` wraps a frozen dataclass's ``__init__`` so that its ``given`` field holds the names of the fields
passed to the constructor (positionally or by keyword) with a value other than None. The readers (CLI flags, request
files, the web API) pass only what the user wrote, so ``given`` is what the user wrote. ``dataclasses.replace``
passes ``given`` itself, so a copy keeps the original's record: fields a tool changes are not the user's.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from itertools import compress, repeat
from operator import is_not
from typing import Any, TypeVar

from ..errors import InputError
from ..suggest import did_you_mean

T = TypeVar("T")


def tracks_given(cls: type[T]) -> type[T]:
    """Record the fields given to ``cls(...)`` in its ``given`` field (a ``frozenset[str] | None = None`` dataclass
    field, set to a frozenset by the constructor)."""
    init = cls.__init__
    names = [f.name for f in fields(cls) if f.init and f.name != "given"]  # type: ignore[arg-type]

    known = frozenset(names)
    # the names the command line and the web API give a field (their flags' spellings): a Python caller who writes
    # one is told the field's name here, not a bare TypeError (``OTHER_NAMES`` on the class: spelling -> field)
    other_names: dict[str, str] = getattr(cls, "OTHER_NAMES", {})
    # words that belong to another kind of question (``ELSEWHERE``: word -> where that question is asked)
    elsewhere: dict[str, str] = getattr(cls, "ELSEWHERE", {})

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given = kwargs.pop("given", None)
        try:
            init(self, *args, **kwargs)
        except TypeError:
            unknown = [k for k in kwargs if k not in known]
            if not unknown:
                raise
            word = unknown[0]
            hint = (f"; the field is {other_names[word]!r}" if word in other_names
                    else f"; {elsewhere[word]}" if word in elsewhere else did_you_mean(word, names))
            raise InputError(f"{cls.__name__} has no field {word!r}{hint}") from None
        if given is None:  # the names passed with a value other than None (keywords only: picked in C)
            given = compress(kwargs, map(is_not, kwargs.values(), repeat(None)))
            if args:
                given = [*(n for n, v in zip(names, args, strict=False) if v is not None), *given]
        object.__setattr__(self, "given", frozenset(given))

    setattr(cls, "__init__", __init__)  # noqa: B010 - mypy refuses a direct assignment to a method
    return cls

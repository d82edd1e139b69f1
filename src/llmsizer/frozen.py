"""A cheaper ``__init__`` for the frozen dataclasses an estimate makes by the thousand (assumptions, items, fit and
speed results): the same signature, defaults, field order, default factories and ``__post_init__`` call as the one
``dataclasses`` generates, but each field is stored in the instance ``__dict__`` directly instead of through
``object.__setattr__`` (what a frozen dataclass's generated ``__init__`` does, to step around its own refusing
``__setattr__``). Everything else stays the dataclass's: assignment after construction still raises
``FrozenInstanceError``, and ``__eq__``, ``__hash__``, ``__repr__``, ``fields`` and ``replace`` are unchanged.

A ``recommend`` over a 5,000-entry hardware file builds ~55,000 assumptions and ~10,000 fit results; a training
fit ~60 assumptions and ~20 items. ``tests/test_frozen.py`` checks each decorated class against the ``__init__``
``dataclasses`` makes for the same fields (signature, stored values and their order, fresh factory values).
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (as ``dataclasses``' own sentinel)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def fast_init(cls: type[T]) -> type[T]:
    """Replace the generated ``__init__`` of the frozen dataclass ``cls`` (apply above ``@dataclass``). Only plain
    fields are supported (every field in ``__init__``, none keyword-only, no ``InitVar`` or ``ClassVar``, no
    ``__slots__``): anything else is a TypeError at import, not a silent difference."""
    if not is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    fs = fields(cls)  # type: ignore[arg-type]
    if (len(fs) != len(cls.__dataclass_fields__) or "__slots__" in cls.__dict__  # type: ignore[attr-defined]
            or any(not f.init or f.kw_only is True or f.name == "self" or f.name.startswith("_fi_") for f in fs)):
        raise TypeError(f"fast_init: {cls.__name__} has a field this __init__ does not build")
    ns: dict[str, Any] = {"_fi_factory": _FACTORY}
    params, body = [], []
    for f in fs:
        if f.default is not MISSING:
            ns[f"_fi_default_{f.name}"] = f.default
            params.append(f"{f.name}=_fi_default_{f.name}")
            body.append(f"    _fi_d[{f.name!r}] = {f.name}")
        elif f.default_factory is not MISSING:
            ns[f"_fi_make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_fi_factory")
            body.append(f"    _fi_d[{f.name!r}] = _fi_make_{f.name}() if {f.name} is _fi_factory else {f.name}")
        else:
            params.append(f.name)
            body.append(f"    _fi_d[{f.name!r}] = {f.name}")
    post = ["    self.__post_init__()"] if hasattr(cls, "__post_init__") else []
    src = "\n".join([f"def __init__(self, {', '.join(params)}):", "    _fi_d = self.__dict__", *body, *post])
    exec(src, ns)  # noqa: S102 - the source is built above from the class's own field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in fs} | {"return": None}
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses a direct assignment to a method
    setattr(cls, "__fast_init__", True)  # noqa: B010 - (replace_fields and replace_checked check it)
    return cls


def replace_fields(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for an instance of a ``fast_init`` class without ``__post_init__``
    (nothing to re-check): a new instance holding the same field values in the same order, ``changes`` applied,
    without the per-field loop of ``replace`` and ``__init__``. Only the fields are copied (an instance's own cache
    in its ``__dict__``, such as ``Estimate.total``'s, is not). A name that is not a field is a TypeError, as
    ``replace`` raises."""
    cls = type(obj)
    names = cls.__dataclass_fields__.keys()  # type: ignore[attr-defined]
    if hasattr(cls, "__post_init__") or not cls.__dict__.get("__fast_init__"):
        raise TypeError(f"replace_fields: {cls.__name__} is not a fast_init class without __post_init__")
    if not changes.keys() <= names:
        raise TypeError(f"{cls.__name__} has no field {sorted(changes.keys() - names)}")
    new = object.__new__(cls)
    d = obj.__dict__
    new.__dict__.update(zip(names, map(d.__getitem__, names), strict=True), **changes)
    return new


def replace_checked(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for an instance of a ``fast_init`` class, ``__post_init__`` or not:
    the class called with every field's value, ``changes`` applied, so its ``__init__`` (with any wrapper, such as
    ``given``'s record, specs/given.py) and its ``__post_init__`` build and check the new instance as under
    ``replace``; the keywords picked in C instead of ``replace``'s loop over the fields (a ZeRO search replaces a
    61-field TrainingWorkload once per stage). A name that is not a field is a TypeError, as ``replace`` raises."""
    cls = type(obj)
    names = cls.__dataclass_fields__.keys()  # type: ignore[attr-defined]
    if not cls.__dict__.get("__fast_init__"):
        raise TypeError(f"replace_checked: {cls.__name__} is not a fast_init class")
    if not changes.keys() <= names:
        raise TypeError(f"{cls.__name__} has no field {sorted(changes.keys() - names)}")
    d = obj.__dict__
    return cls(**dict(zip(names, map(d.__getitem__, names), strict=True), **changes))

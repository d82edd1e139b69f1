"""frozen.fast_init against the truth it replaces: the ``__init__`` ``dataclasses`` itself generates for the same
fields (a fresh frozen dataclass made with ``make_dataclass`` from each decorated class's fields). Same signature
(names, order, defaults), the same values stored in the same order, a fresh object from each default factory, the
instance still frozen; every class the source decorates is checked, so a new one is too."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

import llmsizer
from llmsizer.frozen import fast_init

SRC = Path(llmsizer.__file__).parent


def _decorated() -> list[type]:
    """Every class in the package source written as ``@fast_init`` above ``@dataclass(frozen=True)``."""
    out = []
    for info in pkgutil.walk_packages([str(SRC)], "llmsizer."):
        path = SRC.joinpath(*info.name.split(".")[1:])
        file = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        names = re.findall(r"^@fast_init\n@dataclass\(frozen=True\)\nclass (\w+)", file.read_text("utf-8"), re.M)
        if names:
            mod = importlib.import_module(info.name)
            out += [getattr(mod, n) for n in names]
    return out


DECORATED = _decorated()


def _reference(cls: type) -> type:
    """A frozen dataclass with ``cls``'s fields and the ``__init__`` dataclasses generates."""
    spec = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
            for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass("Ref", spec, frozen=True)


def _sample(cls: type) -> tuple[list[Any], dict[str, Any]]:
    """Distinct marker objects for the required fields (positional) and for half of the defaulted ones (by name)."""
    args, kwargs = [], {}
    for n, f in enumerate(dataclasses.fields(cls)):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            args.append(object())
        elif n % 2:
            kwargs[f.name] = object()
    return args, kwargs


def test_the_hot_classes_are_decorated() -> None:
    names = {c.__name__ for c in DECORATED}
    assert {"Assumption", "Item", "Estimate", "FitResult", "SpeedEstimate", "Term"} <= names


@pytest.mark.parametrize("cls", DECORATED, ids=lambda c: c.__name__)
def test_same_init_as_dataclasses(cls: type) -> None:
    ref = _reference(cls)
    mine, theirs = inspect.signature(cls.__init__).parameters, inspect.signature(ref.__init__).parameters
    assert list(mine) == list(theirs)
    for name in mine:
        a, b = mine[name].default, theirs[name].default
        assert a is b or repr(a) == repr(b) == "<factory>", name
        assert mine[name].kind is theirs[name].kind, name
    if hasattr(cls, "__post_init__"):
        pytest.skip("a __post_init__ would validate the markers")
    args, kwargs = _sample(cls)
    got, want = cls(*args, **kwargs), ref(*args, **kwargs)
    assert list(got.__dict__) == list(want.__dict__) == [f.name for f in dataclasses.fields(cls)]
    assert all(x is y or (type(x) is type(y) and x == y) for x, y in zip(got.__dict__.values(),
                                                                         want.__dict__.values(), strict=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(got, dataclasses.fields(cls)[0].name, 1)
    # a default factory makes a fresh object per instance, as dataclasses' does
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING and f.name not in kwargs:
            assert getattr(got, f.name) is not getattr(cls(*args, **kwargs), f.name)
    # replace builds through the same __init__
    assert dataclasses.replace(got) == got


def test_refuses_what_it_does_not_build() -> None:
    @dataclasses.dataclass(frozen=True)
    class KwOnly:
        a: int = dataclasses.field(default=1, kw_only=True)

    @dataclasses.dataclass(frozen=True)
    class NoInit:
        a: int = dataclasses.field(default=1, init=False)

    @dataclasses.dataclass
    class NotFrozen:
        a: int = 1

    for cls in (KwOnly, NoInit, NotFrozen):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


def test_post_init_runs() -> None:
    seen = []

    @fast_init
    @dataclasses.dataclass(frozen=True)
    class Checked:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)

        def __post_init__(self) -> None:
            seen.append((self.a, self.b))

    Checked(3)
    Checked(4, [1])
    assert seen == [(3, []), (4, [1])]


def test_replace_fields_is_dataclasses_replace() -> None:
    from llmsizer.estimate.speed import SpeedEstimate
    from llmsizer.frozen import replace_fields
    from llmsizer.result import Estimate, Item

    args, kwargs = _sample(SpeedEstimate)
    sp = SpeedEstimate(*args, **kwargs)
    for kw in ({}, {"device": "rtx-4090"}, {"device": "x", "concurrency": 3}):
        new, ref = replace_fields(sp, **kw), dataclasses.replace(sp, **kw)
        assert new == ref and new is not sp
        assert [(k, v) for k, v in new.__dict__.items()] == [(k, v) for k, v in ref.__dict__.items()]
    with pytest.raises(TypeError):
        replace_fields(sp, colour="red")
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace_fields(sp).device = "x"  # type: ignore[misc]
    est = Estimate("inference", "m", (Item("weights", 10),), ())
    assert est.total("device") == (10, 10, 10)  # its sums cached in its __dict__: not copied
    copy = replace_fields(est, items=(Item("weights", 20),))
    assert copy.total("device") == (20, 20, 20) and "_totals" not in dataclasses.replace(est).__dict__
    with pytest.raises(TypeError, match="replace_fields"):
        replace_fields(_reference(Item)("a", 1))


def test_workloads_store_every_field_in_order() -> None:
    """The workloads (fast_init under tracks_given, with a __post_init__ that checks and normalizes): every field
    in the instance dict in field order (the estimate memos key on its values), ``given`` as tracks_given records
    it, the values normalized as before."""
    from llmsizer.specs import InferenceWorkload, TrainingWorkload

    for w in (TrainingWorkload(method="lora", targets="q,v", seq_len=4096), TrainingWorkload(),
              InferenceWorkload(context=8192, engine="vLLM"), InferenceWorkload()):
        assert list(w.__dict__) == [f.name for f in dataclasses.fields(w)]
    w = TrainingWorkload(method="lora", targets="q,v", seq_len=4096)
    assert w.targets == ("q", "v") and w.given == {"method", "targets", "seq_len"}
    assert dataclasses.replace(w, seq_len=2048).given == w.given
    assert InferenceWorkload(context=8192, engine="vLLM").engine == "vllm"


def test_replace_checked_is_dataclasses_replace() -> None:
    """The class rebuilt from every field, as ``dataclasses.replace`` does: the same stored values in the same order,
    ``given`` kept (specs/given.py), ``__post_init__`` run (its normalisation and its refusals)."""
    from llmsizer.errors import InputError
    from llmsizer.frozen import replace_checked
    from llmsizer.result import Item
    from llmsizer.specs import TrainingWorkload

    workloads = (TrainingWorkload(method="full", gpus=8, memory=80 * 2**30),
                 TrainingWorkload(method="lora", gpus=4, seq_len=2048.0, memory=24 * 2**30, headroom=0.2),
                 TrainingWorkload(method="full", gpus=16, zero=3, offload="params", gpus_per_node=8))
    for w in workloads:
        for kw in ({}, {"zero": 1}, {"zero": 3, "micro_batch": 4}, {"seq_len": 4096.0}):
            try:
                ref = dataclasses.replace(w, **kw)
            except InputError as e:  # a stage the workload refuses: the same refusal
                with pytest.raises(InputError, match=re.escape(str(e))):
                    replace_checked(w, **kw)
                continue
            new = replace_checked(w, **kw)
            assert new is not w and new == ref and new.given == ref.given == w.given
            assert list(new.__dict__.items()) == list(ref.__dict__.items())
    assert any(w.offload == "params" for w in workloads)  # (zero 1 with offloaded params: refused above)
    with pytest.raises(TypeError):
        replace_checked(workloads[0], colour="red")
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace_checked(workloads[0]).zero = 2  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int = 1

    with pytest.raises(TypeError, match="fast_init"):
        replace_checked(Plain())
    assert replace_checked(Item("weights", 10), bytes=11) == dataclasses.replace(Item("weights", 10), bytes=11)


def test_replace_fields_is_dataclasses_replace_on_fit_results() -> None:
    """The changes estimate/fit.py makes with ``replace_fields`` on a FitResult (the rate path: the speed with the
    wait for admission, the queue keys, the derived concurrency, the rate warnings): the same fields, in the same
    order, as ``dataclasses.replace`` gives."""
    from llmsizer.estimate.fit import FitResult
    from llmsizer.frozen import replace_fields

    args, kwargs = _sample(FitResult)
    r = FitResult(*args, **kwargs)
    for kw in ({"speed": object()}, {"details": {"a": 1}}, {"estimate": object(), "assumptions": ()},
               {"warnings": ("w",), "details": {}}):
        new, ref = replace_fields(r, **kw), dataclasses.replace(r, **kw)
        assert list(new.__dict__) == list(ref.__dict__) == [f.name for f in dataclasses.fields(FitResult)]
        assert all(x is y for x, y in zip(new.__dict__.values(), ref.__dict__.values(), strict=True))

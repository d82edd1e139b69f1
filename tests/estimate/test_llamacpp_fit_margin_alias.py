"""``LlamaCppFit.margin``, the field renamed ``margins`` (one per GPU) by the one llama.cpp margin rule (dc1227b3),
stays readable for one release: a read-only property that warns (DeprecationWarning) and gives the former field's
meaning, the one margin every GPU keeps. The expected margin is llama.cpp's own default ``--fit-target``,
1024 MiB per device (common/common.h:483, ggml-org/llama.cpp@0c1e57098)."""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.llamacpp_fit import fit_llamacpp
from llmsizer.units import GiB, MiB


def test_margin_is_a_deprecated_read_only_alias_of_the_one_margin():
    r = fit_llamacpp("qwen2.5-0.5b", [24 * GiB, 24 * GiB], weights="q8_0", context=8192)
    with pytest.warns(DeprecationWarning, match="margins"):
        old = r.margin
    assert old == 1024 * MiB and r.margins == (1024 * MiB, 1024 * MiB)
    with pytest.raises((AttributeError, dataclasses.FrozenInstanceError)):
        r.margin = 0  # type: ignore[misc]


def test_a_given_fit_target_is_the_margin():
    r = fit_llamacpp("qwen2.5-0.5b", [24 * GiB], weights="q8_0", context=8192, fit_target=512 * MiB)
    with pytest.warns(DeprecationWarning):
        assert r.margin == 512 * MiB


def test_margins_that_differ_by_gpu_have_no_one_number():
    # a headroom share of unequal free memory: 10% of 24 GiB and of 16 GiB differ
    r = fit_llamacpp("qwen2.5-0.5b", [24 * GiB, 16 * GiB], weights="q8_0", context=8192, headroom=0.1)
    assert len(set(r.margins)) == 2
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="margins"):
        r.margin  # noqa: B018

"""estimate/engines.py parse_version: the release tags the engines publish (GitHub tags of vllm-project/vllm and
sgl-project/sglang, PEP 440 public versions) are read to (major, minor); anything else is refused in one line, never
read as a different release (0.5e3 was 0.53, 0.-1 was 0.1, 0.19.x and 1.2.3.4.5 passed)."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.engines import parse_version


@pytest.mark.parametrize(("tag", "expected"), [
    ("0.19", (0, 19)), ("0.19.1", (0, 19)), ("v0.8.5.post1", (0, 8)),  # vllm tags v0.8.5.post1, v0.19.1
    ("0.4.6.post1", (0, 4)), ("0.7.0rc1", (0, 7)), ("0.6.4.dev0", (0, 6)), (" 0.13 ", (0, 13)), ("1.0", (1, 0)),
    ("0.10.1.1", (0, 10)), ("v0.10.1.1", (0, 10)),  # vLLM's hotfix tag v0.10.1.1 (the release VL10's log states)
])
def test_release_tags_are_read(tag: str, expected: tuple[int, int]) -> None:
    assert parse_version(tag) == expected


@pytest.mark.parametrize("bad", ["", "0", "1.", "latest", "0.19.x", "0.5e3", "0.-1", "-1.5", "1.2.3.4.5", "0.1x",
                                 "0.\u0663", "9" * 40 + ".1", "0.19\n0.20"])
def test_anything_else_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(InputError) as e:
        parse_version(bad)
    assert "\n" not in str(e.value) and "engine_version must look like" in str(e.value)


def test_a_version_without_its_engine_is_refused() -> None:
    """estimate_speed(engine_version=...) without engine= was silently the no-engine step."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.catalog.models import find
    from llmsizer.estimate.speed import estimate_speed

    with pytest.raises(InputError, match="needs its engine"):
        estimate_speed(find("qwen3-0.6b").spec(), builtin_catalog().devices["h100-sxm"], engine_version="0.13")


@pytest.mark.parametrize(("tag", "patch"), [("0.10.1.1", 1), ("0.11.1", 1), ("0.11", 0), ("0.8.5.post1", 5)])
def test_a_hotfix_tag_takes_its_patch_release(tag: str, patch: int) -> None:
    """vllm v0.10.1.1 is a hotfix of 0.10.1: the rules that change inside a minor release read its patch, 1."""
    from llmsizer.estimate.engines import release_patch

    assert release_patch("vllm", tag) == (0, int(tag.split(".")[1]), patch)

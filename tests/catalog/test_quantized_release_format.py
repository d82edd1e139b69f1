"""A catalog name that says its release is quantized is sized in that format (probe25 D2).

A name, id or alias with FP8/NVFP4/AWQ/GPTQ/MXFP4/INT4/INT8 in it names a checkpoint published in that format; its
entry must state the format (config.json ``quantization_config`` or, for a ModelOpt release, its
``hf_quant_config.json``), else it would be sized as bf16 with no warning. Nemotron-3-Super FP8's recipe is the
release's hf_quant_config.json (AIConfigurator's copy @095f58a5: ``{"quantization": {"quant_algo": "FP8", ...}}``),
which vLLM takes as the config's quantization_config (vllm 0.34.0 transformers_utils/config.py:996-1009)."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from llmsizer.catalog.models import find_spec
from llmsizer.errors import UnknownNameError
from llmsizer.formulas.weight_formats import modelopt_quant_algo, stored_format

QUANTIZED_NAME = re.compile(r"(?<![a-z])(fp8|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8)(?![a-z])", re.I)
UNQUANTIZED = {"bf16", "fp16", "fp32"}


def _entries() -> list[dict[str, object]]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return [json.loads(f.read_text("utf-8")) for f in folder.iterdir() if f.name.endswith(".json")]


def test_every_quantized_release_name_has_its_format() -> None:
    bad = []
    for d in _entries():
        names = [d["id"], d["name"], *(d.get("aliases") or [])]  # type: ignore[list-item]
        said = [n for n in names if QUANTIZED_NAME.search(str(n))]
        if said and stored_format(find_spec(str(d["name"])))[0] in UNQUANTIZED:
            bad.append((d["name"], said))
    assert not bad, f"names of quantized releases sized unquantized (state the release's format): {bad}"


def test_nemotron_3_super_fp8_is_sized_in_fp8() -> None:
    spec = find_spec("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    fmt, _group, why = stored_format(spec)
    assert fmt == "fp8" and "ModelOpt" in why


def test_nvfp4_release_is_not_an_alias_of_the_fp8_one() -> None:
    with pytest.raises(UnknownNameError):
        find_spec("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", variants=False)


@pytest.mark.parametrize(("q", "algo"), [
    ({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, "FP8"),  # hf_quant_config.json shape
    ({"quant_method": "modelopt", "quant_algo": "nvfp4"}, "NVFP4"),  # ModelOpt >= 0.31, in config.json
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, None),
    ({}, None),
])
def test_modelopt_quant_algo_shapes(q: dict[str, object], algo: str | None) -> None:
    assert modelopt_quant_algo(q) == algo

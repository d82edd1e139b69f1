"""probe21 D5: Llama-3.2-Vision (model_type mllama) is served by neither llama.cpp nor vLLM, so it is never placed
there, and naming either is one line on every surface (CLI exit 2, the web's 400 with the same text, Python).

The independent truth is each engine's own registry, transcribed here (read at the commits cited):
- llama.cpp: the architectures it loads, src/llama-arch.cpp ``LLM_ARCH_NAMES`` @00395eb2, and the vision projectors
  of its multimodal library, tools/mtmd/clip-impl.h ``PROJECTOR_TYPE_NAMES`` @0024aa74 (the excerpt a catalog family
  could map to). ggml-org/llama.cpp#9643 "Llama-3.2 11B Vision Support" was closed without it.
- vLLM: vllm/model_executor/models/registry.py @0002bff0 ``_PREVIOUSLY_SUPPORTED_MODELS``
  {"MllamaForConditionalGeneration": "0.10.2", ...}: dropped with the V0 engine's encoder-decoder models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web_api_helpers import cli_error_line, run_cli, run_cli_json

import llmsizer
from llmsizer.errors import FieldError
from llmsizer.estimate.model_warnings import ENGINE_LACKS_MODEL

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL = "llama-3.2-11b-vision-instruct"
LLAMACPP_ARCHS = {"llama", "llama4", "qwen2vl", "qwen3vl", "qwen3vlmoe", "gemma3", "gemma4"}  # excerpt, @00395eb2
# Qwen3.5 / 3.6 (added after @00395eb2): text arches qwen35 / qwen35moe (LLM_ARCH_QWEN35 / LLM_ARCH_QWEN35MOE), and
# convert_hf_to_gguf's conversion/qwen3vl.py registers Qwen3_5(Moe)ForConditionalGeneration with the Qwen3-VL
# vision converter (projector qwen3vl_merger); read in the copy intel/auto-round vendors
# (auto_round/export/export_to_gguf/conversion/qwen3vl.py:16, conversion/qwen.py:626)
LLAMACPP_ARCHS |= {"qwen35", "qwen35moe"}
LLAMACPP_PROJECTORS = {"qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "gemma3", "gemma4v", "llama4"}
# each catalog family with images -> (llama.cpp architecture, projector) it converts to; None: llama.cpp has neither
LLAMACPP_OF = {"gemma3": ("gemma3", "gemma3"), "gemma4": ("gemma4", "gemma4v"), "llama4": ("llama4", "llama4"),
               "qwen2_5_vl": ("qwen2vl", "qwen2.5vl_merger"), "qwen3_vl": ("qwen3vl", "qwen3vl_merger"),
               "qwen3_vl_moe": ("qwen3vlmoe", "qwen3vl_merger"), "qwen3_5": ("qwen35", "qwen3vl_merger"),
               "qwen3_5_moe": ("qwen35moe", "qwen3vl_merger"), "mllama": None}
VLLM_PREVIOUSLY_SUPPORTED = {"MllamaForConditionalGeneration": "0.10.2"}  # the excerpt of the catalog's families


def _catalog_with_images() -> dict[str, str]:
    folder = Path(llmsizer.__file__).parent / "catalog/data/models"
    out = {}
    for f in sorted(folder.glob("*.json")):
        c = json.loads(f.read_text())["config"]
        if "vision_config" in c:
            out[c["model_type"]] = c["architectures"][0]
    return out


def test_the_lacking_engines_follow_the_engines_registries() -> None:
    families = _catalog_with_images()
    assert set(families) == set(LLAMACPP_OF)  # every catalog family with images is checked
    lacks = {t for t, got in LLAMACPP_OF.items()
             if got is None or got[0] not in LLAMACPP_ARCHS or got[1] not in LLAMACPP_PROJECTORS}
    assert {t for t in families if t in ENGINE_LACKS_MODEL["llamacpp"]} == lacks == {"mllama"}
    assert {t for t, arch in families.items() if t in ENGINE_LACKS_MODEL["vllm"]} == \
        {t for t, arch in families.items() if arch in VLLM_PREVIOUSLY_SUPPORTED}


@pytest.mark.parametrize("device, engine", [("apple-m3-max-30c-36gb", "transformers"), ("rtx-4090", "transformers"),
                                            ("h100-sxm", "transformers")])
def test_the_default_engine_skips_them(client, device: str, engine: str) -> None:
    """Before: llama.cpp on the Apple chip and the RTX 4090, vLLM on the H100."""
    done = run_cli("fit", MODEL, "--device", device, "--json")
    assert done.returncode in (0, 1) and json.loads(done.stdout)["engine"] == engine  # fits or not, not refused
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": device})
    assert r.status_code == 200 and r.json()["engine"] == engine, r.text
    assert llmsizer.fit(MODEL, device).engine == engine
    row = run_cli_json("models", "llama-3.2-11b", "--fits-on", device)["models"][0]
    assert row["engine"] == engine


@pytest.mark.parametrize("engine, words", [("llamacpp", "llama.cpp has no mllama architecture"),
                                           ("vllm", "vLLM serves mllama no more since 0.10.2")])
def test_naming_one_is_one_line_everywhere(client, engine: str, words: str) -> None:
    line = cli_error_line("fit", MODEL, "--device", "h100-sxm", "--engine", engine)
    assert words in line and line.endswith("; give --engine transformers")
    r = client.post("/api/v1/fit", json={"model": MODEL, "device": "h100-sxm", "engine": engine})
    assert r.status_code == 400 and r.json()["field"] == "engine"
    assert r.json()["detail"] == line  # the field as the CLI names it, as every web 400 does
    with pytest.raises(FieldError, match=words):
        llmsizer.fit(MODEL, "h100-sxm", engine=engine)


def test_a_gguf_format_is_refused_not_moved() -> None:
    """A GGUF format runs on llama.cpp alone: the format given is kept and refused (exit 2), not served elsewhere."""
    done = run_cli("fit", MODEL, "--device", "apple-m3-max-30c-36gb", "--weights", "q4_k_m")
    assert done.returncode == 2 and "llama.cpp has no mllama architecture" in done.stderr

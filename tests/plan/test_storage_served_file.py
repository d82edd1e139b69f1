"""A plan that serves a model in a format other than its checkpoint's (DeepSeek-R1, stored FP8, served by llama.cpp as
a GGUF quant on an RTX 4090) stores the served file only, and says so: the model-files figure names the stored
checkpoint a self-conversion would also need, and the assumption is named. Served in its stored format (Llama-3.1-8B
bf16 on vLLM), no such assumption. The stored checkpoint's size is the weights of its stored format, independent of
the served format's (the two differ by more than the GGUF quant's own bytes), with the multi-token-prediction layer the
checkpoint stores (formulas/mtp.py)."""

from __future__ import annotations

import re

from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request


def _plan(model: str, device: str) -> dict:
    text = (f"version: 1\ntitle: storage\njobs:\n- name: j\n  kind: inference\n  model: {{name: {model}}}\n"
            f"  resources: {{device: {device}}}\n"
            "  traffic: {concurrency: {typical: 1, peak: 1}, context: {typical: 4k, peak: 4k}}\n")
    return make_plan(parse_request(text, source="storage.yaml"), alternatives=False).to_dict()["jobs"][0]


def _model_files(job: dict) -> dict:
    storage = next(s for s in job["sections"] if s["key"] == "storage")
    return next(f for f in storage["figures"] if f["key"] == "model_files")


def test_served_gguf_of_an_fp8_checkpoint_names_the_checkpoint() -> None:
    job = _plan("deepseek-r1", "rtx-4090")
    files = _model_files(job)
    spec = load_model("deepseek-r1")
    stored = stored_format(spec)[0]
    assert stored == "fp8-block"
    assert "served file only" in files["formula"] and stored in files["formula"]
    # the checkpoint with its MTP layer (formulas/mtp.py): a tensor listing of DeepSeek-R1's safetensors sums to
    # 641.29 GiB (tests/formulas/test_mtp.py); the figure is in GB, two decimals
    said = float(re.search(r"needs that checkpoint, ([\d,.]+) GB", files["formula"]).group(1).replace(",", ""))
    assert abs(said - 641.29 * 2**30 / 1e9) <= 0.005 * 2**30 / 1e9 + 0.005
    assert files["value"] < 0.9 * weight_bytes(spec, stored).total  # the GGUF quant, not the FP8 checkpoint
    assert "storage.model_files" in {a["name"] for a in job["assumptions"]}


def test_served_in_its_stored_format_needs_no_such_assumption() -> None:
    job = _plan("llama-3.1-8b", "h100-sxm")
    assert "served file only" not in _model_files(job)["formula"]
    assert "storage.model_files" not in {a["name"] for a in job["assumptions"]}


def test_a_model_read_from_its_folder_is_planned_and_stores_its_files(tmp_path) -> None:
    """A local safetensors folder (weights "file": the bytes its headers list) is planned as `fit` sizes it; plan
    refused it with "unknown weight format 'file'" (probe16 D-A). Its model files are the safetensors' own tensor
    bytes (the file size less the 8-byte length and the header: readers_helpers.safetensors_data_size)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readers"))
    import readers_helpers as H  # tiny real safetensors folders written by the safetensors library
    folder = tmp_path / "tiny-llama"
    files = H.write_folder(folder, H.LLAMA_CONFIG, H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG)))
    job = _plan(str(folder), "l4")
    assert _model_files(job)["value"] == sum(map(H.safetensors_data_size, files))
    assert "served file only" not in _model_files(job)["formula"]

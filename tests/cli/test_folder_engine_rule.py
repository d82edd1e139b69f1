"""A safetensors folder gets the default engine of the format it stores, as the catalog model does with that format
named (probe16 D-D): estimate/device.py ``engine_rule`` reads the folder's quantization_config the way it reads
``--weights``. Before, the folder reached the rule with no format, one RTX 4090 chose llama.cpp, and llama.cpp,
which loads GGUF files only, refused the folder (exit 2), while ``fit qwen2.5-7b --weights awq-int4`` chose vLLM
and fit (22.26 GiB of 23.99).

The AWQ folder is laid out as AutoAWQ writes Qwen2.5-7B (WQLinear_GEMM: qweight int32 [in, out/8], qzeros int32
[in/g, out/8], scales fp16 [in/g, out]; embeddings, lm_head, norms and q/k/v biases fp16), header-only and sparse;
the truth the bytes are checked against is the sum of those tensors' sizes written here, not our output."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest
from cli_run import answer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "readers"))
from readers_helpers import LLAMA_CONFIG, llama_shapes, random_arrays, write_folder  # noqa: E402

CATALOG = "qwen2.5-7b"
GROUP = 128


def _catalog_config() -> dict:
    path = ROOT / "src/llmsizer/catalog/data/models" / f"{CATALOG}.json"
    return dict(json.loads(path.read_text())["config"])


def awq_folder(folder: Path) -> int:
    """Write a header-only AutoAWQ checkpoint of the catalog model into ``folder``; return its tensor bytes."""
    cfg = _catalog_config()
    cfg["torch_dtype"] = "float16"
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm",
                                  "zero_point": True}
    h, inter, layers, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    tensors: dict[str, dict] = {}
    end = 0

    def add(name: str, dtype: str, shape: list[int]) -> None:
        nonlocal end
        n = 1
        for s in shape:
            n *= s
        size = n * {"F16": 2, "I32": 4}[dtype]
        tensors[name] = {"dtype": dtype, "shape": shape, "data_offsets": [end, end + size]}
        end += size

    add("model.embed_tokens.weight", "F16", [vocab, h])
    add("lm_head.weight", "F16", [vocab, h])
    add("model.norm.weight", "F16", [h])
    for i in range(layers):
        p = f"model.layers.{i}."
        for name, n_in, n_out, bias in (("self_attn.q_proj", h, h, True), ("self_attn.k_proj", h, kv, True),
                                        ("self_attn.v_proj", h, kv, True), ("self_attn.o_proj", h, h, False),
                                        ("mlp.gate_proj", h, inter, False), ("mlp.up_proj", h, inter, False),
                                        ("mlp.down_proj", inter, h, False)):
            add(p + name + ".qweight", "I32", [n_in, n_out // 8])
            add(p + name + ".qzeros", "I32", [n_in // GROUP, n_out // 8])
            add(p + name + ".scales", "F16", [n_in // GROUP, n_out])
            if bias:
                add(p + name + ".bias", "F16", [n_out])
        add(p + "input_layernorm.weight", "F16", [h])
        add(p + "post_attention_layernorm.weight", "F16", [h])
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    header = json.dumps({**tensors, "__metadata__": {"format": "pt"}}).encode()
    header += b" " * (-len(header) % 8)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.truncate(8 + len(header) + end)  # sparse: the reader reads headers only
    return end


def test_an_awq_folder_gets_the_engine_and_bytes_of_the_catalog_model_with_awq_named(tmp_path, capsys):
    folder = tmp_path / "awq7b"
    tensor_bytes = awq_folder(folder)
    args = ["--context", "8k", "--device", "rtx-4090"]
    _, fol = answer(["fit", str(folder), *args], capsys)
    _, cat = answer(["fit", CATALOG, "--weights", "awq-int4", *args], capsys)
    assert fol["engine"] == cat["engine"] == "vllm"
    assert fol["memory"]["details"]["weights_bytes"] == cat["memory"]["details"]["weights_bytes"] == tensor_bytes
    assert fol["fits"] and cat["fits"] and fol["memory_per_device"] == cat["memory_per_device"]
    why = {a["name"]: a for a in fol["assumptions"]}["engine"]["why"]
    assert "awq-int4 weights run on vLLM on GPUs" in why and "folder's stored format" in why
    _, inf = answer(["infer", str(folder), *args], capsys)
    assert {a["name"]: a for a in inf["assumptions"]}["engine"]["value"] == "vllm"


@pytest.mark.parametrize(("device", "memory", "engine"), [("rtx-4090", None, "vllm"), ("cpu", "32GiB", "transformers")])
def test_an_unquantized_folder_is_not_sent_to_llamacpp(tmp_path, capsys, device, memory, engine):
    """llama.cpp, the device rule's engine on one consumer card and on CPUs, loads GGUF files only: a bf16
    safetensors folder goes to the next engine that loads it, and fits rather than being refused."""
    cfg = dict(LLAMA_CONFIG, torch_dtype="bfloat16")
    write_folder(tmp_path / "m", cfg, random_arrays(llama_shapes(cfg)))
    mem = ["--memory", memory] if memory else []
    code, fit = answer(["fit", str(tmp_path / "m"), "--context", "256", "--device", device, *mem],
                       capsys)
    assert code == 0 and fit["engine"] == engine
    assert "llama.cpp loads GGUF files, not a safetensors folder" in {a["name"]: a for a in fit["assumptions"]}[
        "engine"]["why"]


@pytest.mark.parametrize("engine", ["vllm", "transformers"])
def test_awq_runs_in_fp16_from_the_catalog_as_from_the_folder(tmp_path, engine):
    """probe16 D-I: AutoAWQ writes its checkpoint in float16 (the folder above: torch_dtype float16, scales and the
    unquantized tensors F16), and vLLM's AWQ kernel takes fp16 activations only (awq.py get_supported_act_dtypes at
    vLLM 92d756e9). The catalog model asked at awq-int4 is that checkpoint: the same dtype and KV dtype as the folder
    (before: bf16, the base model's), the same bytes; the catalog model at its own bf16 stays bf16."""
    from llmsizer import estimate_inference
    folder = tmp_path / "awq7b"
    awq_folder(folder)
    kw = dict(engine=engine, context=8192, concurrency=4, device="l4")
    cat = estimate_inference(CATALOG, weights="awq-int4", **kw)
    fol = estimate_inference(str(folder), **kw)

    def dtypes(e):
        a = {x.name: x.value for x in e.assumptions}
        return a["dtype"], a["kv_dtype"]

    assert json.loads(folder.joinpath("config.json").read_text())["torch_dtype"] == "float16"
    assert dtypes(cat) == dtypes(fol) == ("fp16", "fp16")
    assert cat.total_bytes == fol.total_bytes
    assert dtypes(estimate_inference(CATALOG, **kw))[0] == "bf16"  # the base checkpoint: torch_dtype bfloat16

"""spec_from_folder: config.json + safetensors headers of tiny real checkpoints -> exact FileWeights."""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readers_helpers import LLAMA_CONFIG, llama_shapes, random_arrays, safetensors_data_size, write_folder
from safetensors.numpy import save_file

from llmsizer.errors import LlmsizerError, ModelFileError
from llmsizer.formulas.params import count_params
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.readers.hf_folder import layer_of, role_of, spec_from_folder
from llmsizer.readers.safetensors_header import TensorInfo

LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _layer_sum(arrays: dict, i: int) -> int:
    return sum(a.nbytes for k, a in arrays.items() if k.startswith(f"model.layers.{i}."))


def test_llama_fp32_params_and_bytes_match_the_file_exactly(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))
    (path,) = write_folder(tmp_path, LLAMA_CONFIG, arrays)
    spec = spec_from_folder(tmp_path)
    fw = spec.file_weights
    assert fw is not None
    assert count_params(spec).total == sum(a.size for a in arrays.values()) == fw.params
    assert fw.total_bytes == safetensors_data_size(path) == path.stat().st_size - 8 - _header_len(path)
    assert fw.by_dtype == (("F32", fw.total_bytes),)
    assert fw.layer_bytes == (_layer_sum(arrays, 0), _layer_sum(arrays, 1))
    assert fw.embedding_bytes == arrays["model.embed_tokens.weight"].nbytes
    assert fw.output_bytes == arrays["lm_head.weight"].nbytes
    assert fw.note == ""
    assert fw.path == str(tmp_path)
    assert spec.name == tmp_path.name and spec.num_layers == 2 and spec.num_kv_heads == 2
    assert weight_bytes(spec, "fp32").total == fw.total_bytes


def _header_len(path) -> int:
    return int.from_bytes(path.read_bytes()[:8], "little")


def test_sharded_folder_with_index(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))
    files = write_folder(tmp_path, LLAMA_CONFIG, arrays, shards=2)
    spec = spec_from_folder(tmp_path)
    assert spec.file_weights.total_bytes == sum(safetensors_data_size(f) for f in files)
    assert count_params(spec).total == spec.file_weights.params == sum(a.size for a in arrays.values())
    assert sum(spec.file_weights.layer_bytes) == _layer_sum(arrays, 0) + _layer_sum(arrays, 1)


def test_tied_embeddings_have_no_output_bytes(tmp_path):
    cfg = dict(LLAMA_CONFIG, tie_word_embeddings=True)
    arrays = random_arrays(llama_shapes(cfg))
    write_folder(tmp_path, cfg, arrays)
    spec = spec_from_folder(tmp_path)
    assert spec.file_weights.output_bytes == 0
    assert count_params(spec).total == spec.file_weights.params


def test_tie_flag_contradicted_by_the_files_is_noted(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))  # has lm_head
    write_folder(tmp_path, dict(LLAMA_CONFIG, tie_word_embeddings=True), arrays)
    assert "lm_head" in spec_from_folder(tmp_path).file_weights.note


def test_bf16_checkpoint_written_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    cfg = dict(LLAMA_CONFIG, torch_dtype="bfloat16")
    tensors = {k: torch.zeros(s, dtype=torch.bfloat16) for k, s in llama_shapes(cfg).items()}
    tmp_path.joinpath("config.json").write_text(json.dumps(cfg))
    save_torch(tensors, str(tmp_path / "model.safetensors"))
    spec = spec_from_folder(tmp_path)
    fw = spec.file_weights
    assert fw.by_dtype == (("BF16", 2 * count_params(spec).total),)
    assert fw.total_bytes == safetensors_data_size(tmp_path / "model.safetensors") == weight_bytes(spec, "bf16").total


def _gptq_arrays(cfg: dict, group: int, bits: int = 4) -> dict:
    """AutoGPTQ QuantLinear layout: qweight int32 [in*bits/32, out], qzeros int32 [groups, out*bits/32],
    scales fp16 [groups, out], g_idx int32 [in]; everything else fp16."""
    out: dict = {}
    for name, shape in llama_shapes(cfg).items():
        module = name.rsplit(".", 2)[-2]
        if module in LINEARS:
            o, i = shape
            base = name[: -len(".weight")]
            groups = math.ceil(i / group)
            out[base + ".qweight"] = np.zeros((i * bits // 32, o), np.int32)
            out[base + ".qzeros"] = np.zeros((groups, o * bits // 32), np.int32)
            out[base + ".scales"] = np.zeros((groups, o), np.float16)
            out[base + ".g_idx"] = np.zeros((i,), np.int32)
        else:
            out[name] = np.zeros(shape, np.float16)
    return out


def test_gptq_int32_packing_is_noted_and_bytes_are_exact(tmp_path):
    cfg = dict(LLAMA_CONFIG, torch_dtype="float16",
               quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 16, "desc_act": False})
    arrays = _gptq_arrays(cfg, 16)
    (path,) = write_folder(tmp_path, cfg, arrays)
    spec = spec_from_folder(tmp_path)
    fw = spec.file_weights
    assert fw.total_bytes == safetensors_data_size(path)
    assert dict(fw.by_dtype) == {"I32": sum(a.nbytes for a in arrays.values() if a.dtype == np.int32),
                                 "F16": sum(a.nbytes for a in arrays.values() if a.dtype == np.float16)}
    assert fw.params == sum(a.size for a in arrays.values()) != count_params(spec).total
    assert "GPTQ" in fw.note and "int32" in fw.note
    # the GPTQ formula of formulas/weight_formats.py describes this layout byte for byte
    assert weight_bytes(spec, "gptq-int4", 16).total == fw.total_bytes


def _bnb4_arrays(cfg: dict) -> dict:
    """bitsandbytes Linear4bit serialization: packed uint8 weight, fp32 absmax per 64, 16-entry quant_map,
    a uint8 JSON quant_state; other tensors fp16."""
    out: dict = {}
    for name, shape in llama_shapes(cfg).items():
        n = math.prod(shape)
        if name.rsplit(".", 2)[-2] in LINEARS:
            out[name] = np.zeros((n // 2, 1), np.uint8)
            out[name + ".absmax"] = np.zeros((math.ceil(n / 64),), np.float32)
            out[name + ".quant_map"] = np.zeros((16,), np.float32)
            out[name + ".quant_state.bitsandbytes__nf4"] = np.zeros((80,), np.uint8)
        else:
            out[name] = np.zeros(shape, np.float16)
    return out


def test_bitsandbytes_uint8_packing_is_noted(tmp_path):
    cfg = dict(LLAMA_CONFIG, quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True,
                                                  "bnb_4bit_quant_type": "nf4"})
    arrays = _bnb4_arrays(cfg)
    (path,) = write_folder(tmp_path, cfg, arrays)
    fw = spec_from_folder(tmp_path).file_weights
    assert fw.total_bytes == safetensors_data_size(path)
    assert "bitsandbytes" in fw.note
    assert dict(fw.by_dtype)["U8"] == sum(a.nbytes for a in arrays.values() if a.dtype == np.uint8)


def test_int8_weights_with_row_scales_match_the_llm_int8_formula(tmp_path):
    cfg = dict(LLAMA_CONFIG, quantization_config={"quant_method": "bitsandbytes", "load_in_8bit": True})
    arrays: dict = {}
    for name, shape in llama_shapes(cfg).items():
        if name.rsplit(".", 2)[-2] in LINEARS:
            arrays[name] = np.zeros(shape, np.int8)
            arrays[name[: -len("weight")] + "SCB"] = np.zeros((shape[0],), np.float32)
        else:
            arrays[name] = np.zeros(shape, np.float16)
    (path,) = write_folder(tmp_path, cfg, arrays)
    spec = spec_from_folder(tmp_path)
    assert spec.file_weights.total_bytes == safetensors_data_size(path) == weight_bytes(spec, "llm.int8").total
    assert "scales" in spec.file_weights.note


def test_mxfp4_blocks_are_recognised():
    from llmsizer.readers.hf_folder import _packing_causes

    tensors = [TensorInfo("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", (4, 64, 2, 16), 8192),
               TensorInfo("model.layers.0.mlp.experts.gate_up_proj_scales", "U8", (4, 64, 2), 512)]
    assert any("MXFP4" in c for c in _packing_causes(tensors))


def test_extra_layers_count_in_total_not_per_layer(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))
    arrays["model.layers.2.eh_proj.weight"] = np.zeros((32, 64), np.float32)  # an MTP layer past num_layers
    write_folder(tmp_path, LLAMA_CONFIG, arrays)
    fw = spec_from_folder(tmp_path).file_weights
    assert len(fw.layer_bytes) == 2
    assert fw.total_bytes == sum(a.nbytes for a in arrays.values())
    assert "layer(s) 2" in fw.note


def test_tensor_name_classification():
    assert layer_of("model.layers.12.self_attn.q_proj.weight") == 12
    assert layer_of("model.language_model.layers.3.mlp.up_proj.weight") == 3
    assert layer_of("transformer.h.7.attn.c_attn.weight") == 7
    assert layer_of("model.vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight") is None
    assert layer_of("model.norm.weight") is None
    assert role_of("model.embed_tokens.weight") == "embedding"
    assert role_of("transformer.wte.weight") == "embedding"
    assert role_of("lm_head.weight") == "output"
    assert role_of("model.vision_tower.vision_model.embeddings.patch_embedding.weight") == "other"


def test_missing_config_json(tmp_path):
    save_file({"w": np.zeros(2, np.float32)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelFileError) as e:
        spec_from_folder(tmp_path)
    assert str(tmp_path) in str(e.value) and "config.json" in str(e.value)


def test_folder_without_safetensors_keeps_the_config_spec_and_says_so(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not opened")
    spec = spec_from_folder(tmp_path)
    assert spec.file_weights is None
    assert any("no *.safetensors" in n and "pytorch_model.bin" in n for n in spec.notes)


@pytest.mark.parametrize("damage, words", [
    (lambda b: b[:-10], "truncated"),
    (lambda b: (10**9).to_bytes(8, "little") + b[8:], "larger than the file"),
    (lambda b: b[:8] + b"[" + b[9:], "JSON"),
    (lambda b: b[:20] + b"\x00" + b[21:], "not valid JSON"),
])
def test_damaged_weights_name_the_file(tmp_path, damage, words):
    (path,) = write_folder(tmp_path, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)))
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ModelFileError) as e:
        spec_from_folder(tmp_path)
    msg = str(e.value)
    assert str(path) in msg and words in msg and "\n" not in msg


def test_bad_config_json_in_a_folder(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama",')
    with pytest.raises(ModelFileError) as e:
        spec_from_folder(tmp_path)
    assert "config.json" in str(e.value) and "JSON" in str(e.value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_headers_raise_only_library_errors(tmp_path, data):
    folder = tmp_path / "fuzz"
    if not folder.exists():
        write_folder(folder, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)))
        (folder / "pristine").write_bytes((folder / "model.safetensors").read_bytes())
    raw = bytearray((folder / "pristine").read_bytes())
    header_end = 8 + int.from_bytes(raw[:8], "little")
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(0, header_end - 1))] = data.draw(st.integers(0, 255))
    (folder / "model.safetensors").write_bytes(bytes(raw))
    try:
        spec_from_folder(folder)
    except LlmsizerError as e:
        assert "\n" not in str(e)

"""safetensors header reader: real files written by safetensors itself, and damaged copies of them."""

import json
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readers_helpers import LLAMA_CONFIG, llama_shapes, random_arrays, safetensors_data_size, write_folder
from safetensors.numpy import save_file

from llmsizer.errors import ModelFileError
from llmsizer.readers.safetensors_header import DTYPE_BITS, read_folder, read_header, read_index

NUMPY_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _one_line_error(excinfo, path) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    assert str(path) in msg
    return msg


def test_reads_names_dtypes_shapes_and_exact_bytes(tmp_path):
    arrays = {"a": np.zeros((3, 5), np.float32), "b": np.zeros((7,), np.float16), "c": np.zeros((2, 2, 2), np.int8),
              "d": np.zeros((4,), np.bool_), "e": np.zeros((0, 3), np.float64)}
    path = tmp_path / "x.safetensors"
    save_file(arrays, str(path), metadata={"format": "pt"})
    got = {t.name: t for t in read_header(path)}
    assert set(got) == set(arrays)  # __metadata__ is not a tensor
    for name, a in arrays.items():
        assert got[name].shape == a.shape
        assert got[name].nbytes == a.nbytes
        assert got[name].numel == a.size
        assert got[name].file == str(path)
    assert got["a"].dtype == "F32" and got["c"].dtype == "I8" and got["d"].dtype == "BOOL"
    assert sum(t.nbytes for t in got.values()) == safetensors_data_size(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(
    st.text(alphabet="abcdefghij._0123456789", min_size=1, max_size=12),
    st.tuples(st.sampled_from(sorted(NUMPY_DTYPES)), st.lists(st.integers(0, 5), max_size=3)),
    min_size=1, max_size=6))
def test_any_file_safetensors_writes_is_read_back_exactly(tmp_path, spec):
    arrays = {k: np.zeros(shape, NUMPY_DTYPES[dt]) for k, (dt, shape) in spec.items()}
    path = tmp_path / "h.safetensors"
    save_file(arrays, str(path))
    got = {t.name: t for t in read_header(path)}
    assert {k: (t.dtype, t.shape, t.nbytes) for k, t in got.items()} == \
        {k: (dt, tuple(shape), arrays[k].nbytes) for k, (dt, shape) in spec.items()}
    assert sum(t.nbytes for t in got.values()) == safetensors_data_size(path)


def test_bf16_and_fp8_from_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    path = tmp_path / "t.safetensors"
    save_torch({"w": torch.zeros(4, 8, dtype=torch.bfloat16), "q": torch.zeros(16, dtype=torch.float8_e4m3fn),
                "s": torch.zeros(1, dtype=torch.float32)}, str(path))
    got = {t.name: (t.dtype, t.nbytes) for t in read_header(path)}
    assert got == {"w": ("BF16", 64), "q": ("F8_E4M3", 16), "s": ("F32", 4)}


def test_dtype_table_matches_numpy_itemsizes():
    for name, dt in NUMPY_DTYPES.items():
        assert DTYPE_BITS[name] == 8 * np.dtype(dt).itemsize
    assert DTYPE_BITS["F4"] == 4 and DTYPE_BITS["BF16"] == 16 and DTYPE_BITS["F8_E5M2"] == 8


def _handmade(path, header: dict, data: bytes, pad: bytes = b"") -> None:
    raw = json.dumps(header).encode() + pad
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_packed_f4_counts_logical_elements(tmp_path):
    path = tmp_path / "f4.safetensors"
    _handmade(path, {"w": {"dtype": "F4", "shape": [4, 8], "data_offsets": [0, 16]}}, bytes(16), b"  ")
    (t,) = read_header(path)
    assert (t.numel, t.nbytes) == (32, 16)


def test_truncated_file(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"w": np.ones((8, 8), np.float32)}, str(path))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert "truncated" in _one_line_error(e, path)


def test_shorter_than_the_length_prefix(tmp_path):
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(b"\x01\x02\x03")
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert "truncated" in _one_line_error(e, path)


def test_header_length_larger_than_the_file(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", 10**12) + b'{"a": 1}')
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert "larger than the file" in _one_line_error(e, path)


def test_garbage_json(tmp_path):
    path = tmp_path / "bad.safetensors"
    raw = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]'  # no closing braces
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(4))
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert "not valid JSON" in _one_line_error(e, path)


def test_binary_garbage_header(tmp_path):
    path = tmp_path / "bin.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe\x00\x01")
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    _one_line_error(e, path)


@pytest.mark.parametrize("entry, data, words", [
    ({"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}, 4, "unknown dtype"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, 4, "needs 8 bytes"),
    ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, 4, "shape"),
    ({"dtype": "F32", "shape": [1], "data_offsets": [4]}, 4, "data_offsets"),
    ({"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}, 8, "hole"),
    ({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, 6, "unindexed"),
    ({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, 2, "truncated"),
    ("not an object", 0, "not an object"),
])
def test_malformed_entries(tmp_path, entry, data, words):
    path = tmp_path / "m.safetensors"
    _handmade(path, {"w": entry}, bytes(data))
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert words in _one_line_error(e, path)


def test_overlapping_tensors(tmp_path):
    path = tmp_path / "o.safetensors"
    f32 = {"dtype": "F32", "shape": [2]}
    _handmade(path, {"a": {**f32, "data_offsets": [0, 8]}, "b": {**f32, "data_offsets": [4, 12]}}, bytes(12))
    with pytest.raises(ModelFileError) as e:
        read_header(path)
    assert "overlaps" in _one_line_error(e, path)


def test_missing_file_is_a_model_file_error(tmp_path):
    with pytest.raises(ModelFileError):
        read_header(tmp_path / "nope.safetensors")


def test_sharded_index_reads_each_shard_once(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))
    files = write_folder(tmp_path, LLAMA_CONFIG, arrays, shards=3)
    tensors = read_index(tmp_path / "model.safetensors.index.json")
    assert sorted(t.name for t in tensors) == sorted(arrays)
    assert sum(t.nbytes for t in tensors) == sum(safetensors_data_size(f) for f in files)
    assert {t.file for t in tensors} == {str(f) for f in files}


def test_index_pointing_to_a_missing_shard(tmp_path):
    write_folder(tmp_path, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)), shards=2)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    index = tmp_path / "model.safetensors.index.json"
    with pytest.raises(ModelFileError) as e:
        read_index(index)
    assert "missing" in _one_line_error(e, index)


def test_index_naming_a_tensor_its_shard_lacks(tmp_path):
    write_folder(tmp_path, LLAMA_CONFIG, random_arrays(llama_shapes(LLAMA_CONFIG)), shards=2)
    index = tmp_path / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors"
    index.write_text(json.dumps(data))
    with pytest.raises(ModelFileError) as e:
        read_index(index)
    assert "model.layers.9.mlp.up_proj.weight" in _one_line_error(e, index)


def test_index_without_weight_map(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"metadata": {}}')
    with pytest.raises(ModelFileError) as e:
        read_index(index)
    assert "weight_map" in _one_line_error(e, index)


def test_folder_prefers_index_and_skips_consolidated_duplicates(tmp_path):
    arrays = random_arrays(llama_shapes(LLAMA_CONFIG))
    write_folder(tmp_path, LLAMA_CONFIG, arrays, shards=2)
    save_file({"tok_embeddings.weight": np.zeros((64, 32), np.float32)}, str(tmp_path / "consolidated.safetensors"))
    tensors, files = read_folder(tmp_path)
    assert [f.name for f in files] == ["model.safetensors.index.json"]
    assert sorted(t.name for t in tensors) == sorted(arrays)
    (tmp_path / "model.safetensors.index.json").unlink()
    tensors, files = read_folder(tmp_path)  # no index: every shard, still not consolidated.safetensors
    assert [f.name for f in files] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert len(tensors) == len(arrays)

"""Issue #15, files and limits: a reader given a hostile file ends in one clean line, in bounded time and memory.

Each case runs in a child process capped at 1 GiB of address space and 10 s (tests/bounded.py), so a hang, a
RecursionError, a MemoryError or a traceback fails the test. Before #15 every case here hung, crashed, took
tens of seconds / gigabytes, or read a file outside the model folder and echoed its size.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import pytest
import readers_helpers as H

from bounded import run_bounded

LOAD = "load_model(path)"


def _st_file(path, header: bytes, data: int = 0) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * data)


def _gguf(path, kv: bytes, n_kv: int = 1, n_tensors: int = 0, sparse_tail: int = 0) -> None:
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kv)
        f.truncate(f.tell() + sparse_tail)  # zero bytes that take no disk space


def _key(name: bytes) -> bytes:
    return struct.pack("<Q", len(name)) + name


def _folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(H.LLAMA_CONFIG))
    return folder


# --- not regular files ----------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("name", ["config.json", "model.gguf"])
def test_a_named_pipe_is_refused_not_waited_on(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    out = run_bounded(LOAD, fifo, timeout=10)  # before #15 a FIFO config.json blocked forever
    assert out.startswith("ERROR") and "named pipe" in out and str(fifo) in out, out


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_is_refused(tmp_path):
    out = run_bounded(LOAD, "/dev/zero")  # before #15: read until memory ran out
    assert out.startswith("ERROR") and "device" in out, out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_in_a_model_folder_is_refused(tmp_path):
    folder = _folder(tmp_path)
    os.mkfifo(folder / "model.safetensors")
    out = run_bounded(LOAD, folder)
    assert out.startswith("ERROR") and "named pipe" in out, out


# --- model-folder references stay inside the folder ---------------------------------------------------------

SECRET = b"TOP-SECRET-BYTES" * 300  # 4,800 bytes: neither its size nor its bytes may appear in a message


@pytest.mark.parametrize("ref", ["../secret.safetensors", "{abs}", "sub/../../secret.safetensors"])
def test_index_cannot_make_the_reader_open_files_outside_the_folder(tmp_path, ref):
    folder = _folder(tmp_path)
    secret = tmp_path / "secret.safetensors"
    secret.write_bytes(SECRET)
    ref = ref.format(abs=secret)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"lm_head.weight": ref}}))
    out = run_bounded(LOAD, folder)
    assert out.startswith("ERROR") and "model folder" in out, out
    assert str(len(SECRET)) not in out and "4,800" not in out and "TOP-SECRET" not in out, out


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_a_link_out_of_the_folder_is_refused_without_leaking(tmp_path):
    folder = _folder(tmp_path)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(SECRET)
    (folder / "model.safetensors").symlink_to(secret)
    out = run_bounded(LOAD, folder)
    assert out.startswith("ERROR") and "outside the model folder" in out, out
    assert str(len(SECRET)) not in out and "4,800" not in out and "TOP-SECRET" not in out, out


# --- nesting depth ------------------------------------------------------------------------------------------

def test_deep_json_in_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    out = run_bounded(LOAD, path)  # RecursionError before #15
    assert out.startswith("ERROR") and "nests" in out and str(path) in out, out


def test_deep_json_in_a_safetensors_header_is_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    _st_file(path, b'{"__metadata__": {"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}")
    out = run_bounded("read_header(path)", path)  # RecursionError before #15
    assert out.startswith("ERROR") and "nests" in out, out


def test_deeply_nested_gguf_arrays_are_refused(tmp_path):
    path = tmp_path / "deep.gguf"
    levels = b"".join(struct.pack("<IQ", 9, 1) for _ in range(1000))  # array of (array of (... 1000 deep
    _gguf(path, _key(b"deep") + struct.pack("<I", 9) + levels + struct.pack("<IQ", 0, 0), sparse_tail=64)
    out = run_bounded("read_gguf_header(path)", path)  # RecursionError before #15
    assert out.startswith("ERROR") and "nested" in out, out


# --- big claims: nothing proportional to a claimed count before it is checked -------------------------------

def test_a_200_mb_gguf_metadata_array_is_not_decoded(tmp_path):
    path = tmp_path / "big.gguf"
    n = 200_000_000  # one u8 array: 3.26 GB peak and ~40 s before #15
    _gguf(path, _key(b"big") + struct.pack("<IIQ", 9, 0, n), sparse_tail=n)
    out = run_bounded("read_gguf_header(path)", path)
    assert out.startswith("ERROR") and "array entries" in out, out


def test_a_long_numeric_gguf_array_within_limits_is_counted_not_decoded(tmp_path):
    path = tmp_path / "long.gguf"
    n = 10_000_000  # 80 MB of u64 under a 1 GiB cap: decoded into a list before #15 (~0.4 GB of int objects)
    _gguf(path, _key(b"scores") + struct.pack("<IIQ", 9, 10, n), sparse_tail=8 * n)
    out = run_bounded("print(read_gguf_header(path).metadata['scores'])", path, memory=512 << 20)
    assert "LongArray(count=10000000" in out, out


def test_sixteen_million_strings_in_a_gguf_array_are_refused_fast(tmp_path):
    path = tmp_path / "strings.gguf"
    n = 2**24  # 17-21 s before #15
    _gguf(path, _key(b"tok") + struct.pack("<IIQ", 9, 8, n), sparse_tail=8 * n)
    out = run_bounded("read_gguf_header(path)", path, timeout=5)
    assert out.startswith("ERROR") and "strings in an array" in out, out


def test_a_huge_gguf_tensor_count_is_refused(tmp_path):
    path = tmp_path / "tensors.gguf"
    _gguf(path, b"", n_kv=0, n_tensors=10**12, sparse_tail=1000)
    out = run_bounded("read_gguf_header(path)", path, timeout=5)
    assert out.startswith("ERROR") and "tensors" in out, out


def test_a_400k_tensor_safetensors_header_is_refused_in_seconds(tmp_path):
    path = tmp_path / "model.safetensors"
    n = 400_000  # ~10 s (and counting) before #15
    entries = ",".join(f'"t{i}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{i + 1}]}}' for i in range(n))
    _st_file(path, ("{" + entries + "}").encode(), data=n)
    out = run_bounded("read_header(path)", path, timeout=8)
    assert out.startswith("ERROR") and "one per tensor" in out, out


def test_an_oversized_config_is_refused_before_reading(tmp_path):
    path = tmp_path / "config.json"
    with open(path, "wb") as f:
        f.truncate(200 << 20)
    out = run_bounded(LOAD, path, memory=512 << 20)
    assert out.startswith("ERROR") and "limit" in out, out


def test_a_5000_digit_integer_in_config_is_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "num_hidden_layers": ' + "9" * 5000 + "}")
    out = run_bounded(LOAD, path)  # ValueError (int max str digits) traceback before #15
    assert out.startswith("ERROR") and str(path) in out, out


# --- what an error line shows of untrusted text -------------------------------------------------------------

def test_untrusted_names_are_escaped_and_cut_in_error_lines(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**H.LLAMA_CONFIG, "model_type": "\x1b[2J\x1b[31mevil" + "x" * 100_000}))
    out = run_bounded(LOAD, path)  # before #15 the escape codes and all 100k characters reached the terminal
    assert out.startswith("ERROR") and "model_type" in out, out[:300]
    assert "\x1b" not in out and len(out) < 1000, out[:300]

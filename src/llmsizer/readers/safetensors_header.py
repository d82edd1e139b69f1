"""safetensors headers -> typed tensor records, without reading any tensor data.

File layout (huggingface/safetensors README, section "Format"):

=========  ==============================================================================================
bytes      content
=========  ==============================================================================================
8          ``N``: unsigned 64-bit little-endian integer, the size of the header
N          UTF-8 JSON object starting with ``{`` (may be right-padded with spaces): tensor name ->
           ``{"dtype": "BF16", "shape": [...], "data_offsets": [BEGIN, END]}``; an optional
           ``"__metadata__"`` entry maps strings to strings
rest       the byte buffer; offsets are relative to its start and must cover it entirely, without holes
           or overlaps ("The byte buffer needs to be entirely indexed, and cannot contain holes")
=========  ==============================================================================================

A sharded checkpoint has ``model.safetensors.index.json`` whose ``weight_map`` maps each tensor name to
its shard file (transformers ``modeling_utils``; huggingface_hub ``get_safetensors_metadata``).
Every structural error raises one :class:`~llmsizer.errors.ModelFileError` naming the file.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ModelFileError
from ..specs import FileWeights
from .hf_config import load_config_file
from .safe_io import MAX_TENSORS, loads_bounded, open_regular, shown

# Bits per element of each safetensors dtype (safetensors ``Dtype::bitsize``, safetensors/src/tensor.rs).
# Sub-byte types are packed: the header shape counts logical elements, bytes = ceil(elements x bits / 8).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8,
    "F8_E4M3": 8, "F8_E5M2": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

MAX_HEADER_BYTES = 100_000_000  # safetensors rejects larger headers (MAX_HEADER_SIZE in safetensors/src/tensor.rs)
INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True)
class TensorInfo:
    """One stored tensor: name, dtype label, logical shape and the exact bytes it occupies on disk."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _read_prefix(path: Path) -> tuple[int, bytes, int]:
    """(header length N, header bytes, file size); checks the length against the file."""
    try:
        with open_regular(path, "safetensors file") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise ModelFileError(f"{path}: truncated safetensors file ({size} bytes, the 8-byte header "
                                     "length is missing)")
            (n,) = struct.unpack("<Q", head)
            _check_length(path, n, size)
            raw = f.read(n)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.__class__.__name__}: {e.strerror or e})") from None
    if len(raw) < n:
        raise ModelFileError(f"{path}: truncated header ({len(raw)} of {n} bytes)")
    return n, raw, size


def _check_length(path: Path, n: int, size: int) -> None:
    if n > size - 8:
        raise ModelFileError(f"{path}: header length {n} is larger than the file ({size} bytes)")
    if n > MAX_HEADER_BYTES:
        raise ModelFileError(f"{path}: header length {n} exceeds the safetensors limit of "
                             f"{MAX_HEADER_BYTES} bytes")


def _parse_json(path: Path, raw: bytes) -> dict[str, Any]:
    if not raw.startswith(b"{"):
        raise ModelFileError(f"{path}: header is not a JSON object (no leading '{{'; not a safetensors file?)")
    # depth, value and tensor counts checked before parsing: one object per tensor, one for the header itself and
    # one for __metadata__
    header = loads_bounded(raw, str(path), "header", MAX_TENSORS + 2, "objects (one per tensor)")
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: header is not a JSON object")
    return header


def _counts(values: list[Any]) -> bool:
    """All non-negative ints (not bools): map/set/min run in C, ~3x faster than a generator per element."""
    return set(map(type, values)) <= {int} and (not values or min(values) >= 0)


def _tensor(path: Path, name: str, entry: Any) -> tuple[TensorInfo, int, int]:
    """Validate one header entry; returns the record and its [begin, end) offsets."""
    if not isinstance(entry, dict):
        raise ModelFileError(f"{path}: tensor {shown(name)}: entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise ModelFileError(f"{path}: tensor {shown(name)}: unknown dtype {shown(dtype)}; known: {', '.join(DTYPE_BITS)}")
    if not isinstance(shape, list) or not _counts(shape):
        raise ModelFileError(f"{path}: tensor {shown(name)}: shape must be a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and _counts(offsets)):
        raise ModelFileError(f"{path}: tensor {shown(name)}: data_offsets must be [BEGIN, END]")
    begin, end = offsets
    if end < begin:
        raise ModelFileError(f"{path}: tensor {shown(name)}: data_offsets end {end} is before begin {begin}")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != end - begin:
        raise ModelFileError(f"{path}: tensor {shown(name)}: {dtype} {shape} needs {bits / 8:g} bytes but data_offsets "
                             f"span {end - begin}")
    return TensorInfo(name, dtype, tuple(shape), end - begin, str(path)), begin, end


def _check_coverage(path: Path, spans: list[tuple[int, int, str]], buffer: int) -> None:
    """The byte buffer must be covered exactly once (safetensors README, "Format")."""
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a hole at byte {pos}"
            raise ModelFileError(f"{path}: tensor {shown(name)} at data offset {begin} {what}")
        pos = end
    if pos > buffer:
        raise ModelFileError(f"{path}: truncated: tensor data ends at byte {pos} of the buffer but the file holds "
                             f"only {buffer} bytes after the header")
    if pos < buffer:
        raise ModelFileError(f"{path}: {buffer - pos} unindexed bytes after the last tensor")


def read_header(path: str | os.PathLike[str]) -> list[TensorInfo]:
    """Tensor records of one .safetensors file, read from its header only (no tensor data).

    >>> # read_header("model.safetensors")[0]  ->  TensorInfo(name='lm_head.weight', dtype='BF16', ...)
    """
    p = Path(path)
    n, raw, size = _read_prefix(p)
    return _tensors(p, raw, size - 8 - n)


def header_tensors(data: bytes, name: str, file_size: int) -> list[TensorInfo]:
    """Tensor records from the first bytes of a .safetensors file of ``file_size`` bytes (the web page sends only
    the 8-byte length and the JSON header, read in the browser with ``File.slice``): the same checks as
    :func:`read_header`, the byte buffer's coverage checked against the whole file's size. ``name`` labels the file
    in messages; nothing is opened."""
    p = Path(name)
    if len(data) < 8:
        raise ModelFileError(f"{p}: truncated safetensors file ({len(data)} bytes, the 8-byte header length is missing)")
    if len(data) > file_size:
        raise ModelFileError(f"{p}: {len(data):,} bytes sent but the file size is given as {file_size:,}")
    (n,) = struct.unpack("<Q", data[:8])
    _check_length(p, n, file_size)
    raw = data[8:8 + n]
    if len(raw) < n:
        raise ModelFileError(f"{p}: truncated header ({len(raw)} of {n} bytes)")
    return _tensors(p, raw, file_size - 8 - n)


def _tensors(p: Path, raw: bytes, buffer: int) -> list[TensorInfo]:
    header = _parse_json(p, raw)
    header.pop("__metadata__", None)
    if len(header) > MAX_TENSORS:
        raise ModelFileError(f"{p}: header lists {len(header):,} tensors; the limit is {MAX_TENSORS:,}")
    tensors: list[TensorInfo] = []
    spans: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        info, begin, end = _tensor(p, name, entry)
        tensors.append(info)
        spans.append((begin, end, name))
    _check_coverage(p, spans, buffer)
    return tensors


def data_bytes(path: str | os.PathLike[str]) -> int:
    """Size of the byte buffer of a .safetensors file: file size - 8 - header length."""
    n, _, size = _read_prefix(Path(path))
    return size - 8 - n


def read_index(index_path: str | os.PathLike[str]) -> list[TensorInfo]:
    """Tensor records of a sharded checkpoint: each shard named in ``weight_map`` is read once.

    Every tensor the index names must be in the shard it points to.
    """
    p = Path(index_path)
    index = load_config_file(p)  # same JSON reading and one-line errors as config.json
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelFileError(f"{p}: missing or empty 'weight_map'")
    if not all(isinstance(v, str) for v in weight_map.values()):
        raise ModelFileError(f"{p}: weight_map values must be shard file names")
    if len(weight_map) > MAX_TENSORS:
        raise ModelFileError(f"{p}: weight_map lists {len(weight_map):,} tensors; the limit is {MAX_TENSORS:,}")
    tensors: list[TensorInfo] = []
    for shard in sorted(set(weight_map.values())):
        shard_path = inside_folder(p.parent, shard, f"{p}: weight_map")
        if not shard_path.exists():
            raise ModelFileError(f"{p}: shard {shown(shard)} named in weight_map is missing")
        found = read_header(shard_path)
        if len(tensors) + len(found) > MAX_TENSORS:
            raise ModelFileError(f"{p}: the shards hold more than {MAX_TENSORS:,} tensors (the limit)")
        names = {t.name for t in found}
        missing = [k for k, v in weight_map.items() if v == shard and k not in names]
        if missing:
            raise ModelFileError(f"{p}: tensor {shown(missing[0])} is mapped to {shard} but that shard does not hold it"
                                 + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        tensors.extend(found)
    return tensors


def _roots(folder: Path) -> list[Path]:
    """Where a model folder's files may live: the folder itself, and for a Hugging Face cache snapshot
    (``models--org--name/snapshots/<rev>``, whose files are symlinks into ``../../blobs``) that blob store."""
    real = folder.resolve()
    roots = [real]
    if folder.absolute().parent.name == "snapshots":
        blobs = folder.absolute().parent.parent / "blobs"
        if blobs.is_dir():
            roots.append(blobs.resolve())
    return roots


def inside_folder(folder: Path, name: str, what: str) -> Path:
    """``folder / name`` if it names a file inside the model folder (after following links), else one line.

    ``name`` comes from a file llmsizer does not trust (an index's weight_map, a folder listing): an absolute
    path, a '..' step, or a link leading out of the folder is refused before anything is opened, and the
    message names only what the index says (nothing about the outside file: not its size, not its bytes).
    """
    rel = Path(name)
    if not name or rel.is_absolute() or rel.drive or ".." in rel.parts or "\0" in name:
        raise ModelFileError(f"{what} names {shown(name)}, which is not a file name inside the model folder")
    path = folder / rel
    target = path.resolve()
    if not any(target == r or r in target.parents for r in _roots(folder)):
        raise ModelFileError(f"{what} names {shown(name)}, which leads outside the model folder")
    return path


def weight_files(folder: Path) -> list[Path]:
    """The .safetensors files that hold a folder's model weights, in the order transformers picks them.

    ``model.safetensors.index.json`` first, then ``model.safetensors``; otherwise every ``*.safetensors``
    except Mistral's duplicate ``consolidated*.safetensors`` and PEFT ``adapter_model*.safetensors``
    (kept only when nothing else is there).
    """
    index = folder / INDEX_FILE
    if index.exists():
        return [inside_folder(folder, INDEX_FILE, str(folder))]
    single = folder / "model.safetensors"
    if single.exists():
        return [inside_folder(folder, single.name, str(folder))]
    found = sorted(inside_folder(folder, f.name, str(folder)) for f in folder.glob("*.safetensors")
                   if not f.is_dir())
    main = [f for f in found if not f.name.startswith(("consolidated", "adapter_model"))]
    return main or found


def read_folder(folder: str | os.PathLike[str]) -> tuple[list[TensorInfo], list[Path]]:
    """Tensor records of every weight file in ``folder`` (see :func:`weight_files`) and the files read."""
    files = weight_files(Path(folder))
    tensors: list[TensorInfo] = []
    for f in files:
        tensors.extend(read_index(f) if f.name.endswith(".index.json") else read_header(f))
        if len(tensors) > MAX_TENSORS:
            raise ModelFileError(f"{folder}: the weight files hold more than {MAX_TENSORS:,} tensors (the limit)")
    _check_unique(Path(folder), tensors)
    return tensors, files


def _check_unique(where: Path, tensors: Iterable[TensorInfo]) -> None:
    seen: dict[str, str] = {}
    for t in tensors:
        if t.name in seen:
            raise ModelFileError(f"{where}: tensor {shown(t.name)} appears in both {seen[t.name]} and {t.file}")
        seen[t.name] = t.file


# "per_layer": a tensor outside the decoder layers that the engine creates once per layer's device (llama.cpp's
# rope_freqs / rope_factors_long / rope_factors_short, readers/gguf_file.py PER_LAYER_DEVICE)
Role = Literal["embedding", "output", "per_layer", "other"]


def summarize(label: str, tensors: Sequence[TensorInfo], num_layers: int,
              layer_of: Callable[[str], int | None], role_of: Callable[[str], Role],
              notes: Iterable[str] = ()) -> FileWeights:
    """Exact stored bytes of a tensor table as :class:`FileWeights` (used by the safetensors and GGUF readers).

    ``layer_of(name)`` gives the decoder layer a tensor belongs to (None: outside the stack);
    ``role_of(name)`` marks the input embedding, the output projection and the tensors kept once per layer's
    device (``FileWeights.per_layer_device_bytes``). Tensors of layers numbered
    beyond ``num_layers`` (DeepSeek-V3 multi-token-prediction layers) count in the total only.
    """
    by_dtype: dict[str, int] = {}
    layers = [0] * num_layers
    experts = [0] * num_layers
    matrices = [0] * num_layers
    extra: set[int] = set()
    emb = out = per_layer = 0
    for t in tensors:
        by_dtype[t.dtype] = by_dtype.get(t.dtype, 0) + t.nbytes
        i = layer_of(t.name)
        if i is not None and i < num_layers:
            layers[i] += t.nbytes
            if _is_expert(t.name):
                experts[i] += t.nbytes
            elif sum(d > 1 for d in t.shape) == 2:
                matrices[i] += t.nbytes
        elif i is not None:
            extra.add(i)
        role = role_of(t.name)
        if role == "embedding":
            emb += t.nbytes
        elif role == "output":
            out += t.nbytes
        elif role == "per_layer":
            per_layer += t.nbytes
    parts = list(notes)
    if extra:
        parts.append(f"tensors of layer(s) {', '.join(map(str, sorted(extra)))} beyond the {num_layers} decoder "
                     "layers (e.g. multi-token prediction) count in the total but in no layer")
    return FileWeights(
        path=label, total_bytes=sum(t.nbytes for t in tensors), params=sum(t.numel for t in tensors),
        by_dtype=tuple(sorted(by_dtype.items(), key=lambda kv: (-kv[1], kv[0]))),
        layer_bytes=tuple(layers) if any(layers) else (), embedding_bytes=emb, output_bytes=out,
        per_layer_device_bytes=per_layer, layer_expert_bytes=tuple(experts) if any(experts) else (),
        layer_matrix_bytes=tuple(matrices) if any(matrices) else (), note="; ".join(parts),
    )


def _is_expert(name: str) -> bool:
    """A routed-expert tensor: GGUF ``blk.N.ffn_{up,down,gate,gate_up}_{,ch}exps`` (llama.cpp common/common.h
    LLM_FFN_EXPS_REGEX, the tensors ``--n-cpu-moe`` matches) or a checkpoint's ``.experts.`` weights."""
    return "_exps" in name or ".experts." in name

"""Writes the committed regression corpus of issue #15: one small file per hostile input the issue lists (each one
crashed, hung, blew up memory or answered nonsense with exit 0 before the fix). Run it only to add a case; the
files are committed and tests/fuzz/test_corpus.py feeds each to the real CLI. Files whose content the issue
described by size (a 200 MB GGUF array, a 5 MB request) are represented by a small file that CLAIMS the size."""

from __future__ import annotations

import json
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def config(name: str, **edits: object) -> None:
    (HERE / "config" / name).write_text(json.dumps({**BASE, **edits}))


def raw(folder: str, name: str, data: bytes) -> None:
    (HERE / folder / name).write_bytes(data)


def gguf(name: str, kv: bytes, n_kv: int = 1, n_tensors: int = 0) -> None:
    raw("gguf", name, b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kv)


def key(name: bytes) -> bytes:
    return struct.pack("<Q", len(name)) + name


def main() -> None:
    for folder in ("config", "safetensors", "gguf", "request"):
        (HERE / folder).mkdir(exist_ok=True)
    # config.json: layers that would build 2^31 per-layer entries, overflow, zero heads, absurd or non-integral sizes
    config("layers-2pow31.json", num_hidden_layers=2147483648)
    config("layers-1e30.json", num_hidden_layers=10**30)
    config("heads-zero.json", num_attention_heads=0)
    config("head-dim-1e30.json", head_dim=1e30)
    config("intermediate-fraction.json", intermediate_size=32.5)
    config("kv-heads-bool.json", num_key_value_heads=True)
    config("model-type-escape.json", model_type="\x1b[2J\x1b[31mllama")
    raw("config", "deep-nesting.json", b'{"model_type": "llama", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")
    raw("config", "int-5000-digits.json", b'{"model_type": "llama", "num_hidden_layers": ' + b"9" * 5000 + b"}")
    # safetensors (in a model folder beside a valid config.json): deep JSON in the header; a length prefix
    # that claims 2^63 bytes
    deep = b'{"__metadata__": {"a": ' + b"[" * 10_000 + b"]" * 10_000 + b"}}"
    for name, data in {"deep-header": struct.pack("<Q", len(deep)) + deep,
                       "lying-prefix": struct.pack("<Q", 2**63) + b"{}"}.items():
        (HERE / "safetensors" / name).mkdir(exist_ok=True)
        (HERE / "safetensors" / name / "config.json").write_text(json.dumps(BASE))
        raw("safetensors", f"{name}/model.safetensors", data)
    # GGUF: 1000-deep nested arrays, a 200 M-entry array claimed, 10^12 tensors claimed, key_length 2^64-1
    levels = b"".join(struct.pack("<IQ", 9, 1) for _ in range(1000))
    gguf("deep-arrays.gguf", key(b"deep") + struct.pack("<I", 9) + levels + struct.pack("<IQ", 0, 0))
    gguf("array-200m.gguf", key(b"big") + struct.pack("<IIQ", 9, 0, 200_000_000))
    gguf("tensors-1e12.gguf", b"", n_kv=0, n_tensors=10**12)
    gguf("key-length-2pow64.gguf", key(b"general.architecture") + struct.pack("<I", 8) + key(b"llama")
         + key(b"llama.attention.key_length") + struct.pack("<IQ", 11, 2**64 - 1), n_kv=2)
    # request YAML: non-finite and huge numbers, tags that would construct objects, billion laughs
    req = (HERE.parents[2] / "examples" / "cpu-internal-tool.yaml").read_text()
    for name, value in {"nan": ".nan", "inf": ".inf", "1e400": "1e400", "python-name": "!!python/name:os.system",
                        "custom-tag": "!custom 3", "int-abc": "!!int abc"}.items():
        (HERE / "request" / f"concurrency-{name}.yaml").write_text(
            req.replace("concurrency: ", f"concurrency: {value} #", 1))
    anchors = "".join(f"  {c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                      for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    laughs = "team:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + anchors + "jobs: *i\n"
    (HERE / "request" / "billion-laughs.yaml").write_text(laughs)


if __name__ == "__main__":
    main()

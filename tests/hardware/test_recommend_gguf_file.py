"""``recommend FILE.gguf`` sizes the file as it is: its own per-tensor GGML types, its exact bytes. It started the
format ladder from gguf:bf16 (the stored format of a checkpoint with no quantization_config), so a Q4_0/Q8_0 file and
an F16 file of the same shapes were answered with the same memory, neither of them the file's. Truth: the tensor
bytes gguf-py's block table gives each file (readers_helpers.expected_bytes, not llmsizer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readers"))
import readers_helpers as H  # noqa: E402

from cli_capture import run  # noqa: E402
from llmsizer.recommend import best_option_on  # noqa: E402


def _two_files(tmp_path: Path) -> tuple[tuple[Path, H.GGUFModel], tuple[Path, H.GGUFModel]]:
    """The tiny llama of readers_helpers (Q4_0/Q4_1/Q5_0/Q8_0 layer matrices) and the same model with every layer
    matrix in F16: same shapes, so the same KV cache and compute buffers; only the layers' bytes differ."""
    pytest.importorskip("gguf")
    import gguf

    quant = H.llama_gguf(layers=4, hidden=128, heads=4, kv=2, ffn=256, vocab=256)
    f16 = H.GGUFModel(quant.arch, {**quant.meta, "general.file_type": 1},
                      [(n, s, gguf.GGMLQuantizationType.F16 if n.startswith("blk.") and len(s) == 2 else q)
                       for n, s, q in quant.tensors])
    out = []
    for name, model in (("quant", quant), ("f16", f16)):
        path = tmp_path / f"tiny-{name}.gguf"
        model.write(path)
        out.append((path, model))
    return out[0], out[1]


def _layer_bytes(model: H.GGUFModel) -> int:
    return sum(b for n, b in model.expected_bytes().items() if n.startswith("blk."))


def test_recommend_sizes_a_gguf_file_at_its_own_bytes(tmp_path: Path) -> None:
    (qpath, quant), (fpath, f16) = _two_files(tmp_path)
    assert _layer_bytes(f16) > _layer_bytes(quant)  # the files differ where the test looks
    opts = [best_option_on(str(p), "rtx-4090") for p in (qpath, fpath)]
    assert [(o.engine, o.weights_format, o.status) for o in opts] == [("llamacpp", "file", "meets")] * 2
    # llama.cpp on one GPU, every layer offloaded: the device holds each file's layers as stored; the token
    # embedding (host), output matrix, norms, KV cache, compute buffer and CUDA context are the same in both
    assert opts[1].memory_per_device - opts[0].memory_per_device == _layer_bytes(f16) - _layer_bytes(quant)


def test_recommend_text_and_json_name_the_files_format(tmp_path: Path) -> None:
    (qpath, _), _ = _two_files(tmp_path)
    code, out, err = run("recommend", str(qpath), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["chosen"]["weights_format"] == "file" and d["chosen"]["engine"] == "llamacpp"
    assert all(o["weights_format"] == "file" for o in d["options"])  # a tiny file fits every option as it is
    code, out, err = run("recommend", str(qpath))
    assert code == 0, err
    assert "fits at the file's own format" in out and "BF16" not in out

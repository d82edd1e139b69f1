"""A model FILE gets a speed answer like a catalog model (fit FILE.gguf --device X exited 2 with "unknown weight
format 'file'", so the web calculator's grid for a dropped file was one error row). The bytes read per decode step
are the file's own tensor bytes (from gguf-py's block layouts in readers_helpers, not from llmsizer); the kernels
follow the file's largest non-F32 tensor type."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readers"))
import readers_helpers as H  # noqa: E402

from llmsizer.cli.main import main  # noqa: E402
from llmsizer.estimate.fit import fit  # noqa: E402


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    pytest.importorskip("gguf")
    model = H.llama_gguf(layers=4)
    path = tmp_path_factory.mktemp("file-speed") / "tiny-llama.gguf"
    model.write(path)
    return path, model


def test_fit_on_a_gguf_file_answers_with_speed(gguf_file, capsys):
    path, _ = gguf_file
    assert main(["fit", str(path), "--device", "rtx-4090"]) == 0
    out = capsys.readouterr().out
    assert "FITS" in out and "decode x1" in out and "tokens/s" in out


def test_decode_reads_the_files_bytes_with_the_kernels_of_its_largest_type(gguf_file):
    path, model = gguf_file
    by_type = model.by_type()  # gguf-py block sizes, independent of llmsizer
    largest = max((t for t in by_type if t != "F32"), key=lambda t: by_type[t])
    r = fit(str(path), "rtx-4090", context=128)
    sp = r.speed
    assert sp.weights_format == "gguf:" + largest.lower()
    assert sp.details["weights_bytes"] == sum(model.expected_bytes().values())
    # one sequence: a step moves every weight byte except the token-embedding table (a row lookup: output.weight is
    # its own tensor here) plus the KV cache of 96 tokens (context 128 -> 64 prompt + 64 output, read mid-output):
    # 2 (K, V) x 4 layers x 2 KV heads x 16 head dims x 96 tokens x 2 bytes
    nbytes = model.expected_bytes()
    weights_read = sum(nbytes.values()) - nbytes["token_embd.weight"]
    kv = 2 * 4 * 2 * 16 * 96 * 2
    be = next(a.value for a in sp.assumptions if a.name == "bandwidth_efficiency")
    moved = sp.decode.memory_seconds * sp.details["bandwidth"] * be
    assert moved == pytest.approx(weights_read + kv, rel=1e-9)

"""recommend with --engine vllm/sglang and a .gguf file the engine will not load (a tensor type its GGUF method
lacks, estimate/formats.py ``gguf_file_refused``): the file's own rung is skipped, and that is said once in the text
and the JSON (a warning naming the file and the reason) instead of silently answering at another format; when no
smaller format is left, one line and exit 2. Truth: the file's tensor types as written with the ``gguf`` package
(MXFP4 experts; TQ1_0 feed-forward matrices), against vLLM's GGUF type list (quantization/gguf.py
UNQUANTIZED_TYPES | DEQUANT_TYPES, which names neither), and the sizes the rung test compares (awq-int4 of a model
whose feed-forward matrices are TQ1_0, 1.69 bits per weight, and the rest Q4_0, 4.5, is larger than the file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import readers_helpers as H

from cli_capture import run

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import gguf

    d = tmp_path_factory.mktemp("skipped")
    out = {"mxfp4": d / "oss.gguf", "ternary": d / "ternary.gguf", "llama": d / "llama.gguf"}
    H.gpt_oss_gguf().write(out["mxfp4"])
    H.llama_gguf().write(out["llama"])
    base = H.llama_gguf(hidden=256, ffn=256, heads=4, kv=2)
    Q = gguf.GGMLQuantizationType
    H.GGUFModel(base.arch, base.meta, [(n, s, (Q.TQ1_0 if "ffn_" in n else Q.Q4_0) if len(s) == 2 else q)
                                       for n, s, q in base.tensors]).write(out["ternary"])
    return out


@pytest.mark.parametrize("engine, name", [("vllm", "vLLM"), ("sglang", "SGLang")])
def test_the_skipped_file_is_named_with_its_reason(files: dict[str, Path], engine: str, name: str) -> None:
    path = str(files["mxfp4"])
    # a context within the file's context_length (512): a serving engine refuses a longer one
    # (estimate/context_window.py)
    code, out, err = run("recommend", path, "--engine", engine, "--context", "512", "--json")
    assert code == 0, err
    data = json.loads(out)
    said = [w for w in data["warnings"] if "as given is skipped" in w]
    assert len(said) == 1 and said[0].startswith(f"{path} as given is skipped on {engine}: {name} does not load "
                                                 "GGUF type MXFP4")
    assert data["chosen"]["weights_format"] != "file"
    code, text, _ = run("recommend", path, "--engine", engine, "--context", "512")
    assert code == 0 and f"warning: {path} as given is skipped on {engine}: {name} does not load GGUF type MXFP4" \
        in text


def test_no_warning_when_the_engine_loads_the_file_or_a_format_is_named(files: dict[str, Path]) -> None:
    for argv in ((str(files["llama"]), "--engine", "vllm"), (str(files["mxfp4"]), "--engine", "llamacpp"),
                 (str(files["mxfp4"]),), (str(files["mxfp4"]), "--engine", "vllm", "--weights", "awq-int4")):
        code, out, err = run("recommend", *argv, "--json")
        assert code in (0, 1), err
        assert not any("as given is skipped" in w for w in json.loads(out)["warnings"]), argv


def test_nothing_left_of_the_file_is_refused_in_one_line(files: dict[str, Path]) -> None:
    path = str(files["ternary"])
    code, out, err = run("recommend", path, "--engine", "vllm")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("llmsizer: error: vLLM does not load GGUF type TQ1_0")
    assert "no format smaller than the file is left" in err and "--engine llamacpp" in err
    assert run("recommend", path, "--engine", "llamacpp")[0] == 0  # llama.cpp runs TQ1_0

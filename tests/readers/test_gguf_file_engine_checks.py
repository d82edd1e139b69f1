"""A .gguf FILE on vLLM or SGLang goes through the checks a named GGUF format gets (estimate/formats.py
``engine_refuses``): the file's own tensor types against the types their GGUF method runs (vllm quantization/gguf.py
@ 00620f9: UNQUANTIZED_TYPES | DEQUANT_TYPES; any other type: "Unsupported GGUF quantization type"), and
GGUFConfig.get_min_capability (60). Before, a file with MXFP4 tensors said "FITS [vllm, file]" on an H100 and a GGUF
file on a compute-capability-5.2 GPU said FITS, while ``--weights mxfp4_moe`` / ``--weights q8_0`` were refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import readers_helpers as H

from cli_capture import run

pytest.importorskip("gguf")

# a Maxwell GPU (Tesla M40: compute capability 5.2, NVIDIA "CUDA GPU Compute Capability" table), below GGUF's 6.0
M40 = ('{"devices": [{"id": "my-m40", "name": "My M40", "kind": "gpu", "architecture": "maxwell", '
       '"compute_capability": 5.2, "memory": "24GiB"}]}')


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ggufs")
    out = {"mxfp4": d / "oss.gguf", "llama": d / "llama.gguf", "hw": d / "hw.json"}
    H.gpt_oss_gguf().write(out["mxfp4"])  # MXFP4 experts: a type neither engine's GGUF method lists
    H.llama_gguf().write(out["llama"])  # Q8_0/Q4_0/Q4_1/Q5_0/F32: all listed
    out["hw"].write_text(M40)
    return out


@pytest.mark.parametrize("engine, name", [("vllm", "vLLM"), ("sglang", "SGLang")])
def test_a_file_with_a_tensor_type_the_engine_lacks_is_refused(files: dict[str, Path], engine: str,
                                                                name: str) -> None:
    for cmd in ("fit", "infer"):
        code, out, err = run(cmd, str(files["mxfp4"]), "--device", "h100-sxm", "--engine", engine)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(
            f"llmsizer: error: {name} does not load GGUF type MXFP4 (tensors of {files['mxfp4']}): its GGUF "
            "kernels run ")
    # the named format of the same type is refused with the same reason; llama.cpp runs the file
    assert "does not load GGUF type MXFP4" in run("fit", "gpt-oss-20b", "--device", "h100-sxm", "--engine", engine,
                                                  "--weights", "mxfp4_moe")[2]
    assert run("fit", str(files["mxfp4"]), "--device", "h100-sxm", "--engine", "llamacpp")[0] == 0
    # a file of listed types is not refused
    # (at a context within the file's context_length, 256: a serving engine refuses a longer one,
    # estimate/context_window.py)
    assert run("fit", str(files["llama"]), "--device", "h100-sxm", "--engine", engine, "--context", "256")[0] == 0


def test_recommend_skips_the_refused_file_rung(files: dict[str, Path]) -> None:
    """The ladder of a GGUF file on vLLM (estimate/formats.py format_ladder) is the file, then vLLM's rungs bf16 ->
    fp8 -> awq-int4 smaller than the file's bytes. The file is refused (MXFP4 is not among vLLM's GGUF types, test
    above); the file's bytes, from its tensor types' ggml block sizes (gguf-py GGML_QUANT_SIZES), are below bf16's
    2 B and fp8's 1 B per weight: only awq-int4 is left (the model is tiny: it fits on any device)."""
    from gguf import GGML_QUANT_SIZES

    tensors = H.gpt_oss_gguf().tensors
    weights = sum(math.prod(shape) for _, shape, _ in tensors)
    file_bytes = 0
    for _, shape, qtype in tensors:
        block, size = GGML_QUANT_SIZES[qtype]
        file_bytes += math.prod(shape) // block * size
    assert file_bytes < 1 * weights < 2 * weights  # bf16 and fp8 are not smaller than the file
    code, out, err = run("recommend", str(files["mxfp4"]), "--engine", "vllm", "--context", "512", "--json")
    assert code == 0, err
    chosen = json.loads(out)["chosen"]
    assert chosen["weights_format"] == "awq-int4"


def test_a_gguf_file_meets_the_capability_gate(files: dict[str, Path]) -> None:
    hw = ("--hardware-file", str(files["hw"]))
    named = run("fit", str(files["llama"]), "--device", "my-m40", *hw, "--engine", "vllm", "--weights", "q8_0")
    assert named[0] == 2 and "compute capability 5.2): its kernels need 6.0 or newer" in named[2]
    code, out, err = run("fit", str(files["llama"]), "--device", "my-m40", *hw, "--engine", "vllm")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"llmsizer: error: vLLM refuses GGUF file {files['llama']} on my-m40 (maxwell, compute "
                          "capability 5.2): its kernels need 6.0 or newer")
    # llama.cpp has no such gate (it runs the file on Maxwell)
    assert run("fit", str(files["llama"]), "--device", "my-m40", *hw, "--engine", "llamacpp")[0] == 0


def test_the_web_api_refuses_the_uploaded_file(files: dict[str, Path]) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    data = files["mxfp4"].read_bytes()
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        up = client.post("/api/v1/model-files", params={"kind": "gguf", "name": "oss.gguf", "size": len(data)},
                         content=data, headers={"content-type": "application/octet-stream"})
        assert up.status_code == 200, up.text
        r = client.post("/api/v1/fit", json={"model_file": up.json()["model_file"], "device": "h100-sxm",
                                             "engine": "vllm"})
        assert r.status_code == 400, r.text
        assert r.json()["detail"].startswith("vLLM does not load GGUF type MXFP4 (tensors of ")

"""Model files through the public API and the real CLI entry point."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import readers_helpers as H

import llmsizer

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "tiny-llama"
    (weights,) = H.write_folder(path, H.LLAMA_CONFIG, H.random_arrays(H.llama_shapes(H.LLAMA_CONFIG)))
    return path, H.safetensors_data_size(weights)


@pytest.fixture
def gguf_file(tmp_path):
    pytest.importorskip("gguf")
    model = H.llama_gguf()
    path = tmp_path / "tiny-llama-Q4_0.gguf"
    model.write(path)
    return path, sum(model.expected_bytes().values())


def _weights(est) -> int:
    return sum(i.bytes for i in est.items if i.name in ("weights", "weights_host"))


def test_estimate_from_a_folder_counts_the_file_bytes(folder):
    path, nbytes = folder
    est = llmsizer.estimate_inference(str(path), context=128)
    assert next(i.bytes for i in est.items if i.name == "weights") == nbytes
    assert any(a.name == "weights" and a.value == "file" for a in est.assumptions)
    assert est.details["params_total"] == llmsizer.count_params(llmsizer.load_model(str(path))).total


def test_estimate_from_a_gguf_counts_the_file_bytes(gguf_file):
    path, nbytes = gguf_file
    est = llmsizer.estimate_inference(str(path), context=128)  # a .gguf file: llama.cpp by default (engine_rule)
    engine = next(a.value for a in est.assumptions if a.name == "engine")
    assert engine == "llamacpp" and _weights(est) == nbytes
    for engine in ("vllm", "sglang"):  # they keep the GGUF tensors as they are
        est = llmsizer.estimate_inference(str(path), context=128, engine=engine)
        assert next(i.bytes for i in est.items if i.name == "weights") == nbytes
    for device in ("gpu", "cpu"):  # llama.cpp splits the same bytes between host and device
        est = llmsizer.estimate_inference(str(path), context=128, engine="llamacpp", device=device)
        assert _weights(est) == nbytes


def test_tied_gguf_on_gpu_adds_the_duplicated_output_matrix(tmp_path):
    pytest.importorskip("gguf")
    model = H.qwen3moe_gguf()  # tied: llama.cpp puts a copy of token_embd on the device (TENSOR_DUPLICATED)
    path = tmp_path / "tied.gguf"
    model.write(path)
    est = llmsizer.estimate_inference(str(path), context=128, engine="llamacpp", device="gpu")
    assert _weights(est) == sum(model.expected_bytes().values()) + model.expected_bytes()["token_embd.weight"]


@pytest.mark.parametrize("which", ["folder", "gguf_file"])
def test_cli_inspect_json(which, request):
    path, nbytes = request.getfixturevalue(which)
    r = _cli("inspect", str(path), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["file_weights"]["bytes"] == nbytes
    assert data["params"]["total"] > 0


def test_cli_infer_on_a_gguf(gguf_file):
    path, _ = gguf_file
    r = _cli("infer", str(path), "--engine", "llamacpp", "--context", "256", "--json")
    assert r.returncode == 0, r.stderr


def test_cli_damaged_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    r = _cli("inspect", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and str(bad) in r.stderr


def test_importing_llmsizer_and_reading_a_folder_stays_light(folder):
    """No numpy/torch/transformers/gguf behind `import llmsizer`, nor behind reading safetensors headers."""
    path, _ = folder
    code = ("import llmsizer, sys; llmsizer.load_model(sys.argv[1]); "
            "print([m for m in ('numpy', 'torch', 'transformers', 'gguf', 'safetensors', 'huggingface_hub') "
            "if m in sys.modules])")
    for extra in ([], [str(path)]):
        run = ["-c", code.replace("llmsizer.load_model(sys.argv[1]); ", "") if not extra else code, *extra]
        r = subprocess.run([sys.executable, *run], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=SRC), timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "[]"


def test_reading_a_gguf_stays_light(gguf_file):
    path, _ = gguf_file
    code = ("import llmsizer, sys; llmsizer.load_model(sys.argv[1]); "
            "print([m for m in ('numpy', 'torch', 'gguf') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=SRC), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"

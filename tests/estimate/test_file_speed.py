"""A model FILE gets a speed answer like a catalog model (fit FILE.gguf --device X exited 2 with "unknown weight
format 'file'", so the web calculator's grid for a dropped file was one error row). The bytes read per decode step
are the file's own tensor bytes (from gguf-py's block layouts in readers_helpers, not from llmsizer); the kernels
follow the file's largest non-F32 tensor type."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "readers"))
import readers_helpers as H  # noqa: E402

from cli_capture import run  # noqa: E402
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


def test_a_gguf_file_on_transformers_is_dequantized_and_timed_as_transformers(tmp_path):
    """transformers loads a .gguf by dequantizing it to torch tensors (transformers docs, "GGUF": "The GGUF checkpoint
    is dequantized to fp32", dtype=torch.bfloat16 allowed; modeling_gguf_pytorch_utils.load_gguf_checkpoint), so
    ``fit FILE.gguf --engine transformers`` holds and reads the dequantized weights (bf16, formats.engine_weights) and
    times them with transformers' step: no llama.cpp kernel assumption is left (it listed ``llamacpp_*`` and
    ``kernel_format=gguf:q8_0``). Truth: the parameters are the GGUF tensors' element counts (gguf-py shapes in
    readers_helpers, no rope_freqs table: transformers recomputes it), 2 bytes each."""
    pytest.importorskip("gguf")
    model = H.llama_gguf(layers=2, rope_freqs=False)
    path = tmp_path / "tiny.gguf"
    model.write(path)

    def names(d: dict) -> list[str]:
        return [a["name"] for a in d["assumptions"] + d["speed"]["assumptions"]]

    code, out, _ = run("fit", str(path), "--device", "a100", "--engine", "transformers")
    assert code == 0 and "[transformers, bf16, TP 1]" in out and "llamacpp_" not in out
    code, out, _ = run("fit", str(path), "--device", "a100", "--engine", "transformers", "--json")
    d = json.loads(out)
    assert code == 0 and (d["engine"], d["weights_format"], d["speed"]["weights_format"]) == ("transformers",) + ("bf16",) * 2
    assert d["memory"]["details"]["weights_bytes"] == d["speed"]["details"]["weights_bytes"] == 2 * model.numel()
    assert not any(n.startswith("llamacpp_") or n == "kernel_format" for n in names(d))
    assert any("dequantizes GGUF" in w for w in d["warnings"])
    # llama.cpp runs the file as it is: its bytes, its kernels; it is the default for a .gguf file (the engine of
    # the GGUF format, as for --weights q8_0), on a data-centre GPU too
    code, out, _ = run("fit", str(path), "--device", "a100", "--json")
    d = json.loads(out)
    assert code == 0 and d["engine"] == "llamacpp" and d["weights_format"] == "file"
    assert any(n.startswith("llamacpp_") for n in names(d))
    assert d["speed"]["details"]["weights_bytes"] == sum(model.expected_bytes().values())


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_gguf_file_on_a_gguf_engine_names_its_kernels_once(gguf_file, engine):
    """vLLM and SGLang run a GGUF file's tensors in their own step with 16-bit activations (vLLM
    quantization/gguf.py GGUFConfig.get_supported_act_dtypes; formats.engine_kernel_format): one ``kernel_format``
    assumption, bf16, whose reason names the file's largest type (it was listed twice: gguf:q4_0, then bf16)."""
    path, model = gguf_file
    by_type = model.by_type()  # gguf-py block sizes, independent of llmsizer
    largest = max((t for t in by_type if t != "F32"), key=lambda t: by_type[t])
    # (a context within the file's context_length: a serving engine refuses a longer one, estimate/context_window.py)
    code, out, err = run("fit", str(path), "--device", "a100", "--engine", engine, "--context", "256", "--json")
    assert code == 0, err
    d = json.loads(out)
    names = [a["name"] for a in d["speed"]["assumptions"]]
    assert len(names) == len(set(names)), names
    (kf,) = [a for a in d["assumptions"] + d["speed"]["assumptions"] if a["name"] == "kernel_format"]
    assert kf["value"] == "bf16" and f"largest tensor type {largest}" in kf["why"]
    code, out, err = run("fit", str(path), "--device", "a100", "--engine", engine, "--context", "256")
    assert code == 0 and out.count("kernel_format=") == 1


def test_fit_and_infer_show_the_weights_llamacpp_keeps_in_host_memory(gguf_file):
    """llama.cpp keeps the input layer in host memory ("always keep it on the CPU", src/llama-model.cpp:1603-1605 at
    0c1e57098, vendored by llama-cpp-python 0.3.36): a .gguf file on a GPU shows its weights as a device part and a
    host part, in fit's text, infer's table and both JSONs; together they are the file's tensor bytes (gguf-py's
    block table), the host part at least the token_embd table."""
    from llmsizer.units import format_bytes

    path, model = gguf_file
    nbytes = model.expected_bytes()
    for cmd in (["fit", str(path), "--device", "rtx-4090"], ["infer", str(path), "--memory", "24GiB"]):
        code, out, err = run(*cmd, "--json")
        assert code == 0, err
        d = json.loads(out)
        items = {i["name"]: i for i in (d["memory"] if cmd[0] == "fit" else d)["items"]}
        dev, host = items["weights"], items["weights_host"]
        assert (dev["location"], host["location"]) == ("device", "host")
        assert dev["bytes"] + host["bytes"] == sum(nbytes.values())
        assert host["bytes"] >= nbytes["token_embd.weight"]
        code, out, err = run(*cmd)
        assert code == 0, err
        if cmd[0] == "fit":
            line = next(ln for ln in out.splitlines() if "in host memory" in ln)
            assert f"weights {format_bytes(dev['bytes'])} on the device + {format_bytes(host['bytes'])}" in line
        else:
            assert any(ln.split()[:3] == ["weights_host", "host", *format_bytes(host["bytes"]).split()[:1]]
                       for ln in out.splitlines())

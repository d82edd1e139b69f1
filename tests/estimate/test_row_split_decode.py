"""llama.cpp ``-sm row`` decode (formulas/speed.py eq. 8r), re-derived by hand from llama.cpp's CUDA row split:
ggml-org/llama.cpp@f6d77a1ba0ac794e950bd3abb630b904bdcd8fb8 ggml/src/ggml-cuda/ggml-cuda.cu ``ggml_cuda_op_mul_mat``
(removed upstream later in 74976e1ae "CUDA: remove -sm row").

Per split matmul of a K x N matrix at one token: the main GPU's input goes to each other GPU, q8_1-quantized for a
quantized matrix (K padded to MATRIX_ROW_PADDING = 512, 36 B per 32 values: block_q8_1), and each other GPU's rows of
the f32 output come back to the main GPU; two event-ordered exchanges per matmul. Llama-3.1-8B (hidden 4096, 32 query
and 8 KV heads of 128, MLP 14336 gated, vocab 128256, 32 layers) on 3 equal GPUs in Q4_K_M:
- matmuls: 32 layers x 7 (q, k, v, o, gate, up, down) + the output matrix = 225;
- per layer, inputs to the 2 other GPUs: 2 x (6 x 4096/32 x 36 + 14336/32 x 36) = 2 x (27,648 + 16,128) = 87,552 B;
  outputs back: (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096) x 2/3 x 4 = 114,688 B;
- output matrix: 2 x 4608 + 128256 x 2/3 x 4 = 351,232 B;
- plus the layer split's own hops (eq. 8): the residual (4096 x 4 B) at the 2 changes of GPU and from the host's
  embedding row to GPU0, and the f32 logits back to the host (128256 x 4 B).
"""

from __future__ import annotations

import pytest

import llmsizer
from llmsizer.estimate import efficiency as E

KW = dict(engine="llamacpp", weights="q4_k_m")


def _decode(split_mode: str, model: str = "llama-3.1-8b") -> dict:
    r = llmsizer.fit(model, "rtx-4090", 3, split_mode=split_mode, **KW)
    assert r.speed is not None and r.speed.decode is not None
    return r.speed.details["split_decode"]


def test_row_split_transfers_and_exchanges_follow_llama_cpp() -> None:
    sd = _decode("row")
    per_layer = (
        2 * (6 * 4096 // 32 * 36 + 14336 // 32 * 36) + (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096) * 8 / 3
    )
    output = 2 * 4608 + 128256 * 8 / 3
    hops = 2 * 4096 * 4 + 4096 * 4 + 128256 * 4
    assert sd["exchanges"] == 32 * 7 + 1
    assert sd["transfer_bytes"] == int(32 * per_layer + output) + hops
    assert sd["source"] == "formulas/speed.py eq. (8r)"


def test_row_split_reads_in_parallel_and_pays_two_exchanges_per_matmul() -> None:
    row, layer = _decode("row"), _decode("layer")
    # each GPU reads its third of every matrix at once: the memory time is the slowest GPU's, not the sum (eq. 8)
    gpu = [d for d in row["devices"] if d["device"].startswith("GPU")]
    slowest = max(d["seconds"] for d in gpu)
    assert slowest <= row["memory_seconds"] < layer["memory_seconds"]
    assert row["memory_seconds"] < 0.5 * sum(d["seconds"] for d in gpu)
    # 2 exchanges per matmul at the named latency, counted with the bytes over the link
    assert row["transfer_seconds"] >= 2 * 225 * E.LLAMACPP_ROW_EXCHANGE.expected
    assert row["seconds"] == pytest.approx(row["memory_seconds"] + row["transfer_seconds"] + row["overhead_seconds"])


def test_row_split_pays_off_for_a_large_model_not_a_small_one() -> None:
    """Small model: the 2 x 225 exchanges outweigh the parallel reads; 70B: the parallel reads win."""
    assert _decode("row")["seconds"] > _decode("layer")["seconds"]
    big_row, big_layer = _decode("row", "llama-3.3-70b-instruct"), _decode("layer", "llama-3.3-70b-instruct")
    assert big_row["seconds"] < big_layer["seconds"]


def test_row_split_of_a_moe_model_says_it_is_not_modelled() -> None:
    r = llmsizer.fit("qwen3-30b-a3b", "rtx-4090", 2, split_mode="row", **KW)
    assert any("-sm row decode speed" in w for w in r.warnings)


def test_the_text_says_the_rows_are_read_at_once() -> None:
    from cli_capture import run, run_json

    argv = ["fit", "llama-3.1-8b", "--device", "rtx-4090", "--count", "3", "--engine", "llamacpp"]
    argv += ["--weights", "q4_k_m", "-sm", "row"]
    code, text, _ = run(*argv)
    _, data = run_json(*argv)
    sd = data["speed"]["details"]["split_decode"]
    assert code == 0 and "row-split decode (one sequence, eq. 8r)" in text and "225 x 2 exchanges" in text
    assert f"= {sd['seconds'] * 1e3:.1f} ms/token" in text

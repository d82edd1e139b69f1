"""review41 D1: eq. TP5's refusal at TP 1 (formulas/tensor_parallel.py ``every_degree_refusal``) is applied, not only
computed. SGLang checks every partition of a merged layer against block_n at any degree, TP 1 included (sglang 0.5.23
srt/layers/quantization/fp8.py:600-610, ``len(output_partition_sizes) > 1``); vLLM lets a merged layer of partial
blocks through (vllm 0.19.1 layers/linear.py:502-521). Before, `infer --tp 1` answered rc 0 and `fit --count 2`
"FITS [sglang, fp8-block, TP 1, 2 replicas]" on a layout SGLang refuses to load.

Truth: DeepSeek-V2-Lite's config.json: its dense layer 0's MLP (intermediate_size 10944 = 85.5 x 128, the
gate_up_proj partitions) is not whole 128-row FP8 blocks at TP 1, nor at any larger degree (10944 / t)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cli.cli_run import answer, run
from llmsizer import fit, recommend_inference
from llmsizer.errors import InputError
from llmsizer.models import load_model

M = "deepseek-v2-lite"
CFG = json.loads((Path(__file__).resolve().parents[2] / f"src/llmsizer/catalog/data/models/{M}.json").read_text())
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def test_premise_the_dense_mlp_is_not_whole_blocks_at_any_degree() -> None:
    inter = CFG["config"]["intermediate_size"]
    assert CFG["config"]["first_k_dense_replace"] >= 1 and inter % 128  # layer 0 is dense, 10944 rows
    assert all((inter / t) % 128 for t in (1, 2, 4, 8, 16))


def test_sglang_refuses_tp_1_in_one_line_and_vllm_loads_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", M, "--device", "h100-sxm", "--tp", "1", "--engine", "sglang", "--weights",
                        "fp8-block"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(s in err for s in ("--tp 1", "ffn_gate", "DeepSeek-V2-Lite", "10944 output rows",
                                  "block_n 128", "eq. TP5", "no degree loads it")), err
    assert answer(["infer", M, "--device", "h100-sxm", "--tp", "1", "--engine", "vllm", "--weights", "fp8-block"],
                  capsys)[0] == 0


def test_fit_on_two_devices_never_answers_fits_tp_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fit", M, "--device", "h100-sxm", "--count", "2", "--engine", "sglang", "--weights",
                          "fp8-block"], capsys)
    assert code == 2 and "FITS" not in out and err.count("\n") == 1 and "--tp 1" in err, (out, err)
    assert run(["fit", M, "--device", "h100-sxm", "--count", "2", "--engine", "vllm", "--weights", "fp8-block"],
               capsys)[0] == 0


def test_a_search_rejects_the_format_and_takes_the_next_rung() -> None:
    """A checkpoint shipped in FP8 blocks (its ladder fp8-block, fp8, awq-int4): SGLang loads the first rung at no
    degree, so the search takes the next rung that fits, on the same hardware where vLLM takes fp8-block."""
    spec = dataclasses.replace(load_model(M), quantization=tuple(sorted(FP8_BLOCK.items())))
    with pytest.raises(InputError, match="tensor_parallel 1 leaves ffn_gate"):
        fit(spec, "h100-sxm", 2, engine="sglang")
    sg, vl = recommend_inference(spec, engine="sglang"), recommend_inference(spec, engine="vllm")
    assert sg.options and not any(o.weights_format == "fp8-block" for o in sg.options)
    on_vllm = {o.target for o in vl.options if o.weights_format == "fp8-block"}
    assert on_vllm and any(o.weights_format == "fp8" and o.target in on_vllm for o in sg.options)

"""T5 / mT5 encoder-decoders (``ModelSpec.encoder_decoder``): parameters and weights are counted exactly
(tests/catalog/test_t5_params.py); serving is sized on transformers (tests/formulas/test_t5_serving_forward.py checks
the numbers against real generate() runs), and what is not modelled -- other engines, quantized formats, recommend's
search, training outside the measured setting -- is refused in one line naming the model and why
(estimate/model_warnings.py ``refuse_serving``, ``refuse_unmodelled``): exit 2, no traceback, no number. Truth: the
refusal rules themselves and the sources they cite (vLLM's registry, llama.cpp's t5-dec.cpp)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer import estimate_inference, estimate_training
from llmsizer.errors import InputError

SEQ2SEQ = ["t0_3b", "mt0-xxl"]


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_python_api_serves_on_transformers_and_refuses_the_rest(name):
    est = estimate_inference(name, engine="transformers", context=1024, output_tokens=128, concurrency=4)
    ed = est.details["encoder_decoder"]
    assert (ed["source_tokens"], ed["target_tokens"]) == (896, 128)
    params = 2_849_757_184 if name == "t0_3b" else 12_921_057_280  # = T5ForConditionalGeneration (test_t5_params)
    assert est.details["params_total"] == params
    # every weight in the stored dtype: mt0-xxl's config.json states float32; T0_3B's states none (bf16 assumed)
    assert est.item("weights").bytes == (2 if name == "t0_3b" else 4) * params
    with pytest.raises(InputError, match=r"encoder-decoder .*not on vllm: vLLM has no T5 .*registry.py"):
        estimate_inference(name, engine="vllm")
    with pytest.raises(InputError, match=r"encoder-decoder .*not on llamacpp: .*t5-dec.cpp"):
        estimate_inference(name, engine="llamacpp")
    with pytest.raises(InputError, match=r"encoder-decoder .*not nf4"):
        estimate_inference(name, engine="transformers", weights="nf4")
    with pytest.raises(InputError, match=r"encoder-decoder .*training memory .* not modelled"):
        estimate_training(name, method="lora", micro_batch=1, seq_len=256)


@pytest.mark.parametrize("argv", [("infer", "t0_3b", "--engine", "transformers"), ("infer", "t0_3b"),
                                  ("fit", "mt0-xxl", "--device", "a100"), ("infer", "t0_3b", "--device", "h100")])
def test_cli_answers_serving_on_transformers(argv):
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    body = json.loads(out)
    memory = body["memory"] if argv[0] == "fit" else body
    (engine,) = [a["value"] for a in memory["assumptions"] if a["name"] == "engine"]
    assert engine == "transformers" and (argv[0] != "fit" or body["engine"] == "transformers")
    ed = memory["details"]["encoder_decoder"]
    assert ed["source_tokens"] + ed["target_tokens"] == 4096  # the default context: source + target


@pytest.mark.parametrize("argv", [
    ("train", "t0_3b", "--method", "lora"), ("infer", "t0_3b", "--engine", "vllm"),
    ("infer", "t0_3b", "--engine", "llamacpp"), ("infer", "t0_3b", "--engine", "sglang"),
    ("fit", "t0_3b", "--device", "a100", "--train"), ("recommend", "t0_3b"),
    ("recommend", "mt0-xxl", "--train", "--tokens", "1e6"), ("infer", "t0_3b", "--weights", "int8"),
])
def test_cli_refuses_in_one_line_with_exit_2(argv):
    code, out, err = run(*argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "encoder-decoder" in lines[0] and "Traceback" not in err, err
    assert out == ""


def test_inspect_still_gives_the_exact_parameters():
    code, out, _ = run("inspect", "t0_3b", "--json")
    assert code == 0
    assert json.loads(out)["params"]["total"] == 2_849_757_184  # = T5ForConditionalGeneration (test_t5_params)


def test_models_fits_on_sizes_them_on_transformers():
    code, out, _ = run("models", "--fits-on", "h100", "--json")
    assert code in (0, 1)
    rows = {r["id"]: r for r in json.loads(out)["models"]}
    t0 = rows["bigscience/T0_3B"]
    assert (t0["status"], t0["engine"], t0["weights_format"]) == ("meets", "transformers", "bf16")
    assert any(r["status"] == "meets" for r in rows.values())  # decoder-only models are still sized



@pytest.mark.parametrize(("target", "fmt"), [(("apple-m3-max-64gb",), "bf16"),
                                             (("amd-epyc-9654", "--memory", "64GiB"), "fp32")])
def test_models_fits_on_apple_and_cpu_size_them_on_transformers_as_fit_does(target, fmt):
    """probe20 D2: on an Apple chip the search derived the chip as llama.cpp's host and that setting named
    llama.cpp (implied_engine) before the encoder-decoder rule, so mt0-xxl was judged on llama.cpp's F32-only mT5
    ladder ("does not fit, F32 48.13 GiB") while fit sizes it on transformers. Truth: the refusal rule (the model is
    modelled on transformers only, llama.cpp's t5-dec.cpp) and the weights, 12,921,057,280 parameters
    (= T5ForConditionalGeneration, test_t5_params) x 2 B in bf16 (25.84 GB: within the M3 Max's 48 GiB working set,
    fp32's 51.7 GB is not) or x 4 B in fp32 (within 64 GiB of CPU RAM)."""
    code, out, err = run("models", "mt0", "--fits-on", *target, "--json")
    assert code == 0, err
    (row,) = json.loads(out)["models"]
    assert (row["status"], row["engine"], row["weights_format"]) == ("meets", "transformers", fmt)
    code, out, err = run("fit", "mt0-xxl", "--device", *target, "--weights", fmt, "--json")
    assert code == 0, err
    body = json.loads(out)
    weights = next(i["bytes"] for i in body["memory"]["items"] if i["name"] == "weights")
    assert (body["engine"], weights) == ("transformers", (2 if fmt == "bf16" else 4) * 12_921_057_280)
    if fmt == "bf16":  # fit at the checkpoint's fp32 does not fit on the chip: its hint names the same rung
        code, out, _ = run("fit", "mt0-xxl", "--device", *target, "--json")
        hint = json.loads(out)["fits_at"]
        assert (code, hint["weights"], hint["engine"]) == (1, "bf16", "transformers")


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_full_fp32_eager_training_is_sized_and_other_settings_named(name):
    """The one setting whose activations are measured (tests/training/test_t5_saved_tensors.py) gives a number; a
    setting outside it is refused naming that setting."""
    est = estimate_training(name, method="full", precision="fp32", attention="eager", micro_batch=2, seq_len=256,
                            target_len=8)
    assert est.total("device")[1] > est.item("weights").bytes > 0
    with pytest.raises(InputError, match=r"encoder-decoder .*not modelled: precision 'bf16-mixed'"):
        estimate_training(name, method="full", attention="eager", micro_batch=2, seq_len=256)
    with pytest.raises(InputError, match=r"target_len applies to encoder-decoder"):
        estimate_training("qwen2.5-0.5b", micro_batch=1, seq_len=256, target_len=8)


def test_fp16_load_keeps_wo_in_fp32_and_warns():
    """An fp16 load adds 2 B per wo element (transformers _keep_in_fp32_modules; the element count is the real
    model's: tests/formulas/test_t5_serving_forward.py) and warns of T5's fp16 overflow; bf16 adds nothing."""
    fp16 = estimate_inference("t0_3b", engine="transformers", weights="fp16")
    bf16 = estimate_inference("t0_3b", engine="transformers", weights="bf16")
    wo = 2 * 24 * 2 * 5120 * 2048  # 24 encoder + 24 decoder blocks, wo [2048, 5120], 2 more bytes each
    assert fp16.item("weights").bytes - bf16.item("weights").bytes == wo
    assert any("overflow float16" in x for x in fp16.warnings)
    assert not any("overflow float16" in x for x in bf16.warnings)

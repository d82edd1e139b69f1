"""T5 / mT5 encoder-decoders (``ModelSpec.encoder_decoder``): parameters and weights are counted exactly
(tests/catalog/test_t5_params.py), but serving and training memory are not modelled, so every estimate path refuses
in one line naming the model and why (estimate/model_warnings.py ``refuse_unmodelled``): exit 2, no traceback, no
number. Truth: the refusal rule itself (the memory formulas take decoder-only layers); a decoder-only model of the
catalog passes the same calls."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer import estimate_inference, estimate_training
from llmsizer.errors import InputError

SEQ2SEQ = ["t0_3b", "mt0-xxl"]


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_python_api_refuses_serving_and_training(name):
    with pytest.raises(InputError, match=r"encoder-decoder .*24 encoder \+ 24 decoder layers.*serving memory"):
        estimate_inference(name)
    with pytest.raises(InputError, match=r"encoder-decoder .*training memory .* not modelled"):
        estimate_training(name, method="lora", micro_batch=1, seq_len=256)


@pytest.mark.parametrize("argv", [
    ("infer", "t0_3b"), ("train", "t0_3b", "--method", "lora"), ("fit", "mt0-xxl", "--device", "a100"),
    ("fit", "t0_3b", "--device", "a100", "--train"), ("recommend", "t0_3b"),
    ("recommend", "mt0-xxl", "--train", "--tokens", "1e6"),
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


def test_models_fits_on_lists_them_as_not_fitting_without_failing():
    code, out, _ = run("models", "--fits-on", "h100", "--json")
    assert code in (0, 1)
    rows = {r["id"]: r for r in json.loads(out)["models"]}
    assert rows["bigscience/T0_3B"]["status"] == "rejected" and "encoder-decoder" in rows["bigscience/T0_3B"]["reasons"][0]
    assert any(r["status"] == "meets" for r in rows.values())  # decoder-only models are still sized


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

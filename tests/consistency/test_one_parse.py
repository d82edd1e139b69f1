"""One reading of a number and one wording of an engine refusal on every surface (task oneparse).

A. A CLI integer flag reads text through the reader request files and the Python API use (units.parse_count): before,
   ``--grad-accumulation 4k`` was refused ("cannot read '4k' as a number") while a request's ``grad_accumulation: 4k``
   and Python's ``grad_accumulation="4k"`` were 4,000; ``--max-num-batched-tokens 8k`` was refused while Python's
   ``max_num_batched_tokens="8k"`` was 8,192 (a token length: binary thousands, as ``--context``), and Python's
   ``alpha="0.5"`` was cut to 0 (``--alpha 0.5`` is 0.5).
   The truth each reading is held to is the request reader's own reading of the same text (``load_request``), and the
   documented suffix rules: a count's k is 10^3 and M 10^6 (units.py ``_COUNT_SUFFIX``), a token length's k is 2^10
   (units.py ``parse_tokens``: Llama 3.1's "128K" window is 131072 = 128 x 1024 max_position_embeddings).
B. An engine refusal names the field as each surface names it: ``--engine`` on the CLI, ``engine`` in a request file
   (at the engine line) and in Python -- before, a request file and Python said "use --engine vllm", a flag no one
   gave there.
C. ``recommend --engine sglang`` of a model SGLang's serving is not modelled for says so once, exit 2 (it cannot be
   served on that engine on any device), instead of one rejection per candidate device, exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer import InferenceWorkload, TrainingWorkload, estimate_inference, recommend_inference
from llmsizer.errors import FieldError, InputError
from llmsizer.request import load_request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "request"))
from helpers import job_yaml  # noqa: E402

MODEL = "qwen2.5-0.5b"
MAMBA = "mamba-codestral-7b-v0.1"  # 64 Mamba-2 layers, no attention layer (its config.json)


def _settings(tmp_path: Path, settings: str):
    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("training", f"settings: {{{settings}}}"), "utf-8")
    return load_request(path).jobs[0].settings


def _train_assumption(*flags: str) -> dict:
    code, out = run_json("train", MODEL, *flags, "--json")
    assert code == 0, out
    return {a["name"]: a["value"] for a in out["assumptions"]}


@pytest.mark.parametrize(
    ("field", "flag", "text", "meant"),
    [
        ("grad_accumulation", "--grad-accumulation", "4k", 4 * 10**3),  # a count: k = 10^3
        ("grad_accumulation", "--grad-accumulation", "1e3", 10**3),
        ("micro_batch", "--micro-batch", "1.5k", 1500),
        ("seq_len", "--seq-len", "8k", 8 * 2**10),  # a token length: k = 2^10
    ],
)
def test_a_training_number_with_a_suffix_is_one_number(
    tmp_path: Path, field: str, flag: str, text: str, meant: int
) -> None:
    from_file = getattr(_settings(tmp_path, f"{field}: {text}"), field)
    assert from_file == meant
    assert getattr(TrainingWorkload(**{field: text}), field) == from_file
    assert _train_assumption(flag, text)[field] == from_file


def test_a_serving_number_with_a_suffix_is_one_number() -> None:
    """``--max-num-batched-tokens 8k`` / ``--ubatch 1k`` are token lengths as Python reads them (and as --context is),
    ``--concurrency 1.5M`` a count; the CLI's --json states the values it was given."""
    py = InferenceWorkload(max_num_batched_tokens="8k", concurrency="1.5M")
    assert (py.max_num_batched_tokens, py.concurrency) == (8 * 2**10, 1_500_000)
    code, out = run_json("infer", MODEL, "--engine", "vllm", "--max-num-batched-tokens", "8k", "--json")
    assert code == 0
    assert {a["name"]: a["value"] for a in out["assumptions"]}["max_num_batched_tokens"] == py.max_num_batched_tokens
    code, out = run_json("infer", MODEL, "--engine", "llamacpp", "--weights", "q4_k_m", "--ubatch", "1k", "--json")
    assert code == 0 and out["details"]["n_ubatch"] == InferenceWorkload(n_ubatch="1k").n_ubatch == 1024


def test_a_fractional_lora_alpha_is_kept_in_python_as_on_the_cli() -> None:
    assert TrainingWorkload(method="lora", alpha="0.5").alpha == 0.5
    assert TrainingWorkload(method="lora", alpha="32.5").alpha == 32.5
    from llmsizer.cli.main import build_parser  # the CLI's own parser (alpha has no memory effect: not in --json)

    argv = ["train", MODEL, "--method", "lora", "--alpha", "0.5"]
    assert build_parser(argv).parse_args(argv).alpha == 0.5


def test_a_fractional_number_field_reads_one_way(tmp_path: Path) -> None:
    """A number that may be fractional (LoRA alpha) written as text: '1.5k' is 1,500 in a request file (peft.alpha
    was refused: "must be a number"), on the CLI (--alpha: refused) and in Python (read); a word is one message."""
    from llmsizer.cli.main import build_parser

    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("training", "peft: {alpha: 1.5k}"), "utf-8")
    from_file = load_request(path).jobs[0].peft.alpha
    assert from_file == 1500
    argv = ["train", MODEL, "--method", "lora", "--alpha", "1.5k"]
    assert build_parser(argv).parse_args(argv).alpha == TrainingWorkload(method="lora", alpha="1.5k").alpha == from_file
    code, _, err = run("train", MODEL, "--method", "lora", "--alpha", "many")
    said = err.strip().split("--alpha: ", 1)[1].removesuffix(" (see --help)")
    assert code == 2 and said.startswith("cannot read 'many' as a number; expected a number in [0, ")
    with pytest.raises(InputError) as e:
        TrainingWorkload(method="lora", alpha="many")
    assert str(e.value) == f"alpha: {said}"
    path.write_text(job_yaml("training", "peft: {alpha: many}"), "utf-8")
    code, _, err = run("request", "check", str(path))
    assert code == 2 and err.strip().endswith(f"peft.alpha: {said}"), err


def _cli_reason(flag: str, text: str) -> str:
    code, out, err = run("train", MODEL, flag, text)
    assert code == 2 and not out
    line = err.strip().splitlines()[-1]
    return line.split(f"{flag}: ", 1)[1].removesuffix(" (see --help)")


@pytest.mark.parametrize(
    ("field", "flag", "text"),
    [
        ("grad_accumulation", "--grad-accumulation", "yes"),
        ("grad_accumulation", "--grad-accumulation", "2.5"),
        ("grad_accumulation", "--grad-accumulation", "4.00000000000000001"),  # 4.0 as a float, not a whole number
        ("checkpoint_every", "--checkpoint-every", "lots"),
    ],
)
def test_a_bad_number_is_one_message(tmp_path: Path, field: str, flag: str, text: str) -> None:
    said = _cli_reason(flag, text)
    assert text in said
    with pytest.raises(InputError) as e:
        TrainingWorkload(**{field: text})
    assert str(e.value) == f"{field}: {said}"
    if not text[0].isdigit():  # a YAML number is read by YAML, not as text; a word is the reader's
        path = tmp_path / "req.yaml"
        path.write_text(job_yaml("training", f"settings: {{{field}: '{text}'}}"), "utf-8")
        code, _, err = run("request", "check", str(path))
        assert code == 2 and err.strip().endswith(f"settings.{field}: {said}"), err


def test_the_word_message_says_suffixes_are_read_and_they_are() -> None:
    said = _cli_reason("--grad-accumulation", "yes")
    assert said.startswith("cannot read 'yes' as a number; expected an integer in [1, ") and "'40k' = 40,000" in said
    assert _train_assumption("--grad-accumulation", "40k")["grad_accumulation"] == 40_000


# B and C: the refusal of a model an engine's serving is not modelled for (estimate/model_warnings.py refuse_engine)
T5 = "t0_3b"  # an encoder-decoder: modelled on transformers only


def _python_refusal() -> str:
    with pytest.raises(FieldError) as e:
        estimate_inference(T5, engine="sglang")
    assert e.value.field == "engine"
    return str(e.value)


def test_the_engine_refusal_names_the_field_each_surface_has(tmp_path: Path) -> None:
    said = _python_refusal()
    assert "modelled on engine transformers with weights fp32" in said and "--" not in said  # no flag where none given
    cli = said.replace("engine transformers", "--engine transformers").replace("weights fp32", "--weights fp32")
    for cmd in (
        ("infer", T5, "--engine", "sglang"),
        ("fit", T5, "--engine", "sglang", "--device", "h100-sxm"),
    ):
        code, out, err = run(*cmd)
        assert code == 2 and not out and err.strip() == f"llmsizer: error: {cli}", (cmd, err)
    path = tmp_path / "req.yaml"
    text = job_yaml("inference", f"model: {{name: {T5}}}\nengine: sglang #<")
    path.write_text(text, "utf-8")
    engine_line = next(i for i, ln in enumerate(text.splitlines(), 1) if "#<" in ln)
    for cmd in (("request", "check", str(path)), ("plan", str(path))):
        code, out, err = run(*cmd)
        assert code == 2 and err.strip().endswith(f":{engine_line}: job 'chat' (inference): engine: {said}"), err


def test_a_model_with_no_attention_layer_is_searched_on_sglang() -> None:
    """SGLang 0.5.23 serves Mamba-Codestral (no attention layer: models/mamba2.py, configs/mamba2.py:36-38), once
    refused here; recommend searches it on SGLang as on vLLM: each candidate answered, no refusal."""
    assert recommend_inference(MAMBA, engine="sglang", context=2048).options
    assert recommend_inference(MAMBA, engine="vllm").options


def test_an_encoder_decoder_refusal_names_both_fields_each_surface_has() -> None:
    """T0 (a T5) is modelled on transformers with fp32/bf16/fp16 weights only (model_warnings.refuse_serving)."""
    with pytest.raises(FieldError) as e:
        estimate_inference("t0_3b", engine="vllm")
    said = str(e.value)
    assert "modelled on engine transformers with weights fp32" in said and "--" not in said
    code, out, err = run("infer", "t0_3b", "--engine", "vllm")
    cli = said.replace("engine transformers", "--engine transformers").replace("weights fp32", "--weights fp32")
    assert code == 2 and err.strip() == f"llmsizer: error: {cli}", err


def test_llamacpps_gpu_limit_names_count_and_engine_as_each_surface_does() -> None:
    """llama.cpp splits a model over at most llama_max_devices() = 16 GPUs (ggml-org/llama.cpp@01649e61c782
    src/llama.cpp:85-87), one machine's (specs/training.py llamacpp_split_gpus): a machine of 17 is refused."""
    from llmsizer import fit

    with pytest.raises(FieldError) as e:
        fit("llama-3.1-8b", "rtx-4090", count=17, gpus_per_node=17, engine="llamacpp")
    said = str(e.value)
    assert "give machines of 16 GPUs or fewer (gpus_per_node), or engine vllm" in said and "--" not in said
    code, out, err = run("fit", "llama-3.1-8b", "--engine", "llamacpp", "--device", "rtx-4090", "--count", "17",
                         "--gpus-per-node", "17")
    cli = said.replace("(gpus_per_node)", "(--gpus-per-node)").replace("engine vllm", "--engine vllm")
    assert code == 2 and not out and err.strip() == f"llmsizer: error: {cli}", err

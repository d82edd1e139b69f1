"""A setting written under another program's name (the engine's or the trainer's own flag) is answered with our key
on every face: the request reader, a Python field and the command line share suggest.py's one alias table
(``OTHER_PROGRAMS_NAMES``) (issues #12/#16). Before, ``settings: {tensor_parallel: 3}`` got "did you mean
'context_parallel'" (the most alike spelling) and Python's ``chunked_prefill_size=`` got no pointer at all.

Independent truth: the programs' own flags -- vLLM ``--tensor-parallel-size``, ``--max-num-batched-tokens``,
``--max-model-len`` (vllm/engine/arg_utils.py EngineArgs); SGLang ``--tp-size``, ``--chunked-prefill-size``,
``--max-running-requests`` (sglang/srt/server_args.py ServerArgs); Megatron ``--tensor-model-parallel-size``;
transformers ``TrainingArguments.gradient_accumulation_steps``."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer.errors import InputError
from llmsizer.request import RequestError, parse_request
from llmsizer.specs import InferenceWorkload
from llmsizer.specs.training import TrainingWorkload

from .helpers import job_yaml


@pytest.mark.parametrize("kind, body, key", [
    ("training", "settings: {tensor_parallel: 3}  #<", "tp"),
    ("training", "settings: {tensor_parallel_size: 2}  #<", "tp"),
    ("training", "settings: {pipeline_model_parallel_size: 2}  #<", "pp"),
    ("training", "settings: {gradient_accumulation_steps: 8}  #<", "grad_accumulation"),
    ("training", "settings: {per_device_train_batch_size: 8}  #<", "micro_batch"),
    ("inference", "engine_settings: {max_running_requests: 8}  #<", "max_num_seqs"),
])
def test_a_request_key_named_as_another_program_names_it_is_offered_ours(kind: str, body: str, key: str) -> None:
    with pytest.raises(RequestError) as exc:
        parse_request(job_yaml(kind, body), source="r.yaml")
    assert len(exc.value.errors) == 1 and f"did you mean {key!r}?" in exc.value.errors[0], exc.value.errors


@pytest.mark.parametrize("cls, word, field", [
    (InferenceWorkload, "chunked_prefill_size", "max_num_batched_tokens"),
    (InferenceWorkload, "max_model_len", "context"),
    (InferenceWorkload, "tp_size", "tensor_parallel"),
    (InferenceWorkload, "kv_cache_dtype", "kv_dtype"),
    (TrainingWorkload, "gradient_accumulation_steps", "grad_accumulation"),
])
def test_a_python_field_named_as_another_program_names_it_is_offered_ours(cls: type, word: str, field: str) -> None:
    with pytest.raises(InputError, match=f"did you mean {field!r}"):
        cls(**{word: 2})


@pytest.mark.parametrize("argv, flag", [
    (("infer", "llama-3.1-8b", "--tensor-parallel-size", "2"), "--tensor-parallel"),
    (("infer", "llama-3.1-8b", "--max-model-len", "4096"), "--context"),
    (("train", "llama-3.1-8b", "--tensor-model-parallel-size", "2"), "--tensor-parallel"),
    (("train", "llama-3.1-8b", "--gradient-accumulation-steps", "2"), "--grad-accumulation"),
])
def test_a_flag_named_as_another_program_names_it_is_offered_ours(argv: tuple[str, ...], flag: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and f"did you mean {flag!r}?" in err, (code, err)


# The devices a job runs on have three spellings across our own commands: fit and train take --count, infer and
# train take --gpus (llama.cpp's split; infer shards a replica with --tp), and DeepSpeed's launcher takes
# --num_gpus (deepspeed/launcher/runner.py parse_args). Before, `infer --device h100-sxm --count 2` was offered
# '--context' (the most alike spelling) and a request's `resources: {gpus: 2}` nothing.
@pytest.mark.parametrize("argv", [
    ("infer", "llama-3.1-8b", "--device", "h100-sxm", "--count", "2"),
    ("infer", "llama-3.1-8b", "--num-gpus", "2"),
])
def test_a_device_count_under_another_commands_name_is_offered_infers(argv: tuple[str, ...]) -> None:
    code, _, err = run(*argv)
    assert code == 2 and "did you mean '--gpus'?" in err, (code, err)


def test_a_device_count_under_another_name_is_offered_ours_in_python_and_requests() -> None:
    with pytest.raises(InputError, match="did you mean 'gpus'"):
        InferenceWorkload(count=2)  # type: ignore[call-arg]
    with pytest.raises(RequestError) as exc:
        parse_request(job_yaml("training", "resources: {device: h100-sxm, gpus: 2}  #<"), source="r.yaml")
    assert len(exc.value.errors) == 1 and "did you mean 'count'?" in exc.value.errors[0], exc.value.errors

"""`infer MODEL --engine vllm --gpus 4` names the flag that does what the user meant (s7probe): it said "gpus apply
to engine llamacpp; vllm shards a model with tensor_parallel", a field name no command takes."""

from __future__ import annotations

from cli_capture import run


def test_the_refusal_names_the_flag_and_the_flag_works() -> None:
    code, _, err = run("infer", "llama-3.1-70b", "--engine", "vllm", "--gpus", "4")
    assert code == 2 and err.count("\n") == 1 and "--tp N" in err, err
    code, _, err = run("infer", "llama-3.1-70b", "--engine", "vllm", "--tp", "4")  # what it points to is accepted
    assert code == 0 and err == ""

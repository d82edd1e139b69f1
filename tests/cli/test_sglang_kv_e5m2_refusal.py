"""`--kv-dtype fp8_e5m2` where SGLang refuses it: one line, exit 2 (task sglb200).

SGLang 0.5.23 asserts a DeepSeek DSA model's KV dtype is bfloat16 or fp8_e4m3 (arg_groups/overrides.py:539-544, on
every CUDA / ROCm GPU) and its trtllm_mla backend, DeepseekV3ForCausalLM's default on compute capability 10.x
(arg_groups/model_overrides/deepseek_v2.py:177-187), takes fp8_e4m3, bf16 or auto only (overrides.py:1204-1217)."""

import pytest

from cli_capture import run_cli


@pytest.mark.parametrize(("model", "device", "cite"), [
    ("deepseek-v3.2", "h200", "overrides.py:539-544"),
    ("deepseek-v3", "b200", "overrides.py:1204-1217")])
def test_fp8_e5m2_is_one_line_exit_2(model: str, device: str, cite: str) -> None:
    r = run_cli("infer", model, "--device", device, "--tp", "8", "--engine", "sglang", "--kv-dtype", "fp8_e5m2")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert cite in r.stderr and "--kv-dtype" in r.stderr


def test_fp8_e5m2_on_hopper_deepseek_v3_is_sized() -> None:
    r = run_cli("infer", "deepseek-v3", "--device", "h200", "--tp", "8", "--engine", "sglang", "--kv-dtype",
                "fp8_e5m2", "--json")
    assert r.returncode == 0, r.stderr

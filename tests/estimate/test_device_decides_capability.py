"""review35 D6: a ``gpu_capability`` given beside a named device overrode the device's own in the estimate
(nemotron-3-nano-30b-a3b bf16 on vLLM, device h100-sxm, gpu_capability 80: its router weights sized as on an A100,
63,171,713,408 B, where the device's 9.0 gives 63,155,886,464 B), while the speed and the format search read the
device: two answers for one device. Now the device decides: another value is refused in one line (InputError, a
ValueError too), the same value passes, and a device known only by its kind ('gpu') takes the one given."""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference, estimate_training
from llmsizer.errors import InputError

MODEL = "nvidia-nemotron-3-nano-30b-a3b-bf16"


def test_other_capability_beside_a_named_device_refused() -> None:
    with pytest.raises(InputError, match="gpu_capability 80: the device h100-sxm decides it"):
        estimate_inference(MODEL, engine="vllm", device="h100-sxm", gpu_capability=80)


def test_other_runtime_beside_a_named_device_refused() -> None:
    with pytest.raises(InputError, match="gpu_runtime 'rocm'"):
        estimate_inference(MODEL, engine="vllm", device="h100-sxm", gpu_runtime="rocm")
    with pytest.raises(InputError, match="gpu_runtime 'rocm'"):
        estimate_training("llama-3.2-1b", device="h100-sxm", gpu_runtime="rocm")


def test_the_same_capability_is_the_devices_answer() -> None:
    own = estimate_inference(MODEL, engine="vllm", device="h100-sxm")
    same = estimate_inference(MODEL, engine="vllm", device="h100-sxm", gpu_capability=90)  # H100: sm_90
    assert same.details["weights_bytes"] == own.details["weights_bytes"]
    # the A100's capability is the A100's answer, not the H100's (vLLM's fp32 gate below sm_90 differs)
    a100 = estimate_inference(MODEL, engine="vllm", device="a100-sxm-80gb")
    assert a100.details["weights_bytes"] != own.details["weights_bytes"]


def test_a_device_known_by_its_kind_takes_the_capability_given() -> None:
    a100 = estimate_inference(MODEL, engine="vllm", device="a100-sxm-80gb")
    generic = estimate_inference(MODEL, engine="vllm", device="gpu", gpu_capability=80)
    assert generic.details["weights_bytes"] == a100.details["weights_bytes"]

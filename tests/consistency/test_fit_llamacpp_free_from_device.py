"""probe20 D4: ``fit_llamacpp(model, device=...)`` required ``free`` while ``fit --auto --device`` and the web's /fit
fill it from the device. One rule now (estimate/llamacpp_fit.py ``device_free``): the device's memory on each GPU of
one llama.cpp copy. Truth: the memory an RTX 4090 reports, 24,564 MiB = 25,757,220,864 B (nvidia-smi's
"24564MiB" on RTX 4090s, tinygrad/open-gpu-kernel-modules PR #22), given as ``free``; the same question through the
CLI."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer import fit_llamacpp
from llmsizer.cli.common import json_text
from llmsizer.errors import InputError

RTX_4090_TOTAL_GLOBAL_MEM = 25_757_220_864


def test_python_without_free_takes_the_devices_memory_as_the_cli_does():
    asked = dict(device="rtx-4090", host_memory=128 * 2**30, context=8192)
    derived = fit_llamacpp("gpt-oss-120b", **asked)
    given = fit_llamacpp("gpt-oss-120b", free=[RTX_4090_TOTAL_GLOBAL_MEM], **asked)
    assert derived.to_dict() == given.to_dict()
    code, out, err = run("fit", "gpt-oss-120b", "--engine", "llamacpp", "--device", "rtx-4090", "--auto",
                         "--host-memory", "128GiB", "--context", "8192", "--json")
    assert code in (0, 1), err
    assert json.loads(out) == json.loads(json_text(derived.to_dict()))


def test_neither_free_nor_device_is_one_line():
    with pytest.raises(InputError, match=r"^free: .*or device="):
        fit_llamacpp("qwen3-8b")

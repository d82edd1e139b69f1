"""A training error about the device count names the flag the user typed: ``--count`` where the command took the
count from --count (train, fit --train: "devices (default: the instance's count, else --gpus, else 1)"), ``--gpus``
where --gpus gave it (cli/workload_args.py ``typed_flag``)."""

from __future__ import annotations

import pytest

from cli_capture import run_cli


@pytest.mark.parametrize(("argv", "named"), [
    (["fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--count", "8", "--tp", "3"], "--count"),
    (["train", "llama-3.1-8b", "--device", "h100-sxm", "--count", "8", "--tp", "3"], "--count"),
    (["train", "llama-3.1-8b", "--gpus", "8", "--tp", "3"], "--gpus"),
    (["fit", "llama-3.1-8b", "--train", "--device", "h100-sxm", "--gpus", "8", "--tp", "3"], "--gpus"),
])
def test_device_count_error_names_the_flag_given(argv: list[str], named: str):
    r = run_cli(*argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    # was "--gpus (8) must be a multiple of ..." for every spelling
    assert r.stderr.startswith(f"llmsizer: error: {named} (8) must be a multiple of --tp x --pp"), r.stderr

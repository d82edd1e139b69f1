"""A model path that does not exist is reported as a missing file, not as an unknown catalog name (s7probe):
`infer /tmp/x/model.gguf` said "unknown model '/tmp/x/model.gguf' (list them with `llmsizer models`)"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run


@pytest.mark.parametrize("name", ["model.gguf", "config.json", "folder/"])
def test_a_missing_model_path_says_no_such_file(tmp_path: Path, name: str) -> None:
    ref = str(tmp_path / name)
    assert not Path(ref).exists()
    code, _, err = run("infer", ref)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{ref}: no such file or folder" in err and "unknown model" not in err


def test_an_unknown_name_is_still_an_unknown_model() -> None:
    code, _, err = run("infer", "no-such-model-xyz")
    assert code == 2 and "unknown model 'no-such-model-xyz'" in err

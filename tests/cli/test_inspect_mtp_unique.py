"""``inspect`` names the MTP layer's two sizes apart (probe6 defect 12): the stored count includes the checkpoint's
copies of the embedding and output head (``model.layers.{L}.embed_tokens`` and ``shared_head.head``, each vocab x
hidden), the published line counts the unique parameters. Truth: the copies' shapes from each config (GLM-4.5:
151,552 x 5,120; DeepSeek-V3: 129,280 x 7,168, the tensor listing cited in formulas/mtp.py) and GLM-4.5's catalog
line, whose unique figure must be the one inspect calls unique."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json


@pytest.mark.parametrize(("model", "vocab", "hidden"), [("glm-4.5", 151_552, 5_120), ("deepseek-v3", 129_280, 7_168)])
def test_the_stored_count_is_the_unique_one_plus_the_two_copies(model: str, vocab: int, hidden: int) -> None:
    _, d = run_json("inspect", model)
    m = d["mtp"]
    assert m["params"] - m["unique_params"] == m["layers"] * 2 * vocab * hidden


def test_one_screen_says_which_count_is_which() -> None:
    _, d = run_json("inspect", "glm-4.5")
    _, out, _ = run("inspect", "glm-4.5")
    unique, stored = f"{d['mtp']['unique_params']:,}", f"{d['mtp']['params']:,}"
    assert f"adds {unique} unique ({stored} with the copies of the embedding and output head" in out
    assert f"{stored} parameters with the copies of the embedding and output head the checkpoint stores ({unique} " \
           "unique)" in out

"""``inspect`` names where its published parameter count is stated. Truth: Meta's Llama 3.1 model card
(meta-llama/llama-models models/llama3_1/MODEL_CARD.md @1b28708, its 'Params' column reads '70B', no finer figure)."""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run


def test_inspect_cites_the_model_card_for_the_published_count(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = answer(["inspect", "llama-3.1-70b"], capsys)
    assert data["published_params"] == 70 * 10**9  # the card's '70B'
    src = data["published_params_source"]
    assert "meta-llama/llama-models:models/llama3_1/MODEL_CARD.md" in src and "repository not recorded" not in src
    _, out, _ = run(["inspect", "llama-3.1-70b"], capsys)
    assert "published: 70,000,000,000 (source: Llama 3.1 model card" in out

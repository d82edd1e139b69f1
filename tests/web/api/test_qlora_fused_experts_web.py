"""probe28 N4 on the web: the training tab's answer (POST /api/v1/train) for QLoRA of an MoE base carries the
warning that its fused experts stay unquantized, word for word as `train --json` (tests/estimate/
test_qlora_fused_experts_warning.py has the arithmetic against the model's config)."""

from __future__ import annotations

import json

from cli_capture import run


def test_train_tab_warns_of_unquantized_fused_experts(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/train", json={"model": "qwen3-30b-a3b", "method": "qlora"})
    assert r.status_code == 200, r.text
    web = r.json()
    _, out, _ = run("train", "qwen3-30b-a3b", "--method", "qlora", "--json")
    assert web == json.loads(out)
    assert any(w.startswith("QLoRA of an MoE model") and "not NF4" in w for w in web["warnings"])

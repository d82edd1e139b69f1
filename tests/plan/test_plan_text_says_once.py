"""`plan` text says the training / inference memory ratio once (session 12). Its memory line states it ("2.30x the
inference estimate (19.03 GiB)") and the training estimate's warning repeated it ("sized with inference numbers ...
this would be 19.03 GiB; training needs 43.81 GiB per device (2.30x)"). The JSON keeps the warning; the text's one
statement carries the JSON's own numbers (training need / inference need)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_capture import run

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "lora-finetune-and-chat.yaml")


def test_the_inference_ratio_is_said_once_in_text_and_kept_in_json() -> None:
    code, out, err = run("plan", EXAMPLE, "--json")
    assert code == 0, err
    job = next(j for j in json.loads(out)["jobs"] if j["kind"] == "training")
    warned = [w for w in job["warnings"] if w.startswith("sized with inference numbers")]
    assert len(warned) == 1  # the JSON keeps it
    mem = {f["key"]: f["value"] for f in next(s for s in job["sections"] if s["key"] == "memory")["figures"]}
    ratio = f"{mem['need'] / mem['inference_need']:.2f}x"
    code, text, _ = run("plan", EXAMPLE)
    assert code == 0
    block = text[text.index(f"{job['name']} (training)"):]
    block = block[:block.index("\n\n")]
    assert block.count(ratio) == 1 and f"{ratio} the inference estimate" in block, block
    assert "sized with inference numbers" not in block

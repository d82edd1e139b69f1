"""probe28 D2 on the web: the training tab's answer (POST /api/v1/train) on an instance is `train --json`'s, whose
verdict checks the instance's RAM for the offloaded states of its 8 training processes as fit --train does
(tests/cli/test_probe28_training.py has the CLI side and the arithmetic)."""

from __future__ import annotations

import json

from cli_capture import run

FIELDS = {"model": "llama-3.1-70b", "device": "gcp-a2-highgpu-8g", "fsdp": "full", "seq": "2048",
          "precision": "fsdp-bf16-mixed", "offload": "params", "grad_checkpointing": "full"}


def test_train_tab_on_an_instance_says_the_host_does_not_hold_it(client) -> None:
    r = client.post("/api/v1/train", json=FIELDS)
    assert r.status_code == 200, r.text
    web = r.json()
    code, out, _ = run("train", "llama-3.1-70b", "--device", "gcp-a2-highgpu-8g", "--fsdp", "full", "--seq", "2048",
                       "--precision", "fsdp-bf16-mixed", "--offload", "params", "--grad-checkpointing", "full",
                       "--json")
    assert code == 1 and web == json.loads(out)
    assert web["details"]["fits"] is False and "host memory" in web["details"]["verdict"]
    assert web["totals"]["host"]["scope"] == "host per process"

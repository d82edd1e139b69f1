"""'Training sized with inference numbers': train's warning and the plan give one answer, the one `infer` gives for the
same sequences (s7probe). For the example's LoRA of Llama-3.1-8B (4 x 4096 tokens) `train` warned "this would be
16.52 GiB; training needs 43.32 GiB per device (2.6x)" (its own bf16-weights + one-forward sum, and the live tensors
without the CUDA context) while `plan` said "2.27x the inference estimate (19.27 GiB)" of a 43.81 GiB need, and
`infer llama-3.1-8b --context 4096 --concurrency 4 --weights bf16` answers 19.27 GiB."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

from llmsizer.cli.main import main
from llmsizer.plan import plan_file
from llmsizer.units import format_bytes

ROOT = Path(__file__).resolve().parents[2]


def _json(*argv: str) -> dict:  # type: ignore[type-arg]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main([*argv, "--json"])
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def test_train_plan_and_infer_agree() -> None:
    inf = _json("infer", "llama-3.1-8b", "--context", "4096", "--concurrency", "4", "--weights", "bf16",
                "--dtype", "bf16")["totals"]["device"]["bytes"]
    train = _json("train", "llama-3.1-8b", "--method", "lora", "--batch", "4", "--seq", "4096",
                  "--grad-accumulation", "8", "--grad-checkpointing", "full", "--device", "h100-sxm")
    need = train["totals"]["device"]["bytes"]
    (warning,) = [w for w in train["warnings"] if w.startswith("sized with inference numbers")]
    m = re.search(r"this would be (.+?); training needs (.+?) per device \(([\d.]+)x\)", warning)
    assert m is not None, warning
    assert (m.group(1), m.group(2)) == (format_bytes(inf), format_bytes(need))
    assert float(m.group(3)) == round(need / inf, 2)
    job = plan_file(ROOT / "examples" / "lora-finetune-and-chat.yaml").job("ticket-lora")
    mem = job.section("memory")
    assert mem.value("inference_need") == inf and mem.value("need") == need

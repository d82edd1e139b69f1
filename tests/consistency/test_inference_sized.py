"""'Training sized with inference numbers': train's warning and the plan give one answer, the one `infer` gives for the
same sequences (s7probe). For the example's LoRA of Llama-3.1-8B (4 x 4096 tokens) `train` warned "this would be
16.52 GiB; training needs 43.32 GiB per device (2.6x)" (its own bf16-weights + one-forward sum, and the live tensors
without the CUDA context) while `plan` said "2.27x the inference estimate (19.27 GiB)" of a 43.81 GiB need, and
`infer llama-3.1-8b --context 4096 --concurrency 4 --weights bf16` answers 19.27 GiB."""

from __future__ import annotations

import re
from pathlib import Path

from cli_capture import run_json
from llmsizer.plan import plan_file
from llmsizer.units import format_bytes

ROOT = Path(__file__).resolve().parents[2]


def _json(*argv: str) -> dict:  # type: ignore[type-arg]
    return run_json(*argv)[1]  # type: ignore[no-any-return]


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


def test_floor_is_below_every_serving_estimate() -> None:
    """train's warning asks for the serving estimate only when the training total exceeds ``inference_sized_floor``;
    that skips no warning only if the floor never exceeds ``inference_sized``. It is that estimate's weights item
    on a GPU (bf16 on its default engine), which does not depend on the batch or the length, and every other item
    is non-negative; 0 on a CPU (llama.cpp's gguf:bf16 keeps gpt-oss's experts in MXFP4). Checked for every catalog
    model on both device kinds."""
    from llmsizer.catalog.models import entries
    from llmsizer.estimate.inference import estimate_inference, inference_sized_floor

    for name, entry in entries().items():
        spec = entry.spec()
        assert inference_sized_floor(spec, "cpu") == 0
        for device in ("gpu", "cpu"):
            floor = inference_sized_floor(spec, device)
            est = estimate_inference(spec, context=2, concurrency=1, weights="bf16", dtype="bf16", device=device)
            where = "host" if device == "cpu" else "device"
            weights = [i for i in est.items if i.name == "weights" and i.location == where]
            assert len(weights) == 1 and weights[0].bytes >= floor, (name, device, weights, floor)
            assert all(i.bytes >= 0 for i in est.items), (name, device)


def test_warning_exactly_when_training_exceeds_the_serving_estimate() -> None:
    """The skipped estimate changes no warning: for trainings on both sides of the floor (QLoRA and LoRA under it,
    full training over it; one and several devices, a CPU run) the warning is there exactly when each device holds
    all the weights (not ZeRO-3) and the training total exceeds ``inference_sized``, computed here whatever the
    total, and names that number."""
    from llmsizer.catalog.models import find_spec
    from llmsizer.estimate.inference import inference_sized, inference_sized_floor
    from llmsizer.estimate.training import estimate_training

    sides = set()
    for name in ("qwen2.5-0.5b", "llama-3.1-8b", "qwen3-30b-a3b"):
        spec = find_spec(name)
        for kw in (dict(method="qlora", micro_batch=1, seq_len=512), dict(method="lora", micro_batch=1, seq_len=128),
                   dict(method="lora", micro_batch=8, seq_len=8192), dict(method="full", micro_batch=2, seq_len=2048),
                   dict(method="full", micro_batch=1, seq_len=1024, gpus=8, zero=3),
                   dict(method="lora", micro_batch=1, seq_len=256, device="cpu")):
            est = estimate_training(spec, **kw)
            peak = est.total("device")[1]
            inf = inference_sized(spec, int(kw["micro_batch"]), int(kw["seq_len"]), str(kw.get("device", "gpu")))
            said = [x for x in est.warnings if x.startswith("sized with inference numbers")]
            # ZeRO-3 splits the weights over the 8 devices: its per-device need is no counterpart of serving on
            # one device, which holds them all (probe3 #3), so nothing is compared there
            whole = int(kw.get("zero", 0)) < 3
            assert len(said) == (1 if whole and peak > inf else 0), (name, kw, peak, inf)
            if said:
                assert f"this would be {format_bytes(inf)};" in said[0]
            sides.add(peak > inference_sized_floor(spec, str(kw.get("device", "gpu"))))
    assert sides == {True, False}  # the grid has trainings the floor lets through and ones it stops

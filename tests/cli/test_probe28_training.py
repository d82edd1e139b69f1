"""probe28's training defects, each through the real CLI with the verdict the framework's own rule gives.

- D1: DeepSpeed's ``PipelineEngine.__init__`` asserts ``zero_optimization_stage() < ZeroStageEnum.gradients``
  ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", deepspeed/runtime/pipe/engine.py:76-77
  @edaa7221): with pp > 1 a stated ZeRO-2/3 is refused (exit 2, one line) and the stage chosen for memory is 0 or
  1. AutoTP tensor parallelism with ZeRO-3 is supported (deepspeed/runtime/engine.py:666-669): answered.
- D4: FSDP at the default precision (bf16-mixed: torch.autocast's bf16 weight copies held to the backward) tries
  FSDP's own mixed precision (fsdp-bf16-mixed) before leaving full fine-tuning for LoRA.
"""

from __future__ import annotations

import re

import pytest

from cli_capture import run, run_json
from llmsizer.errors import InputError
from llmsizer.estimate.fit import TRAINING_LADDER, fit_training

MODEL = "llama-3.1-70b"


def _zero(d: dict) -> int:
    return next(int(a["value"]) for a in d["assumptions"] if a["name"] == "zero")


@pytest.mark.parametrize("zero,pp,gpus", [(2, 4, 32), (3, 2, 8)])
def test_deepspeed_zero2_3_with_pipeline_is_refused(zero: int, pp: int, gpus: int) -> None:
    code, out, err = run("train", MODEL, "--zero", str(zero), "--pp", str(pp), "--gpus", str(gpus))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "incompatible with pipeline parallelism" in err
    assert "pipe/engine.py:76-77" in err


def test_chosen_stage_under_pipeline_is_at_most_one() -> None:
    argv = ("--pp", "4", "--grad-checkpointing", "full")
    code, d = run_json("train", MODEL, *argv, "--gpus", "32", "--device", "h100")
    assert code in (0, 1)
    stage = _zero(d)
    assert stage in (0, 1)
    # the verdict is that of the stage stated (the one DeepSpeed runs), not of a stage it refuses
    code1, d1 = run_json("train", MODEL, *argv, "--gpus", "32", "--device", "h100", "--zero", str(stage))
    assert code1 == code and d1["details"]["fits"] == d["details"]["fits"]
    code, f = run_json("fit", MODEL, "--train", *argv, "--count", "32", "--device", "h100")
    assert _zero(f) in (0, 1) and f["fits"] == d["details"]["fits"]


def test_zero3_with_tensor_parallelism_is_answered() -> None:
    code, _, err = run("train", MODEL, "--zero", "3", "--tp", "2", "--gpus", "8")
    assert code == 0 and "pipeline" not in err


def test_megatron_distributed_optimizer_with_pipeline_is_answered() -> None:
    # Megatron-Core's distributed optimizer runs beside its own pipeline; the refusal is DeepSpeed's engine's
    code, _, _ = run("train", MODEL, "--precision", "megatron-bf16", "--zero", "2", "--pp", "2", "--gpus", "8")
    assert code == 0


def test_fsdp_ladder_tries_fsdp_mixed_precision_before_lora() -> None:
    args = ("--device", "h100", "--count", "8", "--fsdp", "full", "--seq", "4096")
    code, d = run_json("fit", MODEL, "--train", *args)
    assert code == 1 and d["fits"] is False
    changes = d["fits_at"]["changes"]
    assert changes.get("precision") == "fsdp-bf16-mixed" and "method" not in changes  # full fine-tuning kept
    fields = {"fsdp": "full", "seq_len": 4096}
    assert fit_training(MODEL, "h100", 8, **fields, **changes).fits
    for step in TRAINING_LADDER[:TRAINING_LADDER.index(changes)]:  # the least change: no earlier step fits
        try:
            assert not fit_training(MODEL, "h100", 8, **fields, **step).fits
        except InputError:  # a step FSDP refuses (DeepSpeed's optimizer-only offload)
            pass
    _, out, _ = run("fit", MODEL, "--train", *args)
    assert "--precision fsdp-bf16-mixed" in out and "--method lora" not in out.split("hint:")[1].splitlines()[0]


D2 = ("llama-3.1-70b", "--device", "gcp-a2-highgpu-8g", "--fsdp", "full", "--seq", "2048", "--precision",
      "fsdp-bf16-mixed", "--offload", "params", "--grad-checkpointing", "full")


def test_train_on_an_instance_checks_its_ram_as_fit() -> None:
    # every one of the instance's 8 training processes pins its own offloaded share (Ren et al. 2021 section 4):
    # the machine needs 8 x the per-process host total, checked against the instance's RAM as fit --train checks it
    code, d = run_json("train", *D2)
    per_process = d["totals"]["host"]["bytes"]
    assert d["totals"]["host"]["scope"] == "host per process"
    ram = 680 * 2**30  # a2-highgpu-8g: 680 GB memory (Google Cloud 'GPU machine types'), read as the larger GiB
    assert 8 * per_process > ram  # so the run cannot be held: fit's verdict, and train's with it
    assert code == 1 and d["details"]["fits"] is False
    fcode, f = run_json("fit", *D2, "--train")
    assert fcode == 1 and f["fits"] is False
    _, out, _ = run("train", *D2)
    assert "TOTAL host per process" in out and "fits: NO" in out and "8 training processes x" in out


def test_cpu_instances_time_their_collectives_over_the_network() -> None:
    # one CPU per c3d-standard-360 instance: DDP's gradient all-reduce crosses the network on every ring hop, 2 (n-1)/n
    # x the fp32 gradients (Patarasuk & Yuan 2009's ring; PyTorch DDP reduces in the gradients' dtype, fp32 under
    # bf16-mixed) at the 100 Gb/s given
    code, d = run_json("fit", "llama-3.1-8b", "--train", "--device", "gcp-c3d-standard-360", "--count", "2",
                       "--tokens", "10M", "--network", "100Gbps")
    step = d["training_time"]["step"]
    # Llama-3.1-8B's config.json (hidden 4096, intermediate 14336, 32 layers, 8 KV heads of 128, vocab 128256,
    # untied): 8,030,261,248 parameters, the count its model card gives as 8.03B; fp32 gradients of each
    h, inter, layers, kv, vocab = 4096, 14336, 32, 1024, 128256
    grads = 4 * (layers * (2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h) + 2 * vocab * h + h)
    assert step["comm_bytes"] == pytest.approx(2 * (2 - 1) / 2 * grads, rel=1e-3)
    assert step["bus_bandwidth"] == pytest.approx(100e9 / 8)
    assert not any("no interconnect bandwidth" in w for w in d["warnings"])


def test_recommend_rejects_untimeable_cpu_cluster_and_advises_fsdp_precision() -> None:
    code, d = run_json("recommend", MODEL, "--train", "--tokens", "1B", "--fsdp", "full")
    assert code == 0
    # the catalog's c3d-standard-360 has one CPU and no network: 2+ of them have no bandwidth for the all-reduce
    options = [o for o in d["options"] if o["device_kind"] == "cpu" and o["count"] > 1]
    assert options == []
    cpu = [o for o in d["rejected"] if o["target"] == "gcp-c3d-standard-360"]
    assert cpu and "data-parallel communication cannot be timed" in cpu[0]["reasons"][0]
    assert d["chosen"]["device_kind"] == "gpu"
    # every GPU option on its own instance is short with autocast's copies: the ladder's FSDP precision step named
    line = next(a for a in d["advice"] if "fsdp-bf16-mixed" in a)
    m = re.search(r"torchtune train\), (.*?), one (\S+) holds the run", line)
    assert m is not None, line
    flags, target = m.group(1).split(), m.group(2)
    fields = {k.removeprefix("--").replace("-", "_"): v for k, v in zip(flags[::2], flags[1::2], strict=True)}
    assert fields["precision"] == "fsdp-bf16-mixed"
    assert fit_training(MODEL, target, None, fsdp="full", **fields).fits


def test_scale_out_bounds_keep_pipelined_and_unpipelined_apart_on_deepspeed() -> None:
    # DeepSpeed's pipeline takes ZeRO-0/1 only (pipe/engine.py:76-77) while an unpipelined layout may take ZeRO-3:
    # a pipelined layout not fitting says nothing of an unpipelined one; Megatron's distributed optimizer (no such
    # cap) keeps the degree order (more pipeline stages, no more memory)
    from llmsizer.estimate.recommend_layout import _bounds, _pipeline_caps_zero
    one, two = {"tp": 1, "pp": 1, "ep": 1}, {"tp": 1, "pp": 2, "ep": 1}
    assert _pipeline_caps_zero({}) and not _bounds(one, two, True)
    assert not _pipeline_caps_zero({"precision": "megatron-bf16"}) and _bounds(one, two, False)
    assert not _pipeline_caps_zero({"zero": 1}) and not _pipeline_caps_zero({"fsdp": "full"})
    # the recommended 70B run (DeepSpeed, stage chosen) is the same cheapest option the stated layout's growth gives
    code, d = run_json("recommend", MODEL, "--train", "--tokens", "1B")
    chosen = d["chosen"]
    assert code == 0 and chosen["device_kind"] == "gpu"
    fr = fit_training(MODEL, chosen["target"], chosen["count"], tokens=1e9)
    assert fr.fits and chosen["run_cost"] == pytest.approx(fr.training_time["cost"], rel=1e-6)


def test_no_option_runs_on_more_machines_than_the_search_cap() -> None:
    """review38 D1: MAX_SEARCH_NODES (recommend.py) is the most machines a run is grown to. A candidate already grown
    to several instances (the stated layout grown by data-parallel instances) was multiplied by up to that cap again:
    2000T tokens of Llama-3.1-8B chose 3,968 x p5en.48xlarge. Every option, chosen or rejected, is at most the cap."""
    from llmsizer.recommend import MAX_SEARCH_NODES

    code, rec = run_json("recommend", "llama-3.1-8b", "--train", "--tokens", "2000T", "--method", "full",
                         "--seq-len", "4096", "--micro-batch", "4")
    options = [*rec["options"], *rec["rejected"]]
    assert options and all((o.get("instances") or 1) <= MAX_SEARCH_NODES for o in options)
    assert code == 1 and not any(o["status"] == "chosen" for o in rec["options"])  # nothing meets within the cap

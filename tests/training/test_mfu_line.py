"""The MFU a training answer implies, against PaLM's definition computed here from the real model (probe17 F3).

`train --tokens` states a utilisation u of the GEMMs; the wall clock also holds memory-bound kernels, the optimizer
step and attention at its executed FLOPs, so the model-FLOPs utilisation the answer implies is lower. The answer
carries it (Duration.mfu, JSON ``duration.mfu``) and the duration line prints it.

Independent truth: MFU = tokens x (6N + 12 L H Q T) / (seconds x devices x peak) (Chowdhery et al. 2022, "PaLM",
arXiv 2204.02311, section 4.1 and Appendix B: model FLOPs per token 6N + 12LHQT, recomputation not counted), with N
the parameters of the transformers model built from the catalog's config.json on the meta device, L H Q from that
config, T the sequence, the peak read from the catalog's accelerators.json and the seconds from the answer (the
quantity MFU is a statement about). Recomputation (--grad-checkpointing full) lengthens the run but not the count.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

import pytest

from llmsizer.catalog.models import entries
from llmsizer.cli.common import json_text, resolve_model
from llmsizer.cli.main import build_parser
from llmsizer.cli.train_cmd import render_duration, train_answer

pytest.importorskip("transformers")
from oracle_utils import build, real_param_count  # noqa: E402  (needs torch + transformers)

MODEL = "llama-3.1-8b"
SEQ = 4096
TOKENS = 1e9


@functools.cache
def _model_flops_per_token() -> float:
    cfg = entries()[MODEL].config
    n = real_param_count(build(cfg))
    heads_x_dim = cfg["num_attention_heads"] * cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    return 6.0 * n + 12.0 * cfg["num_hidden_layers"] * heads_x_dim * SEQ


def _peak_bf16(device: str) -> float:
    data = json.loads(resources.files("llmsizer.catalog").joinpath("data/hardware/accelerators.json")
                      .read_text("utf-8"))
    (entry,) = [d for d in data["devices"] if d["id"] == device]
    assert entry["flops"]["bf16"]["unit"] == "TFLOP/s"
    return float(entry["flops"]["bf16"]["value"]) * 1e12


RUNS = [  # (argv, devices)
    (f"{MODEL} --method full --batch 1 --seq {SEQ} --grad-checkpointing none --device h100-sxm --tokens 1B "
     "--utilization 0.4", 1),  # probe17 F3's run: 40 % of the GEMMs, 30.6 % MFU by hand
    (f"{MODEL} --method full --batch 1 --seq {SEQ} --grad-checkpointing full --device h100-sxm --tokens 1B", 1),
    (f"{MODEL} --method full --batch 1 --seq {SEQ} --gpus 8 --zero 3 --device h100-sxm --count 8 --tokens 1B", 8),
]


@pytest.mark.parametrize(("argv", "devices"), RUNS)
def test_duration_mfu_is_palm_model_flops_over_the_wall_clock(argv: str, devices: int) -> None:
    words = ["train", *argv.split()]
    args = build_parser(words).parse_args(words)
    data, _, _, duration, _ = train_answer(resolve_model(args), args)
    du = json.loads(json_text(data))["duration"]  # the bytes the CLI's --json and the API give
    assert du["seconds"] and du["devices"] == devices and du["tokens"] == TOKENS
    truth = TOKENS * _model_flops_per_token() / (du["seconds"] * devices * _peak_bf16("h100-sxm"))
    assert du["mfu"] == pytest.approx(truth, rel=1e-9)
    # the given (or calibrated) u is of the GEMMs only: the wall clock's other work puts MFU below it
    assert du["utilization_applies_to"] == "the GEMMs" and truth < du["utilization"]
    line = render_duration(duration).split("\n")[0]
    assert " on the GEMMs; per micro-step " in line and f"; MFU {truth:.1%} (6N + 12 L d s per token" in line


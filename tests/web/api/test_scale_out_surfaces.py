"""tpsearch: the scale-out search's choice (recommend --train for a model no instance holds: each instance type's
fastest layout of every TP, PP and EP timed, estimate/recommend_layout.py fastest_layout) is one answer on every
surface -- the Python API (recommend_training), the CLI's `recommend --train --json` (a subprocess of the real entry
point) and the web API's /api/v1/recommend give the same options: the same instance type, count, searched layout,
run time and printed `fit --train` command. On 64 x p4de that layout is TP 2 PP 8 EP 4, not the TP 8 EP 8 the search
chose before (55.2 h against 35.0 h at 1e9 tokens in tests/training/test_recommend_scale_out.py)."""

from __future__ import annotations

from web_api_helpers import run_cli_json

from llmsizer.recommend import Constraints, recommend_training

FLAGS = ("--train", "--tokens", "1B", "--precision", "megatron-bf16", "--grad-checkpointing", "full",
         "--provider", "aws")


def _searched(options: list[dict]) -> list[tuple]:
    return [(o["target"], o["count"], o["layout"], o["training_seconds"],
             next(r for r in o["reasons"] if "scale-out search" in r)) for o in options]


def test_the_searched_layouts_are_one_answer_on_every_surface(client) -> None:
    rec = recommend_training("qwen3-235b-a22b", tokens=1e9, constraints=Constraints(providers=("aws",)),
                             precision="megatron-bf16", grad_checkpointing="full")
    py = _searched([o.to_dict() for o in rec.options])
    cli = _searched(run_cli_json("recommend", "qwen3-235b-a22b", *FLAGS)["options"])
    r = client.post("/api/v1/recommend", json={"model": "qwen3-235b-a22b", "train": True, "tokens": "1B",
                                               "precision": "megatron-bf16", "grad_checkpointing": "full",
                                               "provider": ["aws"]})
    assert r.status_code == 200, r.text
    web = _searched(r.json()["options"])
    assert py == cli == web
    p4de = next(o for o in py if o[0] == "aws-p4de.24xlarge")
    assert "TP 2 (searched)" in p4de[2] and "--tp 2 " in p4de[4]  # a TP below the machine's 8 (before: TP 8)


def test_a_dense_models_sequence_parallelism_is_one_answer_on_every_surface(client) -> None:
    """megsp: the search's sequence-parallel choice for a dense model (Llama-3.1-70B under Megatron: on where it is
    faster, tests/training/test_recommend_scale_out.py) is the same option on every surface, named in its layout
    line and carried by its printed command."""
    rec = recommend_training("llama-3.1-70b-instruct", tokens=1e9, constraints=Constraints(providers=("aws",)),
                             precision="megatron-bf16", grad_checkpointing="full")
    py = _searched([o.to_dict() for o in rec.options])
    cli = _searched(run_cli_json("recommend", "llama-3.1-70b-instruct", *FLAGS)["options"])
    r = client.post("/api/v1/recommend", json={"model": "llama-3.1-70b-instruct", "train": True, "tokens": "1B",
                                               "precision": "megatron-bf16", "grad_checkpointing": "full",
                                               "provider": ["aws"]})
    assert r.status_code == 200, r.text
    assert py == cli == _searched(r.json()["options"])
    g6e = next(o for o in py if o[0] == "aws-g6e.48xlarge")
    assert "sequence parallel (searched)" in g6e[2] and " --sequence-parallel" in g6e[4]  # before: neither

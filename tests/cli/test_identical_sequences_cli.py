"""fit --identical-sequences through the real entry point: a stated property of the workload (every sequence carries
the same tokens, as llama-batched-bench feeds them), read only by the decode speed of MoE models (formulas/speed.py
eqs. 5 and 11); distinct prompts by default; refused where no speed is answered (infer) or with --train."""

from __future__ import annotations

import json
from pathlib import Path

from cli_capture import run_cli

ROOT = Path(__file__).resolve().parents[2]
OSS = ["fit", "gpt-oss-120b", "--device", "dgx-spark", "--engine", "llamacpp", "--context", "4096",
       "--concurrency", "16", "--json"]


def _assumptions(data: dict) -> dict[str, dict]:
    return {a["name"]: a for a in data["speed"]["assumptions"]}


def test_identical_sequences_read_fewer_experts_and_say_so() -> None:
    distinct, identical = (json.loads(run_cli(*OSS, *extra).stdout) for extra in ([], ["--identical-sequences"]))
    d, i = _assumptions(distinct), _assumptions(identical)
    assert d["identical_sequences"]["value"] is False and d["identical_sequences"]["default"] is True
    assert i["identical_sequences"]["value"] is True and i["identical_sequences"]["default"] is False
    assert "identical_sequences_routing" in i and "identical_sequences_routing" not in d
    assert identical["speed"]["tokens_per_second"] > distinct["speed"]["tokens_per_second"]
    # memory does not depend on it
    assert identical["memory_per_device"] == distinct["memory_per_device"]


def test_refused_where_nothing_reads_it() -> None:
    for args in (["infer", "gpt-oss-120b", "--identical-sequences"],
                 ["fit", "llama-3.1-8b", "--device", "h100-sxm", "--train", "--tokens", "1B",
                  "--identical-sequences"]):
        r = run_cli(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "identical-sequences" in r.stderr, r.stderr

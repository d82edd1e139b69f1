"""The catalog name a user gives, resolved to a release of the same architecture, is the user's input, not a default
(smalls3 #5): `model.name=llama-3.1-70b resolved to meta-llama/Llama-3.1-70B-Instruct (...) (default)` marked it as
one. A value the reader derived (a config default) stays a default. (llama-3.1-70b is now the base's own entry,
meta-llama/Llama-3.1-70B, probe25 C4: the resolved name asked is llama-3.1-8b-instruct, a release of the 8B base.)"""

from __future__ import annotations

from cli_capture import run
from llmsizer import estimate_inference


def test_the_resolved_name_is_given_and_unmarked() -> None:
    est = estimate_inference("llama-3.1-8b-instruct", memory=160 * 2**30, tensor_parallel=2)
    name = [a for a in est.assumptions if a.name == "model.name"]
    assert len(name) == 1 and name[0].default is False
    assert name[0].value.startswith("llama-3.1-8b-instruct resolved to meta-llama/Llama-3.1-8B ")
    _, out, _ = run("infer", "llama-3.1-8b-instruct")
    line = next(x for x in out.splitlines() if x.startswith("assumptions:"))
    note = next(p for p in line.split("; ") if p.startswith("model.name="))
    assert not note.endswith("(default)")


def test_a_config_default_stays_a_default() -> None:
    est = estimate_inference("nemotron-h-56b-base-8k", memory=160 * 2**30, tensor_parallel=2, engine="vllm")
    head_dim = [a for a in est.assumptions if a.name == "model.head_dim"]
    assert len(head_dim) == 1 and head_dim[0].default is True

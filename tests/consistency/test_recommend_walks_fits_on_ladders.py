"""recommend's catalog search and ``models --fits-on INSTANCE`` ask one question of each candidate, so they give one
verdict, engine and weight format: both walk the same engine ladders (estimate/format_search.py ``walk_ladders``:
vLLM's or SGLang's, then llama.cpp's GGUF ladder where no engine is named and the first ends with no rung that
meets, ``next_ladder_engine``). Before, recommend walked only the first ladder: Llama-3.3-70B at 8k x 2 was rejected
on 2 x A10 (azure-standard_nv72ads_a10_v5: "vLLM would fail at start-up") while fits-on met at Q3_K_M on llama.cpp.

Each test runs recommend and then, for every target in its answer (options and rejections), the ``models --fits-on``
command's own answer (the CLI's parser and ``models_answer``, in process) for the same model and workload."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import fit
from llmsizer.catalog.hardware import load_catalog
from llmsizer.cli.main import build_parser
from llmsizer.cli.model_cmds import models_answer
from llmsizer.errors import InputError
from llmsizer.estimate.device import engine_runs_on
from llmsizer.recommend import Option, recommend_inference


def _fits_on(model: str, target: str, flags: list[str]) -> dict[str, Any]:
    argv = ["models", model, "--fits-on", target, *flags, "--json"]
    data, _ = models_answer(build_parser(argv).parse_args(argv))
    rows = data["models"]
    assert len(rows) == 1, [r["id"] for r in rows]  # the query names one catalog model
    return rows[0]


def _verdict(o: Option) -> str:
    return "meets" if o.status in ("meets", "chosen") else o.status


def _same_answers(model: str, rec_kw: dict[str, Any], flags: list[str]) -> list[Option]:
    rec = recommend_inference(model, quantization_advice=False, **rec_kw)
    engine = rec_kw.get("engine")
    every = [*rec.options, *rec.rejected]
    assert len(every) > 100  # the whole catalog was searched
    for o in every:
        if o.reasons and o.reasons[0].startswith("memory size unknown"):  # no sourced memory: fits-on refuses it
            with pytest.raises(InputError, match="no sourced memory size"):
                _fits_on(model, o.target, flags)
            continue
        if engine is not None and not engine_runs_on(engine, load_catalog().devices[o.device]):  # fits-on refuses
            with pytest.raises(InputError, match="profile models GPU serving"):  # (fit's, check_engine_on_device)
                _fits_on(model, o.target, flags)
            assert o.status == "rejected", o.target
            continue
        # several cards of a local GPU (recommend's fewest that hold a format): fits-on asked for that many
        many = ["--count", str(o.count)] if o.target == o.device and o.count > 1 else []
        row = _fits_on(model, o.target, [*flags, *many])
        assert row["count"] == o.count, o.target
        got = (row["status"], row["engine"], row["weights_format"])
        assert got == (_verdict(o), o.engine, o.weights_format), (o.target, got, o.reasons[:1], row["reasons"][:1])
        if row["status"] == "meets":  # the same fit behind both: its memory and speed
            assert row["memory_per_device"] == o.memory_per_device, o.target
            assert row["tokens_per_second_per_user"] == o.tokens_per_second_per_user, o.target
    return every


def test_llama_70b_8k_x2_every_candidate_as_fits_on():
    every = _same_answers("llama-3.3-70b-instruct", dict(context=8192, concurrency=2),
                          ["--context", "8k", "--concurrency", "2"])
    by = {o.target: o for o in every}
    # the case the search missed: 2 x A10 (24 GiB), vLLM's AWQ rung fails at start-up; llama.cpp's Q3_K_M meets
    a10 = by["azure-standard_nv72ads_a10_v5"]
    assert (_verdict(a10), a10.engine, a10.weights_format) == ("meets", "llamacpp", "gguf:q3_k_m"), a10.reasons
    assert any(r.startswith("no rung of vLLM's ladder meets") for r in a10.reasons)
    # fit on that instance says the same: vLLM (its default) does not fit; the named rung on llama.cpp fits
    r = fit("llama-3.3-70b-instruct", "azure-standard_nv72ads_a10_v5", context=8192, concurrency=2)
    assert not r.fits and r.engine == "vllm"
    r = fit("llama-3.3-70b-instruct", "azure-standard_nv72ads_a10_v5", context=8192, concurrency=2,
            engine="llamacpp", weights="q3_k_m")
    assert r.fits and r.memory_per_device == a10.memory_per_device
    assert r.speed.tokens_per_second_per_user == a10.tokens_per_second_per_user


def test_moe_ttft_limit_every_candidate_as_fits_on():
    """A limit beside memory (time to first token): fits-on takes no TTFT flag, so the question is the reading-speed
    floor both apply when none is given; an MoE model on its default engines."""
    _same_answers("qwen3-30b-a3b", dict(context=4096, concurrency=4), ["--context", "4k", "--concurrency", "4"])


def test_engine_named_walks_that_ladder_only_on_both():
    every = _same_answers("llama-3.3-70b-instruct", dict(context=8192, concurrency=2, engine="vllm"),
                          ["--context", "8k", "--concurrency", "2", "--engine", "vllm"])
    assert all(o.engine in ("vllm", "") for o in every if o.device_kind == "gpu")

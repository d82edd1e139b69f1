"""One margin for llama.cpp (issue #16): ``fit --auto`` chose flags keeping llama.cpp's ``--fit-target`` free on each
GPU, and ``fit`` of those very flags judged them against 10 % headroom: "FITS" and "DOES NOT FIT" for one question
(llama-3.1-70b Q4_K_M on 2 x RTX 3090: -c 17408 -ngl 81 -ts 41,40, 22.98 GiB on GPU0 of 24 GiB).

The margin is llama.cpp's own, read from its source, not from our output: ggml-org/llama.cpp@0c1e57098 (as vendored
by llama-cpp-python 0.3.36) common/common.h:483 ``fit_params_target = std::vector<size_t>(llama_max_devices(),
1024 * 1024*1024)``, "margin per device in bytes for fitting parameters to free memory"; common/arg.cpp:2896-2898
``-fitt, --fit-target MiB0,MiB1,...`` "target margin per device for --fit"; common/fit.cpp:353/361 accept a layout
when ``free - projected_used >= margins[id]`` on every device, and :650 ``targets = free - margins[id]``.

Each case feeds --auto's flags back to plain ``fit`` (and ``infer --memory``), with the same margin flags: the same
verdict, the same per-GPU totals and the same budget; the context one alignment step (256 tokens, common/fit.cpp
"round down context for CUDA backend") above --auto's is refused by both, so the agreement holds in both directions."""

from __future__ import annotations

import json

import pytest

from cli_capture import run, run_json
from llmsizer import fit
from llmsizer.errors import InputError

MiB, GiB = 2**20, 2**30
LLAMACPP_FIT_TARGET = 1024 * MiB  # llama.cpp common/common.h:483 (ggml-org/llama.cpp@0c1e57098): 1024 * 1024*1024 B
CTX_ALIGN = 256  # llama.cpp common/fit.cpp: the context --fit sets is a multiple of 256 (one stream)
RTX_3090 = 24 * GiB  # the catalog's rtx-3090 memory as llama.cpp's free memory of an idle card (the auto-fit's --free)

SPLIT = ("llama-3.1-70b", "--engine", "llamacpp", "--weights", "q4_k_m", "--device", "rtx-3090", "--count", "2")
ONE = ("llama-3.1-8b", "--engine", "llamacpp", "--weights", "q8_0", "--device", "rtx-4090")


def _fit_args(flags: list[str]) -> tuple[list[str], int]:
    """--auto's llama.cpp flags as fit's own flags (-c is the context of one sequence here: -np is 1), and the
    context."""
    out, ctx, i = [], 0, 0
    while i < len(flags):
        f = flags[i]
        if f == "-c":
            ctx = int(flags[i + 1])
            out += ["--context", flags[i + 1]]
        elif f in ("-ngl", "-ts", "--n-cpu-moe"):
            out += [f, flags[i + 1]]
        elif f in ("-sm", "-fit"):
            pass  # -sm layer is fit's default split; -fit off: the flags as given
        else:
            raise AssertionError(f"unexpected flag {f} in {flags}")
        i += 2
    return out, ctx


def _gpu_totals(fit_json: dict, n: int) -> list[int]:
    return [d["total"] for d in fit_json["memory"]["details"]["split"]["devices"][:n]]


def _margin_assumption(answer: dict) -> list[tuple[str, object]]:
    return [(a["name"], a["value"]) for a in answer["assumptions"] if a["name"] in ("headroom", "fit_target")]


@pytest.mark.parametrize(("margin_flags", "budget"), [
    ((), RTX_3090 - LLAMACPP_FIT_TARGET),  # llama.cpp's default margin
    (("--fit-target", "2GiB"), RTX_3090 - 2 * GiB),  # a --fit-target given to both
    (("--headroom", "0.2"), int(RTX_3090 * (1 - 0.2))),  # a share given to both: memory x (1 - headroom)
], ids=["default", "fit-target-2GiB", "headroom-0.2"])
def test_autos_flags_fed_back_to_fit_give_its_verdict_totals_and_margin(margin_flags: tuple[str, ...],
                                                                        budget: int) -> None:
    code_a, auto = run_json("fit", *SPLIT, "--auto", *margin_flags)
    assert code_a == 0 and auto["fits"], auto["warnings"]
    assert [d["target"] for d in auto["devices"][:2]] == [budget, budget]
    assert auto["margin"] == [RTX_3090 - budget] * 2
    args, ctx = _fit_args(auto["flags"])
    code_f, plain = run_json("fit", *SPLIT, *args, *margin_flags)
    assert code_f == 0 and plain["fits"], plain["reasons"]
    assert plain["budget_per_device"] == budget
    assert _gpu_totals(plain, 2) == [d["total"] for d in auto["devices"][:2]]
    assert plain["memory_per_device"] == max(d["total"] for d in auto["devices"][:2])
    assert _margin_assumption(plain) == _margin_assumption(auto)
    # infer --memory, the same flags and margin: the same verdict and budget (the estimate's own)
    code_i, inf = run_json("infer", "llama-3.1-70b", "--engine", "llamacpp", "--weights", "q4_k_m", "--gpus", "2",
                           "--memory", "24GiB", *args, *margin_flags)
    assert code_i == 0 and inf["details"]["fits"] and inf["details"]["memory_budget"] == budget
    # one alignment step more context: --auto found it does not fit with every layer, and so does fit
    if auto["n_gpu_layers"] == 81:
        more = [str(ctx + CTX_ALIGN) if a == str(ctx) else a for a in args]
        code_m, over = run_json("fit", *SPLIT, *more, *margin_flags)
        assert code_m == 1 and not over["fits"] and max(_gpu_totals(over, 2)) > budget


def test_the_issue_case_by_number() -> None:
    """The issue's numbers: --auto's -c 17408 -ngl 81 -ts 41,40 holds about 22.98 GiB on GPU0, under 24 GiB - 1024
    MiB; before, fit judged it against 24 GiB x 0.9 = 21.60 GiB and said it did not fit."""
    _, auto = run_json("fit", *SPLIT, "--auto")
    assert auto["flags"][:2] == ["-c", "17408"] and auto["tensor_split"] == [41, 40]
    code, plain = run_json("fit", *SPLIT, "--context", "17408", "--tensor-split", "41,40")
    assert code == 0 and plain["budget_per_device"] == RTX_3090 - LLAMACPP_FIT_TARGET > plain["memory_per_device"]
    assert plain["memory_per_device"] > int(RTX_3090 * 0.9)  # the old rule's budget, which said it did not fit


def test_one_gpu_the_same_margin_both_ways() -> None:
    code_a, auto = run_json("fit", *ONE, "--auto")
    assert code_a == 0 and auto["fits"] and auto["n_gpu_layers"] == 33  # all 32 layers + output
    usable = auto["free"][0]
    assert auto["devices"][0]["target"] == usable - LLAMACPP_FIT_TARGET
    args, ctx = _fit_args(auto["flags"])
    code_f, plain = run_json("fit", *ONE, *args)
    assert code_f == 0 and plain["budget_per_device"] == usable - LLAMACPP_FIT_TARGET
    assert plain["memory_per_device"] == auto["devices"][0]["total"]
    more = [str(ctx + CTX_ALIGN) if a == str(ctx) else a for a in args]
    code_m, over = run_json("fit", *ONE, *more)
    assert code_m == 1 and not over["fits"]


def test_when_auto_cannot_fit_anything_fit_of_its_flags_does_not_fit_either() -> None:
    """1200 MiB free: the 1024 MiB margin leaves 176 MiB, less than the CUDA context alone (llama.cpp would refuse
    every layer and still not meet its target)."""
    code_a, auto = run_json("fit", *ONE, "--auto", "--free", "1200MiB")
    assert code_a == 1 and not auto["fits"] and auto["n_gpu_layers"] == 0
    assert auto["devices"][0]["target"] == 1200 * MiB - LLAMACPP_FIT_TARGET
    args, _ = _fit_args(auto["flags"])
    code_f, plain = run_json("fit", *ONE, "--memory", "1200MiB", *args)
    assert code_f == 1 and not plain["fits"]
    assert plain["budget_per_device"] == 1200 * MiB - LLAMACPP_FIT_TARGET
    assert plain["memory_per_device"] == auto["devices"][0]["total"]


def test_headroom_and_fit_target_together_are_refused_alike() -> None:
    for extra in ((), ("--auto",)):
        code, _, err = run("fit", *ONE, *extra, "--headroom", "0.2", "--fit-target", "2GiB")
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "give headroom or fit_target, not both" in err


def test_a_fit_target_for_another_engine_is_refused() -> None:
    code, _, err = run("fit", "llama-3.1-8b", "--engine", "vllm", "--device", "h100-sxm", "--fit-target", "2GiB")
    assert code == 2 and "fit_target applies to engine llamacpp, not vllm" in err


def test_a_fit_target_on_a_cpu_is_refused_everywhere() -> None:
    """llama.cpp's --fit-target is kept free on each GPU (common/fit.cpp:353/361/650 compare each GPU's free memory
    with it); a CPU's RAM has no such margin in llama.cpp, so on a CPU it is refused, not applied to RAM (fit said
    "64.00 GiB - 1.00 GiB fit_target")."""
    why = "fit_target applies to a GPU (llama.cpp --fit-target keeps memory free on each GPU); on a CPU give headroom"
    for cmd in (("fit", "qwen2.5-7b", "--device", "intel-xeon-spr-8ch"), ("infer", "qwen2.5-7b", "--device", "cpu")):
        code, _, err = run(*cmd, "--memory", "64GiB", "--engine", "llamacpp", "--fit-target", "1GiB")
        assert code == 2 and err.strip() == f"llmsizer: error: {why}"
    with pytest.raises(InputError, match="fit_target applies to a GPU"):
        fit("qwen2.5-7b", "intel-xeon-spr-8ch", memory=64 * GiB, engine="llamacpp", fit_target=GiB)


@pytest.mark.parametrize("margin", [{}, {"fit_target": 2 * GiB}, {"headroom": 0.2}], ids=["default", "fit-target",
                                                                                          "headroom"])
def test_cli_python_and_web_give_one_answer(margin: dict) -> None:
    flags = {"fit_target": ("--fit-target", "2GiB"), "headroom": ("--headroom", "0.2")}
    argv = [*SPLIT, "--context", "17408", "--tensor-split", "41,40",
            *[x for k in margin for x in flags[k]], "--json"]
    code, out, _ = run("fit", *argv)
    py = fit("llama-3.1-70b", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=17408,
             tensor_split=(41, 40), **margin)
    cli = json.loads(out)
    assert code == (0 if py.fits else 1)
    assert json.loads(json.dumps(py.to_dict(), default=str)) == cli
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    body = {"model": "llama-3.1-70b", "engine": "llamacpp", "weights": "q4_k_m", "device": "rtx-3090", "count": 2,
            "context": 17408, "tensor_split": "41,40",
            **{k: ("2GiB" if k == "fit_target" else "0.2") for k in margin}}
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200, r.text
    assert r.text == out and r.headers["x-llmsizer-exit-code"] == str(code)


def test_recommend_and_fits_on_keep_the_same_margin_as_fit() -> None:
    """`models --fits-on` and recommend evaluate a candidate with fit (recommend.best_option_on): the issue's case at
    the context --auto chose fits there too, on the same budget; their weights-alone check keeps the same margin."""
    from llmsizer.recommend import best_option_on
    opt = best_option_on("llama-3.1-70b", "rtx-3090", 2, context=17408, weights="q4_k_m", engine="llamacpp")
    plain = fit("llama-3.1-70b", "rtx-3090", 2, engine="llamacpp", weights="q4_k_m", context=17408, speed=False)
    assert opt.status in ("meets", "chosen") and plain.fits
    assert opt.budget_per_device == plain.budget_per_device == RTX_3090 - LLAMACPP_FIT_TARGET
    assert opt.memory_per_device == plain.memory_per_device

"""The Python searches read their input as ``fit``, ``estimate_inference`` and the CLI read it (new-user probe of the
Python API: ``recommend_inference(context="8k")`` raised a TypeError in the quantization advice,
``headroom=0.2`` / ``memory="24GiB"`` "dict() got multiple values for keyword argument", ``concurrency="4"`` was
refused while fit takes it, ``device="h100-sxm"`` got a list of device kinds, and ``fit_llamacpp(free="24GiB")``
read the text character by character).

Truth: the CLI's own answer for the same spellings (``recommend --json``, ``fit --auto --json``) and the CLI's own
error text; where the CLI has no such flag (``recommend --memory``, ``--device``), the refusal is one line that
names ``fit``, the command that sizes one device.
"""

from __future__ import annotations

import json

import pytest

from cli_capture import run, run_json
from llmsizer import fit, fit_llamacpp, fit_training, recommend_inference, recommend_training
from llmsizer.errors import InputError
from llmsizer.recommend import Constraints

MODEL = "llama-3.1-8b"


def _same_answer(rec: object, cli: dict) -> None:
    d = json.loads(json.dumps(rec.to_dict()))  # type: ignore[attr-defined]  # as --json writes it (tuples: lists)
    assert d["workload"] == cli["workload"]
    assert d["options"] == cli["options"]
    assert d["constraints"] == cli["constraints"]


@pytest.mark.parametrize(
    ("kwargs", "argv"),
    [
        ({"context": "8k"}, ("--context", "8k")),
        ({"concurrency": "4"}, ("--concurrency", "4")),
        (
            {"context": "8k", "concurrency": "4", "output_tokens": "1k"},
            ("--context", "8k", "--concurrency", "4", "--output-tokens", "1k"),
        ),
        ({"headroom": 0.2}, ("--headroom", "0.2")),
        ({"headroom": "20%"}, ("--headroom", "20%")),
    ],
)
def test_recommend_inference_reads_the_cli_spellings(kwargs: dict, argv: tuple[str, ...]) -> None:
    code, cli = run_json("recommend", MODEL, "--provider", "aws", *argv)
    rec = recommend_inference(MODEL, constraints=Constraints(providers=("aws",)), **kwargs)
    _same_answer(rec, cli)


def test_context_8k_is_what_fit_reads() -> None:
    # '8k' is 8192 tokens for fit (units.parse_tokens: publishers quote contexts in binary thousands); the search reads
    # the same number
    f = fit(MODEL, "l4", context="8k")
    code, cli = run_json("fit", MODEL, "--device", "l4", "--context", "8k")
    assert f.details["context"] == cli["details"]["context"] == 8192
    assert (
        recommend_inference(MODEL, context="8k", constraints=Constraints(providers=("aws",))).workload["context"]
        == 8192
    )


def test_recommend_training_takes_headroom_as_a_keyword() -> None:
    code, cli = run_json("recommend", MODEL, "--train", "--tokens", "10M", "--headroom", "0.2", "--provider", "aws")
    rec = recommend_training(MODEL, tokens="10M", headroom=0.2, constraints=Constraints(providers=("aws",)))
    _same_answer(rec, cli)


def test_headroom_twice_same_is_taken_different_is_one_line() -> None:
    code, cli = run_json("recommend", MODEL, "--headroom", "0.2", "--provider", "aws")
    rec = recommend_inference(MODEL, headroom="20%", constraints=Constraints(headroom=0.2, providers=("aws",)))
    _same_answer(rec, cli)
    for search, extra in ((recommend_inference, {}), (recommend_training, {"tokens": "10M"})):
        with pytest.raises(InputError) as e:
            search(MODEL, headroom=0.3, constraints=Constraints(headroom=0.1), **extra)
        msg = str(e.value)
        assert "\n" not in msg and "headroom given twice" in msg and "0.3" in msg and "0.1" in msg


@pytest.mark.parametrize(("field", "value"), [("memory", "24GiB"), ("device", "h100-sxm"), ("device", "gpu"),
                                              ("gpu_runtime", "rocm")])
def test_a_per_device_field_is_refused_naming_fit(field: str, value: str) -> None:
    # the CLI's recommend has no such flag: it refuses it (exit 2), it does not search with it
    code, out, err = run("recommend", MODEL, f"--{field}", value)
    assert code == 2 and f"--{field}" in err
    for search, extra in ((recommend_inference, {}), (recommend_training, {"tokens": "10M"})):
        with pytest.raises(InputError) as e:
            search(MODEL, **{field: value}, **extra)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(field) and "choose one of" not in msg
        # the fit that sizes one device for this search: training's for recommend_training (review)
        assert ("fit_training(" if search is recommend_training else "fit(") in msg


@pytest.mark.parametrize("free", ["20GiB,10GiB", "20GiB/10GiB", ("20GiB", "10GiB")])
def test_fit_llamacpp_reads_free_as_fit_auto_free(free: object) -> None:
    code, cli = run_json("fit", MODEL, "--device", "rtx-3090", "--auto", "--free", "20GiB,10GiB")
    r = fit_llamacpp(MODEL, free, device="rtx-3090").to_dict()  # type: ignore[arg-type]
    for key in ("fits", "flags", "context", "tensor_split", "free", "devices", "memory", "speed"):
        assert r[key] == cli[key], key


@pytest.mark.parametrize("text", ["24GiB,", "24", "24GiB,,8GiB"])
def test_fit_llamacpp_free_text_errors_are_the_cli_lines(text: str) -> None:
    code, out, err = run("fit", MODEL, "--device", "rtx-3090", "--auto", "--free", text)
    assert code == 2
    cli_reason = err.strip().splitlines()[-1].split("argument --free: ", 1)[1].removesuffix(" (see --help)")
    with pytest.raises(InputError) as e:
        fit_llamacpp(MODEL, text)
    msg = str(e.value)
    assert "\n" not in msg and msg == f"free: {cli_reason}"


def test_fit_llamacpp_free_of_another_type_is_one_line() -> None:
    with pytest.raises(InputError) as e:
        fit_llamacpp(MODEL, {"GPU0": "24GiB"})  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and str(e.value).startswith("free: ")


@pytest.mark.parametrize(("field", "value"), [("device", "cpu"), ("device", "h100-sxm"), ("gpu_runtime", "metal")])
def test_fit_refuses_another_device_in_one_line(field: str, value: str) -> None:
    # fit's device is its hardware argument (the CLI's fit --device); a device= keyword reached estimate_inference
    # beside the hardware's own ("got multiple values for keyword argument 'device'"), and fit_training sized an
    # L4 by a CPU's rules
    for call in (
        lambda: fit(MODEL, "l4", **{field: value}),
        lambda: fit_training(MODEL, "l4", tokens="1M", **{field: value}),
    ):
        with pytest.raises(InputError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{field} {value!r}: ") and f"drop {field}=" in msg


@pytest.mark.parametrize("kwargs", [{"device": None}, {"device": "gpu"}, {"device": "gpu", "gpu_runtime": "cuda"}])
def test_fit_with_the_devices_own_kind_is_fit_without_it(kwargs: dict) -> None:
    code, cli = run_json("fit", MODEL, "--device", "l4")
    assert json.loads(json.dumps(fit(MODEL, "l4", **kwargs).to_dict()))["memory"] == cli["memory"]
    code, cli = run_json("fit", MODEL, "--device", "l4", "--train", "--tokens", "1M")
    d = json.loads(json.dumps(fit_training(MODEL, "l4", tokens="1M", **kwargs).to_dict()))
    assert (d["memory"], d["memory_per_device"]) == (cli["memory"], cli["memory_per_device"])


def test_constraints_headroom_text_is_read_as_the_flag() -> None:
    code, cli = run_json("recommend", MODEL, "--headroom", "20%", "--provider", "aws")
    _same_answer(recommend_inference(MODEL, constraints=Constraints(headroom="20%", providers=("aws",))), cli)

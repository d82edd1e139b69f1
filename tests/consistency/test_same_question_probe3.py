"""One answer across surfaces, from a new user's third consistency probe (issues #12/#16): request files and the
provider check, SGLang's options, hardware files. Each test failed before its fix. The truths are the other
surface's answer, a published parameter count and the device's own memory, never a number copied from our output."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer.units import format_rate

# meta-llama/Llama-3.1-70B-Instruct: 70,553,706,496 parameters (model.safetensors.index.json total_size / 2, bf16)
LLAMA_70B_PARAMS = 70_553_706_496
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def test_sglang_whose_weights_leave_no_token_pool_does_not_fit_on_any_surface(client) -> None:
    """Before, SGLang's default running cap (max_running_requests = tokens // 2, sglang.py eq. 4) was 0 for an empty
    pool, so the pool's 0 sequences were 'enough' for the 0 it would run: `infer --tp 2` said 'fits: yes (SGLang
    token pool (0 tokens) holds 0 sequence(s))' for Llama-3.1-70B bf16 on 2 x H100, and `fit --count 2` said FITS
    with TP 1 x 2 replicas at 145 GiB per 80 GiB device. SGLang refuses to start there ("Loaded weights leave no GPU
    memory for the KV cache"): every surface now says it does not fit, and why."""
    code, est = run_json("infer", "llama-3.1-70b-instruct", "--engine", "sglang", "--device", "h100-sxm", "--tp", "2",
                         "--context", "8k", "--concurrency", "8")
    # the premise: half of the published bf16 weights and the pool SGLang's fraction gives are what the estimate holds
    weights = next(i["bytes"] for i in est["items"] if i["name"] == "weights")
    assert weights >= LLAMA_70B_PARAMS * 2 // 2
    assert est["details"]["max_total_num_tokens"] == 0
    assert code == 1 and est["details"]["fits"] is False
    assert "would fail at start-up" in est["details"]["verdict"]
    code_f, fit = run_json("fit", "llama-3.1-70b-instruct", "--engine", "sglang", "--device", "h100-sxm",
                           "--count", "2", "--tp", "2", "--context", "8k", "--concurrency", "8")
    assert (code_f, fit["fits"]) == (1, False)
    assert fit["memory"]["details"]["verdict"] == est["details"]["verdict"]
    # without --tp, fit never takes a layout whose replica holds more than its device
    _, auto = run_json("fit", "llama-3.1-70b-instruct", "--engine", "sglang", "--device", "h100-sxm",
                            "--count", "2", "--context", "8k", "--concurrency", "8")
    assert not auto["fits"] or auto["memory_per_device"] <= auto["memory"]["details"]["device_memory"]
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-70b-instruct", "engine": "sglang",
                                           "device": "h100-sxm", "tp": 2, "context": "8k", "concurrency": 8})
    assert r.status_code == 200 and r.headers["x-llmsizer-exit-code"] == "1"
    assert r.json()["details"]["verdict"] == est["details"]["verdict"]


def test_sglang_options_recommend_and_models_fits_on_offer_can_start() -> None:
    """Before, `models --fits-on rtx-4090 --engine sglang` listed Mixtral-8x7B at 30.40 GiB per device as fitting the
    24 GB card, and `recommend llama-3.1-70b-instruct --engine sglang` chose 2 x L4 whose token pool holds 0 tokens.
    Every model listed as fitting now needs at most the card's memory, and the chosen option is one `fit` says SGLang
    starts on."""
    _, card = run_json("hardware", "show", "rtx-4090")  # the driver-reported 24564 MiB
    _, fo = run_json("models", "--fits-on", "rtx-4090", "--engine", "sglang")
    listed = [m for m in fo["models"] if m["status"] != "rejected"]
    assert listed, "the premise: some model fits the card on SGLang"
    for m in listed:
        assert m["memory_per_device"] <= card["memory_bytes"], m["id"]
    _, rec = run_json("recommend", "llama-3.1-70b-instruct", "--engine", "sglang", "--context", "8k",
                         "--concurrency", "8")
    chosen = rec["options"][0]
    assert chosen["status"] == "chosen"
    _, fit = run_json("fit", "llama-3.1-70b-instruct", "--device", chosen["target"], "--engine", "sglang",
                           "--weights", chosen["weights_format"], "--context", "8k", "--concurrency", "8")
    assert fit["fits"] and fit["memory"]["details"]["max_total_num_tokens"] > 0


def test_media_on_a_text_model_is_bad_input_on_every_surface(tmp_path: Path) -> None:
    """Images on a text-only model do not apply on any hardware: `infer --images 2` exits 2, but `plan` made it an
    error check ('Cannot be fitted', exit 1) and `capacity check` a DOES NOT FIT (exit 1). The plan now refuses it
    before any hardware is fitted (plan/inference.py, estimate/inference/media.py media_in_context): plan, request
    check and capacity check exit 2 with infer's line, at the job's place in the file."""
    text = (EXAMPLES / "cpu-internal-tool.yaml").read_text()
    req = tmp_path / "request.yaml"
    req.write_text(text.replace("    engine: llamacpp\n", "    engine: llamacpp\n    media:\n      images: 2\n", 1))
    code, _, err = run("infer", "qwen2.5-1.5b-instruct", "--images", "2")
    assert code == 2 and "has no vision encoder" in err
    line = err.strip().split(": error: ", 1)[1]
    for cmd in (("plan",), ("request", "check"), ("capacity", "check")):
        extra = ("--inventory", str(EXAMPLES / "provider" / "inventory.yaml")) if cmd[0] == "capacity" else ()
        code, out, err2 = run(*cmd, str(req), *extra)
        assert code == 2 and line in err2 and "job 'drafting-helper'" in err2 and not out, cmd


@pytest.mark.parametrize("edit, says", [
    # an engine the estimate does not run on a CPU: a fact of the hardware asked for, the plan's error check
    (("    engine: llamacpp\n", "    engine: sglang\n"), "models GPU serving"),
])
def test_capacity_check_does_not_place_a_job_the_plan_cannot_size(tmp_path: Path, edit: tuple[str, str],
                                                                  says: str) -> None:
    """Before, `capacity check` said FITS (exit 0) and would book a job whose plan is an error ('Cannot be fitted':
    the estimate refused the workload, so its memory on the devices is unknown), while `plan` exited 1 on the same
    file. The provider check now refuses it with the plan's reason."""
    text = (EXAMPLES / "cpu-internal-tool.yaml").read_text()
    assert edit[0] in text
    req = tmp_path / "request.yaml"
    req.write_text(text.replace(edit[0], edit[1], 1))
    code_p, plan = run_json("plan", str(req))
    errors = [c for c in plan["checks"] if c["severity"] == "error"]
    assert code_p == 1 and [c["title"] for c in errors] == ["Cannot be fitted"] and says in errors[0]["message"]
    code, out, err = run("capacity", "check", str(req), "--inventory", str(EXAMPLES / "provider" / "inventory.yaml"))
    assert code == 1, out + err
    assert "DOES NOT FIT" in out and errors[0]["message"] in out


def test_request_check_refuses_what_plan_refuses_once_the_model_is_known(tmp_path: Path, client) -> None:
    """Before, `request check` said 'valid request' (exit 0) of a training job with `tp: 3` on Llama-3.1-8B, whose 32
    attention heads 3 does not divide, while `plan` and `capacity check` refused the same file as bad input (exit 2),
    as `fit --train --tp 3` refuses it. `request check` (and the web's /request/check) now gives plan's line."""
    text = (EXAMPLES / "lora-finetune-and-chat.yaml").read_text()
    text = text.replace("      device: h100-sxm\n      count: 1\n", "      device: h100-sxm\n      count: 3\n", 1)
    text = text.replace("      grad_checkpointing: full\n", "      grad_checkpointing: full\n      tp: 3\n", 1)
    req = tmp_path / "request.yaml"
    req.write_text(text)
    code_fit, _, err_fit = run("fit", "llama-3.1-8b", "--train", "--method", "lora", "--device", "h100-sxm",
                               "--count", "3", "--tp", "3")
    assert code_fit == 2 and "does not divide the 32 attention heads" in err_fit  # the premise: bad input to fit
    answers = [run(*cmd, str(req)) for cmd in (("plan",), ("request", "check"))]
    answers.append(run("capacity", "check", str(req), "--inventory", str(EXAMPLES / "provider" / "inventory.yaml")))
    assert [a[0] for a in answers] == [2, 2, 2]
    lines = {a[2] for a in answers}
    assert len(lines) == 1 and len(next(iter(lines)).splitlines()) == 1, lines
    said = next(iter(lines)).strip().removeprefix("llmsizer: error: ").replace(str(req), "request.yaml")
    for route in ("request/check", "plan"):
        r = client.post(f"/api/v1/{route}", json={"request": text, "filename": "request.yaml"})
        assert r.status_code == 400 and r.json()["detail"] == said, route


def test_an_encoder_decoder_on_several_gpus_is_laid_out_as_replicas_by_fit_and_models_fits_on(client) -> None:
    """Before, `fit t0_3b --device rtx-3090 --count 2` refused the question (exit 2: 'not tensor-parallel (2
    devices)') because its layout search tried TP 2 first and took the estimate's refusal as the answer, while
    `fit ... --count 2 --tp 1` answered it (FITS, TP 1 x 2 replicas), and `models --fits-on rtx-3090 --count 2`
    listed T0_3B as not fitting with that refusal. An encoder-decoder is served on one device each
    (model_warnings.refuse_serving), so fit lays the devices out as replicas: the same answer as --tp 1."""
    flags = ("t0_3b", "--device", "rtx-3090", "--count", "2")
    code_tp1, tp1 = run_json("fit", *flags, "--tp", "1")
    assert code_tp1 == 0 and tp1["fits"] and tp1["replicas"] == 2  # the premise: one device holds it
    code, chosen = run_json("fit", *flags)
    assert code == 0
    for key in ("fits", "tensor_parallel", "replicas", "memory_per_device", "tokens_per_second_total"):
        assert chosen[key] == tp1[key], key
    code_tp2, _, err = run("fit", *flags, "--tp", "2")
    assert code_tp2 == 2 and "not tensor-parallel (2 devices)" in err  # a degree given is still refused
    _, fo = run_json("models", "t0_3b", "--fits-on", "rtx-3090", "--count", "2")
    (m,) = fo["models"]
    assert m["status"] != "rejected" and m["memory_per_device"] == tp1["memory_per_device"], m
    r = client.post("/api/v1/fit", json={"model": "t0_3b", "device": "rtx-3090", "count": 2})
    assert r.status_code == 200 and r.json()["memory_per_device"] == tp1["memory_per_device"]


@pytest.mark.parametrize("device", ["rtx-4090", "aws-m7i.4xlarge"])
def test_models_fits_on_rejects_an_encoder_decoder_for_the_reason_fit_gives(device: str) -> None:
    """Before, the search's format ladder went on from bf16 to fp8 / awq-int4, which the estimate refuses for an
    encoder-decoder (model_warnings.refuse_serving), so `models --fits-on` rejected mt0-xxl with 'not fp8 (its
    quantized layers ... are not modelled)' on an RTX 4090 and 'not awq-int4' on a CPU instance, where `fit` says
    why: bf16 does not fit the card's memory, fp32 is below reading speed on the CPU. The ladder now holds only the
    formats the estimate serves the model in, and the reason is fit's."""
    _, fo = run_json("models", "mt0-xxl", "--fits-on", device)
    (m,) = fo["models"]
    assert m["status"] == "rejected"
    assert not any("encoder-decoder" in r for r in m["reasons"]), m["reasons"]
    fmt = m["weights_format"] or "bf16"  # the weights-alone pre-check names the smallest format it tried
    assert f"({fmt})" in m["reasons"][0] or m["reasons"][0].startswith(f"at {fmt}:"), m["reasons"]
    code, fit = run_json("fit", "mt0-xxl", "--device", device, "--weights", fmt)
    assert code in (0, 1), fit
    if fit["fits"]:  # fits the memory: rejected for its speed, below reading speed
        assert fit["speed"]["tokens_per_second_per_user"] < 5.29
        assert f"{format_rate(fit['speed']['tokens_per_second_per_user'])} tokens/s per user" in m["reasons"][0]
    else:
        assert m["memory_per_device"] is None and not fit["fits"]


def test_a_request_without_a_start_is_checked_and_booked_at_one_now(tmp_path: Path, monkeypatch) -> None:
    """Before, `capacity check` and `book` read the clock twice: once for the start of a job without one (now) and
    again for 'is the window in the past'. When the plan took past a second boundary, `check` printed 'the requested
    window starts before now: capacity book refuses it' and `book` refused the request ('starts ..., before now;
    give a later start or use --earliest') for the very start it had given the job. A clock that moves a minute per
    reading shows it; the command now reads it once."""
    import datetime as real
    import types

    from llmsizer.cli import capacity_cmd

    ticks = iter(range(10**6))

    class Clock(real.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return real.datetime(2030, 1, 7, 9, 0, tzinfo=tz) + real.timedelta(minutes=next(ticks))

    monkeypatch.setattr(capacity_cmd, "_dt", types.SimpleNamespace(
        datetime=Clock, timezone=real.timezone, date=real.date, timedelta=real.timedelta))
    req = str(EXAMPLES / "cpu-internal-tool.yaml")  # no start: the job starts when the check is made
    inventory = str(EXAMPLES / "provider" / "inventory.yaml")
    code, out, err = run("capacity", "check", req, "--inventory", inventory, "--no-db")
    assert code == 0 and "FITS" in out and "starts before now" not in out, out + err
    code, out, err = run("capacity", "book", req, "--inventory", inventory, "--db", str(tmp_path / "b.db"))
    assert code == 0 and "booked" in out + err, out + err


@pytest.mark.parametrize("argv, call, kwargs, field", [
    # `fit --auto --free 24` is a forgotten unit on the command line; fit_llamacpp(free=[24]) sized 24-byte GPUs
    # (fits False, -ngl 0) and host_memory=24 a 24-byte host
    (("fit", "llama-3.1-8b", "--device", "rtx-3090", "--auto", "--free", "24"),
     "fit_llamacpp", {"free": [24]}, "free"),
    (("fit", "llama-3.1-8b", "--device", "rtx-3090", "--auto", "--host-memory", "24"),
     "fit_llamacpp", {"free": [24 * 2**30], "host_memory": 24}, "host_memory"),
    # tensor_split="3,1" (the command line's spelling) and ("a", 1) were a ValueError "could not convert string to
    # float: ','" (not an InputError: a traceback, not one line)
    (None, "estimate_inference", {"engine": "llamacpp", "gpus": 2, "tensor_split": "3,1"}, "tensor_split"),
    (("infer", "llama-3.1-8b", "--engine", "llamacpp", "--gpus", "2", "-ts", "a,1"),
     "estimate_inference", {"engine": "llamacpp", "gpus": 2, "tensor_split": ("a", 1)}, "tensor_split"),
])
def test_llamacpp_values_the_command_line_refuses_are_refused_from_python(argv, call, kwargs, field) -> None:
    import llmsizer

    if argv is not None:
        code, _, err = run(*argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    with pytest.raises(llmsizer.InputError) as e:
        getattr(llmsizer, call)("llama-3.1-8b", **kwargs)
    assert str(e.value).startswith(f"{field}: ") and len(str(e.value).splitlines()) == 1
    if argv is not None and "out of range" in err:  # the same range, in the same words
        assert str(e.value).partition("out of range; ")[2] == err.strip().removesuffix(" (see --help)").partition(
            "out of range; ")[2]


def test_max_concurrency_with_no_sglang_pool_says_why_not_a_running_cap(client) -> None:
    """Before, `infer ... --engine sglang --max-concurrency` on memory that leaves SGLang no token pool noted 'the
    largest concurrency that fits (0) is the engine's max_running_requests ...; more requests wait in its queue
    (--max-num-seqs raises it)': its default cap, tokens // 2, is 0 for an empty pool, and raising it does nothing.
    The note now gives the fit verdict's reason (SGLang does not start), on the command line and the web alike."""
    flags = ("llama-3.1-8b", "--engine", "sglang", "--memory", "16GiB")
    code_fit, est = run_json("infer", *flags)
    assert code_fit == 1 and est["details"]["max_total_num_tokens"] == 0  # the premise: no pool at all
    code, rev = run_json("infer", *flags, "--max-concurrency")
    assert code == 1 and rev["reverse"]["max_concurrency"] == 0
    assert rev["reverse_notes"] == [f"no concurrency runs on this memory: {est['details']['verdict']}"]
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": "sglang", "memory": "16GiB",
                                           "max_concurrency": True})
    assert r.status_code == 200 and r.json()["reverse_notes"] == rev["reverse_notes"]

"""One answer across surfaces, from a new user's consistency probe (issues #12/#16): the same question asked through
the CLI's text, its ``--json``, the web API and the Python API gets the same numbers and the same notes. Each test
failed before its fix. The truths are published values (a model's config.json) and the other surface's answer,
never a number copied from our output."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json

# meta-llama/Llama-3.1-8B config.json: "max_position_embeddings": 131072 (the published checkpoint)
LLAMA_WINDOW = 131072


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def notes_in(text: str) -> list[str]:
    return [ln.removeprefix("note: ") for ln in text.splitlines() if ln.startswith("note: ")]


@pytest.mark.parametrize("command, body, flags, answer", [
    # vLLM (the default engine there) refuses a context past the model's window unless started with its override
    # (estimate/context_window.py): with it assumed, the memory's answer is past the window
    ("infer", {"device": "h100-sxm", "max_num_seqs": 8, "max_context": True, "max_concurrency": True,
               "allow_long_context": True},
     ["--device", "h100-sxm", "--max-num-seqs", "8", "--max-context", "--max-concurrency", "--allow-long-context"],
     "max_context"),
    ("train", {"method": "lora", "memory": "1000TiB", "max_seq": True},
     ["--method", "lora", "--memory", "1000TiB", "--max-seq"], "max_seq_len"),
])
def test_the_reverse_answers_notes_reach_the_web_as_the_cli_prints_them(client, command: str, body: dict,
                                                                        flags: list[str], answer: str) -> None:
    """Before, `infer --max-context` printed "note: that is past the model's max_position_embeddings" and the
    engine's running-cap note from the renderer alone: `--json` and the web calculator (which shows the reverse
    answers) said 421,360 tokens on an H100 for a model of a 131,072-token window, with no word of it; `train
    --max-seq` said it nowhere. The notes are now the core's (estimate/*/reverse.py ``reverse_notes``)."""
    r = client.post(f"/api/v1/{command}", json={"model": "llama-3.1-8b", **body})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["reverse"][answer] > LLAMA_WINDOW  # the memory allows more than the window (the question's premise)
    assert any(f"max_position_embeddings ({LLAMA_WINDOW:,})" in n for n in data["reverse_notes"]), data
    if command == "infer":  # max_num_seqs 8 caps the sequences run at once: the largest concurrency is that cap
        assert data["reverse"]["max_concurrency"] == 8
        assert any("max_num_seqs" in n for n in data["reverse_notes"]), data
    code, out, _ = run(command, "llama-3.1-8b", *flags)
    assert code == 0 and notes_in(out) == data["reverse_notes"]


@pytest.mark.parametrize("device", ["apple-m3-max-48gb", "aws-m7i.4xlarge", "h100-sxm"])
def test_the_longest_sequence_on_a_device_is_the_one_train_says_fits_there(device: str) -> None:
    """Before, `train --device D --max-seq` searched on a CUDA GPU whatever D was (the device's kind and runtime were
    dropped on the way to the search): on an M3 Max it said 2,078 tokens while `train --device D --seq 2079` (and
    longer) fit, on a CPU instance 5,256 while 5,257 fit. And the Python ``max_seq_len`` / ``max_micro_batch`` did
    not take ``device=`` (a memory was required) where ``max_context`` and ``estimate_training`` do. The truth is
    `train --seq`'s own verdict on the same device: the answer fits, one token more does not."""
    import llmsizer

    flags = ("--device", device, "--method", "lora")
    code, data = run_json("train", "llama-3.1-8b", *flags, "--max-seq")
    longest = data["reverse"]["max_seq_len"]
    assert code == 0 and longest > 0

    def fits(seq: int) -> bool:
        return run("train", "llama-3.1-8b", *flags, "--seq", str(seq))[0] == 0

    assert fits(longest) and not fits(longest + 1)
    assert llmsizer.max_seq_len("llama-3.1-8b", device=device, method="lora") == longest
    _, data = run_json("train", "llama-3.1-8b", *flags, "--seq", "1024", "--max-batch")
    assert llmsizer.max_micro_batch("llama-3.1-8b", device=device, method="lora", seq_len=1024) == \
        data["reverse"]["max_micro_batch"]


@pytest.mark.parametrize("surface", ["recommend", "models --fits-on"])
def test_an_options_replicas_are_the_model_copies_fit_runs(surface: str) -> None:
    """Falcon-7B has 71 attention heads (its config.json), which no tensor-parallel degree above 1 divides, so on
    2 x H100 fit runs it as 2 replicas of TP 1. Before, `recommend` and `models --fits-on` (and the web's /fits
    page) called their scale-out instances "replicas": the same question answered "tensor_parallel 1, replicas 1"
    on 2 devices there (one device idle, read plainly) and "replicas 2" in fit. Now ``replicas`` is fit's word in
    every answer, and the instances added for a throughput target or a deadline are ``instances``."""
    # 2k: Falcon-7B's window (FalconConfig's default max_position_embeddings 2048, its config.json states none),
    # past which vLLM will not start (estimate/context_window.py)
    flags = ("--context", "2k", "--concurrency", "8")
    if surface == "recommend":
        _, rec = run_json("recommend", "falcon-7b-instruct", *flags, "--provider", "aws", "--top", "500")
        opts = [o for o in rec["options"] if o["device"] == "h100-sxm" and o["count"] == 8][:1]
        hw = ("--device", opts[0]["target"]) if opts else ()
    else:
        _, data = run_json("models", "falcon-7b", "--fits-on", "h100-sxm", "--count", "2", *flags)
        opts = [o for o in data["models"] if o["id"] == "tiiuae/falcon-7b-instruct"]
        hw = ("--device", "h100-sxm", "--count", "2")
    (o,) = opts
    assert o["status"] != "rejected" and o["instances"] == 1
    _, f = run_json("fit", "falcon-7b-instruct", *hw, *flags, "--weights", o["weights_format"])
    assert f["tensor_parallel"] == 1 and f["replicas"] == f["count"] > 1  # 71 heads: TP 1, one copy per device
    assert (o["tensor_parallel"], o["replicas"]) == (f["tensor_parallel"], f["replicas"])


@pytest.mark.parametrize("field, flag, value", [
    ("micro_batch", "--batch", 2_000_000), ("micro_batch", "--batch", 0), ("gpus", "--gpus", 0),
    ("grad_accumulation", "--grad-accumulation", -1), ("seq_len", "--seq", 2**32),
])
def test_a_training_count_out_of_range_is_refused_from_python_with_the_clis_line(field: str, flag: str,
                                                                                  value: int) -> None:
    """Before, the training workload checked its counts for >= 1 only and in its own words: ``micro_batch=2_000_000``
    was sized from Python while `train --batch 2000000` refused it (exit 2), and ``micro_batch=0`` said "must be a
    positive integer" where the CLI names the range. Now both read numbers.py's range (COUNT; seq_len TOKENS)."""
    import llmsizer

    code, _, err = run("train", "qwen2.5-0.5b", flag, str(value))
    assert code == 2 and err.count("\n") == 1 and " is out of range; " in err
    with pytest.raises(llmsizer.InputError) as e:
        llmsizer.estimate_training("qwen2.5-0.5b", **{field: value})
    # the same range and words after the value (the CLI writes 2^32 as 4.29497e+09)
    assert str(e.value).startswith(f"{field}: ")
    assert str(e.value).partition(" is out of range; ")[2] == \
        err.strip().removesuffix(" (see --help)").partition(" is out of range; ")[2]


@pytest.mark.parametrize("estimate, alias, field, body", [
    ("estimate_training", "tensor_parallel", "tp", {"gpus": 2, "method": "lora"}),
    ("estimate_training", "batch", "micro_batch", {"method": "lora"}),
    ("estimate_inference", "tp", "tensor_parallel", {"engine": "vllm"}),
])
def test_a_python_caller_writing_the_web_apis_name_is_told_the_field(client, estimate: str, alias: str, field: str,
                                                                    body: dict) -> None:
    """The web API takes ``tp`` and ``tensor_parallel`` (``batch`` and ``micro_batch``) for one field, and the two
    workloads name the tensor-parallel degree differently (``tp`` in training, ``tensor_parallel`` in serving):
    before, ``estimate_training(tensor_parallel=2)`` was a bare TypeError ("unexpected keyword argument"). Now it is
    a one-line InputError naming the field, and the field gives the web's answer."""
    import llmsizer

    fn = getattr(llmsizer, estimate)
    with pytest.raises(llmsizer.InputError, match=f"has no field '{alias}'; the field is '{field}'"):
        fn("llama-3.1-8b", **body, **{alias: 2})
    r = client.post("/api/v1/" + ("train" if estimate == "estimate_training" else "infer"),
                    json={"model": "llama-3.1-8b", **body, alias: 2})
    assert r.status_code == 200, r.text
    assert __import__("json").loads(__import__("json").dumps(fn("llama-3.1-8b", **body, **{field: 2}).to_dict())) \
        == r.json()


@pytest.mark.parametrize("call", ["estimate_inference", "estimate_training", "fit", "fit_training"])
def test_a_headroom_the_command_line_refuses_is_refused_from_python_with_its_line(call: str) -> None:
    """The headroom had three homes: numbers.HEADROOM ([0, 0.99], the flags and request files), the workloads'
    share range [0, 1] and estimate/verdict.py's [0, 1): ``headroom=0.995`` was sized from Python (a budget of
    0.5 % of the device) while `fit --headroom 0.995` and a request file refused it. Now one range, one line."""
    import llmsizer

    code, _, err = run("fit", "llama-3.1-8b", "--device", "h100-sxm", "--headroom", "0.995")
    assert code == 2
    words = err.strip().removesuffix(" (see --help)").partition(" is out of range; ")[2]
    assert words.startswith("expected a number in [0, 0.99]")
    args: dict = {"memory": 80 * 2**30} if call.startswith("estimate") else {}
    fn = getattr(llmsizer, call)
    with pytest.raises(llmsizer.InputError) as e:
        fn("llama-3.1-8b", *(("h100-sxm",) if call.startswith("fit") else ()), headroom=0.995, **args)
    assert str(e.value) == f"headroom: 0.995 is out of range; {words}"


def test_a_plans_llamacpp_split_has_fits_layout(tmp_path) -> None:
    """llama.cpp splits one model over the GPUs by layers and runs no tensor parallelism: `fit` on 2 x RTX 3090 says
    tensor_parallel 1, 1 replica. Before, the plan's hardware said tensor_parallel 2 for the same job (it recorded
    the devices one replica spans)."""
    req = tmp_path / "split.yaml"
    req.write_text("""version: 1
title: split
jobs:
  - name: chat
    kind: inference
    model: {name: llama-3.1-8b}
    quantization: q8_0
    resources: {device: rtx-3090, count: 2}
    traffic: {concurrency: {typical: 2, peak: 2}, context: {typical: 16k, peak: 16k}, output: {typical: 256, peak: 256}}
    service: {duration: 1 month}
""", encoding="utf-8")
    _, plan = run_json("plan", str(req))
    hw = plan["jobs"][0]["hardware"]
    _, f = run_json("fit", "llama-3.1-8b", "--device", "rtx-3090", "--count", "2", "--weights", "q8_0",
                    "--context", "16k", "--concurrency", "2", "--output-tokens", "256")
    assert f["engine"] == hw["engine"] == "llamacpp" and f["count"] == hw["count"] == 2  # one model over both GPUs
    assert (hw["tensor_parallel"], hw["replicas"]) == (f["tensor_parallel"], f["replicas"]) == (1, 1)


def test_what_fits_takes_the_output_and_kv_dtype_fit_takes(client) -> None:
    """`fit`, `infer` and `recommend` take --output-tokens and --kv-dtype; `models --fits-on` (and the web's /fits) did
    not ("unrecognized arguments"), so a question with a long answer or a quantized KV cache could not be asked of
    it. Now each model's row is fit's answer for the same flags at the format the row names."""
    flags = ("--context", "8k", "--output-tokens", "2k", "--kv-dtype", "q8_0")
    code, data = run_json("models", "llama-3.1-8b", "--fits-on", "rtx-4090", *flags)
    (o,) = data["models"]
    assert code == 0 and (data["output_tokens"], data["kv_dtype"]) == (2048, "q8_0")
    _, f = run_json("fit", "llama-3.1-8b", "--device", "rtx-4090", *flags, "--weights", o["weights_format"])
    assert f["fits"] and (o["engine"], o["memory_per_device"]) == (f["engine"], f["memory_per_device"])
    assert o["tokens_per_second_per_user"] == f["speed"]["tokens_per_second_per_user"]
    r = client.get("/api/v1/models/fits-on", params={"fits_on": "rtx-4090", "query": "llama-3.1-8b", "context": "8k",
                                                     "output_tokens": "2k", "kv_dtype": "q8_0"})
    assert r.status_code == 200 and r.json() == data

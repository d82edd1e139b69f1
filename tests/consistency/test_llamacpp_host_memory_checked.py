"""Host RAM on llama.cpp is checked wherever the host holds part of the model (issue #16 (c)), and ``fit --auto``
states the decode tokens/s of the flags it prints, as ``fit`` with those flags times it (issue #16 (b)).

Truth for the host part, re-derived here from llama.cpp's code (ggml-org/llama.cpp@0c1e57098, as vendored by
llama-cpp-python 0.3.36):
- src/llama-model.cpp:1589-1600: with ``-ngl N`` layers ``i_gpu_start = max(n_layer + 1 - N, 0)`` onward are
  offloaded (index n_layer is the output layer), so Llama-3.1-8B (32 layers) at ``-ngl 20`` keeps layers 0..12 (13)
  on the CPU;
- src/llama-kv-cache.cpp:216-219: each layer's K and V live on that layer's device, so the host holds
  13 layers x 4096 cells x 2 (K, V) x 8 KV heads x 128 x 2 B (f16, the default ``-ctk/-ctv``) = 208 MiB of KV.
The verdict is then the one comparison llama.cpp's placement implies: the host part against the RAM given, the
check ``fit --auto`` already made (estimate/verdict.py ``host_memory_verdict``), keeping llama.cpp's own 1024 MiB
--fit-target free on the host (common/fit.cpp:317-326, common/common.h:483): below the part + 1 GiB it does not fit
(exit 1), at it it fits, on the CLI (text and JSON), in Python and on the web API's /fit alike.
"""

from __future__ import annotations

import pytest

import llmsizer
from cli_capture import run, run_json
from llmsizer.errors import InputError
from llmsizer.estimate.llamacpp_fit import fit_llamacpp
from llmsizer.units import GiB, MiB

MODEL = "llama-3.1-8b"
ARGV = ["fit", MODEL, "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q4_k_m", "-ngl", "20"]
KW = dict(engine="llamacpp", weights="q4_k_m", n_gpu_layers=20)
HOST_MARGIN = 1024 * MiB  # llama.cpp's --fit-target default, kept free in system memory (common/fit.cpp:317-326)


def _host(r) -> dict:
    row = r.estimate.details["split"]["devices"][-1]
    assert row["device"] == "host"
    return row


def test_host_part_is_the_layers_llama_cpp_keeps_on_the_cpu() -> None:
    r = llmsizer.fit(MODEL, "rtx-4090", **KW)
    host = _host(r)
    assert host["layers"] == "token embd, layers 0-12" or host["n_layers"] == 13, host
    assert host["kv_cache"] == 13 * 4096 * 2 * 8 * 128 * 2 == 208 * MiB


def test_host_memory_below_the_host_part_does_not_fit_on_every_surface() -> None:
    need = _host(llmsizer.fit(MODEL, "rtx-4090", **KW))["total"] + HOST_MARGIN
    assert llmsizer.fit(MODEL, "rtx-4090", **KW, host_memory=need).fits
    short = llmsizer.fit(MODEL, "rtx-4090", **KW, host_memory=need - 1)
    assert not short.fits and any(x.startswith("host memory: needs") for x in short.reasons)
    # the CLI: exit 1 below, 0 at the part; JSON and text say the same
    code, data = run_json(*ARGV, "--host-memory", str(need - 1))
    assert code == 1 and data["fits"] is False and data["reasons"] == list(short.reasons)
    code, text, _ = run(*ARGV, "--host-memory", str(need - 1))
    assert code == 1 and "DOES NOT FIT" in text and short.reasons[-1] in text
    code, data = run_json(*ARGV, "--host-memory", str(need))
    assert code == 0 and data["fits"] is True
    # a generous host: the device verdict is unchanged by the check
    assert run_json(*ARGV, "--host-memory", "64GiB")[1]["fits"] == run_json(*ARGV)[1]["fits"] is True


def test_fit_and_fit_auto_give_one_host_verdict() -> None:
    """The auto-fit's flags, given to fit with the same host RAM, get the same verdict on either side of the host
    part (the one rule, verdict.py host_memory_verdict)."""
    free = [8 * GiB]
    auto = fit_llamacpp("llama-3.3-70b-instruct", free, weights="q4_k_m", context=4096)
    need = _host(auto)["total"] + HOST_MARGIN
    for ram in (need - 1, need):
        a = fit_llamacpp("llama-3.3-70b-instruct", free, weights="q4_k_m", context=4096, host_memory=ram)
        f = llmsizer.fit(
            "llama-3.3-70b-instruct",
            "rtx-4090",
            engine="llamacpp",
            weights="q4_k_m",
            memory=free[0],
            host_memory=ram,
            **a.flag_fields(),
        )
        assert a.fits == f.fits == (ram >= need), (ram, a.fits, f.fits)


def test_n_cpu_moe_experts_count_against_host_memory() -> None:
    """--n-cpu-moe N keeps the routed experts of layers 0..N-1 in host memory (common/arg.cpp:2766-2775): the host
    part grows by them and is checked."""
    kw = dict(engine="llamacpp", weights="q4_k_m")
    none = llmsizer.fit("qwen3-30b-a3b", "rtx-4090", **kw).estimate.total("host")[1]  # all offloaded: no split
    moe = llmsizer.fit("qwen3-30b-a3b", "rtx-4090", **kw, n_cpu_moe=24)
    host = _host(moe)
    assert host["experts"] > 0 and host["total"] >= none + host["experts"]
    code, _ = run_json(
        "fit",
        "qwen3-30b-a3b",
        "--device",
        "rtx-4090",
        "--engine",
        "llamacpp",
        "--weights",
        "q4_k_m",
        "--n-cpu-moe",
        "24",
        "--host-memory",
        str(host["total"] - 1),
    )
    assert code == 1


@pytest.mark.parametrize(
    "argv, words",
    [
        (["fit", MODEL, "--device", "rtx-4090", "--engine", "vllm", "--host-memory", "64GiB"], "engine llamacpp"),
        (
            ["fit", MODEL, "--device", "desktop-ddr5-4800-2ch", "--engine", "llamacpp", "--host-memory", "64GiB"],
            "--memory",
        ),
    ],
)
def test_host_memory_where_it_means_nothing_is_refused(argv, words) -> None:
    code, _, err = run(*argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert "error: --host-memory " in err, err  # the CLI names its flag (review: it said 'host_memory')
    with pytest.raises(InputError):
        llmsizer.fit(MODEL, argv[3], engine=argv[5], host_memory=64 * GiB)


AUTO = [
    "fit",
    "llama-3.3-70b-instruct",
    "--device",
    "rtx-3090",
    "--engine",
    "llamacpp",
    "--weights",
    "q4_k_m",
    "--auto",
    "--free",
    "23GiB,11GiB",
    "--host-device",
    "intel-core-i9-13900k",
]


def test_fit_auto_tokens_per_second_is_fit_with_its_flags() -> None:
    code, auto = run_json(*AUTO)
    assert code == 0 and auto["speed"]["tokens_per_second"] is not None
    flags = auto["flags"]

    def flag(name: str) -> str:
        return flags[flags.index(name) + 1]

    # the printed flags as fit takes them (-c is the KV cells of all slots: one slot here)
    argv = [
        "fit",
        "llama-3.3-70b-instruct",
        "--device",
        "rtx-3090",
        "--count",
        "2",
        "--engine",
        "llamacpp",
        "--weights",
        "q4_k_m",
        "--context",
        flag("-c"),
        "-ngl",
        flag("-ngl"),
        "-sm",
        flag("-sm"),
        "-ts",
        flag("-ts"),
        "--host-device",
        "intel-core-i9-13900k",
    ]
    code, same = run_json(*argv)
    assert same["speed"]["tokens_per_second"] == auto["speed"]["tokens_per_second"]
    assert same["speed"]["tokens_per_second_per_user"] == auto["speed"]["tokens_per_second_per_user"]
    assert same["speed"]["decode_tokens_per_second"] == auto["speed"]["decode_tokens_per_second"]
    # the line is labelled by what it shows: fit's output rate at its load (its "at 1 request" row: TTFT counted,
    # so below the idle decode) and the idle decode beside it, not a "decode:" rate that is the loaded one
    _, text, _ = run(*AUTO)
    sp = auto["speed"]
    assert sp["loaded"] and same["speed"]["under_load"] and sp["tokens_per_second"] < sp["decode_tokens_per_second"]
    line = (f"at 1 sequence: decoding at {sp['tokens_per_second_per_user']:,.1f} tokens/s; "
            f"{sp['tokens_per_second']:,.1f} tokens/s output incl. TTFT")  # the decode first (probe20 C1)
    assert (line in text
            and f"decode alone {sp['decode_tokens_per_second']:,.1f} tokens/s" in text and "decode: " not in text)
    # Python: the same, from the public fit_llamacpp given the GPUs (review: it had no speed; only the CLI added it)
    py = llmsizer.fit_llamacpp("llama-3.3-70b-instruct", [23 * GiB, 11 * GiB], weights="q4_k_m", device="rtx-3090",
                               host_device="intel-core-i9-13900k")
    assert py.speed == auto["speed"] and line in str(py)
    assert fit_llamacpp("llama-3.3-70b-instruct", [23 * GiB, 11 * GiB], weights="q4_k_m").speed is None  # no GPU


def test_fit_auto_without_a_host_cpu_says_why_no_speed() -> None:
    code, auto = run_json(*AUTO[:-2])
    assert auto["speed"]["tokens_per_second"] is None and "--host-device" in auto["speed"]["why"]


def test_host_memory_keeps_the_format_hint_and_names_what_the_host_holds() -> None:
    """Review: with --host-memory the format search refused the field ("not a serving workload field") and fit
    printed no hint; and the reason blamed "layers and experts kept on the CPU" where every layer was on the GPU. The
    truth: fit itself at the hinted format, with the same host memory, fits; at -ngl all the host holds only the
    token embeddings (llama.cpp keeps tok_embd in host memory: estimate/inference/llamacpp_split.py rule (3))."""
    argv = ("fit", "llama-3.1-8b", "--device", "rtx-4090", "--engine", "llamacpp", "--host-memory", "2GiB")
    code, d = run_json(*argv)
    assert code == 1 and d["fits_at"] is not None, d["reasons"]
    hinted = d["fits_at"]["weights"].removeprefix("gguf:")
    code, again = run_json(*argv, "--weights", hinted)
    assert code == 0 and again["fits"], again["reasons"]
    reason = next(r for r in d["reasons"] if r.startswith("host memory:"))
    assert "on the host: token embd," in reason and "layers" not in reason, reason
    code, partial = run_json(*argv, "-ngl", "20")  # 20 of 33 offloaded: the host keeps layers 0-12
    assert code == 1 and any("on the host: token embd, layers 0-12," in r for r in partial["reasons"])

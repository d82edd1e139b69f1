"""Serving on N devices: fit takes, among the tensor-parallel degrees vLLM can shard within one machine (an
instance's devices, or 8), the fastest layout that fits at the stated load, else the smallest degree spanning
machines that fits, and runs the other devices as replicas (estimate/fit.py ``tensor_parallel_options``; the speed
ranking is tested in tests/cli/test_fit_fastest_tensor_parallel.py). Before, it took the largest divisor of the
count that divides the heads: an 8B model on 10^6 H100s ran TP 32 (31,250 replicas), TP spanning four 8-GPU machines
for a model one card holds.

Truth: vLLM's sharding rule written out here from its source (vllm 0.19.1 wheel: vllm/config/model.py:1110-1116, the
attention heads divide by tp; vllm/model_executor/layers/linear.py:1012-1016 with vllm/distributed/utils.py:53-64,
KV heads split by ``divide(kv, tp)`` below tp or replicated by ``divide(tp, kv)`` from it; the MLP's gate_up and
down_proj split by ``divide(intermediate, tp)``, linear.py:451-457, :1417, eq. TP6), the models' published head counts
and widths (Qwen3-8B config.json: 32 heads, 8 KV heads, intermediate_size 12288; Qwen2.5-14B: 40 heads, 8 KV heads,
intermediate_size 13824), and "fits" by
construction: a TP spanning machines is the smallest that fits when one replica at it fits and one at each smaller
allowed TP does not.
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run
from llmsizer import fit
from llmsizer.estimate.fit import tensor_parallel_options
from llmsizer.models import load_model


def vllm_shards(heads: int, kv: int, tp: int, intermediate: int = 0) -> bool:
    """vLLM's checks, restated: heads % tp == 0, divide(kv, tp) when tp < kv else divide(tp, kv), and
    divide(intermediate, tp) (the dense MLP, where given)."""
    return heads % tp == 0 and (kv % tp == 0 if tp < kv else tp % kv == 0) and intermediate % tp == 0


INTERMEDIATE = {"qwen3-8b": 12288, "qwen2.5-14b": 13824}  # config.json intermediate_size


def test_an_8b_model_on_a_million_gpus_stays_within_a_machine(capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3-8B (32 heads, 8 KV heads): a vLLM-shardable TP within one machine's 8 GPUs; 10^6 / TP replicas."""
    code, data = answer(["fit", "qwen3-8b", "--device", "h100", "--count", "1e6"], capsys)
    assert code == 0 and data["fits"]
    t = data["tensor_parallel"]
    assert t <= 8 and vllm_shards(32, 8, t) and data["replicas"] * t == 10**6
    assert not any("spans" in w for w in data["warnings"])


def test_a_tp_within_a_machine_and_replicas_for_the_rest() -> None:
    """Qwen2.5-7B (28 heads, 4 KV heads) on 16 H100: 8 does not divide 28, so one of 1, 2, 4 within a machine of
    8, the rest replicas; Llama-3.1-70B (64 heads, 8 KV heads, 141 GB in bf16) on 8 x 80 GB: only TP 8 holds it."""
    r = fit("qwen2.5-7b", "h100", 16, speed=False)
    assert r.fits and r.tensor_parallel in (1, 2, 4) and r.tensor_parallel * r.replicas == 16
    r = fit("llama-3.1-70b", "h100", 8, speed=False)
    assert r.fits and (r.tensor_parallel, r.replicas) == (8, 1)


def test_tp_stays_within_a_machine_when_that_fits() -> None:
    """405B bf16 (811 GB) fits 8 x H200 (141 GB each): TP 8 and a second replica, not TP 16 across two machines."""
    r = fit("llama-3.1-405b", "h200", 16, speed=False)
    assert r.fits and r.tensor_parallel == 8 and r.replicas == 2
    assert not any("spans" in w for w in r.warnings)
    # on H100s (80 GB) it needs 16 GPUs: TP 16 crosses machines, which is said
    big = fit("llama-3.1-405b", "h100", 16, speed=False)
    assert big.tensor_parallel == 16 and any("spans 2 machines of 8" in w for w in big.warnings)


@pytest.mark.parametrize("name,count", [("qwen3-8b", 64), ("qwen2.5-14b", 10), ("qwen2.5-14b", 40)])
def test_options_are_vllms_shardings(name: str, count: int) -> None:
    spec = load_model(name)
    truth = [t for t in range(1, count + 1)
             if count % t == 0 and vllm_shards(spec.num_heads, spec.num_kv_heads, t, INTERMEDIATE[name])]
    opts = tensor_parallel_options(spec, count, 8)
    assert opts == sorted((t for t in truth if t <= 8), reverse=True) + [t for t in truth if t > 8]


def test_kv_heads_rule_is_enforced_for_a_tp_given(capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen2.5-14B: 40 heads divide by 5, its 8 KV heads neither divide by 5 nor divide 5: vLLM refuses TP 5."""
    code, _, err = run(["infer", "qwen2.5-14b", "--tp", "5"], capsys)
    assert code == 2 and "8 KV heads" in err and err.count("\n") == 1
    code, _, err = run(["infer", "qwen2.5-14b", "--tp", "8"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("count,says", [("1.5", "whole number"), ("0", "out of range"), ("2e6", "out of range"),
                                        ("1000000.0000000001", "whole number"), ("4.00000000000000001", "whole number"), ("ten", "cannot read")])
def test_count_must_be_an_exact_whole_number(count: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["fit", "qwen3-8b", "--device", "h100", "--count", count], capsys)
    assert code == 2 and says in err and err.count("\n") == 1, err


def test_a_count_written_as_a_float_that_is_exact_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    _, data = answer(["fit", "qwen3-8b", "--device", "h100", "--count", "1.6e1"], capsys)
    assert data["count"] == 16


def test_idle_replicas_add_no_tokens_per_second(capsys: pytest.CaptureFixture[str]) -> None:
    """One user on 10^6 / TP replicas keeps one busy: the total is one replica's tokens/s (it said 31,250 replicas'
    worth, 13 million tokens/s, before). 16 users on 8 replicas: 2 each, every replica busy, 8 replicas' worth; 4
    users on 8: 4 replicas' worth."""
    one = fit("qwen3-8b", "h100", 10**6)
    assert one.speed is not None and one.tokens_per_second_total == one.speed.tokens_per_second
    code, out, _ = run(["fit", "qwen3-8b", "--device", "h100", "--count", "1e6"], capsys)
    assert code == 0 and "1 replica busy, the others idle" in out
    full = fit("qwen3-8b", "h100", 64, concurrency=16, tensor_parallel=8)  # TP 8 x 8 replicas
    assert full.replicas == 8 and full.speed is not None and full.speed.concurrency == 2
    assert full.tokens_per_second_total == pytest.approx(8 * full.speed.tokens_per_second, rel=1e-12)
    few = fit("qwen3-8b", "h100", 64, concurrency=4, tensor_parallel=8)
    assert few.speed is not None and few.speed.concurrency == 1
    assert few.tokens_per_second_total == pytest.approx(4 * few.speed.tokens_per_second, rel=1e-12)


def test_a_llamacpp_split_over_more_gpus_than_it_takes_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """llama.cpp splits one model over at most llama_max_devices() = 16 GPUs (ggml-org/llama.cpp@01649e61c782
    src/llama.cpp:85-87; include/llama.h sizes llama_model_params.tensor_split by it), and its -ts parser
    (common/arg.cpp) refuses 16 shares or more: fit --count 10^6 on llama.cpp once placed a model over a million
    GPUs (27 s, 'FITS'); the Python API's gpus=200 was taken too."""
    # a split takes one machine's GPUs (specs/training.py llamacpp_split_gpus): a machine of 17 is refused, 16 taken
    code, out, err = run(["fit", "qwen3-8b", "--device", "h100", "--count", "17", "--gpus-per-node", "17",
                          "--engine", "llamacpp"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "at most 16 GPUs" in err
    assert run(["fit", "qwen3-8b", "--device", "h100", "--count", "16", "--gpus-per-node", "16", "--engine",
                "llamacpp"], capsys)[0] == 0
    # a -ts of 16 shares is what llama.cpp's parser throws on (split_arg.size() >= llama_max_devices())
    code, out, err = run(["fit", "qwen3-8b", "--device", "h100", "--count", "16", "--gpus-per-node", "16",
                          "--engine", "llamacpp", "--tensor-split", ",".join(["1"] * 16)], capsys)
    assert code == 2 and err.count("\n") == 1 and "--tensor-split" in err
    # the auto-fit prints one -ts share per GPU: 16 GPUs of one machine are refused, not printed as a -ts llama.cpp
    # throws on
    code, out, err = run(["fit", "qwen3-8b", "--device", "h100", "--count", "16", "--gpus-per-node", "16",
                          "--auto"], capsys)
    assert code == 2 and err.count("\n") == 1 and "at most 15 GPUs" in err
    import llmsizer
    from llmsizer.errors import InputError
    with pytest.raises(InputError, match=r"gpus: 200 is out of range; expected an integer in \[1, 16\]"):
        llmsizer.estimate_inference("qwen3-8b", engine="llamacpp", gpus=200)
    # the Python auto-fit takes the same limit whatever form the free sizes come in (probe18 D2: a list of 16 once
    # printed '-ts 6,5,...' of 16 shares, which llama.cpp's parser throws on); 15 is taken
    for free in (["23.99GiB"] * 16, ",".join(["23.99GiB"] * 16)):
        with pytest.raises(InputError, match="15"):
            llmsizer.fit_llamacpp("qwen3-8b", free, weights="q4_k_m", context=4096)
    assert len(llmsizer.fit_llamacpp("qwen3-8b", ["23.99GiB"] * 15, weights="q4_k_m", context=4096).free) == 15


def test_a_concurrency_out_of_range_is_refused_by_the_python_api() -> None:
    """fit spreads the concurrency over replicas (max(1, ceil(c / r)) each) and recommend took max(1, c): a negative
    or zero concurrency was answered as 1 through the Python API (the CLI's flag refuses it)."""
    from llmsizer.errors import InputError
    from llmsizer.recommend import best_option_on, recommend_inference

    for call in (lambda: fit("qwen3-8b", "h100", concurrency=-1, speed=False),
                 lambda: recommend_inference("qwen3-8b", concurrency=-5, quantization_advice=False),
                 lambda: best_option_on("qwen3-8b", "h100", concurrency=0)):
        with pytest.raises(InputError, match=r"concurrency: -?\d+ is out of range; expected an integer in \[1, "):
            call()

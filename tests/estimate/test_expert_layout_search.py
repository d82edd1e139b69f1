"""fit's own layout tries expert parallelism (`--dp D --enable-expert-parallel`) where eq. TP5 refuses a degree or
tensor parallelism does not fit (estimate/fit.py ``with_pipeline_layouts``, ``expert_options``; epdp3).

Independent truths:
- MiniMax-M2.7's routed-expert intermediate (1536, config.json ``intermediate_size``) split over TP 8 is 192 wide,
  not a multiple of its 128 x 128 FP8 blocks (``quantization_config.weight_block_size``): vLLM 0.19.1
  quantization/fp8.py:625-649 refuses that shard, so TP 8 is out and the layouts that use all 8 devices in one
  replica are data-parallel ranks with the experts split over them (fused_moe/config.py:1004-1131
  FusedMoEParallelConfig.make) -- MiniMax's own vLLM recipe for 8 GPUs is `--data-parallel-size 8
  --enable-expert-parallel`;
- the rule that picks among them is the one the searches already take: the most output tokens/s in total, each
  candidate sized by `fit` itself with the layout stated (so the choice is checked against fit's own answers at
  every layout, not a pinned number);
- the flags: vLLM 0.19.1 engine/arg_utils.py:849 (--tensor-parallel-size), :874 (--data-parallel-size),
  :925 (--enable-expert-parallel).
"""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.fit import fit, serving_engine_flags, serving_layout_text
from llmsizer.recommend import best_option_on
from llmsizer.specs import InferenceWorkload

H100 = "H100"
LOAD = 64  # sequences at once: where a data-parallel layout wins once its exchange pays its collectives' latency


@pytest.fixture(scope="module")
def minimax() -> object:
    return fit("minimax-m2.7", H100, 8, engine="vllm", concurrency=LOAD)


def fastest_of_the_layouts(engine: str, concurrency: int) -> tuple[dict, float]:
    """Every expert-parallel layout of 8 devices fit answers as fitting (each stated), and the plain TP 4 (the
    largest degree eq. TP5 leaves): their output tokens/s in total."""
    rates = {}
    for dp in (2, 4, 8):
        for tp in (1, 2, 4):
            if tp * dp > 8 or 8 % (tp * dp):
                continue
            f = fit("minimax-m2.7", H100, 8, engine=engine, tensor_parallel=tp, data_parallel=dp,
                    expert_parallel=True, concurrency=concurrency)
            if f.fits:
                rates[(tp, dp)] = f.tokens_per_second_total
    plain = fit("minimax-m2.7", H100, 8, engine=engine, tensor_parallel=4, concurrency=concurrency)
    assert plain.fits and plain.data_parallel == 1
    return rates, plain.tokens_per_second_total


def test_tp8_refused_so_the_search_takes_an_expert_parallel_layout(minimax) -> None:
    r = minimax
    assert r.fits
    why = next(a.why for a in r.all_assumptions if a.name == "data_parallel")  # said as fit's choice, and why
    assert "eq. TP5" in why and "with_pipeline_layouts" in why
    assert r.data_parallel > 1 and r.expert_parallel
    assert r.tensor_parallel * r.data_parallel * r.replicas == 8
    assert r.tensor_parallel < 8


def test_the_choice_is_the_fastest_layout_fit_answers(minimax) -> None:
    """Every layout the search tries, each stated to fit: the taken one has the most tokens/s in total."""
    rates, plain = fastest_of_the_layouts("vllm", LOAD)
    taken = rates[(minimax.tensor_parallel, minimax.data_parallel)]
    assert taken == pytest.approx(minimax.tokens_per_second_total, rel=1e-9)
    assert taken >= max(rates.values()) * (1 - 1e-9)
    assert taken >= plain


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_at_the_default_load_the_same_rule_picks(engine: str) -> None:
    """At the default load too the answer is the layout with the most tokens/s of those fit answers (review42 D2:
    with each exchange collective's latency counted, plain TP 4 x 2 replicas may win; whichever it is, fit's own
    answers at each layout decide it)."""
    r = fit("minimax-m2.7", H100, 8, engine=engine)
    rates, plain = fastest_of_the_layouts(engine, InferenceWorkload.concurrency)
    best = max([plain, *rates.values()])
    assert r.fits and r.tokens_per_second_total == pytest.approx(best, rel=1e-9)
    if r.data_parallel > 1:
        assert rates[(r.tensor_parallel, r.data_parallel)] == pytest.approx(r.tokens_per_second_total, rel=1e-9)


def test_tp8_is_refused_by_eq_tp5() -> None:
    with pytest.raises(InputError, match="not a multiple"):
        fit("minimax-m2.7", H100, 8, engine="vllm", tensor_parallel=8)


def test_dp8_ep8_is_a_layout_that_fits(minimax) -> None:
    """MiniMax's recipe (`--data-parallel-size 8 --enable-expert-parallel`) fits, 32 of 256 experts per device."""
    f = fit("minimax-m2.7", H100, 8, engine="vllm", tensor_parallel=1, data_parallel=8, expert_parallel=True)
    assert f.fits and f.layout_text == "TP 1 x DP 8 (EP 8)"
    assert f.engine_flags == "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"


def test_text_and_json_name_the_layout_and_the_flags(minimax) -> None:
    r = minimax
    t, d = r.tensor_parallel, r.data_parallel
    text = str(r)
    assert f"TP {t} x DP {d} (EP {t * d})" in text.splitlines()[0]
    assert f"vllm flags (one replica): --tensor-parallel-size {t} --data-parallel-size {d} --enable-expert-parallel" \
        in text
    j = r.to_dict()
    assert j["data_parallel"] == d and j["expert_parallel"] is True
    assert j["layout"] == f"TP {t} x DP {d} (EP {t * d})"
    assert j["engine_flags"] == f"--tensor-parallel-size {t} --data-parallel-size {d} --enable-expert-parallel"


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_not_taken_for_a_dense_model_or_where_tp_fits(model: str) -> None:
    """A dense model has no experts to split; an MoE whose every TP degree loads and fits keeps fit's TP."""
    r = fit(model, H100, 8, engine="vllm")
    assert r.fits and r.data_parallel == 1 and not r.expert_parallel
    assert "engine_flags" not in r.to_dict()


def test_flags_words() -> None:
    assert serving_engine_flags("vllm", 2, 1, 4, True) == \
        "--tensor-parallel-size 2 --data-parallel-size 4 --enable-expert-parallel"
    assert serving_layout_text(2, 1, 4, True) == "TP 2 x DP 4 (EP 8)"
    assert serving_layout_text(4, 2) == "TP 4 x PP 2"
    # SGLang 0.5.23 arg_groups/fields/parallel.py:45-51 (--tp-size), :81-90 (--attn-dp-size, "data-parallel attention
    # groups inside the TP group"), :281-288 (--ep-size): tp over all ranks, attention DP, EP size
    assert serving_engine_flags("sglang", 2, 1, 4, True) == "--tp-size 8 --attn-dp-size 4 --ep-size 8"


def test_recommend_takes_the_same_layout(minimax) -> None:
    """recommend's evaluation of the same deployment (format_search.pick_format through with_pipeline_layouts)."""
    o = best_option_on("minimax-m2.7", H100, 8, engine="vllm", concurrency=LOAD)
    assert (o.weights_format, o.tensor_parallel, o.data_parallel, o.expert_parallel) == (
        minimax.weights_format, minimax.tensor_parallel, minimax.data_parallel, True)
    d = o.to_dict()
    t, dp = o.tensor_parallel, o.data_parallel
    assert d["layout_flags"] == f"--tp {t} --dp {dp} --enable-expert-parallel"  # fit's own flags, copied, re-size it
    assert d["serving_flags"] == f"--tensor-parallel-size {t} --data-parallel-size {dp} --enable-expert-parallel"
    assert d["layout"] == f"TP {t} x DP {dp} (EP {t * dp})"


def test_sglang_search_offers_its_own_dp_attention_layout() -> None:
    """SGLang 0.5.23 refuses MiniMax's TP 8 as vLLM does (srt/layers/quantization/fp8.py:1579-1601, the experts'
    192-wide shard of 128 x 128 blocks); its search tries attention DP with expert parallelism, sized by SGLang's
    own split (eq. EP1s), and takes the layout with the most tokens/s of those fit answers, named by SGLang's flags."""
    r = fit("minimax-m2.7", H100, 8, engine="sglang", concurrency=LOAD)
    rates, plain = fastest_of_the_layouts("sglang", LOAD)
    assert r.fits and r.tokens_per_second_total == pytest.approx(max([plain, *rates.values()]), rel=1e-9)
    assert r.data_parallel > 1 and r.expert_parallel
    t, d = r.tensor_parallel, r.data_parallel
    assert r.to_dict()["engine_flags"] == f"--tp-size {t * d} --attn-dp-size {d} --ep-size {t * d}"


def test_sglang_never_answers_an_uneven_expert_split() -> None:
    """SGLang 0.5.23 asserts E % ep_size == 0 when it builds an MoE layer (srt/layers/moe/fused_moe_triton/layer.py:414;
    srt/layers/moe/topk.py:571): Qwen3-30B-A3B's 128 routed experts (config.json ``num_experts``) do not split over
    6 devices, so on 6 GPUs the search keeps a layout without expert parallelism (review42 defect 1: it answered
    TP 2 x DP 3, EP 6, which SGLang will not load), and the layout given is refused; vLLM places the remainder
    (fused_moe/layer.py determine_expert_map :107-109) and still sizes it."""
    r = fit("qwen3-30b-a3b", "l4", 6, engine="sglang")
    assert r.fits
    assert not r.expert_parallel or 128 % (r.tensor_parallel * r.data_parallel) == 0
    for tp, dp in ((1, 6), (2, 3), (1, 3)):
        with pytest.raises(InputError, match=f"128 experts over {tp * dp} expert-parallel devices") as e:
            fit("qwen3-30b-a3b", "l4", 6, engine="sglang", tensor_parallel=tp, data_parallel=dp, expert_parallel=True)
        assert {"data_parallel", "expert_parallel"} <= set(getattr(e.value, "fields", ()))
    assert fit("qwen3-30b-a3b", "l4", 6, engine="vllm", tensor_parallel=1, data_parallel=6,
               expert_parallel=True).expert_parallel


def test_the_rank_warning_names_each_engines_exchange() -> None:
    """review42 D4: on SGLang every decoder layer gathers and reduce-scatters the ranks' hidden states (eq. EP4s,
    layers/dp_attention.py :987-1043, :1120-1161), not vLLM's MoE-layer exchange (eq. EP4); the warning says which."""
    kw = {"tensor_parallel": 4, "data_parallel": 2, "expert_parallel": True}
    sg = fit("minimax-m2.7", H100, 8, engine="sglang", **kw).to_dict()["warnings"]
    vl = fit("minimax-m2.7", H100, 8, engine="vllm", **kw).to_dict()["warnings"]
    assert any("eq. EP4s" in w and "every decoder layer" in w for w in sg)
    assert not any("eq. EP4)" in w for w in sg)
    assert any("eq. EP4)" in w for w in vl) and not any("EP4s" in w for w in vl)

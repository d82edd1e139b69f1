"""llama.cpp's KV layout for several sequences (--kv-unified / --no-kv-unified): the cells against llama.cpp's own
rules, one setting read by the memory and the speed estimate, and the layout the published llama-batched-bench rows
ran with.

Expected cell counts are worked by hand from llama.cpp's source at ggml-org/llama.cpp@0c1e57098 (the numbers below,
not llmsizer's code, are the truth):
- src/llama-context.cpp:290 n_ctx = GGML_PAD(n_ctx, 256); :292-306 unified: n_ctx_seq = n_ctx, else
  n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) and n_ctx = n_ctx_seq x n_seq_max;
- src/llama-kv-cache.cpp:84 n_stream = unified ? 1 : n_seq_max; :233-234 K/V tensors of kv_size x n_stream cells
  (kv_size = n_ctx_seq, src/llama-model.cpp create_memory);
- src/llama-kv-cache-iswa.cpp:69-73 size_swa = GGML_PAD(min(size_base, n_swa x (unified ? n_seq_max : 1) + n_ubatch),
  256) per stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import llmsizer
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.llamacpp_fit import fit_llamacpp
from llmsizer.units import GiB

GEMMA = "gemma-3-4b-it"  # 34 layers: 5 full + 29 sliding (n_swa 1024), 4 KV heads x 256, f16 K and V: 4096 B/cell
CELL = 2 * 4 * 256 * 2


def test_cells_follow_llama_cpp_rules() -> None:
    # Gemma 3 (n_swa 1024), -c 32768 -np 4 -ub 512
    split = ENG.llamacpp_kv_cells("gemma3_text", 1024, 512, 4, 8192, unified=False)
    assert (split.streams, split.cells, split.sliding_cells, split.n_ctx) == (4, 8192, 1536, 32768)
    uni = ENG.llamacpp_kv_cells("gemma3_text", 1024, 512, 4, 8192, unified=True)
    assert (uni.streams, uni.cells, uni.sliding_cells, uni.n_ctx) == (1, 32768, 4608, 32768)  # 4 x 1024 + 512
    # -ub 2048 (the DGX Spark rows): 1024 + 2048 = 3072 per stream; unified 4 x 1024 + 2048 = 6144
    assert ENG.llamacpp_kv_cells("gemma3_text", 1024, 2048, 4, 8192, unified=False).sliding_cells == 3072
    assert ENG.llamacpp_kv_cells("gemma3_text", 1024, 2048, 4, 8192, unified=True).sliding_cells == 6144
    # gpt-oss (n_swa 128): 128 + 512 = 640 is padded to 768; unified 4 x 128 + 512 = 1024
    assert ENG.llamacpp_kv_cells("gpt_oss", 128, 512, 4, 4096, unified=False).sliding_cells == 768
    assert ENG.llamacpp_kv_cells("gpt_oss", 128, 512, 4, 4096, unified=True).sliding_cells == 1024
    # a short context caps the sliding stream: min(size_base, ...) with size_base = n_ctx_seq = 512
    assert ENG.llamacpp_kv_cells("gemma3_text", 1024, 512, 2, 300, unified=False).sliding_cells == 512
    # -c 10000 -np 3: n_ctx 10240, n_ctx_seq = pad256(3413) = 3584, n_ctx re-derived as 3 x 3584 = 10752
    odd = ENG.llamacpp_kv_cells("llama", None, 512, 3, 10000 // 3 + 1, unified=False)
    assert (odd.cells, odd.n_ctx) == (3584, 10752)
    # Phi-3 runs without its window in llama.cpp (swa_type NONE): the sliding layers hold the whole stream
    assert ENG.llamacpp_kv_cells("phi3", 2047, 512, 2, 4096, unified=False).sliding_cells == 4096


def test_memory_bytes_per_layout() -> None:
    """The KV item is streams x cells x 4096 B per layer: split (5 x 4 x 8192 + 29 x 4 x 1536) cells, unified
    (5 x 32768 + 29 x 4608) cells, for 4 sequences of 8192 tokens."""
    kw = dict(engine="llamacpp", weights="q4_0", context=8192, concurrency=4)
    split = llmsizer.estimate_inference(GEMMA, **kw)
    uni = llmsizer.estimate_inference(GEMMA, kv_unified=True, **kw)
    assert split.item("kv_cache").bytes == (5 * 4 * 8192 + 29 * 4 * 1536) * CELL  # 1.305 GiB
    assert uni.item("kv_cache").bytes == (5 * 32768 + 29 * 4608) * CELL  # 1.135 GiB
    a = {x.name: x for x in split.assumptions}["kv_unified"]
    assert a.value is False and a.default and "server.cpp:156-161" in a.why
    b = {x.name: x for x in uni.assumptions}["kv_unified"]
    assert b.value is True and not b.default
    # one sequence: one stream either way
    one = [llmsizer.estimate_inference(GEMMA, engine="llamacpp", weights="q4_0", context=8192, kv_unified=u)
           for u in (False, True)]
    assert one[0].item("kv_cache").bytes == one[1].item("kv_cache").bytes == (5 * 8192 + 29 * 1536) * CELL


def test_memory_and_speed_read_the_same_cells() -> None:
    """One setting, one rule: fit's speed estimate reads the layout and the sliding cells its memory estimate sized,
    for either layout, and switching the layout changes both."""
    for unified in (False, True):
        f = llmsizer.fit(GEMMA, "rtx-4090", weights="q4_0", engine="llamacpp", context=8192, concurrency=4,
                         kv_unified=unified)
        assert f.speed is not None
        mem = f.estimate.details["kv_cells"]
        assert f.estimate.details["kv_unified"] is unified
        sp = {a.name: a.value for a in f.speed.assumptions}
        assert sp["kv_unified"] is unified
        # at the full context every sliding stream is full: the cells read are the cells allocated
        assert sp["llamacpp_sliding_cells_read"] == mem["sliding_cells_per_stream"] == (4608 if unified else 1536)
    split_f, uni_f = (llmsizer.fit(GEMMA, "rtx-4090", weights="q4_0", engine="llamacpp", context=32768,
                                   concurrency=8, kv_unified=u) for u in (False, True))
    assert split_f.speed is not None and uni_f.speed is not None
    assert split_f.speed.decode is not None and uni_f.speed.decode is not None
    # a unified buffer: each query attends over every sequence's cells (PR #14363): 8x the attention arithmetic at
    # 8 x 32k. (The step itself is within 0.1 % either way for Gemma 3: the unified ring holds 8704 sliding cells,
    # eight split rings 8 x 1536, and the flash-attention kernels stream the cells at 0.74 of the weight rate.)
    assert uni_f.speed.decode.compute_seconds > 1.9 * split_f.speed.decode.compute_seconds


def test_other_engines_refuse_the_setting() -> None:
    for engine in ("vllm", "sglang", "transformers"):
        with pytest.raises(InputError, match="kv_unified applies to engine llamacpp"):
            llmsizer.estimate_inference(GEMMA, engine=engine, kv_unified=True)
    with pytest.raises(InputError, match="kv_unified applies to engine llamacpp"):
        llmsizer.recommend_inference(GEMMA, engine="vllm", kv_unified=True)


def test_auto_fit_prints_kvu_for_the_unified_layout() -> None:
    """-np N alone is one stream per sequence (common/common.h:575), so the flags carry -kvu when the unified layout
    was sized; the flags fed back into the estimator give the same KV."""
    split = fit_llamacpp(GEMMA, [8 * GiB], weights="q4_0", concurrency=4)
    uni = fit_llamacpp(GEMMA, [8 * GiB], weights="q4_0", concurrency=4, kv_unified=True)
    assert "-kvu" not in split.flags() and "-np" in split.flags()
    assert uni.flags()[uni.flags().index("-np") + 2] == "-kvu"
    for f, u in ((split, False), (uni, True)):
        again = llmsizer.estimate_inference(GEMMA, engine="llamacpp", weights="q4_0", context=f.context,
                                            concurrency=4, kv_unified=u)
        assert again.item("kv_cache").bytes == f.estimate.item("kv_cache").bytes


def test_published_batched_bench_rows_ran_one_stream_per_sequence() -> None:
    """llama.cpp scripts/bench-models.sh runs llama-batched-bench without -kvu (its "-c 270336" is the rows'
    n_kv_max = 270336), so kv_unified = false (common/common.h:575): the validation cases are evaluated with one KV
    stream per sequence, the gemma-3 rows' sliding layers holding pad256(1024 + 2048) = 3072 cells. Flash attention
    over several streams stops after the tile of the ring's last in-window cell (ggml-cuda fattn-common.cuh:879):
    after 8192 tokens in 2048-token ubatches (cells 0-2047; 2048-3071 and 0-1023; 1024-3071; 0-2047, positions
    7168-8191 in cells 1024-2047) and 16 decoded tokens (cells 2048-2063), the tile ending at 2304."""
    from llmsizer import validation_cases as V

    assert V.SPARK_KV_UNIFIED is False
    s = V._speed(GEMMA, "dgx-spark", "gguf:q4_0", 8192, 32, 32, identical=True, ubatch=V.SPARK_UBATCH,
                 kv_unified=V.SPARK_KV_UNIFIED)
    a = {x.name: x.value for x in s.assumptions}
    assert a["kv_unified"] is False and a["llamacpp_sliding_cells_read"] == 2304
    cases = {c.id: c for c in V.llamacpp_batched_cases()}
    row = next(r for r in V._read_csv(str(V.data_dir(None) / "llamacpp_batched_bench.csv"))
               if r["catalog_model"] == GEMMA and r["prompt"] == "8192" and r["sequences"] == "32")
    case = cases[row["id"]]
    assert case.predicted == pytest.approx(s.tokens_per_second)
    # the measured rate (S_TG 32 x 32 tokens / T_TG) sits within eq. (10)'s +-50% tolerance with this layout
    assert case.within


def test_one_sequence_has_one_stream_either_way() -> None:
    spec = find(GEMMA).spec()
    for u in (False, True):
        lay = ENG.llamacpp_kv_cells(spec.model_type, spec.sliding_window, 512, 1, 8192, unified=u)
        assert (lay.streams, lay.cells, lay.sliding_cells, lay.cross_sequence_attention) == (1, 8192, 1536, 1)


# Live llama-server KV totals for Gemma-3-270m (18 layers: 3 global + 15 sliding, 1 KV head x 256, n_swa 512, f16,
# default -ub 512), -c N with an explicit --parallel P (so kv_unified = false): unslothai/unsloth PR #5225
# (danielhanchen, 2026-05-03, verify_parallel_matches_server.py: "server" column), and the rounding cases of PR #7530
# (2026-07-28, llama.cpp build 10107 / 857c97607: "ctx 1024 with 3 slots allocates 1536 cells / 27.0 MiB, but 4 slots
# allocates 1024 cells / 18.0 MiB").
SERVER_MIB = [  # (-c, --parallel, measured KV MiB)
    (4096, 1, 27.0), (4096, 2, 42.0), (4096, 4, 72.0), (4096, 8, 72.0),
    (8192, 1, 39.0), (8192, 2, 54.0),
    (1024, 3, 27.0), (1024, 4, 18.0),
]


def _gemma3_270m_geometry() -> Any:
    """Gemma 3's text config with the 270m model's depth and widths; the KV reads only the layer schedule (every 6th
    layer global), the KV heads, head_dim and the window, which are the 270m model's."""
    import json

    from llmsizer.catalog.models import find as _find
    from llmsizer.readers.hf_config import spec_from_config

    path = Path(llmsizer.__file__).parent / "catalog/data/models/gemma-3-1b-it.json"
    cfg = dict(json.loads(path.read_text())["config"], num_hidden_layers=18, hidden_size=640, intermediate_size=2048)
    assert _find("gemma-3-1b-it").spec().sliding_window == 512
    return spec_from_config(cfg, name="gemma-3-270m-geometry")


@pytest.mark.parametrize(("n_ctx", "parallel", "mib"), SERVER_MIB)
def test_kv_equals_a_live_llama_server(n_ctx: int, parallel: int, mib: float) -> None:
    spec = _gemma3_270m_geometry()
    assert spec.layer_types.count("full") == 3 and spec.layer_types.count("sliding") == 15
    # llmsizer's context is per sequence: -c = context x sequences (padded to 256 by llama.cpp)
    est = llmsizer.estimate_inference(spec, engine="llamacpp", weights="q8_0", context=-(-n_ctx // parallel),
                                      concurrency=parallel)
    assert est.item("kv_cache").bytes == mib * 2**20

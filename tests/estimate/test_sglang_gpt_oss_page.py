"""GPT-OSS's 64-token KV page under SGLang on compute capability 10.x (estimate/engines.py sglang_page_size).

Truth from SGLang's code (sglang 0.5.23 PyPI wheel), not from llmsizer's output:
- arg_groups/model_overrides/gpt_oss.py:29-31: GptOssForCausalLM with no attention backend given gets trtllm_mha on
  sm100 (utils/common.py:309-313 is_sm100_supported: CUDA capability major 10), fa3 on sm90;
- arg_groups/overrides.py:1174-1187: trtllm_mha's page_size is 16, 32, 64 or 128, else (the default 1,
  :1341-1363) set to 64;
- the token pools are whole pages (model_executor/pool_configurator.py:646, 652), a request holds ceil(len / page)
  full-pool pages (utils/common.py:4859-4861) and, in the SWA pool, at most window + eviction interval + 2 pages
  (eq. S4 of formulas/swa_pool.py; GPT-OSS's window 128 - 1 = 127, the interval 128).
"""

from __future__ import annotations

import math

import pytest

from llmsizer import estimate_inference
from llmsizer.estimate.engines import sglang_page_size
from llmsizer.models import load_model

PAGE = 64
WINDOW, EVICTION = 128 - 1, 128  # openai/gpt-oss-20b config.json sliding_window 128; SGLang's interval


@pytest.mark.parametrize(("capability", "page"), [(100, PAGE), (103, PAGE), (90, 1), (80, 1), (120, 1), (None, 1)])
def test_gpt_oss_page_by_capability(capability: int | None, page: int) -> None:
    assert sglang_page_size(load_model("gpt-oss-20b"), "gpu", "cuda", capability)[0] == page


def test_other_runtimes_and_models_keep_page_one() -> None:
    assert sglang_page_size(load_model("gpt-oss-20b"), "gpu", "rocm", 100)[0] == 1
    assert sglang_page_size(load_model("gpt-oss-20b"), "cpu", "cuda", 100)[0] == 1
    assert sglang_page_size(load_model("llama-3.1-8b"), "gpu", "cuda", 100)[0] == 1


@pytest.mark.parametrize("context", [300, 16000, 1000])
def test_b200_pools_and_admission_in_whole_pages(context: int) -> None:
    est = estimate_inference("gpt-oss-20b", engine="sglang", device="b200", context=context)
    pages = [a for a in est.assumptions if a.name == "sglang_page_size"]
    assert [a.value for a in pages] == [PAGE]
    assert "gpt_oss.py:29-31" in pages[0].why
    full, swa = est.details["max_total_num_tokens"], est.details["swa_pool_tokens"]
    assert full % PAGE == 0 and swa % PAGE == 0
    held_full = math.ceil(context / PAGE) * PAGE
    held_swa = min(context, WINDOW + EVICTION + 2 * PAGE)  # 383 at page 64 (257 at page 1)
    assert est.details["max_concurrency_at_context"] == min(full // held_full, swa // held_swa)


def test_hopper_keeps_page_one() -> None:
    est = estimate_inference("gpt-oss-20b", engine="sglang", device="h100-sxm", context=300)
    assert [a.value for a in est.assumptions if a.name == "sglang_page_size"] == [1]
    full, swa = est.details["max_total_num_tokens"], est.details["swa_pool_tokens"]
    assert est.details["max_concurrency_at_context"] == min(full // 300, swa // min(300, WINDOW + EVICTION + 2))

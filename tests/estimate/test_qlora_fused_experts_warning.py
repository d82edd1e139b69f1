"""probe28 N4: QLoRA of an MoE base (qwen3-30b-a3b) holds ~3.9 B per param, more than a bf16 base, because
transformers 5 keeps routed experts and router as fused nn.Parameters that bitsandbytes does not replace
(formulas/nf4_quantization.py FUSED_EXPERTS_SOURCE). The training estimate says so in one warning, with the bytes
kept unquantized, and every surface (train, fit --train, the web's POST /api/v1/train:
tests/web/api/test_qlora_fused_experts_web.py) carries it.

Independent truth: the parameter counts from Qwen3-30B-A3B's config.json by hand (48 layers, 128 experts,
hidden 2048, moe_intermediate_size 768, gated experts: gate, up, down; router 2048 x 128 per layer)."""

from __future__ import annotations

import pytest

from llmsizer.estimate.fit import fit_training
from llmsizer.estimate.training import estimate_training

LAYERS, EXPERTS, HIDDEN, MOE_INTER = 48, 128, 2048, 768
KEPT_PARAMS = LAYERS * EXPERTS * (3 * HIDDEN * MOE_INTER + HIDDEN)  # experts (gate, up, down) + router
TOTAL_PARAMS = 30_532_122_624  # Qwen3-30B-A3B model card: 30.5B (count from config by formulas/params.py)


def _warning(est: object) -> str:
    hits = [w for w in est.warnings if w.startswith("QLoRA of an MoE model")]  # type: ignore[attr-defined]
    assert len(hits) == 1, est.warnings  # type: ignore[attr-defined]
    return hits[0]


@pytest.mark.parametrize(("base_dtype", "nbytes", "words"), [(None, 4, "fp32"), ("bf16", 2, "16-bit")])
def test_qlora_moe_warns_of_unquantized_experts(base_dtype: str | None, nbytes: int, words: str) -> None:
    fields = {"base_dtype": base_dtype} if base_dtype else {}
    text = _warning(estimate_training("qwen3-30b-a3b", method="qlora", **fields))
    kept = KEPT_PARAMS * nbytes
    assert KEPT_PARAMS == 29_003_612_160
    assert f"(29.00B of 30.53B params, {kept / 2**30:.2f} GiB) stay {words} ({nbytes} B each), not NF4" in text
    assert "transformers 5 stores them as fused nn.Parameters" in text
    assert "integrations/bitsandbytes.py line 189" in text  # the cited source
    # the base's bytes per param: the kept experts at nbytes + the rest (~1.5B params) at <= 4 B: above bf16's 2
    per_param = float(text.split("the base holds ")[1].split(" B per param")[0])
    assert kept / TOTAL_PARAMS < per_param < (kept + 4 * (TOTAL_PARAMS - KEPT_PARAMS)) / TOTAL_PARAMS
    if nbytes == 4:
        assert per_param > 3.6  # probe28 N4: 3.6-3.9 B/param


def test_fit_train_carries_it() -> None:
    res = fit_training("qwen3-30b-a3b", "h100", 1, method="qlora", fits_at=False)
    assert res.estimate is not None
    assert "stay fp32 (4 B each), not NF4" in _warning(res.estimate)


@pytest.mark.parametrize(("model", "method"), [("llama-3.1-8b", "qlora"), ("qwen3-30b-a3b", "lora")])
def test_no_warning_without_fused_4bit_experts(model: str, method: str) -> None:
    est = estimate_training(model, method=method)
    assert not [w for w in est.warnings if w.startswith("QLoRA of an MoE model")]

"""`llmsizer measure` of bitsandbytes optimizers on a CPU (bitsandbytes 0.50.2 runs them there), against truth built
here without llmsizer code.

Independent truth: the same tiny Llama (tests/measure/conftest.py ``TINY``) built with transformers in this process,
one forward/backward and ``step()`` of bitsandbytes' own ``AdamW8bit`` / ``Lion8bit``, and the bytes of the distinct
storages of every tensor in ``optimizer.state`` (uint8 moments, fp32 block absmax, the shared fp32 quantization
maps; the small norm weights keep fp32 states: bitsandbytes ``min_8bit_size`` 4096).

Checks and tolerances:
- the measured optimizer state (``optimizer_state_bytes``, after the run) equals that truth to the byte;
- the estimate's optimizer-state term (``optimizer_state_bytes_counted``: n + 4 ceil(n / 256) per 8-bit state, fp32
  below 4096 elements, 1 KiB per quantization map) equals it to the byte (measured 2026-12-04: adamw-8bit
  17,645,568 B, lion-8bit 8,822,784 B);
- the state live at the tensor peak is at most that (the peak can fall inside the first step, before every state
  exists; when it falls after, it is the same less the quantization maps, 1 KiB each, which the dispatch-mode
  tracker does not see being built: measured at seq_len 128, exactly 2048 B / 1024 B short).
- paged optimizers are refused on a CPU with the estimate's refusal and the unpaged alternative (bitsandbytes 0.50.2
  optim/optimizer.py ``get_state_buffer`` lines 374-382: it allocates unpaged RAM there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmsizer.errors import InputError

from .conftest import TINY

pytestmark = pytest.mark.slow

CASES = {"adamw-8bit": "AdamW8bit", "lion-8bit": "Lion8bit"}  # llmsizer name: bitsandbytes class


def _real_state(bnb_class: str) -> tuple[int, set[str]]:
    """Bytes of the distinct state storages after one real step, and the state dtypes (no llmsizer code)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    cfg = dict(TINY)
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32)
    opt = getattr(bnb.optim, bnb_class)(model.parameters(), lr=1e-5)
    ids = torch.randint(0, TINY["vocab_size"], (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    seen: dict[int, int] = {}
    dtypes = set()
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                seen[v.untyped_storage()._cdata] = v.untyped_storage().nbytes()
                dtypes.add(str(v.dtype))
    return sum(seen.values()), dtypes


@pytest.fixture(scope="module")
def bnb_measured(tiny_config: Path) -> dict[str, dict[str, Any]]:
    pytest.importorskip("bitsandbytes")
    from llmsizer.measure import MeasureSettings, measure

    return {name: measure(MeasureSettings("training", str(tiny_config), device="cpu", threads=1, method="full",
                                          optimizer=name, micro_batch=1, seq_len=64, steps=1),
                          progress=False, timeout=300) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_bnb_optimizer_state_on_cpu_matches_real_tensors_and_estimate(bnb_measured: dict[str, Any], name: str) -> None:
    rec = bnb_measured[name]
    assert rec["status"] == "ok", rec.get("error")
    truth, dtypes = _real_state(CASES[name])
    assert "torch.uint8" in dtypes  # real 8-bit states, not an fp32 fallback
    measured = rec["measured"]["optimizer_state_bytes"]
    row = next(r for r in rec["comparison"] if r["component"] == "optimizer_state")
    print(f"{name}: real bitsandbytes {truth:,} B, measured {measured:,} B, estimated {row['estimated']:,} B, "
          f"in the comparison {row['measured']:,} B")
    assert measured == truth
    assert row["estimated"] == truth
    assert row["measured"] == truth  # the state the run left, not the share alive at the tensor peak (a part of it)


@pytest.mark.parametrize(("paged", "twin"), [("paged-adamw-8bit", "adamw-8bit"), ("paged-lion", "lion"),
                                             ("paged-lion-8bit", "lion-8bit"), ("paged-adamw", "adamw")])
def test_paged_refused_on_cpu_like_the_estimate(tiny_config: Path, paged: str, twin: str) -> None:
    from llmsizer.estimate.training import estimate_training
    from llmsizer.measure import MeasureSettings

    with pytest.raises(InputError) as got:
        MeasureSettings("training", str(tiny_config), device="cpu", method="full", optimizer=paged)
    msg = str(got.value)
    assert f"so measure optimizer {twin}" in msg and "\n" not in msg
    with pytest.raises(InputError) as est:
        estimate_training(str(tiny_config), method="full", optimizer=paged, device="cpu")
    head = "which device cpu lacks: bitsandbytes allocates its states unpaged in RAM there"
    assert head in msg and head in str(est.value)

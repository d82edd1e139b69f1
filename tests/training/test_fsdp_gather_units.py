"""The bytes each FSDP unit all-gathers (estimate/training/gather_units.py ``fsdp_gather_units``, read by every rule
of ``gathered_params``: the two largest units, eq. PP1, offload='params' and the traced layouts) against real
2-rank steps on the CPU over gloo (#12).

``fsdp_rs_output_step.py`` wraps a small random-weight Llama as torchtitan does (each decoder layer a unit, the root
the rest) and records the flat output of every FSDP2 all-gather (``foreach_all_gather``'s buffer: the unit's
unsharded parameters in their all-gather dtypes, back to back); the forward gathers the root, then each block.
``fsdp1_lora_step.py`` records FSDP1's unsharded flat parameters per unit. Cases:

- LoRA r8 on every linear and lm_head (PEFT), fp32 parameters under ``MixedPrecisionPolicy(param_dtype=bf16)``: the
  adapters gathered with their block (and lm_head's with the root), all in bf16;
- the same with bf16 base weights, fp32 adapters and no mixed-precision policy: each parameter in its own dtype;
- FSDP1 with the adapters in their layer's unit (``use_orig_params=True``, pure bf16): one flat parameter each;
- torchao float8 training (``convert_to_float8_training``, ``enable_fsdp_float8_all_gather=True``, lm_head left
  out, as torchtitan's converter): the blocks' Float8Linear weights 1 B per element, their norms and the root
  (embedding, final norm, lm_head) in bf16.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA, run_cases, run_step  # noqa: E402

from llmsizer.estimate.inference.common import Acc  # noqa: E402
from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.estimate.training.gather_units import GatherUnits, fsdp_gather_units  # noqa: E402
from llmsizer.estimate.training.setup import resolve  # noqa: E402
from llmsizer.estimate.training.states import stage_states  # noqa: E402
from llmsizer.formulas.lora import lora_params  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

LLAMA = TINY_LLAMA
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]
LORA = dict(method="lora", rank=8, targets=",".join(TARGETS))


def units(fields: dict[str, Any]) -> GatherUnits:
    spec = spec_from_config(LLAMA, name="llama-tiny")
    w = TrainingWorkload(**{"micro_batch": 2, "seq_len": 64, "gpus": 2, "fsdp": "full", **fields})
    ctx = resolve(spec, w, Acc())
    return fsdp_gather_units(ctx, stage_states(ctx, 0))


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "LoRA, fp32 under bf16 param_dtype": (
        dict(lora=dict(r=8, targets=TARGETS)),
        dict(LORA, precision="fsdp-bf16-mixed")),
    "LoRA, bf16 base + fp32 adapters, no policy": (
        dict(dtype="bf16", mp=False, lora=dict(r=8, targets=TARGETS, dtype="fp32")),
        dict(LORA, precision="bf16", base_dtype="bf16", adapter_dtype="fp32")),
    "float8 full training": (
        dict(float8=True),
        dict(precision="fsdp-bf16-mixed", float8=True)),
}


@pytest.fixture(scope="module")
def fsdp2_steps() -> dict[str, dict[str, Any]]:
    """Every FSDP2 case's real step, one launch of two ranks (ranks.py ``run_cases``: one child process per case,
    forked after the imports)."""
    runs = run_cases("fsdp_rs_output_step.py", [dict(config=LLAMA, batch=2, seq=64, **case) for case, _ in
                                                 CASES.values()], 2, preload=("peft",))
    return dict(zip(CASES, runs, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_fsdp2_all_gather_outputs(name: str, fsdp2_steps: dict[str, dict[str, Any]]) -> None:
    """Each FSDP2 unit's all-gather output in the forward (root, then the blocks) equals ``fsdp_gather_units``."""
    case, fields = CASES[name]
    m = fsdp2_steps[name]
    measured = [n for p, n, _ in m["all_gathers"] if p == "forward"]
    u = units(fields)
    print(f"\n{name}: all-gather outputs {measured} B; llmsizer root {u.root} B, blocks {list(u.blocks)}")
    assert measured == [u.root, *u.blocks]


@pytest.mark.slow
def test_fsdp1_lora_with_layers_flat_parameters() -> None:
    """FSDP1, LoRA adapters in their decoder layer's unit: each block's unsharded flat parameter (bf16) holds its
    adapters; the root's, lm_head's adapters."""
    case = dict(config=LLAMA, batch=2, seq=64, lora=dict(r=8, targets=TARGETS), wrap="layers")
    m = run_step("fsdp1_lora_step.py", case, 2)
    seen = [u for moment, u in m["unsharded"] if moment == "forward"]
    blocks = sorted({v for u in seen for k, v in u.items() if k.startswith("layer")})
    root = {u["root"] for u in seen if "root" in u}
    u = units(dict(LORA, precision="bf16", base_dtype="bf16", adapter_dtype="bf16", fsdp_version=1,
                   fsdp1_lora_wrap="with-layers"))
    print(f"\nFSDP1 with-layers: unsharded flat parameters root {root}, blocks {blocks}; llmsizer {u}")
    assert root == {u.root}
    assert blocks == sorted(set(u.blocks))


def test_rules_gather_the_adapters() -> None:
    """The rules read the same units: under pipeline parallelism (eq. PP1: every unit of the stage gathered, whole)
    LoRA adds exactly the stage's adapters in param_dtype (formulas/lora.py, counted apart); with offload='params'
    (the two largest units, whole: Llama 3.1 8B's embedding and output) an adapter on lm_head adds its A and B in
    param_dtype; with float8 the two
    largest units of Llama 3.1 8B, its embedding and output, stay in bf16 (the estimate without float8 gathers the
    same two, less the rank's shard)."""
    spec = load_model("llama-3.1-8b")
    common = dict(precision="fsdp-bf16-mixed", gpus=8, fsdp="full", micro_batch=1, seq_len=2048)
    targets = ("q", "k", "v", "o", "gate", "up", "down")
    pp = dict(common, pp=2, grad_accumulation=4)
    lora = estimate_training(spec, method="lora", rank=16, targets=",".join(targets), **pp)
    frozen = estimate_training(spec, method="lora", rank=16, targets="q", **pp)
    per_layer = lora_params(spec, 16, targets).total // spec.num_layers
    per_layer_q = lora_params(spec, 16, ("q",)).total // spec.num_layers
    stage_layers = spec.num_layers // 2
    assert (lora.item("gathered_params").bytes - frozen.item("gathered_params").bytes
            == (per_layer - per_layer_q) * stage_layers * 2)
    off = dict(common, offload="params")
    head = estimate_training(spec, method="lora", rank=16, targets="q,lm_head", **off).item("gathered_params").bytes
    q_only = estimate_training(spec, method="lora", rank=16, targets="q", **off).item("gathered_params").bytes
    assert head - q_only == lora_params(spec, 16, ("lm_head",)).total * 2
    plain = estimate_training(spec, **common).item("gathered_params").bytes
    f8 = estimate_training(spec, float8=True, **common).item("gathered_params").bytes
    assert f8 == plain

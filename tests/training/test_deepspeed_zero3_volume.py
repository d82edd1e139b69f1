"""DeepSpeed ZeRO-3's collective volume (formulas/deepspeed_zero.py ``zero3_collective_elements`` over
gather_units.py ``deepspeed_zero3_uses``, what the step time times) against the bytes real DeepSpeed 0.19.8 hands to
``torch.distributed`` on two gloo ranks (deepspeed_volume_step.py), per phase of the last of three steps (the
trace recorded in the first), to the byte:

- the tiny Llama, bf16 and fp32: its q/k/v/o projections and norms (<= 1e5 elements) persistent, gathered only
  after the optimizer step; everything else gathered once in the forward, none again (the first prefetch queues the
  whole model); every gradient reduce-scattered;
- odd widths with biases (each parameter padded to N ceil(n / N)), stage3_max_reuse_distance 1e6 and no prefetch:
  the backward gathers again what the reuse distance released;
- LoRA (PEFT) on q and v: the frozen base gathered, only the adapters reduced; with nothing persistent and every
  parameter released, the frozen embedding and the layer-0 modules reading only its output gather nothing again;
  on o only, on down only and on the lm_head only, the modules before the first adapter neither (gather_units.py
  eq. B1: layer 0's o projection, its attention and MLP but down, every decoder layer and the final norm), nor a
  hybrid's layers before its first adapter (a Mamba layer and an MLP layer before the attention layer adapted).

The one collective left out: an 8-byte all-reduce in ``engine.step`` (the overflow / gradient-norm check), not a
parameter or gradient payload.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed")

from ranks import TINY_LLAMA as LLAMA  # noqa: E402
from ranks import run_cases  # noqa: E402

from llmsizer.estimate.training.compose import training_context  # noqa: E402
from llmsizer.estimate.training.gather_units import deepspeed_zero3_uses  # noqa: E402
from llmsizer.formulas.deepspeed_zero import zero3_collective_elements  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs.training import TrainingWorkload  # noqa: E402

ODD = dict(LLAMA, hidden_size=255, head_dim=64, num_attention_heads=5, num_key_value_heads=1, intermediate_size=511,
           vocab_size=2001, attention_bias=True, mlp_bias=True)
LORA = {"r": 8, "target_modules": ["q_proj", "v_proj"]}
RELEASED = {"stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0}
# DeepSpeed config key -> zero3_collective_elements argument
KEYS = {"stage3_param_persistence_threshold": "persistence", "stage3_max_reuse_distance": "max_reuse",
        "stage3_prefetch_bucket_size": "prefetch"}
# a hybrid whose first adapter (q/v of its attention layer) comes after a Mamba layer and an MLP layer
HYBRID: dict[str, Any] = dict(model_type="nemotron_h", vocab_size=512, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
              head_dim=64, mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16, n_groups=1, intermediate_size=384,
              max_position_embeddings=1024, tie_word_embeddings=False, hybrid_override_pattern="M-*-",
              num_hidden_layers=4)
CASES = {
    "bf16": dict(config=LLAMA),
    "fp32": dict(config=LLAMA, precision="fp32"),
    "odd-reuse-1e6": dict(config=ODD, zero={"stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 1_000_000}),
    "lora": dict(config=LLAMA, lora=LORA),
    "lora-all-released": dict(config=LLAMA, lora=LORA, zero=RELEASED),
    # eq. (B1): layer 0's attention output projection too (its input needs no gradient without a q/k/v adapter) ...
    "lora-o-all-released": dict(config=LLAMA, lora=dict(LORA, target_modules=["o_proj"]), zero=RELEASED),
    # ... its whole attention and MLP but down (whose adapter is the layer's first) ...
    "lora-down-all-released": dict(config=LLAMA, lora=dict(LORA, target_modules=["down_proj"]), zero=RELEASED),
    # ... and every decoder layer and the final norm when only the lm_head is adapted
    "lora-lm_head-all-released": dict(config=LLAMA, lora=dict(LORA, target_modules=["lm_head"]), zero=RELEASED),
    # ... and a hybrid's layers before its first adapter
    "hybrid-lora-all-released": dict(config=HYBRID, lora=LORA, zero=RELEASED),
}
# not modelled: NemotronHBlock.forward reads its norm's weight outside the norm (``self.norm.weight.dtype``,
# transformers 5.24.0 modeling_nemotron_h.py line 970), which DeepSpeed registers as an external parameter of the
# block and gathers with it (ZeROOrderedDict.__getitem__, runtime/zero/parameter_offload.py lines 80-89 at 0.19.8;
# coordinator ``iter_params`` adds ``ds_external_parameters``): the first adapted block's pre-backward gathers that
# norm (bf16, hidden_size elements) although the norm's own backward does not run
EXTERNAL = {"hybrid-lora-all-released": {"backward all_gather": HYBRID["hidden_size"] * 2}}


def _predicted(case: dict[str, Any]) -> dict[str, int]:
    spec = spec_from_config(case["config"], name="llama-tiny")
    fields: dict[str, Any] = dict(gpus=2, zero=3, micro_batch=1, seq_len=32)
    fields["precision"] = "fp32" if case.get("precision") == "fp32" else "deepspeed-bf16"
    if "lora" in case:
        fields.update(method="lora", rank=8, targets=tuple(t.removesuffix("_proj") for t in case["lora"]["target_modules"]))
    ctx = training_context(spec, TrainingWorkload(**fields))
    v = zero3_collective_elements(deepspeed_zero3_uses(ctx), 2,
                                  **{KEYS[k]: value for k, value in case.get("zero", {}).items()})
    grad = 4 if case.get("precision") == "fp32" else 2  # communication_data_type: the bf16 / fp32 parameters'
    return {"forward all_gather": v.forward, "backward all_gather": v.backward,
            "backward reduce_scatter": v.reduced * grad, "step all_gather": v.persistent}


def _case(name: str) -> dict[str, Any]:
    return dict(CASES[name], batch=1, seq=32, steps=3)


@pytest.fixture(scope="module")
def steps() -> dict[str, dict[str, Any]]:
    """Every case's three steps, one launch of two ranks (ranks.py ``run_cases``: one child process per case, forked
    after the imports)."""
    runs = run_cases("deepspeed_volume_step.py", [_case(n) for n in CASES], 2, local_rank_zero=True,
                     preload=("deepspeed", "peft"))
    return dict(zip(CASES, runs, strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_zero3_collective_bytes_equal_deepspeeds(name: str, steps: dict[str, dict[str, Any]]) -> None:
    case = _case(name)
    last = steps[name]["steps"][-1]
    measured = {f"{phase} {op}": nbytes for phase, ops in last.items() for op, nbytes in ops.items()
                if (phase, op) != ("step", "all_reduce")}
    assert last["step"].get("all_reduce", 0) <= 8
    predicted = {k: v + EXTERNAL.get(name, {}).get(k, 0) for k, v in _predicted(case).items() if v}
    print(f"\n{name}: measured {measured}\n{'':>{len(name)}}  predicted {predicted}")
    assert measured == predicted

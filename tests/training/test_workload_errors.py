"""Bad training inputs fail early with one clear line naming the field and the allowed values."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError, LlmsizerError
from llmsizer.estimate.training import estimate_training, max_micro_batch
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs import TrainingWorkload

LLAMA = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32}


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text


@pytest.mark.parametrize(("fields", "words"), [
    (dict(method="lora", rank=0), ["rank", "out of range", "[1, "]),
    (dict(zero=4), ["zero", "[0, 3]", "ZeRO stages are 0, 1, 2 and 3"]),
    (dict(method="sft"), ["method", "full, lora, dora, qlora"]),
    (dict(precision="bf32"), ["precision", "bf16-mixed"]),
    (dict(optimizer="adamax"), ["optimizer", "adamw"]),
    (dict(grad_checkpointing="some"), ["grad_checkpointing", "selective"]),
    (dict(attention="xformers"), ["attention", "sdpa"]),
    (dict(method="lora", targets="q,qkv"), ["LoRA target", "'qkv'"]),
    (dict(gpus=3, tp=2), ["gpus", "tp x pp"]),
    (dict(zero=2, fsdp="full"), ["ZeRO", "FSDP"]),
    (dict(offload="params", zero=2, gpus=2), ["offload='params'", "zero=3"]),
    (dict(micro_batch=0), ["micro_batch", "out of range", "[1, 1,048,576]"]),
    (dict(method="qlora", precision="fp32"), ["qlora", "bf16"]),
    (dict(sequence_parallel=True), ["sequence_parallel", "tp > 1"]),
    (dict(optimizer_in_backward=True, grad_accumulation=4), ["optimizer_in_backward", "grad_accumulation"]),
    (dict(gpus=2, fsdp="full", grad_sync="optimizer-step"), ["grad_sync", "FSDP1", "FSDP2"]),
    (dict(gpus=2, fsdp="full", fsdp_version=1, grad_sync="micro-step"), ["grad_sync", "'optimizer-step'"]),
    (dict(method="lora", gpus=2, fsdp="full", fsdp1_lora_wrap="with-layers"), ["fsdp1_lora_wrap", "fsdp_version 1"]),
    (dict(gpus=2, fsdp="full", fsdp_version=1, fsdp1_lora_wrap="with-layers"), ["fsdp1_lora_wrap", "LoRA"]),
    (dict(method="lora", gpus=2, fsdp="full", fsdp_version=1, fsdp1_lora_wrap="layers"),
     ["fsdp1_lora_wrap", "adapters-apart, with-layers"]),
    # the QLoRA-only settings of session 10 (each changes a QLoRA base's bytes only; elsewhere it would be dropped)
    (dict(nf4_quantizer="bitsandbytes-0.42"), ["nf4_quantizer", "method is 'full'"]),
    (dict(method="lora", nf4_format="nf4"), ["nf4_format", "method is 'lora'"]),
    (dict(lora_dropout="per-module"), ["lora_dropout", "method is 'full'"]),
    (dict(loop_keeps_graph=True), ["loop_keeps_graph", "method is 'full'"]),
    (dict(method="lora", loop_keeps_graph=True), ["loop_keeps_graph", "method is 'lora'"]),
    (dict(loss="ce-loss-parallel"), ["ce-loss-parallel", "tp > 1"]),
    (dict(loss="ce-loss-parallel", tp=2, gpus=2, loss_chunks=8), ["ce-loss-parallel", "loss_chunks 8"]),
])
def test_workload_rejects(fields: dict, words: list[str]) -> None:
    with pytest.raises(InputError) as info:
        TrainingWorkload(**fields)
    text = _one_line(info.value)
    for w in words:
        assert w in text


def test_fsdp1_lora_dtypes_and_qlora() -> None:
    """One flat parameter has one dtype: fp32 adapters cannot share a unit with a bf16 base ('with-layers'); wrapped
    apart (torchtune's, PEFT's policy) each adapter is a flat parameter of its own, so they may. QLoRA under FSDP1 is
    refused (not modelled)."""
    spec = spec_from_config(LLAMA, name="llama-7b")
    common = dict(method="lora", precision="bf16-mixed", gpus=2, fsdp="full", fsdp_version=1, adapter_dtype="fp32")
    with pytest.raises(InputError) as info:
        estimate_training(spec, **common, fsdp1_lora_wrap="with-layers")
    assert "one dtype" in _one_line(info.value)
    assert estimate_training(spec, **common).details["model_states"]["gradients"] > 0
    with pytest.raises(InputError) as info:
        estimate_training(spec, method="qlora", gpus=2, fsdp="full", fsdp_version=1)
    assert "FSDP1 QLoRA" in _one_line(info.value)


def test_tensor_parallel_must_divide_heads() -> None:
    spec = spec_from_config(LLAMA, name="llama-7b")
    with pytest.raises(InputError) as info:
        estimate_training(spec, gpus=3, tp=3)
    assert "does not divide the 32 attention heads" in _one_line(info.value)


def test_qlora_needs_nf4_or_a_gptq_int4_checkpoint() -> None:
    # QLoRA over a GPTQ int4 checkpoint is stated (tests/formulas/test_gptq_dequant.py); other quantized
    # checkpoints (8-bit GPTQ, AWQ) are refused with the format named
    for q in ({"quant_method": "gptq", "bits": 8, "group_size": 128}, {"quant_method": "awq", "bits": 4}):
        spec = spec_from_config(dict(LLAMA, quantization_config=q), name="llama-7b-q")
        with pytest.raises(InputError) as info:
            estimate_training(spec, method="qlora")
        assert f"is {q['quant_method']}-quantized" in _one_line(info.value)


def test_expert_parallel_needs_moe() -> None:
    spec = spec_from_config(LLAMA, name="llama-7b")
    with pytest.raises(InputError) as info:
        estimate_training(spec, gpus=2, ep=2)
    assert "mixture-of-experts" in _one_line(info.value)


def test_lora_target_missing_in_model_and_dora_on_experts() -> None:
    moe = {"model_type": "qwen3_moe", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_experts": 4,
           "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    spec = spec_from_config(moe, name="tiny-moe")
    with pytest.raises(InputError) as info:
        estimate_training(spec, method="dora", targets="q,gate,up")
    assert "DoRA cannot adapt routed experts" in _one_line(info.value)
    with pytest.raises(InputError) as info:
        estimate_training(spec, method="lora", targets="gate")
    assert "target both gate and up" in _one_line(info.value)


def test_reverse_questions_need_a_budget() -> None:
    spec = spec_from_config(LLAMA, name="llama-7b")
    with pytest.raises(LlmsizerError):
        max_micro_batch(spec, 0)


def test_a_latent_moe_is_sized_at_the_latent() -> None:
    """Nemotron-3-Super's experts run in a 1024-wide latent (moe_latent_size; tests/training/test_moe_latent.py checks
    the terms against a real step): the routed-expert activations are sized at the latent, not at hidden_size 4096,
    and no warning says otherwise."""
    import dataclasses

    from llmsizer.estimate.training import estimate_training
    from llmsizer.formulas.training_activations import ActivationSetup, moe_saved_terms
    from llmsizer.models import load_model

    est = estimate_training("nvidia-nemotron-3-super-120b-a12b", method="full", gpus=8, zero=3)
    assert not [x for x in est.warnings if "latent" in x]
    spec = load_model("nvidia-nemotron-3-super-120b-a12b")
    assert spec.moe is not None and spec.moe.latent_size == 1024
    st = ActivationSetup(batch=1, seq=2048, residual=2, compute=2, expert=2)
    terms = {t.name: t.bytes for t in moe_saved_terms(spec, st)}
    assert terms["fc2_latent_proj input"] == 2048 * 1024 * 2
    wide = dataclasses.replace(spec, moe=dataclasses.replace(spec.moe, latent_size=0))
    wide_terms = {t.name: t.bytes for t in moe_saved_terms(wide, st)}
    k = spec.moe.experts_per_token  # 2 x (hidden - latent) fewer bytes per routed copy and byte width
    assert wide_terms["routed experts (grouped_mm)"] - terms["routed experts (grouped_mm)"] == \
        2048 * k * 2 * (4096 - 1024) * 2


@pytest.mark.parametrize("command", [["train", "llama-3.2-1b"], ["fit", "llama-3.2-1b", "--device", "rtx-4090",
                                                                   "--train"]])
def test_loop_keeps_graph_without_qlora_is_refused(command: list[str]) -> None:
    """Before, `train --method full|lora --loop-keeps-graph` answered exit 0 with the flag in no assumption: its only
    modelled effect (eq. G1, bitsandbytes 0.42's kept matmul inputs) needs a QLoRA base. With qlora it is named."""
    import contextlib
    import io
    import json

    from llmsizer.cli.main import main

    for method in ("full", "lora"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([*command, "--method", method, "--loop-keeps-graph"])
        assert code == 2 and f"method is '{method}'" in err.getvalue() and err.getvalue().count("\n") == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["train", "llama-3.2-1b", "--method", "qlora", "--loop-keeps-graph", "--json"])
    named = {a["name"]: a for a in json.loads(out.getvalue())["assumptions"]}
    assert code == 0 and named["loop_keeps_graph"]["value"] is True and not named["loop_keeps_graph"]["default"]
    # with a quantizer whose matmuls keep no input the flag changes nothing: said, not silent; with 0.42 it counts
    from llmsizer.estimate.training import estimate_training

    fields = dict(method="qlora", loop_keeps_graph=True)
    plain = estimate_training("llama-3.2-1b", **fields)
    assert plain.total("device") == estimate_training("llama-3.2-1b", method="qlora").total("device")
    assert [x for x in plain.warnings if x.startswith("loop_keeps_graph changes nothing")]
    old = estimate_training("llama-3.2-1b", **fields, nf4_quantizer="bitsandbytes-0.42")
    assert not [x for x in old.warnings if x.startswith("loop_keeps_graph")]
    assert old.total("device")[1] > estimate_training("llama-3.2-1b", method="qlora",
                                                      nf4_quantizer="bitsandbytes-0.42").total("device")[1]


@pytest.mark.parametrize("flags, named", [
    (["--rank", "8"], "rank"), (["--alpha", "16"], "alpha"), (["--targets", "q,v"], "targets"),
    (["--adapter-dtype", "bf16"], "adapter_dtype"), (["--modules-to-save", "lm_head"], "modules_to_save"),
])
@pytest.mark.parametrize("command", [["train", "llama-3.2-1b"], ["fit", "llama-3.2-1b", "--device", "rtx-4090",
                                                                   "--train"]])
def test_adapter_settings_with_method_full_are_refused(command: list[str], flags: list[str], named: str) -> None:
    """Before, `train --method full --rank 8` (and --alpha/--targets/--adapter-dtype/--modules-to-save) answered
    exit 0 as if they had not been given (fit dropped --targets silently); base_dtype was already refused."""
    import contextlib
    import io

    from llmsizer.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([*command, "--method", "full", *flags])
    assert code == 2 and f"{named} applies to lora/dora/qlora" in err.getvalue()
    assert err.getvalue().count("\n") == 1

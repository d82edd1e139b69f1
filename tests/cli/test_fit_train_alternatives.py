"""``fit --train`` when nothing that keeps the caller's settings fits (probe5 defect 3): the alternatives that
change what the caller gave (``FitResult.fits_if_changed``, a key of its own: ``fits_at`` keeps the caller's
settings), each marked so, in text and JSON. The probe's question: LoRA of Llama-3.1-70B on 2 x A100 80GB, whose
bf16 base alone is 2 x 65.7 GiB (131.4 GiB of weights for 141 GiB of budget, before activations and adapters), here
with ``--offload none`` stated (without it, ZeRO-3 parameter offload keeps every setting given and fits: probe6
defect 5, tests/cli/test_fit_train_offload_ladder.py)."""

from __future__ import annotations

from cli_capture import run, run_json
from llmsizer.estimate.fit import TRAINING_LADDER, fit_training

ARGS = ("fit", "llama-3.1-70b", "--train", "--method", "lora", "--device", "a100-sxm-80gb", "--count", "2", "--offload", "none")


def test_json_names_the_alternatives_apart_from_fits_at() -> None:
    code, d = run_json(*ARGS)
    assert code == 1 and d["fits"] is False
    assert d["fits_at"] is None  # nothing that keeps --method lora fits: fits_at keeps its meaning
    first, more = d["fits_if_changed"]
    # the least change of the ladder: the same LoRA with its parameters in host RAM (ZeRO-3 offload_param)
    assert first["changes"] == {"grad_checkpointing": "full", "offload": "params"}
    assert first["changes_given"] == ["offload"]
    assert first["memory_per_device"] <= first["budget_per_device"]
    assert set(more["changes"]) == {"count", "grad_checkpointing"} and more["changes_given"] == ["count"]


def test_each_alternative_fits_as_fit_itself_answers_it() -> None:
    _, d = run_json(*ARGS)
    first, more = d["fits_if_changed"]
    # the ladder's step is TRAINING_LADDER's (one home), applied over the caller's own method
    assert first["changes"] in TRAINING_LADDER
    assert fit_training("llama-3.1-70b", "a100-sxm-80gb", 2, **first["changes"]).fits
    n = more["changes"]["count"]
    kept = dict(method="lora", offload="none", grad_checkpointing="full")
    assert fit_training("llama-3.1-70b", "a100-sxm-80gb", n, **kept).fits
    assert not fit_training("llama-3.1-70b", "a100-sxm-80gb", n - 1, **kept).fits  # the smallest count


def test_text_marks_what_changes_the_callers_settings() -> None:
    code, out, _ = run(*ARGS)
    assert code == 1
    assert "hint: nothing that keeps the settings you gave fits these devices" in out
    assert "alternative: with --grad-checkpointing full --offload params: " in out
    assert "(changes what you gave: --offload)" in out


def test_a_fitting_ladder_step_keeps_the_old_hint_and_no_alternatives() -> None:
    # full fine-tuning of an 8B on one H100, nothing stated: a ladder step changes no setting the caller gave, so
    # fits_at names it and no alternative is searched
    code, d = run_json("fit", "llama-3.1-8b", "--train", "--device", "h100-sxm")
    assert code == 1 and d["fits_at"] is not None and d["fits_if_changed"] == []


def test_json_carries_the_lines_the_text_prints() -> None:
    """review8 #7: ``fits_if_changed_text`` (what the web grid shows) is the text answer's own lines, verbatim."""
    _, d = run_json(*ARGS)
    _, out, _ = run(*ARGS)
    printed = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(("hint: nothing", "alternative:"))]
    assert len(printed) == 1 + len(d["fits_if_changed"]) and d["fits_if_changed_text"] == printed


def test_the_python_answer_carries_the_lines_as_the_cli_json_does() -> None:
    """review9 #5: ``fits_if_changed_text`` is built in FitResult.to_dict (one home), so the Python API's answer and
    the CLI's --json are the same for the same question."""
    _, d = run_json(*ARGS)
    r = fit_training("llama-3.1-70b", "a100-sxm-80gb", 2, method="lora", offload="none")
    assert r.to_dict()["fits_if_changed_text"] == d["fits_if_changed_text"] and len(d["fits_if_changed_text"]) > 1


# review14 D5: Qwen3-30B-A3B on 8 H100 at EP 8, Megatron bf16, seq 16384 x 2: selective recompute does not fit
MOE = ("fit", "qwen3-30b-a3b", "--train", "--device", "h100-sxm", "--count", "8", "--ep", "8", "--precision",
       "megatron-bf16", "--grad-checkpointing", "selective", "--seq", "16384", "--batch", "2")


def test_recompute_modules_does_not_remove_the_alternatives() -> None:
    """A ladder step that switches to full checkpointing drops ``--recompute-modules`` (it applies to selective
    recompute only: TrainingWorkload refuses it otherwise) instead of being refused and lost: the alternatives are
    the same as without the flag, and the step, run by fit itself without the flag, fits at the memory it names."""
    code, with_modules = run_json(*MOE, "--recompute-modules", "moe_act")
    _, without = run_json(*MOE)
    assert code == 1 and with_modules["fits_if_changed"]
    first = with_modules["fits_if_changed"][0]
    assert first["changes"].pop("recompute_modules", "kept") is None and "recompute_modules" in first["changes_given"]
    assert first["changes"] == without["fits_if_changed"][0]["changes"]
    kw = dict(ep=8, precision="megatron-bf16", seq_len=16384, micro_batch=2, **first["changes"])
    r = fit_training("qwen3-30b-a3b", "h100-sxm", 8, **kw)
    assert r.fits and first["memory_per_device"] == without["fits_if_changed"][0]["memory_per_device"]
    _, out, _ = run(*MOE, "--recompute-modules", "moe_act")
    assert "without --recompute-modules" in out


def test_megatron_run_gets_no_torchtitan_advice() -> None:
    """A Megatron-Core run is not told to use torchtitan's op-level checkpointing, nor warned with torchtitan's
    published tensor-parallel rows; a PyTorch (torchtitan plan) TP run still is."""
    common = ("--device", "h100-sxm", "--gpus", "8", "--tokens", "1e8", "--grad-checkpointing", "selective")
    _, out, _ = run("train", "qwen3-30b-a3b", *common, "--precision", "megatron-bf16", "--tp", "2",
                    "--sequence-parallel")
    assert "saves nothing here" in out and "duration:" in out
    assert "selective-op" not in out and "PyTorch tensor-parallel training" not in out
    _, out, _ = run("train", "llama-3.1-8b", *common, "--tp", "8")
    assert "selective-op" in out and "PyTorch tensor-parallel training" in out

"""Training framework profiles (catalog/data/frameworks.json, applied by estimate/framework.py; ``--framework``).

Independent truth: the frameworks' own source, its values typed here with their file and line (llm-foundry's
defaults by their llm-foundry names, mapped to llmsizer's setting names by the meaning each flag's help states), and
torch itself for which K/V layouts are copies (torchtune's expand + flatten, torchtitan's repeat_kv, run on the CPU).
The validation rows the profiles replaced (LLMFOUNDRY_DEFAULTS, the torchtune / torchtitan layout helpers) are
compared with the settings stated by hand: the same numbers."""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace
from importlib import resources
from pathlib import Path

import pytest

from llmsizer import validation_cases as V
from llmsizer.catalog.frameworks import MODEL_RULES, framework_profile, framework_profiles
from llmsizer.cli.main import main
from llmsizer.errors import InputError
from llmsizer.estimate.framework import with_framework
from llmsizer.estimate.training import estimate_training
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs import ModelSpec, TrainingWorkload

RAW = json.loads(resources.files("llmsizer.catalog.data").joinpath("frameworks.json").read_text("utf-8"))

# llm-foundry's own defaults, from its source (the names it uses):
# llmfoundry/models/mpt/modeling_mpt.py @b2a43a147 line 724: om_model_config.get('loss_fn', 'fused_crossentropy')
LLMFOUNDRY_LOSS_FN = "fused_crossentropy"
# scripts/train/benchmarking/submit_benchmarks.py @b2a43a147 line 307: model.norm_type 'low_precision_layernorm'
LLMFOUNDRY_NORM_TYPE = "low_precision_layernorm"
# modeling_mpt.py @b2a43a147 lines 698-700: train_metrics = [LanguageCrossEntropy(), LanguagePerplexity()]; Composer
# v0.16.4 trainer.py lines 2472-2475 update each after every micro-batch's backward: one cross-entropy pass each
LLMFOUNDRY_TRAIN_METRICS = ("LanguageCrossEntropy", "LanguagePerplexity")
# submit_benchmarks.py @b2a43a147 line 144: --attn_impl default 'triton' (llmfoundry/models/layers/flash_attn_triton.py)
LLMFOUNDRY_ATTN_IMPL = "triton"
# llm-foundry's names -> llmsizer's (the meaning of each: `train --help` of --loss, --layernorm, --attention-kernel)
LOSS_NAMES = {"fused_crossentropy": "fused-xentropy", "torch_crossentropy": "ce"}
NORM_NAMES = {"low_precision_layernorm": "low-precision", "layernorm": "torch"}
ATTN_NAMES = {"triton": ("flash", "triton-flash"), "flash": ("flash", "flash-attn-2"), "torch": ("eager", "eager")}


def test_every_profile_default_has_a_source_and_a_date() -> None:
    assert RAW["none"] == {"description": RAW["none"]["description"], "workload": {}, "model": {}}
    workload_fields = {f.name for f in fields(TrainingWorkload)}
    model_fields = {f.name for f in fields(ModelSpec)}
    rows = 0
    for name, p in RAW.items():
        if name.startswith("_"):
            continue
        assert p["description"], name
        if name != "none":  # the repository @ commit the sources were read at, named by one of them
            assert re.fullmatch(r"[\w.-]+/[\w.-]+ @[0-9a-f]{7,}", p["pinned"]), name
            assert any(p["pinned"] in d["source"] for part in ("workload", "model") for _, d in _entries(p[part])), name
        for part, known in (("workload", workload_fields), ("model", model_fields)):
            for field, d in _entries(p[part]):
                rows += 1
                assert field in known, f"{name}.{part}.{field}"
                # a condition ('when': catalog/frameworks.py WORKLOAD_RULES) on workload defaults only
                assert set(d) - {"when"} == {"value", "source", "date"}, f"{name}.{part}.{field}"
                assert part == "workload" or "when" not in d, f"{name}.{part}.{field}"
                assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["date"]), f"{name}.{part}.{field}"
                # a repository at a commit (or release) and a file line
                assert re.search(r"@\s?[0-9a-fv][0-9a-f.]{5,}", d["source"]) and "line" in d["source"], field
                if part == "model":
                    assert d["value"] in MODEL_RULES, f"{name}.model.{field}"
        # the profile's unconditional workload defaults together are a valid workload
        TrainingWorkload(**{f: d["value"] for f, d in _entries(p["workload"]) if "when" not in d})
    assert rows >= 8


def _entries(part: dict[str, object]) -> list[tuple[str, dict[str, object]]]:
    """(field, default) of a profile part: a field may list several defaults (each but the last with a 'when')."""
    return [(f, d) for f, e in part.items() for d in (e if isinstance(e, list) else [e])]  # type: ignore[union-attr]


def test_llm_foundry_profile_is_llm_foundrys_source() -> None:
    p = framework_profile("llm-foundry")
    got = {d.field: d.value for d in p.workload}
    assert got == {"loss": LOSS_NAMES[LLMFOUNDRY_LOSS_FN], "layernorm": NORM_NAMES[LLMFOUNDRY_NORM_TYPE],
                   "train_metric_passes": len(LLMFOUNDRY_TRAIN_METRICS),
                   "attention": ATTN_NAMES[LLMFOUNDRY_ATTN_IMPL][0],
                   "attention_kernel": ATTN_NAMES[LLMFOUNDRY_ATTN_IMPL][1]}
    assert "modeling_mpt.py lines 724-730" in p.default("loss").source  # type: ignore[union-attr]
    assert "line 307" in p.default("layernorm").source  # type: ignore[union-attr]


def _mpt() -> ModelSpec:
    return spec_from_config(V.mpt_config("760m", 2048), name="MPT-760m")


def test_a_profile_applies_its_defaults_named_in_the_assumptions() -> None:
    est = estimate_training(_mpt(), framework="llm-foundry", micro_batch=2, seq_len=2048)
    a = {x.name: x for x in est.assumptions}
    assert (a["loss"].value, a["layernorm"].value, a["train_metric_passes"].value) == (
        LOSS_NAMES[LLMFOUNDRY_LOSS_FN], NORM_NAMES[LLMFOUNDRY_NORM_TYPE], len(LLMFOUNDRY_TRAIN_METRICS))
    assert (a["attention"].value, a["attention_kernel"].value) == ATTN_NAMES[LLMFOUNDRY_ATTN_IMPL]
    for name in ("loss", "layernorm", "train_metric_passes", "attention", "attention_kernel"):
        assert a[name].default and a[name].why.startswith("from framework profile llm-foundry ("), name
        assert a[name].mark == " (from framework profile llm-foundry)"
    assert (a["framework"].value, a["framework"].default) == ("llm-foundry", False)
    # the same numbers as the settings stated by hand
    by_hand = estimate_training(_mpt(), micro_batch=2, seq_len=2048, loss="fused-xentropy", layernorm="low-precision",
                                train_metric_passes=2, attention="flash", attention_kernel="triton-flash")
    assert est.items == by_hand.items
    assert est.item("weights").bytes > 0 and est.total("device") != estimate_training(
        _mpt(), micro_batch=2, seq_len=2048).total("device")  # and the profile moves the answer


def test_an_explicit_setting_wins_over_the_profile() -> None:
    est = estimate_training(_mpt(), framework="llm-foundry", micro_batch=2, loss="ce", attention="sdpa")
    a = {x.name: x for x in est.assumptions}
    assert (a["loss"].value, a["loss"].default, a["loss"].why) == ("ce", False, "given")
    assert (a["attention"].value, a["attention_kernel"].value) == ("sdpa", "sdpa")
    assert not a["attention_kernel"].why.startswith("from framework")  # sdpa's own default kernel, not the profile's
    assert a["layernorm"].value == "low-precision"  # the rest still the profile's
    by_hand = estimate_training(_mpt(), micro_batch=2, loss="ce", attention="sdpa", layernorm="low-precision",
                                train_metric_passes=2)
    assert est.items == by_hand.items
    # a given value equal to the plain default is still given: the profile does not replace it
    _, w = with_framework(_mpt(), TrainingWorkload(framework="llm-foundry", layernorm="torch"))
    assert w.layernorm == "torch" and w.loss == "fused-xentropy"


def test_the_reverse_questions_run_the_profile() -> None:
    """``max_micro_batch`` / ``max_seq_len`` (``train --max-batch``) grow the workload the estimate answers for."""
    from llmsizer.estimate.training import max_micro_batch, max_seq_len

    spec = load_model("llama-3.1-8b")
    kv = replace(spec, kv_expanded_in_attention=True)
    # torchtune's recipes train in pure bf16 (its profile's precision: test_framework_conditional_defaults.py) with
    # LinearCrossEntropyLoss over 8 chunks (its profile's loss)
    run = dict(method="lora", seq_len=4096, precision="bf16")
    loss = dict(loss="linear-ce", loss_chunks=8)
    assert max_micro_batch(spec, 80 * 2**30, framework="torchtune", **run) == max_micro_batch(kv, 80 * 2**30, **run,
                                                                                             **loss)
    assert max_seq_len(spec, 80 * 2**30, framework="torchtune", method="lora") == max_seq_len(
        kv, 80 * 2**30, method="lora", precision="bf16", **loss)
    assert max_seq_len(spec, 80 * 2**30, framework="torchtune", method="lora", precision="bf16") < max_seq_len(
        spec, 80 * 2**30, method="lora", precision="bf16", **loss)  # the expanded K/V cost memory


def test_a_profile_default_the_given_settings_refuse_is_one_line() -> None:
    with pytest.raises(InputError, match=r"framework 'llm-foundry': its defaults .*loss='fused-xentropy'.*\(state "
                                         r"the field to override"):
        estimate_training(_mpt(), framework="llm-foundry", compile=True)
    with pytest.raises(InputError, match=r"unknown framework 'torchtun'; did you mean 'torchtune'"):
        estimate_training(_mpt(), framework="torchtun")


def _copies(layout: str, n_kv: int, n_rep: int) -> bool:
    """Whether the framework's K/V layout code makes a new tensor (torch on the CPU)."""
    torch = pytest.importorskip("torch")
    b, s, hd = 2, 4, 8
    if layout == "torchtune":  # torchtune @bd2a0fc attention.py lines 287-290
        k = torch.randn(b, n_kv, s, hd)
        e = k.unsqueeze(2).expand(b, n_kv, n_rep, s, hd).flatten(1, 2)
    else:  # torchtitan @9dec370 model.py lines 116-125 repeat_kv (n_rep 1: x itself)
        k = torch.randn(b, s, n_kv, hd)
        e = k if n_rep == 1 else torch.unsqueeze(k, dim=3).expand(b, s, n_kv, n_rep, hd).reshape(b, s, n_kv * n_rep, hd)
    return bool(e.untyped_storage().data_ptr() != k.untyped_storage().data_ptr())


@pytest.mark.parametrize(("model", "n_kv", "heads"), [("llama-3.1-8b", 8, 32), ("llama-2-7b-hf", 32, 32)])
def test_torchtune_and_torchtitan_profiles_lay_out_k_and_v_as_their_code(model: str, n_kv: int, heads: int) -> None:
    spec = load_model(model)
    assert (spec.num_kv_heads, spec.num_heads) == (n_kv, heads)
    for layout in ("torchtune", "torchtitan"):
        got, w = with_framework(spec, TrainingWorkload(framework=layout))
        assert got.kv_expanded_in_attention == _copies(layout, n_kv, heads // n_kv), (layout, model)
        assert w.attention == "sdpa"
        assert (got is spec) == (not got.kv_expanded_in_attention)  # unchanged: the same object
        # idempotent; the same raw workload gives the same model object (the memos match it by identity)
        assert with_framework(got, w) == (got, w)
        assert with_framework(spec, TrainingWorkload(framework=layout))[0] is got
    # MQA: torchtune's merge is a view (no copy), so its profile leaves the layout alone
    mqa = replace(spec, num_kv_heads=1)
    assert not _copies("torchtune", 1, heads) and not with_framework(
        mqa, TrainingWorkload(framework="torchtune"))[0].kv_expanded_in_attention


def test_validation_rows_run_the_profiles_with_unchanged_numbers() -> None:
    """The rows that set these by hand before (LLMFOUNDRY_DEFAULTS; torchtune_attention_layout /
    torchtitan_attention_layout on the spec) predict what the settings stated by hand give."""
    # torchtune and torchtitan memory rows: the profile's layout == the layout each framework's code makes
    for rid, layout in (("PM0741", "torchtune"), ("PM0750", "torchtune"), ("PM1060", "torchtitan")):
        model, f, _, _, what = V.TRAINING_ROWS[rid]
        assert "framework" not in f
        spec = load_model(model)
        assert 1 < spec.num_kv_heads < spec.num_heads  # GQA: both frameworks copy (test above)
        assert with_framework(spec, TrainingWorkload(framework=layout))[0].kv_expanded_in_attention, rid
        if what == "reserved":  # max_memory_reserved: the tensors + the allocator's reserve
            est = estimate_training(replace(spec, kv_expanded_in_attention=True), **f, metric="reserved")
            by_hand = int(est.details["tensor_peak_bytes"] + est.item("allocator_reserve").bytes)
        else:
            by_hand = int(estimate_training(replace(spec, kv_expanded_in_attention=True), **f)
                          .details["tensor_peak_bytes"])
        assert V.training_prediction(rid) == by_hand, rid
    # an llm-foundry speed row: the duration of the profile == the settings by hand
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.duration import training_duration_for

    r = V.public_rows()["PM0890"]
    m = V.mpt_row(r["quote"])
    spec = spec_from_config(V.mpt_config(m.model, m.seq_len), name=f"MPT-{m.model}")
    dev = builtin_catalog().devices[V.MPT_DEVICE[m.gpu]]
    f = V.mpt_fields(m, V.mpt_attn_impl(m, r["source_location"]))
    hand = {k: v for k, v in f.items() if k != "framework"} | dict(
        loss="fused-xentropy", layernorm="low-precision", train_metric_passes=2, attention="flash",
        attention_kernel="triton-flash")
    got = training_duration_for(spec, dev, m.gpus, 1e6, f).tokens_per_second
    assert got == training_duration_for(spec, dev, m.gpus, 1e6, hand).tokens_per_second
    assert got != training_duration_for(spec, dev, m.gpus, 1e6, dict(hand, train_metric_passes=0)).tokens_per_second


def test_cli_and_request_reach_the_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "llama-3.1-8b", "--framework", "torchtune", "--batch", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    a = {x["name"]: x for x in out["assumptions"]}
    assert a["model.kv_expanded_in_attention"]["value"] is True
    assert a["model.kv_expanded_in_attention"]["why"].startswith("from framework profile torchtune (pytorch/torchtune")
    est = estimate_training(replace(load_model("llama-3.1-8b"), kv_expanded_in_attention=True), micro_batch=2,
                            precision="bf16", loss="linear-ce", loss_chunks=8)  # its profile's dtype and loss
    assert int(out["totals"]["device"]["bytes"]) == est.total("device")[1]
    for bad in (["--framework", "torchtun"], ["--train-metric-passes", "-1"]):  # bad input: exit 2, one line
        with pytest.raises(SystemExit) as e:
            main(["train", "llama-3.1-8b", *bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and bad[0] in err
    assert main(["train", "llama-3.1-8b", "--framework", "torchtune", "--train-metric-passes", "3"]) == 0
    capsys.readouterr()
    # the request file: settings.framework, checked against the same names
    from llmsizer.request import load_request

    base = Path(__file__).resolve().parents[2] / "examples" / "pretraining-multinode.yaml"
    text = base.read_text("utf-8").replace("      attention: flash\n", "      attention: flash\n      framework: nope\n")
    bad = tmp_path / "r.yaml"
    bad.write_text(text)
    with pytest.raises(InputError, match=r"settings\.framework: unknown value 'nope'"):
        load_request(bad)
    assert set(framework_profiles()) == {"none", "llm-foundry", "torchtune", "torchtitan"}


def test_the_profiles_layernorm_on_an_rmsnorm_model_warns_only_when_given() -> None:
    """llm-foundry's low-precision LayerNorm (submit_benchmarks.py line 307) is a profile default: on a model whose
    config names RMSNorm (Llama 3.2: LlamaRMSNorm) it changes nothing and the user never wrote it, so no warning; a
    layernorm the user states on that model still says it changes nothing."""
    spec = load_model("llama-3.2-1b")
    assert spec.norm_kind == "rmsnorm"
    quiet = estimate_training(spec, TrainingWorkload(framework="llm-foundry"))
    assert not any("layernorm" in w for w in quiet.warnings), quiet.warnings
    told = estimate_training(spec, TrainingWorkload(framework="llm-foundry", layernorm="low-precision"))
    assert any(w.startswith("layernorm 'low-precision' changes nothing") for w in told.warnings), told.warnings


@pytest.mark.parametrize("rid", [f"PM04{k:02d}" for k in range(10)])
def test_torchtitan_trains_on_fixed_shapes_where_the_reserve_is_read(rid: str) -> None:
    """torchtitan's dataloader packs every sample's tokens into one buffer and cuts it into rows of exactly seq_len + 1
    tokens (torchtitan @9dec370 torchtitan/datasets/hf_datasets.py lines 111-127), so every step has the same shapes:
    under --metric reserved / nvidia-smi the profile sets batch_shapes 'fixed' (what torchtitan's published
    max-reserved rows state by hand), and the prediction lies nearer the measured figure than with shapes that vary;
    under allocated (which refuses 'fixed') the profile sets nothing; a given 'variable' wins."""
    from llmsizer.units import GiB
    model, f, *_ = V.TRAINING_ROWS[rid]
    assert f["batch_shapes"] == "fixed"
    row = V.public_rows()[rid]
    measured = float(row["value"]) * V.TRAINING_UNIT[row["unit"]]
    bare = {k: v for k, v in f.items() if k != "batch_shapes"}
    by_hand = estimate_training(model, **f, metric="reserved")
    profiled = estimate_training(model, **bare, framework="torchtitan", metric="reserved")
    assert profiled.total("device") == by_hand.total("device")
    assert "from framework profile torchtitan" in next(a.why for a in profiled.assumptions
                                                       if a.name == "batch_shapes")
    varying = estimate_training(model, **bare, framework="torchtitan", metric="reserved", batch_shapes="variable")
    assert abs(profiled.total("device")[1] - measured) < abs(varying.total("device")[1] - measured), \
        (rid, profiled.total("device")[1] / GiB, varying.total("device")[1] / GiB, measured / GiB)
    smi = estimate_training(model, **bare, framework="torchtitan", metric="nvidia-smi")
    assert smi.total("device")[1] > profiled.total("device")[1]  # fixed too, plus the CUDA context
    assert "eq. R1" in smi.item("allocator_reserve").formula
    allocated = estimate_training(model, **bare, framework="torchtitan", metric="allocated")  # not refused
    shapes = [a.value for a in allocated.assumptions if a.name == "batch_shapes"]
    assert "fixed" not in shapes, shapes  # the profile sets fixed shapes only where the reserve is read

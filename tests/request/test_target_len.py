"""An encoder-decoder's target length (``TrainingWorkload.target_len``, `train --target-len`, the web's
``target_len``) is a request file's ``settings.target_len`` too (session 12): read by the same reader and schema,
and the plan sizes the job as `train` does with the same settings. Before, the key was refused ("unknown key
'target_len' in settings") and a T5 training job could not be planned at all (the plan's inference comparison asked
for a serving estimate, which encoder-decoders do not have). Truth: `estimate_training` with the same fields (the
estimator the plan and `train` render), and the settings' own ranges."""

from __future__ import annotations

import json

import pytest

from cli_capture import run
from llmsizer import estimate_training

REQUEST = """version: 1
jobs:
  - name: t0-lora
    kind: training
    model: {{name: {model}}}
    method: lora
    peft: {{rank: 8, targets: [q, v]}}
    settings:
      precision: fp32
      attention: eager
      lora_dropout: per-module
      micro_batch: 8
      seq_len: 128{target}
    dataset: {{tokens: 1M}}
    resources: {{device: a100-80gb, count: 1}}
"""
SETTINGS = dict(method="lora", rank=8, targets=("q", "v"), precision="fp32", attention="eager",
                lora_dropout="per-module", micro_batch=8, seq_len=128, device="a100-80gb")


def _write(tmp_path, model: str, target: str) -> str:
    p = tmp_path / "req.yaml"
    p.write_text(REQUEST.format(model=model, target=f"\n      target_len: {target}" if target else ""))
    return str(p)


def _need(plan: dict) -> int:
    job = plan["jobs"][0]
    return next(f["value"] for f in next(s for s in job["sections"] if s["key"] == "memory")["figures"]
                if f["key"] == "need")


def test_a_request_states_the_target_length_and_the_plan_sizes_it_as_train_does(tmp_path) -> None:
    code, out, err = run("plan", _write(tmp_path, "t0_3b", "3"), "--json")
    assert code in (0, 1) and err == "", err  # 1: the plan's own checks (no hand-over stated)
    with_target = estimate_training("t0_3b", target_len=3, **SETTINGS).total("device")[1]
    without = estimate_training("t0_3b", **SETTINGS).total("device")[1]
    assert with_target != without  # the field changes the answer, so reading it is checked
    assert _need(json.loads(out)) == with_target
    code, out, _ = run("plan", _write(tmp_path, "t0_3b", ""), "--json")
    assert code in (0, 1) and _need(json.loads(out)) == without
    code, text, _ = run("plan", _write(tmp_path, "t0_3b", "3"))
    assert code in (0, 1) and "the inference estimate" not in text  # no serving estimate to compare with: not "- (-)"


@pytest.mark.parametrize(("model", "target", "says"), [
    ("t0_3b", "0", ":14: job 't0-lora' (training): settings.target_len: 0 is out of range"),
    ("t0_3b", "abc", ":14: job 't0-lora' (training): settings.target_len: "),
    # the field's line (14) and key path, as the reader's own field errors; it said the job's line (3) before; the
    # key path once, where the message opens with the key ('settings.target_len: target_len applies' before)
    ("qwen2.5-0.5b", "3", ":14: job 't0-lora' (training): settings.target_len applies to "
                          "encoder-decoder models; 'Qwen/Qwen2.5-0.5B' is decoder-only (drop it)"),
])
def test_a_bad_target_length_is_one_line_naming_the_file_and_job(tmp_path, model: str, target: str, says: str) -> None:
    path = _write(tmp_path, model, target)
    code, out, err = run("plan", path)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"llmsizer: error: {path}{says}"), err


def test_the_schema_documents_it() -> None:
    code, out, _ = run("request", "schema")
    assert code == 0
    schema = json.loads(out)
    text = json.dumps(schema)
    assert '"target_len"' in text and "train --target-len" in text


def test_a_hardware_search_for_an_encoder_decoder_says_why_not_that_training_is_unmodelled() -> None:
    """`recommend --train` refuses a T5 (it would try settings outside the measured ones) but no longer says its
    training memory "is not modelled", which `train` contradicts."""
    code, _, err = run("recommend", "t0_3b", "--train", "--tokens", "1M")
    assert code == 2 and err.count("\n") == 1
    assert "no hardware search is made for it; size a run with `llmsizer train`" in err and "not modelled" not in err

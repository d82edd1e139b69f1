"""Eq. (L1) of formulas/checkpoint_loading.py against a real load: the second copy of a tied embedding.

A tiny tied-embedding Qwen2 is written the way AutoAWQ <= 0.2.6 ``save_quantized`` writes a checkpoint (every
``state_dict`` name, each cloned, then safetensors ``save_file``: awq/models/base.py L302-312 @ v0.2.6), and once the
way ``save_pretrained`` does (the tied ``lm_head.weight`` left out). The installed transformers loads each on the CPU
while every Parameter it creates is watched; the peak of the live parameter storage minus what the loaded model holds
is the transient. The truth is the loader's own behaviour on real tensors, not our arithmetic: the expected value is
the estimate's item for a spec read from the same config.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.checkpoint_loading import stored_tied_copy_bytes
from llmsizer.readers.hf_config import spec_from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

CONFIG: dict[str, Any] = {
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 4096, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 1024, "tie_word_embeddings": True, "torch_dtype": "float16",
}


def _write(folder: Path, keep_tied_copy: bool) -> None:
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**CONFIG)).half()
    model.config.save_pretrained(folder)
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items()
             if keep_tied_copy or k != "lm_head.weight"}
    safetensors_torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _load_transient(folder: Path) -> tuple[int, bool]:
    """(peak live parameter bytes during from_pretrained - the loaded model's, whether the head is tied after)."""
    live: dict[int, int] = {}
    peak = [0]
    original = torch.nn.Parameter.__new__

    def watched(cls: Any, data: Any = None, requires_grad: bool = True) -> Any:
        p = original(cls, data, requires_grad)
        storage = p.untyped_storage()
        if p.device.type != "meta" and storage.nbytes():
            live[storage.data_ptr()] = storage.nbytes()
            weakref.finalize(p, live.pop, storage.data_ptr(), None)
            peak[0] = max(peak[0], sum(live.values()))
        return p

    torch.nn.Parameter.__new__ = watched
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float16, device_map="cpu")
    finally:
        torch.nn.Parameter.__new__ = original
    held = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    return peak[0] - sum(held.values()), model.lm_head.weight is model.model.embed_tokens.weight


def test_a_stored_tied_copy_is_held_until_the_re_tie(tmp_path: Path) -> None:
    _write(tmp_path, keep_tied_copy=True)
    transient, tied = _load_transient(tmp_path)
    assert tied  # the copy is gone once loaded: only the load peak sees it
    est = estimate_inference(spec_from_config(CONFIG, name="tiny-tied-qwen2"), context=64, output_tokens=1,
                             weights="awq-int4", dtype="fp16", engine="transformers", device="cpu")
    item = next(i for i in est.items if i.name == "tied_copy_on_load")
    assert transient == item.bytes == CONFIG["vocab_size"] * CONFIG["hidden_size"] * 2


def test_no_transient_without_the_stored_copy(tmp_path: Path) -> None:
    _write(tmp_path, keep_tied_copy=False)
    transient, tied = _load_transient(tmp_path)
    assert tied and transient == 0 == stored_tied_copy_bytes(CONFIG["vocab_size"] * CONFIG["hidden_size"] * 2, 0)


def test_counts_and_bytes_must_be_non_negative() -> None:
    with pytest.raises(InputError, match=r"^tied_matrix_bytes and extra_names_in_file must not be negative, got -1"):
        stored_tied_copy_bytes(-1, 1)


@pytest.mark.parametrize("weights,tied", [("gptq-int4", True), ("awq-int4", False)])
def test_only_an_awq_checkpoint_of_a_tied_model_is_assumed_to_store_it(weights: str, tied: bool) -> None:
    est = estimate_inference(spec_from_config({**CONFIG, "tie_word_embeddings": tied}, name="tiny-qwen2"), context=64,
                             output_tokens=1, weights=weights, dtype="fp16", engine="transformers", device="cpu")
    assert "tied_copy_on_load" not in {i.name for i in est.items}
    assert "awq_tied_lm_head_copy" not in {a.name for a in est.assumptions}


def _held_bytes(folder: Path) -> int:
    """Parameter bytes transformers holds once from_pretrained returns (the tied matrix once)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float16, device_map="cpu")
    return sum({p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}.values())


@pytest.mark.parametrize("keep", [True, False])
def test_a_model_folder_s_header_decides_the_load_copy_and_the_resident_weights(tmp_path: Path, keep: bool) -> None:
    # review15 D3: the folder read as weights 'file' counted a stored lm_head as resident for the whole run, and the
    # load-time copy was keyed on the format name. Truth: the real load's transient and held bytes of the same files.
    from llmsizer import load_model

    _write(tmp_path, keep_tied_copy=keep)
    transient, tied = _load_transient(tmp_path)
    held = _held_bytes(tmp_path)
    spec = load_model(str(tmp_path))
    assert tied and spec.file_weights is not None and (spec.file_weights.output_bytes > 0) == keep
    for weights in (None, "fp16"):  # the file's own bytes, and a format named over the files
        est = estimate_inference(spec, context=64, output_tokens=1, weights=weights, dtype="fp16",
                                 engine="transformers", device="cpu")
        copy = next((i.bytes for i in est.items if i.name == "tied_copy_on_load"), 0)
        assert copy == transient
        if weights is None:
            assert est.item("weights").bytes == held
    # vLLM never loads lm_head of a tied model (qwen2.py load_weights skip_prefixes): weights = the held bytes
    vllm = estimate_inference(spec, context=64, output_tokens=1, engine="vllm", device="gpu")
    assert vllm.item("weights").bytes == held


def test_an_awq_folder_without_a_stored_head_has_no_load_copy(tmp_path: Path) -> None:
    # the AWQ default (c = 1) is for a catalog model only: a folder's header that holds no lm_head says c = 0
    from llmsizer import load_model

    _write(tmp_path, keep_tied_copy=False)
    est = estimate_inference(load_model(str(tmp_path)), context=64, output_tokens=1, weights="awq-int4",
                             dtype="fp16", engine="transformers", device="cpu")
    assert "tied_copy_on_load" not in {i.name for i in est.items}
    assert not {"awq_tied_lm_head_copy", "tied_lm_head_in_file"} & {a.name for a in est.assumptions}

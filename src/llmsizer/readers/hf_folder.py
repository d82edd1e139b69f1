"""A Hugging Face model folder -> ModelSpec with the exact bytes its safetensors files store.

The architecture comes from ``config.json`` (:mod:`llmsizer.readers.hf_config`); the weights from the
safetensors headers (:mod:`llmsizer.readers.safetensors_header`), never from tensor data. Tensor names
follow transformers' module paths: decoder layer *N* is ``model.layers.N.`` (``layers.N.`` under other
prefixes such as ``model.language_model.``; ``transformer.h.N.`` for GPT-BigCode), the input embedding
``embed_tokens`` (``wte``/``wpe``), the output projection ``lm_head``. Vision/audio towers are counted in
the total but in no decoder layer. No model code runs and no weights are loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import ModelFileError
from ..formulas.params import count_params
from ..specs import ModelSpec
from .hf_config import load_config_file, spec_from_config
from .safetensors_header import Role, TensorInfo, inside_folder, read_folder, summarize

_LAYER = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)\.")
_NOT_TEXT = re.compile(r"vision|visual|multi_modal_projector|mm_projector|audio")
_EMBED = re.compile(r"(?:^|\.)(?:embed_tokens|wte|wpe|embeddings)\.")  # embeddings: Mamba-2, Nemotron-H
_OUTPUT = re.compile(r"(?:^|\.)lm_head\.")


def layer_of(name: str) -> int | None:
    """Decoder layer index of a transformers tensor name (None outside the text decoder stack)."""
    if _NOT_TEXT.search(name):
        return None
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def role_of(name: str) -> Role:
    """'embedding' for the token/position embeddings, 'output' for lm_head, else 'other'."""
    if _NOT_TEXT.search(name):
        return "other"
    if _EMBED.search(name):
        return "embedding"
    if _OUTPUT.search(name):
        return "output"
    return "other"


def _packing_causes(tensors: Sequence[TensorInfo]) -> list[str]:
    """Why stored elements differ from parameters, recognised from quantizers' tensor names."""
    names = [t.name for t in tensors]
    causes = []
    if any(n.endswith(".qweight") for n in names):
        causes.append("GPTQ/AWQ 'qweight'/'qzeros' pack 32/bits quantized values into each int32 element")
    if any(".quant_state." in n or n.endswith((".absmax", ".quant_map")) for n in names):
        causes.append("bitsandbytes 4-bit packs two values into each uint8 element")
    if any(t.name.endswith("_blocks") and t.dtype == "U8" for t in tensors):
        causes.append("MXFP4 '*_blocks' pack two FP4 values into each uint8 element ('*_scales': one E8M0 per 32)")
    if any(n.endswith("e_score_correction_bias") for n in names):
        causes.append("'e_score_correction_bias' (DeepSeek-V3 routing bias) is a stored buffer, not a parameter")
    scale_suffixes = (".scales", ".SCB", "weight_scale", "weight_scale_inv", "input_scale", ".g_idx", "_scales")
    if any(n.endswith(scale_suffixes) for n in names):
        causes.append("quantization scales/zero-points/indices are stored as extra elements")
    return causes


def _notes(spec: ModelSpec, tensors: Sequence[TensorInfo]) -> list[str]:
    notes = []
    stored = sum(t.numel for t in tensors)
    arch = count_params(spec).total
    if stored != arch:
        causes = _packing_causes(tensors) or ["the files hold tensors the architecture does not count, or lack some"]
        notes.append(f"stored elements ({stored:,}) differ from the architecture's {arch:,} parameters: "
                     + "; ".join(causes))
    has_head = any(role_of(t.name) == "output" for t in tensors)
    if has_head == spec.tie_word_embeddings:
        notes.append(f"config.json says tie_word_embeddings={spec.tie_word_embeddings} but the files "
                     f"{'hold' if has_head else 'hold no'} lm_head tensor")
    return notes


def attach_file_weights(spec: ModelSpec, tensors: Sequence[TensorInfo], label: str) -> ModelSpec:
    """``spec`` with :class:`~llmsizer.specs.FileWeights` summarising ``tensors`` (read from ``label``)."""
    fw = summarize(label, tensors, spec.num_layers, layer_of, role_of, _notes(spec, tensors))
    return replace(spec, file_weights=fw)


def _no_weights_note(folder: Path, files: list[Path]) -> str:
    if files:
        return f"the safetensors files in {folder} hold no tensors: weights estimated from config.json"
    pickles = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt"))
    if pickles:
        return (f"no *.safetensors files in {folder} (only {pickles[0]}, a pickle llmsizer does not open): "
                "weights estimated from config.json")
    return f"no *.safetensors files in {folder}: weights estimated from config.json"


def spec_from_folder(path: str | os.PathLike[str]) -> ModelSpec:
    """ModelSpec of a local model folder: config.json + exact stored bytes from the safetensors headers.

    A folder without safetensors files gives the config-only spec and says so in ``spec.notes``.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise ModelFileError(f"{folder}: not a folder")
    if not (folder / "config.json").exists():
        raise ModelFileError(f"{folder}: no config.json in the model folder")
    cfg = inside_folder(folder, "config.json", str(folder))  # a link out of the folder is refused
    name = folder.name or folder.resolve().name
    config = load_config_file(cfg)
    if "vision_config" in config:
        # a multimodal model's image/video processor files: their pixel bounds decide the tokens per image
        # (formulas/vision_tokens.py); read with the same limits as config.json
        for key in ("preprocessor_config", "video_preprocessor_config"):
            if (folder / f"{key}.json").exists():
                config = {**config, key: load_config_file(inside_folder(folder, f"{key}.json", str(folder)))}
    spec = spec_from_config(config, name=name, source=str(folder))
    tensors, files = read_folder(folder)
    if not tensors:
        return replace(spec, notes=spec.notes + (_no_weights_note(folder, files),))
    return attach_file_weights(spec, tensors, str(folder))

"""The model a measurement runs: its config (parent side, no torch) and the torch module (worker side).

Weights are initialised randomly from the config (``AutoModelForCausalLM.from_config`` on the target device):
memory and speed do not depend on the values. A model folder that holds weight files is loaded as a checkpoint
instead (``from_pretrained(..., local_files_only=True)``) unless random weights are asked for. Nothing is
downloaded. A ``quantization_config`` in the config is dropped (random weights are made in the compute dtype);
the worker records that as a warning.

bitsandbytes 4-bit weights (inference ``weights='nf4'``, QLoRA) are made the way transformers'
``replace_with_bnb_linear`` + ``Params4bit`` quantization does it: every ``nn.Linear`` but ``lm_head`` becomes a
``bnb.nn.Linear4bit`` whose weight is quantized on the device (NF4, double quantization for ``nf4-dq`` and for
QLoRA as in Dettmers et al. 2023, sec. 3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelFileError
from ..specs import ModelSpec

WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


@dataclass(frozen=True)
class ModelRef:
    """What the user named, resolved: its config.json dict and, for a folder with weights, the checkpoint."""

    name: str
    source: str
    config: dict[str, Any]
    checkpoint: str | None = None

    def spec(self) -> ModelSpec:
        from ..readers.hf_config import spec_from_config

        return spec_from_config(self.config, name=self.name, source=self.source)


def resolve_model_ref(ref: str, *, random_weights: bool = False) -> ModelRef:
    """Catalog name/id, config.json, or a model folder (its weights used unless ``random_weights``)."""
    p = Path(ref).expanduser()
    if p.exists():
        if p.suffix.lower() == ".gguf":
            raise InputError("measure runs transformers models; a GGUF file cannot be measured (give its "
                             "config.json or a catalog name)")
        cfg_path = p / "config.json" if p.is_dir() else p
        try:
            config = json.loads(cfg_path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ModelFileError(f"cannot read {cfg_path}: {e}") from None
        checkpoint = None
        if p.is_dir() and not random_weights and any(any(p.glob(g)) for g in WEIGHT_FILES):
            checkpoint = str(p.resolve())
        name = (p.name if p.is_dir() else p.parent.name) or str(p)
        return ModelRef(name=name, source=str(p.resolve()), config=config, checkpoint=checkpoint)
    from ..catalog import models as catalog

    entry = catalog.find(ref)
    return ModelRef(name=entry.id, source=f"catalog: {entry.name}", config=dict(entry.config))


# -- worker side (torch imported inside) -----------------------------------------------------------------------

def torch_dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def build_model(ref: dict[str, Any], *, device: str, dtype: str, attention: str, seed: int,
                warnings: list[str]) -> Any:
    """The ``AutoModelForCausalLM`` for ``ref`` (a ``ModelRef`` as a dict) on ``device`` in ``dtype``."""
    import torch
    import transformers

    from .settings import HF_ATTENTION

    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    attn = HF_ATTENTION[attention]
    td = torch_dtype(dtype)
    if ref.get("checkpoint"):
        model = _call_with_dtype(transformers.AutoModelForCausalLM.from_pretrained, ref["checkpoint"], td,
                                 attn_implementation=attn, local_files_only=True, device_map=device)
        return model.eval()
    cfg = dict(ref["config"])
    if cfg.pop("quantization_config", None) is not None:
        warnings.append(f"the config's quantization_config was dropped: random weights are made in {dtype}")
    model_type = cfg.pop("model_type", None)
    if not model_type:
        raise ModelFileError("config has no model_type; transformers cannot build it")
    conf = transformers.AutoConfig.for_model(model_type, **cfg)
    with torch.device(device):
        model = _call_with_dtype(transformers.AutoModelForCausalLM.from_config, conf, td, attn_implementation=attn)
    return model.eval()


def _call_with_dtype(fn: Any, first: Any, td: Any, **kw: Any) -> Any:
    """transformers >= 4.56 takes ``dtype=``; older releases ``torch_dtype=``."""
    try:
        return fn(first, dtype=td, **kw)
    except TypeError as e:
        if "dtype" not in str(e):
            raise
        return fn(first, torch_dtype=td, **kw)


def quantize_4bit(model: Any, *, device: str, compute_dtype: str, double_quant: bool) -> int:
    """Replace every ``nn.Linear`` except ``lm_head`` by a bitsandbytes NF4 ``Linear4bit``; returns the count.

    The model is then marked ``is_loaded_in_4bit`` as transformers' bitsandbytes loader marks it after loading
    (transformers 5.24.0 quantizers/quantizer_bnb_4bit.py:138), the flag PEFT reads to wrap each ``Linear4bit`` in its
    bitsandbytes LoRA layer (peft @5d602fdb tuners/lora/model.py:255 ``loaded_in_4bit``, tuners/lora/bnb.py:579-589
    ``dispatch_bnb_4bit``) as it does for a ``from_pretrained(quantization_config=BitsAndBytesConfig(...))`` model;
    unmarked, PEFT wraps them in its plain ``lora.Linear``, a path no real QLoRA run takes."""
    import bitsandbytes as bnb
    import torch

    cd = torch_dtype(compute_dtype)
    todo = []
    for parent_name, parent in model.named_modules():
        for name, child in parent.named_children():
            full = f"{parent_name}.{name}" if parent_name else name
            if isinstance(child, torch.nn.Linear) and not full.endswith("lm_head"):
                todo.append((parent, name, child))
    for parent, name, child in todo:
        q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                              compute_dtype=cd, compress_statistics=double_quant, quant_type="nf4", device="meta")
        q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False, quant_type="nf4",
                                     compress_statistics=double_quant)
        if child.bias is not None:
            q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
        setattr(parent, name, q.to(device))
        del child
    model.is_loaded_in_4bit = True
    return len(todo)


def quant_state_tensors(model: Any) -> list[Any]:
    """Tensors held by bitsandbytes quantization states (absmax, code, nested absmax): part of the weights."""
    import torch

    out = []
    for p in model.parameters():
        qs = getattr(p, "quant_state", None)
        while qs is not None:
            for attr in ("absmax", "code", "offset"):
                t = getattr(qs, attr, None)
                if isinstance(t, torch.Tensor):
                    out.append(t)
            qs = getattr(qs, "state2", None)
    return out

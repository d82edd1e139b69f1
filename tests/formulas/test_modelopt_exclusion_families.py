"""ModelOpt NVFP4 exclusions on the families whose module paths are not ``model.layers.{i}.self_attn|mlp.*``
(formulas/modelopt_exclusions.py): Nemotron-H (``backbone.layers.{i}.mixer.*``) and Mixtral
(``block_sparse_moe.experts``).

Independent truth: transformers 5.24 builds the real model class from the same config on the meta device, and its
module names, turned back into the checkpoint's names by transformers' own loading rename (conversion_mapping.py
``nemotron_h``: ``WeightRenaming("backbone.", "model.")``; the routed experts are one ``experts`` module whose
``up_proj`` / ``down_proj`` hold every expert, checkpoint ``experts.{e}.up_proj``), say which linears an
exclude_modules list names: a module is kept bf16 when its checkpoint name equals an entry or matches it as a shell
wildcard (``fnmatch``), the forms ModelOpt writes. llmsizer's kept tensors must hold exactly the elements of those
modules, layer by layer, and its weight bytes must grow by exactly their bf16 bytes less their NVFP4 bytes
(eq. N1: N*K/2 + N*K/16 + 2*4, formulas/weight_formats.py).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from importlib import resources
from typing import Any

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import find_spec
from llmsizer.formulas.modelopt_exclusions import excluded_roles, exclusion_list
from llmsizer.formulas.tensors import model_tensors
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_NEMOTRON_H, build

pytestmark = pytest.mark.slow

BF16 = 2


def _n1(n: int, k: int) -> int:
    return n * k // 2 + n * k // 16 + 2 * 4


def _checkpoint_linears(cfg: dict[str, Any], to_checkpoint: tuple[str, str]) -> dict[str, tuple[int, int, int]]:
    """Checkpoint name -> (layer, out, in) of every linear weight inside the decoder layers of the transformers
    model of ``cfg`` (each routed expert's matrix under its own ``experts.{e}.<proj>`` name)."""
    model = build(cfg)
    old, new = to_checkpoint
    out: dict[str, tuple[int, int, int]] = {}
    for name, p in model.named_parameters():
        parts = name.split(".")
        if ".layers." not in name or p.dim() < 2 or "conv1d" in name or name.endswith((".gate.weight", ".router.weight")):
            continue
        layer = int(parts[parts.index("layers") + 1])
        ckpt = name.replace(old, new, 1) if name.startswith(old) else name
        if p.dim() == 3:  # fused experts [E, out, in]: checkpoint experts.{e}.<proj>
            head, proj = ckpt.rsplit(".", 1)
            for e in range(p.shape[0]):
                out[f"{head}.{e}.{proj}"] = (layer, p.shape[1], p.shape[2])
        else:
            out[ckpt.removesuffix(".weight")] = (layer, p.shape[0], p.shape[1])
    return out


def _truth(linears: dict[str, tuple[int, int, int]], listed: list[str]) -> dict[int, tuple[int, int]]:
    """Per layer, (elements, bf16 bytes less NVFP4 bytes) of the linears the list names."""
    out: dict[int, tuple[int, int]] = {}
    for name, (layer, n, k) in linears.items():
        if any(name == e or fnmatchcase(name, e) for e in listed):
            numel, extra = out.get(layer, (0, 0))
            out[layer] = (numel + n * k, extra + n * k * BF16 - _n1(n, k))
    return out


def _ours(spec: Any) -> dict[int, int]:
    kept = excluded_roles(spec)
    out: dict[int, int] = {}
    for t in model_tensors(spec):
        if 0 <= t.layer < len(kept) and t.role in kept[t.layer]:
            out[t.layer] = out.get(t.layer, 0) + t.numel
    return out


def _nvfp4(cfg: dict[str, Any], listed: list[str], name: str) -> Any:
    q = {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                          "exclude_modules": listed}}
    return spec_from_config({**cfg, "quantization_config": q}, name=name)


def _entry(name: str) -> dict[str, Any]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return dict(json.loads(folder.joinpath(name + ".json").read_text("utf-8")))


def test_the_nemotron_h_mapper_renames_entries_as_vllm_does() -> None:
    # nemotron_h.py:797-800 through modelopt.py:219-239: 'path*' split, substrings, then the prefix
    assert exclusion_list("nemotron_h", ["backbone.layers.1*", "backbone.embeddings", "mtp*", "lm_head",
                                         "backbone.layers.2.mixer.A_log"]) == [
        "model.layers.1", "model.layers.1.*", "model.embed_tokens", "mtp", "mtp.*", "lm_head", "model.layers.2.mixer.A"]
    assert exclusion_list("llama", ["model.layers.1*"]) == ["model.layers.1*"]


TINY_LATENT = {**TINY_NEMOTRON_H, "moe_latent_size": 32, "hybrid_override_pattern": "M-M*MEE"}  # every K a multiple of 16, as NVFP4 needs


@pytest.mark.parametrize(("cfg", "listed"), [
    (TINY_NEMOTRON_H, ["lm_head", "backbone.layers.0.mixer.in_proj", "backbone.layers.0.mixer.out_proj",
                       *(f"backbone.layers.3.mixer.{p}_proj" for p in "qkvo")]),
    (TINY_NEMOTRON_H, ["backbone.layers.1*"]),  # the MLP layer only (6 layers: no layer 1x)
    (TINY_NEMOTRON_H, ["*.mixer.shared_experts*", "backbone.layers.2.mixer.out_proj"]),
    (TINY_NEMOTRON_H, [f"backbone.layers.5.mixer.experts.{e}.{p}_proj" for e in range(4) for p in ("up", "down")]),
    (TINY_NEMOTRON_H, ["backbone.layers.5.mixer.experts.*"]),
    (TINY_LATENT, ["backbone.layers.6.mixer.fc1_latent_proj", "backbone.layers.6.mixer.fc2_latent_proj",
                   "backbone.layers.5.mixer.shared_experts.up_proj"]),
    (TINY_LATENT, ["backbone.layers.5*", "backbone.layers.0.mixer.conv1d", "backbone.embeddings", "mtp*"]),
])
def test_nemotron_h_kept_layers_are_the_listed_transformers_modules(cfg: dict[str, Any], listed: list[str]) -> None:
    linears = _checkpoint_linears(cfg, ("model.", "backbone."))
    truth = _truth(linears, listed)
    assert truth, "the case must keep something"
    spec = _nvfp4(cfg, listed, "tiny-nemotron-h-nvfp4")
    assert stored_format(spec)[0] == "nvfp4"
    assert _ours(spec) == {layer: numel for layer, (numel, _) in truth.items()}
    plain = spec_from_config(cfg, name="tiny-nemotron-h")
    extra = weight_bytes(spec, "nvfp4").total - weight_bytes(plain, "nvfp4").total
    assert extra == sum(x for _, x in truth.values())


def test_nemotron_3_nano_release_keeps_its_listed_mamba_and_attention_layers() -> None:
    """nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 (catalog entry, verbatim hf_quant_config.json): the in/out
    projections of 6 Mamba layers and all 6 attention layers stay bf16; the experts are NVFP4."""
    entry = _entry("nvidia-nemotron-3-nano-30b-a3b-nvfp4")
    listed = entry["hf_quant_config"]["quantization"]["exclude_modules"]
    linears = _checkpoint_linears(entry["config"], ("model.", "backbone."))
    truth = _truth(linears, listed)
    assert sorted(truth) == [4, 5, 11, 12, 18, 19, 25, 26, 32, 33, 41, 42]
    spec = find_spec("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    assert stored_format(spec)[:2] == ("nvfp4", 16)
    assert _ours(spec) == {layer: numel for layer, (numel, _) in truth.items()}
    est = estimate_inference(spec, engine="vllm", memory=80 * 2**30)
    all_fp4 = estimate_inference("nvidia-nemotron-3-nano-30b-a3b-bf16", engine="vllm", weights="nvfp4",
                                 memory=80 * 2**30)
    extra = sum(x for _, x in truth.values())
    assert est.item("weights").bytes - all_fp4.item("weights").bytes == extra
    assert extra == pytest.approx(0.5356e9, rel=1e-3)


TINY_MIXTRAL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "vocab_size": 128,
                "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
                "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 1e6,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("listed", [
    ["lm_head", *(f"model.layers.0.self_attn.{p}_proj" for p in "qkvo")],
    ["lm_head", "model.layers.1.block_sparse_moe.gate", "model.layers.2.block_sparse_moe.experts*"],
    [*(f"model.layers.1.block_sparse_moe.experts.{e}.w{w}" for e in range(4) for w in (1, 2, 3))],
    ["model.layers.2.*"],
])
def test_mixtral_kept_layers_are_the_listed_transformers_modules(listed: list[str]) -> None:
    linears = _mixtral_checkpoint_linears()
    truth = _truth(linears, listed)
    assert truth
    spec = _nvfp4(TINY_MIXTRAL, listed, "tiny-mixtral-nvfp4")
    assert _ours(spec) == {layer: numel for layer, (numel, _) in truth.items()}
    plain = spec_from_config(TINY_MIXTRAL, name="tiny-mixtral")
    extra = weight_bytes(spec, "nvfp4").total - weight_bytes(plain, "nvfp4").total
    assert extra == sum(x for _, x in truth.values())


def _mixtral_checkpoint_linears() -> dict[str, tuple[int, int, int]]:
    """The Mixtral checkpoint's expert names (``block_sparse_moe.experts.{e}.w1|w2|w3``, as transformers'
    conversion_mapping.py ``mixtral`` renames them on load: w1 and w3 merged into ``gate_up_proj`` [E, 2I, H], w2
    into ``down_proj`` [E, H, I]) rebuilt from the transformers model's fused tensors."""
    model = build(TINY_MIXTRAL)
    out: dict[str, tuple[int, int, int]] = {}
    for name, p in model.named_parameters():
        if ".layers." not in name or p.dim() < 2 or name.endswith("gate.weight"):
            continue
        layer = int(name.split(".")[2])
        if p.dim() == 3:
            head = name.rsplit(".", 1)[0].replace(".mlp.", ".block_sparse_moe.")
            for e in range(p.shape[0]):
                if name.endswith("gate_up_proj"):
                    half = p.shape[1] // 2
                    out[f"{head}.{e}.w1"] = out[f"{head}.{e}.w3"] = (layer, half, p.shape[2])
                else:
                    out[f"{head}.{e}.w2"] = (layer, p.shape[1], p.shape[2])
        else:
            out[name.removesuffix(".weight")] = (layer, p.shape[0], p.shape[1])
    return out

"""ModelOpt NVFP4 exclusions on Qwen3.5 / Qwen3.6 (formulas/modelopt_exclusions.py): the checkpoint's
``model.language_model.layers.{i}.*`` entries renamed by Qwen3-VL's ``hf_to_vllm_mapper`` and matched to the modules
vLLM 0.19.1 builds at ``language_model.model.layers.{i}`` (models/qwen3_5.py).

The published list. No verbatim config.json / hf_quant_config.json of nvidia/Qwen3.5-122B-A10B-NVFP4 or
nvidia/Qwen3.5-397B-A17B-NVFP4 was found in the code corpus, so these releases get no catalog row. Their
``quantization_config`` (NVFP4, quant_method modelopt, producer modelopt 0.0.1.dev752+gbd4fc3a65.d20260504) is known
from a transcription of nvidia/Qwen3.5-122B-A10B-NVFP4 at Hub revision 98915d83, "written as the release writes them".
That transcription is in a public C++ loader's Qwen3.5-122B config test (dgpp, ``modelopt_quant()``). Its ``ignore``
is: ``lm_head``; for every layer i, ``model.language_model.layers.{i}.linear_attn*`` (a Gated DeltaNet layer) or
``.self_attn*`` (a full-attention layer), plus ``.mlp.shared_expert*`` and ``.mlp.shared_expert_gate``; then
``model.visual*``, ``mtp.layers.0*`` and ``mtp*``. The same entry forms are quoted by TensorRT-LLM's Qwen3.5 AutoDeploy
test ("Glob forms as they appear in the NVFP4 hf_quant_config.json exclude_modules": ``lm_head``,
``model.language_model.layers.0.linear_attn*``, ``model.language_model.layers.11.self_attn*``,
``model.language_model.layers.0.mlp.shared_expert_gate``, ``model.visual*``, ``mtp.layers.0*``). ``_release_list``
writes that list out for a config's layer_types. The 397B list is taken to follow the same rule over its 60 layers.
Only the routed experts stay NVFP4.

Independent truth: the tensors vLLM 0.19.1 creates (PyPI wheel sha256 71a87f46...), from the config's numbers. An
excluded linear gets ``UnquantizedLinearMethod``: one bf16 weight of its full shape (modelopt.py:190-193). A
quantized one gets ``ModelOptNvFp4LinearMethod.create_weights`` (modelopt.py:1079-1151): uint8 [N, K/2],
fp8 [N, K/16], and an ``input_scale`` and ``weight_scale_2`` fp32 per output shard. Shapes and shards:
- Gated DeltaNet (layers/mamba/gdn_linear_attn.py:370-418, ``gqa_interleaved_layout=False`` at qwen3_5.py:140):
  ``in_proj_qkvz`` output sizes [kd, kd, vd, vd] (4 shards); ``in_proj_ba`` [nv, nv] (2 shards); ``out_proj``
  [H, vd] (:351-357).
- Attention (qwen3_next.py:235-250): ``qkv_proj`` [2 q + 2 kv, H] (the output gate doubles q; 3 shards) and
  ``o_proj`` [H, q].
- Shared expert (qwen2_moe.py:86-99): ``gate_up_proj`` [2 I_s, H] (2 shards) and ``down_proj`` [H, I_s].
llmsizer's eq. N1 (formulas/weight_formats.py) counts the two scalars once per checkpoint matrix, where vLLM counts
them once per output shard. ``in_proj_qkv`` is one matrix, but vLLM splits it into q, k and v, so eq. N1 counts 16 B
fewer per quantized Gated DeltaNet layer (the "few bytes per layer" noted at eq. N1).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.errors import InputError
from llmsizer.formulas.modelopt_exclusions import excluded_roles, exclusion_list, layer_module, packed_modules
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config

BF16 = 2
GDN_SCALAR_GAP = 2 * 4 * 2  # vLLM's in_proj_qkvz has 4 output shards where eq. N1 sees 2 matrices


def _entry(name: str) -> dict[str, Any]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return dict(json.loads(folder.joinpath(name + ".json").read_text("utf-8"))["config"])


def _release_list(text: dict[str, Any]) -> list[str]:
    """The NVIDIA Qwen3.5 NVFP4 release's ``ignore`` (module docstring) for a config's ``layer_types``."""
    out = ["lm_head"]
    for i, kind in enumerate(text["layer_types"]):
        lp = f"model.language_model.layers.{i}."
        out += [lp + ("linear_attn*" if kind == "linear_attention" else "self_attn*"),
                lp + "mlp.shared_expert*", lp + "mlp.shared_expert_gate"]
    return [*out, "model.visual*", "mtp.layers.0*", "mtp*"]


def _release(cfg: dict[str, Any], listed: list[str], name: str) -> Any:
    q = {"config_groups": {"group_0": {
        "input_activations": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16},
        "weights": {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}, "targets": ["Linear"]}},
        "ignore": listed, "quant_algo": "NVFP4", "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
        "producer": {"name": "modelopt", "version": "0.0.1.dev752+gbd4fc3a65.d20260504"}, "quant_method": "modelopt"}
    return spec_from_config({**cfg, "quantization_config": q}, name=name)


def _extra(n: int, k: int, shards: int) -> int:
    """bf16 bytes of an N x K linear less its NVFP4 create_weights bytes (module docstring)."""
    return n * k * BF16 - (n * k // 2 + n * k // 16 + 2 * shards * 4)


def _vllm_kept_extra(text: dict[str, Any], kept: dict[int, set[str]]) -> dict[int, int]:
    """Per layer, what keeping the named vLLM modules in bf16 adds to the all-NVFP4 model, from vLLM's shapes."""
    h, hd = text["hidden_size"], text["head_dim"]
    q, kv = text["num_attention_heads"] * hd, text["num_key_value_heads"] * hd
    kd = text["linear_num_key_heads"] * text["linear_key_head_dim"]
    nv = text["linear_num_value_heads"]
    vd = nv * text["linear_value_head_dim"]
    shexp = text["shared_expert_intermediate_size"]
    modules = {"linear_attn.in_proj_qkvz": (2 * kd + 2 * vd, h, 4), "linear_attn.in_proj_ba": (2 * nv, h, 2),
               "linear_attn.out_proj": (h, vd, 1), "self_attn.qkv_proj": (2 * q + 2 * kv, h, 3),
               "self_attn.o_proj": (h, q, 1), "mlp.shared_expert.gate_up_proj": (2 * shexp, h, 2),
               "mlp.shared_expert.down_proj": (h, shexp, 1)}
    return {layer: sum(_extra(*modules[m]) for m in names) for layer, names in kept.items() if names}


def _release_modules(text: dict[str, Any]) -> dict[int, set[str]]:
    """The vLLM modules the release list keeps bf16, per layer (module docstring)."""
    out = {}
    for i, kind in enumerate(text["layer_types"]):
        mixer = (["linear_attn.in_proj_qkvz", "linear_attn.in_proj_ba", "linear_attn.out_proj"]
                 if kind == "linear_attention" else ["self_attn.qkv_proj", "self_attn.o_proj"])
        out[i] = {*mixer, "mlp.shared_expert.gate_up_proj", "mlp.shared_expert.down_proj"}
    return out


def test_the_qwen3_vl_mapper_renames_entries_as_vllm_does() -> None:
    # modelopt.py:219-239 (the 'path*' split) then qwen3_vl.py:1452-1458's prefixes, WeightsMapper._map_name order
    assert exclusion_list("qwen3_5_moe", [
        "lm_head", "model.language_model.layers.0.linear_attn*", "model.language_model.layers.3.mlp.shared_expert_gate",
        "model.visual*", "mtp.layers.0*", "mtp*"]) == [
        "lm_head", "language_model.model.layers.0.linear_attn", "language_model.model.layers.0.linear_attn.*",
        "language_model.model.layers.3.mlp.shared_expert_gate", "model.visual", "visual.*",
        "mtp.layers.0", "mtp.layers.0.*", "mtp", "mtp.*"]


def test_module_paths_are_vllm_s() -> None:
    spec = spec_from_config(_entry("qwen3.5-122b-a10b"), name="q")
    assert layer_module(spec, "ssm_in", 0) == "language_model.model.layers.0.linear_attn.in_proj_qkvz"
    assert layer_module(spec, "ssm_ba", 0) == "language_model.model.layers.0.linear_attn.in_proj_ba"
    assert layer_module(spec, "attn_k", 3) == "language_model.model.layers.3.self_attn.qkv_proj"
    assert layer_module(spec, "ffn_shexp_up", 3) == "language_model.model.layers.3.mlp.shared_expert.gate_up_proj"
    assert layer_module(spec, "ffn_exps_down", 7) == "language_model.model.layers.7.mlp.experts"
    assert layer_module(spec, "ffn_gate_inp", 7) is None  # the router: quant_config None (qwen3_next.py:118-123)
    assert packed_modules(spec)["in_proj_qkvz"] == ("in_proj_qkv", "in_proj_z")  # qwen3_5.py:578-581


@pytest.mark.parametrize("name", ["qwen3.5-122b-a10b", "qwen3.5-397b-a17b"])
def test_the_nvidia_release_keeps_every_layer_but_the_routed_experts_bf16(name: str) -> None:
    cfg = _entry(name)
    text = cfg["text_config"]
    spec = _release(cfg, _release_list(text), name + "-nvfp4")
    fmt, group, why = stored_format(spec)
    assert (fmt, group) == ("nvfp4", 16) and "matched as vLLM matches them" in why
    n_gdn = text["layer_types"].count("linear_attention")
    assert sum(len(k) for k in excluded_roles(spec)) == 6 * n_gdn + 7 * (len(text["layer_types"]) - n_gdn)
    plain = spec_from_config(cfg, name=name)
    ours = [a - b for a, b in zip(weight_bytes(spec, "nvfp4").layer_bytes, weight_bytes(plain, "nvfp4").layer_bytes,
                                  strict=True)]
    want = _vllm_kept_extra(text, _release_modules(text))
    gdn = {i for i, kind in enumerate(text["layer_types"]) if kind == "linear_attention"}
    assert {i: x for i, x in enumerate(ours) if x} == {i: x + GDN_SCALAR_GAP * (i in gdn) for i, x in want.items()}
    # the estimate's weights line carries it
    est = estimate_inference(spec, engine="vllm", memory=800 * 2**30)
    all_fp4 = estimate_inference(plain, engine="vllm", weights="nvfp4", memory=800 * 2**30)
    assert est.item("weights").bytes - all_fp4.item("weights").bytes == sum(ours)


def test_the_122b_release_weighs() -> None:
    cfg = _entry("qwen3.5-122b-a10b")
    spec = _release(cfg, _release_list(cfg["text_config"]), "nvidia/Qwen3.5-122B-A10B-NVFP4")
    plain = spec_from_config(cfg, name="q")
    extra = weight_bytes(spec, "nvfp4").total - weight_bytes(plain, "nvfp4").total
    # 36 GDN layers: (20480 + 128) x 3072 + 3072 x 8192; 12 attention layers: 17408 x 3072 + 3072 x 8192; 48 shared
    # experts: 2048 x 3072 + 3072 x 1024; each at 2 - 9/16 B per element less the scalars
    elems = 36 * (20608 * 3072 + 3072 * 8192) + 12 * (17408 * 3072 + 3072 * 8192) + 48 * (2048 * 3072 + 3072 * 1024)
    assert extra == elems * 2 - elems * 9 // 16 - (36 * (2 + 2 + 1) + 12 * (3 + 1) + 48 * (2 + 1)) * 8
    assert extra == pytest.approx(6.586e9, rel=1e-3)  # 6.13 GiB over the all-NVFP4 sizing


@pytest.mark.parametrize(("listed", "modules"), [
    (["model.language_model.layers.0.linear_attn*"], {0: {"linear_attn.in_proj_qkvz", "linear_attn.in_proj_ba",
                                                          "linear_attn.out_proj"}}),
    # exact shard names: both shards of each fused module listed (quant_utils.py:461-478)
    ([f"model.language_model.layers.1.linear_attn.{p}" for p in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")],
     {1: {"linear_attn.in_proj_qkvz", "linear_attn.in_proj_ba"}}),
    (["model.language_model.layers.3.self_attn*", "model.language_model.layers.3.mlp.shared_expert*"],
     {3: {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.shared_expert.gate_up_proj", "mlp.shared_expert.down_proj"}}),
    # the routers and the vision tower are 16-bit anyway; the MTP layer is not built (module docstring)
    (["lm_head", "model.language_model.layers.2.mlp.gate", "model.language_model.layers.2.mlp.shared_expert_gate",
      "model.visual*", "mtp*"], {}),
    # a routed-expert entry: vLLM's FusedMoE 'mlp.experts' is a substring of it (quant_utils.py:479-486)
    (["model.language_model.layers.2.mlp.experts*"], {2: set()}),
])
def test_partial_lists(listed: list[str], modules: dict[int, set[str]]) -> None:
    cfg = _entry("qwen3.5-35b-a3b")
    spec = _release(cfg, [*listed, "model.visual*"], "partial-list")
    plain = spec_from_config(cfg, name="q")
    ours = [a - b for a, b in zip(weight_bytes(spec, "nvfp4").layer_bytes, weight_bytes(plain, "nvfp4").layer_bytes,
                                  strict=True)]
    text = cfg["text_config"]
    want = _vllm_kept_extra(text, modules)
    if 2 in modules:  # the routed experts of layer 2 in bf16: E x (gate, up, down), less their FusedMoE NVFP4 bytes
        e, mi, h = text["num_experts"], text["moe_intermediate_size"], text["hidden_size"]
        w13 = e * 2 * mi * h * BF16 - (e * 2 * mi * h // 2 + e * 2 * mi * h // 16 + 2 * e * 2 * 4)
        w2 = e * h * mi * BF16 - (e * h * mi // 2 + e * h * mi // 16 + 2 * e * 4)
        want[2] = w13 + w2
    gap = {i: GDN_SCALAR_GAP for i, names in modules.items() if "linear_attn.in_proj_qkvz" in names}
    assert {i: x for i, x in enumerate(ours) if x} == {i: x + gap.get(i, 0) for i, x in want.items()}


def test_half_a_fused_gdn_projection_is_refused_as_vllm_refuses_it(tmp_path: Path) -> None:
    cfg = _entry("qwen3.5-35b-a3b")
    with pytest.raises(InputError, match="same precision"):  # quant_utils.py:474-478
        stored_format(_release(cfg, ["model.language_model.layers.0.linear_attn.in_proj_qkv", "model.visual*"], "half"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "ignore": ["model.language_model.layers.0.linear_attn.in_proj_b", "model.visual*"]}}), "utf-8")
    code, out, err = run("infer", str(path), "--memory", "80GiB")
    assert code == 2 and out == "" and err.count("\n") == 1 and "in_proj_ba" in err


@pytest.mark.parametrize("listed", [[], ["lm_head", "model.language_model.layers.0.linear_attn*"]])
def test_a_list_that_leaves_the_vision_tower_quantized_is_refused(listed: list[str]) -> None:
    """vLLM builds Qwen3.5's ``visual`` linears with the quant config (qwen3_vl.py:185-203) and ModelOpt exempts only
    ``vision_tower`` / ``vision_model`` by name (modelopt.py:195-201): without a ``model.visual*`` entry the tower
    is NVFP4 in vLLM, which llmsizer does not model."""
    spec = _release(_entry("qwen3.5-35b-a3b"), listed, "no-visual")
    with pytest.raises(InputError, match="vision tower"):
        stored_format(spec)
    # the 'visual.*' entry (vLLM's own name) keeps it as well
    assert stored_format(_release(_entry("qwen3.5-35b-a3b"), [*listed, "visual.*"], "v"))[0] == "nvfp4"


def test_the_release_config_is_sized_by_the_cli(tmp_path: Path) -> None:
    cfg = _entry("qwen3.5-122b-a10b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": _release_list(cfg["text_config"])}}), "utf-8")
    code, out, err = run("infer", str(path), "--engine", "vllm", "--memory", "200GiB")
    assert code == 0 and "nvfp4" in out, err


# nvidia's Qwen3.6 NVFP4 releases: quant_algo MIXED_PRECISION, a per-module map in quantized_layers (W4A16_NVFP4
# experts and shared experts, FP8 attention and Gated DeltaNet projections; ignore ["mtp.layers.0*", "mtp*"]), as
# described for nvidia/Qwen3.6-35B-A3B-NVFP4 (producer modelopt 0.44.0) in public notes on that checkpoint
MIXED = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
         "producer": {"name": "modelopt", "version": "0.44.0"}, "ignore": ["mtp.layers.0*", "mtp*"],
         "quantized_layers": {
             "model.language_model.layers.0.linear_attn.in_proj_qkv": {"quant_algo": "FP8"},
             "model.language_model.layers.0.mlp.experts": {"quant_algo": "W4A16_NVFP4", "group_size": 16}}}


@pytest.mark.parametrize("weights", [[], ["--weights", "nvfp4"]])
def test_a_mixed_precision_release_is_refused_in_one_line(tmp_path: Path, weights: list[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_entry("qwen3.5-35b-a3b"), "quantization_config": MIXED}), "utf-8")
    code, out, err = run("infer", str(path), "--memory", "80GiB", *weights)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "MIXED_PRECISION" in err and "no quantization_config" in err


def test_the_refusal_hint_names_what_works(tmp_path: Path) -> None:
    """An exclusion list on a family without a module map is refused whatever --weights says; the hint names what
    does size: the unquantized base model with --weights nvfp4."""
    cfg = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1024,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "ignore": ["model.layers.0.self_attn*"]}}), "utf-8")
    code, _, err = run("infer", str(path), "--memory", "8GiB", "--weights", "nvfp4")
    assert code == 2 and "no quantization_config" in err and "--weights nvfp4" in err
    base = tmp_path / "base.json"
    base.write_text(json.dumps(cfg), "utf-8")
    code, out, err = run("infer", str(base), "--memory", "8GiB", "--weights", "nvfp4")
    assert code == 0, err

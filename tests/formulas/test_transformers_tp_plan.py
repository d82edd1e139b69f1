"""Per-GPU weight bytes under transformers' own tensor parallelism against the real plan applied by transformers.

Independent truth: for one catalog model of each model type, the transformers 5.24 model built on the meta device
(``oracle_utils.build``), its tensor-parallel plan as transformers assembles it (``model.tp_plan``:
the class ``_tp_plan``, the config's ``base_model_tp_plan``, the added ``embed_tokens`` rule; distributed/mixin.py
``init_parallel_plans``), expanded per parameter by ``_expand_parallel_plan`` and applied by transformers' own
``apply_tensor_parallelism`` on a fake process group of ``tp`` ranks (torch's in-process "fake" backend: no
communication, real ``DTensor`` placements). The oracle's per-GPU bytes are rank 0's local shards, two bytes per
element (bf16) but four for a parameter the model class names in ``_keep_in_fp32_modules_strict`` (transformers
5.24 modeling_utils.py:3854-3856 loads those in fp32 under a bf16 dtype, matching names by a regex search,
core_model_loading.py:1879-1922: the routers ``gate.weight`` of DeepSeek-V2/V3/V3.2, GLM-4.5, Nemotron-H); nothing
here reads llmsizer's table. A model type whose plan is empty must be refused
(transformers raises for ``tp_size > 1`` without a plan, mixin.py:257-264).
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
transformers = pytest.importorskip("transformers")

from llmsizer import estimate_inference  # noqa: E402
from llmsizer.catalog.models import entries  # noqa: E402
from llmsizer.errors import InputError  # noqa: E402
from llmsizer.models import load_model  # noqa: E402
from oracle_utils import build, component_of, experts_per_token  # noqa: E402

WORLD = 8


def _mesh(tp: int):  # type: ignore[no-untyped-def]
    from torch.distributed.device_mesh import DeviceMesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    return DeviceMesh("cpu", list(range(tp)))


def _one_per_type() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, e in entries().items():
        out.setdefault(str(e.config.get("model_type")), name)
    return out


MODELS = _one_per_type()


def _load_size(model, name: str) -> int:  # type: ignore[no-untyped-def]
    """Bytes per element of parameter ``name`` as transformers loads the model in bf16: 4 where the class's
    ``_keep_in_fp32_modules_strict`` matches it (module docstring), else 2."""
    keep = getattr(model, "_keep_in_fp32_modules_strict", None) or ()
    return 4 if any(re.search(re.escape(k), name) for k in keep) else 2


def _oracle(model_name: str, tp: int) -> tuple[float, dict[str, str]]:
    """(rank 0's weight bytes as loaded in bf16, ``_load_size``; the expanded plan) with transformers' plan
    applied."""
    from torch.distributed.tensor import DTensor
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    model = build(entries()[model_name].config)
    names = [n for n, _ in model.named_parameters()]  # tied tensors once
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    # a tied lm_head's weight is the embedding's tensor (named_parameters lists it once, as the embedding): its
    # rule has nothing of its own to shard (both shard the vocabulary rows, the same bytes)
    known = set(names) | {n for n, _ in model.named_modules()}
    plan = {k: v for k, v in plan.items() if k in known}
    if plan:
        apply_tensor_parallelism(model, _mesh(tp), plan)
    total = 0
    for n in names:
        p = model.get_parameter(n)
        total += _load_size(model, n) * (p.to_local() if isinstance(p, DTensor) else p).numel()
    return total, plan


def _ours(model_name: str, tp: int) -> int:
    e = estimate_inference(load_model(model_name), engine="transformers", tensor_parallel=tp, context=1024,
                           weights="bf16")
    return next(i.bytes for i in e.items if i.name == "weights")


def _planned(model_type: str) -> bool:
    """Whether transformers has a tensor-parallel plan for the model (read from the built model, not llmsizer)."""
    return bool(build(entries()[MODELS[model_type]].config).tp_plan)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_per_gpu_weights_follow_the_real_plan_or_refuse(model_type):
    """TP 2 for every catalog model type: the bytes rank 0 holds once transformers applied its plan; a model type
    with no plan (transformers raises for it) is refused, in one line naming tensor_parallel."""
    name = MODELS[model_type]
    if not _planned(model_type):
        with pytest.raises(InputError) as err:
            _ours(name, 2)
        assert "tensor-parallel" in str(err.value) or "tensor_parallel" in str(err.value)
        return
    expected, _ = _oracle(name, 2)
    # Llama 4: its projector and vision adapter, split by the plan, are one 1-D lump in llmsizer's inventory
    # (kept whole): 61 MB of 402 GB
    assert _ours(name, 2) == pytest.approx(expected, rel=2e-4 if model_type == "llama4" else 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "tp"), [("deepseek-v3", 8), ("llama-3.1-70b-instruct", 8),
                                                ("qwen3-30b-a3b", 8), ("qwen3-30b-a3b", 2)])
def test_per_gpu_weights_at_the_quoted_sizes(model_name, tp):
    """DeepSeek-V3's plan names no attention module: its MLA (about 11.4 B parameters over 61 layers) stays whole on
    each of 8 GPUs, about 20 GB per GPU more than splitting everything."""
    expected, _ = _oracle(model_name, tp)
    assert _ours(model_name, tp) == pytest.approx(expected, rel=1e-6)
    if model_name == "deepseek-v3":
        full = 2 * sum(p.numel() for p in build(entries()[model_name].config).parameters())
        assert expected - full / tp > 19e9


RECURRENT_MIXERS = {"jamba": "JambaMambaMixer", "qwen3_next": "Qwen3NextGatedDeltaNet",
                    "nemotron_h": "NemotronHMamba2Mixer", "falcon_h1": "FalconH1Mixer",
                    "granitemoehybrid": "GraniteMoeHybridMambaLayer"}


@pytest.mark.parametrize("model_type", sorted(t for t in RECURRENT_MIXERS if t in MODELS))
def test_recurrent_mixer_activations_are_whole_on_every_rank(model_type):
    """transformers' plans leave a recurrent mixer's activations whole on every rank: a rule under a mixer module is
    at most ``colwise_gather_output`` (its output gathered back to all heads), so each rank runs the whole scan.
    The prefill peak of the torch path's scan (formulas/activations.py recurrent_mixer_bytes, eqs. M4, G4, M5) is
    then the same at any tensor_parallel (before: split tp ways, half the Jamba mixer at tp 2), as the mixer's answer
    of ``activation_split`` (the one the state and the speed take) says."""
    from llmsizer.formulas.activations import prefill_activation_bytes
    from llmsizer.formulas.tensor_parallel import activation_split

    name = MODELS[model_type]
    model = build(entries()[name].config)
    mixers = [n + "." for n, m in model.named_modules() if type(m).__name__ == RECURRENT_MIXERS[model_type]]
    assert mixers
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    styles = {v for k, v in plan.items() if any(k.startswith(p) for p in mixers)}
    assert styles <= {"colwise_gather_output"}, styles
    spec = load_model(name)
    split = activation_split("transformers", spec.model_type)
    one, two = (prefill_activation_bytes(spec, 1, 512, 512, tp=tp, forward_locals=True, recurrent_scan=True,
                                         split=split) for tp in (1, 2))
    assert one.mixer_bytes == two.mixer_bytes > 0
    assert not split.mixer


# The input projection of each block, by the leaf module names transformers' models use (language model only: a
# vision tower's own plan is left out), and whether the plan splits its output: the weight is sharded on rank 0
# once transformers applied the plan and the style does not gather the output back (``colwise_gather_output``,
# transformers 5.24 distributed/tensor_parallel.py:603: output_layouts=Replicate()).
_Q = {"q_proj", "qkv_proj", "query_key_value", "q_b_proj"}  # MLA with a q LoRA: q_b_proj; without: q_proj
# the projection whose output is cached: k, or MLA's latent (transformers 5.24 caches kv_a_proj_with_mqa's output and
# expands it after ``cache.update``, modeling_deepseek_v2.py:386, :396-400)
_K = {"k_proj", "qkv_proj", "query_key_value", "kv_a_proj_with_mqa"}
_UP = {"up_proj", "gate_up_proj", "fc1", "dense_h_to_4h"}


def _block(name: str) -> str | None:
    """The block whose input projection the parameter ``name`` is (None: another parameter)."""
    if "vision" in name or "visual" in name:
        return None
    parts = name.split(".")
    leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]  # a 3-D expert tensor is its own name
    if "experts" in parts and "shared" not in name:
        return "experts" if leaf in {"gate_up_proj", "up_proj"} else None
    if "shared_expert" in name:
        return "shared_experts" if leaf in {"up_proj", "gate_up_proj"} else None
    if leaf in _UP:
        return "mlp"
    return "attention" if leaf in _Q else None


def _plan_splits(model_name: str, model_type: str) -> dict[str, bool]:
    """{block: split} from transformers' own plan applied on a fake 2-rank group: attention (q), kv (k), mlp,
    experts, shared_experts, mixer (any of its projections), for the blocks the model has; one no rule names is
    whole."""
    from torch.distributed.tensor import DTensor
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    model = build(entries()[model_name].config)
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    known = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_modules()}
    plan = {k: v for k, v in plan.items() if k in known}
    apply_tensor_parallelism(model, _mesh(2), plan)
    mixers = [n + "." for n, m in model.named_modules() if type(m).__name__ == RECURRENT_MIXERS.get(model_type)]
    out: dict[str, bool] = {}  # the blocks the model has
    for name, p in model.named_parameters():
        sharded = isinstance(p, DTensor) and p.to_local().numel() < p.numel()
        module = name.rsplit(".", 1)[0]
        live = sharded and "colwise_gather_output" not in (plan.get(name), plan.get(module))
        if any(name.startswith(m) for m in mixers):
            out["mixer"] = out.get("mixer", False) | live
            continue
        block = _block(name)
        if block is not None:
            out[block] = out.get(block, False) | live
        parts = name.split(".")
        if len(parts) > 1 and parts[-2] in _K and "vision" not in name and "visual" not in name:
            out["kv"] = out.get("kv", False) | live
    return out


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_activations_and_kv_follow_the_real_plan(model_type):
    """For every catalog model type transformers serves tensor-parallel: the blocks whose activations one rank holds
    a half of at TP 2 are the blocks whose input projection transformers' applied plan shards without gathering the
    output (attention by q, the K/V cache by k, MLP, routed and shared experts, a recurrent mixer); every other
    block is whole on each rank. Checked on what the estimate reads: the transformers prefill's attention / MLP /
    mixer bytes and the KV cache item at TP 2 against TP 1 (before: attention, MLP and KV halved for every model,
    gpt-oss, Jamba, Falcon-H1, Granite-H, Nemotron-H, DeepSeek-V3, Kimi K2, Qwen3-VL and Phi-3 included)."""
    from llmsizer.formulas.activations import prefill_activation_bytes
    from llmsizer.formulas.tensor_parallel import activation_split

    name = MODELS[model_type]
    if not _planned(model_type):
        pytest.skip("no tensor-parallel plan: transformers refuses it (test_per_gpu_weights_follow_the_real_plan_...)")
    truth = _plan_splits(name, model_type)
    spec = load_model(name)
    split = activation_split("transformers", spec.model_type)
    assert {k: getattr(split, k) for k in truth} == truth
    # the prefill the transformers engine sizes (hf_transformers.py: forward_locals, the model's plan), eager so
    # the scores count with the heads
    one, two = (prefill_activation_bytes(spec, 1, 512, 512, attention="eager", tp=tp, forward_locals=True,
                                         recurrent_scan=True, split=split) for tp in (1, 2))
    assert (two.attention_bytes < one.attention_bytes) == truth.get("attention", False)
    assert (two.mlp_bytes < one.mlp_bytes) == any(truth.get(b, False) for b in ("mlp", "experts", "shared_experts"))
    assert two.mixer_bytes == one.mixer_bytes
    kv = [next((i.bytes for i in estimate_inference(spec, engine="transformers", tensor_parallel=tp, context=4096,
                                                    weights="bf16").items if i.name == "kv_cache"), 0)
          for tp in (1, 2)]
    # split: each rank caches half the KV heads; whole (or a single KV head, replicated): all of them
    halved = truth.get("kv", False) and spec.num_kv_heads >= 2
    assert kv[1] == pytest.approx(kv[0] / 2 if halved else kv[0], rel=1e-6)
    # the eager prefill's elementwise bytes (eq. E13) run on the widths of the blocks one rank holds: TP 2's equal
    # TP 1's where the plan splits no attention, MLP or expert input, fewer where it splits one (before: every width
    # / tp, gpt-oss-120b 12.65 MB a token at TP 2 against 16.46 MB at TP 1)
    from llmsizer.formulas.elementwise_traffic import inference_forward_bytes_per_token

    e1, e2 = (inference_forward_bytes_per_token(spec, 2, tp, split) for tp in (1, 2))
    layers_split = any(truth.get(b, False) for b in ("attention", "kv", "mlp", "experts", "shared_experts"))
    assert (e2 < e1) if layers_split else (e2 == e1)


def test_gpt_oss_120b_keeps_every_kv_head_on_each_rank():
    """gpt-oss's plan splits only the embedding and lm_head (configuration_gpt_oss.py:33): at TP 2 on H200 with
    64k tokens x 4 sequences each rank caches all K/V (17.93 GiB, not the 8.96 GiB a head split gives) and runs
    every head and expert, so its activations equal TP 1's."""
    spec = load_model("gpt-oss-120b")
    e1, e2 = (estimate_inference(spec, engine="transformers", device="h200", context=65536, concurrency=4,
                                 tensor_parallel=tp) for tp in (1, 2))
    items = [{i.name: i.bytes for i in e.items} for e in (e1, e2)]
    assert items[1]["kv_cache"] == items[0]["kv_cache"] > 17 * 2**30
    assert items[1]["activations"] == items[0]["activations"]


@pytest.mark.parametrize(("model_name", "key"), [("gpt-oss-120b", "kv_bytes_per_decode_step"),
                                                 ("jamba-1.5-mini", "recurrent_state_bytes_per_decode_step")])
def test_decode_reads_the_whole_cache_and_state_the_plan_keeps(model_name, key):
    """The decode time reads what each rank holds: gpt-oss's K/V of every head (its plan splits no k_proj, see
    test_activations_and_kv_follow_the_real_plan) and Jamba's whole mixer state (no mixer linear in its plan,
    test_recurrent_mixer_activations_are_whole_on_every_rank), the same bytes per step at TP 2 as at TP 1 (before:
    half)."""
    from llmsizer.estimate.speed import estimate_speed

    spec = load_model(model_name)
    one, two = (estimate_speed(spec, "h200", tp, engine="transformers", tensor_parallel=tp, prompt_tokens=8192,
                               output_tokens=256, concurrency=4).details[key] for tp in (1, 2))
    assert two == one > 0


ROUTER_BIAS = "router score-correction bias"


def _rank_shards(model_name: str, tp: int) -> dict[str, tuple[str, int, int]]:
    """{parameter: (component, rank 0's elements, bytes per element as loaded, ``_load_size``)} once transformers
    applied its plan on a fake ``tp``-rank group (tied tensors once; ``component_of``: the module names of the
    transformers definitions, not llmsizer's)."""
    from torch.distributed.tensor import DTensor
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    model = build(entries()[model_name].config)
    names = [n for n, _ in model.named_parameters()]  # tied tensors once (applying the plan unties a meta lm_head)
    plan = model._expand_parallel_plan(dict(model.tp_plan))
    known = set(names) | {n for n, _ in model.named_modules()}
    plan = {k: v for k, v in plan.items() if k in known}
    if plan and tp > 1:
        apply_tensor_parallelism(model, _mesh(tp), plan)
    out = {}
    for n in names:
        p = model.get_parameter(n)
        out[n] = (component_of(n), (p.to_local() if isinstance(p, DTensor) else p).numel(), _load_size(model, n))
    # the router's score-correction bias: a saved buffer, not a parameter, that each rank holds whole (the plan names
    # no buffer) in fp32 where the class keeps it so (``_load_size``; MiniMax-M2's in the bf16 load dtype) and its
    # router reads every token (as tests/formulas/test_tp_replicated_weights.py counts it)
    for n, b in model.named_buffers():
        if n.endswith("e_score_correction_bias"):
            out[n] = (ROUTER_BIAS, b.numel(), _load_size(model, n))
    return out


def _decode_parts(model_name: str, tp: int) -> tuple[float, float, float]:
    """(elements one rank multiplies per decoded token, of them the output head's, the bytes of those elements as
    loaded): every parameter rank 0 holds,
    less the input embedding (a row lookup; a tied embedding is the head), the vision tower (run once per image) and
    Gemma 3n's per-layer table (a lookup), the routed experts at the k / E a token visits (its config's top-k)."""
    shards = _rank_shards(model_name, tp)
    comps = {c for c, _, _ in shards.values()}
    tied = "lm_head" not in comps
    skip = {"vision", "per_layer_embedding"} | (set() if tied else {"embedding"})
    cfg = entries()[model_name].config
    routed = 1.0
    if "experts" in comps:
        k, e = experts_per_token(cfg)
        routed = k / e
    # elements multiplied: the bias is added to the router's scores, not multiplied (bytes read only)
    total = sum(n * (routed if c == "experts" else 1.0) for c, n, _ in shards.values() if c not in skip | {ROUTER_BIAS})
    read = sum(n * b * (routed if c == "experts" else 1.0) for c, n, b in shards.values() if c not in skip)
    head = sum(n for c, n, _ in shards.values() if c == ("embedding" if tied else "lm_head"))
    return total, head, read


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_decode_weights_and_prefill_flops_follow_the_real_plan(model_type):
    """Speed under transformers' TP plan (formulas/tensor_parallel.py ``plan_rank_shares``, eq. TP1), for every
    catalog model type transformers serves tensor-parallel. The truth: transformers' own plan applied on a fake
    2-rank group to the meta-device model, rank 0's local parameter shards.
    - The weight bytes one rank reads in a decode step of one sequence (bf16) are the bytes of the elements of rank
      0's shards it multiplies (``_decode_parts``: 2 per element, the fp32 routers 4). Before, the per-device
      total's ratio scaled the bytes read: gpt-oss-120b's lm_head half counted as 1.2 % of every byte, 9.69 GB of
      10.27 GB read as 10.09 GB.
    - A prefill's FLOPs on one rank are 2 x (its shards' elements - its head's) per prompt token, 2 x its head's
      for the last token, and the attention scores' FLOPs (those of one device at TP 1, the model's own) halved
      only where the plan shards q. Before: the model's FLOPs / 2 for every model, though gpt-oss's plan leaves
      each rank every layer's whole work (prefill up to 2x understated)."""
    from llmsizer.estimate.speed import estimate_speed

    name = MODELS[model_type]
    if not _planned(model_type):
        pytest.skip("no tensor-parallel plan: transformers refuses it (test_per_gpu_weights_follow_the_real_plan_...)")
    spec = load_model(name)
    prompt = 2048
    one, two = (estimate_speed(spec, "h200", tp, engine="transformers", tensor_parallel=tp, weights_format="bf16",
                               prompt_tokens=prompt, output_tokens=64).details for tp in (1, 2))
    rel = 2e-4 if model_type == "llama4" else 1e-6  # Llama 4's projector / adapter: one whole lump (weights test)
    m1, h1, b1 = _decode_parts(name, 1)
    m2, h2, b2 = _decode_parts(name, 2)
    assert two["weight_bytes_per_decode_step"] == pytest.approx(b2, rel=rel)
    assert one["weight_bytes_per_decode_step"] == pytest.approx(b1, rel=rel)
    attention = one["prefill_flops_per_device"] - 2 * (m1 - h1) * prompt - 2 * h1
    q_split = _plan_splits(name, model_type).get("attention", False)
    expected = 2 * (m2 - h2) * prompt + 2 * h2 + attention / (2 if q_split else 1)
    assert two["prefill_flops_per_device"] == pytest.approx(expected, rel=rel)


_TINY_FORWARD = {
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", "mlp.gate",
                  dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, vocab_size=128,
                       intermediate_size=64, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2,
                       head_dim=16)),
    "phi": ("PhiConfig", "PhiForCausalLM", "self_attn",
            dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, vocab_size=128, intermediate_size=128)),
}


@pytest.mark.parametrize("model_type", sorted(_TINY_FORWARD))
def test_router_logits_and_parallel_attention_output_are_whole_on_each_rank(model_type):
    """A tiny CPU model of the family with transformers' own plan applied on a fake 2-rank group runs a real forward:
    rank 0's router logits (Qwen3-MoE's ``mlp.gate``, [tokens, experts]) and Phi's parallel-block attention output
    (``self_attn``, [tokens, hidden], after the row-parallel ``dense``'s all-reduce) have every element of the
    unsplit model's, though the plan splits the experts / the MLP. The prefill's MLP-phase bytes
    (formulas/activations.py) then keep those tensors whole at TP 2 and halve only the rest (before: divided by tp
    with the experts / the MLP: the router logits always, on every engine)."""
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    from llmsizer.formulas.activations import prefill_activation_bytes
    from llmsizer.formulas.tensor_parallel import activation_split
    from llmsizer.readers.hf_config import spec_from_config

    conf_cls, model_cls, leaf, cfg = _TINY_FORWARD[model_type]
    tokens = 10
    numel = []
    for tp in (1, 2):
        torch.manual_seed(0)
        conf = getattr(transformers, conf_cls)(**cfg)
        model = getattr(transformers, model_cls)(conf).eval()
        if tp > 1:
            plan = model._expand_parallel_plan(dict(model.tp_plan))
            known = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_modules()}
            apply_tensor_parallelism(model, _mesh(tp), {k: v for k, v in plan.items() if k in known})
        seen: list[int] = []
        module = model.get_submodule(f"model.layers.0.{leaf}")
        module.register_forward_hook(lambda m, i, o, seen=seen: seen.append((o[0] if isinstance(o, tuple) else o)
                                                                               .numel()))
        with torch.no_grad():
            model(input_ids=torch.randint(0, 128, (1, tokens)))
        numel.append(seen[0])
    assert numel[1] == numel[0] == tokens * (cfg["num_experts"] if model_type == "qwen3_moe" else cfg["hidden_size"])
    spec = spec_from_config(conf.to_dict(), name=model_type)
    split = activation_split("transformers", spec.model_type)
    one, two = (prefill_activation_bytes(spec, 1, tokens, tokens, tp=tp, split=split).mlp_bytes for tp in (1, 2))
    whole = numel[0] * (4 if model_type == "qwen3_moe" else 2)  # router logits in fp32; the bf16 attention output
    assert two == (one - whole) // 2 + whole

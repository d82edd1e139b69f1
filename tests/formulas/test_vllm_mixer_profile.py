"""A recurrent mixer's peak in vLLM's start-up profile run (formulas/vllm_mixer_profile.py eqs. V1-V3).

Independent truth, three ways:

1. The buffers the cited vLLM v0.23.0 lines allocate, listed here shape by shape from the code (the layer's
   constructor for the per-GPU widths, its forward for what is alive at each moment), summed and compared with the
   formulas. These lists are written from the lines, not from the module's equations: the widths come from the
   linear layers' ``output_size`` / ``output_sizes`` and the ``tped_*`` attributes, the moments from the code order.
2. The eager parts (the custom ops' bodies: Mamba-2's profile branch, mamba_mixer2.py L719-727, and Mamba-1's,
   mamba_mixer.py L287-298) run here as written, on the CPU, under ``MemTracker`` (torch's own live-storage tracker):
   the profile branch's ``transpose(0, 1).clone().transpose(0, 1).contiguous()`` holds *one* copy of the conv
   channels, not two (``clone`` keeps the strided input's stride order, so ``contiguous`` returns its input); eq. V1
   was first written with two and this measurement corrected it.
3. The estimate: vLLM's KV pool on an H100 follows eq. (1) of estimate/inference/vllm.py with the activation term
   recomputed here (residual stream + the mixer's profile peak), for Nemotron-H-56B (TP 2) and Qwen3-Next-80B (TP 4)
   with max_num_seqs 16, where the forward and not the dummy sampler sets the profiled peak. With vLLM's H100
   default of 1024 sequences the sampler's logits (max_num_seqs x vocab x 38.9 B, 4.9-5.6 GiB) are larger than either
   model's forward, so the pool does not move there (asserted too). Eq. V4 (the Mamba-2 scan of a real step, which
   the profile skips) against the kernels' own ``torch.empty`` shapes (ssd_chunk_state.py, ssd_state_passing.py,
   ssd_bmm.py, causal_conv1d.py), and its warning where it exceeds the memory outside the pool.

The compiled (torch.compile) graph of the Gated DeltaNet layer before its custom op is written out from the lines and
compiled by Inductor on the CPU; its buffers are read from Inductor's own wrapper code (the allocations and frees it
plans). That is Inductor's CPU backend: the CUDA backend plans its buffers the same way but may split the fused
kernel differently, and nothing here ran vLLM or a GPU (this task drew no device).
"""

from __future__ import annotations

from math import prod

import pytest

from llmsizer import estimate_inference
from llmsizer.estimate.engines import VLLM_MAX_NUM_BATCHED_TOKENS_BIG
from llmsizer.formulas.vllm_mixer_profile import (
    vllm_gated_deltanet_profile_bytes,
    vllm_mamba1_profile_bytes,
    vllm_mamba2_profile_bytes,
    vllm_mamba2_step_bytes,
)
from llmsizer.models import load_model

BF16 = 2


def _bytes(buffers: dict[str, tuple[int, ...]], c: int = BF16) -> int:
    return sum(prod(shape) for shape in buffers.values()) * c


# --- 1. buffers from the lines -------------------------------------------------------------------------------------

def mamba2_buffers(t: int, num_heads: int, head_dim: int, ssm_state_size: int, n_groups: int,
                   tp: int) -> dict[str, tuple[int, ...]]:
    """MambaMixer2 (vllm/model_executor/layers/mamba/mamba_mixer2.py @v0.23.0) at its custom op's profile branch."""
    intermediate_size = num_heads * head_dim
    if n_groups % tp != 0:  # L303-310: n_groups + extra_groups_for_head_shards (mamba_utils.py L201-210: tp - n_groups)
        n_groups = n_groups + (tp - n_groups)
    groups_ssm_state_size = n_groups * ssm_state_size  # L312
    conv_dim = intermediate_size + 2 * groups_ssm_state_size  # L313
    # in_proj: output_sizes [I, I, G n, G n, H] (L328-340) or output_size I + conv_dim + H (L354-360), column-parallel
    in_proj_out = (intermediate_size + conv_dim + num_heads) // tp
    tped_conv_size = conv_dim // tp  # L514
    return {
        "projected_states (in_proj output, L536)": (t, in_proj_out),
        "ssm_output (torch.empty, L541-548)": (t, (num_heads // tp) * head_dim),
        # L723-725: transpose(0, 1).clone() of the [t, conv] slice: one copy; .transpose(0, 1).contiguous() a no-op
        "hidden_states_B_C copy (L723-725)": (tped_conv_size, t),
    }


def gdn_buffers(t: int, num_k_heads: int, num_v_heads: int, head_k_dim: int, head_v_dim: int, hidden: int,
                tp: int) -> dict[str, tuple[int, ...]]:
    """QwenGatedDeltaNetAttention.forward_cuda (qwen_gdn_linear_attn.py @v0.23.0), Qwen3-Next's interleaved layout,
    compiled: the buffers of the Inductor graph that ends at the custom op (its outputs are allocated before the
    fused kernel writing them; qkvz and ba live until the graph returns)."""
    key_dim, value_dim = num_k_heads * head_k_dim, num_v_heads * head_v_dim
    buffers: dict[str, tuple[int, ...]] = {
        "qkvz": (t, (2 * key_dim + 2 * value_dim) // tp),  # create_qkvz_proj, one output shard (L577-581), L923
        "ba": (t, 2 * num_v_heads // tp),  # create_ba_proj [num_v_heads * 2] (L604-606), L924
        "mixed_qkv": (t, (2 * key_dim + value_dim) // tp),  # cat(q, k, v), L931-934 (conv_dim, L466)
        "core_attn_out": (t, num_v_heads // tp, head_v_dim),  # torch.zeros, L950-954
        "output": (t, hidden),  # qwen3_next.py L416: self_attention_output = torch.empty_like(hidden_states)
    }
    if num_k_heads // tp > 1:  # [t, ng, ...] splits (L644-686): z, b, a reshapes copy (L689-691); else views
        buffers.update(z=(t, num_v_heads // tp, head_v_dim), b=(t, num_v_heads // tp), a=(t, num_v_heads // tp))
    return buffers


def mamba1_buffers(t: int, intermediate_size: int, hidden: int, tp: int) -> dict[str, tuple[int, ...]]:
    """MambaMixer.forward_impl (mamba_mixer.py @v0.23.0) in the profile branch, called by Jamba's layer."""
    d = intermediate_size // tp
    return {
        "output (jamba.py L180, empty_like)": (t, hidden),
        "projected_states (in_proj, L287)": (2 * d, t),
        "hidden_states_BC.contiguous() (L297)": (d, t),
        "out_proj result (L298)": (t, hidden),
    }


@pytest.mark.parametrize("heads, head_dim, d_state, groups, tp", [
    (256, 64, 256, 8, 1), (256, 64, 256, 8, 2), (256, 64, 256, 8, 8),  # Nemotron-H-56B
    (48, 64, 128, 1, 1), (48, 64, 128, 1, 2), (48, 64, 128, 1, 4),  # Granite-4.0-H-Tiny: one group, replicated
    (24, 64, 128, 1, 2),  # Falcon-H1-0.5B
])
def test_mamba2_formula_equals_the_buffers_of_the_lines(heads, head_dim, d_state, groups, tp):
    t = 8192
    assert vllm_mamba2_profile_bytes(t, heads, head_dim, d_state, groups, BF16, tp) == _bytes(
        mamba2_buffers(t, heads, head_dim, d_state, groups, tp))


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_gated_deltanet_formula_equals_the_buffers_of_the_lines(tp):
    t = 8192  # Qwen3-Next-80B-A3B: 16 key heads of 128, 32 value heads of 128, hidden 2048
    assert vllm_gated_deltanet_profile_bytes(t, 16, 32, 128, 128, 2048, BF16, tp) == _bytes(
        gdn_buffers(t, 16, 32, 128, 128, 2048, tp))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mamba1_formula_equals_the_buffers_of_the_lines(tp):
    t = 8192  # Jamba-1.5-Mini: d_inner 8192, hidden 4096
    assert vllm_mamba1_profile_bytes(t, 8192, 4096, BF16, tp) == _bytes(mamba1_buffers(t, 8192, 4096, tp))


def mamba2_step_moments(t: int, num_heads: int, head_dim: int, dstate: int, n_groups: int, chunk_size: int,
                        tp: int, state_bytes: int) -> list[int]:
    """Bytes at the state passing and at the chunk scan of a real prefill step (mamba_mixer2.py L792-872 @v0.23.0:
    causal_conv1d_fn L810, the scan L848; ssd_combined.py L92-150), one sequence of ``t`` tokens."""
    heads = num_heads // tp
    groups = (n_groups if n_groups % tp == 0 else tp) // tp
    nchunks = -(-t // chunk_size)  # cu_chunk_seqlens of one sequence
    conv_dim = (num_heads * head_dim + 2 * groups * tp * dstate) // tp
    held = {"projected_states": (t, heads * head_dim + conv_dim + heads), "ssm_output": (t, heads * head_dim),
            "causal_conv1d_fn out = empty_like(x) (causal_conv1d.py L545)": (conv_dim, t)}
    fp32 = {"dt_out (ssd_chunk_state.py L317)": (heads, nchunks, chunk_size),
            "dA_cumsum (L320)": (heads, nchunks, chunk_size)}
    states32 = (nchunks, heads, head_dim, dstate)  # _chunk_state_fwd, states_in_fp32=True (L368-370)
    passed = (nchunks, heads, head_dim * dstate)  # _state_passing_fwd out, out_dtype = state_dtype (L114)
    cb = (nchunks, groups, chunk_size, chunk_size)  # _bmm_chunk_fwd, output_dtype=torch.float32 (L170-172)
    base = _bytes(held) + _bytes(fp32, 4)
    return [base + prod(states32) * 4 + prod(passed) * state_bytes,
            base + prod(passed) * state_bytes + prod(cb) * 4]


@pytest.mark.parametrize("t, tp, state_bytes", [(8192, 1, 4), (65536, 2, 4), (16384, 1, 2)])
def test_mamba2_step_formula_equals_the_buffers_of_the_lines(t, tp, state_bytes):
    # Nemotron-H-56B: chunk 128, its config's mamba_ssm_cache_dtype float32 (state_bytes 4); bf16 state: 2
    assert vllm_mamba2_step_bytes(t, 256, 64, 256, 8, 128, BF16, state_bytes, tp) == max(
        mamba2_step_moments(t, 256, 64, 256, 8, 128, tp, state_bytes))


# --- 2. the eager op bodies on live storages -----------------------------------------------------------------------

def _peak(run) -> int:  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")
    tracker = mem_tracker.MemTracker()
    with torch.no_grad(), tracker:
        run()
    return int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])


@pytest.mark.parametrize("tokens, heads, head_dim, d_state, groups", [(512, 8, 16, 32, 2), (1024, 4, 32, 64, 1)])
def test_mamba2_profile_branch_holds_one_conv_copy(tokens, heads, head_dim, d_state, groups):
    torch = pytest.importorskip("torch")
    d = heads * head_dim
    conv = d + 2 * groups * d_state
    hidden = 64
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    w = torch.randn(hidden, d + conv + heads, dtype=torch.bfloat16)  # in_proj's weight, laid out for torch.mm

    def forward() -> None:  # mamba_mixer2.py @v0.23.0, tp 1
        projected_states = torch.mm(x, w)  # L536 (F.linear on the CPU copies its weight transposed; cuBLAS does not)
        ssm_output = torch.empty([x.shape[0], heads * head_dim], dtype=x.dtype)  # L541-548
        hidden_states_B_C, dt = torch.split(projected_states[..., d:], [conv, heads], dim=-1)  # L674-678
        hidden_states_B_C = (hidden_states_B_C.transpose(0, 1).clone().transpose(0, 1)).contiguous()  # L723-725
        hidden_states, _B, _C = torch.split(hidden_states_B_C, [d, groups * d_state, groups * d_state], dim=-1)
        del ssm_output, hidden_states, _B, _C, dt

    measured = _peak(forward)
    assert measured == vllm_mamba2_profile_bytes(tokens, heads, head_dim, d_state, groups, BF16)
    two_copies = measured + tokens * conv * BF16
    assert measured < two_copies


def test_mamba1_profile_branch_on_live_storages():
    torch = pytest.importorskip("torch")
    tokens, d, hidden = 512, 256, 128
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    w_in = torch.randn(hidden, 2 * d, dtype=torch.bfloat16)  # the weights laid out for torch.mm (as above)
    w_out = torch.randn(d, hidden, dtype=torch.bfloat16)

    def forward() -> None:
        output = torch.empty_like(x)  # jamba.py L180
        projected_states = torch.mm(x, w_in).transpose(-2, -1)  # mamba_mixer.py L287
        hidden_states_BC, gate = projected_states.chunk(2, dim=-2)  # L288
        hidden_states_BC = hidden_states_BC.contiguous()  # L297
        out = torch.mm(hidden_states_BC.transpose(-2, -1), w_out)  # L298
        del out, output, gate

    assert _peak(forward) == vllm_mamba1_profile_bytes(tokens, d, hidden, BF16)


def _inductor_peak(code: str) -> int:
    """The most bytes Inductor's wrapper ``call`` holds at once: each ``bufN = empty_strided_cpu(shape, stride,
    dtype)`` allocates, ``del bufN`` frees, ``reinterpret_tensor`` aliases; the graph's inputs are not counted."""
    import re

    size = {"bfloat16": 2, "float16": 2, "float32": 4}
    live: dict[str, int] = {}
    cur = peak = 0
    body = code[code.index("def call("):]
    for line in body.splitlines():
        m = re.match(r"\s*(buf\d+) = empty_strided_cpu\(\(([\d, ]*)\), \([\d, ]*\), torch\.(\w+)\)", line)
        if m:
            n = prod(int(x) for x in m.group(2).split(",") if x.strip()) * size[m.group(3)]
            live[m.group(1)] = n
            cur += n
            peak = max(peak, cur)
            continue
        m = re.match(r"\s*del (buf\d+)\s*$", line)
        if m and m.group(1) in live:
            cur -= live.pop(m.group(1))
        if line.strip().startswith("return"):
            break
    assert peak, "no buffer read from the wrapper code"
    return peak


@pytest.mark.parametrize("num_k_heads", [4, 1])  # 4 key heads per GPU: z, b, a copied; 1: views
def test_gated_deltanet_compiled_graph_on_inductors_plan(num_k_heads):
    """forward_cuda's part 1 (qwen_gdn_linear_attn.py L919-954 @v0.23.0, the decoder layer's output buffer,
    qwen3_next.py L416) written out and compiled by Inductor on the CPU: its wrapper's buffers against eq. V2."""
    torch = pytest.importorskip("torch")
    from torch._inductor.utils import run_and_get_code

    t, num_v_heads, dk, dv, hidden = 256, 8, 16, 16, 32
    key_dim, value_dim = num_k_heads * dk, num_v_heads * dv
    per = num_v_heads // num_k_heads

    def part1(x, w_qkvz, w_ba):  # type: ignore[no-untyped-def]
        output = torch.empty_like(x)  # qwen3_next.py L416
        mixed_qkvz = torch.mm(x, w_qkvz)  # L923
        ba = torch.mm(x, w_ba)  # L924
        # fix_query_key_value_ordering L644-693
        qkvz = mixed_qkvz.view(t, num_k_heads, 2 * dk + 2 * per * dv)
        ba3 = ba.view(t, num_k_heads, 2 * per)
        query, key, value, z = torch.split(qkvz, [dk, dk, per * dv, per * dv], dim=2)
        b, a = torch.split(ba3, [per, per], dim=2)
        value = value.reshape(t, -1, dv)
        z = z.reshape(t, -1, dv)
        b = b.reshape(t, num_v_heads)
        a = a.reshape(t, num_v_heads)
        # L931-934: rearrange "l p d -> l (p d)" and cat
        query, key, value = (u.reshape(t, -1) for u in (query, key, value))
        mixed_qkv = torch.cat((query, key, value), dim=-1)
        core_attn_out = torch.zeros((t, num_v_heads, dv), dtype=x.dtype)  # L950-954
        return mixed_qkv, b, a, core_attn_out, z, output  # what the op and the layer's next graph read

    x = torch.randn(t, hidden, dtype=torch.bfloat16)
    w_qkvz = torch.randn(hidden, 2 * key_dim + 2 * value_dim, dtype=torch.bfloat16)
    w_ba = torch.randn(hidden, 2 * num_v_heads, dtype=torch.bfloat16)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            _, code = run_and_get_code(torch.compile(part1), x, w_qkvz, w_ba)
    finally:
        torch._dynamo.reset()
    measured = _inductor_peak(code[0])
    print(f"[gdn Hk={num_k_heads}] Inductor's plan {measured} B, eq. V2 "
          f"{vllm_gated_deltanet_profile_bytes(t, num_k_heads, num_v_heads, dk, dv, hidden, BF16)} B")
    assert measured == vllm_gated_deltanet_profile_bytes(t, num_k_heads, num_v_heads, dk, dv, hidden, BF16)


# --- 3. the estimate's KV pool -------------------------------------------------------------------------------------

H100 = "H100-SXM"


def _estimate(name: str, tp: int, **kw):  # type: ignore[no-untyped-def]
    return estimate_inference(load_model(name), engine="vllm", device=H100, context=8192, concurrency=1,
                              tensor_parallel=tp, **kw)


def _item(e, name: str) -> int:  # type: ignore[no-untyped-def]
    return next(i.bytes for i in e.items if i.name == name)


@pytest.mark.parametrize("name, tp, mixer", [
    # Nemotron-H-56B: 256 heads x 64, 8 groups of 256, hidden 8192 (config.json in the catalog)
    ("nemotron-h-56b-base-8k", 2, lambda t: _bytes(mamba2_buffers(t, 256, 64, 256, 8, 2))),
    # Qwen3-Next-80B-A3B: 16 key heads, 32 value heads of 128, hidden 2048
    ("qwen3-next-80b-a3b-thinking", 4,
     lambda t: _bytes(gdn_buffers(t, 16, 32, 128, 128, 2048, 4))),
])
def test_kv_pool_on_h100_takes_the_mixer_profile_peak(name, tp, mixer):
    """The profiled activations are the residual stream, its normalised copy and the mixer's moment, all written
    from the buffers of vLLM's lines (``mixer``), and the KV pool gives up exactly their growth when the batched
    tokens double: the pool's other terms (weights, non-torch, CUDA graphs) do not depend on them, so no figure of
    the estimate's own enters the comparison."""
    hidden = load_model(name).hidden_size
    pools = {}
    for t in (16384, 32768):
        e = _estimate(name, tp, max_num_seqs=16, max_num_batched_tokens=t)
        act = 2 * t * hidden * BF16 + mixer(t)  # residual stream + normalised copy, and the mixer's moment
        assert _item(e, "activations") == act
        pools[t] = (e.details["kv_pool_bytes"], act)
    (pool_1, act_1), (pool_2, act_2) = pools[16384], pools[32768]
    assert pool_1 - pool_2 == act_2 - act_1


@pytest.mark.parametrize("name, tp", [("nemotron-h-56b-base-8k", 2), ("qwen3-next-80b-a3b-thinking", 4)])
def test_h100_default_sampler_outweighs_the_mixer(name, tp):
    """vLLM's H100 defaults (1024 sequences, 8192 batched tokens): the dummy sampler's logits set the profiled peak."""
    e = _estimate(name, tp)
    t = VLLM_MAX_NUM_BATCHED_TOKENS_BIG  # 8192 on a GPU of >= 70 GiB
    mixer = (_bytes(mamba2_buffers(t, 256, 64, 256, 8, tp)) if name.startswith("nemotron")
             else _bytes(gdn_buffers(t, 16, 32, 128, 128, 2048, tp)))  # the buffers of vLLM's lines, as above
    assert 2 * t * load_model(name).hidden_size * BF16 + mixer < _item(e, "activations")
    assert "sampler 1024 seqs" in next(i.formula for i in e.items if i.name == "activations")


def test_unprofiled_mamba2_scan_warned_past_the_margin():
    """Nemotron-H-56B TP 2 on an H100 with max_num_batched_tokens 65536: the step's chunk states (eq. V4) exceed what
    the profile counted by more than the memory outside the pool."""
    t = 65536
    e = _estimate("nemotron-h-56b-base-8k", 2, max_num_batched_tokens=t)
    step = 2 * t * 8192 * BF16 + max(mamba2_step_moments(t, 256, 64, 256, 8, 128, 2, 4))
    assert e.details["vllm_unprofiled_scan_bytes"] == step - _item(e, "activations")
    assert any("Mamba-2 chunked scan, which vLLM's profile run skips" in x for x in e.warnings)
    default = _estimate("nemotron-h-56b-base-8k", 2)  # 8192 tokens: the profiled sampler covers the step
    assert "vllm_unprofiled_scan_bytes" not in default.details

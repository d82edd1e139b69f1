"""Attention 'flex': torch FlexAttention on a BlockMask, torchtune's path for packed documents (#12).

Independent truth:
- torch 2.13.0's own ``create_block_mask`` with torchtune's document-causal mask_mod (modules/attention_utils.py
  @bd2a0fc lines 161-171): the tiles it keeps per query block (kv_num_blocks + full_kv_num_blocks) against
  formulas/attention_mask.py eq. (M5);
- the tensors a real ``flex_attention`` forward saves for its backward on the CPU (FlexAttentionAutogradOp.forward,
  the same autograd function on every device; torch's front end refuses requires_grad on a CPU only because no CPU
  backward kernel is compiled, ``_validate_device``, so the check is lifted for the measurement and the backward is
  run once in eager) against the memory terms eqs. (FX1)-(FX2);
- the memory and the time of packed documents under SDPA read the same rule (training_activations.needs_mask).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import flops_per_token, training_duration_for
from llmsizer.formulas.attention_mask import FLEX_BLOCK, flex_pairs, flex_tiles
from llmsizer.formulas.training_activations import ActivationSetup, layer_saved_terms, shared_activations
from llmsizer.formulas.training_time import attention_core_flops
from llmsizer.models import load_model

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")


def _document_ids(batch: int, seq: int, doc: int | None) -> torch.Tensor:  # torchtune _get_document_ids_from_seq_lens
    d = seq if doc is None else min(doc, seq)
    return (torch.arange(seq) // d).expand(batch, seq).contiguous()


def _block_mask(batch: int, seq: int, doc: int | None, block: int = FLEX_BLOCK):  # type: ignore[no-untyped-def]
    ids = _document_ids(batch, seq, doc)

    def mask_mod(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]  # torchtune packed_block_causal_mask
        return (q_idx >= kv_idx) & (ids[b, q_idx] == ids[b, kv_idx])

    return flex.create_block_mask(mask_mod, batch, None, seq, seq, device="cpu", BLOCK_SIZE=block), ids


@pytest.mark.parametrize(("seq", "doc", "block"), [(8192, 1024, 128), (4096, 1000, 128), (2048, 300, 128),
                                                   (1000, 128, 128), (4096, None, 128), (777, 50, 128),
                                                   (5000, 4096, 128), (2048, 100, 64)])
def test_flex_tiles_are_create_block_masks_tiles(seq: int, doc: int | None, block: int) -> None:
    bm, _ = _block_mask(2, seq, doc, block)
    visited = bm.kv_num_blocks + bm.full_kv_num_blocks  # [b, 1, query blocks]
    assert visited.shape[-1] == -(-seq // block)
    for row in visited.sum(-1).flatten().tolist():
        assert row == flex_tiles(seq, doc, block)


def test_flex_keys_per_query_exceed_the_area_by_the_cut_tiles() -> None:
    """Tiles cut by a document boundary or the diagonal compute whole: more pairs than eq. (M4)'s area, fewer than
    the causal row's."""
    from llmsizer.formulas.attention_mask import row_pairs

    for seq, doc in ((8192, 1024), (4096, 300)):
        assert row_pairs(seq, doc_len=doc) < flex_pairs(seq, doc) < row_pairs(seq)


def _measured_flex_saved(batch: int, heads: int, kv_heads: int, seq: int, head_dim: int, doc: int,
                         monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    bm, _ = _block_mask(batch, seq, doc)
    monkeypatch.setattr(flex, "_validate_device", lambda *a: None)
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16, requires_grad=True)
    saved: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[t.untyped_storage().data_ptr()] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = flex.flex_attention(q, k, v, block_mask=bm, enable_gqa=True)
    out.float().sum().backward()  # the saved set is what the backward reads
    assert q.grad is not None and k.grad is not None
    kinds: dict[str, int] = {"attention": 0, "fp32 rows": 0, "block mask": 0, "document ids": 0}
    for t in saved.values():
        n = t.untyped_storage().nbytes()
        key = {torch.bfloat16: "attention", torch.float32: "fp32 rows", torch.int32: "block mask",
               torch.int64: "document ids"}[t.dtype]
        kinds[key] += n
    return kinds


def test_flex_saved_tensors_are_the_memory_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_model("llama-3.2-1b")
    batch, seq, doc = 2, 512, 100
    heads, kv_heads, hd = spec.num_heads, spec.num_kv_heads, spec.head_dim
    assert kv_heads < heads  # GQA: K/V kept at their own width (enable_gqa)
    measured = _measured_flex_saved(batch, heads, kv_heads, seq, hd, doc, monkeypatch)
    st = ActivationSetup(batch=batch, seq=seq, compute=2, residual=2, attention="flex", packing=True)
    terms = {t.name: t.bytes for t in layer_saved_terms(spec, 0, st)}
    shared = {t.name: t.bytes for t in shared_activations(spec, st)}
    assert terms["attention q, k, v, output"] == measured["attention"]
    assert terms["attention log-sum-exp"] + terms["attention max scores (FlexAttention)"] == measured["fp32 rows"]
    assert shared["FlexAttention BlockMask"] == measured["block mask"]
    assert shared["packed document ids (mask_mod buffer)"] == measured["document ids"]
    assert "attention mask (per layer)" not in terms and "boolean attention mask" not in shared


H100 = "h100-sxm"


def _assumed(model: str, fields: dict[str, object]) -> dict[str, object]:
    d = training_duration_for(load_model(model), builtin_catalog().devices[H100], 1, 1e9, fields)
    return {a.name: a.value for a in d.assumptions}


def test_flex_times_the_block_masks_tiles() -> None:
    spec = load_model("llama-3.1-8b")
    seq, doc = 8192, 1024
    got = _assumed("llama-3.1-8b", dict(method="full", micro_batch=1, seq_len=seq, packing=True, doc_len=doc,
                                        attention="flex"))
    a = flex_tiles(seq, doc) * FLEX_BLOCK ** 2 / seq
    assert got["attention_keys_per_query"] == round(a, 1) == 576.0
    assert got["attention_kernel_timed"] == "flex-attention"
    fl = flops_per_token(spec, "full", seq)
    assert got["attention_flops_per_token"] == round(attention_core_flops(
        fl.attention_layers, fl.attention_width, seq, fl.attention_recomputed, "flash",
        recompute_weight=1.0, attended=a, recomputed_attended=a))


def test_packed_documents_under_sdpa_are_timed_on_the_kernel_the_memory_counts() -> None:
    """The memory counts SDPA's mask for packed rows (the per-layer float mask, K/V repeated: the mem-efficient
    path); the time must run the same kernel: its flash backend refuses a mask, mem-efficient runs every tile."""
    spec = load_model("llama-3.1-8b")
    st = ActivationSetup(batch=1, seq=8192, compute=2, residual=2, attention="sdpa", packing=True)
    assert "attention mask (per layer)" in {t.name for t in layer_saved_terms(spec, 0, st)}
    got = _assumed("llama-3.1-8b", dict(method="full", micro_batch=1, seq_len=8192, packing=True, doc_len=1024))
    assert got["attention_masked_layers"] == spec.attention_layers
    assert got["attention_kernel_timed"] == "flash-attn-2"  # the unmasked dispatch, every layer masked instead
    fl = flops_per_token(spec, "full", 8192)
    assert got["attention_flops_per_token"] == round(2 * fl.attention_executed("flash"))  # non-causal: every tile
    plain = _assumed("llama-3.1-8b", dict(method="full", micro_batch=1, seq_len=8192))
    assert "attention_masked_layers" not in plain


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsizer", *args], capture_output=True, text=True, timeout=300,
                          check=False)


def test_cli_accepts_flex_and_refuses_bad_combinations() -> None:
    ok = _cli("train", "llama-3.2-1b", "--attention", "flex", "--packing", "--doc-len", "1024", "--seq", "8192",
              "--batch", "1", "--device", H100, "--tokens", "1B")
    assert ok.returncode == 0, ok.stderr
    for args in (("train", "llama-3.1-8b", "--attention", "flex", "--device", "cpu"),
                 ("infer", "llama-3.1-8b", "--attention", "flex"),
                 ("train", "llama-3.1-8b", "--attention", "flex", "--attention-kernel", "flash-attn-2")):
        r = _cli(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "flex" in r.stderr, r.stderr


def test_estimate_keeps_the_document_ids_the_backward_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: the timeline took every shared term named "mask" as forward-only, so a backward peak dropped the
    document ids, which flex's backward reads (measured saved here); forward-only is the Term's field now."""
    from llmsizer.estimate.training.compose import estimate_training

    spec = load_model("llama-3.2-1b")
    batch, seq, doc = 2, 512, 100
    measured = _measured_flex_saved(batch, spec.num_heads, spec.num_kv_heads, seq, spec.head_dim, doc, monkeypatch)
    assert measured["document ids"] == batch * seq * 8 and measured["block mask"] > 0  # both saved for backward
    est = estimate_training(spec, method="full", micro_batch=batch, seq_len=seq, packing=True, doc_len=doc,
                            attention="flex")
    assert "backward" in est.details["peak_phase"], est.details["peak_phase"]
    # bf16-mixed: the rotary tables in the fp32 residual dtype (residual=4)
    st = ActivationSetup(batch=batch, seq=seq, compute=2, residual=4, attention="flex", packing=True)
    rotary = {t.name: t.bytes for t in shared_activations(spec, st)}["rotary cos/sin"]
    assert est.item("rotary_and_masks").bytes == rotary + measured["block mask"] + measured["document ids"]


def test_flex_is_refused_below_tritons_floor() -> None:
    """torch compiles flex to Triton, which inductor refuses below CUDA capability 7.0 (GPUTooOldForTriton, read in
    torch's own source here); sm70 (V100) runs it."""
    import inspect

    from llmsizer.errors import DeviceCannotRunError
    from llmsizer.estimate.efficiency import timed_attention_kernel

    src = inspect.getsource(__import__("torch._dynamo.device_interface", fromlist=["CudaInterface"]).CudaInterface)
    assert ".major >= 7" in src and "GPUTooOldForTriton" in src
    assert timed_attention_kernel("flex", "flex-attention", "volta", 70, "bf16", True, True, False, 64)[0] == \
        "flex-attention"
    with pytest.raises(DeviceCannotRunError, match="sm70"):
        timed_attention_kernel("flex", "flex-attention", "pascal", 60, "bf16", True, True, False, 64)


def test_torchtune_rows_flag_flex_where_the_table_predates_its_torch() -> None:
    """The Llama 3.1 table (README @30b8519, 2024-09-24) predates torch 2.5.0 (2024-10-17), which torchtune's guard at
    that commit asks for flex: those speed rows say flex is assumed and leave the summary; the Llama 3.2 table
    (@1814feb, guard without a torch version) keeps its rows in."""
    from llmsizer.validation_cases import ASSUMED, Case, public_rows, speed_case

    rows = public_rows()
    for rid in ("PM0700", "PM0702", "PM0704", "PM0705", "PM0706", "PM0707"):
        assert "30b8519" in rows[rid]["source"]
        c = speed_case(rows[rid])
        assert isinstance(c, Case) and c.excluded == ASSUMED, rid
        assert "flex attention assumed" in c.note and "(settings assumed)" in c.note, c.note
    for rid in ("PM0711", "PM0712"):
        assert "1814feb" in rows[rid]["source"]
        c = speed_case(rows[rid])
        assert isinstance(c, Case) and c.excluded != ASSUMED and "flex attention assumed" not in c.note, rid


def test_flex_over_sliding_layers_says_the_window_is_not_read() -> None:
    """Gemma 2 alternates 4096-token sliding layers with global ones; flex is timed over the whole row for both (the
    BlockMask's causal tiles: no window), which the assumption must say is an upper bound."""
    spec = load_model("gemma-2-2b")
    assert "sliding" in spec.layer_types and spec.sliding_window == 4096
    d = training_duration_for(spec, builtin_catalog().devices[H100], 1, 1e9,
                              dict(method="full", micro_batch=1, seq_len=8192, attention="flex"))
    why = next(a.why for a in d.assumptions if a.name == "attention_keys_per_query")
    assert "4096-token window is not read" in why and "upper bound" in why
    plain = training_duration_for(load_model("llama-3.2-1b"), builtin_catalog().devices[H100], 1, 1e9,
                                  dict(method="full", micro_batch=1, seq_len=8192, attention="flex"))
    assert "window" not in next(a.why for a in plain.assumptions if a.name == "attention_keys_per_query")


def test_train_names_the_attention_kernel_it_times() -> None:
    """Review: flex's attention seconds were labelled 'flash attention'; the line names the kernel timed."""
    r = _cli("train", "qwen2.5-0.5b", "--attention", "flex", "--device", H100, "--tokens", "1B")
    assert r.returncode == 0, r.stderr
    assert "s attention in flex-attention at its executed FLOPs" in r.stdout and "flash attention" not in r.stdout

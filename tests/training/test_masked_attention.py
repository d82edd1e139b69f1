"""Attention time for packed documents and sliding windows (formulas/attention_mask.py, #12 speed).

Independent truth:
- torch's own FLOP formulas for the flash kernel's varlen call (``torch.utils.flop_counter``
  ``_flash_attention_forward_flop`` / ``_flash_attention_backward_flop`` over ``cu_seqlens``: one full score matrix per
  document), halved for the causal tiles as eq. (10) halves the unpacked count (flash-attn's benchmark convention);
- transformers' own mask functions (``masking_utils``: ``sliding_window_causal_mask_function``,
  ``chunked_causal_mask_function``, ``packed_sequence_mask_function``), evaluated on every (query, key) pair: the pairs
  they keep are the area (M1)-(M4) plus the half of each diagonal cell the area convention leaves out;
- torch FlexAttention's ``create_block_mask`` (torchtune's packed path): the tiles the kernel visits cover the area
  and exceed it only by the tiles the diagonal cuts.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import flops_per_token, training_duration_for
from llmsizer.formulas.attention_mask import causal_pairs, chunked_pairs, mean_attended, row_pairs
from llmsizer.formulas.training_time import attention_core_flops
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload

torch = pytest.importorskip("torch")


def _docs(seq: int, doc: int) -> list[int]:
    j, rest = divmod(seq, doc)
    return [doc] * j + ([rest] if rest else [])


@pytest.mark.parametrize(("seq", "doc", "heads", "head_dim"), [(4096, 1000, 4, 64), (8192, 1024, 8, 128)])
def test_packed_documents_match_torchs_varlen_flop_formulas(seq: int, doc: int, heads: int, head_dim: int) -> None:
    from torch.utils.flop_counter import _flash_attention_backward_flop, _flash_attention_forward_flop

    lengths = _docs(seq, doc)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.empty(seq, heads, head_dim, device="meta")
    fwd = _flash_attention_forward_flop(q, q, q, cu, cu, max(lengths), max(lengths))
    bwd = _flash_attention_backward_flop(q, q, q, q, q, None, cu, cu, max(lengths), max(lengths))
    per_token_causal = (fwd + bwd) / 2 / seq  # the causal tiles of each document's full score matrix
    width = heads * head_dim
    executed = attention_core_flops(1, width, seq, attended=mean_attended(seq, doc_len=doc))
    assert executed == pytest.approx(per_token_causal, rel=1e-12)
    assert executed < attention_core_flops(1, width, seq) * (doc + 1) / seq  # far below the unpacked row


def _kept_pairs(mask_fn, seq: int) -> int:  # type: ignore[no-untyped-def]
    q = torch.arange(seq).view(-1, 1)
    k = torch.arange(seq).view(1, -1)
    b = torch.zeros((), dtype=torch.long)
    return int(mask_fn(b, b, q, k).sum())


@pytest.mark.parametrize(("seq", "window"), [(1000, 128), (512, 4096), (777, 100)])
def test_sliding_window_pairs_are_transformers_masks(seq: int, window: int) -> None:
    from transformers.masking_utils import sliding_window_causal_mask_function

    kept = _kept_pairs(sliding_window_causal_mask_function(window), seq)
    assert kept == row_pairs(seq, window=window) + min(seq, window) / 2  # + the half diagonal cells


@pytest.mark.parametrize(("seq", "chunk"), [(1000, 128), (300, 512)])
def test_chunked_pairs_are_transformers_masks(seq: int, chunk: int) -> None:
    from transformers.masking_utils import chunked_causal_mask_function

    kept = _kept_pairs(chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long)), seq)
    assert kept == chunked_pairs(seq, chunk) + seq / 2


@pytest.mark.parametrize(("seq", "doc"), [(2048, 300), (1024, 1024)])
def test_packed_pairs_are_transformers_packed_mask(seq: int, doc: int) -> None:
    from transformers.masking_utils import and_masks, causal_mask_function, packed_sequence_mask_function

    ids = torch.cat([torch.full((n,), i) for i, n in enumerate(_docs(seq, doc))]).view(1, -1)
    kept = _kept_pairs(and_masks(packed_sequence_mask_function(ids), causal_mask_function), seq)
    assert kept == row_pairs(seq, doc_len=doc) + seq / 2


def test_flex_block_mask_visits_the_document_tiles() -> None:
    """torchtune's packed path: FlexAttention skips the tiles its BlockMask leaves empty, so the tiles it visits
    (full + partial, 128 x 128) cover the area (M4) and exceed it by at most the diagonal's tiles."""
    from torch.nn.attention.flex_attention import create_block_mask

    seq, doc, block = 8192, 1024, 128
    ids = torch.arange(seq) // doc

    def document_causal(b, h, q, kv):  # type: ignore[no-untyped-def]  # torchtune _flex_block_causal_mask_mod
        return (q >= kv) & (ids[q] == ids[kv])

    bm = create_block_mask(document_causal, 1, 1, seq, seq, device="cpu", BLOCK_SIZE=block)
    tiles = int(bm.kv_num_blocks.sum()) + int(bm.full_kv_num_blocks.sum())
    area = row_pairs(seq, doc_len=doc)
    assert area <= tiles * block * block <= area + (seq // block) * block * block / 2
    assert tiles < (seq // block) ** 2 / 4  # far from the causal row's tiles


def test_formula_edges() -> None:
    assert causal_pairs(10, 10) == causal_pairs(10) == 50.0
    assert row_pairs(10, doc_len=20) == 50.0  # one document longer than the row fills it
    with pytest.raises(InputError):
        causal_pairs(10, 0)
    with pytest.raises(InputError):
        row_pairs(10, doc_len=0)


H100 = "h100-sxm"


def _attention_flops(model: str, fields: dict[str, object]) -> dict[str, object]:
    d = training_duration_for(load_model(model), builtin_catalog().devices[H100], 1, 1e9, fields)
    return {a.name: a.value for a in d.assumptions}


def test_sliding_layers_are_timed_at_their_window_with_flash_attn() -> None:
    """Mistral 7B v0.1 (sliding_window 4096 on every layer) at 32k tokens: flash-attn's window_size skips the tiles
    outside the window (a = 4096 - 4096^2 / 65536 = 3840 keys per query, not 16384); SDPA gets the window as an
    explicit mask (training_activations.needs_mask), which its flash backend refuses (torch sdp_utils.cpp
    check_for_attn_mask): mem-efficient runs every tile of the bias-masked scores, s keys per query."""
    spec = load_model("mistral-7b-v0.1")
    assert set(spec.layer_types) == {"sliding"} and spec.sliding_window == 4096
    fl = flops_per_token(spec, "full", 32768)
    base = dict(method="full", micro_batch=1, seq_len=32768)
    flash = _attention_flops("mistral-7b-v0.1", dict(base, attention="flash"))
    assert flash["attention_keys_per_query"] == 3840.0
    assert flash["attention_flops_per_token"] == round(14 * spec.num_layers * fl.attention_width * 3840)
    sdpa = _attention_flops("mistral-7b-v0.1", dict(base, attention="sdpa"))
    assert "attention_keys_per_query" not in sdpa and sdpa["attention_masked_layers"] == spec.num_layers
    assert sdpa["attention_flops_per_token"] == round(2 * fl.attention_executed("flash"))  # non-causal: every tile
    short = _attention_flops("mistral-7b-v0.1", dict(base, attention="sdpa", seq_len=4096))  # within the window
    assert "attention_masked_layers" not in short


def test_sdpa_masks_only_the_sliding_layers() -> None:
    """Gemma 3 1B (5 sliding layers of window 512 to 1 global): at 4096 tokens under SDPA the sliding layers get a
    mask and run every tile; the global ones stay causal on the flash backend."""
    spec = load_model("gemma-3-1b-it")
    n_sliding, window = spec.layer_types.count("sliding"), spec.sliding_window
    assert n_sliding and window is not None and window < 4096
    got = _attention_flops("gemma-3-1b-it", dict(method="full", micro_batch=1, seq_len=4096, attention="sdpa"))
    assert got["attention_masked_layers"] == n_sliding
    d, s, n_full = flops_per_token(spec, "full", 4096).attention_width, 4096, spec.attention_layers - n_sliding
    assert got["attention_flops_per_token"] == round(14 * d * (n_full * s / 2 + n_sliding * s))


def test_packed_documents_are_timed_per_document_when_given() -> None:
    base = dict(method="full", micro_batch=1, seq_len=8192, packing=True, attention="flash")
    unstated = _attention_flops("llama-3.1-8b", base)
    assert unstated["doc_len"] == 8192  # named: one document per row
    given = _attention_flops("llama-3.1-8b", dict(base, doc_len=1024))
    assert given["attention_keys_per_query"] == 512.0
    assert given["attention_flops_per_token"] == pytest.approx(unstated["attention_flops_per_token"] / 8, abs=1)
    # full recomputation: the recomputed forwards run over the same documents
    ckpt = _attention_flops("llama-3.1-8b", dict(base, doc_len=1024, grad_checkpointing="full"))
    spec = load_model("llama-3.1-8b")
    fl = flops_per_token(spec, "full", 8192, "full")
    assert ckpt["attention_flops_per_token"] == round(fl.attention_executed("flash", attended=(512.0, 512.0)))


def test_packed_documents_under_sdpa_are_not_skipped() -> None:
    """transformers' SDPA path gives packed rows one causal mask (no varlen): doc_len changes nothing, and says so."""
    base = dict(method="full", micro_batch=1, seq_len=8192, packing=True, attention="sdpa")
    unstated = _attention_flops("llama-3.1-8b", base)
    given = _attention_flops("llama-3.1-8b", dict(base, doc_len=1024))
    assert "attention_keys_per_query" not in given and given["doc_len_masked"] is False
    assert given["attention_flops_per_token"] == unstated["attention_flops_per_token"]


def test_doc_len_needs_packing_and_fits_the_row() -> None:
    with pytest.raises(InputError, match="needs packing"):
        TrainingWorkload(doc_len=512)
    with pytest.raises(InputError, match="exceeds seq_len"):
        TrainingWorkload(packing=True, seq_len=1024, doc_len=2048)
    assert TrainingWorkload(packing=True, doc_len="1k").doc_len == 1024  # read as --seq reads it (4k = 4096)



def test_megatron_core_sliding_layers_are_timed_at_their_window() -> None:
    """GPT-OSS-120B under Megatron-Core (precision megatron-bf16, Megatron-Bridge's GPT-OSS recipe): Megatron hands
    Transformer Engine each sliding layer's window as ``window_size`` = (sliding_window - 1, 0) (Megatron-Bridge
    gpt_oss_bridge.py line 87 @f9b6319e; Megatron-LM transformer_engine.py lines 2163-2171 @d98e8a64), never an
    explicit [s, s] mask, so no layer is timed over every tile. Truth: that band mask enumerated pair by pair (query i
    keeps keys i - 127 .. i), less the half diagonal cells the area convention leaves out (see
    test_sliding_window_pairs_are_transformers_masks), against the causal row of the full layers."""
    from llmsizer.formulas.training_activations import ActivationSetup, needs_mask

    spec = load_model("gpt-oss-120b")
    s, window = 4096, spec.sliding_window
    assert window == 128 and set(spec.layer_types) == {"sliding", "full"}
    i = torch.arange(s).view(-1, 1)
    j = torch.arange(s).view(1, -1)
    # keys per query in the area convention: the kept pairs less the half diagonal cells, min(s, window) / 2
    band = (int(((j <= i) & (j >= i - (window - 1))).sum()) - window / 2) / s
    causal = (int((j <= i).sum()) - s / 2) / s
    kinds = [t for t in spec.layer_types if t != "none"]
    mean = sum(band if t == "sliding" else causal for t in kinds) / len(kinds)
    got = _attention_flops("gpt-oss-120b", dict(method="full", micro_batch=1, seq_len=s, precision="megatron-bf16"))
    assert "attention_masked_layers" not in got
    assert got["attention_keys_per_query"] == round(mean, 1)
    d = flops_per_token(spec, "full", s).attention_width
    n_sliding = kinds.count("sliding")
    assert got["attention_flops_per_token"] == pytest.approx(
        14 * d * (n_sliding * band + (len(kinds) - n_sliding) * causal), rel=1e-9)
    # the memory's rule agrees: no mask tensor under Megatron-Core, one under transformers' SDPA
    layer = spec.layer_types.index("sliding")
    assert not needs_mask(spec, layer, ActivationSetup(batch=1, seq=s, megatron_te=True))
    assert needs_mask(spec, layer, ActivationSetup(batch=1, seq=s))

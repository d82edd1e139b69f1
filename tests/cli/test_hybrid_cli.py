"""Hybrid models through the real CLI entry point: the state is its own breakdown row, the layer schedule is shown,
and fit answers through the same core (exit 1 when it does not fit)."""

import json
from pathlib import Path

from cli_capture import run_cli


def test_infer_lists_the_recurrent_state_with_formula_and_source():
    r = run_cli("infer", "jamba-1.5-mini", "--context", "8192", "--concurrency", "4", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    items = {i["name"]: i for i in data["items"]}
    st = items["recurrent_state"]
    # Jamba-1.5-Mini: 28 Mamba layers, d_inner 8192, d_state 16, d_conv 4; transformers keeps the conv window in
    # bf16 and the SSM state in fp32: 28 x (8192 x 4 x 2 + 8192 x 16 x 4) x 4 sequences
    assert st["bytes"] == 28 * (8192 * 4 * 2 + 8192 * 16 * 4) * 4
    assert "independent of the context" in st["formula"] and "recurrent_state.py" in st["source"]
    # KV for the 4 attention layers only: 4 x 7936 tokens x 2 x 8 heads x 128 x 2 B x 4 sequences (transformers'
    # peak is the end of the prefill: 8192 - 256 prompt tokens, the default output being min(256, context / 2))
    assert items["kv_cache"]["bytes"] == 4 * (8192 - 256) * 2 * 8 * 128 * 2 * 4
    assert data["details"]["recurrent_layers"] == 28 and data["details"]["attention_layers"] == 4


def test_inspect_shows_the_layer_schedule():
    r = run_cli("inspect", "jamba-1.5-mini")
    assert r.returncode == 0, r.stderr
    assert "mamba mixer on 28 layers, attention on 4" in r.stdout
    assert "RRRRARRR" * 4 in r.stdout  # attention at i % 8 == 4 (attn_layer_period 8, offset 4)


def test_fit_answers_with_the_state_in_the_vllm_pool():
    r = run_cli("fit", "jamba-1.5-mini", "--device", "h100", "--context", "32768", "--concurrency", "8", "--json")
    assert r.returncode == 1, r.stderr  # 96 GiB of bf16 weights do not fit one 80 GB card
    data = json.loads(r.stdout)
    assert data["fits"] is False


def test_vllm_on_a_pure_mamba2_model_counts_sequences_not_token_blocks(tmp_path: Path):
    """No attention layer: vLLM's only KV-cache group is MambaSpec with a block of a whole request
    (model_executor/models/config.py), so the pool holds whole-sequence state pages. It used to print '0 tokens in
    0 blocks'. Mamba2Config defaults (64 layers, expand 2 x hidden 4096, 8 groups x state 128, 128 heads x 64,
    conv 4), vLLM's Mamba-2 state shapes (mamba_utils.mamba2_state_shape): conv (d_inner + 2 x groups x state) x
    (conv - 1), SSM heads x head_dim x state, both in the bf16 model dtype."""
    cfg = {"model_type": "mamba2", "vocab_size": 32768, "hidden_size": 4096, "num_hidden_layers": 64,
           "num_heads": 128, "head_dim": 64, "state_size": 128, "n_groups": 8, "expand": 2, "conv_kernel": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run_cli("infer", str(path), "--engine", "vllm", "--memory", "80GiB", "--concurrency", "8")
    assert r.returncode == 0, r.stderr
    assert "GPU KV cache size" not in r.stdout and "no KV blocks" in r.stdout
    data = json.loads(run_cli("infer", str(path), "--engine", "vllm", "--memory", "80GiB", "--concurrency", "8",
                              "--json").stdout)
    d = data["details"]
    per_seq = 64 * ((2 * 4096 + 2 * 8 * 128) * (4 - 1) * 2 + 128 * 64 * 128 * 2)
    assert d["recurrent_state_pages"] == d["kv_pool_bytes"] // per_seq == d["max_concurrency_at_context"]
    assert f"holds the recurrent state of {d['recurrent_state_pages']:,} sequences" in r.stdout

"""Checkpoints saved by transformers itself (tiny random models): the folder reader against the real thing.

For every supported model_type: the parameters llmsizer counts from config.json equal the tensors
transformers wrote (and torch's own count), the FileWeights bytes equal the files' data sections, and
every decoder layer has bytes. Builds models with torch, so it is marked slow.
"""

from __future__ import annotations

import pytest
from readers_helpers import safetensors_data_size

from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_folder import spec_from_folder

pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BASE = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=2)
MLA = dict(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, n_group=1, topk_group=1)
CONFIGS = {
    "llama": {}, "qwen2": {}, "qwen3": dict(head_dim=32), "mistral": dict(sliding_window=64), "phi3": {},
    "gemma2": dict(head_dim=16), "gemma3_text": dict(head_dim=16), "olmo2": {}, "granite": {},
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=48),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16),
    "deepseek_v2": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                        first_k_dense_replace=1, q_lora_rank=None, **MLA),
    "deepseek_v3": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                        first_k_dense_replace=1, q_lora_rank=32, **MLA),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, head_dim=16, sliding_window=32),
}
BUFFERS = {"deepseek_v3": "e_score_correction_bias"}  # saved, but buffers rather than parameters
KNOWN_BUGS: dict[str, str] = {}  # model_type -> reason for a strict xfail


def _save(model, folder):
    model.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("model_type", [
    pytest.param(mt, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[mt])) if mt in KNOWN_BUGS else mt
    for mt in CONFIGS])
def test_saved_checkpoint_matches_the_architecture(tmp_path, model_type):
    cfg = transformers.AutoConfig.for_model(model_type, **BASE, **CONFIGS[model_type])
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    spec = spec_from_folder(_save(model, tmp_path))
    fw = spec.file_weights
    files = sorted(tmp_path.glob("*.safetensors"))
    assert fw.total_bytes == sum(safetensors_data_size(f) for f in files)
    assert len(fw.layer_bytes) == spec.num_layers and all(fw.layer_bytes)
    assert fw.embedding_bytes and (fw.output_bytes == 0) == spec.tie_word_embeddings
    buffers = sum(b.numel() for n, b in model.named_buffers() if BUFFERS.get(model_type, "\0") in n)
    assert count_params(spec).total == sum(p.numel() for p in model.parameters()) == fw.params - buffers
    assert (fw.note == "") == (buffers == 0), fw.note


def test_gpt_bigcode_layers_are_transformer_h(tmp_path):
    cfg = transformers.GPTBigCodeConfig(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=256)
    model = transformers.GPTBigCodeForCausalLM(cfg)
    spec = spec_from_folder(_save(model, tmp_path))
    assert count_params(spec).total == spec.file_weights.params == sum(p.numel() for p in model.parameters())
    assert all(spec.file_weights.layer_bytes) and spec.file_weights.output_bytes == 0


def test_gemma3_vision_tower_is_in_the_total_but_in_no_decoder_layer(tmp_path):
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=256)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8, vision_use_head=False)
    cfg = transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                    image_token_index=5, boi_token_index=6, eoi_token_index=7)
    model = transformers.Gemma3ForConditionalGeneration(cfg)
    spec = spec_from_folder(_save(model, tmp_path / "mm"))
    fw = spec.file_weights
    assert count_params(spec).total == fw.params == sum(p.numel() for p in model.parameters())
    text_only = transformers.AutoModelForCausalLM.from_config(transformers.Gemma3TextConfig(**text))
    assert fw.layer_bytes == spec_from_folder(_save(text_only, tmp_path / "text")).file_weights.layer_bytes

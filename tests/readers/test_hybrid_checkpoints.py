"""Hybrid and state-space checkpoints saved by transformers itself (tiny random models): the folder reader reads
config.json and the safetensors headers; the parameters it counts equal the tensors written, every decoder layer
(attention, Mamba, Gated DeltaNet or MLP-only) has bytes, and the embedding is found under its family's name."""

from __future__ import annotations

import pytest
from readers_helpers import safetensors_data_size

from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_folder import spec_from_folder
from oracle_utils import HYBRID_TINY, build

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("family", sorted(HYBRID_TINY))
def test_saved_hybrid_checkpoint_matches_the_architecture(tmp_path, family):
    model = build(HYBRID_TINY[family], device="cpu")
    model.save_pretrained(tmp_path)
    spec = spec_from_folder(tmp_path)
    fw = spec.file_weights
    assert fw.total_bytes == sum(safetensors_data_size(f) for f in sorted(tmp_path.glob("*.safetensors")))
    # Nemotron-H's router saves e_score_correction_bias, a buffer (the reader notes it), as DeepSeek-V3's does
    buffers = sum(b.numel() for n, b in model.named_buffers() if "e_score_correction_bias" in n)
    assert count_params(spec).total == sum(p.numel() for p in model.parameters()) == fw.params - buffers
    assert len(fw.layer_bytes) == spec.num_layers and all(fw.layer_bytes)
    assert fw.embedding_bytes

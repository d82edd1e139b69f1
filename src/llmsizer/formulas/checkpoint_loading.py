"""Bytes alive on top of the weights while transformers loads a checkpoint that stores a tied matrix twice [bytes].

A model with tied input/output embeddings (``tie_word_embeddings``) holds one matrix under two names
(``model.embed_tokens.weight`` and ``lm_head.weight``). A checkpoint may still store it under both: AutoAWQ up to
0.2.6 writes ``self.model.state_dict()`` -- every name of a shared tensor -- after cloning each entry so that
safetensors accepts it (AutoAWQ awq/models/base.py ``save_quantized`` L302-312 @ v0.2.6 = e683bfd: ``shard_checkpoint(
self.model.state_dict(), ...)``, ``shard = {k: v.clone().contiguous() ...}``, ``save_file(shard, ...)``); 0.2.7
moved to ``huggingface_hub.save_torch_state_dict`` (base.py L305 @ v0.2.7), which treats shared tensors itself
(transformers issue #35080), so the copy is a property of the file, not of the AWQ format.

transformers loads every name of the file the model expects, tied or not, into its own tensor on the target device
(transformers 4.46.0 modeling_utils.py ``_load_state_dict_into_meta_model`` L908-992: each expected key is cast to
the load dtype and placed with accelerate's ``set_module_tensor_to_device``, which replaces the module's parameter
by a new one), and ties the two names again only after the last tensor is in (``from_pretrained`` L4244-4245,
``model.tie_weights()`` -> ``_tie_or_clone_weights`` L2031-2036: ``output_embeddings.weight =
input_embeddings.weight``), which frees the second copy. So at the end of loading, before that tie, the device holds
the weights W (one copy of the tied matrix) plus the stored copy:

    M_load = W + c * T                                                                                 (L1)

with T the bytes of the tied matrix in the load dtype and c the number of extra names the file stores it under
(1 for an AutoAWQ <= 0.2.6 checkpoint of a tied model, 0 for a file written by ``save_pretrained``, which drops
tied names). ``torch.cuda.max_memory_allocated`` read after ``generate()`` includes it, so it is the peak whenever
generation adds less than c * T.
"""

from __future__ import annotations

from ..errors import InputError


def stored_tied_copy_bytes(tied_matrix_bytes: int, extra_names_in_file: int) -> int:
    """Eq. (L1)'s c * T: the bytes loaded, and held until the re-tie, for the extra names of a tied matrix.

    ``tied_matrix_bytes`` [bytes]: T, the tied matrix in the load dtype (vocab x hidden x element size).
    ``extra_names_in_file``: c, the names beyond the first that the checkpoint stores the matrix under.
    """
    if tied_matrix_bytes < 0 or extra_names_in_file < 0:
        raise InputError(f"tied_matrix_bytes and extra_names_in_file must not be negative, got {tied_matrix_bytes} "
                         f"and {extra_names_in_file}")
    return tied_matrix_bytes * extra_names_in_file

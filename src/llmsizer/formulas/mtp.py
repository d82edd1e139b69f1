"""Multi-token-prediction (MTP / NextN) modules: the parameters and stored bytes a checkpoint holds after its decoder
layers.

DeepSeek-V3 / V3.1 / V3.2 / R1 and GLM-4.5 / 4.7 checkpoints store ``num_nextn_predict_layers`` (config.json) MTP
modules as ``model.layers.{num_hidden_layers + i}``. transformers builds none of them (it ignores those keys on
load: ``DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected = [r"model\\.layers\\.61.*"]``,
models/deepseek_v3/modeling_deepseek_v3.py L552; ``Glm4MoePreTrainedModel``: ``model\\.layers\\.92.*`` and
``model\\.layers\\.46.*``, models/glm4_moe/modeling_glm4_moe.py L461, transformers 5.24), so ``count_params`` (the
model transformers builds) leaves them out. vLLM's speculative-decoding modules read what each holds
(vllm/model_executor/models/deepseek_mtp.py @ 03356f8cb59ba27f3d0ce8866d7516b5e32cff65 L51-57,
``DeepSeekMultiTokenPredictorLayer``; glm4_moe_mtp.py @ 028aedf62adee9d2a1e99d4cda7c1ce1c997c8cc
``Glm4MoeMultiTokenPredictorLayer``, the same five parts)::

    P_mtp = n_mtp x (P_block + 2h.h + 3h + 2V.h)                                          (1)

- ``mtp_block``: one full decoder layer at index num_hidden_layers (``DeepseekV2DecoderLayer`` /
  ``Glm4MoeDecoderLayer`` built with that prefix: an MoE layer, as index >= first_k_dense_replace). Its tensors are
  those of the model's last decoder layer (``P_block``: the same kind, ``tensors.layer_groups``);
- ``eh_proj``: Linear(2h -> h, no bias), the 2h.h term;
- ``enorm``, ``hnorm`` and ``shared_head.norm``: three RMSNorm weights of h (deepseek_mtp.py L34 and L51-52);
- ``embed_tokens`` and ``shared_head.head``: a V x h embedding (the ``VocabParallelEmbedding`` of
  ``DeepSeekMultiTokenPredictor``) and a V x h output head (``SharedHead.head``, deepseek_mtp.py L35-37). DeepSeek's README_WEIGHTS.md calls them shared
  with the main model ("11.5B unique parameters (excluding the shared 0.9B Embedding and 0.9B output Head)"), but the
  checkpoint stores both again: a tensor listing of DeepSeek-R1's safetensors (public GitHub file, search-index id
  62464985633) shows ``model.layers.61.embed_tokens.weight`` and ``model.layers.61.shared_head.head.weight``
  [129280, 7168] bf16, 1.73 GiB each, and DeepSeek-V3's README: "The total size of DeepSeek-V3 models on Hugging
  Face is 685B, which includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module
  weights" (14B = 11.6B unique + the two 0.93B copies). GLM-4.5's checkpoint holds ``model.layers.92.embed_tokens``
  and ``shared_head.head`` too (vLLM issue: GLM-4.6 lacks them and fails where GLM-4.5 loads).

Stored bytes (the checkpoint as published, its stored format)::

    B_mtp = n_mtp x (B_block(fmt) + (2h.h + 3h + 2V.h) x e)                               (2)

``B_block``: the last decoder layer's bytes in the stored format (``weight_bytes``' layer bytes, with the format's
scales); ``e``: the element size of the format's unquantized tensors, 2 for a bf16/fp16 checkpoint and for an FP8
one: DeepSeek's FP8 checkpoint keeps eh_proj, the norms, the embedding and the head in bf16 (the listing above).

Serving loads none of it unless speculative decoding with the MTP module is asked for: vLLM's main-model loaders
skip every weight of a layer >= num_hidden_layers (``get_spec_layer_idx_from_weight_name`` ... ``continue  # skip
spec decode layers for main model`` in ``DeepseekV2ForCausalLM.load_weights``,
vllm/model_executor/models/deepseek_v2.py @ b863fe5bf4e19680572603b4e166faefc5725551, and
``Glm4MoeForCausalLM.load_weights``, glm4_moe.py @ a4cd9d0d28bdb41db8dfe0acdafac2bf2f608630). Training trains them
only where the framework builds them (Megatron-LM with ``--mtp-num-layers``); transformers ignores them (above).
"""

from __future__ import annotations

from ..specs import ModelSpec
from .tensors import layer_groups
from .weight_formats import DTYPE_BYTES, OTHER_BYTES_DEFAULT, normalize_format, stored_format, weight_bytes

# the config model types whose num_nextn_predict_layers names the MTP modules of eq. (1) (vLLM's DeepSeekMTP serves
# deepseek_v3 and deepseek_v32, Glm4MoeMTP glm4_moe); another model's MTP field (Nemotron-H's hybrid MTP,
# Qwen3-Next's mtp_*) has another layout and is not counted
MTP_MODEL_TYPES = frozenset({"deepseek_v3", "deepseek_v32", "glm4_moe"})


def _block_params(spec: ModelSpec) -> int:
    """P_block of eq. (1): the parameters of the model's last decoder layer (the MTP block's kind)."""
    last = spec.num_layers - 1
    for _, tpl, members in layer_groups(spec)[1]:
        if last in members:
            return sum(t.numel for t in tpl)
    raise AssertionError("every decoder layer is in one group")  # pragma: no cover


def _extra_elements(spec: ModelSpec) -> int:
    """2h.h + 3h + 2V.h of eq. (1): eh_proj, the three norms, the embedding and output head copies."""
    h, v = spec.hidden_size, spec.vocab_size
    return 2 * h * h + 3 * h + 2 * v * h


def mtp_params(spec: ModelSpec) -> int:
    """Eq. (1): parameters of the checkpoint's MTP modules (0 without any)."""
    if not spec.mtp_layers:
        return 0
    return spec.mtp_layers * (_block_params(spec) + _extra_elements(spec))


def mtp_unique_params(spec: ModelSpec) -> int:
    """Eq. (1) without the 2V.h term: the MTP modules' parameters not copied from the main model (its embedding and
    output head, which the checkpoint stores again): DeepSeek's "11.5B unique parameters (excluding the shared 0.9B
    Embedding and 0.9B output Head)" (0 without any)."""
    if not spec.mtp_layers:
        return 0
    return mtp_params(spec) - spec.mtp_layers * 2 * spec.vocab_size * spec.hidden_size


def mtp_bytes(spec: ModelSpec, fmt: str, group_size: int) -> int:
    """Eq. (2): bytes of the MTP modules in the checkpoint's stored format ``fmt`` (0 without any)."""
    if not spec.mtp_layers:
        return 0
    block = weight_bytes(spec, fmt, group_size).layer_bytes[-1]
    e = DTYPE_BYTES.get(fmt, OTHER_BYTES_DEFAULT)
    return spec.mtp_layers * (block + _extra_elements(spec) * e)


def stored_file_bytes(spec: ModelSpec, fmt: str, group_size: int) -> tuple[int, int]:
    """(bytes of the model's files in ``fmt``, of which MTP modules): the weights in ``fmt`` plus eq. (2) when ``fmt``
    is the checkpoint's own stored format (the files as published hold the MTP modules). A model read from its
    files has their exact bytes already (``file_weight_bytes``); a ready-made file in another format (a GGUF, AWQ or
    GPTQ build) adds none: converters differ in whether they keep them (llama.cpp's convert_hf_to_gguf.py ``DeepseekV2Model``
    drops every layer >= num_hidden_layers: "skip Multi-Token Prediction (MTP) layers")."""
    main = weight_bytes(spec, fmt, group_size).total
    if spec.file_weights is not None or normalize_format(fmt) != normalize_format(stored_format(spec)[0]):
        return main, 0
    extra = mtp_bytes(spec, fmt, group_size)
    return main + extra, extra

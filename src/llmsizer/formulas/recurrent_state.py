"""Per-sequence state of recurrent mixers (Mamba-1, Mamba-2, Gated DeltaNet): fixed size, whatever the context.

A recurrent layer carries, per sequence, the last inputs of its causal convolution and the SSM / delta-rule state
(``specs.RecurrentSpec``):

    conv_state_bytes  = conv_channels x conv_len x conv_bytes                                            (1)
    ssm_state_bytes   = d_inner x d_state x ssm_bytes                                                    (2)
    state_bytes       = (1 + 2) x recurrent_layers x sequences                                           (3)

conv_channels = d_inner + 2 x n_groups x d_state (Mamba-2: x, B, C -- Dao & Gu 2024, arXiv 2405.21060, section 7;
Gated DeltaNet: q, k, v -- Yang et al. 2024, arXiv 2412.06464) or d_inner (Mamba-1: x only -- Gu & Dao 2023,
arXiv 2312.00752, section 3.4). The SSM state is [d_inner, d_state] (Mamba-1), [heads, head_dim, d_state]
(Mamba-2) or [value heads, key head dim, value head dim] (Gated DeltaNet): d_inner x d_state elements each.
``conv_len`` is what each engine keeps of the kernel window:

- transformers 5.24: ``d_conv`` columns (``cache_utils.py`` ``LinearAttentionLayer.lazy_initialization`` L1226-1230
  allocates ``(*conv_states.shape[:-1], conv_kernel_size)`` in the conv input's dtype; ``update_conv_state``
  L1244-1282 keeps the last ``conv_kernel_size``), the recurrent state ``zeros_like`` what the mixer returns
  (``update_recurrent_state`` L1284-1298): fp32 on the torch path of every family here, also for bf16 models
  (measured, tests/formulas/test_recurrent_state_forward.py);
- vLLM: ``d_conv - 1`` columns (``vllm/model_executor/layers/mamba/mamba_utils.py``
  ``MambaStateShapeCalculator.mamba1_state_shape`` / ``mamba2_state_shape`` / ``gated_delta_net_state_shape``:
  ``conv_kernel - 1``), both states in the model dtype unless ``mamba_ssm_cache_dtype`` says otherwise
  (``MambaStateDtypeCalculator._mamba_state_dtype``); one page of sum(prod(shape) x dtype size) per request and layer
  (``vllm/v1/kv_cache_interface.py`` ``MambaSpec.page_size_bytes``);
- llama.cpp: ``d_conv - 1`` columns (``src/llama-hparams.cpp`` ``n_embd_r`` L127-142: "the first column of the
  conv_state is shifted out"; ``n_embd_s`` L144-152 = d_state x d_inner), both F32
  (``src/llama-model.cpp`` ``create_memory``: ``GGML_TYPE_F32, GGML_TYPE_F32``), one row per sequence slot
  (``src/llama-memory-recurrent.cpp`` L101-103: ``n_rows = mem_size x (1 + n_rs_seq)``, mem_size = max(1, n_seq_max)).

Under tensor parallelism vLLM shards a layer's state over the GPUs: each holds the conv channels and the SSM
heads / channels of its own shards (vllm-project/vllm@2afe1e8573cf51b73569ae1d35f59078a2032a91
``vllm/model_executor/layers/mamba/mamba_utils.py`` ``MambaStateShapeCalculator``: ``divide(intermediate_size,
tp)`` (Mamba-1), ``divide(conv_dim, tp)`` and ``divide(num_heads, tp)`` (Mamba-2), ``divide(conv_dim, tp)`` and
``divide(num_v_heads, tp)`` (Gated DeltaNet)). Mamba-2 replicates its B/C groups when n_groups is not a multiple of
tp, so every head's shard carries its group (``extra_groups_for_head_shards``: + tp - n_groups, e.g. 1 group -> tp),
which both engines allow only for one group: vLLM asserts ``(n_groups % self.tp_size) == 0 or n_groups == 1``
(vllm 0.23.0 wheel, model_executor/layers/mamba/mamba_mixer2.py L289-292, "If tensor parallel world size does not
divide num_groups, then num_groups must equal 1"), SGLang the same (sglang 0.5.6 wheel,
srt/layers/attention/mamba/mamba.py L166-169); any other layout is refused (``extra_groups``, the one rule):

    layer_state_per_gpu = (conv_channels + 2 x extra_groups x d_state) / tp x conv_len x conv_bytes
                          + d_inner x d_state / tp x ssm_bytes                                           (4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..frozen import fast_init
from ..specs import ModelSpec


@fast_init
@dataclass(frozen=True)
class RecurrentState:
    total_bytes: int  # eq. (3)
    conv_bytes: float  # eq. (1), one layer and sequence
    ssm_bytes: float  # eq. (2), one layer and sequence
    layers: int  # recurrent layers
    sequences: int
    conv_len: int  # kernel columns kept

    @property
    def per_sequence_bytes(self) -> int:
        return int(math.ceil((self.conv_bytes + self.ssm_bytes) * self.layers))

    @property
    def per_layer_bytes(self) -> float:
        """One layer's state of one sequence (a vLLM Mamba page before padding)."""
        return self.conv_bytes + self.ssm_bytes


def recurrent_state(spec: ModelSpec, sequences: int, conv_bytes: float, ssm_bytes: float,
                    conv_window: int = 0) -> RecurrentState:
    """State of ``sequences`` sequences (eqs. 1-3). conv_bytes / ssm_bytes [bytes per element];
    conv_window: columns kept beyond ``d_conv - 1`` (transformers 1, vLLM and llama.cpp 0)."""
    if sequences < 0:
        raise InputError(f"sequences must not be negative (got {sequences})")
    r = spec.recurrent
    if r is None or not spec.recurrent_layer_count:
        return RecurrentState(0, 0.0, 0.0, 0, sequences, 0)
    conv_len = max(r.d_conv - 1 + conv_window, 0)
    conv = r.conv_channels * conv_len * conv_bytes
    ssm = r.state_elements * ssm_bytes
    layers = spec.recurrent_layer_count
    return RecurrentState(int(math.ceil((conv + ssm) * layers * sequences)), conv, ssm, layers, sequences, conv_len)


def layer_state_bytes_per_device(spec: ModelSpec, tp: int, conv_bytes: float, ssm_bytes: float,
                                 conv_window: int = 0) -> float:
    """One recurrent layer's state of one sequence on one of ``tp`` tensor-parallel GPUs (eq. 4; tp 1: eqs. 1 + 2).
    conv_bytes / ssm_bytes [bytes per element]; conv_window as :func:`recurrent_state`. 0 without recurrent layers."""
    r = spec.recurrent
    if r is None or not spec.recurrent_layer_count:
        return 0.0
    if tp < 1:
        raise InputError(f"tensor_parallel must be at least 1 (got {tp})")
    extra = extra_groups(r.n_groups, tp, spec.name) if r.kind == "mamba2" else 0
    conv_channels = r.conv_channels + 2 * extra * r.d_state
    conv_len = max(r.d_conv - 1 + conv_window, 0)
    return (math.ceil(conv_channels / tp) * conv_len * conv_bytes
            + math.ceil(r.state_elements / tp) * ssm_bytes)


def mamba2_groups_refusal(groups: int, tp: int, name: str = "the model") -> str | None:
    """Why vLLM and SGLang will not shard ``groups`` Mamba-2 B/C groups over ``tp`` GPUs, or None: tp must divide
    the groups unless there is one (mamba_mixer2.py L289-292 @vllm 0.23.0, mamba.py L166-169 @sglang 0.5.6)."""
    if tp > 1 and groups % tp and groups != 1:
        return (f"tensor_parallel {tp} does not divide the {groups} Mamba-2 groups of {name} (vLLM and SGLang "
                "shard the groups evenly or replicate a single group: mamba_mixer2.py L289-292)")
    return None


def extra_groups(groups: int, tp: int, name: str = "the model") -> int:
    """Eq. (4)'s extra groups: vLLM's ``extra_groups_for_head_shards`` (0 where tp divides the groups, else tp -
    groups: 1 group -> tp), for a layout the engines accept (else InputError, :func:`mamba2_groups_refusal`)."""
    refusal = mamba2_groups_refusal(groups, tp, name)
    if refusal is not None:
        raise InputError(refusal)
    return 0 if groups % tp == 0 else tp - groups

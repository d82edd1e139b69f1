"""Activations a training step keeps for the backward pass, per decoder layer, for the model's real structure.

**The textbook count.** Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", arXiv 2205.05198), section 4.1, eq. 1: one GPT layer (16-bit activations, dropout everywhere)
stores

    s b h (34 + 5 a s / h)  bytes                                                          (K1)

(attention 11 sbh + 5 a s^2 b, MLP 19 sbh, two LayerNorms 4 sbh); with tensor parallelism t, eq. 2:
s b h (10 + 24/t + 5 a s/(h t)); with sequence parallelism as well, eq. 4: s b h/t (34 + 5 a s/h).
:func:`korthikanti_layer_bytes` implements them for comparison.

**What a Hugging Face decoder actually keeps** (counted from the tensors autograd saves in transformers 5
``modeling_llama.py`` / ``modeling_qwen3_moe.py`` / ``integrations/sdpa_attention.py`` / ``integrations/moe.py``
under PyTorch 2.x, and checked against measured training steps in ``tests/training``). With t = b s tokens,
q_w = heads x head_dim, kv_w = kv_heads x head_dim, I = intermediate size, c = compute element size,
r = residual-stream element size (the embedding's dtype):

- RMSNorm (``hidden.to(float32) ... weight * hidden.to(input_dtype)``): its fp32 input (4 t h; the residual
  itself when it is fp32), 1/rms (4 t) and, when the norm weight is trained, the normalised tensor (r t h).
  K1 counts 2 sbh per LayerNorm (its 16-bit input only).
- Projection inputs: every linear whose weight (or LoRA adapter) is trained saves its input. Without
  autocast q/k/v share one saved tensor (c t h), as do gate/up; under ``torch.autocast`` each linear casts
  its fp32 input itself, so q, k and v keep three half-precision copies (3 c t h) and gate/up two. Autocast
  also keeps the half-precision copy of every weight it casts (2 B/param, the '6 bytes of weights' of the
  HF mixed-precision accounting) until that layer's backward. K1 has one shared 2 sbh input.
- Attention, SDPA/flash with no mask: rotated q (c t q_w), rotated k and v (2 c t kv_w: GQA keeps the
  smaller K/V, K1 assumes MHA), the output (c t q_w) and the fp32 log-sum-exp (4 b heads s); no s^2 term
  (Dao et al. 2022, FlashAttention, section 3.1). With a mask (sliding window shorter than the sequence,
  packing) transformers repeats K/V to every head and SDPA keeps the float mask per layer (c b s^2).
  FlexAttention (attention 'flex'; torch 2.13.0 ``_higher_order_ops/flex_attention.py`` lines 797-810,
  ``FlexAttentionAutogradOp.forward``: ``save_values_for_backward`` of query, key, value, out, logsumexp, max_scores,
  the block mask's tensors and the mask_mod's buffers): the flash terms (K/V at their own width: enable_gqa) plus the
  fp32 row maxima, and no s^2 term::

      flex per layer:  c t (q_w + 2 kv_w + o_w) + 4 b heads s (log-sum-exp) + 4 b heads s (max_scores)         (FX1)
      shared:  4 b (n + n^2) x 4 B (kv_num_blocks, kv_indices, full_kv_*, q_*, full_q_*: int32 [b, 1, n(, n)],
               n = ceil(s / 128)) + 8 b s (torchtune's int64 document ids, with packing)                   (FX2)

  (measured in tests/training/test_flex_attention.py on a real CPU forward of ``flex_attention``).
  Eager: q, the transposed K copy, the repeated V and the output copy (4 c t q_w) plus the fp32 softmax
  (4 b heads s^2) and its cast to the compute dtype (c b heads s^2); K1's 5 a s^2 b also has the dropout mask
  (LLMs train with attention_dropout 0: no mask is made).
- SwiGLU MLP ``down(act(gate(x)) * up(x))`` (Shazeer 2020): act input, act output, up output and the product
  (4 c t I); K1's GeLU MLP keeps 2 x 4h-wide tensors + a dropout mask (19 sbh). GeLU MLPs here keep 2 c t I.
  Megatron-Core (``st.megatron_te``; NVIDIA/Megatron-LM @d98e8a64) runs a dense MLP's and a shared expert's SwiGLU
  as one autograd function (``MLP.forward``, transformer/mlp.py lines 308-317, ``bias_swiglu_impl``; the
  ``bias_activation_fusion`` that Megatron-LM's default ``--bias-swiglu-fusion`` sets, training/arguments.py lines
  2895-2898 and argument_utils.py lines 314-317; ``SharedExpertMLP.forward`` calls ``MLP.forward``,
  moe/shared_experts.py line 202). ``SwiGLUFunction`` saves only its input, fc1's [t, 2I] output
  (fusions/fused_bias_swiglu.py lines 232-235), and TE's row-parallel fc2 (``_Linear``, no input all-gather) saves its
  input as it comes in 16-bit training (NVIDIA/TransformerEngine @d0067d0d transformer_engine/pytorch/module/linear.py
  lines 438-439, 619-621)::

      fused SwiGLU MLP  (2 + 1) c t I / tp                                                                (S1)

  Not modelled: the unfused ``glu`` (mlp.py lines 320-334, ``--no-bias-swiglu-fusion``), which keeps 5 c t I: silu's
  input (a view of fc1's output, whose 2I storage it keeps), silu's output, ``x_linear + glu_linear_offset`` (a new
  tensor even at the default offset 0.0, transformer_config.py line 231) and fc2's input;
  fp8 (TE saves fc2's input quantized, 1 B per element, linear.py lines 428-436, 616; ``activation_func_fp8_input_store``
  the fused function's input in fp8, fused_bias_swiglu.py line 232); llmsizer's Megatron precisions are bf16 / fp16.
- TiledMLP (``st.mlp_shards`` > 0; Arctic Long Sequence Training, Bekman et al. 2025, arXiv 2506.13996 section
  3.2; DeepSpeed ``deepspeed/runtime/sequence_parallel/ulysses_sp.py`` @edaa7221 ``TiledMLP``, lines 943-1062, applied
  to a model's MLP class by ArcticTraining ``tiled_mlp_compute``): the dense gated MLP runs over ``ceil(s / h)``
  sequence shards under ``torch.no_grad`` (:func:`tiled_mlp_shards`) and saves only its input::

      tiled MLP per layer:  r t h                                                                      (TM1)

  each shard's tensors exist inside the MLP's backward only, one shard at a time (eq. TM2,
  :func:`tiled_mlp_backward_bytes`).
- MoE (grouped_mm experts, transformers ``integrations/moe.py``): router input, fp32 router probabilities
  (4 t E), then for the S = t k routed token copies: gathered inputs (S h), gate_up output (2 S I), act
  output and product (2 S I) and the expert output kept for the routing-weight product (S h), in the
  *weight* dtype (grouped_mm is not autocast-enabled: the inputs are cast to the weights' dtype). With
  Nemotron-H's ``moe_latent_size`` L the experts read and write L-wide tensors, and fc2_latent_proj keeps its
  L-wide input; a router that upcasts its input (DeepSeek, GLM-4.5, Nemotron-H) keeps that fp32 copy (4 t h);
  the block input is one tensor shared by the router, the shared expert and fc1_latent_proj (``moe_saved_terms``).
- Qwen3-Next (transformers 5.24 modeling_qwen3_next.py; measured in tests/training/test_qwen3_next_saved_tensors.py):
  its Gated DeltaNet layers keep what :func:`gated_deltanet_saved_terms` lists (eqs. DN1-DN3: flash-linear-attention
  on a GPU, the fp32 torch fallback on a CPU) instead of attention tensors. Its gated attention
  (``Qwen3NextAttention.forward``, lines 259-304: q_proj makes the query and a gate, ``attn_output * sigmoid(gate)``
  before o_proj) keeps three more [t, q_w] tensors: the reshaped attention output, the sigmoid and their product,
  o_proj's input::

      3 t q_w c                                                                                           (DN4)

  and its MoE block scales the shared expert by ``sigmoid(shared_expert_gate(x))`` (line 865; Qwen2-MoE too), whose
  product keeps the shared expert's output and the sigmoid: t (h + 1) c (DN5). Qwen3NextRMSNorm multiplies by
  ``1 + weight`` in fp32 before its cast (lines 135-140): eq. N3, for the q/k norms too.
- Mamba layers (Nemotron-H, Falcon-H1, Granite-4.0-H, Mamba-2 models; Jamba's Mamba-1): the mixer keeps what
  :func:`mamba_layer_terms` lists (formulas/mamba_activations.py, eqs. M1/M2 and J1/J2: mamba_ssm's fused kernels on
  a CUDA GPU, ``st.mamba_path`` 'cuda-kernels'; transformers' torch reference functions elsewhere, 'torch'; measured
  in tests/training/test_mamba_saved_tensors.py); attention only where the layer also attends (Falcon-H1).
- Parallel blocks (``spec.parallel_block``: Falcon, Phi, GPT-NeoX; transformers 5.24 modeling_falcon.py,
  modeling_phi.py, modeling_gpt_neox.py, traced with saved_tensors_hooks): both branches read the layer input x.
  With one norm (Falcon-7B, Phi-2) attention and MLP share its output (one saved tensor for q/k/v and fc1); with two
  (GPT-NeoX, Falcon-40B) the second LayerNorm saves the same x (only its own mean/rstd are new) and its output. No
  residual sum is normed in the middle of the layer. Further, per family: GPT-NeoX passes SDPA a value that is a
  view of the fused qkv output (``qkv.chunk(3)``), so the saved V keeps the whole 3 x q-wide storage
  (``spec.value_view_of_qkv``); Falcon's multi-query SDPA call (71 query heads, 1 K/V head, no ``enable_gqa``) is
  not accepted by the fused kernels and runs torch's math kernel, which keeps q, the K^T and V copies expanded to
  every head, in fp32 (it upcasts 16-bit inputs while ``allow_fp16_bf16_reduction_math_sdp`` is off, the
  default), and the fp32 softmax probabilities (``spec.math_attention``); Falcon's new decoder architecture
  broadcasts K/V to every query head before SDPA (``spec.kv_expanded_in_attention``: full-width K and V saved)
  and hands SDPA a materialised causal mask, saved per layer (``spec.attention_mask_materialised``); partial rotary
  (``torch.cat((q_rot, q_pass))``, Phi, GPT-NeoX) makes q contiguous head-major, so the attention output is too and
  its ``transpose(1, 2)`` before the output projection is a copy that projection keeps
  (``spec.attention_output_copy``; with full rotary q keeps the token-major layout of the projection and the
  transpose is free); ``gelu_new``
  (NewGELUActivation, activations.py: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` in Python ops)
  keeps x (pow), the tanh output, 0.5 x and 1 + tanh: 3 t I more than a fused GELU (``spec.mlp_act_python``); Phi's
  ``resid_dropout`` keeps one mask per branch output (2 t h x ``dropout_mask`` B, ``spec.residual_dropout``), as
  GPT-2's sequential block does (GPT2Attention.resid_dropout and GPT2MLP.dropout after each c_proj, modeling_gpt2.py).
- Gemma 3n (``spec.gemma3n``): AltUp's n streams, the per-layer inputs, LAuReL and the fp32 normalised tensor of
  every Gemma3nRMSNorm (``gemma3n_saved_terms`` per layer, ``gemma3n_model_terms`` around the layers); a K/V-sharing
  layer keeps no k/v of its own (it reads the storages an earlier layer saved) and has no k_norm.
- Rotary cos/sin (2 r s head_dim, shared by all layers: with no position_ids LlamaModel.forward makes
  ``arange(s).unsqueeze(0)``, and LlamaRotaryEmbedding.forward returns tables of ``position_ids.shape + (head_dim,)``,
  transformers 5.24 models/llama/modeling_llama.py L110-116, L379-380; packed rows carry their own position_ids:
  2 r b s head_dim; measured, tests/training/test_rotary_tables_training.py); no dropout masks; residual adds keep
  nothing.
- Head: the final norm, the lm_head input, and the loss: ``ForCausalLMLoss`` upcasts logits to fp32
  (``logits.float()``) and cross-entropy keeps the fp32 log-softmax (4 t V): large for 150k vocabularies.
  During the loss backward two more fp32 [t, V] tensors exist (the NLL gradient and the log-softmax input
  gradient): 12 B per logit at that moment.
- LoRA (Hu et al. 2021): a frozen base linear keeps only its weight, but lora_A saves its input (a fresh
  half copy per adapter under autocast, because PEFT casts the input to the fp32 adapter dtype first) and
  lora_B saves the rank-r intermediate (c t r); frozen norms keep only their input. DoRA additionally keeps
  the base and LoRA outputs per adapted module (2 c t out) for the magnitude gradient.
- LoRA dropout (``lora_dropout`` > 0; PEFT ``LoraLayer``: ``lora_B(lora_A(dropout(x)))``, litgpt/lora.py @ 00af8b0d
  lines 171, 426): lora_A saves the dropped-out copy instead of the input, and the dropout keeps its mask
  (``native_dropout``: a bool mask on CUDA; on a CPU, ``_dropout_impl`` keeps its scaled noise tensor in the input
  dtype). Per adapter module of input width w::

      D1 = t w (c + m)        m = 1 B (CUDA bool mask) or c (CPU noise)                                      (D1)

  PEFT adapts q, k and v as three modules (three copies); litgpt's ``LoRAQKVLinear`` is one module over the fused
  q/k/v linear (one copy, ``lora_dropout`` 'fused-qkv'); gate and up are two modules in both. The input itself is
  then saved only by something else.
- LoRA's first decoder layer (eq. F1, ``layer_saved_terms`` ``input_grad``): with a frozen embedding its input needs
  no gradient, and autograd saves nothing for an operator none of whose inputs needs one, so that layer keeps only
  what follows its first adapted projection (no attention norm; no attention without a q/k/v adapter; ...). A
  layer without an adapter then outputs nothing that needs a gradient, so the layers before the first adapted one
  keep nothing (estimate/training/setup.py ``layer_inputs_need_grad``): a hybrid's leading Mamba layers, whose mixer
  has no target among q/k/v/o/gate/up/down; a Mamba mixer over such an input keeps nothing unless one of its
  projections is adapted (``_mamba_mixer_grad``; measured: tests/training/test_mamba_lora_saved_tensors.py).
- QLoRA on bitsandbytes before 0.43.2 (``formulas/nf4_quantization.py`` eq. 4): every quantized (frozen) linear keeps
  its input, as a trained linear does; inputs shared by several linears are one tensor.
- Gradient checkpointing (Chen et al. 2016, arXiv 1604.06174; transformers non-reentrant
  ``torch.utils.checkpoint`` per decoder layer): a layer keeps only its input (r t h); its activations are
  recomputed one layer at a time in the backward. 'selective' recomputes only the attention core
  (Korthikanti et al. 2022 section 4.2): the s^2 terms of eager attention; SDPA/flash have none to drop.
- Megatron-Core's selective recompute by module (``st.recompute``, ``--recompute-modules``; NVIDIA/Megatron-LM
  @d98e8a64, the layer spec megatron/core/models/gpt/gpt_layer_specs.py lines 244-336: with Transformer Engine the
  attention norm is a separate ``TENorm`` only for MLA (line 296; otherwise fused into ``linear_qkv``, line 320), the
  pre-MLP norm a separate one only in MoE layers (lines 313, 336; fused into the dense MLP's ``linear_fc1``)).
  ``CheckpointWithoutOutput`` (tensor_parallel/random.py) runs a function, keeps its inputs, and frees its outputs'
  storage once their consumers have saved them (``discard_output_and_register_recompute``), rebuilding them before
  the backward; so each module drops the tensors it makes, which its consumers had kept::

      core_attn    the attention core (tensor_parallel.checkpoint of core_attention): the s^2 terms         (R1)
      mla_up_proj  q, k, v of MLA: ``qkv_up_proj_and_rope_apply`` under CheckpointWithoutOutput, outputs
                   discarded after the core attention (multi_latent_attention.py lines 983-988, 455-457);
                   the latents are its inputs, kept                                                         (R2)
      layernorm    a separate norm's output (transformer_layer.py lines 475-527, 686, 944-950): MLA's
                   down-projection input, an MoE layer's block input (router, experts)                       (R3)
      mlp          a dense layer's whole MLP, its fused norm included (transformer_layer.py lines 537-539: not
                   MoE layers; line 992-1010 ``tensor_parallel.checkpoint`` of the MLP): only its input
                   t_sp h r is kept                                                                          (R4)
      moe_act      the routed experts' activation (moe/experts.py lines 1019-1030: ``bias_act_func``, the
                   probability product inside, under CheckpointWithoutOutput): the activation output and
                   the product (fc2's input) go; fc1's output, its input, stays                              (R5)
      moe          an MoE layer's whole forward (moe/moe_layer.py lines 247-251, 701-717: ``custom_forward``
                   -- shared experts, router, dispatch, experts, combine -- under ``te_checkpoint`` (fp8/fp4)
                   or ``tensor_parallel.checkpoint``, both reentrant: the forward runs under no_grad and
                   saves only the arguments, tensor_parallel/random.py lines 616-628): the layer keeps its
                   input, the pre-MLP norm's output t_sp h c, or nothing under 'layernorm' too (that output
                   is discarded and rebuilt by the norm's hook, transformer_layer.py lines 1088-1093). Its
                   backward re-runs the whole forward with grad (lines 656-668, the all-to-alls included)
                   and holds, for one layer at a time, the MoE terms below (E2-E4, 'moe_act' still applying
                   inside the re-run) and the re-run's output t_sp h c (kept through line 668)            (R6)

Tensor parallelism splits the per-head and intermediate terms by t (Megatron column/row-parallel
linears); the [t, h] terms outside the TP region are replicated unless sequence parallelism splits them
(Korthikanti section 4.2.2); the vocabulary-parallel loss splits [t, V] terms by t.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..frozen import fast_init
from ..specs import ModelSpec
from .alignment import round_up
from .attention_mask import FLEX_BLOCK
from .encoder_decoder_activations import (
    t5_block_saved_bytes,
    t5_lora_block_saved_bytes,
    t5_lora_outside_blocks_saved_terms,
    t5_outside_blocks_saved_terms,
)
from .expert_parallel_time import routed_probs_bytes
from .mamba_activations import jamba_mamba_saved_terms, mamba2_saved_terms
from .recurrent_activations import GDN_CHUNK
from .sdpa_dispatch import sdpa_backend

ATTN_INPUTS = ("attn_q", "attn_k", "attn_v")
MLP_INPUTS = ("ffn_gate", "ffn_up")
MAMBA_ROLES = ("ssm_in", "ssm_x", "ssm_dt", "ssm_out")  # a Mamba mixer's linears (formulas/tensors.py)


@fast_init
@dataclass(frozen=True)
class ActivationSetup:
    """How a step types and keeps its tensors (built by ``training.compose`` from the workload).

    batch [sequences], seq [tokens], residual/compute/expert/weight_copy [bytes per element],
    autocast [torch.autocast casts linear inputs], full [base weights trained], adapted [roles with LoRA
    adapters], adapter_cast_copy [PEFT casts each adapter input to a different dtype, then autocast copies it],
    rank [LoRA r], dora, attention ['sdpa'|'flash'|'eager'], packing, checkpointing ['none'|'full'|'selective'],
    tp, sp [sequence parallel].
    """

    batch: int
    seq: int
    residual: int = 4
    compute: int = 4
    expert: int = 4
    weight_copy: int = 0
    autocast: bool = False
    full: bool = True
    adapted: frozenset[str] = field(default_factory=frozenset)
    adapter_cast_copy: bool = False
    rank: int = 0
    dora: bool = False
    attention: str = "sdpa"
    packing: bool = False
    checkpointing: str = "none"
    tp: int = 1
    sp: bool = False
    # Megatron-Core's stated expert tensor-parallel size (eq. E1 in :func:`moe_saved_terms`); 0: the experts split tp
    # ways over the tokens each TP rank's MoE block reads
    etp: int = 0
    dropout: str = "none"
    # bytes per element of a dropout mask: CUDA's fused ``native_dropout`` keeps a bool mask (1 B); on a CPU
    # ``at::dropout`` multiplies by a noise tensor of the input dtype and MulBackward keeps it (c B)
    dropout_mask: int = 1
    frozen_keeps_input: bool = False
    lm_head_keeps_input: bool = False
    # an encoder-decoder's target (decoder) length; ``seq`` is then its source (encoder) length. 0: ``seq``
    target: int = 0
    # what runs a Gated DeltaNet layer's chunked delta rule and causal conv (eqs. DN1-DN3): flash-linear-attention's
    # Triton kernel + causal-conv1d ("fla", a GPU with both installed) or transformers' torch fallback ("torch": a
    # CPU, or neither package installed)
    recurrent_kernel: str = "fla"
    # what runs a Mamba layer (formulas/mamba_activations.py eqs. M1/M2, J1/J2): mamba_ssm + causal-conv1d
    # ("cuda-kernels", a CUDA GPU with both installed) or transformers' torch reference functions ("torch")
    mamba_path: str = "cuda-kernels"
    # LayerNorms run in the autocast dtype (llm-foundry's LPLayerNorm, eq. N4) instead of autocast's fp32
    lp_layernorm: bool = False
    # Megatron-Core's Transformer Engine layer spec (the megatron precisions): TE's RMSNorm (eq. N5) and the spec's
    # separate norms (eqs. R3, R4), the fused SwiGLU of dense MLPs and shared experts (eq. S1)
    megatron_te: bool = False
    # Megatron's selective recompute modules (TrainingWorkload.recomputed_modules); empty: ``checkpointing`` alone
    recompute: frozenset[str] = field(default_factory=frozenset)
    # TiledMLP's shard count (eq. TM1, :func:`tiled_mlp_shards`); 0: the MLP runs over the whole sequence at once
    mlp_shards: int = 0

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    def recomputes(self, module: str) -> bool:
        """Whether Megatron's selective recompute rebuilds ``module`` (RECOMPUTE_MODULES); without a module list,
        'selective' recomputes the attention core (Korthikanti et al. 2022 section 4.2, Megatron's default)."""
        if self.recompute:
            return module in self.recompute
        return module == "core_attn" and self.checkpointing == "selective"

    @property
    def fp32_weights(self) -> bool:
        """The layers' weights (norms, Mamba's A_log / D, buffers) are fp32: under autocast exactly when it copies
        the linears' weights to 16 bits (``weight_copy``), else when the activations are fp32 (pure fp32)."""
        return self.weight_copy > 0 if self.autocast else self.compute == 4

    @property
    def head_tokens(self) -> int:
        """Tokens the lm_head and the loss see: the target's of an encoder-decoder, else ``tokens``."""
        return self.batch * (self.target or self.seq)


@fast_init
@dataclass(frozen=True)
class Term:
    """One group of saved tensors: ``bytes`` on one device, with the arithmetic that produced it. ``forward_only``:
    held through the forward and freed before the backward (no layer's backward keeps it: a mask materialised for
    the forward's kernels), so a peak in the backward leaves it out."""

    name: str
    bytes: int
    formula: str
    forward_only: bool = False


def _div(x: int, tp: int) -> int:
    return -(-x // tp)


def _norm_weight_copied(spec: ModelSpec, st: ActivationSetup) -> bool:
    """Eq. N3's fp32 weight copy is made: ``weight.float()`` / ``weight.to(float32)`` copies a 16-bit weight and is
    the fp32 weight itself (nothing saved beside the parameter: measured, pure fp32 and fp32 weights under autocast,
    tests/training/test_mamba_saved_tensors.py, Nemotron-H); ``1 + weight`` (``spec.norm_unit_offset``) is a new
    tensor from any weight."""
    return spec.norm_fp32_normalised and (spec.norm_unit_offset or not st.fp32_weights)


def _norm_terms(name: str, tokens: int, width: int, input_bytes: int, trained: bool, st: ActivationSetup,
                kind: str = "rmsnorm", fp32_normalised: bool = False, weight_copy: bool = True) -> list[Term]:
    """A norm's saved tensors: RMSNorm keeps its fp32 input, 1/rms and (weight trained) the normalised tensor;
    LayerNorm (``native_layer_norm``) keeps its input, mean and rstd. Split by SP (outside the TP region).

    ``fp32_normalised`` (litgpt's RMSNorm, ``spec.norm_fp32_normalised``): ``(x_normed * weight.float())`` keeps the
    fp32 weight copy (width x 4 B; ``weight_copy``: one is made, ``_norm_weight_copied``) and, with the weight
    trained, the fp32 normalised tensor (t width 4 B)                                                        (N3)

    A low-precision LayerNorm (``st.lp_layernorm`` under autocast: llm-foundry's ``LPLayerNorm``,
    llmfoundry/models/layers/norm.py @ b2a43a147 lines 39-53, its MPTConfig default ``norm_type``
    'low_precision_layernorm', llmfoundry/models/mpt/configuration_mpt.py line 60) casts the input, weight and bias
    to the autocast dtype c (``_cast_if_autocast_enabled``, lines 9-18: ``tensor.to(dtype=...)``, a copy of an fp32
    tensor, the tensor itself when it is already c) and runs ``layer_norm`` with autocast off, so
    ``native_layer_norm`` keeps the c copies (its backward takes input, weight and bias: torch
    tools/autograd/derivatives.yaml) with its fp32 mean and rstd (CUDA: the accumulate type):

        t width min(r, c) + 2 t 4 + 2 width c   (the weight and bias copies only when the weights are fp32)   (N4)

    and its output is c, the next linear's input without autocast's copy (the same c bytes, counted there).

    Transformer Engine's RMSNorm (``st.megatron_te``: Megatron-Core's TE layer spec, ``TENorm``; NVIDIA/
    TransformerEngine @d0067d0 transformer_engine/pytorch/ops/basic/rmsnorm.py lines 188-209: ``x`` in the compute
    dtype, ``rmsnorm_fwd`` returns fp32 ``rstdevs``, ``ctx.save_for_backward(x, rstdevs)``) keeps its input as it
    came (no fp32 copy) and one fp32 rsigma per token; its weight gradient is recomputed from them in the backward
    kernel, so no normalised tensor is kept (the next linear keeps its own input, counted there)::

        t width r + 4 t                                                                                  (N5)"""
    t = _div(tokens, st.tp) if st.sp else tokens
    if kind == "layernorm":
        if st.lp_layernorm and st.autocast:
            ib = min(input_bytes, st.compute)
            wb = 2 * width * st.compute if st.fp32_weights else 0
            return [Term(f"{name} input + mean/rstd (low-precision LayerNorm)", t * width * ib + 2 * t * 4 + wb,
                         f"{t} tokens x {width} x {ib} B + 2 x 4 B per token + {wb} B weight/bias copies (eq. N4)")]
        return [Term(f"{name} input + mean/rstd", t * width * input_bytes + 2 * t * 4,
                     f"{t} tokens x {width} x {input_bytes} B + 2 x 4 B per token (native_layer_norm)")]
    if st.megatron_te:  # eq. N5
        return [Term(f"{name} input + fp32 rsigma (Transformer Engine RMSNorm)", t * width * input_bytes + t * 4,
                     f"{t} tokens x {width} x {input_bytes} B + 4 B per token (eq. N5)")]
    out = [Term(f"{name} fp32 input + 1/rms", t * width * 4 + t * 4,
                f"{t} tokens x {width} x 4 B (hidden.to(float32)) + 4 B per token")]
    if fp32_normalised and weight_copy:
        out.append(Term(f"{name} fp32 weight copy", width * 4, f"{width} x 4 B (weight.float(), eq. N3)"))
    if trained:
        nb = 4 if fp32_normalised else input_bytes
        out.append(Term(f"{name} normalised", t * width * nb,
                        f"{t} x {width} x {nb} B (norm weight trained" + (", fp32: eq. N3)" if fp32_normalised
                                                                          else ")")))
    return out


def _qkv_zero_pad_terms(spec: ModelSpec, st: ActivationSetup, widths: tuple[int, int, int]) -> list[Term]:
    """litgpt's ``LoRAQKVLinear`` (``spec.lora_qkv_zero_pad``; litgpt/lora.py @ 00af8b0d): one adapter over the fused
    q/k/v linear whose output, ``after_B``, is only as wide as the enabled parts. Unless all of q, k and v are
    adapted, ``zero_pad`` (lines 329-346, called at line 434) writes it into a zero tensor of the fused width with
    ``result.index_copy_(-1, lora_ind, after_B)``, and autograd's index_copy keeps ``after_B`` for its backward:

        t (sum of the enabled q/k/v widths) c                                                            (Z1)

    (the int64 ``lora_ind`` is a buffer registered on first use, line 283, not an activation)."""
    if not spec.lora_qkv_zero_pad:
        return []
    enabled = [w for role, w in zip(ATTN_INPUTS, widths, strict=True) if role in st.adapted]
    if not enabled or len(enabled) == len(ATTN_INPUTS):
        return []
    return [Term("LoRA q/k/v adapter output kept by zero_pad's index_copy_", st.tokens * sum(enabled) * st.compute,
                 f"{st.tokens} x ({' + '.join(map(str, enabled))}) x {st.compute} B (eq. Z1)")]


def _head_dims(spec: ModelSpec, layer: int | None = None) -> tuple[int, int, int, int]:
    """(q width, k width, v width, attention-output width) per token, before TP; of layer ``layer`` where given
    (``ModelSpec.attention_head_dim``: Gemma 4's full-attention layers have heads of ``full_head_dim``), else of
    ``head_dim``."""
    if spec.mla is not None:
        m = spec.mla
        qk = spec.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        return qk, qk, spec.num_heads * m.v_head_dim, spec.num_heads * m.v_head_dim
    hd = spec.head_dim if layer is None else spec.attention_head_dim(layer)
    q = spec.num_heads * hd
    kv = spec.num_kv_heads * hd
    return q, kv, kv, q


def needs_mask(spec: ModelSpec, layer: int, st: ActivationSetup) -> bool:
    """True when transformers hands SDPA an explicit mask: a sliding window shorter than the sequence, or packed
    documents (block-diagonal mask). Flash kernels take windows and varlen offsets natively, FlexAttention its
    BlockMask (torchtune's packed path). Megatron-Core (``st.megatron_te``) hands none either: its
    TEDotProductAttention passes a sliding layer's window to Transformer Engine as ``window_size`` and the mask as
    ``attn_mask_type`` (NVIDIA/Megatron-LM @d98e8a64 megatron/core/extensions/transformer_engine.py lines 2163-2171,
    2301-2306), never an [s, s] tensor."""
    if st.attention in ("flash", "flex") or st.megatron_te:
        return False
    sliding = spec.layer_types[layer] == "sliding" and spec.sliding_window is not None and st.seq > spec.sliding_window
    return sliding or st.packing



def masked_layers(spec: ModelSpec, st: ActivationSetup) -> list[int]:
    """The attention layers (ascending) for which :func:`needs_mask` holds. None without packed documents and without
    a sliding window (or under flash, flex or Megatron-Core): there ``needs_mask`` holds for no layer, which is not
    tested one layer at a time (a 126-layer model asks it 126 times per training duration)."""
    if st.attention in ("flash", "flex") or st.megatron_te or (not st.packing and spec.sliding_window is None):
        return []
    return [i for i, t in enumerate(spec.layer_types) if t != "none" and needs_mask(spec, i, st)]

def sdpa_runs_math(spec: ModelSpec, st: ActivationSetup) -> bool:
    """True when the attention runs torch's math kernel (its fp32 q/K^T/V copies and softmax probabilities kept):
    the backend formulas/sdpa_dispatch.py ``sdpa_backend`` picks, the one rule the duration times too. The memory is
    device-agnostic (no compute capability): math exactly where no fused backend takes the call, fewer K/V heads
    than query heads without enable_gqa (``spec.math_attention``); eager attention of such a module counts the same.
    FlexAttention takes unequal heads (enable_gqa) in its own kernel."""
    if st.attention in ("flash", "flex"):
        return False
    if st.attention == "eager":
        return spec.math_attention
    return sdpa_backend(None, "fp32" if st.compute >= 4 else "bf16", spec.math_attention,
                        spec.attention_mask_materialised)[0] == "math"


def _saves_input(role: str, st: ActivationSetup, input_grad: bool = True) -> bool:
    """Whether the linear of ``role`` keeps its own input for the backward: trained, adapted without dropout (lora_A
    reads the input itself), or frozen and quantized on bitsandbytes before 0.43.2 (nf4_quantization.py eq. 4) when
    its input needs a gradient (``input_grad``; eq. F1: ``MatMul4Bit.apply`` on inputs none of which needs one makes
    no graph node, so its ``ctx`` goes with the call)."""
    return st.full or (role in st.adapted and st.dropout == "none") or (st.frozen_keeps_input and input_grad)


def _input_copies(consumers: tuple[str, ...], present: set[str], st: ActivationSetup, input_is_compute: bool,
                  input_grad: bool = True) -> int:
    """How many copies of a shared projection input are saved (see module docstring, 'Projection inputs')."""
    saving = [c for c in consumers if c in present and _saves_input(c, st, input_grad)]
    if not saving:
        return 0
    if st.autocast and not input_is_compute:
        return len(saving)
    if st.autocast and st.adapter_cast_copy and not st.full:
        return len(saving)
    return 1


def layer_grads(spec: ModelSpec, layer: int, st: ActivationSetup, input_grad: bool) -> tuple[bool, bool, bool]:
    """Eq. F1: which of a decoder layer's tensors need a gradient when its input may not, as (the layer input, the
    token mixer's output, the residual after it): (input_grad, q/k/v adapted, that or o adapted) for a sequential
    attention layer; a full-training layer, a parallel block, Gemma 3n and any other mixer (MLA, Gated DeltaNet,
    Mamba, none) are taken as needing them all (what they save is then counted as in a layer whose input needs one:
    at most what they keep, the norm apart, which ``layer_saved_terms`` drops for every layer)."""
    if input_grad or st.full:
        return True, True, True
    if spec.gemma3n is not None or spec.parallel_block or spec.mla is not None or _gated_deltanet_layer(spec, layer):
        return False, True, True
    attends = spec.layer_types[layer] != "none"
    mix = attends and bool(st.adapted & set(ATTN_INPUTS))
    if spec.recurrent_layers[layer]:  # a Mamba mixer (beside attention in Falcon-H1): eq. M3's F1 reading
        mix = mix or _mamba_mixer_grad(st)
    return False, mix, mix or (attends and "attn_output" in st.adapted)


def _mamba_mixer_grad(st: ActivationSetup) -> bool:
    """Eq. F1 for a Mamba mixer whose input needs no gradient: its output needs one only when one of its projections
    is adapted. With none (the estimate's targets name none of in_proj / x_proj / dt_proj / out_proj) the mixer keeps
    nothing: its conv, scan and norm see no input that needs a gradient (A_log, D and the norm weights are frozen
    under LoRA). Measured per layer with PEFT (tests/training/test_mamba_lora_saved_tensors.py). An adapted
    projection is taken as making the whole mixer keep what it keeps over an input that needs a gradient (at most
    that)."""
    return bool(st.adapted & set(MAMBA_ROLES))


def layer_saved_terms(spec: ModelSpec, layer: int, st: ActivationSetup,
                      layer_weight_elements: int = 0, input_grad: bool = True) -> tuple[Term, ...]:
    """Bytes decoder layer ``layer`` keeps for its backward on one device, as named terms (module docstring).

    ``layer_weight_elements``: elements of this layer's linear weights that autocast copies (0 when weights are
    already half precision or quantized); their copies are a term of their own.

    ``input_grad``: whether the layer's input needs a gradient. Not so for the first decoder layer when the
    embedding is frozen (LoRA; estimate/training/setup.py ``embedding_output_needs_grad``): autograd records an
    operator, and saves its tensors, only when one of its differentiable inputs requires grad (pytorch
    tools/autograd/gen_variable_type.py @ v2.13.0: ``_any_requires_grad = compute_requires_grad(...)`` guards the
    node and its ``SavedVariable`` set-up; torch/autograd/function.py ``Function.apply`` likewise builds no node for
    a custom Function, bitsandbytes' ``MatMul4Bit`` among them). So until the first LoRA adapter of that layer, in
    execution order, every operator sees inputs that need no gradient and keeps nothing: the attention norm always;
    with no q/k/v adapter the whole attention (SDPA saves its inputs only when one needs a gradient); with no o
    adapter either the MLP norm; in the MLP ``down(act(gate(x)) * up(x))`` only what the adapted branches need
    (act keeps the gate output when gate is adapted, the product keeps the up output when gate is and the act output
    when up is); a dropout whose input needs no gradient keeps no mask; lora_A still keeps its input and lora_B the
    rank-r intermediate. Measured per layer with PEFT on a CPU (tests/training/test_lora_first_layer.py)::

        a layer whose input needs no gradient keeps only what follows its first adapted projection     (F1)

    An encoder-decoder (``spec.encoder_decoder``, T5): one term, its block's eq. (E4) of
    formulas/encoder_decoder_activations.py over ``st.seq`` source and ``st.target`` target tokens.
    """
    if spec.encoder_decoder is not None:
        part = "encoder" if layer < spec.encoder_decoder.encoder_layers else "decoder"
        target = st.target or st.seq
        if not st.full:  # LoRA on q and v (estimate/model_warnings.py T5_TRAINING): eq. E6
            return (Term(f"T5 {part} block (LoRA q, v)",
                         t5_lora_block_saved_bytes(spec, layer, st.batch, st.seq, target, st.compute, st.dropout_mask,
                                                   st.rank),
                         f"eq. E6 over {st.batch} x {st.seq} source / {target} target tokens, rank {st.rank}, "
                         f"{st.compute} B elements, {st.dropout_mask} B dropout masks"),)
        return (Term(f"T5 {part} block", t5_block_saved_bytes(spec, layer, st.batch, st.seq, target, st.compute,
                                                               st.dropout_mask),
                     f"eq. E4 over {st.batch} x {st.seq} source / {target} target tokens, {st.compute} B elements, "
                     f"{st.dropout_mask} B dropout masks"),)
    t = st.tokens
    tp = st.tp
    c, r = st.compute, st.residual
    h = spec.hidden_size
    q_w, k_w, v_w, o_w = (_div(x, tp) for x in _head_dims(spec, layer))
    heads = _div(spec.num_heads, tp)
    out: list[Term] = []
    kind = "layernorm" if spec.norm_kind == "layernorm" else "rmsnorm"
    norm_trained = st.full
    g3n = spec.gemma3n is not None
    norm_out = 4 if g3n else r  # Gemma3nRMSNorm keeps its fp32 normalised tensor (gemma3n_saved_terms)
    kv_shared = bool(spec.kv_shared_layers) and spec.kv_shared_layers[layer]
    f32n = spec.norm_fp32_normalised
    w32 = _norm_weight_copied(spec, st)
    in_grad, mix_grad, res_grad = layer_grads(spec, layer, st, input_grad)
    if in_grad:  # (eq. F1: a norm over an input that needs no gradient, with a frozen weight, keeps nothing)
        out += _norm_terms("attention norm", t, h, norm_out, norm_trained, st, kind=kind, fp32_normalised=f32n,
                           weight_copy=w32)
    gdn = _gated_deltanet_layer(spec, layer)
    # a Mamba layer: its mixer's terms (eqs. M1/M2, J1/J2); attention too only where the layer also attends
    # (Falcon-H1 runs both side by side)
    if spec.recurrent_layers[layer] and not gdn and (in_grad or _mamba_mixer_grad(st)):
        out += mamba_layer_terms(spec, st)
    # a layer with no attention: Nemotron-H's MLP / MoE layers, and the Gated DeltaNet / Mamba-only layers
    mixer_free = spec.layer_types[layer] == "none"
    # a layer without a feed-forward block (Nemotron-H's attention and Mamba layers, Mamba-2 models)
    has_ffn = spec.ffn_layers[layer]
    present: set[str] = set()
    n_in = 0
    if gdn:  # a Gated DeltaNet layer: no attention, the linear-attention mixer (eqs. DN1-DN3)
        out += gated_deltanet_saved_terms(spec, st)
    elif not mixer_free:
        present = {"attn_q", "attn_k", "attn_v"} if spec.mla is None and not kv_shared else {"attn_q"}
        n_in = _input_copies(ATTN_INPUTS, present, st, input_is_compute=(r == c), input_grad=in_grad)
        if spec.fused_qkv and n_in:  # one query_key_value linear: one input (one autocast copy)
            n_in = 1
        ts = _div(t, tp) if st.sp else t
        if n_in and spec.mla is not None and st.megatron_te and st.recomputes("layernorm"):
            n_in = 0  # eq. R3: MLA's separate input_layernorm recomputed, its output (the down-projections' input)
        if n_in:
            out.append(Term("q/k/v projection inputs", n_in * ts * h * c,
                            f"{n_in} x {ts} tokens x {h} x {c} B" + (" (one autocast copy per projection)" if n_in > 1 else "")))
        if spec.mla is not None:
            m = spec.mla
            lat = m.kv_lora_rank + m.qk_rope_head_dim
            extra = t * (lat + (m.q_lora_rank or 0)) * c * (2 if st.full else 1)
            out.append(Term("MLA latents (kv_a, q_a and their norms)", extra + t * 4 * 2,
                            f"{t} x ({lat} + {m.q_lora_rank or 0}) x {c} B x {'2' if st.full else '1'}"))
        # eq. F1: the q (k) norm keeps its input only when q (k) needs a gradient (one fused adapter: all three)
        q_on = in_grad or "attn_q" in st.adapted or (spec.fused_qkv and mix_grad)
        k_on = in_grad or "attn_k" in st.adapted or (spec.fused_qkv and mix_grad)
        if not (q_on or k_on):
            pass
        elif spec.qk_norm == "each_head":
            # StableLmLayerNormPerHead (transformers v5.24.0 modeling_stablelm.py l.156-168): torch.split into heads (views),
            # one native_layer_norm per head over head_dim, torch.cat. Each keeps its input -- together the q_proj and
            # k_proj outputs, at the compute size (an fp32 copy under autocast: layer_norm runs in fp32) -- and a mean and
            # rstd per token and head; cat keeps nothing and the normalised heads reach attention through rotary, whose
            # products keep only cos/sin. Measured (tests/training/test_parallel_block_saved_tensors.py): with minus
            # without qk_layernorm = t (q_w + k_w) c + 2 t (heads + kv heads) x 4 B (2 B stats on the CPU in bf16)
            kn_w, kn_h = (0, 0) if kv_shared or not k_on else (k_w, max(1, spec.num_kv_heads // tp))
            qn_w, qn_h = (q_w, heads) if q_on else (0, 0)
            ib = 4 if st.autocast else c
            out.append(Term("q/k per-head LayerNorm inputs + mean/rstd", t * (qn_w + kn_w) * ib + 2 * t * (qn_h + kn_h) * 4,
                            f"{t} x ({qn_w} + {kn_w}) x {ib} B + 2 x 4 B per token and head (native_layer_norm per head)"))
        elif spec.qk_norm != "none":
            # shared K: no k_norm
            kn_w, kn_h = (0, 0) if kv_shared or not k_on else (k_w, max(1, spec.num_kv_heads // tp))
            qn_w, qn_h = (q_w, heads) if q_on else (0, 0)
            if st.megatron_te:  # eq. N5: TE's RMSNorm over each head (gpt_layer_specs.py line 318: q/k_layernorm
                # = backend.layer_norm(for_qk=True), a TENorm): its input as it came + fp32 rsigma, no normalised tensor
                out.append(Term("q/k norms inputs + fp32 rsigma (Transformer Engine RMSNorm)",
                                t * (qn_w + kn_w) * c + t * (qn_h + kn_h) * 4,
                                f"{t} x ({qn_w} + {kn_w}) x {c} B + rsigma per head (eq. N5)"))
            else:
                out.append(Term("q/k norms fp32 inputs", t * (qn_w + kn_w) * 4 + t * (qn_h + kn_h) * 4,
                                f"{t} x ({qn_w} + {kn_w}) x 4 B + 1/rms per head"))
            if w32 and not st.megatron_te:  # the per-head norms are the same class: their fp32 weight copies (eq. N3)
                hd = spec.attention_head_dim(layer)
                out.append(Term("q/k norms fp32 weight copies", 2 * hd * 4, f"2 x {hd} x 4 B"))
            if st.full and not st.megatron_te:
                qk_c = 4 if g3n or f32n or spec.gemma4 is not None else c  # Gemma 3n/4: fp32 normalised (measured)
                out.append(Term("q/k norms normalised", t * (q_w + kn_w) * qk_c, f"{t} x ({q_w} + {kn_w}) x {qk_c} B"))
        mask = needs_mask(spec, layer, st)
        if not mix_grad:  # eq. F1: no q/k/v adapter, none of the attention's inputs needs a gradient
            pass
        elif sdpa_runs_math(spec, st):
            # torch's math kernel upcasts 16-bit q, k, v to fp32 unless allow_fp16_bf16_reduction_math_sdp (default
            # off): ATen attention.cpp _scaled_dot_product_attention_math (query_.to(at::kFloat))
            out.append(Term("attention q, K^T, V expanded to every head (fp32, SDPA math kernel), output",
                            3 * t * q_w * 4 + t * q_w * c,
                            f"3 x {t} x {q_w} x 4 B + {t} x {q_w} x {c} B (fused kernels refuse {spec.num_kv_heads} "
                            f"K/V heads for {spec.num_heads} query heads without enable_gqa)"))
            if not st.recomputes("core_attn"):
                out.append(Term("attention probabilities (fp32 softmax, SDPA math kernel)",
                                st.batch * heads * st.seq * st.seq * 4,
                                f"{st.batch} x {heads} heads x {st.seq}^2 x 4 B"))
        elif st.attention == "eager":
            kv_len = st.seq
            out.append(Term("attention q, K^T copy, repeated V, output copy", 4 * t * q_w * c,
                            f"4 x {t} x {q_w} x {c} B (eager_attention_forward: repeat_kv, matmul copies)"))
            score_b = 4 + (c if c != 4 else 0) + (c if spec.attention_softcapping else 0)  # + the kept tanh output
            if not st.recomputes("core_attn"):
                out.append(Term("attention scores (softmax)", st.batch * heads * st.seq * kv_len * score_b,
                                f"{st.batch} x {heads} heads x {st.seq} x {kv_len} x ({score_b} B: fp32 softmax"
                                + (f" + {c} B cast" if c != 4 else "")
                                + (f" + {c} B tanh soft-capping output)" if spec.attention_softcapping else ")")))
        else:
            kv_rep = mask and spec.num_kv_heads != spec.num_heads and spec.mla is None
            # a K/V-sharing layer (Gemma 3n) reads the K/V storages an earlier layer saved, unless SDPA repeats them
            kk, vv = (q_w, q_w) if kv_rep else (0, 0) if kv_shared else (k_w, v_w)
            if spec.value_view_of_qkv:  # the saved V is a chunk of the fused q/k/v output: it keeps all of it alive
                vv = q_w + k_w + v_w
            if spec.kv_expanded_in_attention:  # K/V expanded to every query head (a copy) before SDPA; with one K/V
                # head the expanded V reshapes to a stride-0 view of the fused output instead (litgpt MQA: value_view)
                kk, vv = q_w, vv if spec.value_view_of_qkv else q_w
            mask = mask or spec.attention_mask_materialised
            qq = q_w
            if spec.mla is not None and st.recomputes("mla_up_proj"):  # eq. R2: q, k, v discarded, rebuilt
                qq, kk, vv = 0, 0, 0
            out.append(Term("attention q, k, v, output" + (" (q, k, v recomputed: mla_up_proj)" if not qq else ""),
                            t * (qq + kk + vv + o_w) * c,
                            f"{t} x ({qq} + {kk} + {vv} + {o_w}) x {c} B"
                            + (" (K/V repeated to every head: SDPA with a mask)" if kv_rep else "")))
            out.append(Term("attention log-sum-exp", st.batch * heads * st.seq * 4, f"{st.batch} x {heads} x {st.seq} x 4 B"))
            if st.attention == "flex":  # eq. (FX1): FlexAttentionAutogradOp saves max_scores beside the log-sum-exp
                out.append(Term("attention max scores (FlexAttention)", st.batch * heads * st.seq * 4,
                                f"{st.batch} x {heads} x {st.seq} x 4 B (flex_attention's fp32 max_scores, saved)"))
            if mask:
                out.append(Term("attention mask (per layer)", st.batch * st.seq * st.seq * c,
                                f"{st.batch} x {st.seq}^2 x {c} B (bool mask converted to float by SDPA)"))
        # the copy is what o_proj's matmul (or its LoRA A, without dropout) saves; with LoRA dropout A saves the dropped-out
        # copy instead (eq. D1) and the frozen base keeps nothing
        # (the eager and math terms count the output copy already)
        fused_kernel = not sdpa_runs_math(spec, st) and st.attention != "eager"
        copied = spec.attention_output_copy and fused_kernel
        if not mix_grad and not copied and "attn_output" in st.adapted and st.dropout == "none" and not (
                st.autocast and st.adapter_cast_copy):  # eq. F1: SDPA kept no output, the o adapter's lora_A does
            out.append(Term("o adapter input (the attention output)", t * o_w * c,
                            f"{t} x {o_w} x {c} B (the layer's input needs no gradient: eq. F1)"))
        if copied and (st.full or ("attn_output" in st.adapted and st.dropout == "none")):
            out.append(Term("o_proj input (copy of the head-major attention output)", t * o_w * c,
                            f"{t} x {o_w} x {c} B (transpose(1, 2) before the output projection copies)"))
        # o_proj input: the attention output is already saved; a LoRA adapter under autocast makes its own copy (with
        # dropout, eq. D1 counts the adapter's copy instead)
        if st.autocast and st.adapter_cast_copy and not st.full and "attn_output" in st.adapted and st.dropout == "none":
            out.append(Term("o adapter input copy", t * o_w * c, f"{t} x {o_w} x {c} B"))
        if spec.attention_output_gate and mix_grad:  # eq. DN4
            out.append(Term("attention output gate: output copy, sigmoid(gate), gated product", 3 * t * o_w * c,
                            f"3 x {t} x {o_w} x {c} B (Qwen3NextAttention: attn_output * torch.sigmoid(gate))"))
    # MLP
    mlp_input_counted = False
    if spec.parallel_block:
        if spec.norms_per_layer == 1:  # the MLP reads the attention norm's output, already saved for q/k/v
            mlp_input_counted = bool(n_in) and not (st.autocast and r != c)
        else:  # a second LayerNorm of the same layer input: the input is saved once, its mean/rstd are new
            ts_n = _div(t, st.tp) if st.sp else t
            out.append(Term("mlp norm mean/rstd (input shared with the attention norm)", 2 * ts_n * 4,
                            f"2 x 4 B per token ({ts_n} tokens)"))
    if spec.residual_dropout:  # Phi's resid_dropout on both parallel branches; GPT-2's attn / mlp dropout (sequential)
        out.append(Term("residual dropout masks (attention and MLP branches)", 2 * t * h * st.dropout_mask,
                        f"2 x {t} x {h} x {st.dropout_mask} B"))
    dense_mlp_recomputed = (has_ffn and not (spec.moe_layers[layer] and spec.moe is not None)
                            and st.recomputes("mlp") and st.megatron_te)
    if dense_mlp_recomputed:  # eq. R4: the dense MLP with its fused norm, recomputed from its input
        ts_m = _div(t, tp) if st.sp else t
        out.append(Term("MLP checkpoint input (recompute 'mlp')", ts_m * h * r, f"{ts_m} x {h} x {r} B (eq. R4)"))
    elif not spec.parallel_block:
        for j in range(spec.norms_per_layer - 1):
            if j == 0 and not res_grad and spec.norms_per_layer == 2:  # eq. F1: the residual needs no gradient yet
                continue
            out += _norm_terms("mlp norm" if j == 0 else f"extra norm {j}", t, h,
                               norm_out if g3n else r if j == 0 else c, norm_trained, st, kind=kind,
                               fp32_normalised=f32n, weight_copy=w32)
    if has_ffn and spec.moe_layers[layer] and spec.moe is not None and st.megatron_te and st.recomputes("moe"):
        out += moe_checkpoint_terms(spec, st)  # eq. R6: the whole MoE layer recomputed from its input
    elif has_ffn and spec.moe_layers[layer] and spec.moe is not None:
        out += moe_saved_terms(spec, st)
    elif has_ffn and not dense_mlp_recomputed:
        out += _dense_mlp_terms(spec, st, spec.intermediate_size, "mlp", ("ffn_gate", "ffn_up", "ffn_down"),
                                input_counted=mlp_input_counted, input_grad=res_grad)
    if g3n:
        out += gemma3n_saved_terms(spec, st, kv_shared)
    elif spec.gemma4 is not None and not mixer_free and not kv_shared and (in_grad or "attn_v" in st.adapted):
        # Gemma4TextAttention's v_norm (RMSNorm without scale over the layer's head size, transformers v5.24.0
        # modeling_gemma4.py L1170-1184) keeps its fp32 input and 1/rms per head, as Gemma 3n's (gemma3n_saved_terms);
        # measured with the per-layer head sizes: tests/training/test_gemma4_head_sizes_saved.py
        kvh = max(1, spec.num_kv_heads // tp)
        out.append(Term("v_norm fp32 input + 1/rms", t * v_w * 4 + t * kvh * 4,
                        f"{t} x {v_w} x 4 B + 1/rms per head (no scale)"))
    if st.adapted and not st.full and st.dropout != "none":
        out += _dropout_terms(spec, st, present, has_ffn, (in_grad, mix_grad, res_grad))
    if st.adapted and not st.full:
        out += _qkv_zero_pad_terms(spec, st, (q_w, k_w, v_w))
        kinds = (("attn_",) if present else ()) + (("ffn_",) if has_ffn else ())
        n_adapt = sum(1 for role in st.adapted if role.startswith(kinds)) if kinds else 0
        if spec.fused_qkv:  # one adapter on the fused query_key_value stands for attn_q/k/v (formulas/lora.py)
            n_adapt -= max(0, len(st.adapted & set(ATTN_INPUTS)) - 1)
        if spec.fused_gate_up and has_ffn:  # one on the fused gate_up linear stands for its gate and up
            for pair in (("ffn_gate", "ffn_up"), ("ffn_shexp_gate", "ffn_shexp_up")):
                n_adapt -= max(0, len(st.adapted & set(pair)) - 1)
        out.append(Term("LoRA rank-r intermediates", n_adapt * t * st.rank * c, f"{n_adapt} adapters x {t} x r={st.rank} x {c} B"))
        if st.dora:
            widths = {"attn_q": q_w, "attn_k": k_w, "attn_v": v_w, "attn_output": h, "ffn_gate": spec.intermediate_size,
                      "ffn_up": spec.intermediate_size, "ffn_down": h}
            wsum = sum(widths.get(role, h) for role in st.adapted)
            out.append(Term("DoRA base + LoRA outputs", 2 * t * wsum * c, f"2 x {t} x {wsum} x {c} B"))
    if layer_weight_elements and st.weight_copy:
        out.append(Term("autocast weight copies", layer_weight_elements * st.weight_copy,
                        f"{layer_weight_elements:,} weights x {st.weight_copy} B (torch.autocast cast cache)"))
    return tuple(out)


def _dropout_terms(spec: ModelSpec, st: ActivationSetup, present: set[str], ffn: bool = True,
                   grads: tuple[bool, bool, bool] = (True, True, True)) -> list[Term]:
    """Eq. (D1): each adapter module's dropped-out input copy and its mask, per decoder layer (module docstring,
    'LoRA dropout'); litgpt's fused q/k/v adapter ('fused-qkv') drops out their shared input once. ``present``: the
    layer's attention projections (none in a layer without attention); ``ffn``: whether it has a feed-forward block;
    ``grads``: :func:`layer_grads` (a dropout over an input that needs no gradient keeps no mask, eq. F1)."""
    t, c, tp = st.tokens, st.compute, st.tp
    h = spec.hidden_size
    ts = _div(t, tp) if st.sp else t
    _, _, _, o_w = (_div(x, tp) for x in _head_dims(spec))
    i_w = _div(spec.intermediate_size, tp)
    in_grad, mix_grad, res_grad = grads
    qkv = [r for r in ATTN_INPUTS if r in st.adapted and r in present]
    # one adapter (one dropout) on a fused linear: PEFT's on Falcon's query_key_value, Phi-3's qkv_proj and
    # gate_up_proj (formulas/lora.py 'Fused linears'), litgpt's fused q/k/v adapter
    n_qkv = min(1, len(qkv)) if st.dropout == "fused-qkv" or spec.fused_qkv else len(qkv)
    mlp = [r for r in MLP_INPUTS if r in st.adapted] if ffn else []
    n_mlp = min(1, len(mlp)) if spec.fused_gate_up else len(mlp)
    # (elements, whether the dropout's input needs a gradient, so that its mask is kept) per adapter input
    groups = [(n_qkv * ts * h, in_grad, f"{n_qkv} x {ts} x {h}"), (n_mlp * ts * h, res_grad, f"{n_mlp} x {ts} x {h}")]
    if "attn_output" in st.adapted and present:
        groups.append((t * o_w, mix_grad, f"{t} x {o_w}"))
    if "ffn_down" in st.adapted and ffn:
        groups.append((t * i_w, res_grad or bool(mlp), f"{t} x {i_w}"))
    groups = [g for g in groups if g[0]]
    if not groups:
        return []
    total = sum(e * (c + (st.dropout_mask if masked else 0)) for e, masked, _ in groups)
    text = " + ".join(f"{p} x ({c}{f' + {st.dropout_mask}' if masked else ''})" for _, masked, p in groups)
    return [Term("LoRA dropout copies + masks", total, f"({text}) B (eq. D1"
                 + (", q/k/v one fused adapter" if st.dropout == "fused-qkv" else "")
                 + (", no mask where the input needs no gradient: eq. F1)" if not all(m for _, m, _ in groups) else ")"))]


def kept_matmul_input_bytes(spec: ModelSpec, st: ActivationSetup, layer: int, input_grad: bool = True) -> int:
    """Eq. G1 for one decoder layer: the inputs its bitsandbytes 0.42 ``MatMul4Bit`` nodes hold (0 otherwise); a
    matmul whose input needs no gradient makes no node (``input_grad``: the layer's input's, eq. F1)."""
    if not st.frozen_keeps_input:
        return 0
    t, c, tp = st.tokens, st.compute, st.tp
    h = spec.hidden_size
    o_w = _div(_head_dims(spec, layer)[3], tp)
    in_g, mix_g, res_g = layer_grads(spec, layer, st, input_grad)
    attn = h * in_g + o_w * mix_g
    if spec.moe_layers[layer]:
        return t * c * attn
    down = res_g or bool(st.adapted & set(MLP_INPUTS))
    return t * c * (attn + h * res_g + _div(spec.intermediate_size, tp) * down)


def kept_lm_head_input_bytes(st: ActivationSetup, hidden: int) -> int:
    """Eq. G1's lm_head term: its input, when the lm_head is a 0.42 4-bit matmul (Lightning Fabric)."""
    return st.tokens * st.compute * hidden if st.frozen_keeps_input and st.lm_head_keeps_input else 0


def graph_kept_matmul_inputs(spec: ModelSpec, st: ActivationSetup, layers: range | list[int],
                             head: bool) -> Term | None:
    """The quantized linears' inputs bitsandbytes 0.42 ``MatMul4Bit`` nodes hold as long as the graph lives
    (formulas/nf4_quantization.py eq. 4).

    ``ctx.tensors = (A, B)`` is a plain attribute of the autograd node, not a saved tensor: the engine releases a
    node's saved tensors once it has run (torch/csrc/autograd/python_function.cpp ``release_variables`` clears
    ``saved_variables`` only), so the input lives as long as the node, that is as long as anything references the
    graph: in any loop through the rest of the backward (a layer whose backward is done keeps its inputs while the
    layers below run theirs), and with ``loop_keeps_graph`` beyond it: litgpt's loop keeps ``logits`` and ``loss``
    (finetune/lora.py @ 00af8b0d lines 304-310) until the next step rebinds them, after that step's forward, so the
    previous step's inputs are alive at the next forward's end. One tensor per distinct input (q/k/v share theirs,
    as do gate and up; the attention output is the o input)::

        G = sum over layers of t c (h + o_w + h + I)  [+ t c h: the lm_head input when it is quantized]      (G1)

    Mixture-of-experts layers count their attention inputs only (bitsandbytes does not quantize fused 3-D expert
    parameters)."""
    if not st.frozen_keeps_input:
        return None
    h = spec.hidden_size
    head_b = kept_lm_head_input_bytes(st, h) if head else 0
    total = sum(kept_matmul_input_bytes(spec, st, i) for i in layers) + head_b
    o_w = _div(_head_dims(spec)[3], st.tp)
    return Term("bitsandbytes 0.42 matmul inputs held by the graph", total,
                f"{len(layers)} layers x {st.tokens} x {st.compute} B x ({h} + {o_w} + {h} + "
                f"{_div(spec.intermediate_size, st.tp)}; MoE layers: attention inputs only)"
                + (f" + lm_head input {st.tokens} x {h} x {st.compute} B" if head_b else "") + " (eq. G1)")


def gemma3n_saved_terms(spec: ModelSpec, st: ActivationSetup, kv_shared: bool) -> list[Term]:
    """What a Gemma 3n decoder layer saves on top of the generic terms (transformers v5.24.0
    models/gemma3n/modeling_gemma3n.py, L = line; traced with saved_tensors_hooks, fp32 and bf16).

    With t tokens, n = altup_inputs streams of width h, per-layer width P, LAuReL rank R, r = residual (stream)
    element size, c = compute element size. Every ``Gemma3nRMSNorm`` (L128-135) keeps ``hidden_states.float()``
    (4 t w: a copy when the input is half precision, the input itself when it is fp32), 1/rms and, scaled,
    the fp32 normalised tensor (4 t w, L135: the generic norm terms take 4 B for it when ``spec.gemma3n``):

    - AltUp ``predict`` (L1005-1029): the layer's input streams n t h r (kept by the coefficient matmul L1026);
      its ``router_norm`` over stream 0 (L999): when r = 4 ``.float()`` is a view, so the saved input is the
      n-stream storage already counted; else a fp32 copy 4 t h. ``Gemma3nTextDecoderLayer.input_layernorm`` over
      ``predictions[0]`` (L1285) likewise keeps the whole n-stream predictions when r = 4: (n - 1) 4 t h more
      than the generic attention norm.
    - The modality router inputs of predict and correct (L1000): 2 t h r; router tanh outputs and coefficients
      (L1001, L1020, L1026, L1049): t (2 x 4 n + n^2 r + 2 n r) B.
    - AltUp ``correct``: its router_norm over the layer output (L999) and the repeated innovation (L1058) n t h r.
    - ``scale_corrected_output`` (L1068): the first corrected stream t h r.
    - Per-layer input (L1313-1319): the gate's input t h c, the act input, act output and projection input
      3 t P c, ``post_per_layer_input_norm``.
    - LAuReL (L932-934): ``linear_left`` shares the q/k/v input; ``linear_right``'s input t R c;
      ``post_laurel_norm``.
    - ``v_norm`` (L1219, no scale) on layers with their own K/V: fp32 input 4 t kv_w + 1/rms per head.

    Checked (tests/training/test_gemma3n_saved_tensors.py) for full training in fp32 and bf16 without autocast.
    Not checked: ``torch.autocast`` (fp32 weights: a one-off trace gave 1.05 of the saved storages, the bf16
    weight copies left out) and LoRA (frozen linears keep no input; the terms assume so).
    """
    assert spec.gemma3n is not None
    g = spec.gemma3n
    t, c, r, h, n = st.tokens, st.compute, st.residual, spec.hidden_size, g.altup_inputs
    full = st.full
    out = [Term("AltUp layer input streams", n * t * h * r, f"{n} streams x {t} x {h} x {r} B (predict, L1026)")]
    if r != 4:
        out.append(Term("AltUp predict router_norm fp32 input copy", t * h * 4, f"{t} x {h} x 4 B (L999, L128)"))
    else:
        out.append(Term("input_layernorm keeps all predictions (fp32 view)", (n - 1) * t * h * 4,
                        f"({n} - 1) x {t} x {h} x 4 B (L1285: a norm over one stream saves the n-stream storage)"))
    norm_small = t * 4 + (t * h * 4 if full else 0)
    out.append(Term("AltUp predict router_norm 1/rms + normalised", norm_small, f"{t} x (4 + {h} x 4) B (L128-135)"))
    lin = c if full else 0  # a linear's input is saved only when its weight trains (LoRA: not measured here)
    out.append(Term("AltUp modality router inputs (predict, correct)", 2 * t * h * lin, f"2 x {t} x {h} x {lin} B (L1000)"))
    small = t * (2 * n * 4 + n * n * r + (2 * n * r if r != 4 else 0) + n * r)
    out.append(Term("AltUp router tanh outputs and coefficients", small,
                    f"{t} x (2 x {n} x 4 + {n}^2 x {r} + ...) B (L1001, L1020, L1026, L1049)"))
    out += _norm_terms("AltUp correct router_norm", t, h, 4, full, st)
    out.append(Term("AltUp repeated innovation", n * t * h * r, f"{n} x {t} x {h} x {r} B (correct, L1058)"))
    out.append(Term("AltUp scaled first prediction", t * h * r, f"{t} x {h} x {r} B (L1068)"))
    p = g.per_layer_width
    out.append(Term("per-layer input gate input + act/product/projection inputs", t * h * lin + 3 * t * p * c,
                    f"{t} x {h} x {lin} B + 3 x {t} x {p} x {c} B (L1313-1318)"))
    out += _norm_terms("post_per_layer_input_norm", t, h, 4, full, st)
    out.append(Term("LAuReL linear_right input", t * g.laurel_rank * lin, f"{t} x {g.laurel_rank} x {lin} B (L933)"))
    out += _norm_terms("post_laurel_norm", t, h, 4, full, st)
    if not kv_shared:
        kv_w = _div(spec.num_kv_heads * spec.head_dim, st.tp)
        kvh = max(1, spec.num_kv_heads // st.tp)
        out.append(Term("v_norm fp32 input + 1/rms", t * kv_w * 4 + t * kvh * 4,
                        f"{t} x {kv_w} x 4 B + 1/rms per head (L1219, no scale)"))
    return out


def gemma3n_model_terms(spec: ModelSpec, st: ActivationSetup) -> list[Term]:
    """Gemma 3n's saved tensors outside the decoder layers (modeling_gemma3n.py v5.24.0, L = line): the
    embeddings t h r (kept by ``per_layer_model_projection``, L1752); the per-layer inputs t N P r (L1770, read by
    every layer's L1315) and ``per_layer_projection_norm`` (L1761, fp32 input + normalised 8 t N P); the stream
    projections before the layers (L1687-1691: per extra stream its projection and the rescaling product,
    2 (n - 1) t h r), the last layer's n output streams (L1718) and the unembedding projections after them
    (L1722-1726, 2 (n - 1) t h r); ``final_logit_softcapping``'s tanh output t V c (Gemma3nForCausalLM L1840)."""
    assert spec.gemma3n is not None
    g = spec.gemma3n
    t, c, r, h, n = st.tokens, st.compute, st.residual, spec.hidden_size, g.altup_inputs
    np_w = spec.num_layers * g.per_layer_width
    v = _div(spec.vocab_size, st.tp)
    return [
        Term("Gemma 3n embeddings + per-layer inputs", t * h * r + t * np_w * r,
             f"{t} x ({h} + {np_w}) x {r} B (L1752, L1770)"),
        Term("Gemma 3n per_layer_projection_norm", t * np_w * 8 + t * spec.num_layers * 4,
             f"{t} x {np_w} x (4 + 4) B + 1/rms (L1761, L128-135)"),
        Term("AltUp stream projections before and after the layers", 4 * (n - 1) * t * h * r + n * t * h * r,
             f"(4 x ({n} - 1) + {n}) x {t} x {h} x {r} B (L1687-1691, L1718-1726)"),
        Term("final logit softcapping tanh output", t * v * c, f"{t} x {v} x {c} B (L1840)"),
    ]


def _dense_mlp_terms(spec: ModelSpec, st: ActivationSetup, width: int, name: str,
                     roles: tuple[str, str, str], input_counted: bool = False, input_grad: bool = True) -> list[Term]:
    """``input_counted``: the MLP's input is saved under another term (an MoE layer's shared expert reads the
    tensor the router and the routed experts read: :func:`moe_saved_terms` counts it once). ``input_grad``: whether
    the MLP's input needs a gradient (eq. F1: if not, only the adapted branches' tensors are kept)."""
    t, c, h = st.tokens, st.compute, spec.hidden_size
    i_w = _div(width, st.tp)
    ts = _div(t, st.tp) if st.sp else t
    out: list[Term] = []
    gated = spec.mlp_gated
    if st.mlp_shards:  # eq. TM1: TiledMLP saves its input x only; the shards' tensors live inside its backward (A3)
        return [] if input_counted else [Term(f"{name} input (TiledMLP: x only, {st.mlp_shards} shards)",
                                              ts * h * st.residual, f"{ts} x {h} x {st.residual} B (eq. TM1)")]
    consumers = roles[:2] if gated else roles[1:2]
    n_in = 0 if input_counted else _input_copies(consumers, set(consumers), st, input_is_compute=(st.residual == c),
                                                 input_grad=input_grad)
    if spec.fused_gate_up and n_in:  # one gate_up linear (Phi-3, Granite-4.0-H's shared MLP): one input copy
        n_in = 1
    if n_in:
        out.append(Term(f"{name} input", n_in * ts * h * c, f"{n_in} x {ts} x {h} x {c} B"))
    gate_on = input_grad or roles[0] in st.adapted
    up_on = input_grad or roles[1] in st.adapted
    if gated and st.megatron_te and st.full:  # eq. S1: Megatron-Core's fused SwiGLU keeps fc1's output only
        out.append(Term(f"{name} fc1 output (fused SwiGLU input), fc2 input", 3 * t * i_w * c,
                        f"(2 + 1) x {t} x {i_w} x {c} B (Megatron bias-SwiGLU fusion, eq. S1)"))
    elif gated:
        down_saves = _saves_input(roles[2], st, gate_on or up_on)
        if input_grad:
            n, what = 3, "act input, act output, up output"
        else:  # eq. F1: act keeps gate's output and the product up's when gate needs a gradient, act's when up does
            n = (2 if gate_on else 0) + (1 if up_on else 0)
            what = ", ".join((["act input", "up output"] if gate_on else []) + (["act output"] if up_on else []))
        n += 1 if down_saves else 0
        if n:
            out.append(Term(f"{name} " + ", ".join(x for x in (what, "product" if down_saves else "") if x),
                            n * t * i_w * c, f"{n} x {t} x {i_w} x {c} B (SwiGLU" + (")" if input_grad else ", eq. F1)")))
    else:
        down_saves = _saves_input(roles[2], st, up_on)
        n = (1 if up_on else 0) + (1 if down_saves else 0)
        if n:
            out.append(Term(f"{name} " + ", ".join((["act input"] if up_on else []) + (["act output"] if down_saves
                                                                                        else [])),
                            n * t * i_w * c, f"{n} x {t} x {i_w} x {c} B (GeLU MLP" + (")" if input_grad else ", eq. F1)")))
        if spec.mlp_act_python and up_on:
            out.append(Term(f"{name} gelu_new intermediates (tanh output, 0.5 x, 1 + tanh)", 3 * t * i_w * c,
                            f"3 x {t} x {i_w} x {c} B (NewGELUActivation in Python ops)"))
    return out


def moe_saved_terms(spec: ModelSpec, st: ActivationSetup) -> list[Term]:
    """Bytes an MoE block keeps for its backward (module docstring, 'MoE'), as named terms.

    - The block input (c t h), saved once: the router, the shared expert, Qwen2-MoE / Qwen3-Next's
      shared_expert_gate and Nemotron-H's fc1_latent_proj all read the same tensor (under autocast each trained
      consumer casts its own copy).
    - A router that upcasts (``MoESpec.router_fp32``, e.g. ``NemotronHTopkRouter.forward``: ``F.linear(
      hidden_states.type(torch.float32), ...)``, modeling_nemotron_h.py line 774) keeps that fp32 copy (4 t h) for
      its weight gradient when it is trained.
    - Routed experts (transformers ``integrations/moe.py`` ``grouped_mm_experts_forward``): for the S = t k routed
      copies, the gathered inputs and the expert outputs kept for the routing-weight product (2 S x) plus the
      up (and gate) output and the activation output (S I each), where x is the width the experts read and write:
      the hidden size, or Nemotron-H's ``moe_latent_size`` L. ``NemotronHMoE.forward`` (modeling_nemotron_h.py
      lines 745-757) runs ``fc1_latent_proj`` (H -> L, line 750) before the experts and ``fc2_latent_proj``
      (L -> H, line 752) after them; ``NemotronHExperts`` builds its weights [E, I, L] / [E, L, I] (lines 668-674).
    - Megatron-Core with a stated expert tensor-parallel size ``etp`` (``st.etp``), eq. E1: a rank's experts run
      S = (t / tp) x etp x k routed copies (balanced routing) at width I / etp. Its MoE layer reads the rank's
      sequence-parallel shard, t / tp tokens (SP is required with TP: megatron/core/transformer/moe/moe_layer.py
      :636-640 @d98e8a64); the all-to-all token dispatcher exchanges them over the EP group
      (moe/token_dispatcher.py:705-711) and all-gathers them over the expert-TP group only
      (dispatch_postprocess, :741-752; its tp_group is pg_collection.expt_tp, :86-90). At etp = tp that is t x k
      copies at I / tp, the terms without etp; at etp = 1, (t / tp) x k copies at the full I.
    - ``fc2_latent_proj`` keeps its input, the experts' combined output (c t L); ``fc1_latent_proj``'s input is the
      block input above, and its output is only gathered (the gather keeps indices, not the tensor).
    - Megatron-Core (``st.megatron_te``; NVIDIA/Megatron-LM @d98e8a64), eqs. E2-E4. Under sequence parallelism the MoE
      layer reads the rank's shard (moe_layer.py:636-640, :661-663: the router, the shared expert and the dispatch
      all take ``hidden_states`` as it comes, [t / tp, h]), so the block input and the router's [t, E] tensors are
      sized at t_sp = t / tp::

          block input  t_sp h c;   router  t_sp (4 E + 12 k)                                                 (E2)

      The router keeps no fp32 copy of its input: ``RouterGatingLinearFunction`` saves ``inp`` as it comes and casts
      inside its forward (moe/moe_utils.py:1382, :1389-1400; ``moe_router_dtype`` 'fp32' types only the logits,
      router.py:106-111). TEGroupedMLP (moe/experts.py) multiplies the routing probabilities inside the activation
      (the fused ``weighted_bias_swiglu_impl``, line 966; Megatron-LM's default ``--bias-swiglu-fusion``,
      training/arguments.py:2895-2898), so the unpermute after the combine keeps no expert output; per routed copy
      it keeps fc1's input (line 932), fc1's output and the routed probability (``WeightedSwiGLUFunction``
      saves both as they come, fusions/fused_bias_swiglu.py:266-270) and fc2's input (line 1028); the probability
      in the router's logits dtype, a_p (formulas/expert_parallel_time.py ``routed_probs_bytes``: c under
      Megatron's default moe_router_dtype None)::

          routed  S (x c + (u + a) i_w c + a_p),   u = 2 gated / 1,   a = 0 under 'moe_act' else 1          (E3)

      the permutes, all-to-alls and expert-TP gathers keeping only indices (moe_utils.py ``permute`` /
      ``unpermute`` :497). Under 'moe_act' (eq. R5) fc2's input is rebuilt from fc1's output (lines 1019-1030).
    """
    assert spec.moe is not None
    moe = spec.moe
    t, c, e, h = st.tokens, st.compute, st.expert, spec.hidden_size
    x = moe.latent_size or h
    if st.etp:  # eq. E1
        s_routed = (_div(t, st.tp) if st.sp else t) * st.etp * moe.experts_per_token
        i_w = _div(moe.expert_intermediate_size, st.etp)
    else:
        s_routed = t * moe.experts_per_token
        i_w = _div(moe.expert_intermediate_size, st.tp)
    out: list[Term] = []
    consumers = ["router"] + (["ffn_shexp_gate", "ffn_shexp_up"] if moe.shared_intermediate_size else []) \
        + (["ffn_latent_in"] if moe.latent_size else []) + (["ffn_gate_inp_shexp"] if moe.shared_expert_gate else [])
    n_in = len(consumers) if (st.autocast and st.residual != c and st.full) else (1 if st.full else 0)
    if st.megatron_te and st.recomputes("layernorm"):
        n_in = 0  # eq. R3: the separate pre-MLP norm recomputed, its output (the block input) discarded
    ts = _div(t, st.tp) if (st.megatron_te and st.sp) else t  # eq. E2: the MoE layer reads the SP shard
    if n_in:
        out.append(Term("MoE block input (router, shared expert" + (", fc1_latent_proj)" if moe.latent_size else ")"),
                        n_in * ts * h * c, f"{n_in} x {ts} x {h} x {c} B"))
    if moe.router_fp32 and st.full and c != 4 and not st.autocast and not st.megatron_te:
        out.append(Term("router fp32 input copy", t * h * 4, f"{t} x {h} x 4 B (input.type(float32))"))
    out.append(Term("router probabilities", ts * moe.num_experts * 4 + ts * moe.experts_per_token * 12,
                    f"{ts} x {moe.num_experts} experts x 4 B (fp32 softmax) + top-k weights/indices"))
    up = 2 if moe.expert_gated else 1
    adapted = [r for r in st.adapted if r.startswith("ffn_exps_")]
    if adapted:
        # PEFT ParamWrapper: W + B A is materialised per layer through a parametrization and saved by grouped_mm
        # (peft/tuners/lora/layer.py ParamWrapper._activate_lora); the inputs are saved as for trained experts
        i_full = moe.expert_intermediate_size
        merged = sum(moe.num_experts * x * (up * i_full if r.endswith("gate_up") else i_full) for r in adapted)
        out.append(Term("LoRA-merged expert weights", _div(merged, st.tp) * e,
                        f"{moe.num_experts} experts x merged W + BA of {', '.join(sorted(adapted))} x {e} B"))
    width = "L" if moe.latent_size else "h"
    if st.megatron_te and st.full:  # eq. E3: TEGroupedMLP with the probabilities inside the fused activation
        a_p = int(routed_probs_bytes(c))
        n_i = up + (0 if st.recomputes("moe_act") else 1)
        out.append(Term("routed experts (TEGroupedMLP)" + (" (activation recomputed: moe_act)"
                                                           if st.recomputes("moe_act") else ""),
                        s_routed * (x + n_i * i_w) * e + s_routed * a_p,
                        f"{s_routed} routed copies x ({x} ({width}) + {n_i} x {i_w}) x {e} B + {a_p} B probability "
                        f"(fc1 input, fc1 output, fc2 input; eq. E3)"))
    elif st.full or adapted:
        # eq. R5: recompute 'moe_act' drops the activation output and the product, fc1's output stays
        act_kept = 0 if st.recomputes("moe_act") else 2 if moe.expert_gated else 1
        n_i = (up if moe.expert_gated else 1) + act_kept
        n = 2 * x + n_i * i_w
        out.append(Term("routed experts (grouped_mm)" + (" (activation recomputed: moe_act)" if not act_kept else ""),
                        s_routed * n * e + s_routed * 16,
                        f"{s_routed} routed copies x (2 x {x} ({width}) + {n_i} x {i_w}) "
                        f"x {e} B (inputs, gate_up, act, product, output; weight dtype)"))
    else:
        n = (up + 1) * i_w
        out.append(Term("routed experts (frozen)", s_routed * n * e, f"{s_routed} x {up + 1} x {i_w} x {e} B"))
    if moe.latent_size and (st.full or "ffn_latent_out" in st.adapted):
        out.append(Term("fc2_latent_proj input", t * moe.latent_size * c, f"{t} x {moe.latent_size} (L) x {c} B"))
    if moe.shared_intermediate_size:
        out += _dense_mlp_terms(spec, st, moe.shared_intermediate_size, "shared expert",
                                ("ffn_shexp_gate", "ffn_shexp_up", "ffn_shexp_down"), input_counted=n_in > 0)
    if moe.shared_expert_gate:
        # Qwen2-MoE / Qwen3-Next ``F.sigmoid(self.shared_expert_gate(x)) * shared_expert_output``
        # (modeling_qwen3_next.py line 865): the product keeps the shared expert's output and the sigmoid (eq. DN5)
        out.append(Term("shared expert output + sigmoid gate (kept by their product)", t * (h + 1) * c,
                        f"{t} x ({h} + 1) x {c} B"))
    return out


def moe_checkpoint_terms(spec: ModelSpec, st: ActivationSetup) -> list[Term]:
    """What an MoE layer keeps under Megatron's recompute module 'moe' (eq. R6): the checkpoint's argument, the
    pre-MLP norm's output t_sp h c, unless 'layernorm' discards that too."""
    if st.recomputes("layernorm"):
        return []
    ts = _div(st.tokens, st.tp) if st.sp else st.tokens
    return [Term("MoE checkpoint input (recompute 'moe')", ts * spec.hidden_size * st.compute,
                 f"{ts} x {spec.hidden_size} x {st.compute} B (eq. R6)")]


def moe_recompute_bytes(spec: ModelSpec, layer: int, st: ActivationSetup) -> int:
    """Bytes the backward of MoE layer ``layer`` rebuilds under Megatron's recompute module 'moe' (eq. R6): the MoE
    terms of its re-run forward (eqs. E2-E4 with the other modules but 'layernorm', whose discarded norm output the
    re-run reads rebuilt) and the re-run's output t_sp h c, less what the layer kept; 0 where 'moe' does not apply."""
    if not (spec.moe is not None and spec.moe_layers[layer] and st.megatron_te and st.recomputes("moe")):
        return 0
    rerun = replace(st, recompute=st.recompute - {"moe", "layernorm"})
    ts = _div(st.tokens, st.tp) if st.sp else st.tokens
    return (sum(t.bytes for t in moe_saved_terms(spec, rerun)) + ts * spec.hidden_size * st.compute
            - sum(t.bytes for t in moe_checkpoint_terms(spec, st)))


def _gated_deltanet_layer(spec: ModelSpec, layer: int) -> bool:
    """Layer ``layer`` mixes tokens with Gated DeltaNet instead of attention (Qwen3-Next ``linear_attention``)."""
    r = spec.recurrent
    return (r is not None and r.kind == "gated_deltanet" and spec.recurrent_layers[layer]
            and spec.layer_types[layer] == "none")


# GDN_CHUNK (recurrent_activations.py, its one home): chunk_size of torch_chunk_gated_delta_rule and of fla's
# chunk_gated_delta_rule (BT)


def gated_deltanet_saved_terms(spec: ModelSpec, st: ActivationSetup) -> list[Term]:
    """What a Gated DeltaNet mixer (transformers v5.24.0 ``Qwen3NextGatedDeltaNet.forward``, modeling_qwen3_next.py
    lines 660-769) keeps for its backward, after the attention norm. t = b s tokens, Hk key heads of dk, Hv value
    heads of dv (V = Hv dv), conv = 2 Hk dk + V channels, c the compute element size.

    Around the delta rule, either kernel (measured: tests/training/test_qwen3_next_saved_tensors.py)::

        in_proj_qkvz / in_proj_ba input        t h c          (when they keep inputs: trained, adapted, QLoRA)
        causal conv input (the q/k/v cat)       t conv c       (ConvolutionBackward / CausalConv1dFn keep x)
        beta = b.sigmoid()                      t Hv c         (line 730, sigmoid keeps its output)
        g = -exp(A_log) softplus(a + dt_bias)   t Hv 4 (+ t Hv 4 with A_log trained)      (line 732, fp32)
        Qwen3NextRMSNormGated (lines 66-75)     t V (4 + 4 + 4 + c (+ c weight trained)) + t Hv 4
                                                (the torch module: the hub's FusedRMSNormGated only with use_kernels)
                                                (fp32 input, silu(z.float()) input and output, weight x normed; 1/rms)
        out_proj input                          t V c          (when it keeps its input)            (DN1)

    The torch fallback (``torch_chunk_gated_delta_rule``, lines 371-510) also keeps the silu input of
    ``causal_conv1d_fn`` (line 357: the padded conv output, b (s + K - 1) conv c) and works in fp32 over
    P = b Hv s' positions (s' = s rounded up to the chunk C = 64, q/k repeated to Hv heads, N = s'/C chunks)::

        8 P dk 4   q and k before l2norm, normed k, k_beta, scaled q, k_cumdecay, decayed q and k
        3 P dv 4   v, new_values (solve_triangular), v_new of each chunk
        5 P C 4    pairwise decay, k_beta k^T, q k^T and their decayed products (ut_system, intra_chunk_attn)
        6 P 4      2 l2norm 1/norm, beta, 3 decay exponentials
        N b Hv dk dv 4 + b Hv N 4 + C^2     the state entering each chunk (the Python loop), chunk decays, mask (DN2)

    flash-linear-attention 0.5.2 (``ChunkGatedDeltaRuleFunction.forward``, fla/ops/gated_delta_rule/chunk.py lines
    281-283 and 310-326; ``A`` is allocated [b, s, Hv, 64] in k's dtype, chunk_fwd.py line 382; ``g`` is the fp32
    chunk-local cumsum) keeps per token the l2-normalised q and k at Hk heads, their fp32 rstd, the contiguous copy
    of v its ``input_guard`` makes, the fp32 cumulative gate and the WY matrix A; the chunk states h are recomputed
    in the backward, beta is the sigmoid output counted above, and causal-conv1d fuses the silu (no conv output)::

        t (2 Hk dk c + 2 Hk 4 + V c + Hv 4 + Hv C c)                                                        (DN3)
    """
    r = spec.recurrent
    assert r is not None
    t, c, h, b = st.tokens, st.compute, spec.hidden_size, st.batch
    hk, dk, hv, dv = r.n_groups, r.d_state, r.num_heads, r.head_dim
    v_w, conv = r.d_inner, r.conv_channels
    out: list[Term] = []
    n_in = _input_copies(("ssm_in", "ssm_ba"), {"ssm_in", "ssm_ba"}, st, input_is_compute=(st.residual == c))
    if n_in:
        out.append(Term("in_proj_qkvz/ba input", n_in * t * h * c, f"{n_in} x {t} x {h} x {c} B"))
    out.append(Term("causal conv input (q/k/v)", t * conv * c, f"{t} x {conv} x {c} B"))
    gate_b = 4 + (4 if st.full else 0)
    out.append(Term("beta sigmoid output, fp32 decay gate", t * hv * (c + gate_b), f"{t} x {hv} x ({c} + {gate_b}) B"))
    norm_b = 12 + c + (c if st.full else 0)
    out.append(Term("gated RMSNorm (fp32 input, silu(z) input/output, weight x normed; 1/rms)",
                    t * v_w * norm_b + t * hv * 4, f"{t} x {v_w} x {norm_b} B + {t} x {hv} x 4 B"))
    if _saves_input("ssm_out", st):
        out.append(Term("out_proj input", t * v_w * c, f"{t} x {v_w} x {c} B"))
    if st.recurrent_kernel == "torch":
        cc = GDN_CHUNK
        n = -(-st.seq // cc)
        p = b * hv * n * cc
        out.append(Term("causal_conv1d_fn silu input (padded conv output)", b * (st.seq + r.d_conv - 1) * conv * c,
                        f"{b} x ({st.seq} + {r.d_conv} - 1) x {conv} x {c} B"))
        core = 4 * p * (8 * dk + 3 * dv + 5 * cc + 6) + 4 * n * b * hv * dk * dv + 4 * b * hv * n + cc * cc
        out.append(Term("chunked delta rule, torch fallback (fp32)", core,
                        f"4 B x {p} positions x (8 x {dk} + 3 x {dv} + 5 x {cc} + 6) + {n} chunk states "
                        f"x {b} x {hv} x {dk} x {dv} x 4 B (eq. DN2)"))
    else:
        core = t * (2 * hk * dk * c + 2 * hk * 4 + v_w * c + hv * 4 + hv * GDN_CHUNK * c)
        out.append(Term("chunked delta rule, flash-linear-attention", core,
                        f"{t} x (2 x {hk} x {dk} x {c} + 2 x {hk} x 4 + {v_w} x {c} + {hv} x 4 + {hv} x "
                        f"{GDN_CHUNK} x {c}) B (eq. DN3)"))
    return out


def mamba_layer_terms(spec: ModelSpec, st: ActivationSetup) -> list[Term]:
    """A Mamba layer's mixer (formulas/mamba_activations.py): eqs. M1/M2 for Mamba-2 (Nemotron-H, Falcon-H1,
    Granite-4.0-H, Mamba-2 models), J1/J2 for Jamba's Mamba-1, on ``st.mamba_path``. Tensor parallelism splits the
    heads / channels and the B/C groups over the ranks (Megatron-LM megatron/core/ssm/mamba_mixer.py:
    ``nheads_local_tp``, ``ngroups_local_tp``); the in_proj input stays whole (split by SP)."""
    r = spec.recurrent
    assert r is not None
    tp = st.tp
    ts_in = st.tokens * spec.hidden_size * st.compute
    if r.kind == "mamba2":
        terms = mamba2_saved_terms(st.batch, st.seq, spec.hidden_size, _div(r.num_heads, tp), r.head_dim,
                                   r.d_state, _div(r.n_groups, tp), r.d_conv, r.chunk_size, st.compute, st.mamba_path,
                                   gated_norm=r.gated_norm, in_input=_saves_input("ssm_in", st),
                                   out_input=_saves_input("ssm_out", st), autocast=st.autocast,
                                   # fp32 weights under autocast: exactly when autocast copies the weights
                                   fp32_weights=st.autocast and st.weight_copy > 0, multiplier=r.in_proj_multiplier,
                                   params_trained=st.full)
    else:
        terms = jamba_mamba_saved_terms(st.batch, st.seq, spec.hidden_size, _div(r.d_inner, tp), r.d_state,
                                        r.dt_rank, r.d_conv, st.compute, st.mamba_path,
                                        in_input=_saves_input("ssm_in", st), x_input=_saves_input("ssm_x", st),
                                        dt_input=_saves_input("ssm_dt", st), out_input=_saves_input("ssm_out", st),
                                        params_trained=st.full, fp32_weights=st.fp32_weights)
    out = [Term(name, b, how) for name, b, how in terms]
    if st.sp and tp > 1 and out and out[0].name == "Mamba in_proj input":
        out[0] = Term(out[0].name, _div(ts_in, tp), f"{out[0].formula} / {tp} (sequence parallel)")
    return out


TILED_MLP_SOURCE = ("DeepSpeed deepspeed/runtime/sequence_parallel/ulysses_sp.py @edaa7221 TiledMLP (lines 943-1062; "
                    "the shard rule line 965); ArcticTraining arctic_training/model/tiled_compute.py @b28638e6 "
                    "tiled_mlp_forward_common (lines 48-81)")


def tiled_mlp_shards(seq: int, hidden: int) -> int:
    """TiledMLP's shard count: ``num_shards = math.ceil(seqlen / hidden)`` (DeepSpeed ulysses_sp.py @edaa7221 line 965,
    the docstring's patch of LlamaMLP; ArcticTraining tiled_compute.py @b28638e6 line 56, ``num_shards='auto'``), the
    sequence length being the rank's own (its Ulysses / context-parallel shard), so that a shard's [S, h] input is
    about h x h elements. At least 1.

    >>> tiled_mlp_shards(500_000, 4096)
    123
    """
    return max(1, -(-seq // hidden))


def tiled_mlp_backward_bytes(tokens: int, hidden: int, inter: int, shards: int, compute: int, x_bytes: int,
                             autocast: bool = False) -> int:
    """Eq. (TM2): the most bytes alive inside a gated (SwiGLU) MLP's backward under DeepSpeed's TiledMLP [B], beyond
    the input x it saved (eq. TM1) and the gradient arriving at its output (A3 adds that one).

    ``TiledMLP.forward`` (DeepSpeed ulysses_sp.py @edaa7221 lines 988-1010) saves only x (line 1001) and runs the MLP
    over ``torch.chunk(x, shards)`` under ``torch.no_grad`` (lines 1004-1006): nothing of the shards is kept. Its
    backward (lines 1012-1062) allocates ``x_grad = torch.zeros_like(x)`` (line 1031, x's dtype) and, shard by
    shard (S = ceil(t / shards) tokens, ``torch.chunk`` line 1033), recomputes ``output = fn(self, x_shard)`` with
    grad enabled (line 1057: the shard's act input, act output, up output and product, and its [S, h] output, held
    by ``output`` through its backward) and runs ``torch.autograd.backward(output, incoming_grad_shard)`` (line 1058),
    the input gradient accumulated in place into the ``x_grad`` slice set as ``x_shard.grad`` (line 1054). The
    peak is at ``mul``'s backward, as in A3's MLP: down_proj's node has run and released the product it saved (the
    engine frees a node's saved tensors once it has run, retain_graph False), so three saved [S, I] (act input, act
    output, up output) live beside A3's phases on S tokens::

        S = ceil(t / shards)
        TM2 = x_t t h + c S h + 3 c S I + max(3 c S I, 2 c S I + c S h, c S I + 2 c S h, 3 c S h)
              [+ 2 c S h under autocast: gate_proj's and up_proj's casts of the shard's input; not traced]

    (x_t: x's element size; measured to the byte on a CPU trace of a re-implementation of TiledMLP,
    tests/formulas/test_tiled_mlp.py). The weight gradients are counted apart, as in A3.
    """
    s = -(-tokens // shards)
    c = compute
    phases = max(3 * c * s * inter, 2 * c * s * inter + c * s * hidden, c * s * inter + 2 * c * s * hidden,
                 3 * c * s * hidden)
    return x_bytes * tokens * hidden + c * s * hidden + 3 * c * s * inter + phases + (2 * c * s * hidden if autocast
                                                                                       else 0)


def checkpoint_input_bytes(spec: ModelSpec, st: ActivationSetup) -> int:
    """Bytes a fully checkpointed layer keeps: its input hidden state (r t h; split by SP)."""
    t = _div(st.tokens, st.tp) if st.sp else st.tokens
    return t * spec.hidden_size * st.residual


def reentrant_recompute_bytes(spec: ModelSpec, st: ActivationSetup) -> int:
    """Bytes the reentrant checkpoint's recompute holds beyond the non-reentrant one: the layer's output.

    torch/utils/checkpoint.py (torch 2.13): ``CheckpointFunction.backward`` (class at line 234) reruns the whole
    layer, ``outputs = ctx.run_function(*detached_inputs)`` (line 314), and keeps ``outputs`` while
    ``torch.autograd.backward(outputs_with_grad, args_with_grad)`` runs (line 331); the non-reentrant variant
    stops recomputing once the last tensor the backward unpacks is rebuilt (``_StopRecomputationError``, line 1084,
    raised at 1131; early stop on by default, line 1692), so it never rebuilds the output. The output is the
    residual stream, the shape of the checkpointed input: r t h (split by SP).
    """
    return checkpoint_input_bytes(spec, st)


def layer_backward_transient(spec: ModelSpec, layer: int, st: ActivationSetup, in_place_glu: bool = False) -> int:
    """Eq. (A3): the gradient tensors alive inside one layer's backward beyond its saved activations [B]: the most
    that coexist at any moment of the backward, taken over its phases in autograd's order, plus the gradient that
    arrives at the layer's output (held for the residual add, or its sum with the MLP branch's, throughout)::

        mlp  = max(3 c t I, 2 c t I + c t h, c t I + 2 c t h, 3 c t h)
               (MoE: 3 t k I_e e + 3 t I_s c, the routed copies in the expert dtype; not traced)
        eager = max(c P + 2 c t o_w, 8 P + c t o_w, 2 c P + c t o_w + c, c P + c t (o_w + 2 q_w)),  P = b n_h s^2
        fused = c t (o_w + q_w + k_w + v_w) [+ 2 c t q_w under GQA] + 4 b n_h S (D + 1)
                (S = s rounded up to 128, D = the q/k head dim rounded up to 32, to 64 above 128; flash kernel,
                not traced)
        transient = max(mlp, attn) + r t h                                                        (A3)

    MLP (transformers 5.24.0 models/llama/modeling_llama.py L164, ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``),
    phase by phase (torch 2.13 tools/autograd/derivatives.yaml): down_proj's ``mm`` backward (L1218-1220) makes
    d(act * up) [t, I]; ``mul.Tensor``'s backward (L1231-1233) makes d(act) and d(up) from it, then frees it: three
    [t, I] (3 c t I); up_proj's ``mm`` makes its [t, h] input gradient and frees d(up); ``silu``'s backward
    (L2123-2124) makes d(gate) while d(act) lives (2 c t I + c t h); gate_proj's ``mm`` makes the second [t, h]
    (c t I + 2 c t h) and their sum the third (3 c t h). The [t, h] gradient leaving the MLP is not made until the
    three [t, I] are consumed. Eager attention (modeling_llama.py ``eager_attention_forward`` L193-199, softmax in
    fp32, L197), after o_proj's ``mm`` made d(out) [t, o_w]: the probabilities' ``bmm`` backward makes d(probs) (c P)
    and the value gradient over every query head (repeat_kv's copy, c t o_w; its node runs last, so it lives
    through the scores' phases), then frees d(out): c P + 2 c t o_w; below 4-byte compute the ``.to`` backward
    casts d(probs) to fp32 and ``_softmax``'s backward (L2224-2225, ``_softmax_backward_data``) makes the fp32 score
    gradient from the fp32 probability gradient: 8 P + c t o_w; the cast back and the scaling's ``mul`` (the scalar
    as a 0-dim tensor of c bytes): 2 c P + c t o_w + c; the scores' ``bmm`` makes dq and dk over every query head:
    c P + c t (o_w + 2 q_w). These are measured to the byte (tests/formulas/test_layer_backward_transient.py: MHA and
    GQA, fp32 and bf16, CPU allocator); the RoPE and projection phases after them hold a few [t, q_w] and are below
    the score phases whenever s >= the head dim. Fused attention (SDPA on GPU, flash-attention): the flash kernel's
    backward, flash-attn csrc/flash_attn/flash_api.cpp ``mha_bwd`` (Dao-AILab/flash-attention @ 0251105a, L801;
    torch's ``_scaled_dot_product_flash_attention_backward`` runs its vendored copy of this function, not read
    here), allocates dq, dk, dv like q, k, v (L895, L904, L913), the fp32 ``softmax_d`` [b, n_h, S] (L921), the
    fp32 ``dq_accum`` [b, S, n_h, D] (L926; D from L872) and under GQA ``dk_expanded``/``dv_expanded``
    [b, s, n_h, d] (L937-938), while the gradient of its output d(out) is held: that is the fused term. It is NOT traced here (the tests run on CPU, whose SDPA math kernel is a different algorithm and
    holds more; the memory-efficient kernel is not modelled). The weight gradients and the saved activations are
    counted apart.

    ``in_place_glu`` (Liger-Kernel's ``LigerSiLUMulFunction`` / ``LigerGELUMulFunction``, formulas/liger_kernels.py
    eq. LG2): the fused backward writes d(gate) and d(up) into the saved gate and up outputs (linkedin/Liger-Kernel
    @ ead96b6 ops/swiglu.py lines 94-95 and 295-296, ops/geglu.py lines 83-84 and 146), so a dense MLP's phases are
    down_proj's d(product) alone, then the two projections' [t, h] input gradients and their sum::

        mlp = max(c t I, 3 c t h)                                                                     (A3l)
    """
    t, c, r = st.tokens, st.compute, st.residual
    h = spec.hidden_size
    q_w, k_w, v_w, o_w = (_div(x, st.tp) for x in _head_dims(spec, layer))
    if spec.moe_layers[layer] and spec.moe is not None:
        mlp = 3 * t * spec.moe.experts_per_token * _div(spec.moe.expert_intermediate_size, st.tp) * st.expert
        mlp += 3 * t * _div(spec.moe.shared_intermediate_size, st.tp) * c
    elif st.mlp_shards:
        mlp = tiled_mlp_backward_bytes(t, h, _div(spec.intermediate_size, st.tp), st.mlp_shards, c, r,
                                       autocast=st.autocast)
    else:
        inter = _div(spec.intermediate_size, st.tp)
        mlp = (max(c * t * inter, 3 * c * t * h) if in_place_glu and spec.mlp_gated else  # eq. A3l
               max(3 * c * t * inter, 2 * c * t * inter + c * t * h, c * t * inter + 2 * c * t * h, 3 * c * t * h))
    heads = _div(spec.num_heads, st.tp)
    if st.attention == "eager":
        p = st.batch * heads * st.seq * st.seq
        attn = max(c * p + 2 * c * t * o_w, 8 * p + c * t * o_w, 2 * c * p + c * t * o_w + c,
                   c * p + c * t * (o_w + 2 * q_w))
    else:
        qk_dim = q_w // heads if heads else 0
        attn = c * t * (o_w + q_w + k_w + v_w) + (2 * c * t * q_w if k_w < q_w else 0)
        attn += 4 * st.batch * heads * round_up(st.seq, 128) * (round_up(qk_dim, 32 if qk_dim <= 128 else 64) + 1)
    return max(mlp, attn) + t * h * r


@dataclass(frozen=True)
class HeadActivations:
    saved: tuple[Term, ...]  # kept until the backward reaches the head
    logits_forward: int  # logits + fp32 upcast alive while the loss is computed (forward only)
    loss_backward: int  # extra fp32 [t, V] gradients during the loss backward
    shared: tuple[Term, ...]  # rotary tables and shared masks (alive for the whole step)
    kept_logits: int = 0  # shifted fp32 logits the training loop keeps from its loss to the next forward


def head_activations(spec: ModelSpec, st: ActivationSetup, lm_head_trained: bool,
                     lm_head_weight_copy: int = 0, loss_chunks: int = 1,
                     linear_loss: bool = False, cut_loss: bool = False,
                     kept_logits: bool = False, compiled_loss: bool = False,
                     loss_parallel: bool = False, upcast_in_loss: bool = False,
                     fused_xentropy: bool = False, megatron_ce: bool = False,
                     fused_linear: tuple[tuple[Term, ...], int] | None = None) -> HeadActivations:
    """Final norm, lm_head input, loss tensors (module docstring, 'Head'), vocabulary split by TP.

    ``fused_linear``: the (kept terms, forward bytes) of a loss that runs the lm_head inside itself and computes the
    gradients in its forward (Liger-Kernel's fused linear cross-entropy, formulas/liger_kernels.py eq. LG4): the
    final norm's terms and those; no lm_head input, logits or log-softmax is kept, and its backward allocates nothing.

    ``loss_chunks`` > 1 (torchtune ``CEWithChunkedOutputLoss``): the fp32 upcast and the two fp32 loss
    gradients exist for one chunk of t / loss_chunks tokens at a time; the fp32 log-softmax of every chunk is
    still kept for the backward.

    ``linear_loss`` (torchtune ``LinearCrossEntropyLoss``, torchtune/modules/loss/cross_entropy_loss.py @ bd2a0fc:
    the model skips its output layer, line 69; the hidden states are split into ``num_output_chunks`` row chunks,
    line 177; each chunk's logits = lm_head(chunk), line 107, are upcast and passed to cross_entropy, line 110):
    the bf16 logits exist for one chunk at a time as well, not for all t tokens. What autograd keeps is unchanged:
    cross_entropy's fp32 log-softmax of every chunk (the float() cast and the chunk's bf16 logits are freed once
    the chunk's loss is computed).

    ``cut_loss`` (Cut Cross-Entropy, Wijmans et al. 2024, arXiv 2411.09009, section 4: the logits are formed block by
    block in on-chip memory for the forward's log-sum-exp and again in the backward; Unsloth calls it through
    unsloth_zoo/loss_utils.py @ 36ff5fc ``fused_linear_cross_entropy``, lines 141-163, from
    unsloth/models/llama.py @ e3162dc lines 1017-1024): no [t, V] tensor exists. The loss keeps its inputs, the
    final hidden states (t h c, saved whether or not the lm_head trains) and the fp32 log-sum-exp per token (t 4).

    ``kept_logits`` (torchtune's recipes of 2024-05, e.g. recipes/lora_finetune_single_device.py @ 0217d44c2
    lines 460-469; the same four lines in lora_finetune_distributed.py 553-563, full_finetune_single_device.py
    416-426 and full_finetune_distributed.py 478-488)::

        logits = self._model(input_ids)            # the model ends with self.output(h).float() (transformer.py 210)
        logits = logits[..., :-1, :].contiguous()  # a second fp32 tensor: b (s - 1) V x 4 B
        logits = logits.transpose(1, 2)
        loss = self._loss_fn(logits, labels)       # torch.nn.CrossEntropyLoss
        loss.backward()

    The loop's ``logits`` variable holds the shifted fp32 copy through ``loss.backward()`` and the rest of the
    step, until the next step's ``logits = self._model(...)`` rebinds it once that forward has returned:

        kept = b (s - 1) V_tp x 4 B                                                                     (K1)

    alive at every moment of the step (from the second step on). While the loss backward runs, K1 adds to the
    saved log-softmax and the two fp32 gradients: 4 fp32 [t, V] tensors at LogSoftmaxBackward. At the forward's
    lm_head the previous step's K1 is alive instead of the (not yet computed) log-softmax of the same size.

    ``compiled_loss`` (the cross-entropy under ``torch.compile``: torchtune's recipes call
    ``training.compile_loss`` when ``compile`` is set, torchtune/training/_compile.py @ 1814feb lines 58-82, which
    compiles ``CEWithChunkedOutputLoss.compute_cross_entropy`` = ``F.cross_entropy(logits.float(), ...)``, or the
    whole loss module when it is not chunked): inductor decomposes log-softmax into max, exp, sum and log and its
    min-cut partitioner saves the loss's *input* logits with two fp32 per-token statistics (max and log-sum-exp)
    instead of the fp32 [t, V] log-softmax; the upcast is fused into the kernels, so no fp32 chunk is materialised
    (measured on inductor, tests/formulas/test_compiled_loss.py). What is kept then is

        chunked (loss_chunks > 1): the model's half-precision logits chunks, t V c + 16 t                   (C1)
        unchunked: the logits the model upcast before the loss (torchtune transformer.py @ 1814feb line 652,
                   ``self.output(h).float()``), t V 4 + 16 t, the half-precision head output alive during the
                   cast (t V c, forward only)                                                               (C2)

    (16 t: int64 labels and the two fp32 statistics). The loss backward emits one gradient per chunk, in the
    logits' dtype (chunk V c; unchunked: the fp32 t V 4 that the cast's backward turns into c).
    ``upcast_in_loss`` (torchtitan @ e7c0cae: the model returns the half-precision logits, models/llama3/model.py
    line 496, and the compiled loss is ``cross_entropy(pred.flatten(0, 1).float(), ...)``, components/loss.py
    ``cross_entropy_loss``/``build_cross_entropy_loss``): the upcast is inside the compiled function, which saves
    its half-precision input and returns a half-precision gradient:

        unchunked, upcast in the loss: t V c + 16 t kept, t V c in the backward, none beside it in the forward  (C3)

    ``loss_parallel`` (PyTorch's ``loss_parallel()`` context, torch/distributed/tensor/parallel/loss.py @ v2.13.0;
    these lines are unchanged since its first version, torch 2.3). torchtitan @ 9dec370 enters it for every step when
    tp > 1 (parallel_dims.py lines 119-120, utils.py lines 196-201), keeps the lm_head's output a DTensor sharded on
    the vocabulary (parallelize_llama.py lines 138-141: ``output_layouts=Shard(-1)``, ``use_local_output=False``) and
    computes ``cross_entropy(pred.flatten(0, 1).float(), labels)``, then ``del pred`` before ``loss.backward()``
    (train.py lines 131-134, 302-308). On each rank's shard [t, V_tp] (V_tp = V / tp) the context replaces aten's
    fused log-softmax and NLL kernels (``customized_loss_ops``, lines 598-605) by tensor-level decompositions:

    - forward, ``_log_softmax`` (lines 197-221): the upcast ``x`` is already contiguous fp32 (line 204 copies
      nothing); ``shifted = x - x_max`` (line 212), ``torch.exp(shifted)`` (line 213, freed once summed) and
      ``result = shifted - shifted_logsumexp`` (line 218, the log-softmax autograd keeps). At line 213, and again
      at 218, the half-precision logits, the upcast, ``shifted`` and one more fp32 tensor coexist:

          logits + upcast + shifted = t V_tp (c + 4 + 4)   (+ the kept log-softmax t V_tp 4)              (LP1)

      (c = 4: ``.float()`` returns the fp32 logits themselves, t V_tp (4 + 4));
    - backward, ``_nll_loss_and_log_softmax_backward`` (lines 451-518), which also does the log-softmax backward
      (its own handler, lines 259-266, returns the fp32 gradient as it is): ``grad_input = torch.zeros_like(x)``
      (line 470), then ``(grad_input + torch.exp(x)) * grad_output`` (line 518): the kept log-softmax, grad_input,
      exp(x) and their sum coexist (the product takes exp's place once it is freed):

          loss gradients = 3 t V_tp 4   (+ the kept log-softmax t V_tp 4)                                 (LP2)

    One fp32 [t, V_tp] tensor more than ``F.cross_entropy``'s fused kernels in each (c + 4 and 2 x 4 above).
    The logits come from DTensor's ``ColwiseParallel`` lm_head (loss_parallel takes them as a vocabulary-sharded
    DTensor): with sequence parallelism its input hook all-gathers the sequence shards before the matmul
    (``input_layouts=Shard(1)``, parallelize_llama.py line 139; torch tensor/parallel/style.py @ v2.13.0
    ``ColwiseParallel._prepare_input_fn`` lines 99-116 redistributes to Replicate), and the matmul saves the gathered
    input: a trained lm_head keeps t h c, where Megatron's sequence-parallel linear keeps its t / tp shard and
    gathers again in its backward. Measured on a live allocation trace of the real loss_parallel on two gloo ranks
    (tests/training/test_loss_parallel.py).

    ``fused_xentropy`` (flash-attn's ``CrossEntropyLoss``: llm-foundry's default ``loss_fn`` 'fused_crossentropy',
    llmfoundry/models/mpt/modeling_mpt.py @ b2a43a147 lines 724-730, built as ``FusedCrossEntropyLoss(ignore_index=
    -100)`` and called on ``outputs.logits.view(-1, V)``, line 766; llm-foundry 300cc5c58 the same in
    llmfoundry/models/mosaic_gpt/mosaic_gpt.py lines 510-515). flash-attn v1.0.9 (llm-foundry b2a43a147's ``gpu``
    extra, setup.py line 89) runs ``xentropy_cuda_lib``: flash_attn/losses/cross_entropy.py line 36 computes the
    per-token losses and log-sum-exp in fp32 (csrc/xentropy/xentropy_kernel.cu lines 638-639: two fp32 [t]
    tensors) straight from the half-precision logits, line 89 ``ctx.save_for_backward(logits, lse, labels)``, and the
    backward (lines 100-102) writes the gradient into ``inplace ? logits_ : at::empty_like(logits_)``
    (xentropy_kernel.cu line 697), with ``inplace_backward`` False by default (cross_entropy.py line 109) and not
    set by llm-foundry. flash-attn 2.x (its Triton kernel, flash_attn/ops/triton/cross_entropy.py @ v2.4.2 lines
    173-174, 225 and 238) keeps and allocates the same. So, with c the logits' dtype (no fp32 upcast anywhere)::

        kept: the logits t V c + lse t 4 + int64 labels t 8     backward: the logits' gradient t V c        (X1)

    beside the per-token fp32 losses in the forward (t 4). The logits are freed with the loss node once its
    backward has run (the lm_head backward then holds their gradient only, ``lm_head_backward_bytes``).

    ``megatron_ce`` (Megatron-Core's ``vocab_parallel_cross_entropy`` on the rank's vocabulary shard V / tp,
    NVIDIA/Megatron-LM @d98e8a64 megatron/core/tensor_parallel/cross_entropy.py): ``calculate_logits_max`` makes one
    fp32 copy of the half-precision logits (line 25), every later step works in place on it (line 42 subtracts the
    max, lines 61-62 ``torch.exp(..., out=exp_logits)``, line 77 ``exp_logits.div_``) and line 181 saves that softmax
    with the bool target mask and the int64 masked targets; the backward writes the gradient into the saved softmax
    (``grad_input = softmax``), and the ``.float()`` cast's backward hands the lm_head a gradient in the logits'
    dtype c. So, per token and vocabulary shard::

        kept: t V_tp 4 + t (1 + 8)    forward: the logits t V_tp c beside it    backward: t V_tp c         (MC1)

    (14 B per token x vocabulary for 'ce' becomes 4 + c = 6 B under bf16, each divided by tp).
    """
    t, c, r, h = st.tokens, st.compute, st.residual, spec.hidden_size
    v = _div(spec.vocab_size, st.tp)
    if spec.encoder_decoder is not None:  # T5: what lies outside the blocks, eq. (E5); logits over the target
        tt = st.head_tokens
        outside = (t5_outside_blocks_saved_terms if st.full else t5_lora_outside_blocks_saved_terms)(
            spec, st.batch, st.seq, st.target or st.seq, c, st.dropout_mask)
        return HeadActivations(tuple(Term(n, b, f) for n, b, f in outside), tt * v * c + (tt * v * 4 if c != 4 else 0),
                               2 * tt * v * 4, ())
    kind = "layernorm" if spec.norm_kind == "layernorm" else "rmsnorm"
    saved: list[Term] = list(_norm_terms("final norm", t, h, r, st.full, st, kind=kind,
                                         fp32_normalised=spec.norm_fp32_normalised,
                                         weight_copy=_norm_weight_copied(spec, st)))
    adapted_head = "output" in st.adapted and not st.full
    if lm_head_trained and not (adapted_head and st.dropout != "none") or st.lm_head_keeps_input:
        n = 1
        ts = _div(t, st.tp) if st.sp and not loss_parallel else t  # DTensor's lm_head keeps the gathered input
        saved.append(Term("lm_head input", n * ts * h * c, f"{ts} x {h} x {c} B"
                          + (" (kept by the quantized lm_head's matmul, nf4_quantization.py eq. 4)"
                             if st.lm_head_keeps_input else "")))
    if adapted_head and st.dropout != "none":
        saved.append(Term("lm_head LoRA dropout copy + mask", t * h * (c + st.dropout_mask),
                          f"{t} x {h} x ({c} + {st.dropout_mask}) B (eq. D1)"))
    if lm_head_weight_copy:
        saved.append(Term("lm_head autocast weight copy", lm_head_weight_copy,
                          f"{spec.vocab_size} x {h} x {st.weight_copy} B"))
    if spec.gemma3n is not None:
        saved += gemma3n_model_terms(spec, st)
    if fused_linear is not None:  # formulas/liger_kernels.py eq. LG4
        saved = [x for x in saved if x.name != "lm_head input"] + list(fused_linear[0])
        return HeadActivations(tuple(saved), fused_linear[1], 0, shared_activations(spec, st))
    if cut_loss:
        if not lm_head_trained:
            saved.append(Term("lm_head input", t * h * c, f"{t} x {h} x {c} B (kept by the fused loss)"))
        saved.append(Term("loss log-sum-exp (fp32)", t * 4 + t * 8, f"{t} tokens x 4 B + int64 labels (Cut CE)"))
        return HeadActivations(tuple(saved), 0, 0, shared_activations(spec, st))
    if megatron_ce:  # eq. MC1
        saved.append(Term("loss softmax (fp32, in place of the logits' fp32 copy: Megatron vocab-parallel CE)",
                          t * v * 4 + t * 9, f"{t} tokens x {v} vocab x 4 B + bool mask + int64 targets (eq. MC1)"))
        return HeadActivations(tuple(saved), t * v * c, t * v * c, shared_activations(spec, st))
    if fused_xentropy:  # eq. X1
        saved.append(Term("loss input logits (fused cross-entropy)", t * v * c + t * 4 + t * 8,
                          f"{t} tokens x {v} vocab x {c} B (flash-attn's kernel keeps the logits) + fp32 log-sum-exp "
                          "+ int64 labels (eq. X1)"))
        return HeadActivations(tuple(saved), t * 4, t * v * c, shared_activations(spec, st))
    chunk = -(-t // max(1, loss_chunks))
    if compiled_loss and not linear_loss and not kept_logits:
        kept_b = c if loss_chunks > 1 or upcast_in_loss else 4
        saved.append(Term("loss input logits (compiled loss)", t * v * kept_b + t * 16,
                          f"{t} tokens x {v} vocab x {kept_b} B (inductor keeps the loss's input logits) + int64 "
                          "labels + 2 fp32 per-token statistics (eqs. C1-C3)"))
        fwd = 0 if loss_chunks > 1 or c == 4 or upcast_in_loss else t * v * c
        bwd = chunk * v * (c if loss_chunks > 1 or upcast_in_loss else 4)
        return HeadActivations(tuple(saved), fwd, bwd, shared_activations(spec, st))
    saved.append(Term("loss log-softmax (fp32)", t * v * 4 + t * 8,
                      f"{t} tokens x {v} vocab x 4 B (cross_entropy keeps fp32 log_softmax) + int64 labels"))
    logits_fwd = (chunk if linear_loss else t) * v * c + (chunk * v * 4 if c != 4 else 0)
    loss_bwd = 2 * chunk * v * 4
    if loss_parallel:  # eqs. LP1, LP2: the decomposed log-softmax's `shifted`, the fused backward's exp(x) + sum
        logits_fwd += t * v * 4
        loss_bwd += t * v * 4
    kept = st.batch * max(0, st.seq - 1) * v * 4 if kept_logits else 0  # eq. K1
    return HeadActivations(tuple(saved), logits_fwd, loss_bwd, shared_activations(spec, st), kept)


def lm_head_backward_bytes(loss_chunks: int, tokens: int, vocab: int, compute: int, head_grad: int) -> tuple[int, int]:
    """(logits-gradient bytes, lm_head weight-gradient bytes) while a *trained* lm_head runs its backward, at the
    moment that holds the most (module docstring, 'Head'); the loss's saved tensors are gone by then.

    With the logits formed in ``C = loss_chunks`` chunks (torchtune ``chunked_output``: ``[self.output(chunk) for
    chunk in h.chunk(C, dim=1)]``, torchtune/modules/transformer.py @ 1814feb, every chunk's linear is created before
    any chunk's loss) the autograd engine, which runs the ready node of highest sequence number first
    (torch/csrc/autograd/engine.cpp ``ReadyQueue``), runs every chunk's loss backward first: the saved log-softmax
    (or, compiled, the saved logits) of every chunk is freed, and each chunk's logits gradient (t/C V c) waits for its
    linear. Each linear backward makes a whole [V, h] weight gradient, the transpose of ``grad^T @ input``
    (a view), which the engine sums into the weight's input buffer (torch/csrc/autograd/input_buffer.cpp
    ``accumulate``, pytorch @ 4537ef6 lines 73-127: in place only when ``can_accumulate_inplace``, a dense tensor that
    is the only reference to itself and to its storage). At the second chunk the buffered gradient is the first
    chunk's view, so the sum is out of place: the buffered gradient, the new one and their sum coexist, with the
    logits gradients of the C - 2 chunks not yet done (from the third chunk on the buffered sum is a fresh tensor and
    is added to in place: 2 G, with fewer logits gradients):

        logits grad = (C - 2) / C  t V c      weight grad = 3 G                                  (C > 1)    (H1)
        logits grad = t V c                   weight grad = G                                    (C = 1)

    (G: the lm_head gradient, ``head_grad``). Measured exactly on the CPU allocator's bytes during the backward
    (tests/formulas/test_lm_head_backward.py, torch.profiler memory events, no dispatch mode: a dispatch-mode trace
    would make every sum out of place and reads the same peak here). With tied embeddings the summed buffer then waits for the
    embedding's own gradient at the end of the backward (the same AccumulateGrad node): the estimate keeps G alive
    through the layers (states.py ``head_grads``).
    """
    c = max(1, loss_chunks)
    if c == 1:
        return tokens * vocab * compute, head_grad
    chunk = -(-tokens // c)
    return (c - 2) * chunk * vocab * compute, 3 * head_grad


def tied_embedding_backward_end_bytes(embedding_grad: int, grad_output: int, lm_head_grad_is_view: bool,
                                      grads_persist: bool) -> int:
    """Bytes above the gradients counted once (the tied matrix's among them) at the end of the backward, when a
    *trained* embedding is tied to the lm_head (one parameter, one ``AccumulateGrad`` node).

    The lm_head's weight gradient arrives first and waits in that node's input buffer for the embedding's, which
    comes at the very end of the backward. Two moments (G = ``embedding_grad``, the [V, h] gradient in its dtype;
    ``grad_output``: the embedding's incoming [t, h] gradient):

    - the embedding's dense backward runs: the buffered lm_head gradient, ``grad_output`` and the new [V, h]
      gradient: G + ``grad_output`` above the one counted;
    - the engine sums the two into the buffer (torch/csrc/autograd/input_buffer.cpp ``accumulate``, pytorch
      @ 4537ef6 lines 87-127): in place (``old_var.add_(var)``) only if ``can_accumulate_inplace(old_var)``
      (lines 73-84: non-overlapping and dense, and the only reference to the tensor *and to its storage*), else
      ``old_var + var`` out of place. The plain lm_head's gradient is a view (``mm_mat2_backward`` returns the
      transposed product of a column-major ``weight.t()``, then ``TBackward`` transposes it back): its base shares
      the storage, so the sum is out of place and the buffered gradient, the new one and their sum coexist: 2 G
      above the one counted. Where the buffered gradient is a fresh tensor (the fp32 cast of an autocast copy's
      gradient, ``ToCopyBackward``; a chunked head's already-summed buffer, eq. H1; a fused loss's own output) the
      sum is in place: nothing above the first moment.

    With gradients kept from an earlier micro-batch the parameter's ``.grad`` exists beside these (the sum is
    added to it in place by ``AccumulateGrad``): one more G (eq. A1).

        extra = max(G + grad_output, 2 G)   (lm_head gradient a view)                                   (T1)
        extra = G + grad_output             (fresh)
        extra += G                          (gradients persist)

    Measured on the CPU allocator's bytes (torch.profiler memory events) during the backward of a tied
    Embedding/Linear model (torch 2.13.0), tied vs untied, fp32, bf16, fp32 weights under bf16 autocast (the fresh,
    in-place case) and with a persisting .grad, to the byte but the embedding backward's int64 index copies; the
    in-place and out-of-place sums also by the engine's data pointers. A TorchDispatchMode's Python wrappers hold
    references, so under any such tracer every input-buffer sum is out of place: it reads the fresh case as the view
    case, G - ``grad_output`` too high (tests/formulas/test_tied_embedding_grad.py).
    An untied model's embedding gradient is the one counted (``grad_output`` above it): this term is only for a
    tied, trained embedding with the lm_head on the same device.

    >>> tied_embedding_backward_end_bytes(100, 1, True, False), tied_embedding_backward_end_bytes(100, 1, False, True)
    (200, 201)
    """
    g = embedding_grad
    extra = max(g + grad_output, 2 * g) if lm_head_grad_is_view else g + grad_output
    return extra + accumulate_grad_transient_bytes(g, grads_persist)


def accumulate_grad_transient_bytes(new_grad: int, grads_persist: bool) -> int:
    """Bytes a parameter's fresh gradient adds beside its kept ``.grad`` while ``AccumulateGrad`` adds it in (A1).

    When the parameter has no ``.grad`` (``zero_grad(set_to_none=True)`` before a step of one micro-batch),
    ``AccumulateGrad`` steals the new gradient (torch/csrc/autograd/functions/accumulate_grad.h, torch 2.13.0 =
    pytorch @ cf30153, lines 188-200, ``update_grad(new_grad.detach())``): it becomes the ``.grad`` counted once.
    When a ``.grad`` exists (gradients kept across micro-batches: accumulation, pipeline micro-batches, or zeroed
    in place), the new gradient is made whole by the parameter's backward and then added into it in place
    (lines 238-252, ``variable_grad += new_grad`` outside double backward): both exist until the add returns.

        extra = new_grad   (gradients persist)
        extra = 0          (otherwise)                                                              (A1)

    Every trained parameter does this in turn; its moment is that of its own backward. The largest is the
    [V, h] embedding's or lm_head's. An untied embedding's comes at the very end of the backward, beside every
    gradient and the embedding's incoming [t, h] gradient (measured on a live-tensor trace of a CPU backward,
    and the ``.grad`` kept in place by its data pointer, untraced: tests/formulas/test_tied_embedding_grad.py).

    >>> accumulate_grad_transient_bytes(100, True), accumulate_grad_transient_bytes(100, False)
    (100, 0)
    """
    return new_grad if grads_persist else 0


def layer_fresh_gradient_bytes(spec: ModelSpec, st: ActivationSetup, grad_bytes: int) -> int:
    """A dense layer's backward at its MLP down projection when its ``.grad`` persists (eq. A1 applied to a layer),
    weights in the compute dtype (no autocast copy): the new [h, I] weight gradient beside the kept one
    (``grad_bytes`` per element), the input gradient [t, I] and two [t, h] residual-width gradients (2 r t h;
    eq. A3 holds one, its moment being before any [t, h] is made). The layer's saved activations are counted apart. Measured to the byte on an
    fp32 MLP's live-tensor trace (tests/formulas/test_tied_embedding_grad.py). Under autocast (the copy's gradient,
    then its cast, while the copies are being freed) the moment differs and is not modeled here.

        fresh = I h grad_bytes + c t I + 2 r t h                                                    (A2)
    """
    t, h, i = st.tokens, spec.hidden_size, _div(spec.intermediate_size, st.tp)
    return accumulate_grad_transient_bytes(i * h * grad_bytes, True) + st.compute * t * i + 2 * st.residual * t * h


def shared_activations(spec: ModelSpec, st: ActivationSetup) -> tuple[Term, ...]:
    """The terms every pipeline stage holds for the whole step, the head's or not (``HeadActivations.shared``):
    rotary tables and shared attention masks; none for an encoder-decoder (eq. (E5) counts what lies outside its
    blocks)."""
    if spec.encoder_decoder is not None:
        return ()
    return tuple(_shared_terms(spec, st, st.tokens, st.residual))


def _shared_terms(spec: ModelSpec, st: ActivationSetup, t: int, r: int) -> list[Term]:
    """Rotary tables and attention masks shared by all layers."""
    shared: list[Term] = []
    if spec.rotary:
        hd = spec.mla.qk_rope_head_dim if spec.mla is not None else (spec.rotary_dim or spec.head_dim)
        # one [1, s, hd] table each unless the rows carry their own position_ids (packing): module docstring
        rows = t if st.packing else st.seq
        kinds = [k for k in ("sliding", "full") if k in spec.layer_types]
        if spec.gemma4 is not None and len(kinds) > 1:
            # Gemma4TextModel.forward makes one (cos, sin) pair per layer type, each of that type's head size
            # (measured: tests/training/test_gemma4_head_sizes_saved.py)
            hds = tuple(spec.kv_head_dim(k) for k in kinds)
            shared.append(Term("rotary cos/sin", 2 * rows * sum(hds) * r,
                               f"2 x {rows} x ({' + '.join(map(str, hds))}) x {r} B (one pair per layer type)"))
        else:
            shared.append(Term("rotary cos/sin", 2 * rows * hd * r, f"2 x {rows} x {hd} x {r} B (shared by all layers"
                               + (", per-row position_ids)" if st.packing and st.batch > 1 else ")")))
    if st.attention == "eager":
        shared.append(Term("eager attention mask", st.batch * st.seq * st.seq * r,
                           f"{st.batch} x {st.seq}^2 x {r} B (4-D float mask, forward only)", forward_only=True))
    elif st.attention == "flex":  # eq. (FX2): one BlockMask shared by every layer, saved by each layer's flex call
        nb = -(-st.seq // FLEX_BLOCK)
        shared.append(Term("FlexAttention BlockMask", st.batch * 4 * nb * (nb + 1) * 4,
                           f"{st.batch} x 4 x ({nb} + {nb}^2) x 4 B (kv/full_kv/q/full_q counts and indices, int32)"))
        if st.packing:
            shared.append(Term("packed document ids (mask_mod buffer)", st.batch * st.seq * 8,
                               f"{st.batch} x {st.seq} x 8 B (torchtune _get_document_ids_from_seq_lens, int64)"))
    elif any(needs_mask(spec, spec.layer_types.index(k), st) for k in dict.fromkeys(spec.layer_types)):
        # (a layer needs a mask only through its type: one layer of each type asked)
        shared.append(Term("boolean attention mask", st.batch * st.seq * st.seq,
                           f"{st.batch} x {st.seq}^2 x 1 B (shared, forward only)", forward_only=True))
    return shared


def korthikanti_layer_bytes(seq: int, batch: int, hidden: int, heads: int, tp: int = 1, sp: bool = False,
                            recompute: str = "none") -> int:
    """Korthikanti et al. 2022 (arXiv 2205.05198) activation bytes of one layer, 16-bit activations.

    eq. 1: s b h (34 + 5 a s / h); eq. 2 (TP t): s b h (10 + 24/t + 5 a s / (h t)); eq. 4 (TP + SP):
    s b h / t (34 + 5 a s / h); selective recomputation (section 4.3) drops the 5 a s / h term; full
    recomputation keeps the layer input, 2 s b h (section 4.3, 'full activation recomputation').

    >>> korthikanti_layer_bytes(2048, 1, 4096, 32)
    956301312
    """
    sbh = seq * batch * hidden
    quad = 5 * heads * seq / hidden
    if recompute == "full":
        return 2 * sbh // (tp if sp else 1)
    if recompute == "selective":
        quad = 0.0
    if sp:
        return int(sbh / tp * (34 + quad))
    if tp > 1:
        return int(sbh * (10 + 24 / tp + quad / tp))
    return int(sbh * (34 + quad))

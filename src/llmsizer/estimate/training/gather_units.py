"""The FSDP units a rank all-gathers and their unsharded bytes in the all-gather dtype: the one home of "which bytes
a unit gathers", read by every rule of the training timeline's ``gathered_params`` (the two largest units, eq. PP1
under pipeline parallelism, ``offload='params'`` and the traced layouts of formulas/fsdp2_units.py).

- **Units.** Each decoder block is a unit (torchtitan ``apply_fsdp``, torchtune ``shard_model``, HF/accelerate's
  transformer auto-wrap); what no block holds is the root's: the token embedding (``embedding``) and the final norm
  and output projection (``head``), kept apart here because the untraced rules (the two largest units, eq. PP1,
  offload='params') count them as two units, as they did before this module (wrapping not traced), while the traced
  layouts add them into one root (formulas/fsdp2_units.py).
- **Adapters.** A unit's LoRA A/B and DoRA magnitudes are parameters of its unit and are all-gathered with it:
  FSDP2's ``fully_shard`` of a block manages every parameter under it not already in a nested unit (torchtune's
  LoRA recipes shard ``layers.i`` and the root only: lora_finetune_distributed.py @30b8519 lines 418-435,
  training/_distributed.py lines 618-623; ``LoRALinear``'s ``lora_a`` / ``lora_b`` are submodules of the block's
  linears, modules/peft/lora.py lines 69-70); FSDP1 with the adapters in their layer's unit flattens them into its
  FlatParameter (torch ``distributed/fsdp/_flat_param.py``). PEFT modules_to_save copies belong to the embedding's
  or the lm_head's unit. FSDP1 with the adapters wrapped apart gathers them in units of their own
  (formulas/fsdp_flat_param.py eq. W2): not counted in any unit here.
- **Dtypes.** Each parameter is all-gathered in ``param_dtype`` under ``fsdp-bf16-mixed`` (FSDP2
  ``MixedPrecisionPolicy``, FSDP1 ``MixedPrecision``), else in its own dtype. With float8 training under FSDP2 the
  blocks' Float8Linear weights are all-gathered in float8, 1 B per element (torchao ``WeightWithDynamicFloat8CastTensor
  .fsdp_pre_all_gather`` returns the float8 data: torchao/float8/fsdp_utils.py lines 228-251, 0.18.0; an FSDP2
  extension: config.py lines 223-225 ``enable_fsdp_float8_all_gather``, "float8 all-gather with FSDP2", so FSDP1
  gathers them in param_dtype; TransformerEngine's recipe is sized as torchao's, specs/training.py; torchao's rowwise
  recipes gather in param_dtype: ``enable_fsdp_float8_all_gather`` is tensorwise-only, formulas/float8_training.py
  ``float8_gathers_in_float8``); everything else, the
  blocks' norms and biases, the embedding and the output projection (``convert_to_float8_training`` leaves it a
  plain nn.Linear, torchtitan's float8 converter filters ``output``), stays in ``param_dtype``.

Measured against real 2-rank FSDP2 steps (tests/training/test_fsdp_gather_units.py).

**Collective volume** (``fsdp_collective_volume``: what the step time's FSDP all-gathers and reduce-scatters carry,
formulas/training_time.py eq. (7c), read by estimate/duration.py): the payloads of one micro-step, every rank's
elements (the ring moves (s-1)/s of each per device, formulas/network.py):

- **forward**: every unit above, once (``FSDPParamGroup.pre_forward`` -> ``unshard`` -> ``foreach_all_gather``, whose
  flat output is the unit's unsharded parameters in their all-gather dtypes: torch 2.13.0
  ``distributed/fsdp/_fully_shard/_fsdp_collectives.py`` lines 325-384, ``dist.all_gather_single``), plus FSDP1's
  adapter units wrapped apart (each LoRA matrix its own flat parameter, formulas/fsdp_flat_param.py eq. W2);
- **backward**: the units resharded after their forward, gathered again by their pre-backward
  (``_fsdp_param_group.py`` ``pre_backward`` lines 576-585): formulas/fsdp2_units.py eq. (U5) for the traced
  layout, else torch's defaults (every block resharded, the root kept: ``_fsdp_state.py`` lines 203-207; FSDP1
  likewise, ``_runtime_utils.py`` lines 494-499; its adapter units are resharded too);
- **reduced**: the gradient elements reduce-scattered. FSDP2 reduces only the parameters autograd gave a gradient:
  ``post_backward`` collects ``fsdp_param.unsharded_param.grad`` where it is not None (``_fsdp_param_group.py``
  lines 618-636; a frozen parameter never gets one, and ``reduce_scatter_unused_params`` only adds unused
  parameters that require grad), then ``foreach_reduce`` copies them into one flat reduce-scatter input in
  ``reduce_dtype`` (``_fsdp_collectives.py`` lines 522-620, ``dist.reduce_scatter_single``): a LoRA step
  reduce-scatters its adapters' gradients only, while its frozen base is all-gathered whole (PEFT 0.21.2
  ``tuners/tuners_utils.py`` ``_mark_only_adapters_as_trainable`` lines 506-523 sets ``requires_grad = False`` on
  every parameter but the adapters' and modules_to_save's).
  FSDP1 with the adapters in their layer's unit reduce-scatters each unit's whole flat gradient, frozen elements
  included (torch ``_flat_param.py`` lines 804-836; ``StageStates.reduced_elements``, the memory's own count).

**Backward-free modules** (which parameters are gathered once, in the forward only, and which twice). A module's
backward runs, and DeepSpeed ZeRO-3 / FSDP gather its parameters for it, only when its output needs a gradient:
autograd builds no node for an operator none of whose inputs requires grad (formulas/training_activations.py eq. F1),
DeepSpeed's pre-backward hook is an autograd Function on the module's outputs (``PreBackwardFunctionForModule``,
runtime/zero/parameter_offload.py lines 466-483 at 0.19.8, whose ``backward`` fetches the module's parameters), FSDP2
registers its pre-backward only on outputs that require grad (torch 2.13.0 ``_fsdp_state.py``
``_register_pre_backward_hook`` lines 434-452), FSDP1 likewise (``_runtime_utils.py`` ``_register_pre_backward_hooks`` line 1370).
Under LoRA with a frozen embedding (setup.py ``embedding_output_needs_grad``) a decoder layer's input needs a gradient
only after the first layer holding an adapter (setup.py ``layer_inputs_need_grad``); its output, the next layer's
input, from that layer on. So, per tensor of a decoder layer:

    runs = input needs a gradient                                  (every layer after the first adapted one)
           or [output needs one and the tensor's module reads something that does]                     (B1)

where, in the first adapted layer (its input needing none): the attention norm and the q/k/v (MLA q_a / kv_a, Mamba
in_proj) read the layer input: never; the attention output projection, q/k norms and the Mamba mixer's other tensors
read the mixer's output: when a q/k/v (Mamba) projection is adapted (eq. F1's ``mix``); the MLP's norm, router,
gate and up read the residual after the mixer: when that or the o projection is adapted (F1's residual); down reads
act(gate) x up: that, or gate or up adapted. Every layer before it runs nothing; the final norm runs when the last
layer's output needs a gradient, the lm_head too or when it trains. A LoRA adapter's A and B train: they always run.
DeepSpeed gathers per parameter (``zero3_collective_elements`` over these uses); FSDP per unit, and its backward
prefetch gathers the unit before each one whose pre-backward fires, whether its backward runs or not ("Prefetch
naively using the reverse post-forward order, which may have mistargetted prefetches", ``_fsdp_param_group.py``
``_backward_prefetch`` lines 795-830; FSDP1's BACKWARD_PRE in the reverse pre-forward order, ``_exec_order_utils.py``
``get_handle_to_backward_prefetch`` line 88), the root last in FSDP2's post-forward order and first in FSDP1's pre-forward
order::

    block i gathered again  <=>  resharded after its forward and (fires(i) or fires(i + 1))             (B2)

with fires(i) = block i's output needs a gradient, fires(U) = the root's (FSDP2: the logits, always; FSDP1: never
prefetching). Measured to the byte on two gloo ranks: DeepSpeed 0.19.8 with LoRA on o only, down only, the lm_head
only and a hybrid's q/v (tests/training/test_deepspeed_zero3_volume.py); FSDP2 and FSDP1 with the lm_head alone
adapted and FSDP2 on the hybrid (tests/training/test_fsdp_collective_volume.py). Not modelled: a parameter read by
a parent module's forward (NemotronHBlock reads ``self.norm.weight``) is a DeepSpeed "external parameter" of that
module and gathered with it (parameter_offload.py lines 80-89): one norm weight more.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

from ...formulas.deepspeed_zero import (
    Zero3Use,
    Zero3Volume,
    persistent_param_bytes,
    persists,
    zero3_collective_elements,
)
from ...formulas.float8_training import float8_gathered_bytes, float8_gathers_in_float8, float8_weight_elements
from ...formulas.fsdp2_units import backward_gathers_of
from ...formulas.parallelism import zero_shards
from ...formulas.tensors import model_tensors
from ...formulas.training_activations import MLP_INPUTS, layer_grads
from ...specs.training import TrainingWorkload
from .setup import TrainingContext, embedding_output_needs_grad, embedding_trained, layer_inputs_need_grad
from .states import StageStates


@dataclass(frozen=True)
class GatherUnits:
    """One stage's FSDP units, each its unsharded bytes in the all-gather dtype (module doc)."""

    embedding: int  # the token embedding (+ its adapters); 0 when the stage has none
    head: int  # the final norm and output projection (+ their adapters); 0 when the stage has none
    blocks: tuple[int, ...]  # each decoder block of the stage (+ its adapters), in forward order

    @property
    def root(self) -> int:
        """The root unit of the traced layouts (formulas/fsdp2_units.py): the embedding and the head together."""
        return self.embedding + self.head

    @property
    def units(self) -> list[int]:
        """Every unit as the untraced rules count them (the embedding and the head apart; those the stage has)."""
        return ([self.embedding] if self.embedding else []) + list(self.blocks) + ([self.head] if self.head else [])


def float8_all_gather(w: TrainingWorkload) -> bool:
    """Whether the blocks' Float8Linear weights are all-gathered in float8 (module doc): float8 training under
    FSDP2 with the parameters sharded (or offloaded) and gathered for compute."""
    return (w.float8 and float8_gathers_in_float8(w.float8_recipe) and w.fsdp is not None and w.fsdp_version == 2
            and (w.shard_stage >= 3 or w.offload == "params"))


# Each stage's units, by its states and their context: ``stage_states`` makes the states of a frozen context and
# nothing changes them after (training/compose.py ``_STAGE_STATES`` keeps them so too), and a measurement asks the
# units of the same states up to three times (the timeline's gathered parameters, a traced layout's or a pipeline
# stage's copy-in events for the items), the duration's FSDP collective volume once more (on the states its
# context kept): computed once. Keyed on the two objects' ids while the value holds them (identity-checked, as
# ``_STAGE_STATES``); cleared by ``clear_caches``.
_UNITS: dict[tuple[int, int], tuple[TrainingContext, StageStates, GatherUnits]] = {}


def fsdp_gather_units(ctx: TrainingContext, st: StageStates) -> GatherUnits:
    """The FSDP units of stage ``st`` and the bytes each all-gathers (module doc) [bytes]."""
    hit = _UNITS.get((id(ctx), id(st)))
    if hit is not None and hit[0] is ctx and hit[1] is st:
        return hit[2]
    units = _gather_units(ctx, st)
    if len(_UNITS) >= 1024:
        _UNITS.clear()
    _UNITS[id(ctx), id(st)] = (ctx, st, units)
    return units


def _gather_units(ctx: TrainingContext, st: StageStates) -> GatherUnits:
    """``fsdp_gather_units`` computed."""
    w, spec = ctx.w, ctx.spec
    elt = max(1, ctx.base_bytes)  # the stored weights' element (a LoRA's frozen base: its own dtype)
    mixed = ctx.recipe.compute_bytes if w.precision == "fsdp-bf16-mixed" else 0
    gathered = mixed or elt
    with_adapters = w.adapters and (w.fsdp_version == 2 or w.fsdp1_lora_wrap == "with-layers")
    f8 = ({moe: float8_weight_elements(spec, w.tp, moe) for moe in (False, True)} if float8_all_gather(w) else {})

    def unit(key: int) -> int:
        n = st.layer_weights.get(key, 0) // elt
        b = (float8_gathered_bytes(n, min(n, f8[spec.moe_layers[key]]), gathered) if f8 and key >= 0
             else n * gathered)
        if with_adapters:
            b += st.layer_adapter_elements.get(key, 0) * mixed if mixed else st.layer_adapters.get(key, 0)
        return b

    # a block's unit depends on it only through its weight bytes, its MoE flag (under the float8 all-gather) and its
    # adapters: each distinct combination once (a stage's layers alike share it), the same integers
    lw, moe_of = st.layer_weights, spec.moe_layers
    adapters = st.layer_adapter_elements if mixed else st.layer_adapters
    keys = list(zip(map(lw.get, st.layers, repeat(0)), map(moe_of.__getitem__, st.layers),
                    map(adapters.get, st.layers, repeat(0)), strict=True))
    first = dict(zip(reversed(keys), reversed(st.layers), strict=True))  # each combination's first layer
    per = {k: unit(i) for k, i in first.items()}
    return GatherUnits(unit(-1), unit(-2), tuple(map(per.__getitem__, keys)))


@dataclass(frozen=True)
class CollectiveVolume:
    """One micro-step's FSDP collective payloads of a stage (module doc, "Collective volume")."""

    forward: int  # bytes all-gathered in the forward: every unit once
    backward: int  # bytes all-gathered again in the backward: the units resharded after their forward
    reduced_elements: int  # gradient elements reduce-scattered (in the gradient reduce dtype, estimate/duration.py)


def backward_layout(w: TrainingWorkload) -> str:
    """The formulas/fsdp2_units.py layout whose eq. (U5) says which units ``w``'s backward gathers again: FSDP2's
    traced ``fsdp2_units``; 'largest-two' (wrapping not traced) and FSDP1 take torch's defaults, 'torchtune' (every
    block resharded after its forward, the root kept)."""
    return w.fsdp2_units if w.fsdp_version == 2 and w.fsdp2_units != "largest-two" else "torchtune"


def fsdp_collective_volume(ctx: TrainingContext, st: StageStates) -> CollectiveVolume:
    """What stage ``st``'s FSDP all-gathers and reduce-scatters carry per micro-step (module doc) [bytes, elements]."""
    w = ctx.w
    units = fsdp_gather_units(ctx, st)
    apart = 0  # FSDP1, adapters wrapped apart: each LoRA matrix its own unit, gathered and resharded as a block
    if w.adapters and w.fsdp_version == 1 and w.fsdp1_lora_wrap == "adapters-apart":
        mixed = ctx.recipe.compute_bytes if w.precision == "fsdp-bf16-mixed" else 0
        apart = (sum(st.layer_adapter_elements.values()) * mixed if mixed else sum(st.layer_adapters.values()))
    # eq. (B2): a block is gathered in the backward when its own pre-backward fires (its output needs a gradient)
    # or when the unit after it in the prefetch order fires (the root last under FSDP2, first under FSDP1)
    fires = backward_layers(ctx, list(st.layers), st.has_embedding)[1]
    fires.append(w.fsdp_version == 2 and (st.has_head or bool(fires) and fires[-1]))  # the logits always need one
    blocks = [b if fires[k] or fires[k + 1] else 0 for k, b in enumerate(units.blocks)]
    again = backward_gathers_of(backward_layout(w), units.root, blocks)
    return CollectiveVolume(sum(units.units) + apart, sum(again) + apart, st.reduced_elements)


# eq. (B1): a module's backward runs when its output needs a gradient (module doc, "Backward-free modules"); in
# the first decoder layer holding an adapter, over an input that needs none, by what each tensor's module reads:
_READS_LAYER_INPUT = frozenset({"layer_norm_0", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_q_a",
                                "attn_kv_a_mqa", "ssm_in", "ssm_ba"})  # never (only its weight could need one)
_READS_MIXER = frozenset({"attn_output", "attn_q_norm", "attn_k_norm", "attn_sinks", "ssm_conv1d", "ssm_x",
                          "ssm_dt", "ssm_a", "ssm_d", "ssm_norm", "ssm_dt_norm", "ssm_b_norm", "ssm_c_norm",
                          "ssm_out"})  # the token mixer's output: when it needs one (F1's ``mix``)


def _backward_of(ctx: TrainingContext, layer: int, role: str, out_grad: bool, in_grad: bool) -> bool:
    """Eq. (B1) for one tensor of decoder layer ``layer`` whose output needs a gradient (``out_grad``) or not, and
    whose input does (``in_grad``) or not: whether its module's backward runs (module doc)."""
    if in_grad or not out_grad:
        return in_grad
    base = role.removesuffix(".bias")
    if base in _READS_LAYER_INPUT:
        return False
    _, mix, resid = layer_grads(ctx.spec, layer, ctx.act, False)
    if base in _READS_MIXER:
        return mix
    if base.startswith(("ffn_down", "ffn_latent_out")):  # reads act(gate) * up
        return resid or bool(ctx.act.adapted & set(MLP_INPUTS))
    if base.startswith(("ffn_", "layer_norm_")):  # the residual after the mixer, or what reads it
        return resid
    return True  # anything else (cross-attention, Gemma 3n's AltUp): taken as running (at most what it gathers)


def backward_layers(ctx: TrainingContext, layers: list[int], has_embedding: bool = True) -> tuple[list[bool],
                                                                                                     list[bool]]:
    """For decoder ``layers``: whether each one's input needs a gradient and whether its output does (eq. F1 of
    formulas/training_activations.py, setup.py ``layer_inputs_need_grad``: a layer's output is the next layer's
    input), the two readings of eq. (B1)."""
    w, lora = ctx.w, ctx.lora
    return (layer_inputs_need_grad(w, lora, layers, has_embedding),
            layer_inputs_need_grad(w, lora, [i + 1 for i in layers], has_embedding))


def deepspeed_zero3_uses(ctx: TrainingContext) -> list[Zero3Use]:
    """The parameters a DeepSpeed ZeRO-3 model runs, in forward order, as formulas/deepspeed_zero.py
    ``zero3_collective_elements`` reads them: every tensor of the inventory (formulas/tensors.py; ``count`` identical
    tensors are as many parameters), each LoRA / DoRA adapter's A, B (and magnitude) right after its base weight, a
    tied lm_head as a second use of the embedding. Trained: every parameter under full training, else the adapters
    and the modules_to_save copies (PEFT ``_mark_only_adapters_as_trainable``, tuners_utils.py lines 506-523). With a
    frozen embedding its backward, and that of the layer-0 norm and q/k/v projections reading only its output, does
    not run. Order within a layer as the inventory lists it (attention, feed-forward, norms), a vision tower after
    the text stack: only the reuse distances of the backward re-gathers depend on it."""
    spec, w = ctx.spec, ctx.w
    saved = set(w.modules_to_save)
    adapters: dict[tuple[str, int], list[Zero3Use]] = {}
    if ctx.lora is not None:
        for m in ctx.lora.modules:
            for j in range(m.count):
                for s, shape in enumerate(ctx.lora.module_shapes(m)):
                    n = 1
                    for d in shape:
                        n *= d
                    adapters.setdefault((m.role, m.layer), []).append(
                        Zero3Use(("adapter", m.role, m.layer, j, s), n, ctx.adapter_bytes))
    embed_trained = embedding_trained(w, ctx.lora)
    n = spec.num_layers
    in_grad, out_grad = backward_layers(ctx, list(range(n)))
    final = out_grad[-1] if n else embedding_output_needs_grad(w, ctx.lora)  # the last layer's output: the head's input
    uses: list[Zero3Use] = []
    for t in model_tensors(spec):
        trained = not w.adapters or (t.component == "embedding" and "embed" in saved) or (
            t.component == "lm_head" and "lm_head" in saved)
        if t.component == "embedding":
            backward = embed_trained
        elif 0 <= t.layer < n:
            backward = _backward_of(ctx, t.layer, t.role, out_grad[t.layer], in_grad[t.layer])
        else:  # the final norm reads the last layer's output; the lm_head that too, or trains itself
            backward = final or (t.role == "output" and trained) or t.component == "vision"
        each = t.numel // max(1, t.count)
        for j in range(t.count):
            uses.append(Zero3Use((t.role, t.layer, j), each, ctx.base_bytes, trained, backward))
        uses += adapters.pop((t.role, t.layer), [])
        if t.role == "output_norm" and spec.tie_word_embeddings:  # the lm_head runs on the embedding's weight
            uses.append(next(u for u in uses if u.key == ("token_embd", -1, 0)))
    for rest in adapters.values():
        uses += rest
    return uses


def deepspeed_zero3_persistent(ctx: TrainingContext, st: StageStates) -> tuple[int, dict[int, int]]:
    """Stage ``st``'s DeepSpeed ZeRO-3 persistent parameters (formulas/deepspeed_zero.py ``persistent_param_bytes``,
    eq. Z4: whole on each rank beyond their partitions) [bytes], and the base weights' part of it per gather unit
    (decoder layers; -1 the embedding, -2 the other non-layer modules, as ``StageStates.layer_weights``), which the
    gather windows then leave out. The same uses and the same rule (``persists``) as the collective volume."""
    ranks = zero_shards(ctx.w.shard_stage, ctx.w.shard_group)[0]
    units: dict[int, int] = {}
    mine: list[Zero3Use] = []
    seen: set[object] = set()
    for u in deepspeed_zero3_uses(ctx):
        if u.key in seen:  # a tied lm_head's second use of the embedding
            continue
        seen.add(u.key)
        adapter = isinstance(u.key, tuple) and u.key[0] == "adapter"
        layer = u.key[2] if adapter else u.key[1]  # type: ignore[index]
        unit = layer if layer >= 0 else -1 if u.key[0] == "token_embd" else -2  # type: ignore[index]
        if (unit >= 0 and unit not in st.layers) or (unit == -1 and not st.has_embedding) or (
                unit == -2 and not st.has_head):
            continue
        mine.append(u)
        if not adapter and persists(u.numel):
            units[unit] = units.get(unit, 0) + u.numel * u.elem
    total = persistent_param_bytes(mine, ranks)
    return total, (units if total else {})


def deepspeed_zero3_volume(ctx: TrainingContext) -> Zero3Volume:
    """A steady DeepSpeed ZeRO-3 step's collectives (formulas/deepspeed_zero.py ``zero3_collective_elements``, its
    config defaults) over the data-parallel group [bytes; reduced: elements]."""
    return zero3_collective_elements(deepspeed_zero3_uses(ctx), ctx.w.shard_group)

"""torchtitan's pipeline layer split (formulas/parallelism.py ``torchtitan_stage_layer_counts``,
``pipeline_stage_layers``) against torchtitan's own functions, ported line for line below from its source:

- ``generate_split_points``: torchtitan/parallelisms/pipelining_utils.py @ 9dec370 (2024-12-26) lines 18-57 (the
  schedule class only decides the stages a rank, 1 or 2: passed here as ``total_stages``);
- ``stage_ids_this_rank`` (style 'loop'): the same file lines 102-112, and pipeline_llama.py @ 9dec370 lines 103-110
  (stage k runs from split point k - 1 to split point k);
- ``_generate_llm_fqn_per_model_part``: torchtitan/distributed/pipeline_parallel.py @ b5bcd76 (2026-08-21) lines
  381-467, with the default input/output weights of config/configs.py lines 197, 203 (1 each).

The formula is a closed form (divmod and counts); the ports walk the layers the way torchtitan does, so a different
rule (the even split, the remainder on the first stages) fails here."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.parallelism import pipeline_stage_layers, torchtitan_stage_layer_counts


def generate_split_points_9dec370(total_stages: int, num_layers: int) -> list[str]:
    if total_stages > num_layers:
        raise ValueError("Total stages cannot be greater than the number of layers")

    base_interval = num_layers // total_stages
    extra_layers = num_layers % total_stages

    splits = []
    current_layer = 0
    for i in range(total_stages - 1):
        if i == 0:
            current_layer += base_interval
        else:
            # Middle stages get an extra layer if there are any remaining
            if extra_layers > 0:
                current_layer += base_interval + 1
                extra_layers -= 1
            else:
                current_layer += base_interval
        splits.append("layers." + str(current_layer))
    return splits


def stage_ids_this_rank(pp_rank: int, pp_size: int, num_stages: int) -> tuple[int, ...]:
    assert num_stages % pp_size == 0
    stages_per_rank = num_stages // pp_size
    return tuple(pp_rank + s * pp_size for s in range(stages_per_rank))


def rank_layers_9dec370(num_layers: int, pp: int, stages_per_rank: int) -> list[list[int]]:
    """The decoder layers each pp rank builds (pipeline_llama.py @ 9dec370 lines 103-110 over the split points)."""
    splits = [int(s.split(".")[1]) for s in generate_split_points_9dec370(pp * stages_per_rank, num_layers)]
    num_stages = len(splits) + 1
    out = []
    for rank in range(pp):
        mine: list[int] = []
        for stage_idx in stage_ids_this_rank(rank, pp, num_stages):
            start = splits[stage_idx - 1] if stage_idx > 0 else 0
            stop = splits[stage_idx] if stage_idx < num_stages - 1 else num_layers
            mine.extend(range(start, stop))
        out.append(mine)
    return out


def generate_llm_fqn_per_model_part(num_stages: int, num_layers: int, input_weight: int = 1,
                                    output_weight: int = 1) -> list[list[str]]:
    if num_stages == 1:
        layer_names = [f"layers.{i}" for i in range(num_layers)]
        return [["tok_embeddings"] + layer_names + ["norm", "lm_head"]]
    num_effective_layers = num_layers + input_weight + output_weight
    if num_stages > num_effective_layers:
        raise ValueError("more stages than effective layers")
    layers_per_stage = num_effective_layers // num_stages
    extra_layers = num_effective_layers % num_stages
    if layers_per_stage == 0 or input_weight > layers_per_stage or output_weight > layers_per_stage:
        raise ValueError("infeasible")
    module_names_per_stage = []
    current_layer = 0
    for stage_idx in range(num_stages):
        stage_modules = []
        effective_layers_for_stage = layers_per_stage
        if stage_idx < extra_layers:
            effective_layers_for_stage += 1
        if stage_idx == 0:
            stage_modules.append("tok_embeddings")
            remaining_layers_for_stage = effective_layers_for_stage - input_weight
            for _ in range(remaining_layers_for_stage):
                if current_layer < num_layers:
                    stage_modules.append(f"layers.{current_layer}")
                    current_layer += 1
        elif stage_idx == num_stages - 1:
            remaining_layers_for_stage = effective_layers_for_stage - output_weight
            for _ in range(remaining_layers_for_stage):
                if current_layer < num_layers:
                    stage_modules.append(f"layers.{current_layer}")
                    current_layer += 1
            stage_modules.extend(["norm", "lm_head"])
        else:
            for _ in range(effective_layers_for_stage):
                if current_layer < num_layers:
                    stage_modules.append(f"layers.{current_layer}")
                    current_layer += 1
        module_names_per_stage.append(stage_modules)
    return module_names_per_stage


# (layers, pp, stages per rank): Llama 3.1 405B (126) over PP 8 as the torchtitan 9dec370 rows run it (1F1B and
# Interleaved1F1B), Llama 3 8B / 70B, odd counts, a remainder larger than the middle stages
SHAPES = [(126, 8, 1), (126, 8, 2), (32, 4, 1), (32, 4, 2), (80, 8, 1), (80, 8, 2), (61, 4, 1), (61, 4, 3),
          (30, 7, 1), (28, 3, 2), (13, 6, 2), (40, 5, 1)]


@pytest.mark.parametrize(("layers", "pp", "v"), SHAPES)
def test_9dec370_split_matches_torchtitan(layers: int, pp: int, v: int) -> None:
    expected = rank_layers_9dec370(layers, pp, v)
    got = [list(r) for r in pipeline_stage_layers(layers, pp, "torchtitan-9dec370", v)]
    assert got == expected


@pytest.mark.parametrize(("layers", "pp", "v"), SHAPES)
def test_current_split_matches_torchtitan(layers: int, pp: int, v: int) -> None:
    parts = generate_llm_fqn_per_model_part(pp * v, layers)
    counts = [sum(1 for n in p if n.startswith("layers.")) for p in parts]
    assert torchtitan_stage_layer_counts(layers, pp * v) == counts
    stage_layers = [[int(n[len("layers."):]) for n in p if n.startswith("layers.")] for p in parts]
    want = [[i for k in stage_ids_this_rank(r, pp, pp * v) for i in stage_layers[k]] for r in range(pp)]
    assert [list(r) for r in pipeline_stage_layers(layers, pp, "torchtitan", v)] == want


def test_405b_over_pp8_is_not_the_even_split() -> None:
    """The case the 9dec370 rows run: 15 / 16 x 6 / 15 (and 7 / 8 x 14 / 7 over 16 interleaved stages); the even
    split puts 16 on the first six stages."""
    assert [len(r) for r in pipeline_stage_layers(126, 8, "torchtitan-9dec370")] == [15, *[16] * 6, 15]
    assert torchtitan_stage_layer_counts(126, 16, "torchtitan-9dec370") == [7, *[8] * 14, 7]
    assert [len(r) for r in pipeline_stage_layers(126, 8)] == [*[16] * 6, 15, 15]


def test_more_stages_than_layers_is_an_input_error() -> None:
    with pytest.raises(InputError, match="pipeline stages for 4 layers"):
        pipeline_stage_layers(4, 4, "torchtitan-9dec370", 2)

"""probe31 section 3: ``--pp 4 --virtual-stages 5`` on DeepSeek-V3 (61 layers) was sized silently. Megatron-Core
builds an interleaved pipeline without a layout only where ``get_num_layers_to_build`` (megatron/core/transformer/
transformer_block.py @d98e8a64 lines 76-185) and TransformerConfig's checks pass; the truth here is those asserts
transcribed and run over every setting they read (first/last stage counts, the embedding and loss slots), not our
formula's search: the formula must name a setting exactly when one exists, and the one it names must pass them."""

from __future__ import annotations

import itertools

import pytest

from cli_capture import run
from llmsizer.formulas.parallelism import megatron_interleaved_split


def _builds(n: int, pp: int, vp: int, first: int | None, last: int | None, emb: bool, loss: bool) -> bool:
    """Megatron-Core's asserts for one setting (line numbers of transformer_block.py / transformer_config.py)."""
    if first is not None or last is not None:
        if emb or loss:  # transformer_block.py:108-112, transformer_config.py:2230-2240: not with uneven pp
            return False
        if any(x is not None and (x <= 0 or x % vp) for x in (first, last)):  # config 2302-2335
            return False
        left = n - (first or 0) - (last or 0)
        stages = pp - (first is not None) - (last is not None)
        if left < 0 or stages < 0 or bool(left) != bool(stages):  # config 2343-2346
            return False
        if stages == 0:
            return True
        return left % stages == 0 and (left // stages) % vp == 0  # block :133, config 2355-2368
    total = n + emb + loss  # block :149-158
    return total % pp == 0 and (total // pp) % vp == 0 and total // pp > 0  # block :178


@pytest.mark.parametrize("n,pp,vp", [(61, 4, 5), (61, 4, 4), (61, 8, 2), (94, 8, 4), (126, 8, 8), (126, 16, 4),
                                     (80, 8, 5), (32, 4, 2), (28, 4, 3), (48, 6, 4), (27, 2, 3), (62, 2, 2)])
def test_named_setting_exists_exactly_when_megatron_builds_one(n: int, pp: int, vp: int) -> None:
    ends = [None, *range(1, n + 1)]
    exists = any(_builds(n, pp, vp, f, last, e, s) for f, last in itertools.product(ends, ends)
                 for e, s in itertools.product((False, True), repeat=2))
    named = megatron_interleaved_split(n, pp, vp)
    assert (named is not None) == exists
    if named is not None and named.startswith("num_layers_in"):
        kv = dict(part.split("=") for part in named.split(", "))
        first = int(kv["num_layers_in_first_pipeline_stage"]) if "num_layers_in_first_pipeline_stage" in kv else None
        last = int(kv["num_layers_in_last_pipeline_stage"]) if "num_layers_in_last_pipeline_stage" in kv else None
        assert _builds(n, pp, vp, first, last, False, False)


def test_deepseek_v3_pp4_vp5_is_said_not_silent() -> None:
    code, err, _ = run("train", "deepseek-v3", "--gpus", "256", "--pp", "4", "--virtual-stages", "5", "--ep", "64",
                       "--precision", "megatron-bf16")
    assert code == 0 and "Megatron-Core cannot split 61 layers over pp 4 x 5 virtual stages" in err
    assert "--pipeline-model-parallel-layout" in err
    # a split Megatron builds (80 layers, pp 8 x vp 5: Megatron-Bridge's Llama 3 70B recipe) is not flagged
    code, err, _ = run("train", "llama-3.1-70b", "--gpus", "64", "--pp", "8", "--virtual-stages", "5",
                       "--precision", "megatron-bf16")
    assert code == 0 and "Megatron-Core cannot split" not in err

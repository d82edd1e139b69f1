"""An encoder-decoder's source/target split is decided once (specs/workload.py ``prompt_and_output``): the memory
estimate's source and target (estimate/inference/hf_transformers.py ``compose_t5``) and the speed's prefill and
decode lengths (estimate/fit.py, eq. S7) are the same two numbers, and they add up to the context, as
``InferenceWorkload.output_tokens`` is defined ("part of context"). Before, an output of the whole context
(``--context 512 --output-tokens 512``) was sized with target 512 over source 1 (513 tokens) while the same fit's
speed took target 511."""

from __future__ import annotations

import pytest

from llmsizer.estimate.fit import fit


@pytest.mark.parametrize(("context", "output_tokens"), [(512, 512), (512, 511), (4096, None), (600, 100), (2, 2)])
def test_memory_and_speed_take_one_split(context: int, output_tokens: int | None) -> None:
    r = fit("t0_3b", "h100-sxm", context=context, output_tokens=output_tokens)
    ed = r.estimate.details["encoder_decoder"]
    source, target = ed["source_tokens"], ed["target_tokens"]
    assert source + target == context and source >= 1
    if output_tokens is not None and output_tokens < context:
        assert target == output_tokens
    (step,) = [a.value for a in r.speed.assumptions if a.name == "encoder_decoder_step"]
    assert step == f"source {source} tokens, target {target} tokens"

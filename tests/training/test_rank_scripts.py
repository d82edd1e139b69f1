"""The FSDP step scripts share one rank set-up (``ranks.rank_model``: gloo group, seed, threads, the case's model)
and one ending (``ranks.end_rank``), so the FSDP1 and FSDP2 measurements are taken under the same set-up by
construction; the steps themselves run in test_fsdp1_flat_param.py and test_fsdp_mixed_precision.py."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.parametrize("script", ["fsdp_step.py", "fsdp1_step.py", "fsdp1_lora_step.py", "fsdp_rs_output_step.py"])
def test_the_fsdp_step_scripts_use_the_shared_rank_setup(script: str) -> None:
    text = (HERE / script).read_text(encoding="utf-8")
    assert "rank_model(case" in text and "end_rank(" in text and "rank_main(main)" in text
    for copied in ("init_process_group", "AutoConfig.for_model", "destroy_process_group", "json.loads"):
        assert copied not in text, (script, copied)

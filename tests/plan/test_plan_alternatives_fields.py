"""A plan that names no hardware searches the catalog as ``llmsizer recommend`` does with the same flags: every field
the job's fit gets (the KV cache dtype, each engine setting) reaches the search too, so the plan's options and its
chosen hardware are recommend's (one answer). Before, the search kept five engine settings and dropped the KV dtype:
a job with SGLang's ``mem_fraction_static: 0.5`` was planned on hardware chosen at SGLang's default share, then
fitted at 0.5, and a job with an fp8 KV cache on hardware chosen for a bf16 one."""

from __future__ import annotations

import pytest

from cli.cli_run import answer
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml


@pytest.mark.parametrize(("engine", "yaml_lines", "flags"), [
    ("sglang", "engine_settings: {mem_fraction_static: 0.5}", ["--mem-fraction-static", "0.5"]),
    ("vllm", "kv_cache_dtype: fp8", ["--kv-dtype", "fp8"]),
])
def test_the_plans_options_are_recommends_for_the_same_settings(engine: str, yaml_lines: str, flags: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    job = make_plan(parse_request(job_yaml("inference", f"""\
    model: {{name: llama-3.1-8b}}
    engine: {engine}
    traffic: {{concurrency: {{typical: 64, peak: 64}}, context: {{typical: 8k, peak: 8k}}, output: {{typical: 256, peak: 256}}}}
    {yaml_lines}
    """), source="t.yaml")).jobs[0]
    _, rec = answer(["recommend", "llama-3.1-8b", "--engine", engine, "--context", "8192", "--concurrency", "64",
                     "--output-tokens", "256", *flags], capsys)
    _, default = answer(["recommend", "llama-3.1-8b", "--engine", engine, "--context", "8192", "--concurrency", "64",
                         "--output-tokens", "256"], capsys)

    def top(options: list[dict]) -> list[tuple]:
        return [(o["name"], o["weights_format"], o["tokens_per_second"]) for o in options[:6]]

    assert top(rec["options"]) != top(default["options"])  # the setting changes recommend's answer
    assert top(list(job.options)) == top(rec["options"])

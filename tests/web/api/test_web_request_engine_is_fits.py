"""The web API's /request/check and /plan refuse a KV cache dtype the engine `fit` takes for the job's devices cannot
store with the CLI's own lines (a 400), as `request check` and `plan` do (tests/consistency/test_request_engine_is_fits.py):
the engine is fit's for the device (llama.cpp on one RTX 4090), not transformers. Each case failed before: fp8 was
a valid request and a plan with an ERROR (200), fp8_e5m2 was refused as transformers'."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

REQUEST = """jobs:
  - name: chat8
    kind: inference
    model: {{name: llama-3.1-8b}}
    kv_cache_dtype: {kv}
    traffic:
      concurrency: 32
      context: 4k
    resources:
      device: rtx-4090
"""


@pytest.mark.parametrize("kv", ["fp8", "fp8_e5m2"])
def test_request_check_and_plan_refuse_the_kv_dtype_of_fits_engine(client, tmp_path, kv) -> None:
    fit_line = cli_error_line("fit", "llama-3.1-8b", "--device", "rtx-4090", "--kv-dtype", kv)
    assert fit_line.startswith(f"engine llamacpp has no '{kv}' KV cache")
    text = REQUEST.format(kv=kv)
    (tmp_path / "kv.yaml").write_text(text)
    cli = run_cli("request", "check", "kv.yaml", cwd=tmp_path)
    lines = [ln.removeprefix("llmsizer: error: ").removesuffix(" (see --help)") for ln in cli.stderr.splitlines()]
    assert cli.returncode == 2 and lines == [f"kv.yaml:5: job 'chat8' (inference): kv_cache_dtype: {fit_line}"]
    for route in ("/api/v1/request/check", "/api/v1/plan"):
        r = client.post(route, json={"request": text, "filename": "kv.yaml"})
        assert r.status_code == 400 and [r.json()["detail"]] == lines, (route, r.text[:500])

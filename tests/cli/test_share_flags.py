"""Every share-valued flag reads a share as request files read one (request/quantities.py ``parse_share``): 0.4 and
"40%" are the same number. Before, `--gpu-memory-utilization 40%`, `--mem-fraction-static 40%` and
`--utilization 40%` were refused ("cannot read '40%' as a number") while `--headroom 10%` and a request's
`headroom: 10%` were read; a request's `engine_settings.mem_fraction_static: 40%` was refused too ("must be a
number"). Expected values: 40% is 0.4 by definition; each flag's range is its own (numbers.UTILIZATION)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run

# (command line without the share, the flag, where the number shows in the --json answer)
SHARE_FLAGS = [
    (("infer", "qwen3-8b", "--engine", "vllm", "--device", "h100"), "--gpu-memory-utilization",
     "gpu_memory_utilization"),
    (("infer", "qwen3-8b", "--engine", "sglang", "--device", "h100"), "--mem-fraction-static", "mem_fraction_static"),
    (("train", "qwen2.5-0.5b", "--device", "h100", "--tokens", "1B"), "--utilization", "utilization"),
]


def _assumed(data: dict, name: str) -> float:
    if name == "utilization":  # the duration's own record (train --json "duration")
        assert data["duration"]["utilization_source"] == "given"  # not the calibration row it replaces
        return float(data["duration"]["utilization"])
    found = [a["value"] for a in data["assumptions"] if a["name"] == name]
    assert found, [a["name"] for a in data["assumptions"]]
    return float(found[0])


@pytest.mark.parametrize(("argv", "flag", "name"), SHARE_FLAGS, ids=[f for _, f, _ in SHARE_FLAGS])
def test_a_percentage_is_the_same_share_as_a_fraction(argv: tuple[str, ...], flag: str, name: str) -> None:
    code_pct, out_pct, err = run(*argv, flag, "40%", "--json")
    assert code_pct in (0, 1), err
    code_num, out_num, _ = run(*argv, flag, "0.4", "--json")
    assert _assumed(json.loads(out_pct), name) == 0.4
    assert (code_pct, out_pct) == (code_num, out_num)


@pytest.mark.parametrize(("argv", "flag", "name"), SHARE_FLAGS, ids=[f for _, f, _ in SHARE_FLAGS])
@pytest.mark.parametrize(("value", "says"), [("140%", "1.4 is out of range; expected a number in [0.001, 1]"),
                                             ("abc", "cannot read 'abc' as a share; write e.g. 0.4 or '40%'"),
                                             ("0%", "0 is out of range; expected a number in [0.001, 1]")])
def test_a_bad_share_is_one_line_naming_the_flag(argv: tuple[str, ...], flag: str, name: str, value: str,
                                                 says: str) -> None:
    code, out, err = run(*argv, f"{flag}={value}")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"llmsizer: error: argument {flag}: {says}"), err


def test_the_help_names_both_forms() -> None:
    for argv, flag, _ in SHARE_FLAGS:
        _, out, _ = run(argv[0], "--help")
        text = " ".join(out.split())
        at = text.rindex(f"{flag} {flag.removeprefix('--').replace('-', '_').upper()}")
        assert "%" in text[at:at + 200], text[at:at + 200]


REQUEST = """version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: qwen3-8b}}
    engine: sglang
    engine_settings: {{mem_fraction_static: {share}}}
    traffic: {{concurrency: 4, context: 4k, output: 256}}
    resources: {{device: h100, count: 1}}
"""


def test_a_request_reads_mem_fraction_static_as_a_share(tmp_path) -> None:
    (tmp_path / "pct").mkdir()
    (tmp_path / "num").mkdir()
    pct, num = tmp_path / "pct" / "req.yaml", tmp_path / "num" / "req.yaml"
    pct.write_text(REQUEST.format(share="40%"))
    num.write_text(REQUEST.format(share="0.4"))
    code, out_pct, err = run("plan", str(pct), "--json")
    assert code in (0, 1), err
    code_num, out_num, _ = run("plan", str(num), "--json")
    assert code_num == code
    strip = lambda s: s.replace(str(pct.parent), "DIR").replace(str(num.parent), "DIR")  # noqa: E731  where it is
    assert strip(out_pct) == strip(out_num) and '"mem_fraction_static": 0.4' in out_num
    bad = tmp_path / "bad.yaml"
    bad.write_text(REQUEST.format(share="140%"))
    code, out, err = run("request", "check", str(bad))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"llmsizer: error: {bad}:7: job 'chat' (inference): engine_settings.mem_fraction_static: "
                          "1.4 is out of range"), err

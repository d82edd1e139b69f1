"""Hand-written figures in the docs that are llmsizer's own answers (tokens/s, hours, GiB, ratios): each is checked
against the answer of the command the doc names beside it, at the doc's own rounding. The doc is the thing under
test: the live answer is the truth it must state (whether the answer itself is right is tested against measurements
elsewhere). Before (docnums): docs/hardware.md's CPU training table quoted the RTX 4090 at 20,254 tokens/s x 0.922,
while `train` answered 17,570 at 0.892 x 0.820 GEMM shapes, so every "vs RTX 4090" ratio was off by 15 %; its
Llama-3.1-8B sentence quoted 122.0 GiB where `train` answers 122.7 (GPU) / 122.2 (CPU host); docs/training.md quoted
the torchtune 70B offload row (PM0705) at 2129 tokens/s (+36 %), 10.2 s of compute, where validate reports 2151 (+37 %),
9.96 s.

The commands run in this one process through the CLI's ``main`` with ``--json``; a validation row's figures come from
the one function `llmsizer validate` computes that row with."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from llmsizer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def _answer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    rc = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert rc in (0, 1), (argv, rc, out)
    answer: dict[str, Any] = json.loads(out)
    return answer


def _decimals(figure: str) -> int:
    return len(figure.split(".", 1)[1]) if "." in figure else 0


def _states(figure: str, value: float) -> bool:
    """The doc's figure is the value at the doc's rounding (thousands separators allowed)."""
    figure = figure.replace(",", "")
    return figure == f"{value:.{_decimals(figure)}f}"


def _cpu_training_table() -> tuple[list[str], list[list[str]]]:
    page = (ROOT / "docs" / "hardware.md").read_text("utf-8")
    start = page.index("| Qwen2.5-0.5B LoRA r16, 2048 tokens, 10M tokens")
    lines = page[start:].split("\n\n", 1)[0].splitlines()
    command = re.search(r"`(train [^`]*--device X[^`]*)`", lines[0])
    assert command is not None, lines[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return shlex.split(command.group(1)), rows


def test_cpu_training_table_is_trains_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/hardware.md "CPU training is limited by speed": each row's peak, utilisation, tokens/s, wall clock and
    ratio to the RTX 4090 row are what the table's command answers for the row's device."""
    argv, rows = _cpu_training_table()
    assert len(rows) >= 5 and rows[0][0].startswith("RTX 4090")
    answers = []
    for label, peak, tps, wall, ratio in rows:
        device = re.search(r"\(`([^`]+)`\)", label)
        assert device is not None, label
        i = argv.index("X")
        d = _answer([*argv[:i], *shlex.split(device.group(1)), *argv[i + 1:]], capsys)["duration"]
        answers.append(d)
        m = re.fullmatch(r"([\d.]+) TFLOP/s (\w+)(?: \([^)]*\))? x ([\d.]+)(?: x ([\d.]+) GEMM shapes)?", peak)
        assert m is not None, peak
        assert _states(m.group(1), d["peak_flops"] / 1e12) and m.group(2) == d["peak_key"], (label, peak, d)
        assert _states(m.group(3), d["utilization"]), (label, peak, d["utilization"])
        shape = d["step"].get("shape_efficiency", 1.0)
        assert (m.group(4) is None and shape == 1.0) or (m.group(4) is not None and _states(m.group(4), shape)), (
            label, peak, shape)
        assert _states(tps, d["tokens_per_second"]), (label, tps, d["tokens_per_second"])
        assert wall.endswith(" h") and _states(wall[:-2], d["seconds"] / 3600), (label, wall, d["seconds"])
        assert ratio.endswith("x") and _states(ratio[:-1], answers[0]["tokens_per_second"] / d["tokens_per_second"]), (
            label, ratio)


def test_cpu_training_memory_sentence_is_trains_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """The sentence under the table: Llama-3.1-8B full fine-tuning's memory and budget on the RTX 4090 and the Xeon
    host, from the two commands it names, with the verdicts it states (over / within)."""
    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    claims = re.findall(r"needs ([\d.]+) GiB on the RTX 4090, over its ([\d.]+) GiB budget \(`(train [^`]+)`\), and "
                        r"([\d.]+) GiB on a 256 GB Xeon host, within its ([\d.]+) GiB budget \(`(train [^`]+)`\)", text)
    assert len(claims) == 1
    need_gpu, budget_gpu, cmd_gpu, need_cpu, budget_cpu, cmd_cpu = claims[0]
    for need, budget, cmd, fits in ((need_gpu, budget_gpu, cmd_gpu, False), (need_cpu, budget_cpu, cmd_cpu, True)):
        a = _answer(shlex.split(cmd), capsys)
        assert _states(need, a["totals"]["device"]["bytes"] / GIB), (cmd, need, a["totals"]["device"])
        assert _states(budget, a["details"]["memory_budget"] / GIB), (cmd, budget, a["details"]["memory_budget"])
        assert a["details"]["fits"] is fits, cmd


# ------------------------------------------------------ prose that quotes `llmsizer validate`'s prediction of a row

def _validate_speed_case(rid: str) -> Any:
    """The row's case as `llmsizer validate` reports it (validation_cases.speed_case on the row: one estimate)."""
    from llmsizer import validation_cases as V

    case = V.speed_case(V.public_rows()[rid])
    assert isinstance(case, V.Case), case
    return case


def _signed_pct(figure: str, error: float) -> bool:
    """'+37 %' / '-57 %' / '-0.8 %' (hyphen or U+2212) is the error at the figure's rounding."""
    figure = figure.replace("\u2212", "-").replace(" ", "").removesuffix("%")
    return figure == f"{error * 100:+.{_decimals(figure)}f}"


def test_training_offload_row_is_validates_answer() -> None:
    """docs/training.md: the torchtune 70B CPU-offload row (PM0705): prediction, error, compute per step and the
    host optimizer step are what `llmsizer validate` reports for it (its note names the two times)."""
    text = " ".join((ROOT / "docs" / "training.md").read_text("utf-8").split())
    m = re.search(r"\(PM0705, ([\d,]+) tokens/s\) is estimated at ([\d,]+) tokens/s \(([+\-\u2212][\d.]+ %)\): "
                  r"([\d.]+) s of compute per step .*? and ([\d.]+) s of host optimizer step", text)
    assert m is not None
    case = _validate_speed_case("PM0705")
    assert _states(m.group(1), case.measured) and _states(m.group(2), case.predicted), (m.groups(), case)
    assert _signed_pct(m.group(3), case.error), (m.group(3), case.error)
    compute = re.search(r"per micro-step compute ([\d.]+) s", case.note)
    host = re.search(r"optimizer step on the host ([\d.]+) s", case.note)
    assert compute is not None and host is not None, case.note
    assert _states(m.group(4), float(compute.group(1))) and _states(m.group(5), float(host.group(1))), (
        m.groups(), case.note)


def test_cpu_held_out_row_is_validates_answer() -> None:
    """docs/hardware.md: the held-out Azure D32 v5 row (PM0603): its prediction and error."""
    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    m = re.search(r"PM0603: [\d.]+ s per iteration, ([\d,]+) tokens/s\) is predicted at ([\d,]+) tokens/s, "
                  r"([+\-\u2212][\d.]+ %)", text)
    assert m is not None
    case = _validate_speed_case("PM0603")
    assert _states(m.group(1), case.measured) and _states(m.group(2), case.predicted), (m.groups(), case)
    assert _signed_pct(m.group(3), case.error), (m.group(3), case.error)


def test_torchtitan_held_out_memory_rows_are_validates_answer() -> None:
    """docs/training.md "Held out": torchtitan's PM0400/PM0401 predictions, the PM0400-PM0409 error span, and the
    Trainy (PM1068/PM1069) and 70B TP 8 (PM1060/PM1061) errors, as `llmsizer validate` reports them."""
    from llmsizer import validation_cases as V

    text = " ".join((ROOT / "docs" / "training.md").read_text("utf-8").split())
    m = re.search(r"\(PM0400 ([\d.]+) GiB, PM0401 ([\d.]+) GiB\) against ([\d.]+) \((?:range )?[\d.\-]+\) and ([\d.]+) "
                  r"\((?:range )?[\d.\-]+\) GiB, the whole 9dec370 table PM0400-PM0409 within (\S+ %) to (\S+ %); "
                  r"Trainy's H200 runs \(PM1068/PM1069[^)]*\) (\S+ %) and (\S+ %); the 70B FSDP2 \+ TP 8 rows "
                  r"\(PM1060/PM1061[^)]*\) (\S+ %) and (\S+ %)", text)
    assert m is not None
    cases = {c.id: c for c in V.training_cases()[0]}
    assert _states(m.group(1), cases["PM0400"].measured) and _states(m.group(2), cases["PM0401"].measured)
    assert _states(m.group(3), cases["PM0400"].predicted) and _states(m.group(4), cases["PM0401"].predicted)
    table = [cases[f"PM04{i:02d}"].error for i in range(10)]
    assert _signed_pct(m.group(5), max(table)) and _signed_pct(m.group(6), min(table)), (m.groups(), table)
    for figure, rid in zip(m.groups()[6:], ("PM1068", "PM1069", "PM1060", "PM1061"), strict=True):
        assert _signed_pct(figure, cases[rid].error), (rid, figure, cases[rid].error)


def test_megatron_bridge_rows_in_validation_md_are_validates_answer() -> None:
    """docs/validation.md: each "(PMnnnn ...) comes out N % slow|fast (predicted vs measured" is the row's
    prediction, measurement and error as `llmsizer validate` reports them."""
    text = " ".join((ROOT / "docs" / "validation.md").read_text("utf-8").split())
    claims = re.findall(r"\((PM\d{4})[^()]*(?:\([^()]*\)[^()]*)*\) (?:comes out )?(\d+) % (slow|fast) "
                        r"\(([\d,]+) vs ([\d,]+)", text)
    assert len(claims) >= 3
    for rid, pct, way, predicted, measured in claims:
        case = _validate_speed_case(rid)
        assert _states(predicted, case.predicted) and _states(measured, case.measured), (rid, predicted, case)
        assert (way == "slow") == (case.error < 0) and _states(pct, abs(case.error) * 100), (rid, pct, case.error)


def test_todays_serving_errors_in_hardware_md_are_validates_answer() -> None:
    """docs/hardware.md's known gaps keep the errors the vLLM serving and SGLang H20 rows had when they were added,
    and state today's beside them ("today (`llmsizer validate`...): VS01 +5.4 %, ..."): those are the rows' errors
    as `llmsizer validate` reports them (validation_cases.vllm_serving_cases and engine_speed_cases)."""
    from llmsizer import validation_cases as V

    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    stated = [(rid, pct) for part in re.findall(r"today \(`llmsizer validate`\)[^:]*: ([^)]*)\)", text)
              for rid, pct in re.findall(r"\b([A-Z]{2}\d{2}) ([+\-\u2212][\d.]+ %)", part)]
    assert {rid[:2] for rid, _ in stated} == {"VS", "SG"}, stated
    cases = {c.id: c for c in V.vllm_serving_cases() + V.engine_speed_cases()}
    for rid, pct in stated:
        assert _signed_pct(pct, cases[rid].error), (rid, pct, cases[rid].error)


def test_recommend_option_counts_are_recommends_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """The count of options a whole-catalog `recommend` weighs, beside its timing: docs/hardware.md names the command
    (bench/bench_recommend.py's first case); the README's performance paragraph quotes the same count. Before
    (docnums): hardware.md said 128 candidates, the command answers 182."""
    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    m = re.search(r"A full `recommend` over the whole catalog \(`(recommend [^`]+)`: ([\d,]+) options, fitting or "
                  r"rejected\)", text)
    assert m is not None
    answer = _answer(shlex.split(m.group(1)), capsys)
    count = len(answer["options"]) + len(answer["rejected"])
    assert _states(m.group(2), count), (m.group(2), count)
    readme = " ".join((ROOT / "README.md").read_text("utf-8").split())
    r = re.search(r"`recommend` over the whole catalog \(([\d,]+) options, (\d+) instances\)", readme)
    assert r is not None
    from llmsizer.catalog.hardware import builtin_catalog

    assert _states(r.group(1), count) and _states(r.group(2), len(builtin_catalog().instances)), r.groups()


def _ids(spans: str) -> list[str]:
    """'QT01-QT02, QT05' -> ['QT01', 'QT02', 'QT05']."""
    out = []
    for part in spans.split(", "):
        a, _, b = part.partition("-")
        out += [f"{a[:2]}{i:02d}" for i in range(int(a[2:]), int((b or a)[2:]) + 1)]
    return out


def test_known_gap_speed_rows_are_validates_answer() -> None:
    """docs/hardware.md's known gaps of the vLLM static batches (VB, validation_cases.vllm_latency_cases) and the
    transformers generate() rows (QT, engine_speed_cases): the held-out median and span, the spans of the rows named
    in parentheses and each 'ROW +N.N %', as `llmsizer validate` reports them. Before (docnums): 8.4 % (-6.9 ..
    +38.2 %), TP8 +11 .. +20 %, VB12/VB13 +26/+38 %, QT +6 .. +12 %, QT11 +7.3 %, QT16 +120 %."""
    import statistics

    from llmsizer import validation_cases as V

    text = " ".join((ROOT / "docs" / "hardware.md").read_text("utf-8").split())
    cases = {c.id: c for c in V.vllm_latency_cases() + V.engine_speed_cases()}
    m = re.search(r"calibrated on VB07: the (\d+) held-out rows have median \|error\| ([\d.]+ %) \((\S+ %) \.\. (\S+ %)\)",
                  text)
    assert m is not None
    held = [c.error for rid, c in sorted(cases.items()) if rid.startswith("VB") and not c.excluded]
    assert int(m.group(1)) == len(held)
    assert _states(m.group(2).removesuffix(" %"), statistics.median(abs(e) for e in held) * 100), (m.groups(), held)
    assert _signed_pct(m.group(3), min(held)) and _signed_pct(m.group(4), max(held)), (m.groups(), held)
    spans = re.findall(r"(\S+) \.\. (\S+ %) (?:up to 6144 prompt tokens |beyond on the 0.5B and 1.5B )?\(((?:[A-Z]{2}\d{2}"
                       r"(?:-[A-Z]{2}\d{2})?(?:, )?)+)\)", text)
    spans += [(lo, hi, ids) for ids, lo, hi in re.findall(r"rows ((?:VB\d{2}-VB\d{2})) (\S+) \.\. (\S+ %)", text)]
    assert len(spans) >= 3, spans
    for lo, hi, ids in spans:
        errors = [cases[rid].error for rid in _ids(ids)]
        assert _signed_pct(lo + " %", min(errors)) and _signed_pct(hi, max(errors)), (lo, hi, ids, errors)
    pairs = re.findall(r"\b(QT\d{2}) ([+\-][\d.]+ %)", text)
    pair = re.search(r"\(VB12/VB13 (\S+)/(\S+ %)\)", text)
    assert pair is not None and len(pairs) >= 4
    pairs += [("VB12", pair.group(1) + " %"), ("VB13", pair.group(2))]
    for rid, pct in pairs:
        assert _signed_pct(pct, cases[rid].error), (rid, pct, cases[rid].error)

"""probe28 D6: `plan` printed "checks: 0 error(s), 0 warning(s), 0 note(s)" and then two "warning:" lines, and the
HTML report said "no problems" above the same warnings: the counts were the request checks only and nothing said so.
The summary now names what it counts (the request checks by severity, and the jobs' own warnings), one rule in the
plan core (Plan.summary_counts) that every face reads. Checked here against what each face shows, counted from its
own output (the text's "warning:" lines, the JSON's lists), on the probe's two examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_capture import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["pretraining-multinode.yaml", "cpu-internal-tool.yaml"])
def test_the_text_summary_counts_the_warning_lines_it_prints(name: str) -> None:
    code, out, err = run("plan", str(EXAMPLES / name), "--json")
    assert code == 0, err
    plan = json.loads(out)
    jobs_warned = sum(len(j["warnings"]) for j in plan["jobs"])
    assert jobs_warned > 0 and plan["check_counts"]["warning"] == 0  # the probe's case: warnings, none a check
    code, text, _ = run("plan", str(EXAMPLES / name))
    assert code == 0
    summary = text.splitlines()[1]
    m = re.fullmatch(r"request checks: (\d+) error\(s\), (\d+) warning\(s\), (\d+) note\(s\); job warnings: (\d+)"
                     r"(?: \((?:under each job|(\d+) under the jobs, (\d+) stated by their figures)\))?", summary)
    assert m, summary
    assert [int(g) for g in m.groups()[:3]] == [plan["check_counts"][s] for s in ("error", "warning", "info")]
    assert int(m.group(4)) == jobs_warned == plan["job_warning_count"]  # every warning the jobs carry (the JSON's)
    printed = len(re.findall(r"^  warning: ", text, re.MULTILINE))  # the lines under the jobs
    assert printed == (int(m.group(5)) if m.group(5) else jobs_warned), (summary, printed)


def test_the_html_report_does_not_say_no_problems_above_warnings(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    code, _, err = run("plan", str(EXAMPLES / "pretraining-multinode.yaml"), "-o", str(out))
    assert code == 0, err
    page = out.read_text()
    summary = re.search(r'<p class="badges" id="summary">(.*?)</p>', page)
    assert summary is not None
    listed = len(re.findall(r"<li>", page[page.index("<h3>Warnings</h3>"):page.index("</ul>",
                                                                                    page.index("<h3>Warnings</h3>"))]))
    words = re.sub(r"<[^>]+>", "", summary.group(1))
    assert words == f"request checks: no problems; job warnings: {listed} (under each job)", words

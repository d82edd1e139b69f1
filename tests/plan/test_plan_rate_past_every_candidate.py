"""A plan with no resources at a request rate no candidate carries (recommend.py ``rate_past_every_copy``: past
MAX_REPLICAS copies of the largest candidate, each device a replica at most 1 / the API server's serial seconds):
the search answers at once with no option and its reason (``Recommendation.refusal``, exit 1 on recommend, probe23
C3), and the plan's "no hardware" error says that reason, not only that no option fits."""

from __future__ import annotations

from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml


def test_the_no_hardware_check_says_why_no_candidate_was_sized() -> None:
    text = job_yaml("inference", "traffic: {requests_per_second: {typical: 1e9, peak: 1e9}, context: 2k}")
    plan = make_plan(parse_request(text, source="t.yaml"))
    (check,) = [c for c in plan.checks if c.id == "no-hardware"]
    assert check.severity == "error" and "past what any candidate carries" in check.message, check

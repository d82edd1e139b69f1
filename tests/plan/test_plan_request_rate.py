"""A request file that states its load as a rate (traffic.requests_per_second, no traffic.concurrency) is sized as
`fit --request-rate` sizes it (open arrivals, formulas/serving_queue.py eq. Q10): the plan's speed, TTFT and memory
are fit's at that rate, the requests in flight a "(derived)" assumption; each level its own rate. The queue is checked
by hand (M/M/1 for the API server's one process: R = H / (1 - lambda H); Little's law for the requests in flight);
a rate at or above 1 / H is refused with fit's line at the rate's own line (exit 2); with both a rate and a
concurrency the plan keeps the closed model at the concurrency and warns when the rate is more than it carries."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cli.cli_run import answer, run
from llmsizer.estimate.engines import API_SERVER_SECONDS
from llmsizer.estimate.fit import fit
from llmsizer.plan import make_plan
from llmsizer.plan.inference import device_fit
from llmsizer.recommend import Constraints, recommend_inference
from llmsizer.request import parse_request
from llmsizer.request.reader import RequestError

H = API_SERVER_SECONDS["vllm"]  # the API server's seconds per request (its one process: an M/M/1 station)


def _request(traffic: str, resources: str = "{device: h100-sxm, count: 1}") -> str:
    return ("version: 1\ntitle: rate\njobs:\n- name: j\n  kind: inference\n  model: {name: qwen3-0.6b}\n"
            "  engine: vllm\n  engine_version: 0.19.0\n"
            f"  resources: {resources}\n  traffic:\n{traffic}"
            "    context: {typical: 640, peak: 640}\n    output: {typical: 128, peak: 128}\n")


RATES = "    requests_per_second: {typical: 8, peak: 16}\n"


def _plan(text: str, tmp_path: Path) -> dict:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return make_plan(parse_request(text, source=str(path)), alternatives=False).jobs[0].to_dict()


def _fit(rate: float, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    code, out = answer(["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version",
                        "0.19.0", "--context", "640", "--output-tokens", "128", "--request-rate", f"{rate:g}",
                        *extra], capsys)
    assert code == 0
    return out


def test_the_plan_at_a_rate_is_fits_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = _plan(_request(RATES), tmp_path)
    peak = _fit(16, capsys)
    typical = _fit(8, capsys)
    f = j["facts"]
    assert f["ttft_peak"] == peak["speed"]["ttft_seconds"]
    assert f["tps_user_peak"] == peak["speed"]["tokens_per_second_per_user"]
    assert j["memory_estimate"]["totals"] == peak["memory"]["totals"]
    assert f["verdict_need_per_device"] == peak["memory"]["details"]["workload_bytes"]
    assert f["memory_per_device"] == peak["memory_per_device"]
    speed = {x["key"]: x["value"] for s in j["sections"] if s["key"] == "speed" for x in s["figures"]}
    assert speed["ttft_typical"] == typical["speed"]["ttft_seconds"]
    assert speed["ttft_peak"] == peak["speed"]["ttft_seconds"]
    said = {a["name"]: a for a in j["assumptions"]}
    conc = said["traffic.concurrency"]
    assert conc["default"] and "(derived)" in conc["value"]
    assert conc["value"] == (f"typical {typical['details']['concurrency']}, "
                             f"peak {peak['details']['concurrency']} (derived)")
    net = {x["key"]: x["value"] for s in j["sections"] if s["key"] == "network" for x in s["figures"]}
    assert (net["requests_typical"], net["requests_peak"]) == (8, 16)  # the rate given, not a derived one


def test_the_queue_by_hand(tmp_path: Path) -> None:
    """The API server's residence is M/M/1's H / (1 - lambda H); the requests in flight are Little's lambda W with
    W = TTFT + N steps; the concurrency sized is their ceiling."""
    j = _plan(_request(RATES), tmp_path)
    load = j["speed_estimate"]["under_load"]
    assert load["api_server_residence_seconds"] == pytest.approx(H / (1 - 16 * H), rel=1e-12)
    w = load["ttft_seconds"] + 128 * load["step_seconds"]
    assert load["in_flight"] == pytest.approx(16 * w, rel=1e-9)
    assert j["speed_estimate"]["concurrency"] == math.ceil(load["in_flight"])


def test_a_rate_past_capacity_is_an_error_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1 / H (the API server's capacity; the prefill of a 512-token prompt is far shorter) is the bound: a rate just
    under it is planned, one just over it is an answer, not bad input: the plan is still made, with the error check
    'Peak load does not fit' in fit's own words (fit exits 1 on the same rate, as on a memory that does not fit)."""
    under, over = math.floor(1 / H), math.ceil(1 / H)
    assert _plan(_request(f"    requests_per_second: {{peak: {under}}}\n"), tmp_path)["facts"]["fits"]
    text = _request(f"    requests_per_second: {{peak: {over}}}\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    plan = make_plan(parse_request(text, source=str(path)), alternatives=False)
    (error,) = [c for c in plan.checks if c.severity == "error"]
    assert error.title == "Peak load does not fit"
    assert f"does not carry the rate: at {over} requests/s" in error.message
    assert f"carries at most about {1 / H:.3g} requests/s" in error.message
    code, out, _ = run(["fit", "qwen3-0.6b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version", "0.19.0",
                        "--context", "640", "--output-tokens", "128", "--request-rate", str(over)], capsys)
    assert code == 1 and "DOES NOT FIT" in out
    assert error.message.split(": ", 1)[1] in out  # fit's own words after the device
    code, _, _ = run(["plan", str(path), "-o", str(tmp_path / "r.md")], capsys)
    assert code == 1 and (tmp_path / "r.md").exists()  # the report is still written


def test_each_machine_takes_its_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = _plan(_request("    requests_per_second: {peak: 60}\n", "{device: h100-sxm, count: 2}"), tmp_path)
    both = _fit(60, capsys, "--count", "2")
    assert j["facts"]["ttft_peak"] == both["speed"]["ttft_seconds"]
    load = j["speed_estimate"]["under_load"]
    assert (load["request_rate"], load["request_rate_per_replica"]) == (60, 30)  # the rate typed, each replica half


def test_with_both_the_concurrency_sizes_and_a_rate_past_it_is_warned(tmp_path: Path) -> None:
    conc = "    concurrency: {typical: 4, peak: 8}\n"
    calm = _plan(_request(conc + "    requests_per_second: {typical: 1, peak: 2}\n"), tmp_path)
    assert not [w for w in calm["warnings"] if "requests_per_second" in w]
    load = calm["speed_estimate"]["under_load"]
    carried = 8 / load["request_seconds"]  # Little's law: 8 in service, each held for the request's seconds
    above = round(1.5 * carried, 1)  # more than 8 in flight carry, less than the server's capacity 1 / H
    assert carried < above < 1 / H
    j = _plan(_request(conc + f"    requests_per_second: {{typical: 1, peak: {above:g}}}\n"), tmp_path)
    net = {x["key"]: x for s in j["sections"] if s["key"] == "network" for x in s["figures"]}
    (warning,) = [w for w in j["warnings"] if "requests_per_second" in w]
    assert f"traffic.requests_per_second.peak {above:g}/s is more than the {carried:.3g} requests/s" in warning
    assert "traffic.concurrency.peak 8" in warning
    assert j["speed_estimate"]["concurrency"] == 8 and "request_rate" not in j["speed_estimate"]["under_load"]
    assert net["requests_peak"]["value"] == above
    assert "rate_refusal" not in j["facts"]


def test_with_both_a_rate_past_the_capacity_is_the_error_check(tmp_path: Path) -> None:
    """Probe4 defect 6: 1000/s beside concurrency 8 is past the server's capacity 1 / H at any concurrency (eq.
    Q10a): the queue is unbounded, the same error check as the rate alone, not a warning that more would queue."""
    conc = "    concurrency: {typical: 4, peak: 8}\n"
    text = _request(conc + "    requests_per_second: {typical: 1, peak: 1000}\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    plan = make_plan(parse_request(text, source=str(path)), alternatives=False)
    (error,) = [c for c in plan.checks if c.severity == "error"]
    assert error.title == "Peak load does not fit" and "at 1000 requests/s" in error.message
    assert f"carries at most about {1 / H:.3g} requests/s" in error.message
    assert not [w for w in plan.jobs[0].to_dict()["warnings"] if "requests_per_second.peak" in w]


def test_neither_is_one_line_naming_both(tmp_path: Path) -> None:
    with pytest.raises(RequestError) as e:
        _plan(_request(""), tmp_path)
    assert "traffic.concurrency: is required" in str(e.value) and "traffic.requests_per_second" in str(e.value)


def test_no_devices_plans_on_recommends_copies(tmp_path: Path) -> None:
    """No resources: the plan is sized on `recommend --request-rate`'s choice (the fewest copies of the cheapest
    candidate that carry the peak rate within the limits), each copy at its share, fit's answer for it."""
    text = _request("    requests_per_second: {typical: 8, peak: 100}\n", "{}").replace(
        "  resources: {}\n", "  latency: {ttft: 0.1 s}\n")
    j = _plan(text, tmp_path)
    rec = recommend_inference("qwen3-0.6b", context=640, output_tokens=128, engine="vllm", engine_version="0.19.0",
                              request_rate=100, constraints=Constraints(max_ttft=0.1), quantization_advice=False)
    chosen = rec.chosen
    assert chosen is not None and chosen.instances > 1  # more than one copy carries 100/s within 0.1 s
    assert j["hardware"]["count"] == chosen.count
    one = fit("qwen3-0.6b", chosen.target, engine="vllm", engine_version="0.19.0", weights=chosen.weights_format,
              context=640, output_tokens=128, request_rate=100 / chosen.instances)
    assert one.speed is not None
    assert j["facts"]["ttft_peak"] == one.speed.ttft_seconds == chosen.ttft_seconds
    assert j["facts"]["ttft_peak"] <= 0.1


def test_capacity_sizes_the_plans_need(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The provider's other-device sizing (plan/inference.py device_fit, capacity check's) at the rate: fit's."""
    req = parse_request(_request(RATES), source=str(tmp_path / "r.yaml"))
    alt = device_fit(req.jobs[0], "h100-sxm", 1)
    assert alt is not None
    assert alt.fit.memory_per_device == _fit(16, capsys)["memory_per_device"]
    assert alt.fit.details["concurrency"] == _fit(16, capsys)["details"]["concurrency"]


def test_capacity_check_answers_a_rate_past_the_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Probe4 defect 1: `capacity check` of a request whose peak rate the named H100 cannot carry is an answer (the
    job's need does not fit, exit 1, in fit's words), not the request's bad input (exit 2)."""
    over = math.ceil(1 / H)
    path = tmp_path / "r.yaml"
    path.write_text(_request(f"    requests_per_second: {{peak: {over}}}\n"))
    inventory = Path(__file__).resolve().parents[2] / "examples" / "provider" / "inventory.yaml"
    code, out, err = run(["capacity", "check", str(path), "--inventory", str(inventory), "--db",
                          str(tmp_path / "b.db")], capsys)
    assert code == 1, err
    assert f"h100-sxm does not carry the rate: at {over} requests/s" in out

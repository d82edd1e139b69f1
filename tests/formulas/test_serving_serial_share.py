"""formulas/serving_queue.py eq. Q11: of the server's time per request H only s H queues in its one process,
(1 - s) H is each request's own delay. Checked by hand against M/M/1 and the saturated closed network, and at the
limits s = 1 (all serial: eqs. Q6', Q9b, Q10 as before) and s = 0 (a pure delay)."""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.serving_queue import (
    OverCapacityError,
    burst_serving,
    loaded_serving,
    open_capacity,
    open_serving,
    split_host,
)

CAPACITY_50 = (r"capacity, 50 requests/s per replica \(1 / max\(prefill [^()]*\), eq\. Q10a\): its queue grows "
               "without bound; lower the rate, add replicas or shorten the prompts$")


def test_split_by_hand() -> None:
    assert split_host(0.02, 0.25) == pytest.approx((0.005, 0.015))
    assert split_host(0.02, 1.0) == (0.02, 0.0)
    with pytest.raises(InputError):
        split_host(0.02, 1.5)


def test_open_serial_part_is_an_m_m_1_queue_the_rest_a_delay() -> None:
    """No output, H = 20 ms of which s = 0.5 serial, D = 10 ms, 40/s: the server station is M/M/1 of service 10 ms at
    rho 0.4 (0.01 / 0.6), plus the 10 ms delay, plus the prefill's M/M/1 (0.01 / 0.6): 43.33 ms. At s = 1 the same
    rate is 0.8 of the server's capacity (0.02 / 0.2 = 100 ms)."""
    s = open_serving(40.0, 0.01, 0.0, 0, None, host_seconds=0.02, host_serial_share=0.5)
    assert s["ttft_seconds"] == pytest.approx(0.01 + 0.01 / 0.6 + 0.01 / 0.6)
    assert s["api_server_busy"] == pytest.approx(0.4)
    assert open_serving(40.0, 0.01, 0.0, 0, None, host_seconds=0.02)["ttft_seconds"] == pytest.approx(0.1 + 0.01 / 0.6)


def test_the_capacity_is_the_serial_part_s() -> None:
    """1 / max(D, s H): H = 20 ms, D = 1 ms: 50/s all serial, 100/s at s = 0.5, the prefill's 1,000/s as a delay;
    60/s is refused at s = 1 and answered at s = 0.5."""
    assert open_capacity(0.001, 0.02) == pytest.approx(50.0)
    assert open_capacity(0.001, 0.02, 0.5) == pytest.approx(100.0)
    assert open_capacity(0.001, 0.02, 0.0) == pytest.approx(1000.0)
    with pytest.raises(OverCapacityError, match=CAPACITY_50):  # the parenthesis closed, per replica, the levers
        open_serving(60.0, 0.001, 0.001, 10, None, host_seconds=0.02)
    assert open_serving(60.0, 0.001, 0.001, 10, None, host_seconds=0.02, host_serial_share=0.5)["ttft_seconds"] > 0.02


def test_a_pure_delay_adds_h_to_the_open_ttft() -> None:
    """s = 0: the server queues nothing, every request just spends H: TTFT = H + the TTFT without a server."""
    bare = open_serving(30.0, 0.01, 0.004, 50, None, carrying_steps=1)
    delay = open_serving(30.0, 0.01, 0.004, 50, None, host_seconds=0.02, carrying_steps=1, host_serial_share=0.0)
    assert delay["ttft_seconds"] == pytest.approx(bare["ttft_seconds"] + 0.02)


def test_one_request_sees_all_of_h_whatever_s() -> None:
    """C = 1: the cycle H + D + N t_d, the TTFT H + D, for any split (H's calibration at one request holds)."""
    for share in (0.0, 0.3, 1.0):
        s = loaded_serving(1, 0.005, 0.004, 100, None, host_seconds=0.02, host_serial_share=share)
        assert s["ttft_seconds"] == pytest.approx(0.025)
        assert s["requests_per_second"] == pytest.approx(1 / (0.025 + 0.4))


def test_the_saturated_closed_server_caps_at_one_over_s_h() -> None:
    """4,000 requests in flight with a short think time: the busiest station binds and X -> 1 / max(D, s H):
    100/s at s = 0.5 of H = 20 ms (D 1 ms), 50/s at s = 1 (Q6' as first written)."""
    for share, cap in ((0.5, 100.0), (1.0, 50.0)):
        x = loaded_serving(4000, 0.001, 0.001, 10, None, host_seconds=0.02,
                           host_serial_share=share)["requests_per_second"]
        assert x == pytest.approx(cap, rel=0.01)


def test_a_burst_serialises_only_s_h() -> None:
    """Eq. Q9b with Q11: the j-th of C requests arriving together waits j s H beside its own (1 - s) H:
    TTFT = (1 - s) H + s H (C + 1) / 2 + t_d + the burst's prefill share; a round C s H + (1 - s) H + ..."""
    c, h, share, batch, td, n = 10, 0.02, 0.4, 0.05, 0.004, 20
    b = burst_serving(c, batch, 1, td, n, h, None, share)
    assert b["ttft_seconds"] == pytest.approx(0.6 * h + 0.4 * h * (c + 1) / 2 + td + batch)
    assert b["request_seconds"] == pytest.approx(c * 0.4 * h + 0.6 * h + td + batch + (n - 1) * td)

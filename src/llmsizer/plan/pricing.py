"""Hourly versus reserved pricing, as pure functions (the seed's FAQ: "When duration can be estimated,
reserving for the period is easier to plan; confirm case by case").

A reservation is paid for its whole period whether the resources are busy or not; hourly resources are paid
only while they run. With an hourly price p, a reservation discount d, busy hours b out of a period of P
hours::

    busy share          u = b / P                                                         (1)
    hourly cost         C_h = p b                                                         (2)
    reserved cost       C_r = p (1 - d) P                                                 (3)
    break-even          C_r < C_h  <=>  d > 1 - u                                         (4)

A service up h hours a day on w days a week is busy h w / 168 of the time; per month (730 h, the AWS Pricing
Calculator convention)::

    busy hours per month = 730 h w / 168                                                  (5)

No discount is assumed: catalog prices are on-demand, and reservation discounts depend on provider, term and
payment option. Without a quote the plan states the break-even discount (4) instead of a reserved price.
"""

from __future__ import annotations

from ..errors import InputError
from ..request.quantities import HOURS_PER_MONTH

HOURS_PER_WEEK = 168.0


def busy_share(busy_hours: float, period_hours: float) -> float:
    """Eq. (1)."""
    if period_hours <= 0:
        raise InputError(f"period must be positive, got {period_hours}")
    return min(1.0, max(0.0, busy_hours / period_hours))


def hourly_cost(price_per_hour: float, busy_hours: float) -> float:
    """Eq. (2) [USD]."""
    return price_per_hour * busy_hours


def reserved_cost(price_per_hour: float, discount: float, period_hours: float) -> float:
    """Eq. (3) [USD]."""
    if not 0 <= discount < 1:
        raise InputError(f"discount must be in [0, 1), got {discount}")
    return price_per_hour * (1 - discount) * period_hours


def break_even_discount(busy: float) -> float:
    """Eq. (4): the reservation discount above which reserving is cheaper than paying by the hour.

    >>> break_even_discount(0.25)
    0.75
    """
    return 1.0 - busy


def service_hours_per_month(hours_per_day: float, days_per_week: float) -> float:
    """Eq. (5): hours a service must run per month.

    >>> service_hours_per_month(24, 7)
    730.0
    """
    return HOURS_PER_MONTH * hours_per_day * days_per_week / HOURS_PER_WEEK

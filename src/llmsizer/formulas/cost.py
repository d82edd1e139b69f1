"""Cost of time on hardware: rented by the hour, or owned and paying for power.

    cost_run = price [USD/h] x seconds / 3600                                           (1)
    cost per million tokens = price / (tokens/s x 3600) x 10^6                          (2)
    energy [kWh] = P [W] x n x hours x utilisation / 1000;  cost = energy x USD/kWh      (3)

(3) uses the thermal design power as the draw at full load, an upper bound for a device that is not saturated
(the utilisation argument scales it).
"""

from __future__ import annotations

from ..errors import InputError


def run_cost(price_per_hour: float, seconds: float) -> float:
    """Eq. (1) [USD]."""
    if price_per_hour < 0 or seconds < 0:
        raise InputError("price and time must not be negative")
    return price_per_hour * seconds / 3600.0


def cost_per_million_tokens(price_per_hour: float, tokens_per_second: float) -> float:
    """Eq. (2) [USD per 10^6 tokens]."""
    if tokens_per_second <= 0:
        raise InputError(f"tokens_per_second must be positive, got {tokens_per_second}")
    return price_per_hour / (tokens_per_second * 3600.0) * 1e6


def energy_kwh(watts: float, hours: float, devices: int = 1, utilization: float = 1.0) -> float:
    """Eq. (3) energy [kWh]."""
    if watts < 0 or hours < 0 or devices < 1 or not 0 <= utilization <= 1:
        raise InputError("need watts >= 0, hours >= 0, devices >= 1, utilization in [0, 1]")
    return watts * devices * hours * utilization / 1000.0


def power_cost(watts: float, hours: float, price_per_kwh: float, devices: int = 1, utilization: float = 1.0) -> float:
    """Eq. (3) cost of electricity [USD] at ``price_per_kwh`` [USD/kWh]."""
    if price_per_kwh < 0:
        raise InputError(f"price_per_kwh must not be negative, got {price_per_kwh}")
    return energy_kwh(watts, hours, devices, utilization) * price_per_kwh


def power_price_per_hour(watts: float, price_per_kwh: float, devices: int = 1) -> float:
    """Hourly electricity cost of ``devices`` devices at full TDP [USD/h]."""
    return power_cost(watts, 1.0, price_per_kwh, devices)

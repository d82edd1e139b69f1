"""Quantities as request files write them: "2 TB", "500k tokens", "3 days", "80GiB", "$20k", "10 Gb/s", "5/s".

Everything becomes a plain number in base units (bytes, tokens, seconds, USD, bytes/s, requests/s). Sizes and
plain counts go through ``units.py`` (GiB = 2^30 vs GB = 10^9 kept apart; context lengths "8k" = 8192 as model
publishers write them); this module adds the units ``units.py`` does not cover: durations, money, bandwidth,
request rates and shares. Each parser raises :class:`InputError` with a one-line hint; the request reader adds
the file, line, job and field.

Calendar conventions (stated, not hidden): a month is 730 hours (8760 / 12, the AWS Pricing Calculator's
"730 hours in a month"), a year 8760 hours (365 days, AWS's one-year Reserved Instance term of 31,536,000 s).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import FieldError, InputError, MissingUnitError
from ..inputs import short
from ..numbers import (
    AMOUNT,
    BANDWIDTH,
    MONEY,
    RATE,
    SECONDS,
    SIZE,
    TOKENS,
    TRAIN_TOKENS,
    NumberError,
    Range,
    check_number,
    unreadable,
)
from ..units import (
    HOURS_PER_MONTH,
    HOURS_PER_YEAR,
    parse_bytes,
    parse_count,
    parse_tokens,
    plain_digits,
    size_unit_hint,
)
from ..units import parse_share as parse_share  # the one share reader (units.py), read here by request fields

_NUM = r"([0-9][0-9_,]*\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+)"

_DURATION_UNITS: dict[str, float] = {
    "ms": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "wk": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "month": HOURS_PER_MONTH * 3600, "months": HOURS_PER_MONTH * 3600, "mo": HOURS_PER_MONTH * 3600,
    "y": HOURS_PER_YEAR * 3600, "yr": HOURS_PER_YEAR * 3600, "year": HOURS_PER_YEAR * 3600,
    "years": HOURS_PER_YEAR * 3600,
}

_BANDWIDTH_UNITS: dict[str, float] = {
    "B/s": 1.0, "KB/s": 1e3, "kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "KiB/s": 2.0**10, "MiB/s": 2.0**20, "GiB/s": 2.0**30,
    "b/s": 1 / 8, "bps": 1 / 8, "Kb/s": 1e3 / 8, "kb/s": 1e3 / 8, "Kbps": 1e3 / 8, "kbps": 1e3 / 8,
    "Mb/s": 1e6 / 8, "Mbps": 1e6 / 8, "Gb/s": 1e9 / 8, "Gbps": 1e9 / 8, "Tb/s": 1e12 / 8, "Tbps": 1e12 / 8,
}

_RATE_UNITS: dict[str, float] = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "min": 1 / 60, "minute": 1 / 60, "h": 1 / 3600, "hour": 1 / 3600,
    "d": 1 / 86400, "day": 1 / 86400,
}

_CURRENCY = re.compile(r"\b(EUR|GBP|JPY|CNY|RMB|CHF|CAD|AUD|INR|KRW|SGD|HKD|TWD)\b|[€£¥]", re.IGNORECASE)


def _number(text: str) -> float:
    """The number of a quantity's text, its separators read by units.plain_digits (the counts' and token lengths'
    rule): a comma between thousands only ('$1,200'); '1,5 days' or '$1,2' (a decimal comma) is refused, not 15."""
    s = plain_digits(text)
    if "," in s:
        raise InputError(f"cannot read {short(text)} as a number: a comma separates thousands only (1,200); write "
                         "a decimal point (1.5)")
    return float(s)


def _strip_word(text: str, words: tuple[str, ...]) -> str:
    s = str(text).strip()
    for w in words:
        if s.lower().endswith(" " + w) or (s.lower().endswith(w) and s[: -len(w)][-1:].isdigit()):
            return s[: -len(w)].strip()
    return s


def _via_units(value: object, parse: Callable[..., int], rng: Range, words: tuple[str, ...], bad: str | None) -> int:
    """A request quantity read by its ``units.py`` parser (one rule per unit): a bool refused, an optional unit word
    after the number ("500k tokens") dropped, the parser's own range and missing-unit messages kept, any other
    misreading said as "cannot read VALUE as ``bad``" (what it is and how to write one)."""
    if isinstance(value, bool):
        raise InputError(unreadable(short(value), rng, suffixes=True) if bad is None
                         else f"cannot read {short(value)} as {bad}")
    if isinstance(value, str) and words:
        value = _strip_word(value, words)
    try:
        return parse(value, what="", rng=rng)
    except (NumberError, MissingUnitError):
        raise
    except InputError:
        if bad is None:  # the parser's message is the one every surface gives (numbers.unreadable)
            raise
        if parse is parse_bytes and isinstance(value, str):  # '80gib': did you mean 80GiB?
            bad = bad.replace("a size", "a size" + size_unit_hint(value), 1)
        raise InputError(f"cannot read {short(value)} as {bad}") from None


def parse_size(value: object) -> int:
    """Bytes from "2 TB", "80GiB", "512 MiB" or a plain byte count (decimal and binary prefixes kept apart)."""
    return _via_units(value, parse_bytes, SIZE, (), "a size; write e.g. '2 TB', '80GiB', '500 GB' (GB = 10^9 bytes, "
                      "GiB = 2^30 bytes)")


def parse_plain_count(value: object, words: tuple[str, ...] = (), rng: Range = AMOUNT) -> int:
    """A count such as 12, "40k", "1.5M", "8B", optionally followed by a unit word ("40k examples"), in ``rng``
    (a field's own range, e.g. traffic.concurrency's, so its message is the field's)."""
    return _via_units(value, parse_count, rng, words, None)  # parse_count's own message: numbers.unreadable


def parse_token_count(value: object) -> int:
    """A number of tokens in a dataset or run: "500k tokens" = 500,000, "2B tokens" = 2 x 10^9 (decimal
    suffixes, as dataset sizes are quoted)."""
    return _via_units(value, parse_count, TRAIN_TOKENS, ("tokens", "token"),
                      "a token count; write e.g. '500k tokens', '2B tokens', '60M'")


def parse_context(value: object, rng: Range = TOKENS) -> int:
    """A sequence length: "8k" = 8192, "128k" = 131072 (binary thousands, as model publishers quote context),
    a plain number as written, in ``rng``; an optional trailing "tokens" is ignored."""
    return _via_units(value, parse_tokens, rng, ("tokens", "token"),
                      "a token length; write e.g. '4096', '8k' (= 8192), '128k'")


def parse_duration(value: object) -> float:
    """Seconds from "3 days", "12h", "90 min", "2 weeks", "6 months", "1 year", "500 ms".

    A bare number is refused: "3" could be seconds, hours or days."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise InputError(f"duration {short(value)} has no unit; write e.g. '3 days', '12h', '90 min', '6 months'")
    s = str(value).strip()
    # a sign read too, so '-1d' is refused as a length of time that is not positive, not as unreadable text
    m = re.fullmatch(r"([-+]?)\s*" + _NUM + r"\s*([A-Za-z]+)", s)
    if not m:
        raise InputError(f"cannot read {short(value)} as a duration; write e.g. '3 days', '12h', '90 min', '6 months'")
    sign, number, unit = m.group(1), m.group(2), m.group(3).lower()
    if unit == "m":
        raise InputError(f"duration {short(value)}: 'm' could be minutes or months; write 'min' or 'months'")
    if unit not in _DURATION_UNITS:
        raise InputError(f"duration {short(value)}: unknown unit {m.group(3)!r}; use ms, s, min, h, days, weeks, "
                         "months, years")
    seconds = (-1 if sign == "-" else 1) * _number(number) * _DURATION_UNITS[unit]
    if seconds <= 0:  # read, but no length of time: the range's words, passed through by the readers of an interval
        raise NumberError(f"duration {short(value)} must be positive")  # or a deadline that rewrite "cannot read"
    return float(check_number(seconds, "", SECONDS))


def parse_interval(value: object) -> tuple[float | None, int | None]:
    """A checkpoint interval: a duration ("2h") -> (seconds, None), or a step count ("500 steps") -> (None, 500)."""
    if isinstance(value, str) and re.search(r"\bsteps?\s*$", value.strip(), re.IGNORECASE):
        n = parse_plain_count(re.sub(r"\s*steps?\s*$", "", value.strip(), flags=re.IGNORECASE))
        if n < 1:
            raise InputError(f"interval {short(value)} must be at least 1 step")
        return None, n
    try:
        return parse_duration(value), None
    except NumberError:
        raise
    except InputError:
        raise InputError(f"cannot read {short(value)} as an interval; write a time ('2h', '30 min') or a step count "
                         "('500 steps')") from None


# the trailing words of a rate, per period: accepted with that period, named in the error without one
_MONEY_PERIODS = {"h": ("/h", "/hour", "per hour", "/hr"), "month": ("/month", "per month", "/mo"),
                  "kWh": ("/kwh", "per kwh")}
_MONEY_PERIOD_WORDS = {"h": "per hour", "month": "per month", "kWh": "per kWh"}
_MONEY_EXAMPLES = {None: "'20000 USD', '$20k', '1.5M USD'", "h": "'12.5', '$12.5/h', '$1.2k/h'",
                   "month": "'5000', '$5k/month', '1.2M USD/month'", "kWh": "'0.12', '$0.12/kWh'"}


def parse_money(value: object, period: str | None = None, rng: Range = MONEY, rates: str = "") -> float:
    """US dollars from 20000, "20000 USD", "$20k", "USD 1.5M" in ``rng``; with ``period`` ("h", "month" or "kWh") a
    trailing "/h", "/month" or "/kWh" is accepted. Other currencies are refused: catalog prices are USD. The one money
    reader: request files and the CLI's money flags (cli/common.py ``money_arg``). An error gives examples of the
    kind asked (a total, or an amount per ``period``); a rate given where a total is asked is named as one, with
    ``rates``: where the caller takes rates (e.g. "the hourly limit is --max-cost-per-hour")."""
    examples = _MONEY_EXAMPLES[period]
    if isinstance(value, bool):
        raise InputError(f"cannot read {short(value)} as an amount; write e.g. {examples}")
    if isinstance(value, (int, float)):
        return float(check_number(value, "", rng))
    s = str(value).strip()
    if _CURRENCY.search(s):
        raise InputError(f"amount {short(value)}: give US dollars (the catalog's prices are USD); convert first")
    if period is not None:
        for w in _MONEY_PERIODS[period]:
            if s.lower().endswith(w):
                s = s[: -len(w)].strip()
                break
    else:
        per = next((p for p, ws in _MONEY_PERIODS.items() if s.lower().endswith(ws)), None)
        if per is not None:
            raise InputError(f"cannot read {short(value)} as an amount: it is a rate ({_MONEY_PERIOD_WORDS[per]}), "
                             f"and this is a total; write e.g. {examples}" + (f" ({rates})" if rates else ""))
    s = re.sub(r"^(USD|US\$|\$)\s*", "", s, flags=re.IGNORECASE)
    s = re.sub(r"\s*(USD|dollars?)$", "", s, flags=re.IGNORECASE)
    m = re.fullmatch(r"(-?)\s*" + _NUM + r"\s*([kKmM]?)", s)  # a minus read, for the range to refuse in its words
    if not m:
        per = f" {_MONEY_PERIOD_WORDS[period]}" if period is not None else ""
        raise InputError(f"cannot read {short(value)} as an amount{per}; write e.g. {examples}")
    sign = -1.0 if m.group(1) else 1.0
    return float(check_number(sign * _number(m.group(2)) * {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(3)],
                              "", rng))


def parse_bandwidth(value: object) -> float:
    """Bytes per second from "10 Gb/s", "10 Gbps" (bits) or "500 MB/s", "2 GiB/s" (bytes)."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise InputError(f"bandwidth {short(value)} has no unit; write e.g. '10 Gb/s' (bits) or '500 MB/s' (bytes)")
    s = str(value).strip()
    m = re.fullmatch(_NUM + r"\s*([A-Za-z/]+)", s)
    if not m or m.group(2) not in _BANDWIDTH_UNITS:
        raise InputError(f"cannot read {short(value)} as a bandwidth; write e.g. '10 Gb/s', '25 Gbps', '500 MB/s' "
                         "(b = bits, B = bytes)")
    return float(check_number(_number(m.group(1)) * _BANDWIDTH_UNITS[m.group(2)], "", BANDWIDTH))


NETWORK_KINDS = ("infiniband", "ethernet", "efa")  # catalog interconnect kinds that link machines


def parse_network(value: object, gpus_per_node: int, hardware_files: Sequence[str | Path] = ()) -> tuple[float, str]:
    """(bytes/s per machine, what) of a network between machines (formulas/network.py eq. (11)), the one reader of
    ``fit --train --network``, the Python API's ``network=`` and a request's ``resources.network``: a catalog
    interconnect of a network kind (per port: one port per device of a machine, the rail-optimised layout of DGX /
    Grand Teton / p5 hosts, so times ``gpus_per_node``; 'per instance' / 'per VM' entries: the machine's whole
    network) or a bandwidth per machine ('1600 Gb/s', '8x400Gb/s')."""
    from ..catalog.hardware import load_catalog

    if isinstance(value, (bool, int, float)):
        parse_bandwidth(value)  # a number names no interconnect and has no unit: parse_bandwidth's one refusal
    text = str(value).strip()
    ic = load_catalog(hardware_files).interconnect(text)
    if ic is not None:
        if ic.kind not in NETWORK_KINDS:
            raise InputError(f"network {text!r} is a {ic.kind} link inside a machine; give a network between "
                             f"machines ({', '.join(NETWORK_KINDS)} interconnects, or a bandwidth such as '1600 Gb/s')")
        note = ic.bandwidth.note
        bw = float(ic.bandwidth.base)
        if "per instance" in note or "per VM" in note:
            return bw, f"{ic.name} ({text}, per machine)"
        return bw * gpus_per_node, f"{ic.name} ({text}), one port per device x {gpus_per_node}"
    m = re.fullmatch(r"(\d+)\s*[x\u00d7*]\s*(.+)", text)
    count, rest = (int(m.group(1)), m.group(2)) if m else (1, text)
    if count < 1:
        raise InputError(f"network {text!r}: the port count must be >= 1")
    try:
        bw = count * parse_bandwidth(rest)
    except InputError as e:
        raise InputError(f"network {text!r}: not a catalog interconnect of a network kind, and {e}") from None
    if bw <= 0:  # one refusal for every collective that crosses machines (data, tensor, pipeline, expert parallel)
        raise FieldError("network", f"network {text!r}: the bandwidth between machines must be positive")
    return bw, f"{text} per machine (given)"


def parse_rate(value: object) -> float:
    """Requests per second from 5, "5/s", "300/min", "300 per minute", "10000/day", "2 rps"."""
    if isinstance(value, bool):
        raise InputError(f"cannot read {short(value)} as a rate; write e.g. '5/s', '300/min'")
    if isinstance(value, (int, float)):
        return float(check_number(value, "", RATE))
    s = str(value).strip().lower()
    s = re.sub(r"\s*(requests?|req)\s*", " ", s).strip()
    m = re.fullmatch(_NUM + r"\s*(?:/|per\s+)?\s*([a-z]*)", s)
    if not m:
        raise InputError(f"cannot read {short(value)} as a rate; write e.g. '5/s', '300/min', '10000/day'")
    unit = m.group(2) or "s"
    if unit == "rps":
        unit = "s"
    if unit not in _RATE_UNITS:
        raise InputError(f"rate {short(value)}: unknown period {unit!r}; use /s, /min, /h or /day")
    return float(check_number(_number(m.group(1)) * _RATE_UNITS[unit], "", RATE))


#: the latest day a request may name (its start, a deadline) and the latest its windows may reach (start + a
#: deadline or service duration): the provider's calendar holds every window from such a start (the 2-year search
#: for the earliest window, provider/placement.py ``earliest``; a year's lease for an ongoing booking,
#: provider/scheduler_export.py) well before its own end (placement.py ONGOING_END, 9999-01-01, "until released")
#: and Python's last day (9999-12-31), past which the arithmetic raises OverflowError
LATEST_DATE = _dt.date(9000, 12, 31)


def check_reach(begin: _dt.date, seconds: float, what: str) -> None:
    """Refuse a window from ``begin`` lasting ``seconds`` that ends after :data:`LATEST_DATE` (one line naming
    ``what``, the duration's meaning)."""
    if seconds > (_dt.datetime.combine(LATEST_DATE, _dt.time.max) - _dt.datetime.combine(begin, _dt.time())
                  ).total_seconds():
        raise InputError(f"{what} from {begin} ends after {LATEST_DATE}, the latest date a request may reach")


def parse_date(value: object) -> _dt.date:
    """A calendar date: YAML's 2025-07-01 or the string "2025-07-01". A time of day is refused, unquoted (YAML reads
    ``2027-01-10T10:30:00+02:00`` as a timestamp) or quoted alike, with one line: a request's start and deadline are
    days (the request schema's ``format: date``; docs/provider.md: a job's window starts at its ``start`` day), so a
    time would otherwise be dropped and the booking cover another window than the one asked for."""
    if isinstance(value, _dt.datetime):
        raise InputError(f"cannot read {short(value.isoformat())} as a date (a request's start and deadline are days, "
                         "a time of day is not read); write YYYY-MM-DD, e.g. 2025-07-01")
    if isinstance(value, _dt.date):
        d = value
    else:
        try:
            d = _dt.date.fromisoformat(str(value).strip())
        except ValueError:
            raise InputError(f"cannot read {short(value)} as a date (a request's start and deadline are days, a time "
                             "of day is not read); write YYYY-MM-DD, e.g. 2025-07-01") from None
    if d > LATEST_DATE:
        raise InputError(f"{d} is after {LATEST_DATE}, the latest date a request may name (the windows planned from it "
                         "must stay within the calendar)")
    return d


def parse_date_or_duration(value: object) -> tuple[_dt.date | None, float | None]:
    """A deadline: a date (2025-07-01) or a duration from the start ("3 weeks")."""
    if isinstance(value, (_dt.date, _dt.datetime)) or (isinstance(value, str)
                                                       and re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", value)):
        return parse_date(value), None
    try:
        return None, parse_duration(value)
    except NumberError:
        raise
    except InputError:
        raise InputError(f"cannot read {short(value)} as a deadline; write a date (2025-07-01) or a duration from the "
                         "start ('3 weeks')") from None

"""Quantities at the edges: parse what users type, format what they read.

Inside llmsizer every quantity is a plain number in base units: bytes, parameters, tokens, seconds.
This module is the only place that knows about suffixes. Binary prefixes (KiB, MiB, GiB, TiB = 2^10..2^40)
and decimal prefixes (KB, MB, GB, TB = 10^3..10^12) are kept apart, as in pint's ``default_en.txt``;
a size in bits (``b``, ``Gb``) is refused as a mistyped byte unit (bandwidths take bits: request/quantities.py).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from .errors import InputError, MissingUnitError, SizeInBitsError
from .inputs import short
from .numbers import (
    AMOUNT,
    FRACTION,
    PIXELS,
    SIZE,
    TOKENS,
    NumberError,
    Range,
    check_number,
    exactly_whole,
    unreadable,
)

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

# A month is 730 hours (8760 / 12, the AWS Pricing Calculator's "730 hours in a month"): the month a request file's
# "6 months" means (request/quantities.py), a service is priced by (plan/) and a duration is shown in (format_seconds).
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0  # 365 days: a request file's "1 year" and format_seconds's years from two years on

_BYTE_UNITS: dict[str, float] = {
    "b": 1 / 8, "bit": 1 / 8, "bits": 1 / 8,
    "B": 1, "byte": 1, "bytes": 1,
    "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
    "Kb": 1e3 / 8, "kb": 1e3 / 8, "Mb": 1e6 / 8, "Gb": 1e9 / 8, "Tb": 1e12 / 8,
}

_COUNT_SUFFIX: dict[str, float] = {
    "": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "b": 1e9, "B": 1e9, "t": 1e12, "T": 1e12,
}

# a sign is read, so that '-8k' is "out of range; expected ..." (the range says what is allowed), not unreadable
_NUM = r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"  # '4', '4.', '4.5', '.5', '1e3'


# thousands separators a number may carry: commas between groups of three digits ('1,048,576', '32,768k'); any other
# comma ('8,5k', '1,2,3,4') is no separator (a decimal comma or a list) and is refused, not dropped
_GROUPED = re.compile(r"[+-]?[1-9][0-9]{0,2}(?:,[0-9]{3})+(?![0-9,])")


def plain_digits(text: str) -> str:
    """``text`` without its digit separators: underscores ('1_000') and thousands commas; a comma that does not
    separate thousands is kept, so the reader's pattern refuses the text ('8,5k' is not 85k)."""
    s = text.strip().replace("_", "")
    m = _GROUPED.match(s) if "," in s else None
    return s if m is None else m.group().replace(",", "") + s[m.end():]


# A size written without a unit is bytes; below this many it is refused as a forgotten unit ("--memory 24" is 24
# bytes, never what anyone means: no device, file or budget llmsizer sizes is under 1 MiB). 0 stays allowed ("none").
UNITLESS_SIZE_FLOOR = MiB


def _head(what: str) -> str:
    return f"{what}: " if what else ""  # no name: the caller names the value (argparse: "argument --memory:")


def _checked(value: float, what: str, rng: Range, scaled: bool = True) -> int:
    """``value`` as a whole number, through the one validation layer (finite and in ``rng``). ``scaled``: a number
    times a unit or suffix ('1.3k', '1.5GiB'), rounded to the nearest whole; otherwise a fraction is refused as the
    Python API refuses it ("must be a whole number, got 2.7": `--concurrency 2.7` is no count of sequences)."""
    if scaled and isinstance(value, float) and math.isfinite(value):
        value = round(value)
    return int(check_number(value, what, rng))


def _as_typed(number: str) -> int | float:
    """The number ``number`` (``_NUM``'s match) as read: a plain integer as an int, so an out-of-range message
    echoes the whole number typed ('99999999', not the float's '1e+08', probe13 D8); anything else ('1e9', '2.5')
    as a float. At most 30 digits as an int (int() of text is linear up to Python's limit; past 30 digits the range
    check says 'about 10^N' either way)."""
    return int(number) if len(number) <= 30 and number.lstrip("+-").isdigit() else float(number)


def _not_negative(number: str, written: str, what: str, rng: Range) -> None:
    """A negative value as written ('-8k', '-1GiB') is out of range, said in the user's own words (the range check
    would show it scaled: -8192, -1073741824)."""
    if number.startswith("-") and float(number) != 0 and rng.low >= 0:
        raise NumberError(f"{_head(what)}{written.strip()} is out of range; expected {rng.describe()}")


def parse_bytes(text: str | int | float, *, what: str = "memory", rng: Range = SIZE) -> int:
    """Parse a memory size such as ``"24GiB"``, ``"80 GB"``, ``"512MiB"`` or a plain byte count.

    A bare number means bytes, and one above 0 but below ``UNITLESS_SIZE_FLOOR`` (1 MiB) is refused as a forgotten
    unit ("'24' has no unit (a bare number is bytes); did you mean 24GiB?"). Raises :class:`InputError` naming *what* on anything else, and
    :class:`~llmsizer.numbers.NumberError` for a value that is not finite or outside ``rng``.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        _unit_given(text, str(text), what)
        return _checked(text, what, rng)
    s = str(text).strip()
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]*)", s)
    if not m or m.group(2) not in _BYTE_UNITS and m.group(2) != "":
        raise InputError(
            f"{_head(what)}cannot read {short(text)} as a size{size_unit_hint(s)}; write e.g. '24GiB', '80GB', '512MiB' "
            "(GiB = 2^30 bytes, GB = 10^9 bytes)"
        )
    _not_negative(m.group(1), s, what, rng)
    if m.group(2) == "":
        _unit_given(float(m.group(1)), m.group(1), what)
    factor = _BYTE_UNITS.get(m.group(2), 1)
    if m.group(2) in _BIT_AS_BYTES:
        _in_bits(s, m.group(1), m.group(2), float(m.group(1)) * factor, what)
    return _checked(float(m.group(1)) * factor, what, rng)


# each bit unit's byte counterparts, decimal and binary ('80Gb': did you mean 80GB or 80GiB?)
_BIT_AS_BYTES = {"b": ("B",), "bit": ("B",), "bits": ("B",), "Kb": ("KB", "KiB"), "kb": ("kB", "KiB"),
                 "Mb": ("MB", "MiB"), "Gb": ("GB", "GiB"), "Tb": ("TB", "TiB")}


def _in_bits(written: str, number: str, unit: str, value: float, what: str) -> None:
    """Refuse a size in bits: no memory, file or budget is sized in bits, so '80Gb' (10 GB) is a mistyped 80GB or
    80GiB, as a small bare number is a forgotten unit (_unit_given)."""
    meant = " or ".join(number + u for u in _BIT_AS_BYTES[unit])
    raise SizeInBitsError(f"{_head(what)}{written} is {format_bytes(value, binary=False)} (bits); "
                          f"did you mean {meant}?")


# the units other programs write without the B: Docker's '24g' and '512m' (binary), Kubernetes' '24Gi' (binary)
# and '24G' (decimal); ours need the B, so both readings are offered for the bare prefix
_PREFIX_UNITS = {"k": ("KiB", "kB"), "m": ("MiB", "MB"), "g": ("GiB", "GB"), "t": ("TiB", "TB"), "p": ("PiB", "PB"),
                 "ki": ("KiB",), "mi": ("MiB",), "gi": ("GiB",), "ti": ("TiB",), "pi": ("PiB",)}


def size_unit_hint(text: str) -> str:
    """' (did you mean 80GiB?)' for a size whose unit is a known byte unit in the wrong case ('80gib', '80gb'), or
    a unit prefix without its B ('24G': 24GiB or 24GB; '24Gi': 24GiB), else ''."""
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]+)", text.strip())
    # a size in bits is refused (_in_bits): only the byte units are offered
    near = [u for u in _BYTE_UNITS if m and u.lower() == m.group(2).lower() and u not in _BIT_AS_BYTES] if m else []
    if m and not near:
        near = list(_PREFIX_UNITS.get(m.group(2).lower(), ()))
    if not m or not near or m.group(2) in _BYTE_UNITS:
        return ""
    return " (did you mean " + " or ".join(m.group(1) + u for u in near) + "?)"


def _unit_given(value: float, written: str, what: str) -> None:
    """Refuse a unitless size in (0, UNITLESS_SIZE_FLOOR): bytes by the rule, a forgotten 'GiB' in practice."""
    if 0 < value < UNITLESS_SIZE_FLOOR:
        raise MissingUnitError(f"{_head(what)}{written!r} has no unit (a bare number is bytes); did you mean {written}GiB?")


# the most characters of a comma-separated list an error echoes whole (``shown_list``): MAX_GPUS + 1 = 16 sizes of
# up to 11 characters ('1023.99 GiB') and their commas, so a list one value too long is shown whole
LIST_SHOWN = 200


def comma_values(text: str, *, what: str = "", most: int = 128) -> list[str]:
    """The items of a comma-separated list as the command line's list flags take it (``--free 22GiB,10GiB``,
    ``--tensor-split 3,1``; '/' separates as ',' does), each to be read by the item's own reader: 1 to ``most``
    non-empty items, else one line."""
    parts = text.replace("/", ",").split(",")
    if len(parts) > most or any(not p.strip() for p in parts):
        many = f"{len(parts)} values: " if len(parts) > most else ""
        raise InputError(f"{_head(what)}expected 1 to {most} comma-separated values, got {many}"
                         f"{shown_list(text)!r}")
    return parts


def shown_list(text: str, limit: int = LIST_SHOWN) -> str:
    """A comma-separated list as an error echoes it: whole up to ``limit`` characters (16 sizes as '23.99GiB' are
    143), else cut after the last separator within ``limit`` and ended with '...', so no value is shown cut in two
    (probe18 F3: '24GiB,...,24GiB,24' read as a mangled input) and a 1 MB value does not become the message."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind(","), head.rfind("/"))
    return (head[:cut + 1] if cut > 0 else head) + "..."


def parse_count(text: str | int | float, *, what: str = "count", rng: Range = AMOUNT) -> int:
    """Parse a count such as ``"7B"``, ``"500k"``, ``"1.5M"``, ``"8192"`` (decimal suffixes: k = 10^3, M = 10^6,
    B = 10^9, T = 10^12). The one reader of a count written as text: the CLI's numeric flags (cli/common.py
    ``int_arg``, ``count_in``), a request file's int and count fields (request/quantities.py ``parse_plain_count``)
    and the Python API's (specs/workload.py ``read_number``). In a range of whole numbers a value is whole as written
    ('4.00000000000000001' is not 4); in a range that takes fractions (LoRA alpha) the value is returned as read."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not rng.integral:  # a count field that takes fractions (LoRA alpha): the number, not its whole part
            return check_number(text, what, rng)  # type: ignore[return-value]
        return _checked(text, what, rng, scaled=False)
    s = plain_digits(str(text))
    m = re.fullmatch(_NUM + r"\s*([kKmMbBtT]?)", s)
    if not m:
        raise InputError(f"{_head(what)}{unreadable(short(text), rng, suffixes=True)}")
    _not_negative(m.group(1), s, what, rng)
    if not rng.integral:  # a count field that takes fractions (LoRA alpha): the number, not its whole part
        return check_number(float(m.group(1)) * _COUNT_SUFFIX[m.group(2)], what, rng)  # type: ignore[return-value]
    if not m.group(2) and not exactly_whole(m.group(1)):
        # '4.00000000000000001' reads as the float 4.0: a whole number only up to the float's precision
        raise NumberError(f"{_head(what)}must be a whole number, got {m.group(1)}; expected {rng.describe()}")
    return _checked(_as_typed(m.group(1)) * _COUNT_SUFFIX[m.group(2)], what, rng, scaled=bool(m.group(2)))


def parse_plain_number(text: str, *, what: str = "", rng: Range) -> float:
    """Parse a plain number ('24', '1.5', '1e2', '1,000') in ``rng``, no decimal suffix: a quantity with a unit of
    its own (``capacity book --hold-hours``: hours are not counts, so '1k' hours is refused and the message offers
    no "'7B' = 7 x 10^9" hint, review34 N3)."""
    s = plain_digits(str(text))
    if not re.fullmatch(_NUM, s):
        raise InputError(f"{_head(what)}{unreadable(short(text), rng)}")
    return float(check_number(float(s), what, rng))


def parse_tokens(text: str | int | float, *, what: str = "context", rng: Range = TOKENS) -> int:
    """Parse a context length. Context sizes are quoted in binary thousands by model publishers
    ("8k" = 8192, "128K" = 131072 tokens, e.g. Llama 3.1's 131072 max_position_embeddings), so k/K here
    means 1024 and m/M 1024^2. Plain numbers are taken as written."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return parse_count(text, what=what, rng=rng)
    s = plain_digits(str(text))
    m = re.fullmatch(_NUM + r"\s*([kKmM]?)", s)
    if not m:
        raise InputError(f"{_head(what)}cannot read {short(text)} as a token count; write e.g. '8192', '8k' (= 8192), '128k'")
    _not_negative(m.group(1), s, what, rng)
    factor = {"": 1, "k": 1024, "K": 1024, "m": 1024**2, "M": 1024**2}[m.group(2)]
    return _checked(_as_typed(m.group(1)) * factor, what, rng, scaled=bool(m.group(2)))


def parse_share(value: object, bounds: Range | None = None) -> float:
    """A share in [0, 1] from 0.4 or "40%"; ``bounds``: a narrower range of its own (a CLI flag's, e.g. the
    headroom's), checked with that range's message."""
    if isinstance(value, bool):
        raise InputError(f"cannot read {short(value)} as a share; write e.g. 0.4 or '40%'")
    if isinstance(value, str):
        s = value.strip()
        if s.endswith("%"):
            try:
                v = float(s[:-1]) / 100
            except ValueError:
                raise InputError(f"cannot read {short(value)} as a percentage") from None
        else:
            try:
                v = float(s)
            except ValueError:
                raise InputError(f"cannot read {short(value)} as a share; write e.g. 0.4 or '40%'") from None
    elif isinstance(value, (int, float)):
        v = float(value)
    else:
        raise InputError(f"cannot read {short(value)} as a share")
    if bounds is not None:
        return float(check_number(v, "", bounds))
    if not 0 <= v <= 1:
        raise InputError(f"share {short(value)} must be between 0 and 1 (0% and 100%)")
    return float(check_number(v, "", FRACTION))


def parse_image_size(text: str | list[int] | tuple[int, ...], *, what: str = "image size") -> tuple[int, int]:
    """Parse an image or video frame size ``"1024x768"`` (width x height, pixels; ``x``, ``X`` or ``*``), or a
    [width, height] pair, into (width, height), each side through ``check_number`` (PIXELS)."""
    if isinstance(text, (list, tuple)):
        if len(text) != 2:
            raise InputError(f"{_head(what)}expected [width, height], got {len(text)} values")
        w, h = text
    else:
        m = re.fullmatch(r"\s*([0-9]+)\s*[xX*\u00d7]\s*([0-9]+)\s*", str(text))
        if not m:
            raise InputError(f"{_head(what)}cannot read {short(text)} as an image size; write WIDTHxHEIGHT in "
                             "pixels, e.g. '1024x768'")
        w, h = int(m.group(1)), int(m.group(2))
    return (int(check_number(w, f"{what} width" if what else "width", PIXELS)),
            int(check_number(h, f"{what} height" if what else "height", PIXELS)))


# the units a size is written back in for a command line, largest first, binary before decimal (24GiB, not 25.77GB)
_EXACT_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6))


def bytes_text(n: int) -> str:
    """``n`` bytes as a flag's text that ``parse_bytes`` reads back to exactly ``n``: the largest unit of
    ``_EXACT_UNITS`` that divides it (24GiB for 25769803776, 64GB for 64000000000), else the plain byte count. For
    a command printed for the user to re-run (models --fits-on's ``fit --auto`` line)."""
    n = int(n)
    for unit, size in _EXACT_UNITS:
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


_SIZE_NAMES: dict[bool, tuple[str, ...]] = {True: ("B", "KiB", "MiB", "GiB", "TiB", "PiB"), False: ("B", "KB", "MB", "GB", "TB", "PB")}


def _byte_unit(n: float, binary: bool) -> int:
    """The power of 1024 (``binary``) or 1000 that ``format_bytes`` says ``n`` bytes in."""
    base, x, i = (1024.0 if binary else 1000.0), abs(float(n)), 0
    while x >= base and i < len(_SIZE_NAMES[binary]) - 1:
        x /= base
        i += 1
    return i


@lru_cache(maxsize=8192)  # a pure function; a catalog-wide search formats the same budgets over and over
def format_bytes(n: float, *, binary: bool = True, unit: int | None = None, places: int = 2) -> str:
    """Format bytes for people: GiB/MiB (binary, default) or GB/MB (decimal). Never mixes the two. ``unit`` (a power
    of the base) and ``places`` are ``compared_bytes``'s: one side of a pair in the other's unit and decimals."""
    i = _byte_unit(n, binary) if unit is None else unit
    x = float(n) / (1024.0 if binary else 1000.0) ** i
    if i == 0:
        return f"{int(x)} B"
    return f"{x:.{places}f} {_SIZE_NAMES[binary][i]}"


_MOST_PLACES = 40  # the most decimals a pair is said at (a double's 17 significant digits of a value down to 1e-23)


def _order(values: tuple[float, ...]) -> list[int]:
    """Each value's order against the last (the bound it is judged by): -1, 0 or 1 (``<``, ``==``, ``>``)."""
    return [(x > values[-1]) - (x < values[-1]) for x in values[:-1]]


def compared_places(values: tuple[float, ...], places: int) -> int:
    """The fewest decimals, ``places`` or more, at which each of ``values`` (already in the unit they are printed in)
    rounded compares with the last (the bound) as the exact values do: ``<``, ``==`` or ``>``. The one rule that keeps a printed need and its
    bound (a speed and its floor, a memory and its budget, a TTFT and its limit) from contradicting the verdict drawn
    from the exact numbers (a speed of 5.26 said '5.3' against a floor of 5.29). Rounding all to the same decimals is
    monotone, so it never reverses an order; it can only merge two values into one text, which more decimals undo."""
    want = _order(values)
    # 17 significant digits tell any two doubles apart: past them more decimals show nothing new
    small = min((abs(v) for v in values if v), default=1.0)
    most = min(_MOST_PLACES, max(places, 17 - math.floor(math.log10(small))) if math.isfinite(small) else places)
    for p in range(max(places, 0), most + 1):
        if _order(tuple(round(v, p) for v in values)) == want:
            return p
    return most


def _places_of(text: str) -> int:
    """The decimals a formatted number ``text`` shows ('5.29' -> 2, '1,097' -> 0)."""
    head = text.split()[0]
    return len(head) - head.index(".") - 1 if "." in head else 0


def compared_bytes(*sizes: float, binary: bool = True) -> tuple[str, ...]:
    """Memory sizes read against the last (a need, its high end, then the budget they are judged by), each said as
    ``format_bytes`` says it, but those in the budget's unit at one number of decimals with it: as many as
    ``compared_places`` needs for each one's printed order against the budget to agree with the exact one
    ('79.004 GiB' against '79.000 GiB', not '79.00 GiB' against '79.00 GiB'). A size in another unit (MiB against
    GiB) already reads in order and is said alone."""
    unit = _byte_unit(sizes[-1], binary)
    same = [k for k, n in enumerate(sizes) if _byte_unit(n, binary) == unit]
    size = (1024.0 if binary else 1000.0) ** unit
    p = compared_places(tuple(float(sizes[k]) / size for k in same), 2) if unit else 2
    return tuple(format_bytes(n, binary=binary, unit=unit, places=p) if k in same else format_bytes(n, binary=binary)
                 for k, n in enumerate(sizes))


_BIT_UNITS = {"Tb/s": 1e12, "Gb/s": 1e9, "Mb/s": 1e6, "kb/s": 1e3}


def format_bits(bytes_per_second: float, unit: str | None = None) -> str:
    """A network rate given in bytes per second [B/s], said in bits per second (8 bits a byte; networks are rated in
    bits, SI prefixes): by default 3 significant digits in the largest unit it reaches after rounding (999,920 b/s
    is '1 Mb/s', not '1e+03 kb/s'); ``unit`` ('Gb/s'...): in that unit, ``:g`` (a fabric's '3200 Gb/s' as its
    inventory states it). The one formatter of bit rates: the plan renderers, the provider's placement messages."""
    if unit is not None:
        return f"{bytes_per_second * 8 / _BIT_UNITS[unit]:g} {unit}"
    bits = float(f"{bytes_per_second * 8:.3g}")
    for name, size in _BIT_UNITS.items():
        if bits >= size:
            return f"{bits / size:.3g} {name}"
    return f"{bits:.3g} b/s"


def _seconds_unit(seconds: float) -> tuple[float, str, int]:
    """The unit ``format_seconds`` says ``seconds`` in: (seconds per unit, its name, decimals)."""
    s = float(seconds)
    if s < 1:
        return 0.001, "ms", 0
    if s < 90:
        return 1.0, "s", 1
    if s < 600:  # one decimal below 10 min: 90 s is "1.5 min" (whole minutes said "2 min", a third more)
        return 60.0, "min", 1
    if s < 5400:
        return 60.0, "min", 0
    if s < 2 * 86400:
        return 3600.0, "h", 1
    # days up to two years, not months: a month of HOURS_PER_MONTH (30.42 days) is no calendar month, and beside
    # dates it misled (probe20 C4: "6.0 months from 2026-12-14 00:00 -> 2027-06-14 12:00"; now "182.5 days")
    if s < 2 * 3600.0 * HOURS_PER_YEAR:
        return 86400.0, "days", 1
    return 3600.0 * HOURS_PER_YEAR, "years", 1  # "75.8 years", not "27,667.0 days"


def format_seconds(seconds: float) -> str:
    """Format a duration for people, the one way every renderer and message says one: ms below 1 s, s (one
    decimal) below 90 s, min (one decimal below 10 min, whole above) below 90 min, h below 2 days, days below two
    years of ``HOURS_PER_YEAR`` (730 days), then years. No months: a request file's month is ``HOURS_PER_MONTH``
    (730 h), not a calendar month, so "6 months" is said back as "182.5 days", the span between the dates a
    booking shows. The pages' ``formatSeconds`` (web/static/js/format.js) is the same."""
    size, name, places = _seconds_unit(seconds)
    return f"{float(seconds) / size:.{places}f} {name}"


def format_seconds_range(low: float, high: float) -> str:
    """A range of durations in one unit, the low end's by ``format_seconds``'s rule ("42.6 - 59.5 h", not
    "42.6 h - 2.5 days"), so the two ends read against each other."""
    size, name, places = _seconds_unit(low)
    return f"{float(low) / size:.{places}f} - {float(high) / size:.{places}f} {name}"


def format_usd(x: float) -> str:
    """Format US dollars for people: whole dollars from $100 ("$1,234"), cents below ("$6.88")."""
    if abs(x) >= 100:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


def compared_usd(cost: float, limit: float) -> tuple[str, str]:
    """A cost and the budget it is judged against, as ``format_usd`` says money (whole dollars from $100, cents
    below) but both at one precision, cents where either side is below $100, and more decimals where
    ``compared_places`` needs them for the printed order to agree with the verdict ('$1,234.40' against '$1,234.00',
    not '$1,234' against '$1,234'; '$2.004' against '$2.000')."""
    c, b = float(cost), float(limit)
    if not (math.isfinite(c) and math.isfinite(b)):
        return format_usd(c), format_usd(b)
    p = compared_places((c, b), 0 if min(abs(c), abs(b)) >= 100 else 2)
    return f"${c:,.{p}f}", f"${b:,.{p}f}"


def format_rate(x: float) -> str:
    """Format a rate (tokens/s, requests/s) for people, the one way every surface says one: one decimal with
    thousands separators from 1 up ('129.5', '5,017.8'); below 1, two significant digits, trailing zeros dropped
    ('0.81', '0.1', '0.083'), so a small rate never reads '0' or '0.0'. The pages' ``formatRate``
    (web/static/js/format.js) is the same (tests/web/test_format_js.py)."""
    v = float(x)
    if v == 0 or abs(v) >= 1 or not math.isfinite(v):
        return f"{v:,.1f}"
    places = 1 - math.floor(math.log10(abs(v)))  # the second significant digit's decimal place
    text = f"{v:.{places}f}".rstrip("0").rstrip(".")
    return text if abs(float(text)) < 1 else f"{float(text):,.1f}"  # 0.996 rounds to 1: said as '1.0'


def compared_rates(rate: float, limit: float) -> tuple[str, str]:
    """A measured ``rate`` and the ``limit`` it is judged against (tokens/s: a speed per user against the reading
    floor or a --user-tokens-per-second), both at the same decimals: as many as ``format_rate`` gives the rate and
    ``format_limit`` the limit, more where ``compared_places`` needs them for the printed order to agree with the
    verdict ('5.26' against '5.29', not '5.3' against '5.29'; '5.2' against '20.0')."""
    r, f = float(rate), float(limit)
    if not (math.isfinite(r) and math.isfinite(f)):
        return format_rate(r), format_limit(f)
    p = compared_places((r, f), max(_places_of(format_rate(r)), _places_of(format_limit(f))))
    return f"{r:,.{p}f}", f"{f:,.{p}f}"


def compared_seconds(seconds: float, limit: float) -> tuple[str, str]:
    """A time (a TTFT) and the limit it is judged against [s], said in seconds at the same decimals: two, or the
    limit's own as given ('0.125'), more where ``compared_places`` needs them for the printed order to agree with
    the verdict ('2.004 s > 2.000 s', not '2.00 s > 2 s')."""
    s, f = float(seconds), float(limit)
    if not (math.isfinite(s) and math.isfinite(f)):
        return f"{s:.2f} s", f"{f:g} s"
    p = compared_places((s, f), max(2, _places_of(format_limit(f))))
    return f"{s:.{p}f} s", f"{f:.{p}f} s"


def format_limit(x: float) -> str:
    """Format a rate limit (a tokens/s floor: recommend's reading speed, a --user-tokens-per-second given) as it is
    set, not rounded to a measurement's one decimal (``format_rate``): a speed of 5.26 reads '5.3' yet misses a floor
    of 5.29, which must read '5.29' ('7.25', '20'). The one way fit --auto, the search and recommend write a floor."""
    return f"{float(x):g}"


def format_count(n: float) -> str:
    """Format a parameter or token count with a decimal suffix (K, M, B, T)."""
    x = float(n)
    for suffix, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.2f}{suffix}"
    return f"{int(x)}"


def format_chance(p: float) -> str:
    """A probability as a whole percentage that never reads 0% or 100% where it is neither: '<1%', '57%', '>99%'."""
    if 0 < p < 0.01:
        return "<1%"
    if 0.99 < p < 1:
        return ">99%"
    return f"{p:.0%}"

"""Durations written as Polars writes them ("1h", "2d3h", "1mo", "-1w"): parsed once, here.

`parse_duration(text)` gives a `Duration` of calendar months, weeks, days and microseconds,
kept apart because they mean different things: a month is not a fixed length, and weeks
truncate to Mondays where days truncate from 1970-01-01 (docs/semantics.md section 12).
`truncate` and `offset` apply one to a timestamp, for `dt.truncate` and for windows by time.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import re
from dataclasses import dataclass

from eidos.errors import PlanError

# Polars' units, each as (months, weeks, days, microseconds) per one; "ns" must make whole microseconds.
_UNITS = {"y": (12, 0, 0, 0), "q": (3, 0, 0, 0), "mo": (1, 0, 0, 0), "w": (0, 1, 0, 0), "d": (0, 0, 1, 0),
          "h": (0, 0, 0, 3_600_000_000), "m": (0, 0, 0, 60_000_000), "s": (0, 0, 0, 1_000_000),
          "ms": (0, 0, 0, 1000), "us": (0, 0, 0, 1), "µs": (0, 0, 0, 1)}
_PART = re.compile(r"(\d+)(ns|us|µs|ms|mo|[smhdwqy])")
US_PER_DAY = 86_400_000_000
EPOCH = _dt.datetime(1970, 1, 1)
# A Monday: weeks truncate to Mondays (1970-01-01 was a Thursday), as in Polars.
MONDAY = 4 * US_PER_DAY
_WHAT = ('a duration is written as Polars writes it: integers with units ns, us, ms, s, m (minutes), h, d, w, '
         'mo, q, y, run together, optionally after a "-": "90s", "1h30m", "2d3h", "1mo", "-1w"')


@dataclass(frozen=True)
class Duration:
    """A length of time: whole calendar months, weeks, days and microseconds, all of one sign."""

    months: int = 0
    weeks: int = 0
    days: int = 0
    microseconds: int = 0

    def __str__(self) -> str:
        parts = [(self.months, "mo"), (self.weeks, "w"), (self.days, "d")]
        us = abs(self.microseconds)
        for unit, size in (("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1000), ("us", 1)):
            parts.append((us // size, unit))
            us %= size
        text = "".join(f"{abs(n)}{unit}" for n, unit in parts if n)
        return ("-" if self.negative else "") + (text or "0s")

    @property
    def negative(self) -> bool:
        return min(self.months, self.weeks, self.days, self.microseconds) < 0

    @property
    def is_zero(self) -> bool:
        return not (self.months or self.weeks or self.days or self.microseconds)

    def fixed(self) -> int:
        """The length in microseconds; a PlanError when it holds calendar months (which vary)."""
        if self.months:
            raise PlanError(f"duration {self} has calendar months, which have no fixed length")
        return (self.weeks * 7 + self.days) * US_PER_DAY + self.microseconds


def parse_duration(text: str) -> Duration:
    """A Polars duration string ("1h", "2d3h", "1mo", "-1w") as a Duration; PlanError for anything else."""
    if isinstance(text, Duration):
        return text
    if not isinstance(text, str):
        raise PlanError(f"{_WHAT}; got {text!r}")
    body = text[1:] if text.startswith("-") else text
    parts = _PART.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        raise PlanError(f"{_WHAT}; got {text!r}")
    total = [0, 0, 0, 0]
    nanoseconds = 0
    for n, unit in parts:
        if unit == "ns":
            nanoseconds += int(n)
            continue
        for i, per in enumerate(_UNITS[unit]):
            total[i] += int(n) * per
    if nanoseconds % 1000:
        raise PlanError(f"duration {text!r} is not a whole number of microseconds; eidos timestamps hold microseconds")
    total[3] += nanoseconds // 1000
    sign = -1 if text.startswith("-") else 1
    return Duration(*(sign * v for v in total))


def micros(t: _dt.datetime) -> int:
    """Microseconds since 1970-01-01 00:00."""
    d = t - EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def from_micros(us: int) -> _dt.datetime:
    return EPOCH + _dt.timedelta(microseconds=us)


def check_truncate(every: Duration) -> None:
    """Polars' rule: a positive duration of months only, of weeks only, or of days and smaller units."""
    if every.is_zero or every.negative:
        raise PlanError(f"dt.truncate() needs a positive duration, got {every}")
    if sum(bool(v) for v in (every.months, every.weeks, every.days or every.microseconds)) > 1:
        raise PlanError(f"dt.truncate({str(every)!r}) mixes units: truncate by months (mo, q, y), by weeks (w), "
                        "or by days and smaller units, one at a time (as Polars does)")


def truncate(t: _dt.datetime, every: Duration) -> _dt.datetime:
    """The start of the bucket of `every` holding `t`: months counted from January 1970, weeks
    from a Monday, days and smaller units from 1970-01-01 00:00 (Polars' dt.truncate)."""
    if every.months:
        total = t.year * 12 + t.month - 1
        total -= (total - 1970 * 12) % every.months
        if total < 12:
            raise OverflowError("date out of range")
        return _dt.datetime(total // 12, total % 12 + 1, 1)
    us, size = micros(t), every.fixed()
    origin = MONDAY if every.weeks else 0
    return from_micros(us - (us - origin) % size)


def offset(t: _dt.date, by: Duration, n: int = 1) -> _dt.date:
    """`t` moved by `n` times `by`: months by the calendar first (a day past the month's end becomes
    its last day: Jan 31 + 1mo is Feb 29 in 2024), then weeks, days and microseconds. OverflowError
    past years 1..9999."""
    if by.months:
        total = t.year * 12 + t.month - 1 + n * by.months
        year, month = divmod(total, 12)
        if not 1 <= year <= 9999:
            raise OverflowError("date out of range")
        t = t.replace(year=year, month=month + 1, day=min(t.day, calendar.monthrange(year, month + 1)[1]))
    return t + _dt.timedelta(days=n * (by.weeks * 7 + by.days), microseconds=n * by.microseconds)

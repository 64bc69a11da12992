"""Dates, timestamps and durations: parts, truncation, days added to or between dates, durations."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import durations, timeformat
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.values import Fn, Nanos, fail, in_unit, local, stamp, strict1, zone_info
from eidos.ir.typing import check_duration


def date_arith(fn: str, ta: DType, tb: DType) -> Fn:
    """`fn` (add, sub) with a Date operand: days added to a date, or the days between two dates."""
    def guard(f):
        def g(a, b):
            try:
                return f(a, b)
            except OverflowError:
                raise fail(f"date out of range: {a} {F.BINARY_OPERATORS[fn]} {b}") from None
        return g

    if fn == "sub" and ta == T.Date and tb == T.Date:
        return lambda a, b: (a - b).days
    if T.Duration in (ta, tb):
        return _duration_arith(fn, ta, tb)
    if fn == "sub" and ta.is_temporal and tb.is_temporal:  # a Timestamp and a Date or Timestamp: a Duration
        return lambda a, b: _stamp(a) - _stamp(b)
    if fn == "add" and ta == T.Date:
        return guard(lambda a, b: a + _dt.timedelta(days=b))
    if fn == "add":
        return guard(lambda a, b: b + _dt.timedelta(days=a))
    if fn == "sub" and ta == T.Date:
        return guard(lambda a, b: a - _dt.timedelta(days=b))
    raise PlanError(f"no date arithmetic {ta} {F.BINARY_OPERATORS[fn]} {tb}")


_PARTS = {"dt_weekday": lambda a: a.isoweekday(), "dt_ordinal_day": lambda a: a.timetuple().tm_yday}


def _stamp(v: _dt.date) -> _dt.datetime:
    return v if isinstance(v, _dt.datetime) else _dt.datetime.combine(v, _dt.time())


def _duration_arith(fn: str, ta: DType, tb: DType) -> Fn:
    """Timestamp ± Duration (a result outside years 1..9999 raises) and Duration ± Duration (a result
    past 64 bits of microseconds raises)."""
    op = (lambda a, b: a + b) if fn == "add" else (lambda a, b: a - b)
    sym = F.BINARY_OPERATORS[fn]

    def f(a, b):
        try:
            r = op(a, b)
        except OverflowError:
            raise fail(f"date out of range: {a} {sym} {b}") from None
        if isinstance(r, _dt.timedelta):
            try:
                check_duration(r)
            except PlanError:
                raise fail(f"duration overflow: {a} {sym} {b} does not fit in 64 bits of microseconds") from None
        return r
    return f


_UNITS = {"days": _dt.timedelta(days=1), "hours": _dt.timedelta(hours=1), "minutes": _dt.timedelta(minutes=1),
          "seconds": _dt.timedelta(seconds=1), "milliseconds": _dt.timedelta(milliseconds=1),
          "microseconds": _dt.timedelta(microseconds=1)}


def _total(unit: _dt.timedelta) -> Fn:
    def f(d):  # whole units, toward zero (as Polars)
        n = abs(d) // unit
        return -n if d < _dt.timedelta(0) else n
    return f


def _formats(fn: str, options: tuple, rt: DType) -> Fn:
    if fn == "dt_strftime":
        parts = timeformat.parse_format(options[0])
        return strict1(lambda a: timeformat.format_value(a, parts))
    (fmt, strict), parts = options, timeformat.parse_format(options[0], parsing=True)

    def parse(s):
        t = timeformat.parse_text(s, parts)
        if t is None:
            if strict:
                raise fail(f"cannot parse {s!r} as a {rt} in format {fmt!r} (strict=False gives null)")
            return None
        return t if rt == T.Timestamp else t.date()
    return strict1(parse)


def _zones(fn: str, options: tuple, t: DType, rt: DType) -> Fn:
    """dt.replace_time_zone, dt.convert_time_zone and dt.time of a value of timestamp type `t` (docs/semantics.md 1)."""
    if fn == "dt_time":
        return strict1(lambda a: local(a, t.tz).time())
    if fn == "dt_convert_time_zone":
        return strict1(lambda a: a)   # the same instant (zoned values are held in UTC); only the type changes
    zone = None if options[0] is None else zone_info(options[0])

    def wall(at: _dt.datetime) -> _dt.datetime:
        naive = local(at, t.tz).replace(tzinfo=None)
        if zone is None:
            return naive
        here = naive.replace(tzinfo=zone)
        if here.astimezone(_dt.timezone.utc).astimezone(zone).replace(tzinfo=None) != naive:
            raise fail(f"{naive} does not exist in {options[0]} (a skipped hour): dt.replace_time_zone() gives no "
                       "answer for it")
        if here.utcoffset() != naive.replace(tzinfo=zone, fold=1).utcoffset():
            raise fail(f"{naive} is ambiguous in {options[0]} (a repeated hour): dt.replace_time_zone() gives no "
                       "answer for it")
        return in_unit(here, rt)

    return strict1(lambda a: Nanos(stamp(wall(a.at)), a.ns) if isinstance(a, Nanos) else wall(a))


def _temporal(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if ts[0].is_timestamp and fn in F.ZONES + ("dt_time",):
        return _zones(fn, options, ts[0], rt)
    if ts[0].is_timestamp and ts[0].tz is not None and fn in F.DATE_PARTS + F.TIME_PARTS:
        tz, inner = ts[0].tz, _temporal(fn, options, (T.Datetime(ts[0].unit),), rt)
        return strict1(lambda a: inner(local(stamp(a), tz)))   # parts of the zone's wall clock, as Polars
    if fn in F.FORMATS:
        return _formats(fn, options, rt)
    if fn in F.DURATION_TOTALS:
        return strict1(_total(_UNITS[fn[len("dt_total_"):]]))
    if fn == "dt_truncate":
        every = durations.parse_duration(options[0])

        def truncate(a):
            t = a if isinstance(a, _dt.datetime) else _dt.datetime.combine(a, _dt.time())
            try:
                r = durations.truncate(t, every)
            except (OverflowError, ValueError):
                raise fail(f"date out of range: {a}.dt.truncate({options[0]!r})") from None
            return r if rt == T.Timestamp else r.date()
        return strict1(truncate)
    part = fn[len("dt_"):]
    return strict1(_PARTS.get(fn) or (lambda a: getattr(a, part)))


KERNELS = {fn: _temporal for fn in F.TEMPORAL}

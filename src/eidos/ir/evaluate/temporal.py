"""Dates and timestamps: their parts, truncation, and days added to or between dates."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import durations
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.values import Fn, fail, strict1


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
    if fn == "add" and ta == T.Date:
        return guard(lambda a, b: a + _dt.timedelta(days=b))
    if fn == "add":
        return guard(lambda a, b: b + _dt.timedelta(days=a))
    if fn == "sub" and ta == T.Date:
        return guard(lambda a, b: a - _dt.timedelta(days=b))
    raise PlanError(f"no date arithmetic {ta} {F.BINARY_OPERATORS[fn]} {tb}")


_PARTS = {"dt_weekday": _dt.date.isoweekday, "dt_ordinal_day": lambda a: a.timetuple().tm_yday}


def _temporal(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
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

"""Window functions over one partition's rows, in window order (docs/semantics.md section 19): each
takes the argument columns of the partition (lists, None for null) and returns one value per row."""

from __future__ import annotations

import datetime as _dt
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, groupby
from typing import Any

from eidos.errors import ExecutionError, PlanError
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.durations import Duration, offset, parse_duration
from eidos.ir.evaluate.aggregates import aggregator, float_sum
from eidos.ir.evaluate.values import CTX, Nanos, dec_fit, int_check, order_key

Window = Callable[[Sequence[list], int], list]   # (argument columns, number of rows) -> one value per row


def window(fn: str, options: tuple, arg_dtypes: Sequence[DType], result_dtype: DType) -> Window:
    """The function computing window function or aggregation `fn` over a partition."""
    if fn in F.AGGREGATES:
        agg = aggregator(fn, arg_dtypes[0] if arg_dtypes else None, result_dtype, options)
        if fn == "count_rows":
            return lambda cols, n: [n] * n
        return lambda cols, n: [agg(cols[0])] * n
    if fn == "row_number":
        return lambda cols, n: list(range(1, n + 1))
    if fn == "rank":
        return _rank(*options, arg_dtypes[0])
    if fn == "shift":
        return _shift(options[0])
    if fn.endswith("_by"):
        inner = aggregator(fn.removeprefix("rolling_").removesuffix("_by"), arg_dtypes[0], result_dtype)
        return _rolling_by(inner, parse_duration(options[0]), *options[1:])
    if fn.startswith("rolling_"):
        inner = aggregator(fn.removeprefix("rolling_"), arg_dtypes[0], result_dtype)
        return _rolling(inner, *options)
    if fn == "cum_count":   # every row, null or not, takes the number of non-null values so far
        return lambda cols, n: list(accumulate(int(v is not None) for v in cols[0]))
    if fn in _RUNNING:
        return _running(_RUNNING[fn](arg_dtypes[0], result_dtype))
    raise PlanError(f"unknown window function {fn!r}")


def _rank(method: str, descending: bool, dtype: DType) -> Window:
    """Ranks from 1 of the non-null values (nulls get null), NaN the largest; equal values share a rank
    as `method` says; "ordinal" breaks ties by window order."""
    key = order_key(dtype) or (lambda v: v)

    def run(cols: Sequence[list], n: int) -> list:
        xs = cols[0]
        # a stable sort (reverse=True keeps equal values in order): ties stay in window order
        present = sorted((i for i in range(n) if xs[i] is not None), key=lambda i: key(xs[i]), reverse=descending)
        out: list = [None] * n
        pos = 0
        for dense, (_, tied) in enumerate(groupby(present, key=lambda i: key(xs[i])), 1):
            tied = list(tied)
            lo, hi = pos + 1, pos + len(tied)
            for j, i in enumerate(tied):
                out[i] = {"min": lo, "max": hi, "dense": dense, "ordinal": lo + j, "average": (lo + hi) / 2}[method]
            pos = hi
        return out
    return run


def _shift(k: int) -> Window:
    """Each row takes the value `k` rows before it (after it for negative `k`); rows with none there take
    the fill value (the second argument), else null."""
    def run(cols: Sequence[list], n: int) -> list:
        xs, fill = cols[0], (cols[1] if len(cols) > 1 else [None] * n)
        return [xs[i - k] if 0 <= i - k < n else fill[i] for i in range(n)]
    return run


def _rolling(agg: Callable[[list], Any], size: int, least: int) -> Window:
    """The aggregation of the `size` rows ending at each row (fewer at the start); null when fewer than
    `least` of them are non-null."""
    def run(cols: Sequence[list], n: int) -> list:
        xs = cols[0]
        out = []
        for i in range(n):
            values = [v for v in xs[max(0, i - size + 1):i + 1] if v is not None]
            out.append(agg(values) if len(values) >= least and values else None)
        return out
    return run


def _rolling_by(agg: Callable[[list], Any], size: Duration, least: int, closed: str) -> Window:
    """The aggregation of the non-null values of the rows whose `by` time is in the window ending at the row's
    own: (t - size, t] for "right" ("left": [t - size, t), "both", "none"); null where fewer than `least` (or
    none) are there, and for a row whose time is null. Row order plays no part."""
    def run(cols: Sequence[list], n: int) -> list:
        xs, times = cols[0], [_moment(t) for t in cols[1]]
        timed = sorted((t, i) for i, t in enumerate(times) if t is not None)
        keys = [t for t, _ in timed]
        out: list = [None] * n
        for i, t in enumerate(times):
            if t is None:
                continue
            try:   # a nanosecond time moves by whole microseconds: its nanoseconds stay
                lo = Nanos(offset(t.at, size, -1), t.ns) if isinstance(t, Nanos) else offset(t, size, -1)
                a = bisect_left(keys, lo) if closed in ("left", "both") else bisect_right(keys, lo)
            except OverflowError:   # the window starts before year 1: every earlier time is in it
                a = 0
            b = bisect_right(keys, t) if closed in ("right", "both") else bisect_left(keys, t)
            values = [xs[j] for _, j in timed[a:b] if xs[j] is not None]
            out[i] = agg(values) if values and len(values) >= least else None
        return out
    return run


def _moment(t: Any) -> Any:
    """A Date as its midnight, so dates and durations of hours meet."""
    return t if t is None or isinstance(t, (_dt.datetime, Nanos)) else _dt.datetime.combine(t, _dt.time())


def _running(step: Callable[[], Callable[[Any], Any]]) -> Window:
    """A running aggregation: each non-null value updates it and the row takes its value; null rows stay null."""
    def run(cols: Sequence[list], n: int) -> list:
        add = step()
        return [None if v is None else add(v) for v in cols[0]]
    return run


def _cum_sum(dtype: DType, rt: DType):
    if dtype.is_float:
        return _float_running_sum
    fit = int_check(rt, lambda: "cum_sum") if dtype.is_integer else dec_fit(rt)

    def start():
        total = [0]

        def add(v):
            if dtype.is_integer:
                total[0] = fit(total[0] + v)
                return total[0]
            total[0] = CTX.add(total[0], v)
            try:
                return fit(total[0])
            except ExecutionError:
                raise ExecutionError(f"decimal overflow: cum_sum = {total[0]} does not fit in {rt}") from None
        return add
    return start


def _float_running_sum():
    """Each prefix's sum exactly as `sum()` gives it (math.fsum, correctly rounded): Shewchuk's partials
    kept as the values come, so a row costs the partials, not its whole prefix."""
    partials: list[float] = []
    seen: list[float] = []
    special = {"nan": False, "inf": False, "-inf": False, "big": False}

    def add(x: float) -> float:
        seen.append(x)
        if x != x or math.isinf(x):
            special["nan" if x != x else ("inf" if x > 0 else "-inf")] = True
        elif abs(x) >= 2.0 ** 1000:
            special["big"] = True   # sums this large may overflow part way: math.fsum's own path decides
        if special["nan"] or (special["inf"] and special["-inf"]):
            return math.nan
        if special["inf"] or special["-inf"]:
            return math.inf if special["inf"] else -math.inf
        if special["big"]:
            return float_sum(seen)
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]
        return math.fsum(partials)
    return add


def _cum_prod(dtype: DType, rt: DType):
    check = int_check(rt, lambda: "cum_prod") if rt.is_integer else (lambda v: v)

    def start():
        total = [1 if rt.is_integer else 1.0]

        def add(v):
            total[0] = check(total[0] * v)
            return total[0]
        return add
    return start


def _cum_extreme(largest: bool):
    def make(dtype: DType, rt: DType):
        pick = aggregator("max" if largest else "min", dtype, rt)

        def start():
            best: list = []

            def add(v):
                best[:] = [pick(best + [v])]
                return best[0]
            return add
        return start
    return make


_RUNNING = {"cum_sum": _cum_sum, "cum_prod": _cum_prod, "cum_min": _cum_extreme(False),
            "cum_max": _cum_extreme(True)}

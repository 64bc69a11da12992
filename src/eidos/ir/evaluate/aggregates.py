"""Aggregations over a group's values (docs/semantics.md section 14): nulls skipped, sums exact
(math.fsum for floats), NaN the largest value."""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from eidos.errors import ExecutionError, PlanError
from eidos.ir import dtypes as T
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.values import CTX, dec_fit, fail, hash_key, int_check, order_key


def float_sum(xs: list[float]) -> float:
    """The exact sum rounded once (semantics 14). math.fsum gives it unless its partial sums pass the double
    range part way (1e308 + 1e308 - 1e308): then the exact total of the finite values is rounded here, so
    the answer never depends on the values' order. NaN, or inf with -inf, gives NaN."""
    try:
        return math.fsum(xs)
    except ValueError:   # inf with -inf
        return math.nan
    except OverflowError:
        specials = [x for x in xs if not math.isfinite(x)]
        if specials:
            return sum(specials)
        return rounded(sum(map(Fraction, xs)))


def rounded(total: Fraction) -> float:
    """An exact total rounded once to a float (int / int rounds correctly); past the float range, an
    infinity of its sign."""
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _sum(dtype: DType, rt: DType) -> Callable[[list], Any]:
    if dtype.is_integer:
        check = int_check(rt, lambda: "sum")

        def f(xs):
            return check(sum(xs)) if xs else None
        return f
    if dtype.is_decimal:
        fit = dec_fit(rt)

        def g(xs):
            if not xs:
                return None
            total = _decimal_total(xs)
            try:
                return fit(total)
            except ExecutionError:
                raise fail(f"decimal overflow: sum = {total} does not fit in {rt}") from None
        return g
    return lambda xs: float_sum(xs) if xs else None


def _decimal_total(xs: list) -> decimal.Decimal:
    with decimal.localcontext(CTX):
        return sum(xs, decimal.Decimal(0))


def _mean(dtype: DType) -> Callable[[list], Any]:
    if dtype.is_integer:
        return lambda xs: sum(xs) / len(xs) if xs else None
    if dtype.is_decimal:
        return lambda xs: float(CTX.divide(_decimal_total(xs), len(xs))) if xs else None
    return lambda xs: float_sum(xs) / len(xs) if xs else None


def _var(dtype: DType, *, root: bool) -> Callable[[list], Any]:
    def f(xs):
        n = len(xs)
        if n < 2:
            return None
        if dtype.is_float:
            if any(x != x or math.isinf(x) for x in xs):
                return math.nan
            m = float_sum(xs) / n
            v = float_sum([(x - m) * (x - m) for x in xs]) / (n - 1)  # overflow is inf, not an error
        else:
            with decimal.localcontext(CTX):
                ds = [decimal.Decimal(x) for x in xs]
                m = sum(ds, decimal.Decimal(0)) / n
                v = float(sum(((d - m) ** 2 for d in ds), decimal.Decimal(0)) / (n - 1))
        return math.sqrt(v) if root else v
    return f


def _extreme(dtype: DType, *, largest: bool) -> Callable[[list], Any]:
    pick = max if largest else min
    if not dtype.is_float:
        return lambda xs: pick(xs) if xs else None

    def f(xs):
        if not xs:
            return None
        numbers = [x for x in xs if x == x]
        if largest:
            return math.nan if len(numbers) < len(xs) else pick(numbers)
        return pick(numbers) if numbers else math.nan
    return f


def _quantile(dtype: DType, q: float, method: str) -> Callable[[list], Any]:
    """Polars' positions: h = (n - 1) * q in double precision; values at floor(h), ceil(h), or h rounded
    half away from zero; their midpoint, or lower + (higher - lower) * (h - floor(h)), exact and rounded once."""
    key = order_key(dtype)

    def f(xs):
        if not xs:
            return None
        xs = sorted(xs, key=key)
        h = (len(xs) - 1) * q
        i = math.floor(h)
        if method == "nearest" and h - i >= 0.5:   # h - i is exact; h + 0.5 could round up
            i += 1
        t = 0.0 if method in ("nearest", "lower") else 1.0 if method == "higher" else 0.5 if method == "midpoint" else h - i
        return between(xs[i], xs[math.ceil(h)], t)
    return f


def between(lo: Any, hi: Any, t: float) -> float:
    """lo + (hi - lo) * t, exact and rounded once to a float (lo <= hi; NaN and infinities as IEEE)."""
    if t == 0.0 or lo == hi:
        return float(lo)
    if t == 1.0:
        return float(hi)
    if isinstance(lo, float) and not (math.isfinite(lo) and math.isfinite(hi)):
        return lo + (hi - lo) * t
    return float(Fraction(lo) + (Fraction(hi) - Fraction(lo)) * Fraction(t))


def _arg_extreme(dtype: DType, *, largest: bool) -> Callable[[list], Any]:
    """The position, among every row of the group, of the first smallest (largest) non-null value."""
    key = order_key(dtype) or (lambda x: x)

    def f(xs):
        best = None
        for i, x in enumerate(xs):
            if x is not None and (best is None or (key(x) > key(xs[best]) if largest else key(x) < key(xs[best]))):
                best = i
        return best
    return f


def _n_unique(dtype: DType) -> Callable[[list], int]:
    key = hash_key(dtype)
    if key is None:
        return lambda xs: len(set(xs))
    return lambda xs: len({key(x) for x in xs})


def aggregator(fn: str, arg_dtype: DType, result_dtype: DType, options: tuple = ()) -> Callable[[list], Any]:
    """A function of a group's values (nulls included, in row order) computing aggregation `fn`.

    For count_rows pass the group's rows in any form; only their number counts.
    """
    if fn == "count_rows":
        return len
    if fn in ("first", "last"):   # the value of the first (last) row, null or not
        return (lambda xs: xs[0] if xs else None) if fn == "first" else (lambda xs: xs[-1] if xs else None)
    if fn == "implode":           # every value in row order, nulls included
        return list
    if fn in ("arg_min", "arg_max"):
        return _arg_extreme(arg_dtype, largest=fn == "arg_max")
    if arg_dtype == T.Null:
        return (lambda xs: 0) if fn in ("count", "n_unique") else (lambda xs: None)
    inner: Callable[[list], Any]
    if fn == "count":
        inner = len
    elif fn == "sum":
        inner = _sum(arg_dtype, result_dtype)
    elif fn == "mean":
        inner = _mean(arg_dtype)
    elif fn in ("min", "max"):
        inner = _extreme(arg_dtype, largest=fn == "max")
    elif fn == "n_unique":
        inner = _n_unique(arg_dtype)
    elif fn in ("std", "var"):
        inner = _var(arg_dtype, root=fn == "std")
    elif fn == "median":   # the quantile at 0.5 by midpoint: the two middle values' exact midpoint
        inner = _quantile(arg_dtype, 0.5, "midpoint")
    elif fn == "quantile":
        inner = _quantile(arg_dtype, *options)
    else:
        raise PlanError(f"unknown aggregation {fn!r}")
    return lambda xs: inner([x for x in xs if x is not None])


def aggregate(fn: str, values: Sequence[Any], arg_dtype: DType, result_dtype: DType, options: tuple = ()) -> Any:
    """Aggregation `fn` over `values` (None for null)."""
    return aggregator(fn, arg_dtype, result_dtype, options)(list(values))

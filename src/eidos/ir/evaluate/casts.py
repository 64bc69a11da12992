"""Casts between types (docs/semantics.md section 13), the values literals hold, and the check of
what a UDF returns. Text is read by the grammar in ir.grammar."""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import numbers
import re
from typing import Any

from eidos.errors import ExecutionError, PlanError
from eidos.ir import dtypes as T
from eidos.ir import grammar as G
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.values import MIDNIGHT, Fn, dec_fit, fail, strict1, to_f32

_INT_TEXT = re.compile(G.INTEGER)
_NUMBER_TEXT = re.compile(G.NUMBER)
_DATE_TEXT = re.compile(G.DATE)
_TS_TEXT = re.compile(G.TIMESTAMP)


def literal_value(value: Any, dtype: DType) -> Any:
    """The value a literal of `dtype` holds: a number made exactly a `dtype` value (Float32 rounded, ints as Decimal)."""
    if value is None or isinstance(value, bool):
        return value
    if dtype.is_float and isinstance(value, (int, float, decimal.Decimal)):
        return to_f32(float(value)) if dtype == T.Float32 else float(value)
    if dtype.is_decimal and isinstance(value, (int, float)):
        return cast(value, T.Float64 if isinstance(value, float) else T.Int64, dtype)
    if dtype == T.Timestamp and type(value) is _dt.date:
        return _dt.datetime.combine(value, MIDNIGHT)
    return value



def float_text(x: float, dtype: DType = T.Float64) -> str:
    """Canonical text of a float: Python repr (shortest round-trip); for Float32 the shortest that round-trips float32."""
    if dtype == T.Float32 and math.isfinite(x):
        for digits in range(1, 10):
            text = f"{x:.{digits}g}"
            if to_f32(float(text)) == x:
                return repr(float(text))
    return repr(x)


def _bad_text(s: str, dst: DType) -> ExecutionError:
    return fail(f"cannot cast string {s!r} to {dst}")


def _parse_int(dst: DType) -> Fn:
    lo, hi = T.int_range(dst)

    def f(s: str) -> int:
        t = s.strip(G.SPACE)
        if not _INT_TEXT.fullmatch(t):
            raise _bad_text(s, dst)
        v = int(t)
        if lo <= v <= hi:
            return v
        raise fail(f"cannot cast string {s!r} to {dst}: out of range ({lo}..{hi})")
    return f


def _parse_float(dst: DType) -> Fn:
    def f(s: str) -> float:
        t = s.strip(G.SPACE)
        word = G.FLOAT_WORDS.get(t.lower())
        if word is not None:
            v = word
        elif _NUMBER_TEXT.fullmatch(t):
            v = float(t)
        else:
            raise _bad_text(s, dst)
        return to_f32(v) if dst == T.Float32 else v
    return f


def _parse_decimal(dst: DType) -> Fn:
    fit = dec_fit(dst)

    def f(s: str) -> decimal.Decimal:
        t = s.strip(G.SPACE)
        if not _NUMBER_TEXT.fullmatch(t):
            raise _bad_text(s, dst)
        try:
            return fit(decimal.Decimal(t))
        except ExecutionError:
            raise fail(f"cannot cast string {s!r} to {dst}: out of range") from None
    return f


def _parse_bool(s: str) -> bool:
    v = G.BOOLEAN_WORDS.get(s.strip(G.SPACE).lower())
    if v is None:
        raise _bad_text(s, T.Boolean)
    return v


def _parse_date(s: str) -> _dt.date:
    t = s.strip(G.SPACE)
    try:
        if _DATE_TEXT.fullmatch(t):
            return _dt.date.fromisoformat(t)
    except ValueError:
        pass
    raise _bad_text(s, T.Date)


def _parse_timestamp(s: str) -> _dt.datetime:
    t = s.strip(G.SPACE)
    try:
        if _TS_TEXT.fullmatch(t):
            if len(t) == 10:
                return _dt.datetime.combine(_dt.date.fromisoformat(t), MIDNIGHT)
            date, _, clock = t[:10], t[10], t[11:]
            main, _, frac = clock.partition(".")
            parts = [int(p) for p in main.split(":")] + [0] * (3 - len(main.split(":")))
            micros = int(frac.ljust(6, "0")) if frac else 0
            return _dt.datetime.combine(_dt.date.fromisoformat(date), _dt.time(*parts, micros))
    except ValueError:
        pass
    raise _bad_text(s, T.Timestamp)


def _float_to_int(dst: DType) -> Fn:
    lo, hi = T.int_range(dst)

    def f(x: float) -> int:
        if not math.isfinite(x):
            raise fail(f"cannot cast {x} to {dst}")
        v = math.trunc(x)
        if lo <= v <= hi:
            return v
        raise fail(f"cannot cast {x!r} to {dst}: out of range ({lo}..{hi})")
    return f


def _to_int(src: DType, dst: DType) -> Fn:
    lo, hi = T.int_range(dst)

    def check(v: int, shown: Any) -> int:
        if lo <= v <= hi:
            return v
        raise fail(f"cannot cast {shown} ({src}) to {dst}: out of range ({lo}..{hi})")

    if src.is_integer:
        return lambda v: check(v, v)
    if src.is_float:
        return _float_to_int(dst)
    if src.is_decimal:
        return lambda d: check(int(d), d)  # int() truncates toward zero
    if src == T.Boolean:
        return lambda b: 1 if b else 0
    if src == T.String:
        return _parse_int(dst)
    raise PlanError(f"cannot cast {src} to {dst}")


def _to_float(src: DType, dst: DType) -> Fn:
    f32 = dst == T.Float32
    if src.is_float:
        return to_f32 if f32 and src == T.Float64 else (lambda v: v)
    if src.is_integer or src.is_decimal:
        return (lambda v: to_f32(float(v))) if f32 else float
    if src == T.Boolean:
        return lambda b: 1.0 if b else 0.0
    if src == T.String:
        return _parse_float(dst)
    raise PlanError(f"cannot cast {src} to {dst}")


def _to_decimal(src: DType, dst: DType) -> Fn:
    fit = dec_fit(dst)

    def checked(v: decimal.Decimal, shown: Any) -> decimal.Decimal:
        try:
            return fit(v)
        except ExecutionError:
            raise fail(f"cannot cast {shown} ({src}) to {dst}: out of range") from None

    if src.is_integer:
        return lambda v: checked(decimal.Decimal(v), v)
    if src.is_decimal:
        return lambda v: checked(v, v)
    if src.is_float:
        def from_float(x: float) -> decimal.Decimal:
            if not math.isfinite(x):
                raise fail(f"cannot cast {x} to {dst}")
            return checked(decimal.Decimal(repr(x)), x)
        return from_float
    if src == T.Boolean:
        return lambda b: checked(decimal.Decimal(1 if b else 0), b)
    if src == T.String:
        return _parse_decimal(dst)
    raise PlanError(f"cannot cast {src} to {dst}")


def _to_string(src: DType) -> Fn:
    if src.is_float:
        return lambda x: float_text(x, src)
    if src.is_decimal:
        return lambda d: format(d, "f")
    if src == T.Boolean:
        return lambda b: "true" if b else "false"
    if src == T.Date:
        return _dt.date.isoformat
    if src == T.Timestamp:
        return lambda t: t.isoformat(sep=" ")
    return str


def caster(src: DType, dst: DType) -> Fn:
    """A function casting one value (None stays None) from `src` to `dst`; bad values raise ExecutionError."""
    if src == dst or src == T.Null:
        return lambda v: v
    f: Fn
    if dst.is_integer:
        f = _to_int(src, dst)
    elif dst.is_float:
        f = _to_float(src, dst)
    elif dst.is_decimal:
        f = _to_decimal(src, dst)
    elif dst == T.String:
        f = _to_string(src)
    elif dst == T.Boolean:
        if src == T.String:
            f = _parse_bool
        elif src.is_numeric:
            f = lambda v: v != 0  # noqa: E731 - NaN is not 0, so it is true
        else:
            raise PlanError(f"cannot cast {src} to {dst}")
    elif dst == T.Date:
        if src == T.Timestamp:
            f = _dt.datetime.date
        elif src == T.String:
            f = _parse_date
        else:
            raise PlanError(f"cannot cast {src} to {dst}")
    elif dst == T.Timestamp:
        if src == T.Date:
            f = lambda d: _dt.datetime.combine(d, MIDNIGHT)  # noqa: E731
        elif src == T.String:
            f = _parse_timestamp
        else:
            raise PlanError(f"cannot cast {src} to {dst}")
    elif dst == T.Null:
        return lambda v: None
    else:
        raise PlanError(f"cannot cast {src} to {dst}")
    return strict1(f)


def cast(value: Any, src: DType, dst: DType) -> Any:
    """One value cast from `src` to `dst`."""
    return caster(src, dst)(value)


# ---------------------------------------------------------------- UDF results

def udf_value(dtype: DType) -> Fn:
    """Check (and convert) a Python value a UDF returned for `dtype`; a wrong type raises ExecutionError."""
    def wrong(v: Any) -> ExecutionError:
        return fail(f"returned {type(v).__name__} {v!r}, which is not a {dtype}")

    if dtype.is_integer:
        lo, hi = T.int_range(dtype)

        def f(v):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):  # numpy integers too
                raise wrong(v)
            v = int(v)
            if not lo <= v <= hi:
                raise fail(f"returned {v}, which does not fit in {dtype} ({lo}..{hi})")
            return v
    elif dtype.is_float:
        def f(v):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, numbers.Real)):
                raise wrong(v)
            return to_f32(float(v)) if dtype == T.Float32 else float(v)
    elif dtype.is_decimal:
        fit = dec_fit(dtype)

        def f(v):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, decimal.Decimal)):
                raise wrong(v)
            return fit(decimal.Decimal(v if isinstance(v, decimal.Decimal) else int(v)))
    elif isinstance(dtype, T.ListType):
        element = udf_value(dtype.inner)

        def f(v):
            if not isinstance(v, (list, tuple)):
                raise wrong(v)
            return [element(x) for x in v]
    else:
        kinds = {"Boolean": bool, "String": str, "Date": _dt.date, "Timestamp": _dt.datetime,
                 "Duration": _dt.timedelta, "Binary": bytes}
        kind = kinds.get(dtype.name, object)

        def f(v):
            if not isinstance(v, kind) or (kind is _dt.date and isinstance(v, _dt.datetime)):
                raise wrong(v)
            return v
    return strict1(f)


"""What every family of functions shares: exact decimal context, float32 rounding, range checks,
null strictness, and how an operand enters the type an operation runs in."""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

from eidos.errors import ExecutionError
from eidos.ir import dtypes as T
from eidos.ir.dtypes import DType

Fn = Callable[..., Any]

# Exact decimal arithmetic: 38-digit operands never need more than this.
CTX = decimal.Context(prec=400, rounding=decimal.ROUND_HALF_UP, Emax=10**6, Emin=-10**6,
                      traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow])
MIDNIGHT = _dt.time()


class _NanKey:
    """Stands for NaN in hash keys: NaN groups, joins and dedups with NaN."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


NAN_KEY = _NanKey()


class Nanos(NamedTuple):
    """A nanosecond timestamp's value: the datetime at the microsecond at or below it, and the nanoseconds
    past that (0..999). As tuples they order, compare and hash as the instants do; parts read `at`."""

    at: _dt.datetime
    ns: int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.at, name)


UTC = _dt.timezone.utc
EPOCH = _dt.datetime(1970, 1, 1)
_US = _dt.timedelta(microseconds=1)


def stamp(v: Any) -> _dt.datetime:
    """The datetime of a timestamp value (a Nanos's, to the microsecond below)."""
    return v.at if isinstance(v, Nanos) else v


def in_unit(v: _dt.datetime, dtype: DType) -> Any:
    """A datetime as a value of timestamp type `dtype` (a Nanos for nanoseconds; zoned ones in UTC)."""
    if dtype.tz is not None:
        v = v.astimezone(UTC)
    return Nanos(v, 0) if dtype.unit == "ns" else v


def local(v: _dt.datetime, tz: str | None) -> _dt.datetime:
    """A zoned value's wall-clock time in its zone `tz` (naive values are their own)."""
    return v if tz is None else v.astimezone(zone_info(tz))


@functools.cache
def zone_info(tz: str):
    """The zoneinfo.ZoneInfo of IANA name `tz`, looked up once per name (local() runs once per value)."""
    import zoneinfo

    return zoneinfo.ZoneInfo(tz)


def from_count(n: int, dtype: DType) -> Any:
    """The value of timestamp type `dtype` that Arrow stores as `n` units since 1970-01-01."""
    us, ns = divmod(n, 1000) if dtype.unit == "ns" else (n * 1000 if dtype.unit == "ms" else n, 0)
    at = (EPOCH + _dt.timedelta(microseconds=us))
    at = at.replace(tzinfo=UTC) if dtype.tz is not None else at
    return Nanos(at, ns) if dtype.unit == "ns" else at


def to_count(v: Any, dtype: DType) -> int:
    """Inverse of `from_count`: the units since 1970-01-01 Arrow stores for a timestamp value."""
    at, ns = (v.at, v.ns) if isinstance(v, Nanos) else (v, 0)
    us = ((at.replace(tzinfo=None) - at.utcoffset() if at.tzinfo else at) - EPOCH) // _US
    return us // 1000 if dtype.unit == "ms" else us * 1000 + ns if dtype.unit == "ns" else us


# ---------------------------------------------------------------- helpers

def fail(message: str) -> ExecutionError:
    return ExecutionError(message)


def to_f32(x: float) -> float:
    """The nearest float32 (IEEE round to nearest; overflow gives inf)."""
    return array("f", (x,))[0]


def int_check(dtype: DType, what: Callable[[], str]) -> Callable[[int], int]:
    lo, hi = T.int_range(dtype)

    def check(r: int) -> int:
        if lo <= r <= hi:
            return r
        raise fail(f"integer overflow: {what()} = {r} does not fit in {dtype} ({lo}..{hi})")

    return check


def dec_exp(scale: int) -> decimal.Decimal:
    return decimal.Decimal(1).scaleb(-scale)


def dec_fit(dtype: DType) -> Callable[[decimal.Decimal], decimal.Decimal]:
    """Quantize to the type's scale (half away from zero) and check its precision."""
    exp = dec_exp(dtype.scale)
    bound = decimal.Decimal(10) ** (dtype.precision - dtype.scale)

    def fit(d: decimal.Decimal) -> decimal.Decimal:
        q = d.quantize(exp, rounding=decimal.ROUND_HALF_UP, context=CTX)
        if -bound < q < bound:
            return q
        raise fail(f"decimal overflow: {d} does not fit in {dtype}")

    return fit


def hash_key(dtype: DType) -> Callable[[Any], Any] | None:
    """A normalizer making equal values (NaN with NaN) hash alike, or None when values already do."""
    if dtype.is_float:
        return lambda x: NAN_KEY if x != x else x
    return None


def order_key(dtype: DType) -> Callable[[Any], Any] | None:
    """A sort key for non-null values that puts NaN above every number, or None for the natural order."""
    if dtype.is_float:
        return lambda x: (1, 0.0) if x != x else (0, x)
    return None


def strict1(f: Fn) -> Fn:
    return lambda a: None if a is None else f(a)


def strict2(f: Fn) -> Fn:
    return lambda a, b: None if a is None or b is None else f(a, b)


def domain_converter(src: DType, domain: DType) -> Fn | None:
    """How a non-null value of `src` enters an operation computed in `domain` (None: as it is)."""
    if src == domain or src == T.Null:
        return None
    if domain.is_float:
        if src.is_float:
            return None if domain == T.Float64 or src == T.Float32 else to_f32
        if domain == T.Float32:
            return lambda v: to_f32(float(v))
        return float
    if domain.is_decimal:
        return decimal.Decimal if src.is_integer else None
    if domain.is_timestamp and src == T.Date:
        return lambda d: in_unit(_dt.datetime.combine(d, MIDNIGHT), domain)
    if domain.is_timestamp and src.is_timestamp and domain.unit == "ns" and src.unit != "ns":
        return lambda v: Nanos(v, 0)
    return None


def wrap_conv(f: Fn, ca: Fn | None, cb: Fn | None) -> Fn:
    if ca is None and cb is None:
        return f
    ca = ca or (lambda v: v)
    cb = cb or (lambda v: v)
    return lambda a, b: f(ca(a), cb(b))


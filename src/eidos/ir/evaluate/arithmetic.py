"""Arithmetic and math over numbers: exact integers and decimals that raise on overflow, IEEE floats
(Float32 rounded after each step), division by zero as null."""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence

from eidos.errors import ExecutionError, PlanError
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.temporal import date_arith
from eidos.ir.evaluate.values import (
    CTX,
    Fn,
    dec_exp,
    dec_fit,
    domain_converter,
    fail,
    strict1,
    strict2,
    to_f32,
    wrap_conv,
)


def _arith(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ta, tb = ts
    sym = F.BINARY_OPERATORS[fn]
    if rt == T.Null or T.Null in (ta, tb):
        return lambda a, b: None
    if rt == T.String:   # + of two strings joins them
        return strict2(lambda a, b: a + b)
    if ta.is_temporal or tb.is_temporal or T.Duration in (ta, tb):
        return strict2(date_arith(fn, ta, tb))
    if fn == "pow":
        f = wrap_conv(_ieee_pow, domain_converter(ta, T.Float64), domain_converter(tb, T.Float64))
        return strict2(_round32(f) if rt == T.Float32 else f)
    if fn == "truediv":
        if (ta.is_decimal or tb.is_decimal) and not (ta.is_float or tb.is_float):
            def exact_div(a, b):
                return None if b == 0 else float(CTX.divide(decimal.Decimal(a), decimal.Decimal(b)))
            return strict2(exact_div)
        f = wrap_conv(_float_div, domain_converter(ta, rt), domain_converter(tb, rt))
        return strict2(_round32(f) if rt == T.Float32 else f)
    if rt.is_integer:
        return strict2(_int_arith(fn, sym, rt))
    if rt.is_float:
        f = wrap_conv(_FLOAT_OPS[fn], domain_converter(ta, rt), domain_converter(tb, rt))
        return strict2(_round32(f) if rt == T.Float32 else f)
    if rt.is_decimal:
        return strict2(_decimal_arith(fn, sym, ta, tb, rt))
    raise PlanError(f"no arithmetic {fn} for {ta} {sym} {tb} -> {rt}")


def _round32(f: Fn) -> Fn:
    def g(a, b):
        r = f(a, b)
        return None if r is None else to_f32(r)
    return g


def _int_arith(fn: str, sym: str, rt: DType) -> Fn:
    lo, hi = T.int_range(rt)

    def over(a, b, r):
        return fail(f"integer overflow: {a} {sym} {b} = {r} does not fit in {rt} ({lo}..{hi})")

    if fn == "add":
        def f(a, b):
            r = a + b
            if lo <= r <= hi:
                return r
            raise over(a, b, r)
    elif fn == "sub":
        def f(a, b):
            r = a - b
            if lo <= r <= hi:
                return r
            raise over(a, b, r)
    elif fn == "mul":
        def f(a, b):
            r = a * b
            if lo <= r <= hi:
                return r
            raise over(a, b, r)
    elif fn == "floordiv":
        def f(a, b):
            if b == 0:
                return None
            r = a // b
            if lo <= r <= hi:
                return r
            raise over(a, b, r)
    elif fn == "mod":
        def f(a, b):
            return None if b == 0 else a % b
    else:
        raise PlanError(f"no integer arithmetic {fn}")
    return f


def _float_div(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


def _float_floordiv(a: float, b: float) -> float | None:
    if b == 0:
        return None
    q = a / b
    return float(math.floor(q)) if math.isfinite(q) else q


def _float_mod(a: float, b: float) -> float | None:
    if b == 0:
        return None
    if a != a or b != b or math.isinf(a):
        return math.nan
    return a % b


_FLOAT_OPS: dict[str, Fn] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": _float_floordiv,
    "mod": _float_mod,
}


def _ieee_pow(x: float, y: float) -> float:
    """C99/IEEE pow: 0**negative is inf, negative**fractional is NaN, overflow is inf."""
    try:
        return math.pow(x, y)
    except ValueError:
        if x == 0:
            odd = y == math.floor(y) and y % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf
        return math.nan
    except OverflowError:
        odd = math.isfinite(y) and y == math.floor(y) and y % 2 == 1
        return -math.inf if x < 0 and odd else math.inf


def _decimal_arith(fn: str, sym: str, ta: DType, tb: DType, rt: DType) -> Fn:
    fit = dec_fit(rt)
    ca = domain_converter(ta, rt) or (lambda v: v)
    cb = domain_converter(tb, rt) or (lambda v: v)

    def checked(op):
        def f(a, b):
            a, b = ca(a), cb(b)
            r = op(a, b)
            if r is None:
                return None
            try:
                return fit(r)
            except ExecutionError:
                raise fail(f"decimal overflow: {a} {sym} {b} = {r} does not fit in {rt}") from None
        return f

    if fn == "add":
        return checked(CTX.add)
    if fn == "sub":
        return checked(CTX.subtract)
    if fn == "mul":
        return checked(CTX.multiply)
    if fn == "floordiv":
        return checked(lambda a, b: None if b == 0 else _decimal_floordiv(a, b))
    if fn == "mod":
        return checked(lambda a, b: None if b == 0 else _decimal_mod(a, b))
    raise PlanError(f"no decimal arithmetic {fn}")


def _decimal_floordiv(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    q = CTX.divide_int(a, b)
    r = CTX.remainder(a, b)
    if r != 0 and (r < 0) != (b < 0):
        q = CTX.subtract(q, 1)
    return q


def _decimal_mod(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    r = CTX.remainder(a, b)
    if r != 0 and (r < 0) != (b < 0):
        r = CTX.add(r, b)
    return r


# ---------------------------------------------------------------- math

def _float_fn(f: Fn, rt: DType, src: DType) -> Fn:
    conv = domain_converter(src, T.Float64) or (lambda v: v)
    if rt == T.Float32:
        return strict1(lambda a: to_f32(f(conv(a))))
    return strict1(lambda a: f(conv(a)))


def _guarded(f: Fn, *, domain_error: Fn, overflow: Fn = lambda x: math.inf) -> Fn:
    def g(x: float) -> float:
        try:
            return f(x)
        except ValueError:
            return domain_error(x)
        except OverflowError:
            return overflow(x)
    return g


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    if x < 0:
        return math.nan
    return math.log(x)


def _log10(x: float) -> float:
    return _log(x) if x <= 0 or x != x else math.log10(x)


def _round_half_away(y: float) -> float:
    """C round(): to the nearest integer, ties away from zero."""
    if not math.isfinite(y):
        return y
    r = math.trunc(y)
    if abs(y - r) >= 0.5:
        r += 1 if y > 0 else -1
    return math.copysign(float(r), y) if r == 0 else float(r)


def _round_float(decimals: int) -> Fn:
    def f(x: float) -> float:
        if not math.isfinite(x):
            return x
        if decimals >= 0:
            p = 10.0 ** decimals
            y = x * p
            return x if not math.isfinite(y) else _round_half_away(y) / p
        p = 10.0 ** -decimals
        return _round_half_away(x / p) * p
    return f


def _math(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    (t,) = ts
    if t == T.Null or rt == T.Null:
        return lambda a: None
    if fn in ("neg", "abs"):
        if t.is_decimal:
            return strict1(CTX.minus if fn == "neg" else CTX.abs)
        op = (lambda a: -a) if fn == "neg" else abs
        if t.is_integer:
            lo, hi = T.int_range(rt)

            def f(a):
                r = op(a)
                if lo <= r <= hi:
                    return r
                raise fail(f"integer overflow: {fn}({a}) = {r} does not fit in {rt} ({lo}..{hi})")
            return strict1(f)
        return strict1(op)
    if fn == "sqrt":
        return _float_fn(_guarded(math.sqrt, domain_error=lambda x: math.nan), rt, t)
    if fn == "exp":
        return _float_fn(_guarded(math.exp, domain_error=lambda x: math.nan), rt, t)
    if fn in ("log", "log10"):
        return _float_fn(_log if fn == "log" else _log10, rt, t)
    if fn in ("sin", "cos", "tanh"):
        return _float_fn(_guarded(getattr(math, fn), domain_error=lambda x: math.nan), rt, t)
    if fn in ("floor", "ceil"):
        if t.is_integer:
            return strict1(lambda a: a)
        if t.is_decimal:
            fit = dec_fit(rt)
            mode = decimal.ROUND_FLOOR if fn == "floor" else decimal.ROUND_CEILING
            return strict1(lambda a: fit(a.to_integral_value(rounding=mode, context=CTX)))
        g = math.floor if fn == "floor" else math.ceil
        return strict1(lambda a: float(g(a)) if math.isfinite(a) else a)
    if fn == "round":
        (decimals,) = options
        if t.is_integer:
            if decimals >= 0:
                return strict1(lambda a: a)
            step = 10 ** -decimals
            lo, hi = T.int_range(rt)

            def round_int(a):
                q, r = divmod(abs(a), step)
                r = (q + (1 if 2 * r >= step else 0)) * step * (1 if a >= 0 else -1)
                if lo <= r <= hi:
                    return r
                raise fail(f"integer overflow: round({a}, {decimals}) = {r} does not fit in {rt}")
            return strict1(round_int)
        if t.is_decimal:
            fit = dec_fit(rt)
            exp = dec_exp(decimals)
            return strict1(lambda a: fit(a.quantize(exp, rounding=decimal.ROUND_HALF_UP, context=CTX)))
        f = _round_float(decimals)
        return strict1((lambda a: to_f32(f(a))) if rt == T.Float32 else f)
    raise PlanError(f"unknown math function {fn!r}")


KERNELS = {fn: _arith for fn in F.ARITHMETIC} | {fn: _math for fn in F.MATH}

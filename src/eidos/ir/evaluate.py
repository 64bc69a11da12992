"""The meaning of every IR function over plain Python values: docs/semantics.md, in code.

Values are what `pyarrow.Array.to_pylist()` gives: int, float, bool, str,
decimal.Decimal, datetime.date, datetime.datetime, and None for null. A
value of a Float32 expression is a Python float that a float32 holds exactly.

Two ways in, one set of rules:

- `kernel(fn, options, arg_dtypes, result_dtype)` resolves the types once and
  returns a function of the argument values; the reference lane maps it over
  columns. `caster(src, dst)` and `aggregator(fn, arg_dtype, result_dtype)`
  do the same for casts and aggregations.
- `call(...)`, `cast(...)` and `aggregate(...)` apply one at once; constant
  folding uses them and leaves a node unfolded on EidosError.

`arg_dtypes` are the operand types after weak literals adapt (typing.adapt):
the types the operands have when the operation runs. A failing value raises
ExecutionError saying what and which type; the caller adds where.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import numbers
import re
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from eidos.errors import ExecutionError, PlanError
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir import grammar as G
from eidos.ir.dtypes import DType
from eidos.ir.expr import Literal
from eidos.ir.typing import adapt, literal_dtype, promote

Fn = Callable[..., Any]

# Exact decimal arithmetic: 38-digit operands never need more than this.
_CTX = decimal.Context(prec=400, rounding=decimal.ROUND_HALF_UP, Emax=10**6, Emin=-10**6,
                       traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow])
_MIDNIGHT = _dt.time()


class _NanKey:
    """Stands for NaN in hash keys: NaN groups, joins and dedups with NaN."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


NAN_KEY = _NanKey()


# ---------------------------------------------------------------- helpers

def _fail(message: str) -> ExecutionError:
    return ExecutionError(message)


def to_f32(x: float) -> float:
    """The nearest float32 (IEEE round to nearest; overflow gives inf)."""
    return array("f", (x,))[0]


def _int_check(dtype: DType, what: Callable[[], str]) -> Callable[[int], int]:
    lo, hi = T.int_range(dtype)

    def check(r: int) -> int:
        if lo <= r <= hi:
            return r
        raise _fail(f"integer overflow: {what()} = {r} does not fit in {dtype} ({lo}..{hi})")

    return check


def _dec_exp(scale: int) -> decimal.Decimal:
    return decimal.Decimal(1).scaleb(-scale)


def _dec_fit(dtype: DType) -> Callable[[decimal.Decimal], decimal.Decimal]:
    """Quantize to the type's scale (half away from zero) and check its precision."""
    exp = _dec_exp(dtype.scale)
    bound = decimal.Decimal(10) ** (dtype.precision - dtype.scale)

    def fit(d: decimal.Decimal) -> decimal.Decimal:
        q = d.quantize(exp, rounding=decimal.ROUND_HALF_UP, context=_CTX)
        if -bound < q < bound:
            return q
        raise _fail(f"decimal overflow: {d} does not fit in {dtype}")

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


def _strict1(f: Fn) -> Fn:
    return lambda a: None if a is None else f(a)


def _strict2(f: Fn) -> Fn:
    return lambda a, b: None if a is None or b is None else f(a, b)


def _domain_converter(src: DType, domain: DType) -> Fn | None:
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
    if domain == T.Timestamp and src == T.Date:
        return lambda d: _dt.datetime.combine(d, _MIDNIGHT)
    return None


def _wrap_conv(f: Fn, ca: Fn | None, cb: Fn | None) -> Fn:
    if ca is None and cb is None:
        return f
    ca = ca or (lambda v: v)
    cb = cb or (lambda v: v)
    return lambda a, b: f(ca(a), cb(b))


# ---------------------------------------------------------------- arithmetic

def _arith(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ta, tb = ts
    sym = F.BINARY_OPERATORS[fn]
    if rt == T.Null or T.Null in (ta, tb):
        return lambda a, b: None
    if ta.is_temporal or tb.is_temporal:
        return _strict2(_date_arith(fn, ta, tb))
    if fn == "pow":
        f = _wrap_conv(_ieee_pow, _domain_converter(ta, T.Float64), _domain_converter(tb, T.Float64))
        return _strict2(_round32(f) if rt == T.Float32 else f)
    if fn == "truediv":
        if (ta.is_decimal or tb.is_decimal) and not (ta.is_float or tb.is_float):
            def exact_div(a, b):
                return None if b == 0 else float(_CTX.divide(decimal.Decimal(a), decimal.Decimal(b)))
            return _strict2(exact_div)
        f = _wrap_conv(_float_div, _domain_converter(ta, rt), _domain_converter(tb, rt))
        return _strict2(_round32(f) if rt == T.Float32 else f)
    if rt.is_integer:
        return _strict2(_int_arith(fn, sym, rt))
    if rt.is_float:
        f = _wrap_conv(_FLOAT_OPS[fn], _domain_converter(ta, rt), _domain_converter(tb, rt))
        return _strict2(_round32(f) if rt == T.Float32 else f)
    if rt.is_decimal:
        return _strict2(_decimal_arith(fn, sym, ta, tb, rt))
    raise PlanError(f"no arithmetic {fn} for {ta} {sym} {tb} -> {rt}")


def _round32(f: Fn) -> Fn:
    def g(a, b):
        r = f(a, b)
        return None if r is None else to_f32(r)
    return g


def _int_arith(fn: str, sym: str, rt: DType) -> Fn:
    lo, hi = T.int_range(rt)

    def over(a, b, r):
        return _fail(f"integer overflow: {a} {sym} {b} = {r} does not fit in {rt} ({lo}..{hi})")

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
    fit = _dec_fit(rt)
    ca = _domain_converter(ta, rt) or (lambda v: v)
    cb = _domain_converter(tb, rt) or (lambda v: v)

    def checked(op):
        def f(a, b):
            a, b = ca(a), cb(b)
            r = op(a, b)
            if r is None:
                return None
            try:
                return fit(r)
            except ExecutionError:
                raise _fail(f"decimal overflow: {a} {sym} {b} = {r} does not fit in {rt}") from None
        return f

    if fn == "add":
        return checked(_CTX.add)
    if fn == "sub":
        return checked(_CTX.subtract)
    if fn == "mul":
        return checked(_CTX.multiply)
    if fn == "floordiv":
        return checked(lambda a, b: None if b == 0 else _decimal_floordiv(a, b))
    if fn == "mod":
        return checked(lambda a, b: None if b == 0 else _decimal_mod(a, b))
    raise PlanError(f"no decimal arithmetic {fn}")


def _decimal_floordiv(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    q = _CTX.divide_int(a, b)
    r = _CTX.remainder(a, b)
    if r != 0 and (r < 0) != (b < 0):
        q = _CTX.subtract(q, 1)
    return q


def _decimal_mod(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    r = _CTX.remainder(a, b)
    if r != 0 and (r < 0) != (b < 0):
        r = _CTX.add(r, b)
    return r


def _date_arith(fn: str, ta: DType, tb: DType) -> Fn:
    def guard(f):
        def g(a, b):
            try:
                return f(a, b)
            except OverflowError:
                raise _fail(f"date out of range: {a} {F.BINARY_OPERATORS[fn]} {b}") from None
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


# ---------------------------------------------------------------- comparison and logic

def _float_eq(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)


def _float_lt(a: float, b: float) -> bool:
    if a == a and b == b:
        return a < b
    return a == a  # b is NaN: every number is below it; NaN is not below NaN


def _float_le(a: float, b: float) -> bool:
    if a == a and b == b:
        return a <= b
    return b != b


_FLOAT_CMP: dict[str, Fn] = {
    "eq": _float_eq,
    "ne": lambda a, b: not _float_eq(a, b),
    "lt": _float_lt,
    "le": _float_le,
    "gt": lambda a, b: _float_lt(b, a),
    "ge": lambda a, b: _float_le(b, a),
}
_PLAIN_CMP: dict[str, Fn] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def comparison_domain(ta: DType, tb: DType) -> DType:
    """The type two operands are compared in."""
    if T.Null in (ta, tb):
        return T.Null
    return promote(ta, tb, op="compare")


def _compare(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ta, tb = ts
    domain = comparison_domain(ta, tb)
    if domain == T.Null:
        return lambda a, b: None
    table = _FLOAT_CMP if domain.is_float else _PLAIN_CMP
    return _strict2(_wrap_conv(table[fn], _domain_converter(ta, domain), _domain_converter(tb, domain)))


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


# ---------------------------------------------------------------- math

def _float_fn(f: Fn, rt: DType, src: DType) -> Fn:
    conv = _domain_converter(src, T.Float64) or (lambda v: v)
    if rt == T.Float32:
        return _strict1(lambda a: to_f32(f(conv(a))))
    return _strict1(lambda a: f(conv(a)))


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
            return _strict1(_CTX.minus if fn == "neg" else _CTX.abs)
        op = (lambda a: -a) if fn == "neg" else abs
        if t.is_integer:
            lo, hi = T.int_range(rt)

            def f(a):
                r = op(a)
                if lo <= r <= hi:
                    return r
                raise _fail(f"integer overflow: {fn}({a}) = {r} does not fit in {rt} ({lo}..{hi})")
            return _strict1(f)
        return _strict1(op)
    if fn == "sqrt":
        return _float_fn(_guarded(math.sqrt, domain_error=lambda x: math.nan), rt, t)
    if fn == "exp":
        return _float_fn(_guarded(math.exp, domain_error=lambda x: math.nan), rt, t)
    if fn == "log":
        return _float_fn(_log, rt, t)
    if fn in ("sin", "cos", "tanh"):
        return _float_fn(_guarded(getattr(math, fn), domain_error=lambda x: math.nan), rt, t)
    if fn in ("floor", "ceil"):
        if t.is_integer:
            return _strict1(lambda a: a)
        if t.is_decimal:
            fit = _dec_fit(rt)
            mode = decimal.ROUND_FLOOR if fn == "floor" else decimal.ROUND_CEILING
            return _strict1(lambda a: fit(a.to_integral_value(rounding=mode, context=_CTX)))
        g = math.floor if fn == "floor" else math.ceil
        return _strict1(lambda a: float(g(a)) if math.isfinite(a) else a)
    if fn == "round":
        (decimals,) = options
        if t.is_integer:
            if decimals >= 0:
                return _strict1(lambda a: a)
            step = 10 ** -decimals
            lo, hi = T.int_range(rt)

            def round_int(a):
                q, r = divmod(abs(a), step)
                r = (q + (1 if 2 * r >= step else 0)) * step * (1 if a >= 0 else -1)
                if lo <= r <= hi:
                    return r
                raise _fail(f"integer overflow: round({a}, {decimals}) = {r} does not fit in {rt}")
            return _strict1(round_int)
        if t.is_decimal:
            fit = _dec_fit(rt)
            exp = _dec_exp(decimals)
            return _strict1(lambda a: fit(a.quantize(exp, rounding=decimal.ROUND_HALF_UP, context=_CTX)))
        f = _round_float(decimals)
        return _strict1((lambda a: to_f32(f(a))) if rt == T.Float32 else f)
    raise PlanError(f"unknown math function {fn!r}")


# ---------------------------------------------------------------- nulls and membership

def _null_fns(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if fn == "is_null":
        return lambda a: a is None
    if fn == "is_not_null":
        return lambda a: a is not None
    ca, cb = caster(ts[0], rt), caster(ts[1], rt)
    return lambda a, b: ca(a) if a is not None else cb(b)


def _is_in(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    (t,) = ts
    values = [v for v in options[0] if v is not None]
    has_null = len(values) < len(options[0])
    # Each value is a weak literal meeting x: Float32 x with 0.1 compares in Float32, as x == 0.1 does.
    types = [adapt(Literal(v, literal_dtype(v), weak=True), literal_dtype(v), t) for v in values]
    domain = t
    for vt in types:
        domain = promote(domain, vt, op="compare")
    conv = caster(t, domain)
    key = hash_key(domain) or (lambda v: v)
    members = {key(cast(literal_value(v, vt), vt, domain)) for v, vt in zip(values, types)}
    absent = None if has_null else False

    def f(a):
        if a is None:
            return None
        return True if key(conv(a)) in members else absent
    return f


def _is_between(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ge = _compare("ge", (), (ts[0], ts[1]), T.Boolean)
    le = _compare("le", (), (ts[0], ts[2]), T.Boolean)
    return lambda x, lo, hi: _and(ge(x, lo), le(x, hi))


# ---------------------------------------------------------------- strings and dates

def like_regex(pattern: str) -> re.Pattern:
    """SQL LIKE (ir.grammar): % is any run of code points, _ exactly one; no escape; case-sensitive. Use fullmatch."""
    return re.compile(G.like_as_regex(pattern))


def _slice(offset: int, length: int | None) -> Fn:
    def f(s: str) -> str:
        start = offset if offset >= 0 else len(s) + offset
        end = len(s) if length is None else start + length
        return s[max(start, 0):max(end, 0)]
    return f


def _strings(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if ts[0] == T.Null:
        return lambda a: None
    if fn == "str_contains":
        (s,) = options
        return _strict1(lambda a: s in a)
    if fn == "str_starts_with":
        (s,) = options
        return _strict1(lambda a: a.startswith(s))
    if fn == "str_ends_with":
        (s,) = options
        return _strict1(lambda a: a.endswith(s))
    if fn == "str_like":
        match = like_regex(options[0]).fullmatch
        return _strict1(lambda a: match(a) is not None)
    if fn == "str_to_lower":
        return _strict1(str.lower)
    if fn == "str_to_upper":
        return _strict1(str.upper)
    if fn == "str_len":
        return _strict1(len)
    if fn == "str_slice":
        return _strict1(_slice(*options))
    raise PlanError(f"unknown string function {fn!r}")


def _temporal(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    part = fn[len("dt_"):]
    return _strict1(lambda a: getattr(a, part))


_BUILDERS: dict[str, Callable[[str, tuple, Sequence[DType], DType], Fn]] = {}
_BUILDERS.update({fn: _arith for fn in F.ARITHMETIC})
_BUILDERS.update({fn: _compare for fn in F.COMPARISON})
_BUILDERS.update({"and": lambda *_: _and, "or": lambda *_: _or, "not": lambda *_: _not})
_BUILDERS.update({fn: _math for fn in F.MATH})
_BUILDERS.update({fn: _null_fns for fn in F.NULLS})
_BUILDERS.update({"is_in": _is_in, "is_between": _is_between})
_BUILDERS.update({fn: _strings for fn in F.STRINGS})
_BUILDERS.update({fn: _temporal for fn in F.TEMPORAL})


def kernel(fn: str, options: tuple, arg_dtypes: Sequence[DType], result_dtype: DType) -> Fn:
    """A function of the argument values (None for null) computing `fn` as docs/semantics.md says."""
    builder = _BUILDERS.get(fn)
    if builder is None:
        raise PlanError(f"unknown function {fn!r}")
    return builder(fn, tuple(options), tuple(arg_dtypes), result_dtype)


def call(fn: str, args: Sequence[Any], options: tuple, arg_dtypes: Sequence[DType], result_dtype: DType) -> Any:
    """`fn` applied to one set of argument values (literal values are taken as `literal_value` reads them)."""
    values = [literal_value(v, t) for v, t in zip(args, arg_dtypes)]
    return kernel(fn, options, arg_dtypes, result_dtype)(*values)


def literal_value(value: Any, dtype: DType) -> Any:
    """The value a literal of `dtype` holds: a number made exactly a `dtype` value (Float32 rounded, ints as Decimal)."""
    if value is None or isinstance(value, bool):
        return value
    if dtype.is_float and isinstance(value, (int, float, decimal.Decimal)):
        return to_f32(float(value)) if dtype == T.Float32 else float(value)
    if dtype.is_decimal and isinstance(value, (int, float)):
        return cast(value, T.Float64 if isinstance(value, float) else T.Int64, dtype)
    if dtype == T.Timestamp and type(value) is _dt.date:
        return _dt.datetime.combine(value, _MIDNIGHT)
    return value


# ---------------------------------------------------------------- casts

_INT_TEXT = re.compile(G.INTEGER)
_NUMBER_TEXT = re.compile(G.NUMBER)
_DATE_TEXT = re.compile(G.DATE)
_TS_TEXT = re.compile(G.TIMESTAMP)


def float_text(x: float, dtype: DType = T.Float64) -> str:
    """Canonical text of a float: Python repr (shortest round-trip); for Float32 the shortest that round-trips float32."""
    if dtype == T.Float32 and math.isfinite(x):
        for digits in range(1, 10):
            text = f"{x:.{digits}g}"
            if to_f32(float(text)) == x:
                return repr(float(text))
    return repr(x)


def _bad_text(s: str, dst: DType) -> ExecutionError:
    return _fail(f"cannot cast string {s!r} to {dst}")


def _parse_int(dst: DType) -> Fn:
    lo, hi = T.int_range(dst)

    def f(s: str) -> int:
        t = s.strip(G.SPACE)
        if not _INT_TEXT.fullmatch(t):
            raise _bad_text(s, dst)
        v = int(t)
        if lo <= v <= hi:
            return v
        raise _fail(f"cannot cast string {s!r} to {dst}: out of range ({lo}..{hi})")
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
    fit = _dec_fit(dst)

    def f(s: str) -> decimal.Decimal:
        t = s.strip(G.SPACE)
        if not _NUMBER_TEXT.fullmatch(t):
            raise _bad_text(s, dst)
        try:
            return fit(decimal.Decimal(t))
        except ExecutionError:
            raise _fail(f"cannot cast string {s!r} to {dst}: out of range") from None
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
                return _dt.datetime.combine(_dt.date.fromisoformat(t), _MIDNIGHT)
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
            raise _fail(f"cannot cast {x} to {dst}")
        v = math.trunc(x)
        if lo <= v <= hi:
            return v
        raise _fail(f"cannot cast {x!r} to {dst}: out of range ({lo}..{hi})")
    return f


def _to_int(src: DType, dst: DType) -> Fn:
    lo, hi = T.int_range(dst)

    def check(v: int, shown: Any) -> int:
        if lo <= v <= hi:
            return v
        raise _fail(f"cannot cast {shown} ({src}) to {dst}: out of range ({lo}..{hi})")

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
    fit = _dec_fit(dst)

    def checked(v: decimal.Decimal, shown: Any) -> decimal.Decimal:
        try:
            return fit(v)
        except ExecutionError:
            raise _fail(f"cannot cast {shown} ({src}) to {dst}: out of range") from None

    if src.is_integer:
        return lambda v: checked(decimal.Decimal(v), v)
    if src.is_decimal:
        return lambda v: checked(v, v)
    if src.is_float:
        def from_float(x: float) -> decimal.Decimal:
            if not math.isfinite(x):
                raise _fail(f"cannot cast {x} to {dst}")
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
            f = lambda d: _dt.datetime.combine(d, _MIDNIGHT)  # noqa: E731
        elif src == T.String:
            f = _parse_timestamp
        else:
            raise PlanError(f"cannot cast {src} to {dst}")
    elif dst == T.Null:
        return lambda v: None
    else:
        raise PlanError(f"cannot cast {src} to {dst}")
    return _strict1(f)


def cast(value: Any, src: DType, dst: DType) -> Any:
    """One value cast from `src` to `dst`."""
    return caster(src, dst)(value)


# ---------------------------------------------------------------- UDF results

def udf_value(dtype: DType) -> Fn:
    """Check (and convert) a Python value a UDF returned for `dtype`; a wrong type raises ExecutionError."""
    def wrong(v: Any) -> ExecutionError:
        return _fail(f"returned {type(v).__name__} {v!r}, which is not a {dtype}")

    if dtype.is_integer:
        lo, hi = T.int_range(dtype)

        def f(v):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):  # numpy integers too
                raise wrong(v)
            v = int(v)
            if not lo <= v <= hi:
                raise _fail(f"returned {v}, which does not fit in {dtype} ({lo}..{hi})")
            return v
    elif dtype.is_float:
        def f(v):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, numbers.Real)):
                raise wrong(v)
            return to_f32(float(v)) if dtype == T.Float32 else float(v)
    elif dtype.is_decimal:
        fit = _dec_fit(dtype)

        def f(v):
            if isinstance(v, bool) or not isinstance(v, (numbers.Integral, decimal.Decimal)):
                raise wrong(v)
            return fit(decimal.Decimal(v if isinstance(v, decimal.Decimal) else int(v)))
    else:
        kinds = {"Boolean": bool, "String": str, "Date": _dt.date, "Timestamp": _dt.datetime}
        kind = kinds.get(dtype.name, object)

        def f(v):
            if not isinstance(v, kind) or (kind is _dt.date and isinstance(v, _dt.datetime)):
                raise wrong(v)
            return v
    return _strict1(f)


# ---------------------------------------------------------------- aggregations

def _float_sum(xs: list[float]) -> float:
    try:
        return math.fsum(xs)
    except (ValueError, OverflowError):
        return sum(xs)  # inf with -inf gives NaN; a finite overflow gives inf


def _sum(dtype: DType, rt: DType) -> Callable[[list], Any]:
    if dtype.is_integer:
        check = _int_check(rt, lambda: "sum")

        def f(xs):
            return check(sum(xs)) if xs else None
        return f
    if dtype.is_decimal:
        fit = _dec_fit(rt)

        def g(xs):
            if not xs:
                return None
            total = _decimal_total(xs)
            try:
                return fit(total)
            except ExecutionError:
                raise _fail(f"decimal overflow: sum = {total} does not fit in {rt}") from None
        return g
    return lambda xs: _float_sum(xs) if xs else None


def _decimal_total(xs: list) -> decimal.Decimal:
    with decimal.localcontext(_CTX):
        return sum(xs, decimal.Decimal(0))


def _mean(dtype: DType) -> Callable[[list], Any]:
    if dtype.is_integer:
        return lambda xs: sum(xs) / len(xs) if xs else None
    if dtype.is_decimal:
        return lambda xs: float(_CTX.divide(_decimal_total(xs), len(xs))) if xs else None
    return lambda xs: _float_sum(xs) / len(xs) if xs else None


def _var(dtype: DType, *, root: bool) -> Callable[[list], Any]:
    def f(xs):
        n = len(xs)
        if n < 2:
            return None
        if dtype.is_float:
            if any(x != x or math.isinf(x) for x in xs):
                return math.nan
            m = _float_sum(xs) / n
            v = _float_sum([(x - m) * (x - m) for x in xs]) / (n - 1)  # overflow is inf, not an error
        else:
            with decimal.localcontext(_CTX):
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


def _n_unique(dtype: DType) -> Callable[[list], int]:
    key = hash_key(dtype)
    if key is None:
        return lambda xs: len(set(xs))
    return lambda xs: len({key(x) for x in xs})


def aggregator(fn: str, arg_dtype: DType, result_dtype: DType) -> Callable[[list], Any]:
    """A function of a group's values (nulls included) computing aggregation `fn`.

    For count_rows pass the group's rows in any form; only their number counts.
    """
    if fn == "count_rows":
        return len
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
    else:
        raise PlanError(f"unknown aggregation {fn!r}")
    return lambda xs: inner([x for x in xs if x is not None])


def aggregate(fn: str, values: Sequence[Any], arg_dtype: DType, result_dtype: DType) -> Any:
    """Aggregation `fn` over `values` (None for null)."""
    return aggregator(fn, arg_dtype, result_dtype)(list(values))

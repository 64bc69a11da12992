"""What every SQL dialect shares: eidos semantics (docs/semantics.md) spelled in portable SQL.

A dialect file (duckdb.py, sqlite.py, postgresql.py) subclasses `Dialect` and overrides
only what its engine does differently; `translate.py` asks the dialect for every
scalar function, aggregation, cast and literal.

Conventions: `call(fn, args, ts, t, options)` gets the SQL of the arguments already of
the types `ts` (weak literals adapted) and returns SQL of type `t`; `error(message, witness)`
is an expression that fails at run time with `eidos: message` (the witness, a
column-dependent value, stops engines from evaluating it while planning).
"""

from __future__ import annotations

import datetime as _dt
import math

from sqlglot import exp

from eidos.errors import UnsupportedError
from eidos.ir import dtypes as T
from eidos.ir import durations, timeformat
from eidos.ir import functions as F
from eidos.ir import grammar as G
from eidos.ir.dtypes import DType
from eidos.ir.expr import Literal
from eidos.ir.typing import adapt, literal_dtype, promote
from eidos.lanes.sql.translate import (
    NULL,
    binop,
    case,
    float_literal,
    fn,
    literal_text,
    number,
    paren,
    string,
)

# float32's largest finite value rounds to infinity from here up (2**128 * (1 - 2**-25)).
F32_OVERFLOW = 3.4028235677973366e38
# exp(x) overflows a double above this and underflows to 0 at or below EXP_ZERO.
EXP_MAX = 709.782712893384
EXP_ZERO = -745.1332191019412


def _div(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    """The engine's own division of two values of one type (sqlglot adds no casts)."""
    return exp.Paren(this=exp.Div(this=paren(a), expression=paren(b), typed=True, safe=False))


def _is(a: exp.Expression) -> exp.Expression:
    return exp.Is(this=paren(a), expression=NULL)


def _not_null(a: exp.Expression) -> exp.Expression:
    return exp.Not(this=_is(a))


def _and(*cs: exp.Expression) -> exp.Expression:
    out = cs[0]
    for c in cs[1:]:
        out = exp.And(this=paren(out), expression=paren(c))
    return exp.Paren(this=out)


def _or(*cs: exp.Expression) -> exp.Expression:
    out = cs[0]
    for c in cs[1:]:
        out = exp.Or(this=paren(out), expression=paren(c))
    return exp.Paren(this=out)


class Dialect:
    """Portable SQL for eidos semantics; subclasses override what their engine does differently."""

    name = "sql"
    sqlglot = ""
    # eidos integer types whose SQL arithmetic raises exactly at the eidos range.
    native_ints: frozenset[str] = frozenset()
    types: dict[str, str] = {}
    has_nan = True
    # True where AVG of a decimal overflows past 38 digits (the mean is then summed as floats).
    inexact_decimal_mean = False
    # True where a semi/anti join is faster as an uncorrelated IN than as a correlated EXISTS.
    semi_join_in = False
    # True where each CTE that only projects, filters and joins is merged into its reader (translate._flatten).
    flat = False

    # ------------------------------------------------------------ types and literals
    def sql_type(self, t: DType) -> exp.DataType:
        if isinstance(t, T.ListType) and "List" in self.types:
            return exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[self.sql_type(t.inner)], nested=True)
        if isinstance(t, T.StructType) and "Struct" in self.types:
            fields = [exp.ColumnDef(this=exp.to_identifier(n, quoted=True), kind=self.sql_type(f)) for n, f in t.fields]
            return exp.DataType(this=exp.DataType.Type.STRUCT, expressions=fields, nested=True)
        if t.is_decimal:
            return exp.DataType.build(f"DECIMAL({t.precision}, {t.scale})", dialect=self.sqlglot)
        name = t.name if t == T.Timestamp or not t.is_timestamp else f"Timestamp({t.unit}{', tz' if t.tz else ''})"
        try:
            return exp.DataType.build(self.types[name], dialect=self.sqlglot)
        except KeyError:
            raise UnsupportedError(f"the {self.name} lane has no SQL type for {t}") from None

    def cast(self, e: exp.Expression, src: DType, dst: DType, *, force: bool = False) -> exp.Expression:
        """A value-preserving conversion (a promotion) or a retyping of NULL."""
        if src == dst and not force:
            return e
        if dst == T.Null:
            return e
        return exp.Cast(this=paren(e), to=self.sql_type(dst))

    def literal(self, value: object, t: DType) -> exp.Expression:
        if t == T.Null:
            return NULL
        if value is None:
            return exp.Cast(this=NULL, to=self.sql_type(t))
        if t == T.Boolean:
            return self.boolean(bool(value))
        if t == T.String:
            return string(value)
        if t == T.Binary:
            return self.binary(value.hex())
        if t.is_float:
            return self.float_value(float(value), t)
        if t.is_integer:
            return exp.Cast(this=number(int(value)), to=self.sql_type(t))
        if t == T.Duration:  # held as its microseconds, a 64-bit integer
            return exp.Cast(this=number(value // _dt.timedelta(microseconds=1)), to=self.sql_type(t))
        text = literal_text(value, t)
        if t.is_decimal:
            return exp.Cast(this=string(text if text is not None else str(value)), to=self.sql_type(t))
        return exp.Cast(this=string(text), to=self.sql_type(t))

    def binary(self, hex_digits: str) -> exp.Expression:
        return fn("from_hex", string(hex_digits))

    def fn_bin_size(self, args, ts, t, o):
        return self.cast(fn("octet_length", args[0]), T.Null, T.Int64, force=True)

    def boolean(self, v: bool) -> exp.Expression:
        return exp.Boolean(this=v)

    def float_value(self, v: float, t: DType = T.Float64) -> exp.Expression:
        if math.isfinite(v):
            return exp.Cast(this=number(repr(v)), to=self.sql_type(t))
        return exp.Cast(this=string(float_literal(v)), to=self.sql_type(t))

    def nan(self, t: DType, witness: exp.Expression) -> exp.Expression:
        return self.float_value(math.nan, t)

    def error(self, message: str, witness: exp.Expression, t: DType) -> exp.Expression:
        raise NotImplementedError

    def layer(self, select: exp.Select) -> exp.Select:
        """A SELECT that adds bound values as columns (translate.Exprs.layered); engines that would
        merge it into the SELECT above, spelling each value out again at every use, are fenced here."""
        return select

    def scan_column(self, e: exp.Expression, t: DType, source=None) -> exp.Expression:
        """A source column as its eidos type (engines may hold a wider or differently named one)."""
        return self.cast(e, T.Null, t, force=True)

    # ------------------------------------------------------------ checks
    def checked_int(self, e: exp.Expression, t: DType) -> exp.Expression:
        """`e` (an integer computed in t's SQL type) with overflow past t's range raising."""
        if t.name in self.native_ints:
            return e
        lo, hi = T.int_range(t)
        bad = _or(exp.LT(this=paren(e), expression=number(lo)), exp.GT(this=paren(e), expression=number(hi)))
        return case([(bad, self.error(f"integer overflow: result does not fit in {t} ({lo}..{hi})", e, t))], e)

    def finite(self, x: exp.Expression) -> exp.Expression:
        """True for finite floats (NaN is above infinity in every dialect that has it)."""
        return exp.LT(this=exp.Abs(this=x), expression=self.float_value(math.inf))

    def is_nan(self, x: exp.Expression) -> exp.Expression:
        return exp.EQ(this=paren(x), expression=self.float_value(math.nan))

    def nan_guard(self, r: exp.Expression, args: list[exp.Expression], t: DType) -> exp.Expression:
        """Engines that turn NaN into NULL: a NULL result from non-null operands was NaN."""
        return r

    # ------------------------------------------------------------ the scalar functions
    def call(self, fn: str, args: list, ts: tuple, t: DType, options: tuple) -> exp.Expression:
        method = getattr(self, "fn_" + fn, None)
        if method is None:
            raise UnsupportedError(f"the {self.name} lane has no translation for function {fn}")
        if t == T.Null or (T.Null in ts and fn not in _NULL_AWARE):
            return self.cast(NULL, T.Null, t) if t != T.Null else NULL
        return method(args, ts, t, options)

    # arithmetic
    def _arith(self, cls, args, ts, t):
        a, b = args
        if t == T.String:   # + of two strings joins them; || is null if either is, in every dialect
            return binop(exp.DPipe, self.cast(a, ts[0], t), self.cast(b, ts[1], t))
        if t.is_temporal or t == T.Duration or any(x.is_temporal for x in ts):
            return self.date_arith(cls, a, b, ts, t)
        if t.is_decimal:
            return self.cast(binop(cls, a, b), T.Null, t, force=True)
        a, b = self.cast(a, ts[0], t), self.cast(b, ts[1], t)
        if t.is_float:
            return self.float_arith(cls, a, b, t)
        return self.checked_int(binop(cls, a, b), t)

    def float_arith(self, cls, a, b, t):
        return self.nan_guard(self.ieee(cls, a, b, t), [a, b], t)

    def ieee(self, cls, a, b, t):
        """a (+ - * /) b of floats of type t (b already non-zero for /) as IEEE computes it: overflow
        gives an infinity, underflow zero. Engines whose float arithmetic raises instead override it."""
        return _div(a, b) if cls is exp.Div else binop(cls, a, b)

    def fn_add(self, args, ts, t, o):
        return self._arith(exp.Add, args, ts, t)

    def fn_sub(self, args, ts, t, o):
        return self._arith(exp.Sub, args, ts, t)

    def fn_mul(self, args, ts, t, o):
        return self._arith(exp.Mul, args, ts, t)

    def date_arith(self, cls, a, b, ts, t):
        if t == T.Duration:  # microseconds: between two timestamps, or durations added
            if ts[0].is_temporal:
                return binop(exp.Sub, self.epoch_us(a, ts[0]), self.epoch_us(b, ts[1]))
            return self.checked_int(binop(cls, a, b), T.Int64)
        if t == T.Timestamp:  # a timestamp ± a duration
            x, us = (a, b) if ts[0] != T.Duration else (b, a)
            return self.checked_timestamp(self.plus_us(x, us if cls is exp.Add else exp.Neg(this=paren(us))))
        if t == T.Int64:  # date - date: days
            return self.cast(binop(exp.Sub, a, b), T.Null, T.Int64, force=True)
        if ts[0] != T.Date:  # int + date
            a, b = b, a
        days = self.cast(b, T.Null, T.Int32, force=True)
        return self.checked_date(binop(cls, a, days))

    def checked_date(self, r):
        """A Date result outside years 1..9999 raises (semantics 12)."""
        lo, hi = self.literal(_dt.date(1, 1, 1), T.Date), self.literal(_dt.date(9999, 12, 31), T.Date)
        bad = _or(exp.LT(this=r, expression=lo), exp.GT(this=r, expression=hi))
        return case([(bad, self.error("date out of range (years 1..9999)", r, T.Date))], r)

    def nullif_zero(self, b: exp.Expression) -> exp.Expression:
        return exp.Nullif(this=b, expression=exp.Literal.number(0))

    def fn_truediv(self, args, ts, t, o):
        a, b = (self.cast(x, xt, t) for x, xt in zip(args, ts))
        return self.float_arith(exp.Div, a, self.nullif_zero(b), t)

    def int_div(self, a, b, t=None):
        """Integer division truncating toward zero (typed: sqlglot must not make it a float division)."""
        return exp.Paren(this=exp.Div(this=paren(a), expression=paren(b), typed=True, safe=False))

    def int_mod(self, a, b):
        """Remainder with the sign of the dividend."""
        return binop(exp.Mod, a, b)

    def float_mod(self, a, b):
        return fn("fmod", a, b)

    def _toward_divisor(self, r, b):
        """A truncated remainder moved to the divisor's sign."""
        wrong = _and(exp.NEQ(this=r, expression=exp.Literal.number(0)),
                     exp.NEQ(this=paren(exp.LT(this=r, expression=exp.Literal.number(0))),
                             expression=paren(exp.LT(this=b, expression=exp.Literal.number(0)))))
        return wrong

    def fn_floordiv(self, args, ts, t, o):
        a, b = args
        if t.is_float:
            a, b = self.cast(a, ts[0], t), self.cast(b, ts[1], t)
            q = self.ieee(exp.Div, a, self.nullif_zero(b), t)
            return self.nan_guard(self.cast(exp.Floor(this=q), T.Null, t, force=True), [a, self.nullif_zero(b)], t)
        if t.is_decimal:
            domain = promote(ts[0], ts[1])
            a, b = self.cast(a, ts[0], domain), self.cast(b, ts[1], domain)
            bz = self.nullif_zero(b)
            q = self.decimal_div_trunc(a, bz)
            r = self.int_mod(a, bz)
            adj = case([(self._toward_divisor(r, b), exp.Literal.number(1))], exp.Literal.number(0))
            return self.cast(binop(exp.Sub, q, adj), T.Null, t, force=True)
        a, b = self.cast(a, ts[0], t), self.cast(b, ts[1], t)
        bz = self.nullif_zero(b)
        q, r = self.int_div(a, bz, t), self.int_mod(a, bz)
        adj = case([(self._toward_divisor(r, b), self.literal(1, t))], self.literal(0, t))
        return self.checked_int(binop(exp.Sub, self.checked_int(q, t), adj), t)

    def decimal_div_trunc(self, a, b):
        raise UnsupportedError(f"the {self.name} lane cannot floor-divide decimals exactly")

    def fn_mod(self, args, ts, t, o):
        a, b = args
        if t.is_float:
            a, b = self.cast(a, ts[0], t), self.cast(b, ts[1], t)
            bz = self.nullif_zero(b)
            r = self.float_mod(a, bz)
            moved = case([(self._toward_divisor(r, b), binop(exp.Add, r, b))], r)
            bad = _or(exp.Not(this=self.finite(a)), self.is_nan(b))
            out = case([(_or(_is(a), _is(b), exp.EQ(this=b, expression=exp.Literal.number(0))),
                         self.cast(NULL, T.Null, t)),
                        (bad, self.nan(t, a))], moved)
            return self.cast(out, T.Null, t, force=True)
        domain = t if t.is_integer else promote(ts[0], ts[1])
        a, b = self.cast(a, ts[0], domain), self.cast(b, ts[1], domain)
        r = self.int_mod(a, self.nullif_zero(b))
        out = case([(self._toward_divisor(r, b), binop(exp.Add, r, b))], r)
        return self.cast(out, T.Null, t, force=not t.is_integer)

    def fn_pow(self, args, ts, t, o):
        a, b = (self.cast(x, xt, T.Float64) for x, xt in zip(args, ts))
        return self.to_float32(fn("power", a, b), t)

    def to_float32(self, e, t):
        """A double result as `t`; for Float32, values past its range become infinities as in IEEE."""
        if t != T.Float32:
            return e
        inf = self.float_value(math.inf, T.Float32)
        ninf = self.float_value(-math.inf, T.Float32)
        big = _and(exp.GTE(this=e, expression=number(repr(F32_OVERFLOW))),
                   exp.LTE(this=e, expression=self.float_value(math.inf)))  # not NaN (above inf)
        return case([(big, inf),
                     (exp.LTE(this=e, expression=number(repr(-F32_OVERFLOW))), ninf)],
                    exp.Cast(this=paren(e), to=self.sql_type(T.Float32)))

    # comparison and logic
    def compare_domain(self, ts):
        return promote(ts[0], ts[1], op="compare")

    def collate(self, e: exp.Expression, t: DType) -> exp.Expression:
        """Strings compare by code point: dialects whose default collation differs override this."""
        return e

    def _cmp(self, cls, args, ts, t):
        d = self.compare_domain(ts)
        a, b = self.cast(args[0], ts[0], d), self.cast(args[1], ts[1], d)
        return exp.Paren(this=cls(this=self.collate(paren(a), d), expression=self.collate(paren(b), d)))

    def fn_eq(self, args, ts, t, o):
        return self._cmp(exp.EQ, args, ts, t)

    def fn_ne(self, args, ts, t, o):
        return self._cmp(exp.NEQ, args, ts, t)

    def fn_lt(self, args, ts, t, o):
        return self._cmp(exp.LT, args, ts, t)

    def fn_le(self, args, ts, t, o):
        return self._cmp(exp.LTE, args, ts, t)

    def fn_gt(self, args, ts, t, o):
        return self._cmp(exp.GT, args, ts, t)

    def fn_ge(self, args, ts, t, o):
        return self._cmp(exp.GTE, args, ts, t)

    def equal(self, a, b, t):
        return exp.EQ(this=paren(a), expression=paren(b))

    def sort_key(self, e, t):
        return self.collate(paren(e), t)

    def fn_and(self, args, ts, t, o):
        return _and(*args)

    def fn_or(self, args, ts, t, o):
        return _or(*args)

    def fn_not(self, args, ts, t, o):
        return exp.Paren(this=exp.Not(this=paren(args[0])))

    # math
    def fn_neg(self, args, ts, t, o):
        r = exp.Paren(this=exp.Neg(this=paren(args[0])))
        return self.checked_int(r, t) if t.is_integer else r

    def fn_abs(self, args, ts, t, o):
        r = exp.Abs(this=args[0])
        return self.checked_int(r, t) if t.is_integer else r

    def _double(self, args, ts):
        return self.cast(args[0], ts[0], T.Float64)

    def fn_sqrt(self, args, ts, t, o):
        x = self._double(args, ts)
        r = case([(exp.LT(this=x, expression=exp.Literal.number(0)), self.nan(T.Float64, x))], exp.Sqrt(this=x))
        return self.to_float32(r, t)

    def fn_exp(self, args, ts, t, o):
        x = self._double(args, ts)
        # NaN first: these engines order NaN above every number, so it would pass the overflow test.
        r = case([(self.is_nan(x), x),
                  (exp.GT(this=x, expression=number(repr(EXP_MAX))), self.float_value(math.inf)),
                  (exp.LTE(this=x, expression=number(repr(EXP_ZERO))), self.float_value(0.0))],
                 exp.Exp(this=x))
        return self.to_float32(r, t)

    def fn_log(self, args, ts, t, o, log="log"):
        x = self._double(args, ts)
        r = case([(exp.EQ(this=x, expression=exp.Literal.number(0)), self.float_value(-math.inf)),
                  (exp.LT(this=x, expression=exp.Literal.number(0)), self.nan(T.Float64, x))],
                 exp.Ln(this=x) if log == "log" else fn("log10", x))
        return self.to_float32(r, t)

    def fn_log10(self, args, ts, t, o):
        return self.fn_log(args, ts, t, o, log="log10")

    def _trig(self, name, args, ts, t):
        x = self._double(args, ts)
        r = fn(name, x)
        if name != "tanh":
            r = case([(exp.Not(this=self.finite(x)), self.nan(T.Float64, x))], r)
        return self.to_float32(self.nan_guard(r, [x], T.Float64), t)

    def fn_sin(self, args, ts, t, o):
        return self._trig("sin", args, ts, t)

    def fn_cos(self, args, ts, t, o):
        return self._trig("cos", args, ts, t)

    def fn_tanh(self, args, ts, t, o):
        return self._trig("tanh", args, ts, t)

    def trunc(self, x):
        return fn("trunc", x)

    def sign(self, x):
        return fn("sign", x)

    def _half_away(self, y):
        """Round a double to the nearest integer, ties away from zero (C round())."""
        tr = self.trunc(y)
        frac = exp.Abs(this=binop(exp.Sub, y, tr))
        return binop(exp.Add, tr, case([(exp.GTE(this=frac, expression=number("0.5")), self.sign(y))],
                                        self.float_value(0.0)))

    def fn_round(self, args, ts, t, o):
        (d,) = o
        x, src = args[0], ts[0]
        if src.is_integer:
            if d >= 0:
                return x
            step = self.literal(10 ** -d, t)
            ax = exp.Abs(this=x)
            q, r = self.int_div(ax, step, t), self.int_mod(ax, step)
            up = case([(exp.GTE(this=binop(exp.Mul, self.literal(2, t), r), expression=step), self.literal(1, t))],
                      self.literal(0, t))
            mag = binop(exp.Mul, binop(exp.Add, q, up), step)
            return self.checked_int(case([(exp.LT(this=x, expression=exp.Literal.number(0)),
                                           exp.Neg(this=mag))], mag), t)
        if src.is_decimal:
            return self.cast(exp.Round(this=x, decimals=exp.Literal.number(d)), T.Null, t, force=True)
        x = self.cast(x, src, T.Float64)
        if d >= 0:
            p = self.float_value(10.0 ** d)
            y = binop(exp.Mul, x, p)
            r = case([(self.finite(y), _div(self._half_away(y), p))], x)
        else:
            p = self.float_value(10.0 ** -d)
            r = case([(self.finite(x), binop(exp.Mul, self._half_away(_div(x, p)), p))], x)
        return self.to_float32(r, t)

    def _floor_ceil(self, cls, args, ts, t):
        x, src = args[0], ts[0]
        if src.is_integer:
            return x
        return self.cast(cls(this=x), T.Null, t, force=True)

    def fn_floor(self, args, ts, t, o):
        return self._floor_ceil(exp.Floor, args, ts, t)

    def fn_ceil(self, args, ts, t, o):
        return self._floor_ceil(exp.Ceil, args, ts, t)

    # nulls and membership
    def fn_is_null(self, args, ts, t, o):
        return exp.Paren(this=_is(args[0]))

    def fn_is_not_null(self, args, ts, t, o):
        return exp.Paren(this=_not_null(args[0]))

    def fn_fill_null(self, args, ts, t, o):
        a, b = (self.cast(x, xt, t) for x, xt in zip(args, ts))
        return exp.Coalesce(this=a, expressions=[b])

    def fn_is_in(self, args, ts, t, o):
        (values,) = o
        domain = ts[0]
        for v in values:
            if v is not None:  # each value meets x as a weak literal would (semantics 9)
                vt = literal_dtype(v)
                weak = isinstance(v, (int, float)) and not isinstance(v, bool)
                domain = promote(domain, adapt(Literal(v, vt, weak=weak), vt, ts[0]), op="compare")
        if not values:
            return case([(_is(args[0]), self.cast(NULL, T.Null, T.Boolean))], self.boolean(False))
        x = self.collate(paren(self.cast(args[0], ts[0], domain)), domain)
        items = [self.literal(v, domain) if v is not None else self.cast(NULL, T.Null, domain) for v in values]
        return exp.Paren(this=exp.In(this=x, expressions=items))

    def fn_is_between(self, args, ts, t, o):
        x, lo, hi = args
        ge = self._cmp(exp.GTE, [x, lo], (ts[0], ts[1]), T.Boolean)
        le = self._cmp(exp.LTE, [x, hi], (ts[0], ts[2]), T.Boolean)
        return _and(ge, le)

    # strings
    def strpos(self, a, s):
        return fn("strpos", a, s)

    def fn_str_contains(self, args, ts, t, o):
        return exp.Paren(this=exp.GT(this=self.strpos(args[0], string(o[0])), expression=exp.Literal.number(0)))

    def fn_str_contains_regex(self, args, ts, t, o):
        from eidos.ir.regex import render

        return self.search(args[0], render(o[0], self.regex))

    regex = None   # the regex engine a dialect's search reads (eidos.ir.regex.ENGINES)

    def search(self, s, pattern: str):
        """Whether the regular expression `pattern` (written for `regex`) matches somewhere in s."""
        raise UnsupportedError(f"the {self.name} lane has no regular expressions")

    # replacing: a regular expression written for the dialect's engine (eidos.ir.regex); literal text as one
    def fn_str_replace_regex(self, args, ts, t, o):
        return self._replace(args[0], *o, n=1)

    def fn_str_replace_all_regex(self, args, ts, t, o):
        return self._replace(args[0], *o, n=-1)

    def fn_str_replace(self, args, ts, t, o):
        from eidos.ir.regex import escape

        return self._replace(args[0], escape(o[0]), o[1].replace("$", "$$"), n=1)

    def fn_str_replace_n(self, args, ts, t, o):
        raise UnsupportedError(f"the {self.name} lane replaces the first match or every match, not the first {o[2]}")

    def fn_str_replace_all(self, args, ts, t, o):
        if not o[0]:   # the empty text is before each character and at the end: SQL's replace() finds it nowhere
            return self._replace(args[0], "", o[1].replace("$", "$$"), n=-1)
        return fn("replace", args[0], string(o[0]), string(o[1]))

    def _replace(self, s, pattern: str, value: str, n: int):
        from eidos.ir.regex import render, replacement, rewrite

        return self.regex_replace(s, render(pattern, self.regex, capture=True),
                                  rewrite(replacement(pattern, value), self.regex), n)

    def regex_replace(self, s, pattern: str, rewrite: str, n: int):
        """s with its first n (-1: every) matches of `pattern` replaced by `rewrite` (both written for `regex`)."""
        return fn("regexp_replace", s, string(pattern), string(rewrite), *([string("g")] if n < 0 else []))

    def fn_str_split(self, args, ts, t, o):
        return fn("string_split", args[0], string(o[0]))   # DuckDB's: the empty text splits into code points

    def _strip(self, args, o, position):
        chars = F.WHITESPACE if o[0] is None else o[0]
        return exp.Trim(this=args[0], expression=string(chars), position=position)

    def fn_str_strip_chars(self, args, ts, t, o):
        return self._strip(args, o, "BOTH")

    def fn_str_strip_chars_start(self, args, ts, t, o):
        return self._strip(args, o, "LEADING")

    def fn_str_strip_chars_end(self, args, ts, t, o):
        return self._strip(args, o, "TRAILING")

    def length(self, a):
        return fn("length", a)

    def substr(self, a, start, length=None):
        return fn("substr", a, start, *([length] if length is not None else []))

    def _when_not_null(self, a, value):
        return case([(_is(a), self.cast(NULL, T.Null, T.Boolean))], value)

    def fn_str_starts_with(self, args, ts, t, o):
        a, s = args[0], o[0]
        if not s:
            return self._when_not_null(a, self.boolean(True))
        return exp.Paren(this=exp.EQ(this=self.substr(a, exp.Literal.number(1), exp.Literal.number(len(s))),
                                     expression=string(s)))

    def fn_str_ends_with(self, args, ts, t, o):
        a, s = args[0], o[0]
        if not s:
            return self._when_not_null(a, self.boolean(True))
        start = self.greatest(binop(exp.Sub, self.length(a), exp.Literal.number(len(s) - 1)), exp.Literal.number(1))
        tail = self.substr(a, start)
        return exp.Paren(this=exp.EQ(this=tail, expression=string(s)))

    def greatest(self, *xs):
        return fn("greatest", *xs)

    def fn_str_like(self, args, ts, t, o):
        return exp.Paren(this=exp.Like(this=paren(args[0]), expression=string(o[0])))

    def fn_str_to_lower(self, args, ts, t, o):
        return fn("lower", args[0])

    def fn_str_to_upper(self, args, ts, t, o):
        return fn("upper", args[0])

    def fn_str_len(self, args, ts, t, o):
        return self.cast(self.length(args[0]), T.Null, T.Int64, force=True)

    def fn_str_slice(self, args, ts, t, o):
        a = args[0]
        offset, length = o
        if offset >= 0:
            start = exp.Literal.number(offset + 1)
            return self.substr(a, start, None if length is None else exp.Literal.number(length))
        n = self.length(a)
        start0 = binop(exp.Add, n, number(offset))
        end0 = n if length is None else binop(exp.Add, start0, exp.Literal.number(length))
        zero = exp.Literal.number(0)
        s, e = self.greatest(start0, zero), self.greatest(end0, zero)
        return self.substr(a, binop(exp.Add, s, exp.Literal.number(1)), binop(exp.Sub, e, s))

    # dates
    def extract(self, part, a):
        return exp.Extract(this=exp.var(part), expression=a)

    def wall(self, x, t):
        """A zoned timestamp's wall-clock time in its zone (a naive timestamp); others as they are."""
        return exp.AtTimeZone(this=paren(x), zone=string(t.tz)) if t.is_timestamp and t.tz else x

    def _part(self, part, args, ts):
        return self.cast(self.extract(part, self.wall(args[0], ts[0])), T.Null, T.Int32, force=True)

    def fn_dt_year(self, args, ts, t, o):
        return self._part("YEAR", args, ts)

    def fn_dt_month(self, args, ts, t, o):
        return self._part("MONTH", args, ts)

    def fn_dt_day(self, args, ts, t, o):
        return self._part("DAY", args, ts)

    def fn_dt_weekday(self, args, ts, t, o):
        return self._part("ISODOW", args, ts)

    def fn_dt_ordinal_day(self, args, ts, t, o):
        return self._part("DOY", args, ts)

    def fn_dt_hour(self, args, ts, t, o):
        return self._part("HOUR", args, ts)

    def fn_dt_minute(self, args, ts, t, o):
        return self._part("MINUTE", args, ts)

    def fn_dt_second(self, args, ts, t, o):  # whole seconds (PostgreSQL's part holds the fraction)
        second = self.extract("SECOND", self.wall(args[0], ts[0]))
        return self.cast(exp.Floor(this=second), T.Null, T.Int32, force=True)

    def fn_dt_time(self, args, ts, t, o):
        return self.cast(self.wall(args[0], ts[0]), T.Null, T.Time, force=True)

    def fn_struct_field(self, args, ts, t, o):
        return fn("struct_extract", args[0], string(o[0]))

    def fn_struct(self, args, ts, t, o):
        return self.cast(exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(n, quoted=True), expression=a)
                                                 for n, a in zip(o[0], args)]), T.Null, t, force=True)

    def fn_dt_convert_time_zone(self, args, ts, t, o):
        return args[0]   # the same instant: only its type (the zone it is shown in) changes

    # text to and from dates in a format of eidos's codes (ir/timeformat.py)
    def strftime(self, x, parts):
        raise UnsupportedError(f"the {self.name} lane has no dt.strftime")

    def strptime(self, s, parts, t):
        """The engine's reading of text that matches the format (null where it names no real date)."""
        raise UnsupportedError(f"the {self.name} lane has no str.to_date / str.to_datetime")

    def fn_dt_strftime(self, args, ts, t, o):
        return self.strftime(args[0], timeformat.parse_format(o[0]))

    def _read(self, args, t, o):
        (fmt, strict), parts = o, timeformat.parse_format(o[0], parsing=True)
        s, read = args[0], self.strptime(args[0], parts, t)
        ok = _and(self.matches(s, timeformat.pattern(parts)), _not_null(read))
        bad = self.error(f"cannot parse text as a {t} in format {fmt!r}", s, t) if strict else self.cast(NULL, T.Null, t)
        return case([(_is(s), self.cast(NULL, T.Null, t)), (ok, read)], bad)

    def fn_str_to_date(self, args, ts, t, o):
        return self._read(args, t, o)

    def fn_str_to_datetime(self, args, ts, t, o):
        return self._read(args, t, o)

    def epoch_us(self, x, t):
        """Microseconds from 1970-01-01 00:00 to a date or timestamp, as a 64-bit integer."""
        raise UnsupportedError(f"the {self.name} lane has no dt.truncate")

    def plus_us(self, x, us):
        """A timestamp `us` (a 64-bit integer) microseconds later."""
        raise UnsupportedError(f"the {self.name} lane has no durations")

    def checked_timestamp(self, r):
        """A Timestamp result outside years 1..9999 raises (semantics 12)."""
        lo = self.literal(_dt.datetime(1, 1, 1), T.Timestamp)
        hi = self.literal(_dt.datetime(9999, 12, 31, 23, 59, 59, 999999), T.Timestamp)
        bad = _or(exp.LT(this=r, expression=lo), exp.GT(this=r, expression=hi))
        return case([(bad, self.error("date out of range (years 1..9999)", r, T.Timestamp))], r)

    def fn_dt_total(self, args, ts, t, o, unit: int):
        return self.int_div(args[0], self.literal(unit, T.Int64), T.Int64)  # toward zero

    def fn_dt_total_days(self, args, ts, t, o):
        return self.fn_dt_total(args, ts, t, o, durations.US_PER_DAY)

    def fn_dt_total_hours(self, args, ts, t, o):
        return self.fn_dt_total(args, ts, t, o, 3_600_000_000)

    def fn_dt_total_minutes(self, args, ts, t, o):
        return self.fn_dt_total(args, ts, t, o, 60_000_000)

    def fn_dt_total_seconds(self, args, ts, t, o):
        return self.fn_dt_total(args, ts, t, o, 1_000_000)

    def fn_dt_total_milliseconds(self, args, ts, t, o):
        return self.fn_dt_total(args, ts, t, o, 1000)

    def fn_dt_total_microseconds(self, args, ts, t, o):
        return args[0]

    def make_date(self, year, month):
        """The first day of a month (integers)."""
        year, month = (self.cast(v, T.Null, T.Int32, force=True) for v in (year, month))
        return fn("make_date", year, month, exp.Literal.number(1))

    def fn_dt_truncate(self, args, ts, t, o):
        # semantics 12 (ir/durations.py): buckets counted in integers, as Polars counts them.
        x, every = args[0], durations.parse_duration(o[0])
        big = T.Int64

        def floor_mod(a, n):
            n = self.literal(n, big)
            return self.int_mod(binop(exp.Add, self.int_mod(a, n), n), n)

        if every.months:
            total = binop(exp.Sub, binop(exp.Add, binop(exp.Mul, self.cast(self.extract("YEAR", x), T.Null, big, force=True),
                                                         self.literal(12, big)),
                                         self.cast(self.extract("MONTH", x), T.Null, big, force=True)), self.literal(1, big))
            r = binop(exp.Sub, total, floor_mod(binop(exp.Sub, total, self.literal(1970 * 12, big)), every.months))
            twelve = self.literal(12, big)
            day = self.checked_date(self.make_date(self.int_div(r, twelve, big),
                                                   binop(exp.Add, self.int_mod(r, twelve), self.literal(1, big))))
            return day if t == T.Date else self.cast(day, T.Date, T.Timestamp)
        origin = durations.MONDAY if every.weeks else 0
        rem = floor_mod(binop(exp.Sub, self.epoch_us(x, t), self.literal(origin, big)), every.fixed())
        if t == T.Date:  # the day holding the start of the bucket
            day = self.literal(durations.US_PER_DAY, big)
            days = self.int_div(binop(exp.Sub, binop(exp.Add, rem, day), self.literal(1, big)), day, big)
            return self.date_arith(exp.Sub, x, days, (T.Date, T.Int64), T.Date)
        return self.checked_timestamp(self.plus_us(x, exp.Neg(this=paren(rem))))

    # lists (DuckDB's LIST; PostgreSQL overrides for its arrays)
    def fn_list_len(self, args, ts, t, o):
        return self.cast(fn("len", args[0]), T.Null, T.Int64, force=True)

    def fn_list_get(self, args, ts, t, o):
        (i,) = o  # list_extract counts from 1, and from -1 at the end; null out of range
        return fn("list_extract", args[0], exp.Literal.number(i + 1 if i >= 0 else i))

    def list_item(self, args, ts):
        """The list and the item of list.contains, both in their common type."""
        common = promote(ts[0].inner, ts[1])
        return self.cast(args[0], ts[0], T.List(common)), self.cast(args[1], ts[1], common)

    def fn_list_contains(self, args, ts, t, o):
        xs, x = self.list_item(args, ts)
        return case([(exp.Is(this=x, expression=NULL), self.cast(NULL, T.Null, T.Boolean))], fn("list_contains", xs, x))

    # ------------------------------------------------------------ casts (the user's .cast)
    def convert(self, e: exp.Expression, src: DType, dst: DType) -> exp.Expression:
        if src == dst:
            return e
        if src == T.Null:
            return self.cast(NULL, T.Null, dst)
        if src == T.String:
            return self.parse(e, dst)
        if src == T.Boolean and dst.is_numeric:
            one, zero = (self.literal(v, dst) for v in ((1, 0) if not dst.is_float else (1.0, 0.0)))
            return case([(e, one), (exp.Not(this=paren(e)), zero)], None)
        if dst.is_integer:
            if src.is_float or src.is_decimal:
                return self.float_to_int(e, src, dst)
            return self.int_to_int(e, src, dst)
        if dst == T.Boolean:
            return exp.Paren(this=exp.NEQ(this=paren(e), expression=exp.Literal.number(0)))
        if dst.is_float:
            if src == T.Float64 and dst == T.Float32:
                return self.to_float32(e, dst)
            return self.cast(e, src, dst)
        if dst == T.String and src == T.Boolean:
            return case([(e, string("true")), (exp.Not(this=paren(e)), string("false"))], None)
        return self.cast(e, src, dst)

    # String -> T by the text rules of semantics 13, checked by a regular expression first (engines
    # parse more than eidos accepts: '1.5' as an integer, ' 1 ' with other spaces, '1e5'...).
    def matches(self, s, pattern: str):
        raise UnsupportedError(f"the {self.name} lane cannot parse text")

    def group(self, s, pattern: str):
        """The first parenthesized group of `pattern` (which matches all of s)."""
        raise UnsupportedError(f"the {self.name} lane cannot parse text")

    def parse(self, s, dst):
        whole = G.padded(G.text_pattern(dst))
        g = self.group(s, whole)
        bad = exp.Not(this=paren(self.matches(s, whole)))
        shown = f"cannot cast string to {dst}"
        if dst.is_integer:
            value = self.checked_int(self.cast(self.cast(g, T.Null, T.Decimal(38, 0), force=True), T.Null, dst,
                                               force=True), dst)
        elif dst.is_float:
            low = fn("lower", g)
            words = [(exp.In(this=low, expressions=[string(w) for w in ws]), self.float_value(v, T.Float64))
                     for v, ws in G.float_word_groups()]
            value = self.to_float32(case(words, self.cast(g, T.Null, T.Float64, force=True)), dst)
            if dst == T.Float64:
                value = case(words, self.cast(g, T.Null, T.Float64, force=True))
        elif dst == T.Boolean:
            low = fn("lower", g)
            value = case([(exp.EQ(this=low, expression=string(w)), self.boolean(v))
                          for w, v in G.BOOLEAN_WORDS.items()], None)
        else:  # Date, Decimal
            value = self.cast(g, T.Null, dst, force=True)
        return case([(bad, self.error(shown, s, dst))], value)

    def int_to_int(self, e, src, dst):
        if dst.name in self.native_ints:
            return self.cast(e, src, dst)
        return self.checked_int(self.cast(e, src, dst), dst)

    def float_to_int(self, e, src, dst):
        t = self.trunc(e)
        if dst.name in self.native_ints and self.has_nan:
            return self.cast(t, T.Null, dst, force=True)
        lo, hi = T.int_range(dst)
        bad = _or(exp.Not(this=self.finite(e)) if src.is_float else exp.false(),
                  exp.LT(this=t, expression=number(lo)), exp.GTE(this=t, expression=number(hi + 1)))
        return case([(bad, self.error(f"cannot cast to {dst}: out of range ({lo}..{hi})", e, dst))],
                    self.cast(t, T.Null, dst, force=True))

    # ------------------------------------------------------------ aggregations
    def aggregate(self, fn_: str, arg: exp.Expression, at: DType, t: DType) -> exp.Expression:
        if at == T.Null:
            return exp.Literal.number(0) if fn_ in ("count", "n_unique") else self.cast(NULL, T.Null, t)
        if fn_ == "count":
            return self.cast(exp.Count(this=arg), T.Null, T.Int64, force=True)
        if fn_ == "n_unique":
            return self.cast(exp.Count(this=exp.Distinct(expressions=[arg])), T.Null, T.Int64, force=True)
        if fn_ == "sum":
            return self.agg_sum(arg, at, t)
        if fn_ == "mean":
            if at.is_float or (at.is_decimal and self.inexact_decimal_mean):
                total = self.float_sum(self.cast(arg, at, T.Float64))
                return self.ieee(exp.Div, total, self.cast(exp.Count(this=arg), T.Null, T.Float64, force=True),
                                 T.Float64)
            return self.cast(exp.Avg(this=arg), T.Null, T.Float64, force=True)
        if fn_ in ("min", "max"):
            cls = exp.Min if fn_ == "min" else exp.Max
            return self.cast(cls(this=self.collate(paren(arg), at)), T.Null, t, force=True)
        if fn_ in ("std", "var"):
            x = self.cast(arg, at, T.Float64) if at.is_float or at.is_integer else arg
            agg = fn("stddev_samp" if fn_ == "std" else "var_samp", x)
            few = exp.LT(this=exp.Count(this=arg), expression=exp.Literal.number(2))
            return case([(few, self.cast(NULL, T.Null, T.Float64))], self.cast(agg, T.Null, T.Float64, force=True))
        raise UnsupportedError(f"the {self.name} lane has no aggregation {fn_}")

    def agg_sum(self, arg, at, t):
        if at.is_float:
            return self.float_sum(self.cast(arg, at, T.Float64))
        return self.cast(exp.Sum(this=arg), T.Null, t, force=True)

    def exact_form(self) -> Dialect | None:
        """This dialect rendering SQL that never raises where eidos does not, where its own SQL may raise
        an engine overflow that eidos has not (run instead when it does: see duckdb.py), else None."""
        return None

    def exact_sum(self, arg, at: DType, t: DType, x) -> exp.Expression | None:
        """The dialect's own SQL for sum(arg) from the IR argument (`x` translates it), or None for
        `aggregate`'s SUM of the argument's SQL."""
        return None

    def float_sum(self, x):
        """A correctly rounded float sum (semantics 14: math.fsum)."""
        return exp.Sum(this=x)

    # ------------------------------------------------------------ sources
    def scan(self, source, ctx) -> exp.Expression:
        raise UnsupportedError(f"the {self.name} lane cannot read {source.describe()}")


# Functions whose result is not simply null when an operand has the Null type.
_NULL_AWARE = frozenset({"and", "or", "is_null", "is_not_null", "fill_null", "is_in", "is_between"})

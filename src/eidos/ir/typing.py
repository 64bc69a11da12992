"""Result types of expressions: the promotion table of docs/semantics.md, in code.

`infer(expr, schema, where)` returns the dtype or raises a PlanError that
names the expression, the types it met and what would be right.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Callable
from functools import singledispatch

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.durations import check_truncate, parse_duration
from eidos.ir.expr import Agg, Alias, Call, Case, Cast, Column, Expr, Literal, Udf, Window
from eidos.ir.render import literal_text
from eidos.ir.schema import Schema
from eidos.ir.timeformat import TIME_CODES, parse_format

# Decimal digits needed to hold every value of an integer type.
_INT_DIGITS = {"Int8": 3, "Int16": 5, "Int32": 10, "Int64": 19,
               "UInt8": 3, "UInt16": 5, "UInt32": 10, "UInt64": 20}


def literal_dtype(value: object) -> DType:
    """The natural dtype of a Python value used as a literal."""
    if value is None:
        return T.Null
    if isinstance(value, bool):
        return T.Boolean
    if isinstance(value, int):
        lo, hi = T.int_range(T.Int64)
        if lo <= value <= hi:
            return T.Int64
        if 0 <= value <= T.int_range(T.UInt64)[1]:
            return T.UInt64
        raise PlanError(f"integer literal {value} does not fit in 64 bits; use a Decimal literal")
    if isinstance(value, float):
        return T.Float64
    if isinstance(value, str):
        return T.String
    if isinstance(value, _dt.timedelta):
        check_duration(value)
        return T.Duration
    if isinstance(value, bytes):
        return T.Binary
    if isinstance(value, _dt.datetime):
        return T.Timestamp if value.tzinfo is None else T.Datetime("us", zone_of(value))
    if isinstance(value, _dt.time):
        if value.tzinfo is not None:
            raise PlanError(f"time literal {value} has a time zone; eidos times of day have none")
        return T.Time
    if isinstance(value, _dt.date):
        return T.Date
    if isinstance(value, _decimal.Decimal):
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise PlanError(f"decimal literal {value} is not finite; use a float for NaN or infinity")
        scale = max(0, -exponent)
        precision = max(len(digits), scale, 1)
        if precision > T.MAX_DECIMAL_PRECISION:
            raise PlanError(f"decimal literal {value} has {precision} digits; at most 38 fit")
        return T.Decimal(precision, scale)
    raise PlanError(f"cannot use {type(value).__name__} value {value!r} as a literal; use int, float, str, bool, "
                    "None, datetime.date, datetime.datetime, datetime.timedelta or decimal.Decimal")


# A Duration is a 64-bit count of microseconds (Arrow's duration('us')).
DURATION_RANGE = T.int_range(T.Int64)


def zone_of(value: _dt.datetime) -> str:
    """The IANA name of an aware datetime's zone (a zoneinfo.ZoneInfo, or UTC)."""
    key = getattr(value.tzinfo, "key", None) or ("UTC" if value.utcoffset() == _dt.timedelta(0)
                                                 and value.tzinfo in (_dt.timezone.utc,) else None)
    if key is None:
        raise PlanError(f"timestamp literal {value} has zone {value.tzinfo!r}; eidos zones are IANA names: "
                        "use zoneinfo.ZoneInfo('Europe/Berlin') or datetime.timezone.utc")
    return T.zone(key)


def check_duration(value: _dt.timedelta) -> _dt.timedelta:
    us = value // _dt.timedelta(microseconds=1)
    lo, hi = DURATION_RANGE
    if not lo <= us <= hi:
        raise PlanError(f"duration {value} does not fit in 64 bits of microseconds")
    return value


def convert_literal(value: object, target: DType) -> object:
    """Check (and convert) a Python value for a literal of an explicit dtype."""
    if value is None:
        return None
    bad = PlanError(f"literal {literal_text(value)} cannot be a {target}")
    if target.is_integer:
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad
        lo, hi = T.int_range(target)
        if not lo <= value <= hi:
            raise PlanError(f"literal {literal_text(value)} is out of range for {target} ({lo}..{hi})")
        return value
    if target.is_float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        try:
            return float(value)
        except OverflowError:
            raise PlanError(f"literal {literal_text(value)} is out of range for {target}") from None
    if target.is_decimal:
        if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal, str)):
            raise bad
        context = _decimal.Context(prec=2 * T.MAX_DECIMAL_PRECISION, rounding=_decimal.ROUND_HALF_UP)
        try:
            exact = value if isinstance(value, (int, _decimal.Decimal)) else str(value)  # a float by its shortest text
            q = _decimal.Decimal(exact).quantize(_decimal.Decimal(1).scaleb(-target.scale), context=context)
        except _decimal.InvalidOperation:
            raise bad from None
        if len(q.as_tuple().digits) > target.precision:
            raise PlanError(f"literal {literal_text(value)} does not fit in {target}")
        return q
    if target == T.Boolean and isinstance(value, bool):
        return value
    if target == T.String and isinstance(value, str):
        return value
    if target == T.Binary and isinstance(value, bytes):
        return value
    if target == T.Date and isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value
    if target == T.Duration and isinstance(value, _dt.timedelta):
        return check_duration(value)
    if target.is_timestamp and isinstance(value, _dt.datetime):
        if (value.tzinfo is None) != (target.tz is None):
            raise PlanError(f"timestamp literal {value} cannot be a {target}: a zoned timestamp needs a value with "
                            "that zone, a naive one a value without one")
        if target.tz is not None:
            import zoneinfo
            return value.astimezone(zoneinfo.ZoneInfo(target.tz))
        return value
    if target == T.Time and isinstance(value, _dt.time) and value.tzinfo is None:
        return value
    raise bad


def int_as_decimal(t: DType) -> DType:
    return T.Decimal(_INT_DIGITS[t.name], 0)


def promote(a: DType, b: DType, *, op: str = "combine") -> DType:
    """The common type of two operands (the supertype), or PlanError."""
    if a == b:
        return a
    if a == T.Null:
        return b
    if b == T.Null:
        return a
    if a.is_integer and b.is_integer:
        return _promote_ints(a, b)
    if a.is_numeric and b.is_numeric:
        if a.is_float or b.is_float:
            if a.is_decimal or b.is_decimal:
                return T.Float64
            ints = [t for t in (a, b) if t.is_integer]
            if T.Float64 in (a, b):
                return T.Float64
            return T.Float32 if ints and ints[0].bits <= 16 else T.Float64
        da = int_as_decimal(a) if a.is_integer else a
        db = int_as_decimal(b) if b.is_integer else b
        scale = max(da.scale, db.scale)
        whole = max(da.precision - da.scale, db.precision - db.scale)
        return T.Decimal(min(T.MAX_DECIMAL_PRECISION, whole + scale), scale)
    if a.is_temporal and b.is_temporal:
        return _promote_stamps(a, b, op)
    raise PlanError(f"cannot {op} {a} with {b}")


def _promote_stamps(a: DType, b: DType, op: str) -> DType:
    """A Date meets a Timestamp as that Timestamp; two Timestamps meet in the finer unit, and only when both
    are naive or both in one zone (Polars' rule): a zoned and a naive one name different things."""
    tz = {getattr(t, "tz", None) for t in (a, b) if t.is_timestamp}
    if len(tz) > 1 or (None not in tz and T.Date in (a, b)):
        raise PlanError(f"cannot {op} {a} with {b}: a timestamp in a time zone meets only one in the same zone; "
                        "use dt.replace_time_zone() or dt.convert_time_zone() to give both one zone")
    units = [t.unit for t in (a, b) if t.is_timestamp] or ["us"]
    return T.Datetime(max(units, key=T.TIME_UNITS.index), tz.pop() if tz else None)


def _promote_ints(a: DType, b: DType) -> DType:
    if a.is_signed_integer == b.is_signed_integer:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.is_signed_integer else (b, a)
    if signed.bits > unsigned.bits:
        return signed
    if unsigned.bits < 64:
        return T.DType(f"Int{unsigned.bits * 2}")
    return T.Float64  # UInt64 with a signed type: no integer type holds both


def adapt(e: Expr, t: DType, other: DType, fn: str | None = None) -> DType:
    """A weak literal (bare Python number) takes the type of the operand it meets, if it fits.
    An untyped None takes the other operand's type, except beside a Date in `fn` "add": there it
    is a number of days (Date + Date does not exist), so `date + None` is a null Date."""
    if not (isinstance(e, Literal) and e.weak) or other == T.Null:
        return t
    v = e.value
    if v is None:
        if fn == "add" and (other == T.Date or other.is_timestamp):  # a number of days, a Duration
            return T.Int64 if other == T.Date else T.Duration
        return other
    if isinstance(v, int) and not isinstance(v, bool):
        if other.is_integer:
            lo, hi = T.int_range(other)
            return other if lo <= v <= hi else t
        if other.is_float:
            return other
        if other.is_decimal:
            return T.Decimal(max(1, len(str(abs(v)))), 0)
    if isinstance(v, float) and other.is_float:
        return other
    return t


class _Typer:
    """Walks an expression against a schema; `where` names the plan node in errors."""

    def __init__(self, schema: Schema, where: str, allow_agg: bool):
        self.schema, self.where, self.allow_agg = schema, where, allow_agg

    def fail(self, e: Expr, problem: str) -> PlanError:
        place = f" in {self.where}" if self.where else ""
        return PlanError(f"{problem}: {e}{place}")

    def operands(self, a: Expr, b: Expr, fn: str | None = None) -> tuple[DType, DType]:
        ta, tb = self(a), self(b)
        return adapt(a, ta, tb, fn), adapt(b, tb, ta, fn)

    def __call__(self, e: Expr) -> DType:
        return _infer(e, self)


@singledispatch
def _infer(e: Expr, ty: _Typer) -> DType:
    raise PlanError(f"unknown expression node {type(e).__name__}")


@_infer.register
def _(e: Column, ty: _Typer) -> DType:
    return ty.schema.dtype(e.name, where=ty.where)


@_infer.register
def _(e: Literal, ty: _Typer) -> DType:
    return e.dtype


@_infer.register
def _(e: Alias, ty: _Typer) -> DType:
    return ty(e.expr)


@_infer.register
def _(e: Cast, ty: _Typer) -> DType:
    src = ty(e.expr)
    if not can_cast(src, e.dtype):
        raise ty.fail(e, f"cannot cast {src} to {e.dtype}")
    return e.dtype


def can_cast(src: DType, dst: DType) -> bool:
    if src == dst or src == T.Null:
        return True
    if src.is_nested or dst.is_nested or T.Duration in (src, dst):
        return False
    if src.is_numeric or src == T.Boolean:
        return dst.is_numeric or dst in (T.Boolean, T.String)
    if src == T.String:
        return dst != T.Binary
    if src.is_temporal:
        # a Date and a naive Timestamp of any unit convert; zones change by dt.replace_time_zone or
        # dt.convert_time_zone (which say how), units by the comparisons that promote them
        if dst == T.String:
            return src in (T.Date, T.Timestamp)
        return T.Date in (src, dst) and dst.is_temporal and getattr(src, "tz", None) is None \
            and getattr(dst, "tz", None) is None
    return False


@_infer.register
def _(e: Case, ty: _Typer) -> DType:
    for cond, _ in e.branches:
        ct = ty(cond)
        if ct not in (T.Boolean, T.Null):
            raise ty.fail(cond, f"a when() condition must be Boolean, got {ct}")
    values = [v for _, v in e.branches] + [e.otherwise]
    types = [ty(v) for v in values]
    strong = [t for v, t in zip(values, types) if not (isinstance(v, Literal) and v.weak)]
    anchor = strong[0] if strong else types[0]
    result = T.Null
    for v, t in zip(values, types):
        result = promote(result, adapt(v, t, anchor), op="combine when/then branches of type")
    return result


@_infer.register
def _(e: Udf, ty: _Typer) -> DType:
    for t in [ty(a) for a in e.args] + [e.return_dtype]:
        if "Timestamp(ns)" in t.kinds:
            raise ty.fail(e, f"a Python function takes and gives Python values, and a nanosecond timestamp ({t}) has "
                             "none (datetime holds microseconds): cast it to ei.Timestamp first, or use map_batches")
    return e.return_dtype


@_infer.register
def _(e: Agg, ty: _Typer) -> DType:
    if not ty.allow_agg:
        raise ty.fail(e, f"aggregation {e.fn}() is allowed only inside agg(); "
                         "use flow.group_by(...).agg(...) or flow.agg(...)")
    if e.fn not in F.AGGREGATES:
        raise ty.fail(e, f"unknown aggregation {e.fn!r}; aggregations: {', '.join(F.AGGREGATES)}")
    if (e.arg is None) != (e.fn == "count_rows"):
        raise ty.fail(e, "count_rows takes no argument" if e.fn == "count_rows" else f"{e.fn}() takes one argument")
    _check_options(e, ty)
    if e.fn == "count_rows":
        return T.Int64
    inner = _Typer(ty.schema, ty.where, allow_agg=False)
    try:
        t = inner(e.arg)
    except PlanError as err:
        if "allowed only inside agg" in str(err):
            raise ty.fail(e, "aggregations cannot be nested") from None
        raise
    if t.is_nested and e.fn not in ("count", "first", "last"):
        raise ty.fail(e, f"{e.fn}() needs values that compare, got {t}")
    if e.fn in ("count", "n_unique"):
        return T.Int64
    if e.fn in ("min", "max", "first", "last"):
        return t
    if e.fn == "implode":
        if t == T.Null:
            raise ty.fail(e, "implode() needs values of a type (a list of Null has none); cast them first")
        return T.List(t)
    if e.fn in ("arg_min", "arg_max"):
        if t.is_numeric or t in (T.String, T.Boolean, T.Null, T.Time) or t.is_temporal:
            return T.Int64
        raise ty.fail(e, f"{e.fn}() needs a column that orders (numbers, strings, booleans, dates), got {t}")
    if not (t.is_numeric or t == T.Null):
        raise ty.fail(e, f"{e.fn}() needs a numeric column, got {t}")
    if e.fn == "sum":
        if t.is_decimal:
            return T.Decimal(T.MAX_DECIMAL_PRECISION, t.scale)
        if t.is_integer:
            return T.UInt64 if t.is_unsigned_integer else T.Int64
        return T.Float64
    return T.Float64  # mean, std, var, median, quantile


def compared(t: T.DType, what: str) -> T.DType:
    """`t`, where values are compared (sort, join and group keys, distinct rows); nested values are not."""
    if t.is_nested:
        raise PlanError(f"{what} is {t}: eidos defines no order or equality of nested values; "
                        "use what they hold (.list.len(), .list.get(i), .struct.field(name)) or drop the column")
    return t


@_infer.register
def _(e: Window, ty: _Typer) -> DType:
    """A window's type (docs/semantics.md section 19); its parts are plain row expressions."""
    for part in e.children():
        if E.contains_window(part) or E.contains_agg(part):
            raise ty.fail(e, "a window function's argument, partition and order cannot hold another window "
                             "function or an aggregation; compute that in an earlier with_columns")
    for key in e.partition_by + e.order_by:
        compared(ty(key), f"window key {key} in {ty.where}")
    if not (isinstance(e.descending, bool) and isinstance(e.nulls_last, bool)):
        raise ty.fail(e, "descending and nulls_last of a window are True or False")
    if e.fn in F.AGGREGATES:
        if len(e.args) > 1:
            raise ty.fail(e, f"{e.fn}() over a window takes at most one argument")
        return _infer(Agg(e.fn, e.args[0] if e.args else None, e.options), _Typer(ty.schema, ty.where, allow_agg=True))
    want = F.WINDOW_OPTIONS.get(e.fn)
    if want is None:
        raise ty.fail(e, f"unknown window function {e.fn!r}; window functions: {', '.join(F.WINDOWS)}, "
                         f"and the aggregations {', '.join(F.AGGREGATES)} over a window")
    arity = (0,) if e.fn == "row_number" else (1, 2) if e.fn == "shift" else (2,) if e.fn.endswith("_by") else (1,)
    if len(e.args) not in arity:
        raise ty.fail(e, f"{e.fn} takes {' or '.join(map(str, arity))} arguments, got {len(e.args)}")
    _check_options(e, ty, want)
    if e.fn.endswith("_by"):
        by = ty(e.args[1])
        if not (by.is_temporal or by == T.Null):
            raise ty.fail(e, f"{e.fn}() windows by a Date or Timestamp column, got {by}")
        size = parse_duration(e.options[0])
        if size.negative or size.is_zero:
            raise ty.fail(e, f"{e.fn}()'s window_size must be a positive duration, got {size}")
    elif e.fn.startswith("rolling_") and e.options[1] > e.options[0]:
        raise ty.fail(e, f"{e.fn}'s min_samples ({e.options[1]}) is more than its window_size ({e.options[0]})")
    if e.fn in ("rank", "cum_min", "cum_max", "rolling_min", "rolling_max", "rolling_min_by", "rolling_max_by"):
        compared(ty(e.args[0]), f"the column {e.fn}() orders, {e.args[0]} in {ty.where}")
    if e.fn == "row_number" or e.fn == "cum_count" or (e.fn == "rank" and e.options[0] != "average"):
        if e.args:
            ty(e.args[0])
        return T.Int64
    t = ty(e.args[0])
    if e.fn == "rank":
        return T.Float64
    if e.fn == "shift":
        if len(e.args) == 1:
            return t
        a, b = ty.operands(*e.args)
        if a != T.Null and b != T.Null and a != b and not (a.is_numeric and b.is_numeric):
            raise ty.fail(e, f"shift's fill_value of type {b} does not match column type {a}")
        return promote(a, b, op="fill the shifted values of")
    if e.fn in ("cum_min", "cum_max", "rolling_min", "rolling_max", "rolling_min_by", "rolling_max_by"):
        return t
    if not (t.is_numeric or t == T.Null):
        raise ty.fail(e, f"{e.fn}() needs a numeric column, got {t}")
    if e.fn in ("rolling_mean", "rolling_mean_by"):
        return T.Float64
    if e.fn == "cum_prod":
        if t.is_decimal:
            raise ty.fail(e, "cum_prod() of decimals is not defined (its scale would grow with each row); "
                             "cast to Float64 first")
        return T.Float64 if t.is_float or t == T.Null else T.UInt64 if t.is_unsigned_integer else T.Int64
    return _infer(Agg("sum", e.args[0]), _Typer(ty.schema, ty.where, allow_agg=True))  # cum_sum, rolling_sum


@_infer.register
def _(e: Call, ty: _Typer) -> DType:
    rule = _CALL_RULES.get(e.fn)
    if rule is None:
        raise ty.fail(e, f"unknown function {e.fn!r}")
    if F.ARITY[e.fn] is not None and len(e.args) != F.ARITY[e.fn]:
        raise ty.fail(e, f"{e.fn} takes {F.ARITY[e.fn]} arguments, got {len(e.args)}")
    _check_options(e, ty)
    return rule(e, ty)


_OPTION_KINDS = {
    "int": ("an integer in -2**31..2**31-1", lambda v: _is_int(v) and -(2**31) <= v < 2**31),
    "length": ("None or an integer in 0..2**31-1", lambda v: v is None or _is_int(v) and 0 <= v < 2**31),
    "str": ("a string", lambda v: isinstance(v, str)),
    "chars": ("None or a string", lambda v: v is None or isinstance(v, str)),
    "values": ("a list of values", lambda v: isinstance(v, tuple)),
    "duration": ("a duration string such as '1h' or '2d3h'", lambda v: isinstance(v, str)),
    "fraction": ("a float from 0 to 1", lambda v: isinstance(v, float) and 0.0 <= v <= 1.0),
    "interpolation": (f"one of {', '.join(F.QUANTILE_METHODS)}", lambda v: v in F.QUANTILE_METHODS),
    "size": ("an integer in 1..2**31-1", lambda v: _is_int(v) and 1 <= v < 2**31),
    "count": ("an integer in 0..2**31-1", lambda v: _is_int(v) and 0 <= v < 2**31),
    "bool": ("True or False", lambda v: isinstance(v, bool)),
    "names": ("a tuple of distinct field names", lambda v: isinstance(v, tuple) and len(set(v)) == len(v) and v
              and all(isinstance(n, str) and n for n in v)),
    "zone": ("None or an IANA time zone such as 'UTC' or 'Europe/Berlin'", lambda v: v is None or _is_zone(v)),
    "method": (f"one of {', '.join(F.RANK_METHODS)}", lambda v: v in F.RANK_METHODS),
    "closed": (f"one of {', '.join(F.ROLLING_CLOSED)}", lambda v: v in F.ROLLING_CLOSED),
}


def _is_zone(v: object) -> bool:
    try:
        return T.zone(v) == v
    except PlanError:
        return False


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_options(e: Call | Agg | Window, ty: _Typer, want: tuple | None = None) -> None:
    """A Call's, an Agg's or a Window's constant parameters are what its function takes (a plan read from JSON
    may hold anything)."""
    want = F.OPTIONS.get(e.fn, ()) if want is None else want
    if len(e.options) != len(want):
        raise ty.fail(e, f"{e.fn} takes {len(want)} constant parameter(s) ({', '.join(want) or 'none'}), "
                         f"got {len(e.options)}")
    for kind, v in zip(want, e.options):
        what, ok = _OPTION_KINDS[kind]
        if not ok(v):
            raise ty.fail(e, f"{e.fn} takes {what} as its {kind} parameter, got {literal_text(v)}")


def _arith(e: Call, ty: _Typer) -> DType:
    a, b = ty.operands(*e.args, fn=e.fn)
    sym = F.BINARY_OPERATORS[e.fn]
    if a.is_temporal or b.is_temporal or T.Duration in (a, b):
        return _date_arith(e, ty, a, b)
    if T.String in (a, b):   # + joins two strings (concat_str is made of it)
        if e.fn == "add" and {a, b} <= {T.String, T.Null}:
            return T.String
        raise ty.fail(e, f"operator {sym} needs numbers, or two Strings for + (which joins them; concat_str too), "
                         f"got {a} {sym} {b}; cast the other with .cast(ei.String) to join it as text")
    for t in (a, b):
        if not (t.is_numeric or t == T.Null):
            raise ty.fail(e, f"operator {sym} needs numbers, got {a} {sym} {b}")
    if e.fn == "pow":
        return T.Float32 if (a, b) == (T.Float32, T.Float32) else T.Float64
    if e.fn == "truediv":
        if a.is_float or b.is_float:
            return promote(a, b)
        return T.Float32 if T.Float32 in (a, b) else T.Float64
    common = promote(a, b, op=f"apply {sym} to")
    if not (a.is_decimal or b.is_decimal) or common.is_float:
        return common
    da = int_as_decimal(a) if a.is_integer else a
    db = int_as_decimal(b) if b.is_integer else b
    if a == T.Null:
        da = db
    if b == T.Null:
        db = da
    if e.fn in ("add", "sub"):
        scale = max(da.scale, db.scale)
        whole = max(da.precision - da.scale, db.precision - db.scale) + 1
        return _decimal_result(e, ty, whole + scale, scale)
    if e.fn == "mul":
        return _decimal_result(e, ty, da.precision + db.precision, da.scale + db.scale)
    if e.fn == "floordiv":
        return T.Decimal(T.MAX_DECIMAL_PRECISION, 0)
    return common  # mod: scale of the wider operand


def _decimal_result(e: Call, ty: _Typer, precision: int, scale: int) -> DType:
    if scale > T.MAX_DECIMAL_PRECISION:
        raise ty.fail(e, f"decimal result needs scale {scale}, more than 38; cast an operand to Float64")
    return T.Decimal(min(T.MAX_DECIMAL_PRECISION, max(precision, scale, 1)), scale)


def _date_arith(e: Call, ty: _Typer, a: DType, b: DType) -> DType:
    if e.fn in ("add", "sub") and a == T.Date and b.is_integer:
        return T.Date
    if e.fn == "add" and a.is_integer and b == T.Date:
        return T.Date
    if e.fn == "sub" and a == T.Date and b == T.Date:
        return T.Int64
    if not {a, b} <= {T.Date, T.Timestamp, T.Duration, T.Null} and not (a.is_integer or b.is_integer):
        raise ty.fail(e, f"cannot compute {a} {F.BINARY_OPERATORS[e.fn]} {b}: eidos's arithmetic of time takes "
                         "Date, Timestamp (microseconds, naive) and Duration; other units and zones are not added to yet")
    if e.fn == "sub" and a.is_temporal and b.is_temporal:
        return T.Duration
    if e.fn in ("add", "sub") and a in (T.Timestamp, T.Null) and b == T.Duration:
        return T.Timestamp
    if e.fn == "add" and a == T.Duration and b in (T.Timestamp, T.Null):
        return T.Timestamp
    if e.fn in ("add", "sub") and {a, b} <= {T.Duration, T.Null}:
        return T.Duration
    sym = F.BINARY_OPERATORS[e.fn]
    raise ty.fail(e, f"cannot compute {a} {sym} {b}; dates take + and - with an integer number of days "
                     "(date - date gives days), timestamps + and - with a Duration (timestamp - timestamp "
                     "gives one), durations + and - with each other; cast a Date to Timestamp to add a Duration")


def _compare(e: Call, ty: _Typer) -> DType:
    a, b = ty.operands(*e.args)
    comparable(a, b, ty, e)
    return T.Boolean


def comparable(a: DType, b: DType, ty: _Typer, e: Expr) -> None:
    if a.is_nested or b.is_nested:
        raise ty.fail(e, f"cannot compare {a} with {b}: eidos defines no order or equality of nested values")
    if T.Null in (a, b) or a == b:
        return
    if a.is_numeric and b.is_numeric:
        return
    if a.is_temporal and b.is_temporal:
        try:
            _promote_stamps(a, b, "compare")
        except PlanError as err:
            raise ty.fail(e, str(err)) from None
        return
    raise ty.fail(e, f"cannot compare {a} with {b}")


def _logic(e: Call, ty: _Typer) -> DType:
    for arg in e.args:
        t = ty(arg)
        if t not in (T.Boolean, T.Null):
            raise ty.fail(e, f"logical {e.fn} needs Boolean operands, got {t} from {arg}")
    return T.Boolean


def _numeric_unary(e: Call, ty: _Typer) -> DType:
    t = ty(e.args[0])
    if not (t.is_numeric or t == T.Null):
        raise ty.fail(e, f"{e.fn}() needs a number, got {t}")
    if e.fn == "neg" and t.is_unsigned_integer:
        raise ty.fail(e, f"cannot negate unsigned {t}; cast to a signed type first")
    if e.fn in ("neg", "abs"):
        return t
    if e.fn in ("floor", "ceil"):
        if t.is_decimal:
            return T.Decimal(min(38, t.precision - t.scale + 1), 0)
        return t
    if e.fn == "round":
        (decimals,) = e.options
        if t.is_decimal:
            scale = min(t.scale, max(decimals, 0))
            return T.Decimal(min(38, t.precision - t.scale + scale + 1), scale)
        return t
    return T.Float32 if t == T.Float32 else T.Float64


def _null_test(e: Call, ty: _Typer) -> DType:
    ty(e.args[0])
    return T.Boolean


def _fill_null(e: Call, ty: _Typer) -> DType:
    a, b = ty.operands(*e.args)
    if a != T.Null and b != T.Null and not (a.is_numeric and b.is_numeric):
        if a != b and not (a.is_temporal and b.is_temporal):
            raise ty.fail(e, f"fill_null value of type {b} does not match column type {a}")
    return promote(a, b, op="fill nulls of")


def _is_in(e: Call, ty: _Typer) -> DType:
    t = ty(e.args[0])
    for v in e.options[0]:
        comparable(t, literal_dtype(v), ty, e)
    return T.Boolean


def _is_between(e: Call, ty: _Typer) -> DType:
    x, lo, hi = e.args
    for bound in (lo, hi):
        a, b = ty.operands(x, bound)
        comparable(a, b, ty, e)
    return T.Boolean


def _string(e: Call, ty: _Typer) -> DType:
    t = ty(e.args[0])
    if t not in (T.String, T.Null):
        raise ty.fail(e, f"{F.method(e.fn)}() needs a String, got {t}")
    if e.fn in ("str_to_lower", "str_to_upper", "str_slice") + F.REPLACE + F.STRIP:
        return T.String
    if e.fn == "str_len":
        return T.Int64
    if e.fn in F.SPLIT:
        return T.List(T.String)
    return T.Boolean


def _formats(e: Call, ty: _Typer, t: DType) -> DType:
    """dt.strftime(format) of a Date or Timestamp; str.to_date/to_datetime(format) of a String."""
    to = {"dt_strftime": T.String, "str_to_date": T.Date, "str_to_datetime": T.Timestamp}[e.fn]
    want = (T.Date, T.Timestamp) if to == T.String else (T.String,)
    if t not in want + (T.Null,):
        raise ty.fail(e, f"{F.method(e.fn)}() needs a {' or '.join(map(str, want))}, got {t}"
                         + (" (other units and zones have no text form yet)" if t.is_timestamp else ""))
    try:
        parts = parse_format(e.options[0], parsing=to != T.String)
    except PlanError as err:
        raise ty.fail(e, str(err)) from None
    codes = {x for kind, x in parts if kind == "code"}
    if T.Date in (t, to) and codes & TIME_CODES:
        raise ty.fail(e, f"format {e.options[0]!r} has time of day ({' '.join('%' + c for c in sorted(codes & TIME_CODES))}), "
                         "which a Date has not; use a Timestamp")
    return to


def _temporal(e: Call, ty: _Typer) -> DType:
    t = ty(e.args[0])
    if e.fn in F.FORMATS:
        return _formats(e, ty, t)
    if e.fn in F.DURATION_TOTALS:
        if t not in (T.Duration, T.Null):
            raise ty.fail(e, f"{F.method(e.fn)}() needs a Duration, got {t}")
        return T.Int64
    if e.fn in F.ZONES + ("dt_time",):
        return _zones(e, ty, t)
    if e.fn in F.TIME_PARTS and not (t.is_timestamp or t in (T.Time, T.Null)):
        raise ty.fail(e, f"{F.method(e.fn)}() needs a Timestamp or Time, got {t} (cast a Date to Timestamp first)")
    if not (t.is_temporal or t == T.Null or t == T.Time and e.fn in F.TIME_PARTS):
        raise ty.fail(e, f"{F.method(e.fn)}() needs a Date or Timestamp, got {t}")
    if e.fn == "dt_truncate":
        if t not in (T.Date, T.Timestamp, T.Null):
            raise ty.fail(e, f"dt.truncate() needs a Date or Timestamp (microseconds, naive), got {t}")
        try:
            check_truncate(parse_duration(e.options[0]))
        except PlanError as err:
            raise ty.fail(e, str(err)) from None
        return t
    return T.Int32


def _zones(e: Call, ty: _Typer, t: DType) -> DType:
    """dt.replace_time_zone(zone or None), dt.convert_time_zone(zone) and dt.time() of a Timestamp."""
    if t == T.Null:
        return T.Null
    if not t.is_timestamp:
        raise ty.fail(e, f"{F.method(e.fn)}() needs a Timestamp, got {t}")
    if e.fn == "dt_time":
        if t.unit == "ns":
            raise ty.fail(e, f"dt.time() of {t}: eidos times of day are microseconds, and nanoseconds do not fit")
        return T.Time
    if e.fn == "dt_convert_time_zone" and (t.tz is None or e.options[0] is None):
        raise ty.fail(e, f"dt.convert_time_zone() shows a zoned timestamp in another zone, got {t} to "
                         f"{e.options[0]!r}; give a naive one its zone with dt.replace_time_zone() first")
    return T.Datetime(t.unit, e.options[0])


def _struct(e: Call, ty: _Typer) -> DType:
    if e.fn == "struct":
        if len(e.args) != len(e.options[0]):
            raise ty.fail(e, f"struct takes a name for each of its {len(e.args)} fields, got {len(e.options[0])}")
        types = [ty(a) for a in e.args]
        for n, t in zip(e.options[0], types):
            if t == T.Null:
                raise ty.fail(e, f"struct field {n!r} is an untyped null; give it a type: lit(None, ei.Int64)")
        return T.Struct(list(zip(e.options[0], types)))
    t = ty(e.args[0])
    if t == T.Null:
        return T.Null
    if not isinstance(t, T.StructType):
        raise ty.fail(e, f"struct.field() needs a Struct, got {t}")
    try:
        return t.field(e.options[0])
    except PlanError as err:
        raise ty.fail(e, str(err)) from None


def _typed_arg(e: Call, ty: _Typer, want: DType, result: DType) -> DType:
    t = ty(e.args[0])
    if t not in (want, T.Null):
        raise ty.fail(e, f"{F.method(e.fn)}() needs a {want}, got {t}")
    return result


def _list(e: Call, ty: _Typer) -> DType:
    t = ty(e.args[0])
    if not isinstance(t, T.ListType) and t != T.Null:
        raise ty.fail(e, f"{F.method(e.fn)}() needs a List, got {t}")
    if e.fn == "list_len":
        return T.Int64
    if e.fn == "list_get":
        return t.inner if t != T.Null else T.Null
    item = adapt(e.args[1], ty(e.args[1]), t.inner if t != T.Null else T.Null)
    comparable(t.inner if t != T.Null else item, item, ty, e)
    return T.Boolean


_CALL_RULES = {fn: _arith for fn in F.ARITHMETIC}
_CALL_RULES.update({fn: _compare for fn in F.COMPARISON})
_CALL_RULES.update({fn: _logic for fn in F.LOGICAL})
_CALL_RULES.update({fn: _numeric_unary for fn in F.MATH})
_CALL_RULES.update({"is_null": _null_test, "is_not_null": _null_test, "fill_null": _fill_null,
                    "is_in": _is_in, "is_between": _is_between})
_CALL_RULES.update({fn: _string for fn in F.STRINGS})
_CALL_RULES.update({fn: _temporal for fn in F.TEMPORAL})
_CALL_RULES.update({fn: _list for fn in F.LISTS})
_CALL_RULES["struct_field"] = _CALL_RULES["struct"] = _struct
_CALL_RULES["bin_size"] = lambda e, ty: _typed_arg(e, ty, T.Binary, T.Int64)


def infer(e: Expr, schema: Schema, where: str = "", *, allow_agg: bool = False) -> DType:
    """The dtype of `e` over `schema`; PlanError for missing columns and type errors."""
    return _Typer(schema, where, allow_agg)(e)


class _Kept(_Typer):
    """A _Typer that keeps each node's type (by object, while the caller holds the tree): a walk that asks
    every node of an expression infers each once, not once per node above it."""

    def __init__(self, schema: Schema) -> None:
        super().__init__(schema, "", allow_agg=False)
        self.kept: dict[int, DType] = {}

    def __call__(self, e: Expr) -> DType:
        t = self.kept.get(id(e))
        if t is None:
            t = self.kept[id(e)] = _infer(e, self)
        return t


def typer(schema: Schema) -> Callable[[Expr], DType]:
    """infer over `schema` for many nodes of one expression tree, each node's type worked out once."""
    return _Kept(schema)


def operand_dtypes(e: Call, schema: Schema) -> tuple[DType, ...]:
    """The types a Call's arguments have when it runs: weak literals adapted to what they meet."""
    ty = _Typer(schema, "", allow_agg=False)
    if e.fn == "list_contains":
        lt, it = ty(e.args[0]), ty(e.args[1])
        return lt, adapt(e.args[1], it, lt.inner if isinstance(lt, T.ListType) else lt)
    if len(e.args) == 2:
        return ty.operands(*e.args, fn=e.fn)
    if e.fn == "is_between":
        x, lo, hi = e.args
        return (ty(x), ty.operands(x, lo)[1], ty.operands(x, hi)[1])
    return tuple(ty(a) for a in e.args)

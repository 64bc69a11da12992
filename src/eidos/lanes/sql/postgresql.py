"""PostgreSQL through ADBC. What differs: no 1-byte or unsigned integers (held in a wider type
with range checks), math functions raise where IEEE gives inf or NaN (so CASE guards), LIKE
escapes with backslash unless told not to, and strings compare by the database's collation
unless told COLLATE "C" (code points, as eidos)."""

from __future__ import annotations

import atexit
import decimal
import math
import re
import sys
import threading

import sqlglot
from sqlglot import exp

from eidos.errors import PlanError, UnsupportedError
from eidos.hal import sql_guard
from eidos.ir import dtypes as T
from eidos.ir import timeformat
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.lanes.sql.dialect import Dialect, _and, _div, _or
from eidos.lanes.sql.duckdb import table_ref
from eidos.lanes.sql.translate import binop, by_name, case, float_literal, fn, ident, number, paren, string

# numeric without a declared precision holds any number of digits; eidos reads it as
# Decimal(38, 10), rounding (half away from zero, by PostgreSQL) in the scan, and a value
# with more than 28 integer digits fails the run rather than losing digits.
UNCONSTRAINED_NUMERIC = T.Decimal(38, 10)

# format_type() text -> eidos type; numeric(p,s) and the unconstrained numeric are handled apart.
TYPES = {
    "smallint": T.Int16, "integer": T.Int32, "bigint": T.Int64,
    "real": T.Float32, "double precision": T.Float64, "boolean": T.Boolean,
    "text": T.String, "character varying": T.String, "character": T.String, "name": T.String,
    "date": T.Date, "timestamp without time zone": T.Timestamp, "bytea": T.Binary,
    # an instant (PostgreSQL keeps UTC microseconds and shows them in the session's zone): eidos reads it in UTC
    "timestamp with time zone": T.Datetime("us", "UTC"), "time without time zone": T.Time,
}


def pg_dtype(formatted: str, column: str, where: str) -> T.DType:
    if formatted.endswith("[]"):  # an array of any number of dimensions: eidos reads one-dimensional ones
        return T.List(pg_dtype(formatted[:-2], column, where))
    base = re.sub(r"\(.*\)", "", formatted).strip()
    if base in TYPES:
        return TYPES[base]
    if base == "numeric":
        m = re.fullmatch(r"numeric\((\d+),(\d+)\)", formatted.replace(" ", ""))
        if not m:
            return UNCONSTRAINED_NUMERIC
        p, s = int(m.group(1)), int(m.group(2))
        if p > T.MAX_DECIMAL_PRECISION:
            raise PlanError(f"column {column!r} of {where} is {formatted}; eidos decimals hold at most 38 digits "
                            "(cast it in the query, e.g. CAST(x AS numeric(38, 2)) or double precision)")
        return T.Decimal(p, s)
    if base == "time with time zone":
        raise PlanError(f"column {column!r} of {where} is {formatted}; eidos times of day have no zone "
                        "(convert in the query: CAST(x AS time))")
    raise PlanError(f"column {column!r} of {where} has PostgreSQL type {formatted}, which eidos does not "
                    "support; cast it in the query to integer, bigint, double precision, numeric(p,s), "
                    "text, boolean, date or timestamp")


def _f8(v: float) -> exp.Expression:
    return exp.Cast(this=string(float_literal(v)), to=exp.DataType.build("DOUBLE PRECISION"))


# Exact decimals: sums at or past _OVERFLOW (halfway from the largest double to 2**1024) round to
# infinity; at or below _UNDERFLOW (half the smallest subnormal) to zero.
_OVERFLOW = str(2 ** 1024 - 2 ** 970)
_UNDERFLOW = format(decimal.Decimal((0, tuple(map(int, str(5 ** 1075))), -1075)), "f")  # 2**-1075


def _numeric(text: str) -> exp.Expression:
    return exp.Cast(this=string(text), to=exp.DataType.build("NUMERIC"))


def _col(name: str) -> exp.Expression:
    return exp.Column(this=ident(name))


def _spelled(body: exp.Expression, **values: exp.Expression) -> exp.Expression:
    """`body` with each column named in `values` replaced by its value. The values are short (the
    translator binds an argument that is not small and is read more than once: translate.Exprs.apply)."""
    return body.transform(lambda n: values[n.name].copy() if isinstance(n, exp.Column) and n.name in values else n)


def _abs(e):
    return exp.Abs(this=e)


def _signed(x, y, positive: exp.Expression, negative: exp.Expression) -> exp.Expression:
    """`positive` when x and y have one sign, else `negative` (x, y finite and non-zero)."""
    same = exp.EQ(this=exp.Paren(this=exp.GT(this=x, expression=_f8(0.0))),
                  expression=exp.Paren(this=exp.GT(this=y, expression=_f8(0.0))))
    return exp.Case(ifs=[exp.If(this=same, true=positive)], default=negative)


class PostgresDialect(Dialect):
    name = "postgresql"
    sqlglot = "postgres"
    native_ints = frozenset({"Int16", "Int32", "Int64"})
    types = {
        "Int8": "SMALLINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
        "UInt8": "SMALLINT", "UInt16": "INTEGER", "UInt32": "BIGINT", "UInt64": "DECIMAL(20, 0)",
        "Float32": "REAL", "Float64": "DOUBLE PRECISION", "Boolean": "BOOLEAN", "String": "TEXT",
        "Date": "DATE", "Timestamp": "TIMESTAMP", "Duration": "BIGINT", "List": "[]", "Binary": "BYTEA",
        "Time": "TIME", "Timestamp(ms, tz)": "TIMESTAMPTZ", "Timestamp(us, tz)": "TIMESTAMPTZ", "Timestamp(ms)": "TIMESTAMP",
    }

    def error(self, message, witness, t):
        # A failing cast whose text names the problem; the witness keeps PostgreSQL from folding
        # it while planning (it folds constant expressions even in untaken CASE branches).
        text = exp.DPipe(this=string("eidos: " + message + " "),
                         expression=fn("coalesce", fn("left", exp.Cast(this=paren(witness),
                                                                       to=exp.DataType.build("TEXT")),
                                                      exp.Literal.number(0)), string("")))
        if t == T.String:  # text to text cannot fail: fail as an integer, then retype
            return exp.Cast(this=exp.Cast(this=exp.Paren(this=text), to=exp.DataType.build("INTEGER")),
                            to=self.sql_type(t))
        return exp.Cast(this=exp.Paren(this=text), to=self.sql_type(t))

    # PostgreSQL's float arithmetic raises "value out of range: overflow" (or underflow) where IEEE
    # gives an infinity (or zero). So each operation decides those cases first, from operands
    # scaled by powers of two (exact), and computes natively only what cannot raise. The operands
    # are read many times: the translator binds each that is not small once, below (Exprs.apply).
    # Float32 is computed in float8, where its sums, products and quotients cannot overflow, and
    # rounded once. (power() is a declared gap: see coverage.py.)
    def ieee(self, cls, a, b, t):
        f8 = exp.DataType.build("DOUBLE PRECISION")
        x, y = _col("__eidos_x"), _col("__eidos_y")
        if t == T.Float32:
            body = self.to_float32(binop(cls, x, y), t)
        elif cls in (exp.Add, exp.Sub):
            body = self._ieee_add(x, y)
        else:
            body = self._ieee_scaled(cls, x, y)
        if cls is exp.Sub and t != T.Float32:
            b = exp.Neg(this=paren(b))
        return _spelled(body, __eidos_x=exp.Cast(this=paren(a), to=f8), __eidos_y=exp.Cast(this=paren(b), to=f8))

    def _ieee_add(self, x, y):
        """x + y: it overflows exactly when the rounded sum of the halves exceeds half the largest
        double (halving is exact for |v| >= 2**-1000; smaller halves cannot matter there)."""
        def half(v):
            return case([(exp.LT(this=_abs(v), expression=_f8(2.0 ** -1000)), _f8(0.0))],
                        exp.Mul(this=v, expression=_f8(0.5)))

        h = exp.Paren(this=exp.Add(this=half(x), expression=half(y)))
        small = _and(exp.LT(this=_abs(x), expression=_f8(2.0 ** 1022)), exp.LT(this=_abs(y), expression=_f8(2.0 ** 1022)))
        finite = _and(exp.LT(this=_abs(x), expression=_f8(math.inf)), exp.LT(this=_abs(y), expression=_f8(math.inf)))
        over = _and(finite, exp.GT(this=_abs(h), expression=_f8(sys.float_info.max / 2)))
        inf = case([(exp.GT(this=h, expression=_f8(0.0)), _f8(math.inf))], _f8(-math.inf))
        return case([(small, binop(exp.Add, x, y)), (over, inf)], binop(exp.Add, x, y))

    def _ieee_scaled(self, cls, x, y):
        """x * y or x / y: each finite non-zero operand is scaled by 2**-1000 (if >= 2**500) or 2**1000
        (if < 2**-500) into [2**-500, 2**500), exactly; k counts the scalings. The scaled result q
        cannot overflow or underflow, and the true one is q * 2**(1000 k): an infinity when k > 0
        and |q| reaches the rounding threshold, zero when k < 0 and |q| is at most half the
        smallest subnormal (a product within half an ulp of that point may round the other way)."""
        def e(v):
            return case([(exp.GTE(this=_abs(v), expression=_f8(2.0 ** 500)), exp.Literal.number(1)),
                         (exp.LT(this=_abs(v), expression=_f8(2.0 ** -500)), exp.Literal.number(-1))],
                        exp.Literal.number(0))

        def scaled(v):
            factor = case([(exp.GTE(this=_abs(v), expression=_f8(2.0 ** 500)), _f8(2.0 ** -1000)),
                           (exp.LT(this=_abs(v), expression=_f8(2.0 ** -500)), _f8(2.0 ** 1000))], _f8(1.0))
            return exp.Paren(this=exp.Mul(this=v, expression=factor))

        native = _div(x, y) if cls is exp.Div else binop(exp.Mul, x, y)
        q = _abs(_div(scaled(x), scaled(y)) if cls is exp.Div else binop(exp.Mul, scaled(x), scaled(y)))
        k = exp.Paren(this=(exp.Sub if cls is exp.Div else exp.Add)(this=e(x), expression=e(y)))
        special = _or(exp.Not(this=_and(exp.LT(this=_abs(x), expression=_f8(math.inf)),
                                        exp.LT(this=_abs(y), expression=_f8(math.inf)))),
                      exp.EQ(this=x, expression=_f8(0.0)), exp.EQ(this=y, expression=_f8(0.0)))
        inf, zero = _signed(x, y, _f8(math.inf), _f8(-math.inf)), _signed(x, y, _f8(0.0), _f8(-0.0))
        branches = [(special, native)]
        for n, bound, result, cmp in ((1, 2.0 ** 24, inf, exp.GTE), (2, 2.0 ** -976, inf, exp.GTE),
                                      (-1, 2.0 ** -75, zero, exp.LTE), (-2, 2.0 ** 925, zero, exp.LTE)):
            branches.append((_and(exp.EQ(this=k, expression=number(n)), cmp(this=q, expression=_f8(bound))), result))
        return case(branches, native)

    def to_float32(self, e, t):
        """A double as Float32: past its range an infinity, below half its smallest subnormal a
        (signed) zero, since PostgreSQL's cast raises for both."""
        if t != T.Float32:
            return e
        tiny = exp.LTE(this=_abs(e), expression=_f8(2.0 ** -150))
        zero = exp.Cast(this=exp.Paren(this=exp.Mul(this=paren(e), expression=_f8(0.0))), to=self.sql_type(T.Float32))
        big = super().to_float32(e, t)
        return case([(tiny, zero)], big)

    def layer(self, select):
        # OFFSET 0 keeps PostgreSQL from pulling the subquery up into the query above, which would
        # put a copy of each bound value in every place that reads it.
        return select.offset(exp.Literal.number(0))

    def aggregate(self, fn_, arg, at, t):
        if fn_ in ("min", "max") and at == T.Boolean:  # false < true; PostgreSQL has no min(boolean)
            return fn("bool_and" if fn_ == "min" else "bool_or", arg)
        if fn_ == "median":
            return self.median(arg, at)
        return super().aggregate(fn_, arg, at, t)

    def median(self, arg, at):
        """The two middle values in numeric, their midpoint exactly ((a + b) * 0.5), rounded once to a
        double. Floats enter as their text (exact), but are a typed gap: a midpoint that rounds to zero
        (of 0 and the smallest subnormal) makes PostgreSQL's cast to double raise."""
        if at.is_float:
            arg = exp.Cast(this=paren(arg), to=exp.DataType.build("TEXT"))
        x = exp.Cast(this=paren(arg), to=exp.DataType.build("NUMERIC"))
        middle = sqlglot.parse_one("(ARRAY_AGG(x ORDER BY x) FILTER (WHERE NOT x IS NULL))[(COUNT(x) + 1) / 2]"
                                   " + (ARRAY_AGG(x ORDER BY x) FILTER (WHERE NOT x IS NULL))[COUNT(x) / 2 + 1]",
                                   read="postgres")
        total = middle.transform(lambda e: x.copy() if isinstance(e, exp.Column) and e.name == "x" else e)
        mid = exp.Mul(this=exp.Paren(this=total), expression=exp.Literal.number("0.5"))
        return exp.Cast(this=exp.Paren(this=mid), to=exp.DataType.build("DOUBLE PRECISION"))

    def int_div(self, a, b, t=None):
        if t == T.UInt64:
            return fn("div", a, b)
        return exp.Paren(this=exp.Div(this=paren(a), expression=paren(b), typed=True, safe=False))

    def decimal_div_trunc(self, a, b):
        return fn("div", a, b)

    def float_sum(self, x):
        # Summed in numeric (which holds NaN and infinities), then rounded once. Each double enters
        # as its shortest round-trip text (a cast straight to numeric keeps only 15 digits), and a
        # total past the double range becomes an infinity, one below half the smallest subnormal a
        # zero, where PostgreSQL's cast would raise.
        text = exp.Cast(this=paren(x), to=exp.DataType.build("TEXT"))
        sum_ = exp.Sum(this=exp.Cast(this=text, to=exp.DataType.build("NUMERIC")))
        total = _col("__eidos_t")
        nan = exp.EQ(this=total, expression=_numeric("NaN"))
        body = case([(nan, _f8(math.nan)),
                     (exp.GTE(this=total, expression=_numeric(_OVERFLOW)), _f8(math.inf)),
                     (exp.LTE(this=total, expression=_numeric("-" + _OVERFLOW)), _f8(-math.inf)),
                     (exp.LTE(this=_abs(total), expression=_numeric(_UNDERFLOW)), _f8(0.0))],
                    exp.Cast(this=total, to=self.sql_type(T.Float64)))
        return _spelled(body, __eidos_t=sum_)

    def matches(self, s, pattern):
        return exp.RegexpLike(this=s, expression=string(f"^(?:{pattern})$"))

    regex = "postgresql"

    def search(self, s, pattern):
        return exp.RegexpLike(this=paren(s), expression=string(pattern))

    def group(self, s, pattern):
        return fn("substring", s, string(f"^{pattern}$"))

    def collate(self, e, t):
        if t == T.String:
            return exp.Collate(this=e, expression=ident("C"))
        return e

    def fn_eq(self, args, ts, t, o):
        return _indexable(super().fn_eq(args, ts, t, o))

    def fn_is_in(self, args, ts, t, o):
        return _indexable(super().fn_is_in(args, ts, t, o))

    def fn_str_split(self, args, ts, t, o):
        # string_to_array gives no part for '' (Polars: one empty part); the empty text splits into code points,
        # which regexp_split_to_array gives, but one empty part for '' (Polars: none)
        s, by = args[0], o[0]
        parts = fn("string_to_array", s, string(by)) if by else fn("regexp_split_to_array", s, string(""))
        empty = self.cast(exp.Array(expressions=[string("")] if by else []), T.Null, t, force=True)
        return case([(exp.EQ(this=paren(s), expression=string("")), empty)], parts)

    def binary(self, hex_digits):
        return fn("decode", string(hex_digits), string("hex"))

    def fn_list_len(self, args, ts, t, o):
        return self.cast(fn("cardinality", args[0]), T.Null, T.Int64, force=True)

    def fn_list_get(self, args, ts, t, o):
        (i,) = o  # arrays count from 1; a subscript out of range is null
        at = number(i + 1) if i >= 0 else binop(exp.Add, fn("cardinality", args[0]), number(i + 1))
        return exp.Bracket(this=paren(args[0]), expressions=[at], offset=1)

    def fn_list_contains(self, args, ts, t, o):
        xs, x = self.list_item(args, ts)
        hit = fn("coalesce", exp.EQ(this=paren(x), expression=exp.Any(this=exp.Paren(this=xs))), self.boolean(False))
        return case([(exp.Is(this=paren(x), expression=exp.Null()), self.cast(exp.Null(), T.Null, T.Boolean)),
                     (exp.Is(this=paren(xs), expression=exp.Null()), self.cast(exp.Null(), T.Null, T.Boolean))], hit)

    def fn_str_like(self, args, ts, t, o):
        like = exp.Like(this=paren(args[0]), expression=string(o[0]))
        return exp.Paren(this=exp.Escape(this=like, expression=string("")))

    def epoch_us(self, x, t):
        return self.cast(exp.Mul(this=self.extract("EPOCH", x), expression=exp.Literal.number(1000000)),
                         T.Null, T.Int64, force=True)

    # to_char's patterns for eidos's codes; literal text goes in double quotes.
    TO_CHAR = {"Y": "YYYY", "y": "YY", "m": "MM", "d": "DD", "j": "DDD", "H": "HH24", "I": "HH12", "M": "MI",
               "S": "SS", "f": "US", "p": "AM", "a": "Dy", "A": "FMDay", "b": "Mon", "B": "FMMonth"}

    def strftime(self, x, parts):
        def text(x):
            return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return fn("to_char", x, string(timeformat.spelled(parts, self.TO_CHAR, text)))

    def plus_us(self, x, us):
        # Whole days and the rest apart: an interval times a number multiplies in double precision.
        day = number(86_400_000_000)
        days, rest = self.int_div(us, day, T.Int64), exp.Mod(this=paren(us), expression=day)
        one = {u: exp.Interval(this=string("1"), unit=exp.var(u)) for u in ("DAY", "MICROSECOND")}
        return exp.Add(this=exp.Add(this=paren(x), expression=exp.Mul(this=paren(days), expression=one["DAY"])),
                       expression=exp.Mul(this=paren(rest), expression=one["MICROSECOND"]))

    def date_arith(self, cls, a, b, ts, t):
        return super().date_arith(cls, a, b, ts, t)

    def scan(self, source, ctx):
        if not isinstance(source, SqlSource) or source.scheme not in ("postgresql", "postgres"):
            raise UnsupportedError(f"the postgresql lane cannot read {source.describe()}")
        refs = by_name(source.schema.names)
        if source.table is not None:
            return table_ref(source.table), refs
        return ctx.raw(source), refs


def _connect(uri: str):
    import adbc_driver_postgresql.dbapi as adbc

    return adbc.connect(uri)


def describe(source: SqlSource) -> tuple[Schema, int | None]:
    """Column types from pg_attribute of a temporary view over the table or query (rolled back);
    rows from pg_class.reltuples for tables that have been analyzed. On a kept connection (_Idle)."""
    uri = source.connection_uri()
    con = _IDLE.take(uri)
    cur = con.cursor()
    try:
        rel = table_ref(source.table).sql("postgres") if source.table is not None else \
            f"({sql_guard.query_sql(source)}) AS q"
        cur.execute(f'CREATE TEMP VIEW "__eidos_probe" AS SELECT * FROM {rel}')
        cur.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'pg_temp.__eidos_probe'::regclass AND attnum > 0 AND NOT attisdropped "
                    "ORDER BY attnum")
        cols = cur.fetchall()
        rows = None
        if source.table is not None:
            cur.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass($1)",
                        parameters=(table_ref(source.table).sql("postgres"),))
            got = cur.fetchall()
            if got and got[0][0] is not None and got[0][0] >= 0:
                rows = int(got[0][0])
        where = source.describe()
        return Schema.read(cols, lambda ty, c: pg_dtype(ty, c, where)), rows
    finally:
        cur.close()
        try:
            con.rollback()
        except Exception:
            _close(con)
            raise
        _IDLE.give_back(uri, con)


class _Idle:
    """Connections kept open between runs, per server uri: opening one costs about a quarter of a second
    (the driver reads the server's type catalog), far more than a query an index answers. A connection
    comes back only after a run that ended cleanly (its transaction rolled back), is checked with a
    round trip before it is used again (a server restarted meanwhile gives a new one), and at most
    KEEP wait per uri; the rest are closed, and all of them when the process ends."""

    KEEP = 4

    def __init__(self):
        self.lock = threading.Lock()
        self.idle: dict[str, list] = {}
        atexit.register(self.close_all)

    def take(self, uri: str):
        while True:
            with self.lock:
                kept = self.idle.get(uri)
                con = kept.pop() if kept else None
            if con is None:
                return _connect(uri)
            try:
                cur = con.cursor()
                try:
                    cur.execute("SELECT 1")
                    cur.fetchall()
                finally:
                    cur.close()
                con.rollback()
                return con
            except Exception:  # noqa: BLE001 - a connection the server dropped: close it and take the next
                _close(con)

    def give_back(self, uri: str, con) -> None:
        with self.lock:
            kept = self.idle.setdefault(uri, [])
            if len(kept) < self.KEEP:
                kept.append(con)
                return
        _close(con)

    def close_all(self) -> None:
        with self.lock:
            cons = [c for kept in self.idle.values() for c in kept]
            self.idle.clear()
        for con in cons:
            _close(con)


def _close(con) -> None:
    try:
        con.close()
    except Exception:  # noqa: BLE001, S110 - closing a broken connection must not hide why it broke
        pass


_IDLE = _Idle()


class Session:
    """One run's connection to the server (kept open between runs: _Idle): its statement runs in a READ
    ONLY transaction (so not even a function the database defines can write), rolled back. (A plan's
    description at build time makes a temporary view, which a read-only transaction forbids; creating a
    view runs nothing of the query, and it is rolled back too.)"""

    def __init__(self, query, settings=None):
        self.uri = query.sources[0].connection_uri()
        self.con = _IDLE.take(self.uri)
        self.clean = False

    def fetch(self, sql: str):
        from eidos.lanes.sql.execute import fetch_adbc

        table = fetch_adbc(self.con, sql, rollback=True, read_only=True)
        self.clean = True
        return table

    def close(self) -> None:
        if self.clean:
            _IDLE.give_back(self.uri, self.con)
        else:
            _close(self.con)


connect = Session


def _indexable(exact: exp.Expression) -> exp.Expression:
    """A string equality `exact` (under COLLATE "C") with the same test under the columns' own collation
    before it, so that an index on the column serves the query (COLLATE "C" alone defeats it). Under any
    collation strings equal by code point are equal, so the conjunction answers as `exact` does, also
    where a nondeterministic collation makes more strings equal (the second test removes those rows)."""
    if not any(isinstance(n, exp.Collate) for n in exact.walk()):
        return exact
    plain = exact.copy().transform(lambda n: n.this if isinstance(n, exp.Collate) else n)
    return exp.Paren(this=exp.And(this=plain, expression=exact))

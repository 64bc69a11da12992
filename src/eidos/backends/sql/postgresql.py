"""PostgreSQL through ADBC. What differs: no 1-byte or unsigned integers (held in a wider type
with range checks), math functions raise where IEEE gives inf or NaN (so CASE guards), LIKE
escapes with backslash unless told not to, and strings compare by the database's collation
unless told COLLATE "C" (code points, as eidos)."""

from __future__ import annotations

import re

from sqlglot import exp

from eidos.errors import PlanError, UnsupportedError
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.backends.sql.dialect import Dialect
from eidos.backends.sql.duckdb import table_ref
from eidos.backends.sql.translate import by_name, fn, ident, paren, string

# numeric without a declared precision holds any number of digits; eidos reads it as
# Decimal(38, 10), rounding (half away from zero, by PostgreSQL) in the scan, and a value
# with more than 28 integer digits fails the run rather than losing digits.
UNCONSTRAINED_NUMERIC = T.Decimal(38, 10)

# format_type() text -> eidos type; numeric(p,s) and the unconstrained numeric are handled apart.
TYPES = {
    "smallint": T.Int16, "integer": T.Int32, "bigint": T.Int64,
    "real": T.Float32, "double precision": T.Float64, "boolean": T.Boolean,
    "text": T.String, "character varying": T.String, "character": T.String, "name": T.String,
    "date": T.Date, "timestamp without time zone": T.Timestamp,
}


def pg_dtype(formatted: str, column: str, where: str) -> T.DType:
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
    if base == "timestamp with time zone":
        raise PlanError(f"column {column!r} of {where} is {formatted}; eidos timestamps are naive "
                        "(convert in the query: x AT TIME ZONE 'UTC')")
    raise PlanError(f"column {column!r} of {where} has PostgreSQL type {formatted}, which eidos does not "
                    "support; cast it in the query to integer, bigint, double precision, numeric(p,s), "
                    "text, boolean, date or timestamp")


class PostgresDialect(Dialect):
    name = "postgresql"
    sqlglot = "postgres"
    native_ints = frozenset({"Int16", "Int32", "Int64"})
    types = {
        "Int8": "SMALLINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
        "UInt8": "SMALLINT", "UInt16": "INTEGER", "UInt32": "BIGINT", "UInt64": "DECIMAL(20, 0)",
        "Float32": "REAL", "Float64": "DOUBLE PRECISION", "Boolean": "BOOLEAN", "String": "TEXT",
        "Date": "DATE", "Timestamp": "TIMESTAMP",
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

    def aggregate(self, fn_, arg, at, t):
        if fn_ in ("min", "max") and at == T.Boolean:  # false < true; PostgreSQL has no min(boolean)
            return fn("bool_and" if fn_ == "min" else "bool_or", arg)
        return super().aggregate(fn_, arg, at, t)

    def int_div(self, a, b, t=None):
        if t == T.UInt64:
            return fn("div", a, b)
        return exp.Paren(this=exp.Div(this=paren(a), expression=paren(b), typed=True, safe=False))

    def decimal_div_trunc(self, a, b):
        return fn("div", a, b)

    def float_sum(self, x):
        # Summed exactly in numeric (which holds NaN and infinities), then rounded once.
        total = exp.Sum(this=exp.Cast(this=x, to=exp.DataType.build("NUMERIC")))
        return exp.Cast(this=total, to=self.sql_type(T.Float64))

    def matches(self, s, pattern):
        return exp.RegexpLike(this=s, expression=string(f"^(?:{pattern})$"))

    def group(self, s, pattern):
        return fn("substring", s, string(f"^{pattern}$"))

    def collate(self, e, t):
        if t == T.String:
            return exp.Collate(this=e, expression=ident("C"))
        return e

    def fn_str_like(self, args, ts, t, o):
        like = exp.Like(this=paren(args[0]), expression=string(o[0]))
        return exp.Paren(this=exp.Escape(this=like, expression=string("")))

    def date_arith(self, cls, a, b, ts, t):
        return super().date_arith(cls, a, b, ts, t)

    def scan(self, source, ctx):
        if not isinstance(source, SqlSource) or source.scheme not in ("postgresql", "postgres"):
            raise UnsupportedError(f"the postgresql lane cannot read {source.describe()}")
        refs = by_name(source.schema.names)
        if source.table is not None:
            return table_ref(source.table), refs
        return ctx.raw(source.query), refs


def _connect(uri: str):
    import adbc_driver_postgresql.dbapi as adbc

    return adbc.connect(uri)


def describe(source: SqlSource) -> tuple[Schema, int | None]:
    """Column types from pg_attribute of a temporary view over the table or query (rolled back);
    rows from pg_class.reltuples for tables that have been analyzed."""
    con = _connect(source.uri)
    cur = con.cursor()
    try:
        rel = table_ref(source.table).sql("postgres") if source.table is not None else \
            f"({source.query.strip().rstrip(';')}) AS q"
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
        return Schema((c, pg_dtype(ty, c, where)) for c, ty in cols), rows
    finally:
        cur.close()
        try:
            con.rollback()
        finally:
            con.close()


class Session:
    """One run's connection to the server, its statement rolled back (read-only) and the
    connection closed after it."""

    def __init__(self, query, settings=None):
        self.con = _connect(query.sources[0].uri)

    def fetch(self, sql: str):
        from eidos.backends.sql.execute import fetch_adbc

        return fetch_adbc(self.con, sql, rollback=True)

    def close(self) -> None:
        self.con.close()


connect = Session

"""SQLite database files through ADBC. What differs: integers are all 64-bit and overflow to
REAL instead of raising, NaN does not exist (it becomes NULL), LIKE ignores ASCII case (so LIKE
becomes GLOB), and types are declared affinities, mapped to eidos types by the table below."""

from __future__ import annotations

import functools
import math
import os
import re

from sqlglot import exp

from eidos.errors import PlanError, UnsupportedError
from eidos.hal import sql_guard
from eidos.hal.files import regular_file
from eidos.ir import dtypes as T
from eidos.ir import grammar as G
from eidos.ir import timeformat
from eidos.ir.evaluate.aggregates import float_sum
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.lanes.sql.dialect import Dialect, _and, _is, _not_null, _or
from eidos.lanes.sql.duckdb import table_ref
from eidos.lanes.sql.translate import by_name, case, fn, number, paren, string

# Declared column type -> eidos type, first match wins (names compared upper-case, without
# "(...)"). Exact names first, then SQLite's own affinity rules (datatype3.html, 3.1).
# NUMERIC affinity (NUMERIC, DECIMAL(p,s), ...) holds integers or 8-byte floats, never exact
# decimals, so it reads as Float64. BLOB and undeclared columns have no eidos type.
EXACT_TYPES = {"BOOLEAN": T.Boolean, "BOOL": T.Boolean, "DATE": T.Date, "BLOB": T.Binary,
               "DATETIME": T.Timestamp, "TIMESTAMP": T.Timestamp}
AFFINITY = (("INT", T.Int64), ("CHAR", T.String), ("CLOB", T.String), ("TEXT", T.String),
            ("REAL", T.Float64), ("FLOA", T.Float64), ("DOUB", T.Float64))
NUMERIC_AFFINITY = T.Float64


def declared_dtype(declared: str, column: str, where: str) -> T.DType:
    name = re.sub(r"\(.*\)", "", declared or "").strip().upper()
    if name in EXACT_TYPES:
        return EXACT_TYPES[name]
    if "TIME" in name:   # TIME, TIMESTAMPTZ, TIMESTAMP WITH TIME ZONE: SQLite has no such types, only their text
        raise PlanError(f"column {column!r} of {where} is declared {declared!r}, but SQLite has no time-of-day or "
                        "time-zone types: its values are whatever text or numbers were stored; read it as text "
                        "(CAST(x AS TEXT)) and parse it with .str.to_datetime(format)")
    for part, dtype in AFFINITY:
        if part in name:
            return dtype
    if not name or "BLOB" in name:
        what = f"declared type {declared!r}" if name else "no declared type"
        raise PlanError(f"column {column!r} of {where} has {what}, so its values may be of any type; "
                        "give it one in the query, e.g. CAST(x AS INTEGER), CAST(x AS REAL) or CAST(x AS TEXT)")
    return NUMERIC_AFFINITY


from eidos.lanes.sql.duckdb import path_of  # noqa: E402 - the same uri form for both files


class SQLiteDialect(Dialect):
    name = "sqlite"
    sqlglot = "sqlite"
    native_ints = frozenset()
    has_nan = False
    semi_join_in = True  # no hash join: a correlated EXISTS scans the right side once per left row
    types = {t.name: "INTEGER" for t in T.INTEGERS}
    types.update({"Float64": "REAL", "Boolean": "BOOLEAN", "String": "TEXT", "Date": "TEXT", "Binary": "BLOB"})

    def binary(self, hex_digits):
        return fn("unhex", string(hex_digits))

    def fn_bin_size(self, args, ts, t, o):
        return self.cast(fn("length", args[0]), T.Null, T.Int64, force=True)  # of a BLOB: its bytes

    def sql_type(self, t):
        if t == T.Boolean:
            return exp.DataType.build("INTEGER", dialect="sqlite")
        return super().sql_type(t)

    def boolean(self, v):
        return exp.Literal.number(1 if v else 0)

    def float_value(self, v, t=T.Float64):
        if v != v:
            raise UnsupportedError("SQLite has no NaN")
        if v in (float("inf"), float("-inf")):
            return number("9e999" if v > 0 else "-9e999")
        return exp.Cast(this=number(repr(v)), to=self.sql_type(T.Float64))

    def error(self, message, witness, t):
        # json_extract with a bad path fails with the path in its message; the witness makes the
        # call depend on the row, so SQLite cannot evaluate it once up front.
        path = exp.DPipe(this=string("eidos: " + message + " "),
                         expression=fn("coalesce", fn("substr", fn("typeof", witness), exp.Literal.number(1),
                                                      exp.Literal.number(0)), string("")))
        return fn("json_extract", string("{}"), path)

    def nan(self, t, witness):
        return self.error("NaN (not representable in SQLite)", witness, t)

    def is_nan(self, x):
        return exp.false()

    def checked_int(self, e, t):
        if t == T.Int64:
            bad = exp.EQ(this=fn("typeof", e), expression=string("real"))
            return case([(bad, self.error("integer overflow: result does not fit in Int64", e, t))], e)
        return super().checked_int(e, t)

    def nan_guard(self, r, args, t):
        """SQLite turns NaN (inf - inf, 0 * inf, ...) into NULL: a NULL from non-null operands was NaN."""
        if not t.is_float:
            return r
        bad = _and(_is(r), *[_not_null(a) for a in args])
        return case([(bad, self.nan(t, r))], r)

    def layer(self, select):
        # SQLite's query flattener would merge the subquery into the one above, copying each bound
        # value into every place that reads it; it leaves a subquery with an OFFSET alone.
        return select.limit(exp.Literal.number(-1)).offset(exp.Literal.number(0))

    def float_mod(self, a, b):
        return fn("mod", a, b)

    def strpos(self, a, s):
        return fn("instr", a, s)

    def greatest(self, *xs):
        return fn("max", *xs)

    regex = "re2"

    def search(self, s, pattern):
        return fn("eidos_re2_search", s, string(pattern))

    def regex_replace(self, s, pattern, rewrite, n):
        return fn("eidos_re2_replace", s, string(pattern), string(rewrite), exp.Literal.number(n))

    def fn_str_replace_n(self, args, ts, t, o):
        from eidos.ir.regex import escape

        return self._replace(args[0], escape(o[0]), o[1].replace("$", "$$"), n=o[2])

    def fn_str_like(self, args, ts, t, o):
        # GLOB is case-sensitive; % and _ become * and ?, and GLOB's own * ? [ are bracketed.
        glob = G.translate_like(o[0], any_run="*", one="?", literal=lambda ch: f"[{ch}]" if ch in "*?[" else ch)
        return exp.Paren(this=exp.Glob(this=paren(args[0]), expression=string(glob)))

    # Dates are ISO text ('2024-02-29'): they compare and sort as text, and date functions read them.
    def extract(self, part, a):
        return fn("strftime", string({"YEAR": "%Y", "MONTH": "%m", "DAY": "%d", "DOY": "%j"}[part]), a)

    def fn_dt_weekday(self, args, ts, t, o):  # %w counts from Sunday = 0
        w = self.cast(fn("strftime", string("%w"), args[0]), T.Null, T.Int64, force=True)
        return exp.Add(this=paren(exp.Mod(this=paren(exp.Add(this=w, expression=number(6))), expression=number(7))),
                       expression=number(1))

    def strftime(self, x, parts):  # dates only; SQLite's names of days and months are not eidos's
        other = sorted({c for kind, c in parts if kind == "code"} - set("Ymdj"))
        if other:
            raise UnsupportedError(f"the sqlite lane writes dates with %Y %m %d %j, not {' '.join('%' + c for c in other)}")
        return fn("strftime", string(timeformat.spelled(parts, {}, lambda x: x.replace("%", "%%"))), x)

    def epoch_us(self, x, t):  # dates only (SQLite has no timestamps here)
        days = exp.Sub(this=fn("julianday", x), expression=number("2440587.5"))
        return exp.Mul(this=self.cast(days, T.Null, T.Int64, force=True), expression=number(86_400_000_000))

    def make_date(self, year, month):
        return case([(_is(year), exp.Null())], fn("printf", string("%04d-%02d-01"), year, month))  # printf: NULL is 0

    def date_arith(self, cls, a, b, ts, t):
        if t == T.Int64:
            days = exp.Sub(this=fn("julianday", a), expression=fn("julianday", b))
            return self.cast(exp.Paren(this=days), T.Null, T.Int64, force=True)
        if ts[0] != T.Date:
            a, b = b, a
        n = b if cls is exp.Add else exp.Neg(this=paren(b))
        shift = exp.DPipe(this=paren(n), expression=string(" days"))  # NULL for a null count (printf gives +0)
        r = fn("date", a, shift)
        # Past 9999 SQLite's date() gives null, before year 1 text such as '0000-12-28': both raise (semantics 12)
        bad = _or(_and(_is(r), _not_null(a), _not_null(b)), exp.LT(this=r, expression=string("0001-01-01")))
        return case([(bad, self.error("date out of range (years 1..9999)", a, T.Date))], r)

    def float_sum(self, x):
        return fn("eidos_fsum", x)

    def agg_sum(self, arg, at, t):
        total = self.float_sum(arg) if at.is_float else exp.Sum(this=arg)  # SUM raises "integer overflow"
        if at.is_float:
            bad = _and(_is(total), exp.GT(this=exp.Count(this=arg), expression=exp.Literal.number(0)))
            return case([(bad, self.nan(t, total))], total)
        return self.cast(total, T.Null, t, force=True)

    def aggregate(self, fn_, arg, at, t):
        if fn_ == "mean" and at.is_integer:
            return exp.Avg(this=arg)
        return super().aggregate(fn_, arg, at, t)

    def scan(self, source, ctx):
        if not isinstance(source, SqlSource) or source.scheme != "sqlite":
            raise UnsupportedError(f"the sqlite lane cannot read {source.describe()}")
        refs = by_name(source.schema.names)
        if source.table is not None:
            return table_ref(source.table), refs
        return ctx.raw(source), refs

    def scan_column(self, e, t, source=None):
        # Int64 columns (INTEGER affinity: integers are stored as integers) are read bare, as text,
        # booleans and dates are: a CAST would make each join on them an expression, for which
        # SQLite builds no automatic index (TPC-H Q3 at SF1: 215 s with, 0.2 s without). Float64
        # keeps its CAST: NUMERIC-affinity columns, read as Float64, hold integers as integers.
        # A value SQLite stored against its column's type (possible unless the table is STRICT)
        # is not coerced: it fails the run's Arrow conversion rather than turning 'abc' into 0.
        return e if t in (T.String, T.Boolean, T.Date, T.Int64, T.Binary) else self.cast(e, T.Null, t, force=True)


def _open(source_or_uri):
    import adbc_driver_sqlite.dbapi as adbc

    uri = getattr(source_or_uri, "uri", source_or_uri)
    path = path_of(uri)
    if not os.path.exists(path):
        raise PlanError(f"cannot open sqlite database {uri}: no such file {path!r}")
    regular_file(path)   # a FIFO or a device would block the open or never end
    from urllib.parse import quote

    return adbc.connect(f"file:{quote(path)}?mode=ro")


def describe(source: SqlSource) -> tuple[Schema, int | None]:
    """Declared types from PRAGMA table_info (a query is read through a temporary view); no rows fetched."""
    con = _open(source)
    cur = con.cursor()
    try:
        name = source.table
        if name is None:
            name = "__eidos_probe"
            cur.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM ({sql_guard.query_sql(source)})')
        parts = name.split(".")
        if len(parts) == 2:
            cur.execute("SELECT name, type FROM pragma_table_info(?, ?)", parameters=(parts[1], parts[0]))
        else:
            cur.execute("SELECT name, type FROM pragma_table_info(?)", parameters=(name,))
        cols = cur.fetchall()
        if not cols:
            raise PlanError(f"cannot read {source.describe()}: no such table")
        where = source.describe()
        return Schema.read(cols, lambda ty, c: declared_dtype(ty, c, where)), None
    finally:
        cur.close()
        con.close()


@functools.lru_cache(maxsize=64)
def _re2(function: str, pattern: str, rewrite: str | None = None, n: int | None = None):
    from eidos.ir.evaluate.text import re2

    options = {} if rewrite is None else {"replacement": rewrite, "max_replacements": n}
    return functools.lru_cache(maxsize=1 << 14)(re2(function, pattern=pattern, **options))   # values repeat


@functools.lru_cache(maxsize=64)
def _search(pattern: str):
    """RE2's own binding (google-re2): a value in microseconds, where a pyarrow call costs about 0.3 ms."""
    import re2

    return re2.compile(pattern).search


class _FloatSum:
    """SUM of floats correctly rounded (semantics 14), as the reference sums them: SQLite's own SUM adds in
    row order with a compensation term (Kahan-Babuska), which is close but not exact
    ([2**100, 1, 2**-53, -2**100] gives 1.0, not 1.0000000000000002). About 0.4 us a value here."""

    def __init__(self):
        self.values = []

    def step(self, x):
        if x is not None:
            self.values.append(x)

    def finalize(self):
        s = float_sum(self.values) if self.values else None
        return None if s is None or math.isnan(s) else s   # SQLite has no NaN: agg_sum turns NULL into its error


# Functions the lane's SQL calls for what SQLite lacks, registered on the run's own connection only, and only
# where its SQL calls them: regular expressions on RE2 (linear in the text), as the reference lane runs them,
# one row at a time (SQLite calls a function per row), and exact float sums. ADBC registers no functions, so
# such a run reads through Python's sqlite3.
FUNCTIONS = {"eidos_re2_search": (2, lambda s, p: None if s is None else _search(p)(s) is not None),
             "eidos_re2_replace": (4, lambda s, p, r, n: _re2("replace_substring_regex", p, r, n if n > 0 else None)(s))}
AGGREGATES = {"eidos_fsum": (1, _FloatSum)}
_CALLS = re.compile(r"\b(?:" + "|".join([*FUNCTIONS, *AGGREGATES]) + r")\(", re.IGNORECASE)   # sqlglot writes names upper-case


def _fetch_with_functions(path: str, sql: str):
    import sqlite3
    from urllib.parse import quote

    import pyarrow as pa

    con = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)
    try:
        for name, (arity, f) in FUNCTIONS.items():
            con.create_function(name, arity, f, deterministic=True)
        for name, (arity, cls) in AGGREGATES.items():
            con.create_aggregate(name, arity, cls)
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        columns = list(zip(*cur.fetchall())) or [()] * len(names)
        return pa.Table.from_arrays([pa.array(list(c)) for c in columns], names=[f"c{i}" for i in range(len(names))])
    finally:
        con.close()


class Session:
    """One run's read-only connection to the plan's database file (opening one costs well under a
    millisecond, so none is kept: a kept connection could hold a read lock between runs)."""

    def __init__(self, query, settings=None):
        paths = {path_of(s.uri) for s in query.sources}
        self.path = paths.pop()
        self.con = _open("sqlite://" + self.path)

    def fetch(self, sql: str):
        from eidos.lanes.sql.execute import fetch_adbc

        if _CALLS.search(sql):
            return _fetch_with_functions(self.path, sql)
        return fetch_adbc(self.con, sql)

    def close(self) -> None:
        self.con.close()


connect = Session

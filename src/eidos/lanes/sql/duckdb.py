"""DuckDB: the embedded default. Reads parquet, CSV, in-memory Arrow (registered, not copied)
and tables of one DuckDB database file; its integers raise on overflow like eidos's."""

from __future__ import annotations

import os
import re
import threading

from sqlglot import exp

from eidos.errors import EidosError, PlanError, UnsupportedError
from eidos.hal import sql_guard
from eidos.hal.arrow import file_batches, parquet_batches
from eidos.hal.files import regular_file
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import timeformat
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, FileSource, ParquetSource, SqlSource
from eidos.lanes.sql.dialect import Dialect, _div
from eidos.lanes.sql.translate import binop, by_name, case, column, fn, ident, paren, positional, slots, string

# DuckDB keeps a decimal of up to 18 digits in 64 bits, and multiplies two such in 64 bits even where the
# product's type has more digits: its type is then DECIMAL(18, s1 + s2) and a product past 18 digits raises
# (an OutOfRangeException). The lane's SQL keeps that fast arithmetic where the value is exact whenever it
# does not raise, and runs the exact form of the plan's SQL (DuckDBDialect(exact=True)) when it raises.
INT64_DIGITS = 18


def path_of(uri: str) -> str:
    """The file a uri names: scheme:///abs/path.db and scheme:////abs/path.db are /abs/path.db,
    scheme://rel.db is rel.db (relative to the working directory), duckdb:///:memory: is memory."""
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    if rest.lstrip("/") == ":memory:":
        return ":memory:"
    return "/" + rest.lstrip("/") if rest.startswith("/") else rest


def table_ref(name: str) -> exp.Table:
    """A table name, dotted names read as schema.table; every part quoted."""
    parts = name.split(".")
    if len(parts) == 1:
        return exp.Table(this=ident(parts[0]))
    if len(parts) == 2:
        return exp.Table(this=ident(parts[1]), db=ident(parts[0]))
    return exp.Table(this=ident(parts[-1]), db=ident(parts[-2]), catalog=ident(".".join(parts[:-2])))


class DuckDBDialect(Dialect):
    name = "duckdb"
    sqlglot = "duckdb"
    native_ints = frozenset(t.name for t in T.INTEGERS)
    flat = True   # one SELECT binds in less time than a chain of CTEs: the same plan for less
    inexact_decimal_mean = True  # a SUM of DECIMAL(p > 18) may overflow 38 digits: fsum of doubles there
    types = {
        "Int8": "TINYINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
        "UInt8": "UTINYINT", "UInt16": "USMALLINT", "UInt32": "UINTEGER", "UInt64": "UBIGINT",
        "Float32": "FLOAT", "Float64": "DOUBLE", "Boolean": "BOOLEAN", "String": "VARCHAR",
        "Date": "DATE", "Timestamp": "TIMESTAMP", "Duration": "BIGINT", "List": "[]", "Binary": "BLOB",
        "Time": "TIME", "Timestamp(ms, tz)": "TIMESTAMPTZ", "Timestamp(us, tz)": "TIMESTAMPTZ", "Timestamp(ms)": "TIMESTAMP_MS",
        "Timestamp(ns)": "TIMESTAMP_NS",
        "Struct": "STRUCT",
    }

    def __init__(self, *, exact: bool = False):
        self.exact = exact

    def exact_form(self):
        return None if self.exact else DuckDBDialect(exact=True)

    def error(self, message, witness, t):
        return fn("error", string("eidos: " + message))

    def int_div(self, a, b, t=None):
        return exp.Paren(this=exp.IntDiv(this=a, expression=b))

    def is_nan(self, x):
        return fn("isnan", x)

    def epoch_us(self, x, t):
        return fn("epoch_us", self.cast(x, t, T.Timestamp))

    def epoch_ns(self, x):
        """Nanoseconds from 1970-01-01 00:00 to a nanosecond timestamp, as a 64-bit integer."""
        return fn("epoch_ns", x)

    def strftime(self, x, parts):  # DuckDB's codes are eidos's (%f: six digits of microseconds)
        return fn("strftime", x, string(timeformat.spelled(parts, {}, lambda x: x.replace("%", "%%"))))

    def strptime(self, s, parts, t):
        read = fn("try_strptime", s, string(timeformat.spelled(parts, {}, lambda x: x.replace("%", "%%"))))
        return self.cast(read, T.Null, t, force=True)

    def plus_us(self, x, us):
        return exp.Add(this=paren(x), expression=fn("to_microseconds", us))

    def float_sum(self, x):
        # eidos: correctly rounded (eidos.hal.fsum over the group's values, gathered by list()).
        # DuckDB's fsum (Kahan-Babuska) is not: [2**100, 1, 2**-53, 2**-80, -2**100] gives 1.0.
        return fn("eidos_sum", fn("list", x))

    def aggregate(self, fn_, arg, at, t):
        if fn_ in ("std", "var") and at.is_float:
            # eidos: exact as the reference's (DuckDB's var_samp is Welford's, rounded per row)
            return fn(f"eidos_{fn_}", fn("list", self.cast(arg, at, T.Float64)))
        if fn_ == "mean" and at.is_decimal and at.precision <= 18:
            # The sum of decimals of up to 18 digits is exact in DuckDB's 128-bit SUM (no overflow
            # short of 10**20 rows), as semantics 14 asks, and cheaper than fsum of doubles (TPC-H Q1).
            total = self.cast(exp.Sum(this=arg), T.Null, T.Float64, force=True)
            return _div(total, self.cast(exp.Count(this=arg), T.Null, T.Float64, force=True))
        if fn_ == "median":
            return self.median(arg, at)
        return super().aggregate(fn_, arg, at, t)

    def fn_mul(self, args, ts, t, o):
        a, b = args
        if (self.exact and t.is_decimal and t.precision > INT64_DIGITS
                and max(ts[0].precision, ts[1].precision) <= INT64_DIGITS):
            # Widened to 19 digits, DuckDB multiplies in 128 bits: DECIMAL(min(38, 19 + p2), s1 + s2), exact,
            # since |a * b| < 10 ** (p1 + p2) <= 10 ** 36; the cast to t (p1 + p2 digits) cannot fail.
            a = self.cast(a, ts[0], T.Decimal(INT64_DIGITS + 1, ts[0].scale))
        return super().fn_mul([a, b], ts, t, o)

    def exact_sum(self, arg, at, t, x):
        """sum(arg) of a decimal sum, difference or product of more than 18 digits (TPC-H's revenue,
        price * (1 - discount)) as DuckDB's own 64-bit arithmetic computes it (`narrow`), summed as 64-bit
        values: SUM of DECIMAL(p <= 18, s) is DECIMAL(38, s) = t, as DuckDB's own SQL sums it (a sixth
        less work than summing the 128-bit values of the product's type in TPC-H Q1's aggregation).
        Where a value does not fit 18 digits DuckDB raises, and the exact form runs (`exact_form`)."""
        if self.exact or not (at.is_decimal and at.precision > INT64_DIGITS):
            return None
        narrow = self.narrow(arg, x)
        return None if narrow is None else self.cast(exp.Sum(this=narrow[0]), T.Null, t, force=True)

    def narrow(self, e, x) -> tuple[exp.Expression, int] | None:
        """(SQL, its digits) of decimal `e` in DuckDB's own 64-bit decimal arithmetic: columns and literals
        of up to 18 digits, + - * of such, no casts. Where it does not raise, its value is e's exactly, of
        e's scale (s1 + s2 for *, max(s1, s2) for + -, as eidos's), and its digits are never more than e's
        type has, so an overflow of e's type raises here too (and then in the exact form, as eidos's
        error). None for anything else."""
        if isinstance(e, E.Alias):
            return self.narrow(e.expr, x)
        t = x.dtype(e)
        if not t.is_decimal:
            return None
        if isinstance(e, E.Column):
            return (x(e), t.precision) if t.precision <= INT64_DIGITS else None
        if not (isinstance(e, E.Call) and e.fn in ("add", "sub", "mul")):
            return None
        ts = x.operand_types(e)
        parts = []
        for a, at in zip(e.args, ts):
            if not at.is_decimal:
                return None
            if isinstance(a, E.Literal):
                part = (x.typed(a, at), at.precision) if at.precision <= INT64_DIGITS else None
            else:
                part = self.narrow(a, x) if x.dtype(a) == at else None
            if part is None:
                return None
            parts.append(part)
        (a, p1), (b, p2) = parts
        s1, s2 = ts[0].scale, ts[1].scale
        if e.fn == "mul":
            return binop(exp.Mul, a, b), min(INT64_DIGITS, p1 + p2)
        digits = max(p1 - s1, p2 - s2) + max(s1, s2) + 1
        if digits > INT64_DIGITS:   # DuckDB adds these in 128 bits
            return None
        return binop(exp.Add if e.fn == "add" else exp.Sub, a, b), digits

    def median(self, arg, at):
        """The two middle values of the sorted list (NaN last, as eidos orders), then their exact
        midpoint: a when equal, (a + b) / 2 where that cannot overflow, else a / 2 + b / 2. Integers
        of up to 32 bits add exactly in BIGINT (64-bit ones and decimals are typed gaps)."""
        x = self.cast(arg, at, T.Float64) if at.is_float else arg
        values = fn("list_sort", fn("list", x))  # nulls last: DuckDB's default order (sqlglot drops the arguments)
        n = exp.Count(this=arg)
        one, two = exp.Literal.number(1), exp.Literal.number(2)
        a = fn("list_extract", values, exp.Add(this=exp.IntDiv(this=exp.Paren(this=exp.Sub(this=n, expression=one)), expression=two),
                                                expression=one))
        b = fn("list_extract", values, exp.Add(this=exp.IntDiv(this=n, expression=two), expression=one))
        half = exp.Literal.number("2.0e0")
        if not at.is_float:
            total = self.cast(exp.Add(this=self.cast(a, at, T.Int64), expression=self.cast(b, at, T.Int64)),
                              T.Int64, T.Float64)
            return exp.Div(this=total, expression=half)
        limit = exp.Literal.number(repr(2.0**1022))
        small = exp.And(this=exp.LTE(this=exp.Abs(this=a), expression=limit),
                        expression=exp.LTE(this=exp.Abs(this=b), expression=limit))
        mid = case([(exp.EQ(this=a, expression=b), a),
                    (small, exp.Div(this=exp.Paren(this=exp.Add(this=a, expression=b)), expression=half))],
                   exp.Add(this=exp.Div(this=a, expression=half), expression=exp.Div(this=b, expression=half)))
        return self.cast(mid, T.Null, T.Float64, force=True)

    def matches(self, s, pattern):
        return fn("regexp_full_match", s, string(pattern), string("s"))

    regex = "re2"

    def search(self, s, pattern):
        return fn("regexp_matches", s, string(pattern), string("s"))

    def group(self, s, pattern):
        return fn("regexp_extract", s, string(f"^{pattern}$"), exp.Literal.number(1), string("s"))

    def scan_column(self, e, t, source=None):
        if isinstance(source, ArrowSource):  # an Arrow duration reads as an INTERVAL of microseconds
            return fn("epoch_us", e) if t == T.Duration else e
        return self.cast(e, T.Null, t, force=True)

    def scan(self, source, ctx):
        names = source.schema.names
        if isinstance(source, ArrowSource):
            # Registered under positional names: DuckDB folds identifier case, so 'a' and 'A' would clash.
            name = ctx.fresh("arrow")
            ctx.arrow[name] = source.table.rename_columns(list(slots(len(names))))
            return exp.Table(this=ident(name)), positional(names)
        if isinstance(source, FileSource) and not isinstance(source, ParquetSource):
            read = list(ctx.reading)   # CSV, NDJSON, IPC: read by pyarrow, as every lane reads them
            return self._stream(ctx, lambda: file_batches(source, read)), positional(read)
        if isinstance(source, ParquetSource):
            if len({n.casefold() for n in names}) < len(names) or any("://" in f for f in source.files):
                # DuckDB folds identifier case, so 'price' and 'PRICE' cannot both be named, and reads an object
                # store only with an extension and credentials of its own: pyarrow reads them
                read = list(ctx.reading)
                return self._stream(ctx, lambda: parquet_batches(source, read)), positional(read)
            return self._read_parquet(source, ctx)
        if isinstance(source, SqlSource) and source.scheme == "duckdb":
            if source.table is not None:
                return table_ref(source.table), by_name(names)
            return ctx.raw(source), by_name(names)
        raise UnsupportedError(f"the duckdb lane cannot read {source.describe()}")

    def _stream(self, ctx, make) -> exp.Table:
        """A source read by pyarrow, as every lane reads it, and scanned by DuckDB as an Arrow stream
        (registered under positional names; `make` gives a new stream each run)."""
        import pyarrow as pa

        def positional_stream() -> pa.RecordBatchReader:
            reader = make()
            schema = pa.schema([f.with_name(c) for f, c in zip(reader.schema, slots(len(reader.schema)))])
            return pa.RecordBatchReader.from_batches(schema, (b.rename_columns(schema.names) for b in reader))

        name = ctx.fresh("stream")
        ctx.arrow[name] = positional_stream
        return exp.Table(this=ident(name))

    def _read_parquet(self, source: ParquetSource, ctx) -> tuple[exp.Expression, dict]:
        """DuckDB's own parquet reader, columns by name (unique whatever their case); partition columns
        joined from a VALUES list of each file's values (eidos's, not DuckDB's reading of the paths)."""
        files = exp.Array(expressions=[string(f) for f in source.files])
        stored = [n for n in source.schema.names if n not in source.partitions]
        if not source.partitions:
            return exp.Table(this=fn("read_parquet", files)), by_name(stored)
        file, alias, parts = ctx.fresh("file"), ctx.fresh("parts"), ctx.fresh("p")
        keys = [f"{parts}_{k}" for k in range(len(source.partitions))]
        rows = [exp.Tuple(expressions=[string(f)] + [self.literal(v, source.schema[k]) for k, v in
                                                     zip(source.partitions, source.partition_row(i))])
                for i, f in enumerate(source.files)]
        values = exp.Values(expressions=rows, alias=exp.TableAlias(this=ident(alias),
                                                                   columns=[ident(c) for c in [file, *keys]]))
        read = exp.Table(this=fn("read_parquet", files, exp.EQ(this=exp.var("filename"), expression=string(file))),
                         alias=exp.TableAlias(this=ident(parts)))
        select = (exp.select(*[column(n, parts) for n in stored], *[column(k, alias) for k in keys])
                  .from_(read).join(values, on=exp.EQ(this=column(file, parts), expression=column(file, alias))))
        refs = by_name(stored) | {n: column(k) for n, k in zip(source.partitions, keys)}
        return exp.Subquery(this=select, alias=exp.TableAlias(this=ident(ctx.fresh("hive")))), refs


def describe(source: SqlSource) -> tuple[Schema, int | None]:
    """Schema of a table or query in a DuckDB file from a zero-row query; rows from DuckDB's catalog."""
    import duckdb

    path = path_of(source.uri)
    if path != ":memory:":
        import os

        if not os.path.exists(path):
            raise PlanError(f"cannot read {source.describe()}: no such database file {path!r}")
        regular_file(path)   # a FIFO or a device would block the open or never end
    con = duckdb.connect(path, read_only=path != ":memory:")
    try:
        utc(con)
        sandbox(con)
        rel = table_ref(source.table).sql("duckdb") if source.table is not None else f"({sql_guard.query_sql(source)})"
        arrow = con.sql(f"SELECT * FROM {rel} AS q LIMIT 0").to_arrow_table().schema
        schema = Schema.read(((f.name, f.type) for f in arrow), lambda t, c: T.from_arrow(t, column=c))
        rows = None
        if source.table is not None:
            name = source.table.split(".")[-1]
            got = con.execute("SELECT estimated_size FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()
            rows = int(got[0][0]) if len(got) == 1 and got[0][0] is not None else None
        return schema, rows
    finally:
        con.close()


def sandbox(con, files=(), folders=()) -> None:
    """Nothing run on `con` from now on may reach a file but `files` and `folders` (a plan's own
    data, a spill folder), attach a database, load an extension or change a setting (so its time
    zone, utc(), is set before). DuckDB would otherwise read a table name that looks like a file
    (`FROM "x"."csv"`) as that file."""
    def strings(items) -> str:
        return exp.Array(expressions=[string(os.fspath(i)) for i in items]).sql("duckdb")

    con.execute(f"SET allowed_paths = {strings(files)}")
    con.execute(f"SET allowed_directories = {strings(folders)}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


class Session:
    """Where a translated plan runs: this thread's cursor on the lane's one in-memory database
    (kept between runs; a new connection costs more than a small query), or a connection of its
    own for a DuckDB database file, for a plan with SQL of its own, and for runs with settings
    (an out-of-core memory limit). A plan's SQL (a query, a table's name) never reaches the
    shared database: it runs on a connection of its own, sandboxed to the plan's files.

    Database files are opened per run, read-only, and closed after it: a connection kept open
    would hold the file's lock, so neither another process nor this one (DuckDB refuses a second
    configuration of an open file) could write to it. Arrow tables are registered as views
    (DuckDB scans their buffers, nothing is copied) and unregistered after the run, so the kept
    cursor holds no user data between runs.
    """

    def __init__(self, query, settings: dict | None = None, *, private: bool = False):
        import duckdb

        paths = {path_of(s.uri) for s in query.sources if isinstance(s, SqlSource)}
        path = next(iter(paths)) if paths else ":memory:"
        self.views, self.arrow = list(query.arrow), query.arrow
        self.shared = not paths and not settings and not private
        self.own = bool(paths or settings)   # a connection of its own, not the in-memory database's cursor
        if self.shared:
            self.con = _cursor()
        else:   # a stream's own cursor (a run meanwhile cannot end its result), or a connection of its own
            if path != ":memory:":
                regular_file(path)
            self.con = (_cursor().cursor() if not paths and not settings else
                        duckdb.connect(path, read_only=path != ":memory:", config=dict(settings or {})))
            quiet(self.con)
        self.errors: list[BaseException] = []   # what streams read by pyarrow raised (DuckDB keeps only text)
        try:
            if paths:
                files = [f for s in query.sources for f in getattr(s, "files", ())]
                files += [f for s in query.sources if isinstance(s, FileSource) for f in s.paths]
                sandbox(self.con, files, [d for d in [(settings or {}).get("temp_directory")] if d])
            self._register_views(query.arrow)
        except BaseException:
            self.close()
            raise
        self.exact_sql = query.exact

    def _register_views(self, arrow: dict) -> None:
        for name, table in arrow.items():
            self.con.register(name, self._stream(table()) if callable(table) else table)

    def _stream(self, reader):
        import pyarrow as pa

        def batches():
            try:
                yield from reader
            except EidosError as e:
                self.errors.append(e)
                raise

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def exact(self, sql: str) -> None:
        """The exact float aggregates (eidos.hal.fsum over a list()) where the SQL calls them:
        registered once on the shared database (its cursors see them), per run elsewhere."""
        if not _CALLS_EXACT.search(sql):   # not "eidos_": every CTE's name has it
            return
        if self.own:
            _register(self.con)
            return
        with _lock:
            database = _database[os.getpid()]
            if _exact.get(os.getpid()) is not database:
                _register(database)
                _exact[os.getpid()] = database

    def fetch(self, sql: str):
        import duckdb

        self.exact(sql)   # the exact form calls the same float aggregates, if any
        try:
            return self._fetch(sql)
        except duckdb.OutOfRangeException:
            exact = self.exact_sql() if self.exact_sql is not None else sql
            if exact == sql:
                raise
        # DuckDB's own decimal arithmetic overflowed where eidos's may not (see INT64_DIGITS): the exact
        # form, over new streams of the sources read as streams (the first run consumed them)
        self.errors.clear()
        self._register_views({name: table for name, table in self.arrow.items() if callable(table)})
        return self._fetch(exact)

    def _fetch(self, sql: str):
        try:
            return self._relation(sql).to_arrow_table()
        except Exception:
            if self.errors:
                raise self.errors[0] from None
            raise

    def _relation(self, sql: str):
        """DuckDB's relation over `sql`, which reads its files again at every read. The shared cursor keeps the
        last few (a plan run again skips the Python layer's parse and bind of its text, about a millisecond);
        not where Arrow views are registered for the run, which the relation would outlive."""
        if not self.shared or self.views:
            return self.con.sql(sql)
        kept = _local.__dict__.setdefault((os.getpid(), "relations"), {})
        rel = kept.pop(sql, None)
        if rel is None:
            rel = self.con.sql(sql)
        kept[sql] = rel   # the most recent last
        if len(kept) > KEPT_RELATIONS:
            del kept[next(iter(kept))]
        return rel

    def fetch_profiled(self, sql: str, lines: list[str]):
        """`fetch`, with DuckDB's profile of the run (each operator with its rows and time) added to `lines`."""
        import json

        self.con.execute("PRAGMA enable_profiling='no_output'")
        try:
            table = self.fetch(sql)
            info = json.loads(self.con.get_profiling_information(format="json"))
        finally:
            self.con.execute("PRAGMA disable_profiling")

        def visit(op: dict, depth: int) -> None:
            lines.append(f"{'  ' * depth}{op.get('name', '?')}   {op.get('intermediate_rows', 0):,} rows   "
                         f"{op.get('timing', 0.0) * 1e3:.3f} ms")
            for child in op.get("children", ()):
                visit(child, depth + 1)

        for op in info.get("operator", ()):
            visit(op, 0)
        return table

    def batches(self, sql: str):
        """The result, batch by batch, as DuckDB produces it (a streaming result); in the exact form
        from the start where there is one, since batches handed on cannot be taken back."""
        sql = self.exact_sql() if self.exact_sql is not None else sql
        self.exact(sql)
        reader = self.con.sql(sql).to_arrow_reader(BATCH_ROWS)

        def read():
            try:
                yield from reader
            except Exception:
                if self.errors:
                    raise self.errors[0] from None
                raise

        return read()

    def close(self) -> None:
        if not self.shared:
            self.con.close()
            return
        for name in self.views:
            try:
                self.con.unregister(name)
            except Exception:  # noqa: BLE001, S110 - a cursor that cannot unregister is dropped below
                _local.__dict__.clear()


_local = threading.local()
_lock = threading.Lock()
_database: dict[int, object] = {}  # process id -> the in-memory DuckDB connection (not shared across fork)
_exact: dict[int, object] = {}     # process id -> the in-memory database that has the exact aggregates


_CALLS_EXACT = re.compile(r"\beidos_(?:sum|var|std)\(", re.IGNORECASE)


def _register(con) -> None:
    import functools

    import duckdb

    from eidos.hal import fsum

    for name in ("sum", "var", "std"):
        con.create_function(f"eidos_{name}", functools.partial(fsum.lists, name), [duckdb.list_type("DOUBLE")],
                            "DOUBLE", type="arrow", null_handling="special", side_effects=False)


def _cursor():
    """This thread's cursor on the process's in-memory DuckDB database (DuckDB connections are not
    safe to share between threads; cursors of one database are)."""
    pid = os.getpid()
    cur = _local.__dict__.get(pid)
    if cur is None:
        import duckdb

        with _lock:
            con = _database.get(pid)
            if con is None:
                _database.clear()  # a parent's connection after fork() is not ours to use
                con = _database[pid] = duckdb.connect(":memory:")
            cur = con.cursor()
            quiet(cur)
        _local.__dict__.clear()
        _local.__dict__[pid] = cur
    return cur


def quiet(con) -> None:
    """No progress bar: DuckDB draws one on stdout for a query that takes over two seconds, into the
    output of whatever program runs eidos (a pipe, `eidos run` without -o)."""
    con.execute("SET enable_progress_bar = false")
    utc(con)


def utc(con) -> None:
    """Instants (TIMESTAMPTZ) read in UTC whatever this machine's zone, as PostgreSQL's are: a DuckDB
    table's zoned column is Timestamp(us, 'UTC') everywhere (docs/semantics.md section 1)."""
    con.execute("SET TimeZone = 'UTC'")


def connect(query, settings: dict | None = None) -> Session:
    return Session(query, settings)


def open_stream(query, settings: dict | None = None) -> Session:
    """A session for one streamed run: the in-memory database through a cursor of its own."""
    return Session(query, settings, private=True)


# Relations the shared cursor keeps, by their SQL (Session._relation).
KEPT_RELATIONS = 16

# Rows per streamed batch: 60 of DuckDB's 2,048-row vectors (its row group), so a batch comes as soon
# as a row group's worth is ready and a consumer holds little at a time.
BATCH_ROWS = 122_880

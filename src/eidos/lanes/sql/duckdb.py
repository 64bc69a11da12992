"""DuckDB: the embedded default. Reads parquet, CSV, in-memory Arrow (registered, not copied)
and tables of one DuckDB database file; its integers raise on overflow like eidos's."""

from __future__ import annotations

import os
import threading

from sqlglot import exp

from eidos.errors import PlanError, UnsupportedError
from eidos.hal import sql_guard
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, CsvSource, ParquetSource, SqlSource
from eidos.lanes.sql.dialect import Dialect, _div
from eidos.lanes.sql.translate import by_name, fn, ident, positional, slots, string


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
    inexact_decimal_mean = True  # a SUM of DECIMAL(p > 18) may overflow 38 digits: fsum of doubles there
    types = {
        "Int8": "TINYINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
        "UInt8": "UTINYINT", "UInt16": "USMALLINT", "UInt32": "UINTEGER", "UInt64": "UBIGINT",
        "Float32": "FLOAT", "Float64": "DOUBLE", "Boolean": "BOOLEAN", "String": "VARCHAR",
        "Date": "DATE", "Timestamp": "TIMESTAMP",
    }

    def error(self, message, witness, t):
        return fn("error", string("eidos: " + message))

    def int_div(self, a, b, t=None):
        return exp.Paren(this=exp.IntDiv(this=a, expression=b))

    def is_nan(self, x):
        return fn("isnan", x)

    def float_sum(self, x):
        return fn("fsum", x)  # Kahan-Babuska summation

    def aggregate(self, fn_, arg, at, t):
        if fn_ == "mean" and at.is_decimal and at.precision <= 18:
            # The sum of decimals of up to 18 digits is exact in DuckDB's 128-bit SUM (no overflow
            # short of 10**20 rows), as semantics 14 asks, and cheaper than fsum of doubles (TPC-H Q1).
            total = self.cast(exp.Sum(this=arg), T.Null, T.Float64, force=True)
            return _div(total, self.cast(exp.Count(this=arg), T.Null, T.Float64, force=True))
        return super().aggregate(fn_, arg, at, t)

    def matches(self, s, pattern):
        return fn("regexp_full_match", s, string(pattern), string("s"))

    def group(self, s, pattern):
        return fn("regexp_extract", s, string(f"^{pattern}$"), exp.Literal.number(1), string("s"))

    def scan_column(self, e, t, source=None):
        if isinstance(source, ArrowSource):
            return e
        return self.cast(e, T.Null, t, force=True)

    def scan(self, source, ctx):
        names = source.schema.names
        if isinstance(source, ArrowSource):
            # Registered under positional names: DuckDB folds identifier case, so 'a' and 'A' would clash.
            name = ctx.fresh("arrow")
            ctx.arrow[name] = source.table.rename_columns(list(slots(len(names))))
            return exp.Table(this=ident(name)), positional(names)
        if isinstance(source, CsvSource):
            return exp.Table(this=self._read_csv(source)), positional(names)
        if isinstance(source, ParquetSource):
            files = exp.Array(expressions=[string(f) for f in source.files])
            return exp.Table(this=fn("read_parquet", files)), by_name(names)
        if isinstance(source, SqlSource) and source.scheme == "duckdb":
            if source.table is not None:
                return table_ref(source.table), by_name(names)
            return ctx.raw(source), by_name(names)
        raise UnsupportedError(f"the duckdb lane cannot read {source.describe()}")

    def _read_csv(self, source: CsvSource) -> exp.Expression:
        def named(key, value):
            return exp.EQ(this=exp.var(key), expression=value)

        columns = exp.Struct(expressions=[
            exp.PropertyEQ(this=string(c), expression=string(self.types[t.name] if not t.is_decimal
                                                            else f"DECIMAL({t.precision}, {t.scale})"))
            for c, t in zip(slots(len(source.schema)), source.schema.dtypes)])
        args = [string(source.path), named("header", exp.Boolean(this=source.has_header)),
                named("delim", string(source.delimiter)), named("columns", columns),
                # semantics 15: an empty field is null (quoted or not, strings too); all else is data
                named("nullstr", string("")), named("allow_quoted_nulls", exp.Boolean(this=True)),
                named("auto_detect", exp.Boolean(this=False))]
        return fn("read_csv", *args)


def describe(source: SqlSource) -> tuple[Schema, int | None]:
    """Schema of a table or query in a DuckDB file from a zero-row query; rows from DuckDB's catalog."""
    import duckdb

    path = path_of(source.uri)
    if path != ":memory:":
        import os

        if not os.path.exists(path):
            raise PlanError(f"cannot read {source.describe()}: no such database file {path!r}")
    con = duckdb.connect(path, read_only=path != ":memory:")
    try:
        sandbox(con)
        rel = table_ref(source.table).sql("duckdb") if source.table is not None else f"({sql_guard.query_sql(source)})"
        arrow = con.sql(f"SELECT * FROM {rel} AS q LIMIT 0").to_arrow_table().schema
        schema = Schema.from_arrow(arrow)
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
    data, a spill folder), attach a database, load an extension or change a setting. DuckDB would
    otherwise read a table name that looks like a file (`FROM "x"."csv"`) as that file."""
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

    def __init__(self, query, settings: dict | None = None):
        import duckdb

        paths = {path_of(s.uri) for s in query.sources if isinstance(s, SqlSource)}
        path = next(iter(paths)) if paths else ":memory:"
        self.views = list(query.arrow)
        self.shared = not paths and not settings
        if self.shared:
            self.con = _cursor()
        else:
            self.con = duckdb.connect(path, read_only=path != ":memory:", config=dict(settings or {}))
        try:
            if paths:
                files = [f for s in query.sources for f in getattr(s, "files", ())]
                files += [s.path for s in query.sources if isinstance(s, CsvSource)]
                sandbox(self.con, files, [d for d in [(settings or {}).get("temp_directory")] if d])
            for name, table in query.arrow.items():
                self.con.register(name, table)
        except BaseException:
            self.close()
            raise

    def fetch(self, sql: str):
        return self.con.sql(sql).to_arrow_table()

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
        _local.__dict__.clear()
        _local.__dict__[pid] = cur
    return cur


def connect(query, settings: dict | None = None) -> Session:
    return Session(query, settings)

"""Loading in-memory test tables into DuckDB, SQLite and PostgreSQL, so the cross-lane suite can
run the same plans on the pushdown lanes as on the reference.

    flow = load_table("sqlite:///tmp/x.db", "t", table)   # creates table "t", returns read_sql(...)

`load_table` raises UnsupportedError when the database cannot hold a column exactly (SQLite:
only Int64, Float64 without NaN, Boolean, String and Date (ISO text); PostgreSQL: no Int8 or unsigned integers),
so a suite can skip that lane for that data instead of comparing different plans.
"""

from __future__ import annotations

import math

import pyarrow as pa

from eidos.errors import UnsupportedError
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema
from eidos.ir.uri import redact

# What each database holds exactly, so reading the table back gives the same eidos schema.
HOLDS = {
    "duckdb": {t.name for t in T.ALL_SIMPLE if t != T.Duration} | {"Decimal", "Timestamp(tz)", "Struct", "Timestamp(ns)"},
    "sqlite": {"Int64", "Float64", "Boolean", "String", "Date", "Binary"},
    "postgresql": {"Int16", "Int32", "Int64", "Float32", "Float64", "Boolean", "String", "Date",
                   "Timestamp", "Decimal", "List", "Binary", "Time", "Timestamp(tz)"},
}


def _kinds(t: T.DType) -> list[str]:
    """The type kinds a column of `t` holds: its own and those of its elements."""
    if isinstance(t, T.ListType):
        return ["List"] + _kinds(t.inner)
    return list(t.kinds)


def _lane(uri: str) -> str:
    scheme = uri.split(":", 1)[0].lower()
    return {"postgres": "postgresql"}.get(scheme, scheme)


def representable(schema: Schema, uri: str) -> list[str]:
    """The columns (with their types) the database at `uri` cannot hold exactly; empty when all fit."""
    holds = HOLDS[_lane(uri)]
    lists_of_lists = _lane(uri) == "postgresql"  # its arrays have dimensions, not arrays as elements
    return [f"{n}: {t}" for n, t in schema.items()
            if not set(_kinds(t)) <= holds or lists_of_lists and _kinds(t)[:2] == ["List", "List"]]


def load_table(uri: str, name: str, table: pa.Table, *, replace: bool = True):
    """Create table `name` at `uri` holding `table` (eidos types); returns `ei.read_sql(uri, table=name)`."""
    from eidos.flow.expr import col
    from eidos.flow.read import from_arrow, read_sql
    from eidos.lanes.sql.duckdb import table_ref
    from eidos.lanes.sql.execute import dialect
    from eidos.lanes.sql.translate import ident

    lane = _lane(uri)
    table = from_arrow(table).plan.source.table  # eidos types, as the reference lane reads it
    schema = Schema.from_arrow(table.schema)
    bad = representable(schema, uri)
    if lane == "sqlite":
        bad += [f"{f.name}: NaN" for f in table.schema if pa.types.is_floating(f.type)
                and any(isinstance(v, float) and math.isnan(v) for v in table.column(f.name).to_pylist())]
    if lane in ("duckdb", "sqlite"):  # column names are case-insensitive there
        folded = [n.lower() for n in schema.names]
        bad += [f"{n}: a second column named so, ignoring case" for i, n in enumerate(schema.names)
                if n.lower() in folded[:i]]
    if lane == "postgresql":
        bad += [f"{n}: a name longer than 63 bytes" for n in schema.names if len(n.encode()) > 63]
    if bad:
        raise UnsupportedError(f"{lane} cannot hold column {', '.join(bad)} exactly ({redact(uri)})")
    d = dialect(lane)
    quoted = table_ref(name).sql(d.sqlglot)
    cols = ", ".join(f"{ident(n).sql(d.sqlglot)} {_ddl_type(lane, d, t)}" for n, t in schema.items())
    if lane == "duckdb":
        _load_duckdb(uri, quoted, cols, table, replace)
    else:
        _load_adbc(lane, uri, name, quoted, cols, table, replace)
    flow = read_sql(uri, table=name)
    zoned = {n: t.tz for n, t in schema.items() if t.is_timestamp and t.tz and n in flow.schema and flow.schema[n] != t}
    if zoned:  # the databases keep the instant, not the zone it was shown in: show it there again
        flow = flow.with_columns(**{n: col(n).dt.convert_time_zone(tz) for n, tz in zoned.items()})
    if flow.schema != schema:
        raise UnsupportedError(f"{lane} reads the table back as {flow.schema}, not {schema}")
    return flow


# SQLite's declared types that the sqlite lane reads back as these eidos types.
SQLITE_DDL = {"Int64": "INTEGER", "Float64": "REAL", "Boolean": "BOOLEAN", "String": "TEXT", "Date": "DATE",
              "Binary": "BLOB"}


def _ddl_type(lane, d, t) -> str:
    if lane == "sqlite":
        return SQLITE_DDL[t.name]
    return d.sql_type(t).sql(d.sqlglot)


def _load_duckdb(uri, quoted, cols, table, replace):
    import duckdb

    from eidos.lanes.sql.duckdb import path_of

    con = duckdb.connect(path_of(uri))
    try:
        if replace:
            con.execute(f"DROP TABLE IF EXISTS {quoted}")
        con.execute(f"CREATE TABLE {quoted} ({cols})")
        con.register("__eidos_load", table)
        con.execute(f"INSERT INTO {quoted} SELECT * FROM __eidos_load")
    finally:
        con.close()


def _load_adbc(lane, uri, name, quoted, cols, table, replace):
    if lane == "sqlite":
        import adbc_driver_sqlite.dbapi as adbc

        from eidos.lanes.sql.sqlite import path_of
        con = adbc.connect(path_of(uri))
    else:   # a connection the postgresql lane keeps (opening one costs a quarter of a second)
        from eidos.lanes.sql.postgresql import _IDLE
        con = _IDLE.take(uri)
    arrays = []
    for col in table.columns:
        if pa.types.is_large_string(col.type) or pa.types.is_large_list(col.type) or pa.types.is_large_binary(col.type):
            col = col.cast(_small(col.type))
        elif lane == "sqlite" and pa.types.is_boolean(col.type):
            col = col.cast(pa.int64())
        elif lane == "sqlite" and pa.types.is_date(col.type):
            col = col.cast(pa.string())  # ISO text, as the sqlite lane reads dates
        arrays.append(col)
    table = pa.Table.from_arrays(arrays, names=table.column_names)
    cur = con.cursor()
    try:
        if replace:
            cur.execute(f"DROP TABLE IF EXISTS {quoted}")
        cur.execute(f"CREATE TABLE {quoted} ({cols})")
        if table.num_rows:
            parts = name.split(".")
            cur.adbc_ingest(parts[-1], table, mode="append", db_schema_name=parts[0] if len(parts) == 2 else None)
        con.commit()
    except BaseException:
        cur.close()
        con.close()
        raise
    cur.close()
    if lane == "sqlite":
        con.close()
    else:
        _IDLE.give_back(uri, con)


def _small(t: pa.DataType) -> pa.DataType:
    """`t` with 32-bit offsets (string, list), as the ADBC drivers ingest them."""
    if pa.types.is_large_list(t):
        return pa.list_(_small(t.value_type))
    if pa.types.is_large_binary(t):
        return pa.binary()
    return pa.string() if pa.types.is_large_string(t) else t


# ---------------------------------------------------------------- loaders for test suites

POSTGRES_URI = "postgresql://postgres@127.0.0.1:5432/test"
_pg_schema: list[str] = []


def postgres_available(uri: str = POSTGRES_URI) -> str | None:
    """None when a PostgreSQL server answers at `uri`, else why not (for a skip reason)."""
    try:
        import adbc_driver_postgresql.dbapi as adbc
    except ImportError as e:
        return f"adbc_driver_postgresql is not installed ({e}): pip install 'eidos[sql]'"
    try:
        adbc.connect(uri).close()
    except Exception as e:  # noqa: BLE001 - any failure to connect is a reason to skip
        return f"no PostgreSQL server answers at {redact(uri)}: {type(e).__name__}"
    return None


def postgres_schema(uri: str = POSTGRES_URI) -> str:
    """A schema unique to this process, created once and dropped (with its tables) at exit."""
    if not _pg_schema:
        import atexit
        import os
        import uuid

        import adbc_driver_postgresql.dbapi as adbc

        name = f"eidos_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with adbc.connect(uri) as con, con.cursor() as cur:
            cur.execute(f'CREATE SCHEMA "{name}"')
            con.commit()

        def drop() -> None:
            try:
                with adbc.connect(uri) as con, con.cursor() as cur:
                    cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                    con.commit()
            except Exception:  # noqa: BLE001, S110 - best effort at exit
                pass

        atexit.register(drop)
        _pg_schema.append(name)
    return _pg_schema[0]


def loader(lane: str):
    """(folder, name, table) -> Flow over the table stored where `lane` reads it; for tests/lanes LOADERS.

    DuckDB and SQLite get a file in `folder`; PostgreSQL a table in a schema unique to the process.
    Raises UnsupportedError when the database cannot hold the table exactly.
    """
    import os

    if lane == "postgresql":
        def load_pg(folder, name, table):
            # The folder is unique per use; its name keeps tables of different uses apart in one schema.
            return load_table(POSTGRES_URI, f"{postgres_schema()}.{os.path.basename(str(folder))}_{name}", table)
        return load_pg
    ext = {"duckdb": "duckdb", "sqlite": "sqlite"}[lane]

    def load_file(folder, name, table):
        return load_table(f"{lane}:///{os.path.join(str(folder), 'data.' + ext)}", name, table)
    return load_file

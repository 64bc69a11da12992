"""flow.write_database: a result into a table of DuckDB, SQLite or PostgreSQL, in one transaction.

The table's name is untrusted text: it is only ever a quoted identifier (schema.table split at the dot), never
SQL. Each eidos type maps to one column type that holds every value exactly, and reads back as the same value
(a narrower integer comes back as the database's integer); a type without one is refused before anything is
written. Appending needs the table's columns to read as the flow's. The table is created (or replaced) and
filled in one transaction: any failure, the flow's own midway included, rolls back and leaves the table as it
was. SQLite and PostgreSQL are written through ADBC (bulk ingestion, PostgreSQL's COPY), DuckDB through its
own connection scanning the Arrow stream.
"""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, PlanError, UnsupportedError, shown
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema
from eidos.lanes.sql.duckdb import path_of, table_ref
from eidos.lanes.sql.postgresql import PostgresDialect
from eidos.lanes.sql.translate import ident

MODES = ("fail", "append", "replace")
_INTS = {"sqlite": dict.fromkeys(("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32"), "INTEGER"),
         "postgresql": {"Int8": "SMALLINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
                        "UInt8": "SMALLINT", "UInt16": "INTEGER", "UInt32": "BIGINT"}}
TYPES = {"sqlite": {**_INTS["sqlite"], "Float32": "REAL", "Float64": "REAL", "Boolean": "BOOLEAN",
                    "String": "TEXT", "Date": "DATE"},
         "postgresql": {**_INTS["postgresql"], "Float32": "REAL", "Float64": "DOUBLE PRECISION",
                        "Boolean": "BOOLEAN", "String": "TEXT", "Date": "DATE", "Timestamp": "TIMESTAMP",
                        "Time": "TIME"}}


def column_type(lane: str, t: T.DType, column: str) -> str | None:
    """The column type that holds `t` exactly on `lane` (None on DuckDB: Arrow's own types are kept)."""
    if lane == "duckdb":
        return None
    if t.is_decimal and lane == "postgresql":
        return f"NUMERIC({t.precision}, {t.scale})"
    if t.is_timestamp and lane == "postgresql" and t.unit != "ns":   # microseconds hold ms; an instant its zone's
        return PostgresDialect().sql_type(t).sql("postgres")   # the SQL lane's own table: TIMESTAMP, TIMESTAMPTZ
    found = TYPES[lane].get(t.name) if not t.is_timestamp or t == T.Timestamp else None
    if found is None:
        raise UnsupportedError(f"write_database to {lane}: column {column!r} is {t}, which no {lane} column type "
                               f"holds exactly; cast it first (types {lane} takes: "
                               f"{', '.join(sorted(TYPES[lane]))}{', Decimal' * (lane == 'postgresql')})")
    return found


def write(lane: str, uri: str, table: str, schema: Schema, batches, if_table_exists: str) -> int:
    """Write `batches` (of `schema`) into `table` at `uri`; the number of rows written."""
    if not isinstance(table, str) or not table.strip() or "\x00" in table or len(table.split(".")) > 2:
        raise PlanError(f"write_database takes a table name, 'table' or 'schema.table', got {table!r}")
    if if_table_exists not in MODES:
        raise PlanError(f"write_database if_table_exists must be one of {', '.join(MODES)}, got {if_table_exists!r}")
    types = [column_type(lane, t, n) for n, t in schema.items()]
    exists = _exists(lane, uri, table, schema, if_table_exists)
    ref = table_ref(table)
    sql = {"duckdb": "duckdb", "sqlite": "sqlite", "postgresql": "postgres"}[lane]
    failures: list[BaseException] = []
    written = [0]

    def kept():
        """The batches, keeping what the flow raised (a driver reports only its own error)."""
        try:
            for batch in batches:
                written[0] += batch.num_rows
                yield _stored(lane, batch)
        except BaseException as e:
            failures.append(e)
            raise

    target = _stored(lane, schema.to_arrow().empty_table()).schema
    reader = pa.RecordBatchReader.from_batches(target, kept())
    con = _connect(lane, uri)
    try:
        cur = con if lane == "duckdb" else con.cursor()   # a DuckDB cursor is a connection of its own
        if exists and if_table_exists == "replace":
            cur.execute(f"DROP TABLE {ref.sql(sql)}")
        create = not exists or if_table_exists == "replace"
        if lane == "duckdb":
            cur.register("__eidos_rows", reader)
            cur.execute((f"CREATE TABLE {ref.sql(sql)} AS " if create else f"INSERT INTO {ref.sql(sql)} ") +
                        "SELECT * FROM __eidos_rows")
            cur.unregister("__eidos_rows")
        else:
            if create:
                columns = ", ".join(f"{ident(n).sql(sql)} {t}" for n, t in zip(schema.names, types))
                cur.execute(f"CREATE TABLE {ref.sql(sql)} ({columns})")
            cur.adbc_ingest(ref.name, reader, mode="append", db_schema_name=ref.db or None)
        con.commit()
        return written[0]
    except BaseException as e:
        con.rollback()
        if failures and isinstance(failures[0], EidosError):
            raise failures[0] from None
        if isinstance(e, (EidosError, KeyboardInterrupt, SystemExit)):
            raise
        raise ExecutionError(f"write_database into {table!r} at {shown(uri.split('?')[0])} failed, and nothing "
                             f"was written: {type(e).__name__}: {e}") from e
    finally:
        con.close()


def read_back(lane: str, t: T.DType) -> T.DType:
    """The type a column eidos creates for `t` reads back as (eidos.lanes.sql's describe)."""
    if lane == "duckdb":
        return t
    if lane == "sqlite" and t.name in _INTS["sqlite"]:
        return T.Int64
    if lane == "sqlite" and t == T.Float32:
        return T.Float64
    if t.is_timestamp:   # PostgreSQL keeps microseconds, and an instant (read in UTC) rather than its zone
        return T.Datetime("us", "UTC" if t.tz else None)
    return {"SMALLINT": T.Int16, "INTEGER": T.Int32, "BIGINT": T.Int64}.get(_INTS["postgresql"].get(t.name), t)


def _stored(lane: str, batch):
    """A batch as the database stores it: SQLite holds a date as ISO text."""
    if lane != "sqlite" or not any(pa.types.is_date(f.type) for f in batch.schema):
        return batch
    arrays = [c.cast(pa.string()) if pa.types.is_date(c.type) else c for c in batch.columns]
    return type(batch).from_arrays(arrays, names=batch.schema.names)


def _connect(lane: str, uri: str):
    if lane == "duckdb":
        import duckdb

        con = duckdb.connect(path_of(uri))
        con.begin()
        return con
    if lane == "sqlite":
        import adbc_driver_sqlite.dbapi as adbc

        return adbc.connect(path_of(uri))
    import adbc_driver_postgresql.dbapi as adbc

    return adbc.connect(uri)


def _exists(lane: str, uri: str, table: str, schema: Schema, mode: str) -> bool:
    """Whether the table exists (as the lane describes it); a PlanError for mode 'fail', or to append to a
    table whose columns do not read as those of a table made for the flow."""
    from eidos.ir.sources import SqlSource
    from eidos.lanes.sql.execute import describe

    try:
        found, _ = describe(lane, SqlSource(Schema(()), uri=uri, table=table))
    except EidosError:
        return False   # no such table or database file: made anew
    if mode == "fail":
        raise PlanError(f"write_database: table {table!r} exists; pass if_table_exists='append' or 'replace'")
    want = Schema(tuple((n, read_back(lane, t)) for n, t in schema.items()))
    if mode == "append" and found != want:
        raise PlanError(f"write_database cannot append to {table!r}: its columns are {found.text()}, a table made "
                        f"for the flow would have {want.text()}; select and cast the flow's columns to the table's")
    return True

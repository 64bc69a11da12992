"""flow.write_database into SQLite, DuckDB and PostgreSQL: values read back exactly, the three modes, one
transaction (a flow failing midway leaves the table as it was), names quoted, types refused that no column
type holds exactly."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pyarrow as pa
import pytest

import eidos as ei
from eidos.errors import ExecutionError, PlanError, UnsupportedError
from eidos.hal import registry
from eidos.hal.lane import Backend


@pytest.fixture(params=["sqlite", "duckdb", "postgresql"])
def target(request, tmp_path):
    """(lane, connection uri, a fresh table name) for each database."""
    pytest.importorskip("adbc_driver_sqlite" if request.param == "sqlite" else "duckdb")
    table = f"t_{uuid.uuid4().hex[:8]}"
    if request.param == "postgresql":
        schema = request.getfixturevalue("pg_schema")
        return "postgresql", request.getfixturevalue("pg_uri"), f"{schema}.{table}"
    return request.param, f"{request.param}:///{tmp_path / 'w.db'}", table


DATA = pa.table({"i": pa.array([1, None, -3], pa.int32()), "n": pa.array([2**62, 0, None], pa.int64()),
                 "x": [0.1, None, -2.5], "s": ["a", "é'\"", None], "b": [True, None, False],
                 "d": [datetime.date(2024, 2, 29), None, datetime.date(1970, 1, 1)]})


def read(uri: str, table: str) -> dict:
    return ei.read_sql(uri, table=table).run(engine="reference").to_pydict()


def test_values_read_back_exactly(target):
    lane, uri, table = target
    extra = {}
    if lane != "sqlite":
        extra = {"m": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-99.99")], pa.decimal128(10, 2)),
                 "ts": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5, 6), None, None], pa.timestamp("us"))}
    flow = ei.from_arrow(pa.table({**{n: DATA[n] for n in DATA.column_names}, **extra}))
    assert flow.write_database(table, uri) == 3
    assert read(uri, table) == flow.run().to_pydict()


class Failing(Backend):
    """Yields one batch of the plan's rows, then fails."""

    name, kind = "failing-db", "vector"

    def execute(self, plan):
        raise ExecutionError("engine on fire")

    def execute_stream(self, plan):
        schema = plan.schema.to_arrow()
        yield pa.record_batch([pa.array([None], t) for t in schema.types], schema=schema)
        raise ExecutionError("engine on fire")


def test_modes_and_a_failure_midway_leave_the_table_as_it_was(target):
    lane, uri, table = target
    flow = ei.from_pydict({"k": [1, 2], "v": ["a", "b"]})
    flow.write_database(table, uri)
    with pytest.raises(PlanError, match="exists; pass if_table_exists='append' or 'replace'"):
        flow.write_database(table, uri)
    assert flow.write_database(table, uri, if_table_exists="append") == 2
    assert read(uri, table) == {"k": [1, 2, 1, 2], "v": ["a", "b", "a", "b"]}
    registry.register_backend("failing-db", Failing())
    try:
        for mode in ("append", "replace"):
            with pytest.raises(ExecutionError, match="engine on fire"):
                flow.write_database(table, uri, if_table_exists=mode, engine="failing-db")
            assert read(uri, table) == {"k": [1, 2, 1, 2], "v": ["a", "b", "a", "b"]}
        with pytest.raises(ExecutionError, match="engine on fire"):
            flow.write_database(table + "_new", uri, engine="failing-db")
    finally:
        registry.unregister_backend("failing-db")
    with pytest.raises(PlanError):
        ei.read_sql(uri, table=table + "_new")
    assert ei.from_pydict({"k": [9], "v": ["z"]}).write_database(table, uri, if_table_exists="replace") == 1
    assert read(uri, table) == {"k": [9], "v": ["z"]}
    with pytest.raises(PlanError, match="cannot append to .*its columns are"):
        ei.from_pydict({"v": ["z"], "k": [9]}).write_database(table, uri, if_table_exists="append")


def test_a_hostile_name_is_a_quoted_name(target):
    lane, uri, table = target
    ei.from_pydict({"a": [1]}).write_database(table, uri)
    prefix = table.rsplit(".", 1)[0] + "." if "." in table else ""
    hostile = f'{prefix}x"; DROP TABLE "{table.rsplit(".", 1)[-1]}"; --'
    ei.from_pydict({"a": [2]}).write_database(hostile, uri)
    assert read(uri, hostile) == {"a": [2]} and read(uri, table) == {"a": [1]}
    for bad in ("", "a.b.c"):
        with pytest.raises(PlanError, match="takes a table name"):
            ei.from_pydict({"a": [1]}).write_database(bad, uri)
    with pytest.raises(PlanError, match="if_table_exists must be one of fail, append, replace"):
        ei.from_pydict({"a": [1]}).write_database(table, uri, if_table_exists="upsert")


def test_types_no_column_holds_exactly_are_refused(target):
    lane, uri, table = target
    if lane == "duckdb":
        pytest.skip("DuckDB holds every eidos type as it is")
    refused = {"u": pa.array([2**64 - 1], pa.uint64())}
    if lane == "sqlite":
        refused["m"] = pa.array([decimal.Decimal("0.1")], pa.decimal128(5, 1))
    for name, values in refused.items():
        with pytest.raises(UnsupportedError, match=f"column '{name}' is .*which no {lane} column type holds exactly"):
            ei.from_arrow(pa.table({name: values})).write_database(table, uri)
    with pytest.raises(PlanError):
        ei.read_sql(uri, table=table)


def test_a_connection_that_is_no_database_uri_is_refused_unshown():
    with pytest.raises(PlanError, match="takes a connection uri") as error:
        ei.from_pydict({"a": [1]}).write_database("t", "mysql://root:hunter2@db/x")
    assert "hunter2" not in str(error.value)


def test_a_flow_may_write_into_the_database_it_reads(target):
    lane, uri, table = target
    ei.from_pydict({"a": [1, 2]}).write_database(table, uri)
    source = ei.read_sql(uri, table=table)
    assert source.filter(ei.col("a") > 1).write_database(table + "_copy", uri) == 1
    assert source.write_database(table, uri, if_table_exists="append") == 2
    assert read(uri, table + "_copy") == {"a": [2]} and sorted(read(uri, table)["a"]) == [1, 1, 2, 2]


def test_zones_times_and_nanoseconds_write_or_refuse(target):
    """A zoned timestamp is written as the instant (TIMESTAMPTZ) and a time of day as TIME where the database
    has them; nanoseconds are refused where they would be cut to microseconds."""
    lane, uri, table = target
    at = datetime.datetime(2024, 10, 27, 0, 30, tzinfo=datetime.timezone.utc)
    zoned = ei.from_arrow(pa.table({"k": [1, 2], "z": pa.array([at, None], pa.timestamp("us", "Europe/Berlin")),
                                    "t": pa.array([datetime.time(13, 45, 12, 5), None], pa.time64("us"))}))
    if lane == "sqlite":
        with pytest.raises(UnsupportedError, match="no sqlite column type holds exactly"):
            zoned.write_database(table, uri)
        return
    assert zoned.write_database(table, uri) == 2
    back = read(uri, table)
    assert back["z"][0] == at and back["z"][1] is None and back["t"] == [datetime.time(13, 45, 12, 5), None]
    nanos = ei.from_arrow(pa.table({"n": pa.array([1], pa.timestamp("ns"))}))
    if lane == "postgresql":
        with pytest.raises(UnsupportedError, match="no postgresql column type holds exactly"):
            nanos.write_database(table + "_ns", uri)


def test_postgresql_timestamps_take_the_sql_lanes_own_types(monkeypatch):
    """A timestamp column is created as the PostgreSQL dialect's table says (one table of types, not two)."""
    from eidos.lanes.sql import write
    from eidos.lanes.sql.postgresql import PostgresDialect

    zoned, naive = ei.Datetime("ms", "Europe/Berlin"), ei.Datetime("ms")
    assert (write.column_type("postgresql", zoned, "z"), write.column_type("postgresql", naive, "n")) == \
        ("TIMESTAMPTZ", "TIMESTAMP")
    monkeypatch.setitem(PostgresDialect.types, "Timestamp(ms, tz)", "TIMESTAMP")   # a change there shows here
    assert write.column_type("postgresql", zoned, "z") == "TIMESTAMP"

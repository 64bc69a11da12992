"""The SQL a plan carries is one read-only SELECT (a query source) or a table's name (a table
source), in every dialect, whether the plan was built with read_sql or read from a JSON file; and
no plan changes a connection eidos shares between plans."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col
from eidos.errors import EidosError, ExecutionError, PlanError
from eidos.hal.lane import installed
from eidos.testing.databases import POSTGRES_URI, load_table, postgres_available, postgres_schema

LANES = ["duckdb", "sqlite", "postgresql"]


@pytest.fixture
def db(tmp_path):
    """db(lane) -> (uri, name of a table holding a = 1, 2, 3) in a database that lane reads."""
    def make(lane: str):
        needs = {"duckdb": "duckdb", "sqlite": "adbc_driver_sqlite", "postgresql": "adbc_driver_postgresql"}[lane]
        if not installed(needs) or not installed("sqlglot"):
            pytest.skip(f"{needs} is not installed")
        data = pa.table({"a": pa.array([1, 2, 3], pa.int64())})
        if lane == "postgresql":
            why = postgres_available()
            if why:
                pytest.skip(why)
            name = f"{postgres_schema()}.t_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
            load_table(POSTGRES_URI, name, data)
            return POSTGRES_URI, name
        uri = f"{lane}:///{tmp_path / ('data.' + lane)}"
        load_table(uri, "t", data)
        return uri, "t"
    return make


def _with_query(flow: ei.Flow, query: str) -> ei.Flow:
    """The flow read back from its JSON with its query source's text replaced: a plan file says what it likes."""
    doc = json.loads(flow.to_json())

    def swap(j):
        if isinstance(j, dict):
            if j.get("source") == "sql":
                j["query"] = query
            for v in j.values():
                swap(v)
        elif isinstance(j, list):
            for v in j:
                swap(v)
    swap(doc)
    return ei.Flow.from_json(json.dumps(doc))


# (lane, query, what the refusal names)
REFUSED = [
    # a query that closes its own sub-select, then runs more statements
    ("duckdb", "SELECT 1 AS a) AS x; COPY (SELECT 42 AS z) TO '{out}'; SELECT * FROM (SELECT 1 AS a", "not SQL"),
    ("duckdb", "SELECT 1 AS a) AS x; SET memory_limit='1MB'; SELECT * FROM (SELECT 1 AS a", "not SQL"),
    ("duckdb", "SELECT 1 AS a; COPY (SELECT 42 AS z) TO '{out}'", "2 statements"),
    ("duckdb", "COPY (SELECT 42 AS z) TO '{out}'", "COPY"),
    ("duckdb", "SET memory_limit='1MB'", "SET"),
    ("duckdb", "PRAGMA threads=1", "PRAGMA"),
    ("duckdb", "ATTACH '{out}' AS other", "ATTACH"),
    ("duckdb", "INSTALL httpfs", "INSTALL"),
    ("duckdb", "CREATE TABLE x AS SELECT 1 AS a", "CREATE"),
    ("duckdb", "SELECT 1 AS a INTO x", "INTO"),
    ("duckdb", "SELECT * FROM read_csv('/etc/passwd')", "read_csv"),
    ("duckdb", "SELECT content AS a FROM read_text('/etc/passwd')", "read_text"),
    ("duckdb", "SELECT file AS a FROM glob('/etc/*')", "glob"),
    ("duckdb", "SELECT * FROM query('SELECT 1 AS a')", "query"),
    ("duckdb", "SELECT * FROM '/etc/passwd.csv'", "as a file"),
    ("duckdb", "SELECT setseed(0.5) AS a", "setseed"),
    ("duckdb", "SELECT nextval('s') AS a", "nextval"),
    ("duckdb", "SELECT * FROM duckdb_settings()", "duckdb_settings"),
    ("duckdb", "SELECT * FROM t, LATERAL read_parquet('{out}')", "read_parquet"),
    ("duckdb", "SELECT * FROM __eidos_q1", "eidos keeps"),
    ("postgresql", "SELECT 1 AS a; DROP TABLE t", "2 statements"),
    ("postgresql", "WITH x AS (DELETE FROM t RETURNING a) SELECT a FROM x", "DELETE"),
    ("postgresql", "WITH x AS (INSERT INTO t VALUES (1) RETURNING a) SELECT a FROM x", "INSERT"),
    ("postgresql", "SELECT a INTO x FROM t", "INTO"),
    ("postgresql", "SELECT a FROM t FOR UPDATE", "FOR UPDATE"),
    ("postgresql", "SELECT pg_read_file('/etc/passwd') AS a", "pg_read_file"),
    ("postgresql", "SELECT lo_export(1, '{out}') AS a", "lo_export"),
    ("postgresql", "SELECT pg_catalog.set_config('work_mem', '64kB', false) AS a", "set_config"),
    ("postgresql", "SELECT pg_sleep(30) AS a", "pg_sleep"),
    ("postgresql", "SELECT * FROM dblink('dbname=test', 'SELECT 1') AS x(a int)", "dblink"),
    ("postgresql", "SELECT query_to_xml('DROP TABLE t', true, true, '') AS a", "query_to_xml"),
    ("postgresql", "COPY (SELECT 1) TO PROGRAM 'id'", "COPY"),
    ("postgresql", "DO $$ BEGIN DROP TABLE t; END $$", "DO"),
    ("postgresql", "SELECT setval('s', 1) AS a", "setval"),
    ("sqlite", "SELECT 1 AS a; DELETE FROM t", "2 statements"),
    ("sqlite", "ATTACH '{out}' AS other", "ATTACH"),
    ("sqlite", "PRAGMA writable_schema = 1", "PRAGMA"),
    ("sqlite", "SELECT load_extension('/tmp/evil.so') AS a", "load_extension"),
    ("sqlite", "SELECT readfile('/etc/passwd') AS a", "readfile"),
    ("sqlite", "SELECT writefile('{out}', 'x') AS a", "writefile"),
    ("sqlite", "INSERT INTO t VALUES (4)", "INSERT"),
]


@pytest.mark.parametrize("lane,query,what", REFUSED, ids=[f"{lane}-{i}" for i, (lane, _, _) in enumerate(REFUSED)])
def test_only_one_read_only_select_is_run(lane, query, what, db, tmp_path):
    uri, table = db(lane)
    out = tmp_path / "written"
    query = query.replace("{out}", str(out)).replace(" t,", f" {table},").replace("FROM t", f"FROM {table}")
    with pytest.raises(PlanError, match=what) as e:
        ei.read_sql(uri, query=query)
    assert lane in str(e.value) or "query source" in str(e.value)
    # the same text in a plan file, which never passed through read_sql: refused where it would run
    good = ei.read_sql(uri, query=f"SELECT a FROM {table}")
    with pytest.raises(PlanError, match=what):
        _with_query(good, query).run()
    assert not out.exists()
    assert good.run().to_pydict() == {"a": [1, 2, 3]}   # the database is as it was


@pytest.mark.parametrize("lane", LANES)
def test_read_only_selects_run(lane, db):
    uri, t = db(lane)
    series = {"duckdb": "SELECT range AS a FROM range(1, 4)", "sqlite": "SELECT CAST(value AS INTEGER) AS a FROM json_each('[1,2,3]')",
              "postgresql": "SELECT g AS a FROM generate_series(1, 3) AS g"}[lane]
    for query in (f"SELECT a FROM {t} -- a comment\n;", f"/* first */ SELECT a FROM {t} WHERE a IN (SELECT a FROM {t})",
                  f"WITH w AS (SELECT a FROM {t}) SELECT a FROM w", f"SELECT a FROM {t} WHERE a < 3 UNION ALL SELECT 3",
                  series):
        flow = ei.read_sql(uri, query=query)
        assert sorted(flow.run().column("a").to_pylist()) == [1, 2, 3], query
        assert sorted(_with_query(flow, query).run().column("a").to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize("lane", LANES)
def test_a_table_is_a_name_never_sql(lane, db):
    uri, t = db(lane)
    for name in (f"{t}; DROP TABLE {t}", f"{t} --", f"({t})"):
        with pytest.raises(PlanError):
            ei.read_sql(uri, table=name)
    for name in ("", "a..b", "a.b.c.d", "t\x00", "__eidos_q1"):
        with pytest.raises(PlanError, match="table"):
            ei.read_sql(uri, table=name)
    assert ei.read_sql(uri, table=t).run().to_pydict() == {"a": [1, 2, 3]}


def test_a_duckdb_plan_cannot_read_files_through_table_names(db, tmp_path, monkeypatch):
    # DuckDB reads a table name that looks like a file ("x"."csv") as that file when no such table exists
    uri, t = db("duckdb")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.csv").write_text("a\n42\n")
    with pytest.raises(PlanError):
        ei.read_sql(uri, table="secret.csv")
    with pytest.raises(PlanError):
        ei.read_sql("duckdb:///:memory:", query="SELECT a FROM secret.csv")
    plan = json.loads(ei.read_sql(uri, table=t).to_json())
    plan["plan"]["source"]["table"] = "secret.csv"
    with pytest.raises(ExecutionError) as e:
        ei.Flow.from_json(json.dumps(plan)).run()
    assert "42" not in str(e.value)
    forged = _with_query(ei.read_sql("duckdb:///:memory:", query="SELECT 1 AS a"), "SELECT a FROM secret.csv")
    with pytest.raises(EidosError) as e:
        forged.run()
    assert "42" not in str(e.value)


def test_postgresql_runs_a_query_in_a_read_only_transaction(db):
    # a function the database defines may write; the run's READ ONLY transaction stops it all the same
    import adbc_driver_postgresql.dbapi as adbc

    uri, t = db("postgresql")
    schema = t.split(".")[0]
    with adbc.connect(POSTGRES_URI) as con, con.cursor() as cur:
        cur.execute(f'CREATE OR REPLACE FUNCTION "{schema}".bump() RETURNS bigint LANGUAGE sql AS '
                    f"$$ INSERT INTO {t} VALUES (99) RETURNING a $$")
        con.commit()
    flow = ei.read_sql(uri, query=f'SELECT "{schema}".bump() AS a')
    with pytest.raises(ExecutionError, match="read-only"):
        flow.run()
    assert ei.read_sql(uri, table=t).run().to_pydict() == {"a": [1, 2, 3]}


def test_the_shared_duckdb_connection_is_never_a_plans(db):
    pytest.importorskip("duckdb")
    pytest.importorskip("sqlglot")
    from eidos.lanes.sql import duckdb as D

    def state():
        cur = D._cursor()
        settings = cur.sql("SELECT name, value FROM duckdb_settings() ORDER BY name").fetchall()
        return settings, cur.sql("SELECT count(*) FROM duckdb_tables()").fetchall()

    arrow = ei.from_pydict({"a": [1, 2, 3]}).agg(s=col("a").sum())
    assert arrow.run(engine="duckdb").to_pydict() == {"s": [6]}
    before = state()
    seen = []
    real = D._cursor
    D._cursor = lambda: seen.append(1) or real()
    try:
        for query in ("SELECT range AS a FROM range(3)", "SELECT 1 AS a"):
            assert ei.read_sql("duckdb:///:memory:", query=query).run().num_rows >= 1
        uri, t = db("duckdb")
        assert ei.read_sql(uri, table=t).run().num_rows == 3
        assert seen == []   # plans with SQL of their own run on connections of their own
        assert arrow.run(engine="duckdb").to_pydict() == {"s": [6]}
    finally:
        D._cursor = real
    assert state() == before


def test_the_check_comes_before_any_database_is_reached(tmp_path):
    # a query that is refused is refused even where no database file exists to read it
    with pytest.raises(PlanError, match="SET"):
        ei.read_sql(f"duckdb:///{tmp_path / 'absent.duckdb'}", query="SET threads=1")
    assert not (tmp_path / "absent.duckdb").exists()
    with pytest.raises(PlanError, match="ATTACH"):
        ei.read_sql("postgresql://nobody@127.0.0.1:1/none", query="ATTACH 'x' AS y")


def test_the_module_examples():
    import doctest

    from eidos.hal import sql_guard

    if not installed("sqlglot"):
        pytest.skip("sqlglot is not installed")
    assert doctest.testmod(sql_guard, optionflags=doctest.ELLIPSIS).failed == 0

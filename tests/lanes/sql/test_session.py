"""What the SQL lanes keep between runs: one translation per plan, one DuckDB database per process
with a cursor per thread, Arrow registered without copying; and what they must not keep (user
data, a lock on a database file)."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col

# before the lane's modules, which need both: skipped where DuckDB has no wheel (a free-threaded CPython)
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from eidos.lanes.sql import duckdb as D
from eidos.lanes.sql import execute as X
from eidos.testing.compare import assert_tables_equal


def _plan(table: pa.Table):
    return ei.from_arrow(table).filter(col("a") > 1).group_by("k").agg(s=col("a").sum()).sort("k").plan


def test_a_plan_is_translated_once_and_an_equal_plan_finds_it(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from eidos.lanes.sql import translate

    pq.write_table(pa.table({"k": [1, 2, 1], "a": [1, 2, 3]}), tmp_path / "t.parquet")
    calls = []
    original = translate.to_sql

    def counting(plan, dialect):
        calls.append(plan)
        return original(plan, dialect)

    monkeypatch.setattr(translate, "to_sql", counting)

    def build():
        return ei.read_parquet(str(tmp_path / "t.parquet")).filter(col("a") > 1)

    flow = build()
    first = X.prepare("duckdb", flow.plan)
    assert X.prepare("duckdb", flow.plan) is first
    assert X.prepare("duckdb", build().plan) is first          # built again, equal: no new translation
    X.prepare("duckdb", flow.select("k").plan)                 # a different plan is translated
    assert len(calls) == 2
    assert flow.run(engine="duckdb").to_pylist() == [{"k": 2, "a": 2}, {"k": 1, "a": 3}]


def test_the_translation_cache_keeps_no_data_alive():
    table = pa.table({"k": pa.array(range(1000)), "a": pa.array(range(1000))})
    plan = _plan(table)
    X.prepare("duckdb", plan)
    entries = X._PREPARED["duckdb"]
    held = weakref.ref(plan)
    assert plan in entries
    del plan
    gc.collect()
    assert held() is None                 # the cache did not keep the plan (and its table) alive
    assert all(k is not None for k in entries.keys())


def _count_connects(monkeypatch) -> list:
    made = []
    real = duckdb.connect

    def counting(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting)
    return made


def test_runs_on_one_thread_share_a_cursor_and_leave_no_views(monkeypatch):
    t = pa.table({"k": [1, 2, 1], "a": [1, 2, 3]})
    flow = ei.from_arrow(t).filter(col("a") > 1)
    flow.run(engine="duckdb")
    cursor = D._cursor()
    made = _count_connects(monkeypatch)
    assert flow.select(b=col("a") * 2).run(engine="duckdb").to_pylist() == [{"b": 4}, {"b": 6}]
    assert flow.run(engine="duckdb").num_rows == 2
    assert made == []                      # no new connection per run
    assert D._cursor() is cursor
    views = cursor.sql("SELECT view_name FROM duckdb_views() WHERE view_name LIKE '__eidos%'").fetchall()
    assert views == []                     # the Arrow views were unregistered: no data kept


def test_threads_run_concurrently_on_their_own_cursors(monkeypatch):
    ei.from_pydict({"a": [1]}).run(engine="duckdb")  # the process's database exists
    made = _count_connects(monkeypatch)
    tables = [pa.table({"k": [i % 3 for i in range(200)], "a": list(range(j, j + 200))}) for j in range(8)]
    flows = [ei.from_arrow(t).filter(col("a") % 2 == 0).group_by("k").agg(s=col("a").sum()).sort("k")
             for t in tables]
    cursors = {}

    def work(flow):
        got = flow.run(engine="duckdb")
        cursors[threading.get_ident()] = D._cursor()
        return got

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, flows))
    for flow, got in zip(flows, results):
        assert_tables_equal(got, flow.run(engine="reference"), ordered=True)
    assert made == []
    assert len({id(c) for c in cursors.values()}) == len(cursors)  # one cursor per thread


def test_arrow_sources_are_not_copied():
    n = 2_000_000
    table = pa.table({"k": pa.array([i % 7 for i in range(n)], pa.int64()), "a": pa.array(range(n), pa.int64())})
    flow = ei.from_arrow(table).agg(s=col("a").sum(), n=ei.count())
    flow.run(engine="duckdb")  # warm: translation and cursor
    before = pa.total_allocated_bytes()
    got = flow.run(engine="duckdb")
    grown = pa.total_allocated_bytes() - before
    assert got.to_pylist() == [{"s": n * (n - 1) // 2, "n": n}]
    assert grown < table.nbytes // 10, f"{grown} bytes allocated by Arrow for a {table.nbytes}-byte input"


def test_a_duckdb_file_is_not_held_open_after_a_run(tmp_path):
    path = tmp_path / "held.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS a FROM range(5)")
    con.close()
    flow = ei.read_sql(f"duckdb:///{path}", table="t")
    assert flow.agg(s=col("a").sum()).run(engine="duckdb").to_pylist() == [{"s": 10}]
    writer = duckdb.connect(str(path))  # read-write, same process: refused if eidos kept its read-only one
    writer.execute("INSERT INTO t VALUES (100)")
    writer.close()
    assert flow.agg(s=col("a").sum()).run(engine="duckdb").to_pylist() == [{"s": 110}]


def test_a_database_file_gets_the_exact_float_aggregates_only_where_the_sql_calls_them(tmp_path, monkeypatch):
    from eidos.testing.databases import load_table

    calls = []
    original = D._register
    monkeypatch.setattr(D, "_register", lambda con: (calls.append(con), original(con)))
    t = load_table(f"duckdb:///{tmp_path / 'x.duckdb'}", "t", pa.table({"k": [1, 1, 2], "x": [0.5, 1.5, 2.0]}))
    assert t.filter(col("x") > 1).run(engine="duckdb").num_rows == 2   # its CTEs are named __eidos_q...
    assert calls == []
    # count() beside the float aggregates: the SQL computes them (the exact route takes float aggregates alone)
    summed = t.group_by("k").agg(s=col("x").sum(), v=col("x").var(), n=ei.count()).sort("k")
    assert_tables_equal(summed.run(engine="duckdb"), summed.run(engine="reference"), ordered=True)
    assert calls   # on each connection of its own that runs them
    calls.clear()
    alone = t.group_by("k").agg(s=col("x").sum(), v=col("x").var()).sort("k")
    assert_tables_equal(alone.run(engine="duckdb"), alone.run(engine="reference"), ordered=True)
    assert calls == []   # the exact route under the sort: DuckDB runs the projection, eidos.hal.fsum the rest


def test_each_connection_sets_its_time_zone_once(tmp_path, monkeypatch):
    """Every DuckDB connection reads instants in UTC (D.utc), set once on each: the shared cursor, a
    database file's own connection (sandboxed after), and the one that describes a table."""
    from eidos.testing.databases import load_table

    calls = []
    original = D.utc
    monkeypatch.setattr(D, "utc", lambda con: (calls.append(con), original(con)))   # kept: no id is reused
    t = load_table(f"duckdb:///{tmp_path / 'z.duckdb'}", "t", pa.table({"a": [1, 2, 3]}))
    calls.clear()
    assert ei.read_sql(f"duckdb:///{tmp_path / 'z.duckdb'}", table="t").schema.names == ("a",)   # described
    assert t.filter(col("a") > 1).run(engine="duckdb").num_rows == 2
    assert calls and len(calls) == len({id(con) for con in calls}), calls


def test_a_plan_run_again_reuses_its_relation_and_reads_its_files_again(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 2, 1], "a": [1, 2, 3]}), path)
    flow = ei.read_parquet(str(path)).group_by("k").agg(s=col("a").sum()).sort("k")
    assert flow.run(engine="duckdb").to_pylist() == [{"k": 1, "s": 4}, {"k": 2, "s": 2}]
    kept = D._local.__dict__[(os.getpid(), "relations")]
    sql = X.prepare("duckdb", flow.plan).sql
    relation = kept[sql]
    pq.write_table(pa.table({"k": [1, 2, 1], "a": [10, 20, 30]}), path)   # the same schema, new values
    again = ei.read_parquet(str(path)).group_by("k").agg(s=col("a").sum()).sort("k")
    assert again.run(engine="duckdb").to_pylist() == [{"k": 1, "s": 40}, {"k": 2, "s": 20}]
    assert kept[sql] is relation                                      # no new parse and bind
    for i in range(D.KEPT_RELATIONS + 2):                                 # only the last few are kept
        ei.read_parquet(str(path)).filter(col("a") > i).run(engine="duckdb")
    assert len(kept) == D.KEPT_RELATIONS and sql not in kept
    before = dict(kept)
    ei.from_arrow(pa.table({"a": [1]})).run(engine="duckdb")             # registered Arrow: not kept
    assert kept == before

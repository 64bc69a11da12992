"""What users write first runs as the engine's fast form: a sort then a limit is one ORDER BY ... LIMIT (a
top-N) with the row order numbered only over the rows left; a string equality on PostgreSQL can use an index
on the column; a PostgreSQL connection is kept between runs, and a dropped one is replaced. Answers are the
reference lane's (ties, nulls, offsets); plan shapes are read from the engines' own EXPLAIN, not from timings."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.lanes.sql.execute import dialect
from eidos.lanes.sql.translate import to_sql
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import examples

SQL_LANES = ["duckdb", "sqlite", "postgresql"]


def test_a_limit_of_a_sort_is_one_order_by_limit():
    top = ei.from_pydict({"x": [3, 1, 2]}).sort("x", descending=True).head(2)
    sql = to_sql(top.select(y=col("x") + 1).plan, dialect("duckdb")).sql
    assert "ROW_NUMBER" not in sql[:sql.index("LIMIT 2")] and "ORDER BY" in sql  # no window over every row before it
    assert sql.count("ROW_NUMBER") == 1
    sql = to_sql(top.plan, dialect("duckdb")).sql   # the plan's last step: the final SELECT's own ORDER BY ... LIMIT
    assert "ROW_NUMBER" not in sql and sql.index("ORDER BY") < sql.index("LIMIT 2")


def test_duckdb_binds_scans_filters_and_inner_joins_as_the_one_select_that_reads_them():
    """DuckDB binds each CTE of a chain (a plan's node each): merged, the statement costs what the engine's own
    text costs to plan. A filter does not move past an outer join, so a left join keeps its sides apart."""
    a = ei.from_pydict({"k": [1, 2, 3, 3, None], "x": [1, 5, 7, 9, 4]})
    b = ei.from_pydict({"k": [1, 3, 4, None], "y": [10, 20, 30, 40]})
    joined = a.filter(col("x") > 1).join(b.filter(col("y") < 30), on="k").select("k", z=col("x") * col("y") + 1)
    flow = joined.group_by("k").agg(s=col("z").sum(), n=col("z").count()).sort("s", descending=True).head(5)
    sql = to_sql(flow.plan, dialect("duckdb")).sql
    # the join's rows (z, read twice, is computed once there) and their aggregation, ordered in the last SELECT
    assert sql.count("AS (SELECT") == 2 and sql.count(" JOIN ") == 1 and "ROW_NUMBER" not in sql
    left = a.join(b.filter(col("y") < 30), on="k", how="left").sort("k", "x")
    assert to_sql(left.plan, dialect("duckdb")).sql.count("AS (SELECT") == 3   # a, b filtered, the join
    for f in (flow, left, joined.filter(col("z") > 50).select(w=col("z") - col("k"))):
        assert_tables_equal(f.run(engine="duckdb", strict=True), f.run(engine="reference", strict=True), ordered=True)


values = st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=12)


@pytest.mark.parametrize("lane", SQL_LANES)
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(xs=values, n=st.integers(0, 5), offset=st.integers(0, 4), descending=st.booleans(), data=st.data())
def test_top_n_answers_as_the_reference(store, lane, xs, n, offset, descending, data):
    nulls_last = data.draw(st.sampled_from([None, True, False]))
    table = pa.table({"x": pa.array(xs, pa.int64()), "i": pa.array(range(len(xs)), pa.int64())})
    source = store(lane, f"t{uuid.uuid4().hex[:8]}", table)
    for flow in (source.sort("x", "i", descending=descending, nulls_last=nulls_last).limit(n, offset),
                 source.sort("i").sort("x", descending=descending, nulls_last=nulls_last).limit(n, offset)
                 .select("x", "i", twice=col("x") * 2)):
        assert flow.run(engine=lane).to_pydict() == _reference(flow, table).to_pydict()


def _reference(flow, table):
    """The flow on the reference lane, over the same rows held in memory."""
    from eidos.ir import nodes as N
    from eidos.ir.rewrite import map_inputs
    from eidos.ir.sources import ArrowSource

    def visit(node):
        if isinstance(node, N.Scan):
            return N.Scan(ArrowSource.of(table.select(list(node.source.schema.names))))
        return map_inputs(node, visit)

    return ei.Flow(visit(flow.plan)).run(engine="reference")


@pytest.fixture
def pg_table(pg_uri, pg_schema, pg_exec):
    name = f'"{pg_schema}".first_queries'
    pg_exec(f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} AS SELECT g AS id, (g * 7919 % 10007)::float8 AS x, md5(g::text) AS s "
            f"FROM generate_series(1, 20000) g",
            f"CREATE INDEX ON {name} (x)", f"CREATE INDEX ON {name} (s)", f"ANALYZE {name}")
    return ei.read_sql(pg_uri, table=f"{pg_schema}.first_queries")


def _plan_of(pg_exec, flow) -> str:
    """PostgreSQL's EXPLAIN of the flow's SQL, sequential scans off so that a usable index shows (ADBC reads
    results through COPY, which takes no EXPLAIN: a function of the session runs it)."""
    sql = to_sql(flow.plan, dialect("postgresql")).sql
    rows = pg_exec("CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS "
                   "$$ BEGIN SET LOCAL enable_seqscan = off; RETURN QUERY EXECUTE 'EXPLAIN ' || q; END $$",
                   "SELECT * FROM pg_temp.plan_of(" + "'" + sql.replace("'", "''") + "')")
    return "\n".join(r[0] for r in rows)


def test_postgresql_answers_a_string_equality_and_a_top_n_from_an_index(pg_table, pg_exec):
    needle = pg_exec(f"SELECT md5('{1234}')")[0][0]
    eq = pg_table.filter(col("s") == needle)
    assert eq.run().column("id").to_pylist() == [1234]
    assert "Index" in _plan_of(pg_exec, eq) and "Index Cond: (s = " in _plan_of(pg_exec, eq)
    among = pg_table.filter(col("s").is_in([needle, "none"]))
    assert among.run().column("id").to_pylist() == [1234] and "Index" in _plan_of(pg_exec, among)
    top = pg_table.sort("x").head(3)
    assert top.run().column("x").to_pylist() == [0.0, 1.0, 1.0]
    assert "Index Scan" in _plan_of(pg_exec, top)


def test_string_equality_stays_by_code_point_under_a_case_blind_collation(pg_uri, pg_schema, pg_exec):
    name = f'"{pg_schema}".blind'
    pg_exec("CREATE COLLATION IF NOT EXISTS eidos_test_blind (provider = icu, locale = 'und-u-ks-level2', "
            "deterministic = false)",
            f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} (s text COLLATE eidos_test_blind)",
            f"INSERT INTO {name} VALUES ('abc'), ('ABC'), ('Abc')")
    flow = ei.read_sql(pg_uri, table=f"{pg_schema}.blind")
    assert flow.filter(col("s") == "ABC").run().column("s").to_pylist() == ["ABC"]
    assert flow.filter(col("s").is_in(["abc"])).run().column("s").to_pylist() == ["abc"]


def test_postgresql_keeps_its_connection_and_replaces_a_dropped_one(pg_table, pg_uri, pg_exec):
    from eidos.lanes.sql import postgresql

    def kept():
        (con,) = postgresql._IDLE.idle[pg_uri]
        return con

    def pid(con) -> int:
        with con.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            (value,) = cur.fetchone()
        con.rollback()
        return value

    postgresql._IDLE.close_all()
    flow = pg_table.filter(col("id") == 7)
    assert flow.run().column("id").to_pylist() == [7]
    first = kept()
    assert flow.run().column("id").to_pylist() == [7] and kept() is first     # the same connection, kept
    pg_exec(f"SELECT pg_terminate_backend({pid(first)})")
    assert flow.run().column("id").to_pylist() == [7]                          # a new one, not an error
    assert kept() is not first

"""The SQL lanes (DuckDB, SQLite, PostgreSQL): injection safety, pushdown, describe_source,
error mapping and password redaction, semantics against the reference lane, generated plans.

PostgreSQL tests skip with the reason when no server answers at 127.0.0.1:5432.
"""

from __future__ import annotations

import datetime as _dt
import math
import subprocess
import sys
import traceback
from decimal import Decimal as D

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col, lit, when
from eidos.errors import EidosError, ExecutionError, PlanError, UnsupportedError
from eidos.ir.sources import SqlSource
from eidos.lanes.sql import DuckDBLane, PostgresLane, SQLiteLane
from eidos.lanes.sql import execute as X
from eidos.testing.compare import assert_tables_equal
from eidos.testing.databases import HOLDS
from eidos.testing.strategies import flows, profile
from tests.lanes.helpers import lane_or_skip

SQL_LANES = ["duckdb", "sqlite", "postgresql"]
LANES = {"duckdb": DuckDBLane(), "sqlite": SQLiteLane(), "postgresql": PostgresLane()}
EVIL_NAME = 'x"; DROP TABLE t; --'
EVIL_TEXT = "'; DROP TABLE t; --"


def run(lane: str, flow: ei.Flow) -> pa.Table:
    gaps = LANES[lane].supports(flow.plan)
    assert not gaps, gaps
    return LANES[lane].execute(flow.plan)


def reference(flow: ei.Flow) -> pa.Table:
    return flow.run(engine="reference", strict=True)


# ---------------------------------------------------------------- injection

@pytest.mark.parametrize("lane", SQL_LANES)
def test_injected_names_and_text_are_data(lane, store):
    table = pa.table({EVIL_NAME: pa.array([1, 2, 3], pa.int64()),
                      "s": pa.array([EVIL_TEXT, "plain", "it's"], pa.large_string())})
    t = store(lane, "t", table)
    keep = store(lane, "keep", pa.table({"k": pa.array([1], pa.int64())}))
    flow = (t.filter((col("s") == EVIL_TEXT) | col("s").str.contains("'", literal=True) | col("s").str.like("%; DROP%"))
            .select(col(EVIL_NAME).alias(EVIL_NAME + "2"), col("s"), lit(EVIL_TEXT).alias("lit"))
            .sort(EVIL_NAME + "2"))
    got = run(lane, flow)
    assert got.column_names == [EVIL_NAME + "2", "s", "lit"]
    assert got.to_pylist() == [{EVIL_NAME + "2": 1, "s": EVIL_TEXT, "lit": EVIL_TEXT},
                               {EVIL_NAME + "2": 3, "s": "it's", "lit": EVIL_TEXT}]
    # nothing was dropped: both tables still answer
    assert run(lane, t.agg(n=ei.count())).to_pylist() == [{"n": 3}]
    assert run(lane, keep.agg(n=ei.count())).to_pylist() == [{"n": 1}]


@pytest.mark.parametrize("lane", SQL_LANES)
def test_table_named_like_an_injection(lane, store):
    flow = store(lane, EVIL_NAME.replace(".", ""), pa.table({"a": pa.array([5], pa.int64())}))
    assert run(lane, flow.select(b=col("a") + 1)).to_pylist() == [{"b": 6}]


# ---------------------------------------------------------------- pushdown

@pytest.mark.parametrize("lane", SQL_LANES)
def test_only_the_result_crosses_the_connection(lane, store, monkeypatch):
    n = 1000
    big = pa.table({"k": pa.array([i % 3 for i in range(n)], pa.int64()),
                    "v": pa.array([float(i) for i in range(n)], pa.float64())})
    other = pa.table({"k": pa.array([0, 1, 2], pa.int64()), "name": pa.array(["a", "b", "c"], pa.large_string())})
    a, b = store(lane, "big", big), store(lane, "names", other)
    flow = (a.filter(col("v") >= 10).join(b, on="k").group_by("name")
            .agg(total=col("v").sum(), n=ei.count()).sort("name"))
    mod = X.module(lane)
    fetched, statements = [], []
    real = mod.Session.fetch

    def spy(session, sql):
        statements.append(sql)
        out = real(session, sql)
        fetched.append(out.num_rows)
        return out

    monkeypatch.setattr(mod.Session, "fetch", spy)
    got = run(lane, flow)
    assert len(statements) == 1 and "JOIN" in statements[0] and "GROUP BY" in statements[0]
    assert fetched == [got.num_rows] == [3]
    assert_tables_equal(got, reference(ei.from_arrow(big).filter(col("v") >= 10)
                                       .join(ei.from_arrow(other), on="k").group_by("name")
                                       .agg(total=col("v").sum(), n=ei.count()).sort("name")), ordered=True)


def test_sqlite_joins_same_typed_keys_bare_so_its_automatic_index_applies(store, tmp_path):
    import sqlite3

    n = 3000
    left = pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array([i * 0.5 for i in range(n)])})
    right = pa.table({"k": pa.array(range(0, 2 * n, 2), pa.int64()), "w": pa.array([str(i) for i in range(n)])})
    a, b = store("sqlite", "a", left), store("sqlite", "b", right)
    flow = a.join(b, on="k").select("k", "v", "w").sort("k")
    plan = flow.plan.optimized
    sql = X.prepare("sqlite", plan).sql
    assert 'CAST("k" AS' not in sql  # the key is read as stored
    db = a.plan.source.uri.split("///", 1)[1]
    steps = " ".join(r[-1] for r in sqlite3.connect(db).execute("EXPLAIN QUERY PLAN " + sql).fetchall())
    assert "AUTOMATIC" in steps and "INDEX" in steps, steps
    assert_tables_equal(run("sqlite", flow), reference(ei.from_arrow(left).join(ei.from_arrow(right), on="k")
                                                     .select("k", "v", "w").sort("k")), ordered=True)
    # keys of different types are still converted to their common type first
    mixed = a.join(store("sqlite", "c", pa.table({"f": [2.0, 4.0, 4.5]})), left_on="k", right_on="f")
    assert_tables_equal(run("sqlite", mixed.sort("k")), reference(
        ei.from_arrow(left).join(ei.from_arrow(pa.table({"f": [2.0, 4.0, 4.5]})), left_on="k", right_on="f")
        .sort("k")), ordered=True)


def test_sqlite_nan_literals_are_a_declared_gap(store):
    table = pa.table({"a": pa.array([1.0, None, 3.0], pa.float64())})
    flow = store("sqlite", "reals", table)
    local = ei.from_arrow(table)
    for build in (lambda f: f.select(v=lit(math.nan)), lambda f: f.select(v=col("a") + math.nan),
                  lambda f: f.filter(col("a").is_in([1.0, math.nan])), lambda f: f.select(v=col("a").fill_null(math.nan))):
        assert LANES["sqlite"].supports(build(flow).plan.optimized) == ["NaN literal"]
        assert LANES["duckdb"].supports(build(local).plan.optimized) == []
        with pytest.raises(UnsupportedError, match="NaN literal"):
            build(flow).run(engine="sqlite")
        # engine=None pushes the scan down and finishes locally: the reference's answer
        assert_tables_equal(build(flow).run(), reference(build(local)), ordered=False)
    assert LANES["sqlite"].supports(flow.select(v=lit(math.inf)).plan) == []


def test_mixed_databases_are_a_gap(tmp_path, store):
    a = store("sqlite", "a", pa.table({"k": pa.array([1], pa.int64())}))
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    from eidos.testing.databases import load_table

    b = load_table(other, "b", pa.table({"k": pa.array([1], pa.int64())}))
    gaps = LANES["sqlite"].supports(a.join(b, on="k").plan)
    assert any("different sqlite databases" in g for g in gaps)
    assert any("cannot read" in g for g in LANES["sqlite"].supports(ei.from_pydict({"k": [1]}).plan))


# ---------------------------------------------------------------- describe_source

def test_describe_duckdb_types(tmp_path):
    duckdb = pytest.importorskip("duckdb")

    path = tmp_path / "types.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (a TINYINT, b UBIGINT, c DECIMAL(12,3), d DOUBLE, e VARCHAR, f DATE, "
                "g TIMESTAMP, h BOOLEAN, i REAL)")
    con.execute("INSERT INTO t VALUES (1, 2, 3.5, 4, 'x', DATE '2020-01-01', TIMESTAMP '2020-01-01 10:00', true, 1.5)")
    con.close()
    flow = ei.read_sql(f"duckdb:///{path}", table="t")
    assert str(flow.schema) == ("Schema(a: Int8, b: UInt64, c: Decimal(12, 3), d: Float64, e: String, f: Date, "
                                "g: Timestamp, h: Boolean, i: Float32)")
    assert flow.plan.source.rows == 1
    q = ei.read_sql(f"duckdb:///{path}", query="SELECT a + 1 AS a1, e FROM t")
    assert str(q.schema) == "Schema(a1: Int8, e: String)"  # DuckDB types a + 1 as the column's type
    assert run("duckdb", q).to_pylist() == [{"a1": 2, "e": "x"}]


def test_describe_sqlite_declared_types(tmp_path):
    import sqlite3

    path = tmp_path / "types.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER, b BIGINT, c VARCHAR(10), d REAL, e DOUBLE PRECISION, f BOOLEAN, "
                "g DATE, h DECIMAL(10,2), i CLOB)")
    con.execute("INSERT INTO t VALUES (1, 2, 'x', 1.5, 2.5, 1, '2020-02-29', 3.25, 'y')")
    con.execute("CREATE TABLE untyped (u)")
    con.commit()
    con.close()
    uri = f"sqlite:///{path}"
    flow = ei.read_sql(uri, table="t")
    assert str(flow.schema) == ("Schema(a: Int64, b: Int64, c: String, d: Float64, e: Float64, f: Boolean, "
                                "g: Date, h: Float64, i: String)")
    got = run("sqlite", flow.select("f", "g", y=col("g").dt.year(), g2=col("g") + 1))
    assert got.to_pylist() == [{"f": True, "g": _dt.date(2020, 2, 29), "y": 2020, "g2": _dt.date(2020, 3, 1)}]
    assert str(ei.read_sql(uri, query="SELECT CAST(a AS REAL) AS x, c FROM t").schema) == "Schema(x: Float64, c: String)"
    with pytest.raises(PlanError, match="no declared type"):
        ei.read_sql(uri, query="SELECT a + 1 AS x FROM t")
    with pytest.raises(PlanError, match="no declared type"):
        ei.read_sql(uri, table="untyped")
    # SQLite has no time-of-day or time-zone types: such a declared column is left unread, saying so
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE zoned (k INTEGER, z TIMESTAMPTZ, w TIME, x TIMESTAMP WITH TIME ZONE)")
    con.commit()
    con.close()
    zoned = ei.read_sql(uri, table="zoned")
    assert str(zoned.schema) == "Schema(k: Int64)"
    for c in ("z", "w", "x"):
        with pytest.raises(PlanError, match="SQLite has no time-of-day or time-zone types"):
            zoned.select(c)


def test_describe_postgres_types(pg_uri, pg_schema, pg_exec):
    t = f'"{pg_schema}"."types"'
    pg_exec(f"CREATE TABLE {t} (a smallint, b integer, c bigint, d real, e double precision, f numeric(12,3), "
            "g numeric, h text, i varchar(5), j char(3), k boolean, l date, m timestamp)",
            f"INSERT INTO {t} VALUES (1, 2, 3, 1.5, 2.5, 3.125, 1.23456789012345, 'x', 'y', 'z', true, "
            "'2020-01-01', '2020-01-01 10:00:00')", f"ANALYZE {t}")
    flow = ei.read_sql(pg_uri, table=f"{pg_schema}.types")
    assert str(flow.schema) == ("Schema(a: Int16, b: Int32, c: Int64, d: Float32, e: Float64, f: Decimal(12, 3), "
                                "g: Decimal(38, 10), h: String, i: String, j: String, k: Boolean, l: Date, "
                                "m: Timestamp)")
    assert flow.plan.source.rows == 1
    got = run("postgresql", flow.select("g", "j"))
    assert got.to_pylist() == [{"g": D("1.2345678901"), "j": "z"}]
    q = ei.read_sql(pg_uri, query=f"SELECT sum(f) AS s, count(*) AS n FROM {t}")
    assert str(q.schema) == "Schema(s: Decimal(38, 10), n: Int64)"
    # a column of a type eidos does not read fails only the plans that name it
    pg_exec(f"CREATE TABLE {t[:-1]}_tz\" (k integer, z timestamptz, w time, v tsvector, tz timetz)",
            f"INSERT INTO {t[:-1]}_tz\" VALUES (1, '2024-10-27 02:30+01', '13:45:12.5', 'a b', '10:00+02')")
    odd = ei.read_sql(pg_uri, table=f"{pg_schema}.types_tz")
    assert str(odd.schema) == "Schema(k: Int32, z: Timestamp(us, 'UTC'), w: Time)"
    # timestamptz is an instant, read in UTC; shown in another zone its parts are that zone's wall clock
    berlin = odd.select("k", "z", "w", h=ei.col("z").dt.convert_time_zone("Europe/Berlin").dt.hour(),
                        s=ei.col("w").dt.second())
    for got in (run("postgresql", berlin), berlin.run(engine="polars"), reference(berlin)):
        assert got.to_pylist() == [{
            "k": 1, "z": _dt.datetime(2024, 10, 27, 1, 30, tzinfo=_dt.timezone.utc),
            "w": _dt.time(13, 45, 12, 500000), "h": 2, "s": 12}]
    with pytest.raises(PlanError, match="column 'v' .* has PostgreSQL type tsvector"):
        odd.filter(ei.col("v").is_null())
    with pytest.raises(PlanError, match="column 'tz' .* eidos times of day have no zone"):
        odd.select("tz")


# ---------------------------------------------------------------- errors and redaction

@pytest.mark.parametrize("lane", ["duckdb", "sqlite"])
def test_missing_files_are_plan_errors(tmp_path, lane):
    with pytest.raises(PlanError, match="no such"):
        ei.read_sql(f"{lane}:///{tmp_path / 'nope.db'}", table="t")
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.parametrize("lane", SQL_LANES)
def test_bad_tables_and_queries_are_plan_errors(lane, store):
    t = store(lane, "present", pa.table({"a": pa.array([1], pa.int64())}))
    uri = t.plan.source.uri
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, table="absent_table")
    assert "absent_table" in str(e.value)
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, query="SELEKT nonsense")
    assert lane in str(e.value)


def test_unreachable_server_and_password_never_shown():
    uri = "postgresql://postgres:s3cretpw@127.0.0.1:1/test"
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, table="t")
    text = "".join(traceback.format_exception(e.value))
    assert "s3cretpw" not in text
    assert "postgresql://postgres@127.0.0.1:1/test" in str(e.value)


def test_wrong_database_with_password_is_redacted(pg_uri):
    uri = "postgresql://postgres:hunter2pw@127.0.0.1:5432/no_such_db_eidos"
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, table="t")
    text = "".join(traceback.format_exception(e.value))
    assert "hunter2pw" not in text and "no_such_db_eidos" in str(e.value)


def test_engine_messages_echoing_the_uri_are_scrubbed():
    src = SqlSource(ei.Schema(()), uri="postgresql://u:pa%40ss@h:5432/db?password=other", table="t")
    boom = RuntimeError("could not connect to postgresql://u:pa%40ss@h:5432/db?password=other (pa@ss, other)")
    err = X.engine_error("postgresql", boom, [src], "connecting to")
    assert isinstance(err, ExecutionError)
    for secret in ("pa%40ss", "pa@ss", "other"):
        assert secret not in str(err)
    assert err.__cause__ is None and err.__suppress_context__


@pytest.mark.parametrize("lane", SQL_LANES)
def test_value_errors_are_execution_errors(lane, store):
    t = store(lane, "big", pa.table({"a": pa.array([2**62, 2**62], pa.int64())}))
    for flow in (t.select(b=col("a") * 4), t.agg(s=col("a").sum()), t.select(b=-(col("a") * 2) - col("a") * 2 - 1)):
        with pytest.raises(ExecutionError) as e:
            run(lane, flow)
        assert lane in str(e.value) and ("overflow" in str(e.value).lower() or "out of range" in str(e.value))


@pytest.mark.parametrize("lane", ["duckdb", "sqlite"])
def test_table_dropped_after_build_fails_at_run_naming_the_source(lane, store, tmp_path):
    t = store(lane, "gone", pa.table({"a": pa.array([1], pa.int64())}))
    uri = t.plan.source.uri
    if lane == "duckdb":
        import duckdb
        con = duckdb.connect(uri.split("://", 1)[1])
    else:
        import sqlite3
        con = sqlite3.connect(uri.split("://", 1)[1])
    con.execute('DROP TABLE "gone"')
    con.commit() if lane == "sqlite" else None
    con.close()
    with pytest.raises(ExecutionError) as e:
        run(lane, t)
    assert "gone" in str(e.value)


# ---------------------------------------------------------------- semantics against the reference

SIGNED = pa.table({"a": pa.array([-7, 7, -7, 7, 5, None, -(2**63)], pa.int64()),
                   "b": pa.array([2, 2, -2, -2, 0, 1, 1], pa.int64()),
                   "x": pa.array([4.0, -1.0, 0.0, 2.5, -2.5, None, 0.25], pa.float64()),
                   "s": pa.array(["Ab", "aB", "a_b", "a%b", None, "héllo", "e\u0301"], pa.large_string()),
                   "d": pa.array([_dt.date(2020, 1, 31), None, _dt.date(1999, 12, 31), _dt.date(2000, 2, 29),
                                  _dt.date(2024, 2, 29), _dt.date(1970, 1, 1), _dt.date(2021, 6, 1)], pa.date32()),
                   "f": pa.array([True, False, None, True, False, True, None])})

SEMANTICS = {
    "division": lambda t: t.filter(col("a") > -(2**62)).select(
        "a", "b", fd=col("a") // col("b"), m=col("a") % col("b"), td=col("a") / col("b"),
        xd=col("x") / col("b"), xf=col("x") // 0.75, xm=col("x") % -0.75),
    "round_cast": lambda t: t.filter(col("a") > -(2**62)).select(r=col("x").round(), r1=col("x").round(1), i=col("x").cast(ei.Int32),
                                     ri=col("a").round(-1), fl=col("x").floor(), ce=col("x").ceil()),
    "strings": lambda t: t.select(
        "s", like=col("s").str.like("a_b"), like2=col("s").str.like("A%"), c=col("s").str.contains("%", literal=True),
        sw=col("s").str.starts_with("a"), ew=col("s").str.ends_with("b"), n=col("s").str.len(),
        sl=col("s").str.slice(1, 2), sn=col("s").str.slice(-2), so=col("s").str.slice(-9, 8),
        lt=col("s") < "a", i=col("s").is_in(["Ab", None])),
    "dates": lambda t: t.select("d", y=col("d").dt.year(), m=col("d").dt.month(), dd=col("d").dt.day(),
                                p=col("d") + 30, q=col("d") - 400, diff=col("d") - ei.date(2000, 1, 1),
                                old=col("d") < ei.date(2000, 1, 1)),
    "logic": lambda t: t.select(
        "f", n=~col("f"), a=col("f") & (col("a") > 0), o=col("f") | (col("a") > 0),
        w=when(col("f")).then(lit("yes")).when(col("a") > 0).then(lit("pos")).otherwise(lit("no")),
        fn=col("a").fill_null(0), bt=col("a").is_between(-7, 5), nn=col("s").is_null()),
    "sort_nulls": lambda t: t.sort("f", "x", descending=[True, False], nulls_last=[False, True]).select("f", "x"),
    "aggregates": lambda t: t.group_by("f").agg(
        n=ei.count(), c=col("x").count(), s=col("b").sum(), mn=col("s").min(), mx=col("s").max(),
        u=col("s").n_unique(), avg=col("x").mean(), first_day=col("d").min()),
    "empty_agg": lambda t: t.filter(col("a") > 10**18).agg(n=ei.count(), s=col("b").sum(), u=col("s").n_unique()),
    "distinct_union_limit": lambda t: (t.select("b").union(t.select(b=col("b") * 2)).distinct()
                                       .sort("b").limit(3, 1)),
}


def _tables_for(lane: str):
    if lane == "sqlite":
        return SIGNED
    return SIGNED


@pytest.mark.parametrize("case", sorted(SEMANTICS))
@pytest.mark.parametrize("lane", SQL_LANES)
def test_semantics_match_reference(lane, case, store):
    build = SEMANTICS[case]
    there = build(store(lane, "signed", SIGNED))
    gaps = LANES[lane].supports(there.plan)
    if gaps:
        pytest.skip(f"{lane} lacks {', '.join(gaps)}")
    expected = reference(build(ei.from_arrow(SIGNED)))
    ordered = case in ("sort_nulls", "distinct_union_limit")
    assert_tables_equal(run(lane, there), expected, ordered=ordered, float_rel=1e-12)


JOIN_L = pa.table({"k": pa.array([1, 2, None, 4], pa.int64()), "v": pa.array(["a", "b", "c", "d"], pa.large_string())})
JOIN_R = pa.table({"k": pa.array([2, None, 4, 4, 5], pa.int64()), "v": pa.array(["x", "y", "z", "w", "q"],
                                                                                   pa.large_string())})


@pytest.mark.parametrize("how", ["inner", "left", "right", "full", "semi", "anti", "cross"])
@pytest.mark.parametrize("lane", SQL_LANES)
def test_joins_match_reference(lane, how, store):
    left, right = store(lane, "l", JOIN_L), store(lane, "r", JOIN_R)
    on = {} if how == "cross" else {"on": "k"}
    got = run(lane, left.join(right, how=how, **on))
    expected = reference(ei.from_arrow(JOIN_L).join(ei.from_arrow(JOIN_R), how=how, **on))
    assert_tables_equal(got, expected, ordered=False)


@pytest.mark.parametrize("how", ["semi", "anti"])
@pytest.mark.parametrize("lane", SQL_LANES)
def test_two_key_semi_anti_match_reference(lane, how, store):
    """Semi/anti joins on two keys with nulls in each (SQLite runs them as IN over the right's keys)."""
    left = pa.table({"k": pa.array([1, 2, None, 4, 4, 2], pa.int64()),
                     "s": pa.array(["a", "b", "c", None, "d", "x"], pa.large_string())})
    right = pa.table({"k": pa.array([2, None, 4, 4, 1], pa.int64()),
                      "t": pa.array(["b", "c", None, "d", "z"], pa.large_string())})
    build = (lambda a, b: a.join(b, left_on=["k", "s"], right_on=["k", "t"], how=how))
    got = run(lane, build(store(lane, "l2", left), store(lane, "r2", right)))
    expected = reference(build(ei.from_arrow(left), ei.from_arrow(right)))
    assert expected.num_rows == (2 if how == "semi" else 4)
    assert_tables_equal(got, expected, ordered=False)


@pytest.mark.parametrize("lane", ["duckdb", "postgresql"])
def test_nan_is_a_value(lane, store):
    t = pa.table({"x": pa.array([math.nan, 1.0, None, math.nan, -math.inf], pa.float64()),
                  "g": pa.array([1, 1, 2, 2, 2], pa.int64())})
    there = store(lane, "nans", t)

    def build(f):
        return f.select("x", eq=col("x") == math.nan, gt=col("x") > 1e308, sq=(col("x") - 2).sqrt(),
                        lg=(col("x") + 1).log()).sort("x")

    assert_tables_equal(run(lane, build(there)), reference(build(ei.from_arrow(t))), ordered=True)
    std = {"sd": col("x").std()} if lane == "duckdb" else {}   # PostgreSQL: a typed gap (its stddev overflows)
    agg = (lambda f: f.group_by("g").agg(mx=col("x").max(), mn=col("x").min(), u=col("x").n_unique(), **std))
    assert_tables_equal(run(lane, agg(there)), reference(agg(ei.from_arrow(t))), ordered=False)


@pytest.mark.parametrize("lane", SQL_LANES)
def test_float_sums_are_correctly_rounded(lane, store):
    """Sums and means of floats as math.fsum rounds them, where an engine's own SUM (SQLite's compensated
    one, DuckDB's Kahan-Babuska) gives 1.0 for group 1, and 1e308 for group 3 in any order (math.fsum
    itself overflows part way there); compared bit for bit, not within a tolerance."""
    t = pa.table({"g": pa.array([1] * 5 + [2] * 3 + [3] * 3 + [4], pa.int64()),
                  "x": pa.array([2.0**100, 1.0, 2.0**-53, 2.0**-80, -2.0**100, 0.1, 0.2, 0.3,
                                 1e308, 1e308, -1e308, None], pa.float64())})
    q = (lambda f: f.group_by("g").agg(s=col("x").sum(), m=col("x").mean()).sort("g"))
    got, want = run(lane, q(store(lane, "hard_sums", t))), reference(q(ei.from_arrow(t)))
    assert got.column("s").to_pylist() == want.column("s").to_pylist() == [1.0000000000000002, 0.6,
                                                                           1e308, None]
    assert got.column("m").to_pylist() == want.column("m").to_pylist()


@pytest.mark.parametrize("lane", ["duckdb", "postgresql"])
def test_decimals_exact(lane, store):
    t = pa.table({"p": pa.array([D("10.50"), D("-3.25"), None, D("0.05")], pa.decimal128(10, 2)),
                  "q": pa.array([D("3.0"), D("-0.5"), D("1.0"), D("0.0")], pa.decimal128(4, 1))})
    there = store(lane, "money", t)

    def build(f):
        return f.select(a=col("p") + col("q"), m=col("p") * col("q"), r=col("p").round(1), md=col("p") % col("q"),
                        c=col("p").cast(ei.Int64), w=col("p") * 2)

    flow = build(there)
    assert_tables_equal(run(lane, flow), reference(build(ei.from_arrow(t))), ordered=False)
    assert run(lane, there.agg(s=col("p").sum())).schema.field("s").type == pa.decimal128(38, 2)


def test_sqlite_nan_results_raise_unsupported(store):
    t = store("sqlite", "infs", pa.table({"x": pa.array([math.inf, 1.0], pa.float64())}))
    with pytest.raises(UnsupportedError, match="NaN"):
        run("sqlite", t.select(y=col("x") - col("x")))
    assert "function sqrt" in LANES["sqlite"].supports(t.select(y=col("x").sqrt()).plan)


def test_sqlite_like_is_case_sensitive_glob(store):
    t = store("sqlite", "words", pa.table({"s": pa.array(["ABC", "abc", "a*c", "a[c", "a?c"], pa.large_string())}))
    got = run("sqlite", t.select("s", p=col("s").str.like("a_c"), q=col("s").str.like("a*%"),
                                 r=col("s").str.like("a[%")))
    assert got.column("p").to_pylist() == [False, True, True, True, True]
    assert got.column("q").to_pylist() == [False, False, True, False, False]
    assert got.column("r").to_pylist() == [False, False, False, True, False]


@pytest.mark.parametrize("lane", ["duckdb", "postgresql"])
def test_narrow_and_unsigned_integers_overflow(lane):
    t = pa.table({"i8": pa.array([127, -128], pa.int8()), "u8": pa.array([255, 0], pa.uint8()),
                  "u64": pa.array([2**64 - 1, 0], pa.uint64())})
    flow = ei.from_arrow(t)
    if lane == "postgresql":
        # PostgreSQL reads no Int8/unsigned source columns; they arise from casts inside a plan.
        pytest.skip("no Int8/UInt sources in PostgreSQL; covered by casts below")
    for bad in (flow.select(x=col("i8") + 1), flow.select(x=col("u8") + 1), flow.select(x=col("u64") + 1),
                flow.select(x=col("u8") - 1)):
        with pytest.raises(ExecutionError):
            run(lane, bad)


def test_postgres_checked_casts(store):
    t = store("postgresql", "nums", pa.table({"a": pa.array([300, -1, 5], pa.int64())}))
    for target in (ei.Int8, ei.UInt8, ei.UInt16):
        with pytest.raises(ExecutionError, match="out of range|overflow"):
            run("postgresql", t.select(x=col("a").cast(target)))
    ok = run("postgresql", t.filter(col("a") == 5).select(x=col("a").cast(ei.UInt8) + 250))
    assert ok.to_pylist() == [{"x": 255}] and ok.schema.field("x").type == pa.uint8()
    with pytest.raises(ExecutionError, match="overflow"):
        run("postgresql", t.filter(col("a") == 5).select(x=col("a").cast(ei.UInt8) + 251))


# ---------------------------------------------------------------- DuckDB over local files

def test_duckdb_reads_parquet_csv_and_arrow_like_the_reference(tmp_path):
    lane_or_skip("duckdb")
    data = pa.table({"k": pa.array([1, 2, 3, None], pa.int64()), "s": pa.array(["a", "", None, "d,e"], pa.large_string()),
                     "x": pa.array([1.5, None, 2.5, 3.0], pa.float64())})
    pq.write_table(data, tmp_path / "d.parquet")
    import pyarrow.csv as pcsv

    pcsv.write_csv(data, tmp_path / "d.csv")
    for flow in (ei.read_parquet(tmp_path / "d.parquet"), ei.read_csv(tmp_path / "d.csv"), ei.from_arrow(data)):
        plan = flow.filter(col("k").is_not_null()).with_columns(y=col("x") * 2).sort("k")
        assert_tables_equal(run("duckdb", plan), reference(plan), ordered=True)


def test_duckdb_case_folding_names_are_kept_apart():
    lane_or_skip("duckdb")
    t = ei.from_pydict({"a": [1, 2], "A": [10, 20], "l" * 70: [3, 4]})
    got = run("duckdb", t.select("A", "a", b=col("l" * 70) + col("a")))
    assert got.to_pylist() == [{"A": 10, "a": 1, "b": 4}, {"A": 20, "a": 2, "b": 6}]


def test_duckdb_cost_model_grows_with_data():
    lane = LANES["duckdb"]
    small = ei.from_pydict({"a": list(range(10))})
    big = ei.from_arrow(pa.table({"a": pa.array(range(200_000), pa.int64())}))
    e1 = lane.estimate(small.filter(col("a") > 1).plan)
    e2 = lane.estimate(big.filter(col("a") > 1).group_by("a").agg(n=ei.count()).plan)
    assert 0 < e1.seconds < e2.seconds
    assert "duckdb" in e2.basis and "M input rows" in e2.basis


def test_lanes_import_no_engine_until_they_run():
    code = ("import sys, eidos as ei; ei.backends(); "
            "print(sorted(m for m in ('duckdb', 'sqlglot', 'adbc_driver_sqlite', 'adbc_driver_postgresql') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unavailable_lane_names_the_package(monkeypatch, request):
    import importlib.util

    from eidos.hal.lane import installed

    installed.cache_clear()  # availability is looked up once per process; look again, and after
    request.addfinalizer(installed.cache_clear)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "duckdb" else real(n, *a))
    why = DuckDBLane().is_available()
    assert not why and "duckdb" in why.reason and "pip install 'eidos[sql]'" in why.reason


def test_coverage_lists_every_gap():
    lane = LANES["postgresql"]
    f = ei.from_pydict({"x": [1.5]}).map_batches(lambda b: b, schema={"x": ei.Float64})
    gaps = lane.supports(f.select(m=col("x") % 2.0, u=ei.udf(abs, ei.Float64)(col("x"))).plan)
    assert "node MapBatches" in gaps and "function udf" in gaps and "mod Float64" in gaps
    assert any("cannot read" in g for g in gaps)


# ---------------------------------------------------------------- generated plans

@pytest.mark.parametrize("lane", SQL_LANES)
@settings(parent=profile(), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_plans_match_reference(lane, data, store):
    sql = LANES[lane]
    kinds = HOLDS[lane] & set(sql.coverage.dtypes)
    gen = data.draw(flows(coverage=sql.coverage, dtypes=kinds), label="generated")
    if lane == "sqlite":
        assume(not any(pa.types.is_floating(c.type) and any(v != v for v in c.to_pylist() if v is not None)
                       for t in gen.tables for c in t.columns))
    try:
        there = _stored(lane, gen, store)
    except UnsupportedError:
        assume(False)
    assume(not sql.supports(there.plan))
    try:
        expected = reference(gen.flow)
    except ExecutionError:
        with pytest.raises(EidosError):
            sql.execute(there.plan)
        return
    try:
        got = sql.execute(there.plan)
    except UnsupportedError as e:
        assert lane == "sqlite" and "NaN" in str(e)
        return
    assert_tables_equal(got, expected, ordered=gen.ordered, float_rel=1e-6)


def _stored(lane, gen, store):
    from eidos.ir import nodes as N
    from eidos.ir.sources import ArrowSource
    from tests.lanes.helpers import replace_scans

    done = {}

    def swap(scan):
        if not isinstance(scan.source, ArrowSource):
            return scan
        if scan.source not in done:
            done[scan.source] = store(lane, f"g{len(done)}", scan.source.table).plan
        return done[scan.source]

    return ei.Flow(replace_scans(gen.flow.plan, swap)) if any(isinstance(n, N.Scan) for n in gen.flow.plan.walk()) \
        else gen.flow


TEXTS = ["12", " -7 ", "+3", "1.5", "x", None, "\u00a0 42\t", "1e3", "NaN", "-inf", "TRUE", "2020-02-29",
         "0099999999999", "2021-02-30", ".5", "5.", " Infinity ", "300", "-0"]


@pytest.mark.parametrize("lane", ["duckdb", "postgresql"])
def test_text_parses_by_eidos_rules(lane, store):
    table = pa.table({"i": pa.array(range(len(TEXTS)), pa.int64()), "s": pa.array(TEXTS, pa.large_string())})
    there, here = store(lane, "texts", table), ei.from_arrow(table)
    for dst in (ei.Int64, ei.Int8, ei.UInt8, ei.Float64, ei.Float32, ei.Boolean, ei.Date, ei.Decimal(10, 2)):
        for i, text in enumerate(TEXTS):
            def q(f, i=i, dst=dst):
                return f.filter(col("i") == i).select(v=col("s").cast(dst))
            if LANES[lane].supports(q(there).plan):
                continue
            try:
                expected = reference(q(here)).to_pylist()
            except ExecutionError:
                with pytest.raises(ExecutionError, match="cannot cast|out of range|overflow"):
                    run(lane, q(there))
                continue
            assert run(lane, q(there)).to_pylist() == expected or math.isnan(expected[0]["v"]), (dst, text)

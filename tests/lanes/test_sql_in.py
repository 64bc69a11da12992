"""SQL in (`ei.sql`, `Flow.sql`, `eidos query`): each construct gives what its Flow API plan gives, on every lane.

Each case is a SQL query and the Flow API plan that means the same; the SQL's plan must give the
Flow plan's answer on the reference lane, and every other lane must give the reference lane's
answer for the SQL's plan (the shared cross-lane suite's rule). Generated queries (Hypothesis)
combine the constructs and are held to the same two checks. TPC-H's SQL text runs against the
answers; errors name the construct or the name.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal as D
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col, lit, when
from eidos.errors import BackendUnavailable, PlanError, UnsupportedError
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import profile
from tests.lanes.conftest import LANES
from tests.lanes.helpers import agrees_with_reference, holds, lane_or_skip

pytest.importorskip("sqlglot", reason="ei.sql needs sqlglot (pip install 'eidos[sql]')")

date = _dt.date
T = pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    "name": pa.array(["Ann", "bob", "Zoë", "", None, "ann"], pa.large_string()),
    "age": pa.array([30, None, 25, 41, 30, 7], pa.int32()),
    "score": pa.array([1.5, 4.0, -0.5, None, 9.25, 2.25], pa.float64()),
    "joined": pa.array([date(2020, 1, 31), date(1999, 12, 31), None, date(2000, 2, 29), date(2024, 2, 29),
                        date(1970, 1, 1)], pa.date32()),
    "balance": pa.array([D("10.50"), D("-3.25"), None, D("0.00"), D("99.99"), D("1.05")], pa.decimal128(10, 2)),
    "dept": pa.array(["eng", "ops", "eng", None, "ops", "eng"], pa.large_string()),
})
U = pa.table({"dept": pa.array(["eng", "ops", "hr", None], pa.large_string()),
              "floor": pa.array([3, 1, 2, 9], pa.int16())})


def t() -> ei.Flow:
    return ei.from_arrow(T)


def u() -> ei.Flow:
    return ei.from_arrow(U)


@dataclass(frozen=True)
class Case:
    id: str
    sql: str
    flow: Callable[[], ei.Flow]
    ordered: bool = False


CASES = [
    Case("star", "SELECT * FROM t", t),
    Case("star_exclude", "SELECT * EXCLUDE (age, t.score) FROM t", lambda: t().drop("age", "score")),
    Case("expressions_and_aliases", "SELECT id, age + 1 AS a1, score * 2 AS s2, id / 4 AS q, id // 4 AS f, "
         "id % 4 AS m, -id AS n, id ** 2 AS p FROM t",
         lambda: t().select("id", a1=col("age") + 1, s2=col("score") * 2, q=col("id") / 4, f=col("id") // 4,
                            m=col("id") % 4, n=-col("id"), p=col("id") ** 2)),
    Case("unaliased_names", "SELECT age, t.score, upper(name), count(*) FROM t GROUP BY ALL",
         lambda: t().group_by("age", "score", col("name").str.to_upper().alias("upper(name)"))
         .agg(ei.count().alias("count(*)"))),
    Case("where_logic_and_nulls", "SELECT id FROM t WHERE (age > 26 OR name IS NULL) AND NOT score < 0 "
         "AND dept IS NOT NULL",
         lambda: t().filter(((col("age") > 26) | col("name").is_null()) & ~(col("score") < 0)
                            & col("dept").is_not_null()).select("id")),
    Case("in_between_like", "SELECT id, age IN (30, 7) AS i, id NOT IN (1, 2) AS ni, score BETWEEN 1 AND 4 AS b, "
         "name LIKE '%n%' AS l, name NOT LIKE 'A_n' AS nl, name ILIKE 'a%' AS il FROM t",
         lambda: t().select("id", i=col("age").is_in([30, 7]), ni=~col("id").is_in([1, 2]),
                            b=col("score").is_between(1, 4), l=col("name").str.like("%n%"),
                            nl=~col("name").str.like("A_n"), il=col("name").str.to_lower().str.like("a%"))),
    Case("in_with_expressions", "SELECT id FROM t WHERE age IN (id * 10, 25)",
         lambda: t().filter((col("age") == col("id") * 10) | (col("age") == 25)).select("id")),
    Case("case_when", "SELECT id, CASE WHEN age > 26 THEN 'old' WHEN age IS NULL THEN '?' ELSE 'young' END AS band, "
         "CASE dept WHEN 'eng' THEN 1 WHEN 'ops' THEN 2 END AS code FROM t",
         lambda: t().select("id", band=when(col("age") > 26).then(lit("old")).when(col("age").is_null())
                            .then(lit("?")).otherwise(lit("young")),
                            code=when(col("dept") == "eng").then(1).when(col("dept") == "ops").then(2))),
    Case("casts", "SELECT CAST(age AS DOUBLE) AS a, CAST(id AS VARCHAR) AS s, CAST(balance AS DECIMAL(12, 3)) AS b, "
         "CAST(age AS BIGINT) AS big, CAST('2024-01-02' AS DATE) AS d, CAST(score AS INTEGER) AS i FROM t",
         lambda: t().select(a=col("age").cast(ei.Float64), s=col("id").cast(ei.String),
                            b=col("balance").cast(ei.Decimal(12, 3)), big=col("age").cast(ei.Int64),
                            d=lit(date(2024, 1, 2)), i=col("score").cast(ei.Int32))),
    Case("scalar_functions", "SELECT coalesce(age, id, 0) AS c, abs(score) AS a, sqrt(id) AS r, exp(score) AS e, "
         "ln(id) AS l, round(score, 1) AS rd, round(score) AS r0, floor(score) AS f, ceil(score) AS ce, "
         "lower(name) AS lo, length(name) AS n, substring(name, 2, 2) AS sub, substring(name, 2) AS rest FROM t",
         lambda: t().select(c=col("age").fill_null(col("id")).fill_null(0), a=col("score").abs(), r=col("id").sqrt(),
                            e=col("score").exp(), l=col("id").log(), rd=col("score").round(1),
                            r0=col("score").round(), f=col("score").floor(), ce=col("score").ceil(),
                            lo=col("name").str.to_lower(), n=col("name").str.len(),
                            sub=col("name").str.slice(1, 2), rest=col("name").str.slice(1))),
    Case("dates", "SELECT id, extract(year FROM joined) AS y, month(joined) AS m, day(joined) AS d, "
         "joined + INTERVAL 3 DAY AS later, DATE '2000-01-31' + INTERVAL 1 MONTH AS feb FROM t "
         "WHERE joined >= DATE '1999-12-31' - INTERVAL '1' YEAR",
         lambda: t().filter(col("joined") >= ei.date(1998, 12, 31))
         .select("id", y=col("joined").dt.year(), m=col("joined").dt.month(), d=col("joined").dt.day(),
                 later=col("joined") + 3, feb=lit(date(2000, 2, 29)))),
    Case("group_by_aggregates", "SELECT dept, sum(age) AS s, avg(score) AS a, min(name) AS lo, max(joined) AS hi, "
         "count(*) AS n, count(age) AS na, count(DISTINCT age) AS nd, stddev(score) AS sd, variance(score) AS v "
         "FROM t GROUP BY dept",
         lambda: t().group_by("dept").agg(s=col("age").sum(), a=col("score").mean(), lo=col("name").min(),
                                          hi=col("joined").max(), n=ei.count(), na=col("age").count(),
                                          nd=col("age").n_unique(), sd=col("score").std(), v=col("score").var())),
    Case("group_by_position_alias_having", "SELECT upper(dept) AS d, sum(age) * 2 AS s FROM t GROUP BY 1 "
         "HAVING count(*) > 1 ORDER BY d",
         lambda: t().group_by(col("dept").str.to_upper().alias("d")).agg(s=col("age").sum() * 2, n=ei.count())
         .filter(col("n") > 1).select("d", "s").sort("d"), ordered=True),
    Case("group_by_alias_order_by_aggregate", "SELECT dept AS k, max(id) AS top FROM t GROUP BY k "
         "ORDER BY sum(score) DESC NULLS FIRST",
         lambda: t().group_by(col("dept").alias("k")).agg(top=col("id").max(), s=col("score").sum())
         .sort("s", descending=True, nulls_last=False).select("k", "top"), ordered=True),
    Case("group_by_all", "SELECT dept, age > 26 AS old, count(*) AS n FROM t GROUP BY ALL",
         lambda: t().group_by("dept", (col("age") > 26).alias("old")).agg(n=ei.count())),
    Case("whole_table_aggregate", "SELECT count(*) AS n, sum(age) / count(age) AS mean_age FROM t WHERE id > 100",
         lambda: t().filter(col("id") > 100).agg(n=ei.count(), mean_age=col("age").sum() / col("age").count())),
    Case("order_limit_offset", "SELECT id, age FROM t ORDER BY age DESC NULLS LAST, id LIMIT 3 OFFSET 1",
         lambda: t().select("id", "age").sort("age", "id", descending=[True, False]).limit(3, offset=1),
         ordered=True),
    Case("order_by_unselected", "SELECT name FROM t ORDER BY score NULLS FIRST, 1",
         lambda: t().sort("score", "name", nulls_last=[False, True]).select("name"), ordered=True),
    Case("distinct", "SELECT DISTINCT dept, age > 26 AS old FROM t",
         lambda: t().select("dept", old=col("age") > 26).distinct()),
    Case("inner_join_on", "SELECT t.id, u.floor, d.dept FROM t JOIN u ON t.dept = u.dept JOIN u AS d ON d.dept = u.dept",
         lambda: t().join(u(), on="dept").join(u().rename({"floor": "f2"}), on="dept").select("id", "floor", "dept")),
    Case("left_join_keeps_both_keys", "SELECT t.id, t.dept, u.dept AS ud, floor FROM t LEFT JOIN u ON t.dept = u.dept",
         lambda: t().join(u().with_columns(ud=col("dept")), on="dept", how="left").select("id", "dept", "ud", "floor")),
    Case("right_join", "SELECT t.id, t.dept, u.dept AS ud FROM t RIGHT JOIN u ON u.dept = t.dept",
         lambda: t().with_columns(td=col("dept")).join(u().with_columns(ud=col("dept")), on="dept", how="right")
         .select("id", dept=col("td"), ud=col("ud"))),
    Case("full_join_using", "SELECT * FROM t FULL JOIN u USING (dept)",
         lambda: t().join(u(), on="dept", how="full")),
    Case("join_on_with_filters", "SELECT t.id, u.floor FROM t LEFT JOIN u ON t.dept = u.dept AND u.floor > 1 "
         "WHERE t.id < 6",
         lambda: t().filter(col("id") < 6).join(u().filter(col("floor") > 1), on="dept", how="left")
         .select("id", "floor")),
    Case("cross_and_comma_joins", "SELECT a.id, b.floor FROM t a CROSS JOIN u b WHERE b.floor > 2 AND a.id < 3",
         lambda: t().filter(col("id") < 3).join(u().filter(col("floor") > 2), how="cross").select("id", "floor")),
    Case("comma_join_with_where_keys", "SELECT id, floor FROM t, u WHERE t.dept = u.dept AND age > 20",
         lambda: t().filter(col("age") > 20).join(u(), on="dept").select("id", "floor")),
    Case("union_all_and_union", "SELECT dept FROM t UNION ALL SELECT dept FROM u UNION SELECT 'x' ORDER BY 1",
         lambda: t().select("dept").union(u().select("dept"), ei.from_pydict({"dept": ["x"]}))
         .distinct().sort("dept"), ordered=True),
    Case("subquery_and_cte", "WITH old AS (SELECT * FROM t WHERE age > 26) "
         "SELECT s.dept, s.n FROM (SELECT dept, count(*) AS n FROM old GROUP BY dept) AS s WHERE s.n > 1",
         lambda: t().filter(col("age") > 26).group_by("dept").agg(n=ei.count()).filter(col("n") > 1)),
    Case("in_subquery_and_exists", "SELECT id FROM t WHERE dept IN (SELECT dept FROM u WHERE floor > 1) "
         "AND NOT EXISTS (SELECT 1 FROM u WHERE u.dept = t.dept AND u.floor = 1)",
         lambda: t().join(u().filter(col("floor") > 1), on="dept", how="semi")
         .join(u().filter(col("floor") == 1), on="dept", how="anti").select("id")),
    Case("exists", "SELECT id FROM t WHERE EXISTS (SELECT * FROM u WHERE t.dept = u.dept)",
         lambda: t().join(u(), on="dept", how="semi").select("id")),
    Case("median_and_logs", "SELECT dept, median(age) AS m, max(log10(score)) AS a, max(log(score)) AS b, "
         "max(log(2, score)) AS c FROM t GROUP BY dept",
         lambda: t().group_by("dept").agg(m=col("age").median(), a=col("score").log10().max(),
                                          b=col("score").log10().max(), c=col("score").log(2).max())),
    Case("split", "SELECT id, string_split(name, 'n') AS p, str_split(dept, '') AS q FROM t",
         lambda: t().select("id", p=col("name").str.split("n"), q=col("dept").str.split(""))),
    Case("no_from", "SELECT 1 + 2 AS x, 'a' AS s", lambda: ei.from_pydict({"x": [3], "s": ["a"]})),
    Case("flow_sql_self", "SELECT id FROM self WHERE id > 4", lambda: t().filter(col("id") > 4).select("id")),
]


def held(table: pa.Table, kinds: set[str] | None) -> pa.Table:
    """`table` with the columns a lane's store cannot hold exactly as Int64 or Float64 (SQLite)."""
    if kinds is None:
        return table
    for i, f in enumerate(table.schema):
        kind = "Int32" if pa.types.is_int32(f.type) else "Int16" if pa.types.is_int16(f.type) else (
            "Decimal" if pa.types.is_decimal(f.type) else None)
        if kind is not None and kind not in kinds:
            to = pa.float64() if kind == "Decimal" else pa.int64()
            table = table.set_column(i, f.name, table.column(i).cast(to))
    return table


def from_sql(case: Case, kinds: set[str] | None = None) -> ei.Flow:
    t_, u_ = ei.from_arrow(held(T, kinds)), ei.from_arrow(held(U, kinds))
    if "self" in case.sql.split():
        return t_.sql(case.sql, u=u_)
    return ei.sql(case.sql, t=t_, u=u_)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sql_gives_what_its_flow_plan_gives(case):
    got, expected = from_sql(case).run(engine="reference"), case.flow().run(engine="reference")
    assert got.column_names == expected.column_names
    assert_tables_equal(got, expected, ordered=case.ordered)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.parametrize("lane_name", [name for name in LANES if name != "reference"])
def test_sql_runs_on_every_lane(lane_name, case, load_into):
    agrees_with_reference(lane_name, from_sql(case, holds(lane_name)), load_into, case.ordered)


# ---------------------------------------------------------------- generated queries
# Each piece is (SQL text, Flow API expression); a query combines them, and both forms must agree.
SCALARS = [
    ("id", col("id")), ("age", col("age")), ("score", col("score")), ("name", col("name")),
    ("age + id", col("age") + col("id")), ("score * 2", col("score") * 2), ("id % 3", col("id") % 3),
    ("age / 4", col("age") / 4), ("-score", -col("score")), ("coalesce(age, 0)", col("age").fill_null(0)),
    ("upper(name)", col("name").str.to_upper()), ("length(name)", col("name").str.len()),
    ("CASE WHEN age > 26 THEN 'a' ELSE 'b' END", when(col("age") > 26).then(lit("a")).otherwise(lit("b"))),
    ("CAST(age AS DOUBLE)", col("age").cast(ei.Float64)), ("abs(score)", col("score").abs()),
    ("year(joined)", col("joined").dt.year()), ("balance + 1", col("balance") + 1),
]
PREDICATES = [
    ("age > 26", col("age") > 26), ("name IS NULL", col("name").is_null()), ("score < 2", col("score") < 2),
    ("dept = 'eng'", col("dept") == "eng"), ("id BETWEEN 2 AND 5", col("id").is_between(2, 5)),
    ("age IN (30, 7)", col("age").is_in([30, 7])), ("name LIKE '%n%'", col("name").str.like("%n%")),
    ("joined < DATE '2001-01-01'", col("joined") < ei.date(2001, 1, 1)),
]
AGGS = [
    ("sum(age)", col("age").sum()), ("avg(score)", col("score").mean()), ("min(name)", col("name").min()),
    ("max(joined)", col("joined").max()), ("count(*)", ei.count()), ("count(age)", col("age").count()),
    ("count(DISTINCT dept)", col("dept").n_unique()), ("sum(balance)", col("balance").sum()),
]


@st.composite
def predicates(draw, depth: int = 2):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(PREDICATES))
    (a, fa), (b, fb) = draw(predicates(depth - 1)), draw(predicates(depth - 1))
    op = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if op == "NOT":
        return f"NOT ({a})", ~fa
    return f"({a}) {op} ({b})", (fa & fb) if op == "AND" else (fa | fb)


@st.composite
def queries(draw):
    """(SQL, the same query as a Flow, ordered) over t (and u when joined)."""
    flow, source = t(), "t"
    if draw(st.booleans()):
        how = draw(st.sampled_from(["inner", "left"]))
        flow = flow.join(u(), on="dept", how=how)
        source = f"t {'LEFT ' if how == 'left' else ''}JOIN u USING (dept)"
    where = ""
    if draw(st.booleans()):
        text, pred = draw(predicates())
        where, flow = f" WHERE {text}", flow.filter(pred)
    if draw(st.booleans()):
        key = draw(st.sampled_from(["dept", "age > 26", "name"]))
        key_expr = {"dept": col("dept"), "age > 26": col("age") > 26, "name": col("name")}[key]
        aggs = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique_by=lambda p: p[0]))
        names = [f"a{i}" for i in range(len(aggs))]
        items = ", ".join(f"{s} AS {n}" for (s, _), n in zip(aggs, names))
        grouped = flow.group_by(key_expr.alias("k"))
        sql = f"SELECT {key} AS k, {items} FROM {source}{where} GROUP BY 1"
        if draw(st.booleans()):
            sql += " HAVING count(*) > 1"
            flow = (grouped.agg(**{n: f for (_, f), n in zip(aggs, names)}, n_=ei.count())
                    .filter(col("n_") > 1).select("k", *names))
        else:
            flow = grouped.agg(**{n: f for (_, f), n in zip(aggs, names)})
        return sql, flow, False
    picks = draw(st.lists(st.sampled_from(SCALARS), min_size=1, max_size=4, unique_by=lambda p: p[0]))
    names = [f"c{i}" for i in range(len(picks))]
    flow = flow.select(*[f.alias(n) for (_, f), n in zip(picks, names)], "id")
    sql = f"SELECT {', '.join(f'{s} AS {n}' for (s, _), n in zip(picks, names))}, t.id FROM {source}{where}"
    if draw(st.booleans()):
        sql += " ORDER BY c0 DESC NULLS FIRST, id"
        flow = flow.sort("c0", "id", descending=[True, False], nulls_last=[False, True])
        if draw(st.booleans()):
            sql += " LIMIT 3"
            flow = flow.limit(3)
        return sql, flow, True
    return sql, flow, False


@profile()
@given(q=queries())
def test_generated_sql_gives_what_its_flow_plan_gives(q):
    """...and what DuckDB gives for the same text: the pieces are ones whose meaning DuckDB shares on this
    data (no division by zero, no negative operand of %), so only the types may differ."""
    sql, flow, ordered = q
    got = ei.sql(sql, t=t(), u=u()).run(engine="reference")
    assert_tables_equal(got, flow.run(engine="reference"), ordered=ordered)
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", T)
    con.register("u", U)
    assert_tables_equal(got, con.sql(sql).to_arrow_table().cast(got.schema), ordered=ordered)


@pytest.mark.parametrize("lane_name", [name for name in LANES if name != "reference"])
@settings(parent=profile(), max_examples=max(5, profile().max_examples // 4))
@given(q=queries())
def test_generated_sql_runs_on_every_lane(lane_name, q, load_into):
    """Fewer examples: a database lane stores each example's tables first (slow)."""
    kinds = holds(lane_name)
    flow = ei.sql(q[0], t=ei.from_arrow(held(T, kinds)), u=ei.from_arrow(held(U, kinds)))
    agrees_with_reference(lane_name, flow, load_into, q[2])


# ---------------------------------------------------------------- windows
# Each query's answer is DuckDB's for the same text (the SQL standard's windows); ORDER BY ... ROWS frames,
# row_number, lag and lead order by id last, as their answer turns on the order of ties.
WINDOWS = [
    ("peers_sum", "SELECT id, sum(age) OVER (PARTITION BY dept ORDER BY age) AS s FROM t"),
    ("peers_desc_nulls_first", "SELECT id, sum(age) OVER (ORDER BY dept DESC NULLS FIRST) AS s, "
     "max(name) OVER (ORDER BY age DESC NULLS FIRST) AS mx, min(score) OVER (ORDER BY age) AS mn, "
     "count(score) OVER (ORDER BY dept) AS c, count(*) OVER (ORDER BY dept) AS n FROM t"),
    ("ranks", "SELECT id, rank() OVER (ORDER BY age) AS r, dense_rank() OVER (PARTITION BY dept ORDER BY age DESC) "
     "AS d, row_number() OVER (PARTITION BY dept ORDER BY age, id) AS n, rank() OVER () AS one FROM t"),
    ("whole_partition", "SELECT id, sum(balance) OVER (PARTITION BY dept) AS s, avg(age) OVER () AS a, "
     "count(*) OVER (PARTITION BY dept) AS n, max(joined) OVER (PARTITION BY dept ORDER BY id ROWS BETWEEN "
     "UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS hi FROM t"),
    ("rows_frames", "SELECT id, sum(age) OVER (ORDER BY dept, id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s2, "
     "avg(age) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS running, count(age) OVER (ORDER BY id ROWS 2 "
     "PRECEDING) AS c3, count(*) OVER (ORDER BY id ROWS 0 PRECEDING) AS one, count(name) OVER (PARTITION BY "
     "dept ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cn, min(name) OVER (ORDER BY id ROWS "
     "BETWEEN 1 PRECEDING AND CURRENT ROW) AS lo FROM t"),
    ("lag_lead", "SELECT id, lag(age) OVER (ORDER BY id) AS prev, lead(name, 2) OVER (PARTITION BY dept ORDER BY "
     "id) AS nxt, lag(age, 1, -1) OVER (PARTITION BY dept ORDER BY id DESC) AS filled FROM t"),
    ("over_group_by", "SELECT dept, sum(age) AS s, rank() OVER (ORDER BY sum(age) DESC) AS r, "
     "sum(sum(age)) OVER () AS total FROM t GROUP BY dept ORDER BY r, dept"),
    ("ordered_by_a_window", "SELECT id, age FROM t ORDER BY rank() OVER (ORDER BY age DESC), id"),
    ("qualify_top_per_group", "SELECT dept, id, age FROM t QUALIFY row_number() OVER (PARTITION BY dept "
     "ORDER BY age DESC NULLS LAST, id) = 1"),
    ("named_windows", "SELECT id, sum(age) OVER w AS s, rank() OVER (w ORDER BY age) AS r, count(*) OVER v AS n "
     "FROM t WINDOW w AS (PARTITION BY dept), v AS (ORDER BY id ROWS 1 PRECEDING) QUALIFY n > 1 AND r < 3"),
    ("qualify_over_group_by", "SELECT dept, sum(age) AS s FROM t GROUP BY dept QUALIFY rank() OVER "
     "(ORDER BY sum(age) DESC) <= 2"),
]


def duckdbs(sql: str) -> pa.Table:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", T)
    con.register("u", U)
    return con.sql(sql).to_arrow_table()


@pytest.mark.parametrize("sql", [q for _, q in WINDOWS], ids=[i for i, _ in WINDOWS])
def test_sql_windows_give_duckdbs_answers(sql):
    got = ei.sql(sql, t=t(), u=u()).run(engine="reference")
    assert_tables_equal(got, duckdbs(sql).cast(got.schema), ordered="ORDER BY" in sql.rsplit(")", 1)[-1])


def test_a_running_sum_holds_its_peers():
    """SQL's default frame with ORDER BY ends at the row's last peer: tied t's share one sum."""
    flow = ei.from_pydict({"g": ["a", "a", "a", "b", "a"], "t": [1, 2, 2, 1, None], "x": [1, 2, None, 5, 4]})
    got = ei.sql("SELECT g, t, x, SUM(x) OVER (PARTITION BY g ORDER BY t) AS s FROM flow ORDER BY g, t, x", flow=flow)
    assert got.run(engine="reference").to_pydict() == {
        "g": ["a", "a", "a", "a", "b"], "t": [1, 2, 2, None, 1], "x": [1, 2, None, 4, 5], "s": [1, 3, 3, 7, 5]}


@pytest.mark.parametrize("sql", [q for _, q in WINDOWS], ids=[i for i, _ in WINDOWS])
@pytest.mark.parametrize("lane_name", [name for name in LANES if name != "reference"])
def test_sql_windows_run_on_every_lane(lane_name, sql, load_into):
    kinds = holds(lane_name)
    flow = ei.sql(sql, t=ei.from_arrow(held(T, kinds)), u=ei.from_arrow(held(U, kinds)))
    agrees_with_reference(lane_name, flow, load_into, "ORDER BY" in sql.rsplit(")", 1)[-1])


@st.composite
def window_queries(draw):
    """A query of one to three windows over t: any function, partition and frame, ordered so that each answer
    is defined (ROWS frames, row_number, lag and lead order by id last)."""
    items = []
    for i in range(draw(st.integers(1, 3))):
        fn = draw(st.sampled_from(["sum(age)", "min(name)", "max(joined)", "count(score)", "count(*)", "avg(age)",
                                   "sum(balance)", "rank()", "dense_rank()", "row_number()", "lag(age)",
                                   "lead(dept, 2)"]))
        parts = draw(st.sampled_from(["", "PARTITION BY dept ", "PARTITION BY age > 26, dept "]))
        keys = draw(st.sampled_from(["", "age", "dept", "name", "age, dept", "joined"]))
        way = draw(st.sampled_from(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"]))
        frame = draw(st.sampled_from(["", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ROWS 1 PRECEDING",
                                      "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                                      "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"]))
        ranked = fn in ("rank()", "dense_rank()")
        rows = fn in ("row_number()", "lag(age)", "lead(dept, 2)") or (
            not ranked and frame.startswith("ROWS") and "FOLLOWING" not in frame)
        if fn == "avg(age)" and (keys or rows) and not frame.startswith("ROWS"):
            frame = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
        order = [k + way for k in keys.split(", ")] if keys else []
        order += ["id"] * rows   # ascending: the directions differ where `way` is DESC or NULLS FIRST
        order = f"ORDER BY {', '.join(order)} " if order else ""
        frame = "" if ranked or fn in ("row_number()", "lag(age)", "lead(dept, 2)") or not order else frame
        items.append(f"{fn} OVER ({parts}{order}{frame}) AS w{i}")
    return f"SELECT id, {', '.join(items)} FROM t"


@profile()
@given(sql=window_queries())
def test_generated_sql_windows_give_duckdbs_answers(sql):
    got = ei.sql(sql, t=t(), u=u()).run(engine="reference")
    assert_tables_equal(got, duckdbs(sql).cast(got.schema), ordered=False)


@pytest.mark.parametrize("lane_name", [name for name in LANES if name != "reference"])
@settings(parent=profile(), max_examples=max(5, profile().max_examples // 4))
@given(sql=window_queries())
def test_generated_sql_windows_run_on_every_lane(lane_name, sql, load_into):
    kinds = holds(lane_name)
    agrees_with_reference(lane_name, ei.sql(sql, t=ei.from_arrow(held(T, kinds))), load_into, False)


# ---------------------------------------------------------------- TPC-H's SQL text

DATA = Path(__file__).resolve().parents[1] / "data" / "tpch-sf0.01"


@pytest.mark.parametrize("name", ["q1", "q3", "q5", "q6", "q10"])
@pytest.mark.parametrize("engine", [None, "duckdb", "polars"])
def test_tpch_sql_text_gives_the_answers(engine, name):
    """The specification's text (examples/tpch/sql.py): comma joins with their keys in WHERE, date
    arithmetic with intervals, decimals; on the lane eidos chooses and on the two vector lanes."""
    from examples.tpch import sql

    if engine is not None:
        lane_or_skip(engine)
    tables = {table: ei.read_parquet(str(DATA / f"{table}.parquet")) for table in sql.TABLES}
    got = ei.sql(sql.text(name), **tables).run(engine=engine, strict=True)
    assert_tables_equal(got, pq.read_table(DATA / "answers" / f"{name}.parquet"), ordered=True, float_rel=1e-9)


# ---------------------------------------------------------------- errors

def _error(query: str, kind: type, *words: str) -> None:
    with pytest.raises(kind) as info:
        ei.sql(query, t=t(), u=u())
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("query,kind,words", [
    ("SELECT agee FROM t", PlanError, ["'agee' does not exist", "columns: t.id", "did you mean 'age'"]),
    ("SELECT x.age FROM t", PlanError, ["'x.age' does not exist"]),
    ("SELECT id FROM nowhere", PlanError, ["table 'nowhere'", "tables: t, u", "ei.sql(query, name=flow)"]),
    ("SELECT dept FROM t JOIN u USING (dept) JOIN u AS v ON v.floor = u.floor", PlanError, ["ambiguous", "v.dept"]),
    ("SELECT dept FROM t JOIN u ON t.dept = u.dept", PlanError, ["ambiguous", "t.dept or u.dept"]),
    ("SELECT t.dept, u.dept FROM t JOIN u ON t.dept = u.dept", PlanError, ["two columns named 'dept'"]),
    ("SELECT name, sum(age) FROM t GROUP BY dept", PlanError, ["'t.name' must appear in GROUP BY"]),
    ("SELEC id FROM t", PlanError, ["does not parse"]),
    ("SELECT 1; SELECT 2", PlanError, ["one query"]),
    ("SELECT id, sum(age) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t", UnsupportedError,
     ["window frames", "1 FOLLOWING"]),
    ("SELECT id, avg(age) OVER (ORDER BY age) FROM t", UnsupportedError, ["mean over the rows up to", "ROWS BETWEEN"]),
    ("SELECT id, sum(age) OVER (ORDER BY age, id DESC) FROM t", UnsupportedError, ["one direction"]),
    ("SELECT id FROM t WHERE row_number() OVER (ORDER BY id) < 3", UnsupportedError, ["after WHERE"]),
    ("SELECT id, ntile(2) OVER (ORDER BY id) FROM t", UnsupportedError, ["function NTILE"]),
    ("SELECT id, sum(age) OVER w FROM t", PlanError, ["window 'w' is not defined"]),
    ("SELECT id FROM t QUALIFY rank() OVER (ORDER BY age) = 1 ORDER BY row_number() OVER (ORDER BY id)",
     UnsupportedError, ["QUALIFY"]),
    ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", UnsupportedError, ["WITH RECURSIVE"]),
    ("SELECT id FROM t INTERSECT SELECT id FROM t", UnsupportedError, ["INTERSECT"]),
    ("SELECT md5(name) FROM t", UnsupportedError, ["the function MD5"]),
    ("SELECT nope(name) FROM t", UnsupportedError, ["the function NOPE"]),
    ("SELECT * REPLACE (1 AS id) FROM t", UnsupportedError, ["* REPLACE"]),
    ("SELECT id FROM t WHERE id NOT IN (SELECT 1)", UnsupportedError, ["NOT IN (subquery)", "NOT EXISTS"]),
    ("SELECT id FROM t LEFT JOIN u ON t.age > u.floor", UnsupportedError, ["LEFT JOIN", "equality"]),
    ("SELECT CAST(id AS BLOB) FROM t", UnsupportedError, ["casts to"]),
    ("SELECT id FROM t LIMIT id", UnsupportedError, ["LIMIT as an integer constant"]),
    ("SELECT joined + INTERVAL 1 MONTH FROM t", UnsupportedError, ["MONTH only to a constant date"]),
    ("SELECT id FROM t ORDER BY 9", PlanError, ["position 9"]),
    ("DELETE FROM t", UnsupportedError, ["DELETE"]),
])
def test_errors_name_the_construct_or_the_name(query, kind, words):
    _error(query, kind, *words)


def test_a_table_must_be_a_flow():
    with pytest.raises(PlanError, match="table 't' must be a Flow"):
        ei.sql("SELECT 1", t=T)


def test_without_sqlglot_the_error_names_the_extra(monkeypatch):
    from eidos.flow import sql

    monkeypatch.setattr(sql, "sqlglot", None)
    with pytest.raises(BackendUnavailable, match=r"pip install 'eidos\[sql\]'"):
        ei.sql("SELECT 1")


def test_dialect_passes_to_sqlglot():
    flow = ei.sql("SELECT id FROM t ORDER BY age DESC LIMIT 2", t=t(), dialect="postgres")
    # PostgreSQL sorts nulls first in descending order
    assert flow.run(engine="reference").to_pydict() == {"id": [2, 4]}


def test_explain_shows_the_plan_of_the_sql():
    text = ei.sql("SELECT dept, count(*) AS n FROM t GROUP BY dept", t=t()).explain(engine="reference")
    assert "Aggregate [dept] n=count()" in text


# ---------------------------------------------------------------- files and the command line

def test_files_in_from_and_the_query_command(tmp_path, capsys, monkeypatch):
    from eidos.cli import main

    (tmp_path / "data").mkdir()
    pq.write_table(T.slice(0, 3), tmp_path / "data" / "a.parquet")
    pq.write_table(T.slice(3), tmp_path / "data" / "b.parquet")
    import pyarrow.csv as pcsv

    pcsv.write_csv(U, tmp_path / "u.csv")
    monkeypatch.chdir(tmp_path)
    query = ("SELECT d.floor, count(*) AS n FROM 'data/*.parquet' AS p JOIN 'u.csv' AS d USING (dept) "
             "GROUP BY d.floor ORDER BY n DESC")
    assert ei.sql(query, files=True).run().to_pydict() == {"floor": [3, 1], "n": [3, 2]}
    with pytest.raises(PlanError, match="table 'data/\\*.parquet' is not known"):
        ei.sql(query)
    functions = "SELECT count(*) AS n FROM read_parquet('data/*.parquet') JOIN read_csv('u.csv') AS d USING (dept)"
    assert ei.sql(functions, files=True).run().to_pydict() == {"n": [5]}
    with pytest.raises(PlanError, match="pass files=True"):
        ei.sql(functions)
    assert main(["query", query, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"floor","n"', "3,3", "1,2"]
    assert main(["query", query, "--format", "json"]) == 0
    assert capsys.readouterr().out.strip().splitlines() == ['{"floor":3,"n":3}', '{"floor":1,"n":2}']
    assert main(["query", query, "--explain", "--engine", "reference"]) == 0
    assert "lane: reference" in capsys.readouterr().out
    assert main(["query", "SELECT nope FROM 'data/*.parquet'"]) == 1
    assert "error: column 'nope' does not exist" in capsys.readouterr().err


def test_sqlglot_loads_only_for_sql():
    """sqlglot (the `sql` extra; about a second to import) is not loaded by `import eidos` or a Flow."""
    import subprocess
    import sys

    code = ("import sys, eidos as ei; ei.from_pydict({'a': [1]}).select('a'); before = 'sqlglot' in sys.modules; "
            "ei.sql('SELECT a FROM f', f=ei.from_pydict({'a': [1]})); print(before, 'sqlglot' in sys.modules)")
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": src})
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("name", ["q1", "q10"])
def test_tpch_sql_text_plans_as_the_flow_api_query_does(name):
    """The SQL text and examples/tpch/queries.py's Flow give one optimized plan (the same tree)."""
    from eidos.ir.render import tree
    from examples.tpch import queries, sql

    tables = {table: ei.read_parquet(str(DATA / f"{table}.parquet")) for table in sql.TABLES}
    assert tree(ei.sql(sql.text(name), **tables).plan.optimized) == tree(queries.QUERIES[name](DATA).plan.optimized)

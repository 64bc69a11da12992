"""The SQL a plan becomes grows linearly with the plan, on every dialect (issue 17, item 0).

A guard (the CASE around exp, log, a checked cast, an integer overflow test) reads its argument
several times; spelled out at each read, nesting multiplied the text (3.3 KB, 93 KB, 2.8 MB for 1, 2, 3
levels of the issue's expression). The translator binds such an argument once (translate.Exprs.apply).
Measured in text, never in time: nothing here connects to a database.
"""

from __future__ import annotations

import pytest

import eidos as ei
from eidos import col, when
from eidos.errors import UnsupportedError
from eidos.ir import dtypes as T
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.lanes.sql import execute as X
from eidos.lanes.sql.translate import to_sql
from eidos.testing.strategies import examples

SCHEMA = Schema([("x", T.Float64), ("k", T.Float64), ("i", T.Int64), ("b", T.Boolean), ("s", T.String)])
URIS = {"duckdb": "duckdb:///:memory:", "sqlite": "sqlite:///nowhere.db",
        "postgresql": "postgresql://postgres@127.0.0.1:5432/test"}
LEVELS = examples(8, ci=6)   # nesting levels: exponential growth shows by the third; the deep tier goes to 8


def _issue(e):
    return ((e.sin() * 1.7 + 0.3).exp() + col("k")).log().tanh()


def _integers(e):
    return ((e * 3 + col("i")) // 7 % 5 - 1).abs().cast(T.Int32).cast(T.Int64)


def _values(e):
    return when(col("b")).then(col("k")).when(col("x") > 0).then((e + 1).exp()).otherwise(col("x").tanh())


def _conditions(e):
    return when(col("b")).then(col("k")).when((e * 2).exp() > 1).then(col("x").sin()).otherwise(col("x")) - 1


def _text(e):
    return (e.round(2).cast(T.String).cast(T.Float64) + col("x")).sqrt()


def _floats(e):
    return ((e / col("k")) // 0.5 % 3.0 + col("x")).round(1)


# name -> (one level of nesting, the innermost expression, where it is: "project", or an aggregation's
# argument ("inside"), or around an aggregation ("after"))
NESTINGS = {
    "issue": (_issue, "x", "project"),
    "integers": (_integers, "i", "project"),
    "when-values": (_values, "x", "project"),
    "when-conditions": (_conditions, "x", "project"),
    "text": (_text, "x", "project"),
    "floats": (_floats, "x", "project"),
    "inside-aggregation": (_issue, "x", "inside"),
    "after-aggregation": (lambda e: (e.exp() + 1).log().tanh(), "x", "after"),
}


def _flow(lane: str, grow, seed: str, levels: int, where: str) -> ei.Flow:
    source = ei.Flow(N.Scan(SqlSource(SCHEMA, uri=URIS[lane], table="t")))
    e = col(seed).sum() if where == "after" else col(seed)
    for _ in range(levels):
        e = grow(e)
    if where == "project":
        return source.select(y=e)
    if where == "after":
        return source.group_by("b").agg(y=e)
    return source.group_by("b").agg(y=e.mean(), z=e.sum())


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("lane", URIS)
def test_sql_grows_linearly_with_nesting(lane, nesting):
    """Each level adds about as much text as the one before (exponential growth multiplied it)."""
    grow, seed, where = NESTINGS[nesting]
    dialect = X.dialect(lane)
    sizes = []
    for levels in range(1, LEVELS + 1):
        try:
            sizes.append(len(to_sql(_flow(lane, grow, seed, levels, where).plan, dialect).sql))
        except UnsupportedError as e:
            pytest.skip(str(e))
        if len(sizes) >= 3:
            first, last = sizes[1] - sizes[0], sizes[-1] - sizes[-2]
            assert last <= 1.25 * first + 64, f"{lane} SQL of {nesting} by levels: {sizes}"


@pytest.mark.parametrize("lane", URIS)
def test_an_aggregate_used_twice_is_translated_once(lane):
    """TPC-H Q15's shape: an aggregate joined to its own maximum is one CTE (one GROUP BY), read
    twice, on every dialect; the text does not double with each reuse."""
    source = ei.Flow(N.Scan(SqlSource(SCHEMA, uri=URIS[lane], table="t")))
    revenue = source.group_by("i").agg(total=col("k").sum())
    top = revenue.agg(best=col("total").max())
    plan = revenue.join(top, left_on="total", right_on="best").plan.optimized
    sql = to_sql(plan, X.dialect(lane)).sql
    assert sql.upper().count("GROUP BY") == 1, sql

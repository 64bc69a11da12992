"""Float sum, mean, var and std on the host lanes that sum through eidos.hal.fsum (polars, duckdb)
equal the reference's bit for bit (the cross-lane suite allows a relative 1e-9), on generated
groups of extreme, cancelling and special values, with nulls and empty groups, by one integer key,
string keys and several keys (nulls among them); on the duckdb lane both ways in: the Arrow table's
columns read in place, and rows DuckDB computes (a filter first)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.testing.compare import assert_tables_equal
from tests.lanes.helpers import lane_or_skip

LANES = ["polars", "duckdb"]
SPECIAL = [0.0, -0.0, 5e-324, 1e-300, 1.0, -1.0, 2.0 ** 53, 1e16, 1e300, -1e300, 1.7976931348623157e308,
           math.inf, -math.inf, math.nan, None, None]
values = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(-1074, 1000).map(lambda e: math.ldexp(1.5, e)))


def aggs(flow: ei.Flow, count: bool = True) -> dict:
    """Float aggregations; with count() beside them the lanes take their general way (not only
    float aggregations: no in-place route), without it the exact route."""
    return dict(s=col("x").sum(), m=col("x").mean(), v=col("x").var(), sd=col("x").std(), **({"n": ei.count()} if count else {}))


def same(lane: str, flow: ei.Flow, ordered: bool) -> None:
    lane_or_skip(lane)
    got = flow.run(engine=lane, strict=True)
    assert_tables_equal(got, flow.run(engine="reference", strict=True), ordered=ordered, float_rel=0, float_abs=0)


@pytest.mark.parametrize("lane", LANES)
def test_kahan_counterexample_is_exact(lane):
    """DuckDB's own fsum gives 1.0 here and Polars' sum 0.0; the correctly rounded sum is 1 + 2**-52."""
    flow = ei.from_pydict({"k": [1] * 5 + [2, 2], "x": [2.0 ** 100, 1.0, 2.0 ** -53, 2.0 ** -80, -2.0 ** 100, None, None]})
    lane_or_skip(lane)
    got = flow.group_by("k").agg(s=col("x").sum()).sort("k").run(engine=lane, strict=True)
    assert got.column("s").to_pylist() == [1.0000000000000002, None]


@pytest.mark.parametrize("lane", LANES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 3), values), max_size=30), f32=st.booleans(), filtered=st.booleans())
def test_generated_groups_match_the_reference(lane, rows, f32, filtered):
    t = pa.table({"k": pa.array([k for k, _ in rows], pa.int64()),
                  "x": pa.array([x for _, x in rows], pa.float64())})
    if f32:
        with_f32 = t.column("x").cast(pa.float32(), safe=False)
        t = t.set_column(1, "x", with_f32)
    flow = ei.from_arrow(t)
    if filtered:
        flow = flow.filter(col("x").is_null() | col("x").is_not_null())
    for count in (True, False):
        same(lane, flow.agg(**aggs(flow, count)), ordered=True)
        same(lane, flow.group_by("k").agg(**aggs(flow, count)).sort("k"), ordered=True)


words = st.one_of(st.sampled_from(["a", "b", "", "\u00e9", "a" * 20]), st.none())


@pytest.mark.parametrize("lane", LANES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(words, st.one_of(st.integers(-1, 1), st.integers(-2**63, 2**63 - 1), st.none()),
                               st.one_of(st.booleans(), st.none()), values), max_size=30),
       keys=st.sampled_from([("w",), ("w", "i"), ("i", "b"), ("w", "i", "b")]), filtered=st.booleans())
def test_string_and_several_keys_match_the_reference(lane, rows, keys, filtered):
    """Groups by strings, several keys and null keys, with all-null groups and NaN/inf among the
    values; with no rows at all, no groups."""
    cols = list(zip(*rows)) if rows else [(), (), (), ()]
    t = pa.table({"w": pa.array(list(cols[0]), pa.large_string()), "i": pa.array(list(cols[1]), pa.int64()),
                  "b": pa.array(list(cols[2]), pa.bool_()), "x": pa.array(list(cols[3]), pa.float64())})
    flow = ei.from_arrow(t)
    if filtered:   # DuckDB computes the rows (the lane's fetch route) rather than reading the table in place
        flow = flow.filter(col("x").is_null() | col("x").is_not_null())
    same(lane, flow.group_by(*keys).agg(**aggs(flow, count=False)).sort(*keys), ordered=True)


def test_duckdb_explain_names_its_way_in():
    """A plain column pick of an Arrow table is read in place; rows DuckDB must compute are fetched."""
    lane_or_skip("duckdb")
    flow = ei.from_pydict({"k": ["a", "b", "a"], "x": [1.0, 2.0, 3.0]})
    plain = flow.group_by("k").agg(s=col("x").sum())
    filtered = flow.filter(col("x") > 1.0).group_by("k").agg(s=col("x").sum())
    assert "aggregates the Arrow table's columns in place" in plain.explain(engine="duckdb")
    assert "duckdb runs the projection below" in filtered.explain(engine="duckdb")
    assert "aggregates the Arrow table's columns in place" in plain.sort("k").explain(engine="duckdb")
    assert sorted(filtered.run(engine="duckdb").to_pylist(), key=str) == [{"k": "a", "s": 3.0}, {"k": "b", "s": 2.0}]


def test_duckdb_prices_the_in_place_route_without_its_setup_or_scan():
    """Read in place, DuckDB does not run: its cost model charges neither DuckDB's setup nor a scan, so a global
    float sum over a table in memory is no longer priced above the polars lane's (the kernel does the work)."""
    lane_or_skip("duckdb")
    from eidos.lanes.sql import cost

    flow = ei.from_arrow(pa.table({"x": pa.array([0.5] * 1000, pa.float64())}))
    in_place, fetched = flow.agg(s=col("x").sum()), flow.filter(col("x") > 0).agg(s=col("x").sum())
    assert cost.estimate(in_place.plan).fixed_s == cost.IN_PLACE_SETUP_S
    assert cost.estimate(fetched.plan).fixed_s == cost.MODEL.setup_s

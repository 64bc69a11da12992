"""Float sum, mean, var and std on the host lanes that sum through eidos.hal.fsum (polars, duckdb)
equal the reference's bit for bit (the cross-lane suite allows a relative 1e-9), on generated
groups of extreme, cancelling and special values, with nulls and empty groups."""

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


def aggs(flow: ei.Flow) -> dict:
    return dict(s=col("x").sum(), m=col("x").mean(), v=col("x").var(), sd=col("x").std(), n=ei.count())


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
@given(rows=st.lists(st.tuples(st.integers(0, 3), values), max_size=30), f32=st.booleans())
def test_generated_groups_match_the_reference(lane, rows, f32):
    t = pa.table({"k": pa.array([k for k, _ in rows], pa.int64()),
                  "x": pa.array([x for _, x in rows], pa.float64())})
    if f32:
        with_f32 = t.column("x").cast(pa.float32(), safe=False)
        t = t.set_column(1, "x", with_f32)
    flow = ei.from_arrow(t)
    same(lane, flow.agg(**aggs(flow)), ordered=True)
    same(lane, flow.group_by("k").agg(**aggs(flow)).sort("k"), ordered=True)

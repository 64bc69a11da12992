"""Window functions (docs/semantics.md section 19) on every lane: hand-written plans with hand-computed
answers on the reference lane, and each other lane against the reference on the same plans; plus the
plan-building rules (row order, where windows may appear) and the rewrites around windows."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
import tests.lanes.test_cross_lane as cross
from eidos import col, when
from eidos.errors import EidosError, ExecutionError, PlanError
from eidos.ir import nodes as N
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import profile
from tests.lanes.conftest import LANES
from tests.lanes.helpers import agrees_with_reference, lane_or_skip

NAN = math.nan

# Rows in window order by t: b(t1) a(t2) a(t3) a(t4) b(t5) None(t6) None(t7).
SALES = pa.table({
    "g": pa.array(["a", "b", "a", None, "b", "a", None], pa.large_string()),
    "t": pa.array([3, 1, 2, 7, 5, 4, 6], pa.int64()),
    "x": pa.array([10, 20, None, 5, 20, 30, 7], pa.int64()),
})
FLOATS = pa.table({"g": SALES["g"], "f": pa.array([1.5, NAN, 2.0, None, -0.5, 1e16, 1.0], pa.float64())})
# Float sums a naive running sum gets wrong: 1e16 + 1 + 1 - 1e16 is 2.0, not 0.0.
EXACT = pa.table({"i": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
                  "v": pa.array([1e16, 1.0, 1.0, -1e16, None, 0.5], pa.float64())})
SMALL = pa.table({"a": pa.array([5, 3, 9, 1], pa.int64())})
HOURS = pa.table({"t": pa.array([dt.datetime(2024, 1, 1, h, m) for h, m in ((0, 0), (3, 0), (1, 0), (2, 0), (1, 0), (0, 30))]
                                + [None], pa.timestamp("us")),
                  "x": pa.array([1, 2, None, 4, 8, 16, 32], pa.int64()),
                  "f": pa.array([1e16, 1.0, 1.0, -1e16, 0.5, None, 5.0], pa.float64()),
                  "g": pa.array(["a", "a", "b", "a", "a", "b", "b"], pa.large_string())})

# Days with a tie, a gap (no Jan 3) and a null day; for windows by time with each `closed`.
DAYS = pa.table({"d": pa.array([dt.date(2024, 1, day) if day else None for day in (1, 2, 2, 4, None, 5)], pa.date32()),
                 "x": pa.array([1, 2, None, 8, 16, 32], pa.int64()),
                 "g": pa.array(["a", "a", "b", "a", "a", "b"], pa.large_string())})


def sales():
    return ei.from_arrow(SALES)


CASES = {
    "over_aggregates": (lambda: sales().select(
        s=col("x").sum().over("g"), n=ei.count().over("g"), mx=col("x").max().over("g"),
        mean=col("x").mean().over("g"), c=col("x").count().over("g"), mn=col("g").min().over("g")),
        {"s": [40, 40, 40, 12, 40, 40, 12], "n": [3, 2, 3, 2, 2, 3, 2], "mx": [30, 20, 30, 7, 20, 30, 7],
         "mean": [20.0, 20.0, 20.0, 6.0, 20.0, 20.0, 6.0], "c": [2] * 7, "mn": ["a", "b", "a", None, "b", "a", None]}),
    "over_floats": (lambda: ei.from_arrow(FLOATS).select(
        fs=col("f").sum().over("g"), fm=col("f").mean().over("g")),
        {"fs": [1.0000000000000004e16, NAN, 1.0000000000000004e16, 1.0, NAN, 1.0000000000000004e16, 1.0],
         "fm": [3333333333333334.5, NAN, 3333333333333334.5, 1.0, NAN, 3333333333333334.5, 1.0]}),
    "over_floats_ranked": (lambda: ei.from_arrow(FLOATS).select(fr=col("f").rank("min"), mx=col("f").max().over("g")),
                           {"fr": [3, 6, 4, None, 1, 5, 2], "mx": [1e16, NAN, 1e16, 1.0, NAN, 1e16, 1.0]}),   # NaN largest
    "over_an_expression": (lambda: sales().select(d=col("x") - col("x").mean().over("g")),
                           {"d": [-10.0, 0.0, None, -1.0, 0.0, 10.0, 1.0]}),
    "window_in_when": (lambda: sales().select(w=when(col("x") > 15).then(col("x").sum().over("g")).otherwise(0)),
                       {"w": [0, 40, 0, 0, 40, 40, 0]}),
    "ranks": (lambda: sales().select(
        mn=col("x").rank("min").over("g"), mx=col("x").rank("max").over("g"), de=col("x").rank("dense").over("g"),
        av=col("x").rank().over("g"), od=col("x").rank("ordinal").over("g", order_by="t"),
        ds=col("x").rank("min", descending=True).over("g")),
        {"mn": [1, 1, None, 1, 1, 2, 2], "mx": [1, 2, None, 1, 2, 2, 2], "de": [1, 1, None, 1, 1, 2, 2],
         "av": [1.0, 1.5, None, 1.0, 1.5, 2.0, 2.0], "od": [1, 1, None, 1, 2, 2, 2], "ds": [2, 1, None, 2, 1, 1, 1]}),
    "top_n_per_group": (lambda: sales().filter(col("x").rank("ordinal", descending=True).over("g", order_by="t") <= 1)
                        .select("g", "x"), {"g": ["b", "a", None], "x": [20, 30, 7]}),
    "first_two_per_group": (lambda: sales().filter(
        ei.row_number().over("g", order_by="x", descending=True, nulls_last=True) <= 2).select("t"),
        {"t": [3, 1, 7, 5, 4, 6]}),
    "running": (lambda: sales().sort("t").select(
        "t", cs=col("x").cum_sum().over("g"), cc=col("x").cum_count().over("g"), cmx=col("x").cum_max(),
        cmn=col("x").cum_min(), prev=col("x").shift().over("g"), nxt=col("x").shift(-1, fill_value=0),
        d=col("x").diff().over("g"), n=ei.row_number(), rs=col("x").rolling_sum(2),
        rm=col("x").rolling_mean(3, min_samples=1), rmn=col("x").rolling_min(2, min_periods=1).over("g")),
        {"t": [1, 2, 3, 4, 5, 6, 7], "cs": [20, None, 10, 40, 40, 7, 12], "cc": [1, 0, 1, 2, 2, 1, 2],
         "cmx": [20, None, 20, 30, 30, 30, 30], "cmn": [20, None, 10, 10, 10, 7, 5],
         "prev": [None, None, None, 10, 20, None, 7], "nxt": [None, 10, 30, 20, 7, 5, 0],
         "d": [None, None, None, 20, 0, None, -2], "n": [1, 2, 3, 4, 5, 6, 7],
         "rs": [None, None, None, 40, 50, 27, 12], "rm": [20.0, 20.0, 15.0, 20.0, 20.0, 19.0, 32 / 3],
         "rmn": [20, None, 10, 10, 20, 7, 5]}, True),
    "order_by_without_sort": (lambda: sales().select("t", cs=col("x").cum_sum().over("g", order_by="t")),
                              {"t": [3, 1, 2, 7, 5, 4, 6], "cs": [10, 20, None, 12, 40, 40, 7]}),
    "exact_running_float_sums": (lambda: ei.from_arrow(EXACT).sort("i").select(
        "i", cs=col("v").cum_sum(), rs=col("v").rolling_sum(2, min_samples=1)),
        {"i": [1, 2, 3, 4, 5, 6], "cs": [1e16, 1e16, 1.0000000000000002e16, 2.0, None, 2.5],
         "rs": [1e16, 1e16, 2.0, -1e16, -1e16, 0.5]}, True),
    "cum_prod": (lambda: ei.from_arrow(EXACT).sort("i").select(p=col("i").cum_prod(), q=col("v").cum_prod()),
                 {"p": [1, 2, 6, 24, 120, 720], "q": [1e16, 1e16, 1e16, -1e32, None, -5e31]}, True),
    # by time: (t - 2h, t] holds 00:00 (1), 01:00 (None, 8), 00:30 (16) for the row at 01:00; order plays no part
    "rolling_by_time": (lambda: ei.from_arrow(HOURS).select(
        s=col("x").rolling_sum_by("t", "2h"), l=col("x").rolling_sum_by("t", "2h", closed="left"),
        m=col("x").rolling_max_by("t", "1h").over("g"), a=col("x").rolling_mean_by("t", "90m")),
        {"s": [1, 6, 25, 28, 25, 17, None], "l": [None, 12, 17, 25, 17, 1, None], "m": [1, 2, 16, 4, 8, 16, None],
         "a": [1.0, 3.0, 25 / 3, 6.0, 25 / 3, 8.5, None]}),
    "rolling_by_time_exact_floats": (lambda: ei.from_arrow(HOURS).select(
        s=col("f").rolling_sum_by("t", "3h"), mx=col("f").rolling_max_by("t", "1d").over("g")),
        {"s": [1e16, -9999999999999998.0, 10000000000000002.0, 1.5, 10000000000000002.0, 1e16, None],
         "mx": [1e16, 1e16, 1.0, 1e16, 1e16, None, None]}),
    "rolling_max_by_rows": (lambda: sales().sort("t").select(
        "t", mx=col("x").rolling_max(2), gmx=col("x").rolling_max(3, min_samples=1).over("g")),
        {"t": [1, 2, 3, 4, 5, 6, 7], "mx": [None, None, None, 30, 30, 20, 7], "gmx": [20, None, 10, 30, 20, 7, 7]}, True),
    "rolling_min_by_time": (lambda: ei.from_arrow(HOURS).select(mn=col("x").rolling_min_by("t", "2h")),
                            {"mn": [1, 2, 1, 4, 1, 1, None]}),
    "rolling_by_dates_closed": (lambda: ei.from_arrow(DAYS).select(
        r=col("x").rolling_sum_by("d", "2d"), l=col("x").rolling_sum_by("d", "2d", closed="left"),
        b=col("x").rolling_sum_by("d", "2d", closed="both"), n=col("x").rolling_sum_by("d", "2d", closed="none"),
        two=col("x").rolling_sum_by("d", "2d", closed="both", min_samples=2),
        m=col("x").rolling_max_by("d", "1d").over("g"), lo=col("x").rolling_min_by("d", "48h", closed="left")),
        {"r": [1, 3, 3, 8, None, 40], "l": [None, 1, 1, 2, None, 8], "b": [1, 3, 3, 10, None, 40],
         "n": [None, 1, 1, None, None, 8], "two": [None, 3, 3, 10, None, 40], "m": [1, 2, None, 8, None, 32],
         "lo": [None, 1, 1, 2, None, 8]}),
    "rolling_by_nanoseconds": (lambda: ei.from_arrow(pa.table({
        "t": pa.array([0, 1500, 2000, 2999, 5000, None, 2_000_000], pa.timestamp("ns")),
        "x": pa.array([1, 2, 4, 8, 16, 32, 64], pa.int64())})).select(s=col("x").rolling_sum_by("t", "2us")),
        {"s": [1, 3, 6, 14, 16, None, 64]}),
    # min_samples=0: a window of nulls is still null (Polars' own rolling_sum gives 0)
    "rolling_integers_empty_windows": (lambda: ei.from_pydict({"k": [1, 2, 3, 4, 5], "a": [7, None, None, 5, -3]}).select(
        s=col("a").rolling_sum(2, min_samples=0).over(order_by="k"), m=col("a").rolling_max(2, min_samples=0).over(order_by="k"),
        n=col("a").rolling_min(3, min_samples=2).over(order_by="k")),
        {"s": [7, 7, None, 5, 2], "m": [7, 7, None, 5, 5], "n": [None, None, None, None, -3]}),
    "group_by_dynamic": (lambda: ei.from_arrow(HOURS).group_by_dynamic("t", every="1h", group_by="g").agg(
        s=col("x").sum(), n=ei.count()),
        {"g": ["a", "a", "a", "a", "b", "b", "b"],
         "t": [dt.datetime(2024, 1, 1, h) for h in (0, 1, 2, 3)] + [dt.datetime(2024, 1, 1, 0), dt.datetime(2024, 1, 1, 1), None],
         "s": [1, 8, 4, 2, 16, None, 32], "n": [1, 1, 1, 1, 1, 1, 1]}, True),
    "row_index_and_tail": (lambda: ei.from_arrow(SMALL).sort("a").with_row_index("i", offset=10).tail(2),
                           {"i": [12, 13], "a": [5, 9]}, True),
}


def _expected(flow: ei.Flow, answer: dict) -> pa.Table:
    return pa.table({n: pa.array(answer[n], type=t.to_arrow()) for n, t in flow.schema.items()},
                    schema=flow.schema.to_arrow())


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("lane_name", LANES)
def test_windows(lane_name, case, load_into):
    build, answer, *ordered = CASES[case]
    ordered = bool(ordered and ordered[0])
    flow = build()
    if lane_name == "reference":
        assert_tables_equal(flow.run(engine="reference"), _expected(flow, answer), ordered=ordered)
        return
    agrees_with_reference(lane_name, flow, load_into, ordered)


@pytest.mark.parametrize("lane_name", LANES)
def test_a_running_sum_past_int64_raises(lane_name, load_into):
    flow = ei.from_pydict({"k": [1, 2], "a": [2**62, 2**62]}).select(s=col("a").cum_sum().over(order_by="k"))
    lane = lane_or_skip(lane_name)
    there = load_into(lane, flow)
    if lane.supports(there.plan):
        pytest.skip(f"lane {lane_name!r} lacks {', '.join(lane.supports(there.plan))}")
    with pytest.raises(ExecutionError if lane_name == "reference" else EidosError):
        there.run(engine=lane_name, strict=True)


def test_row_order_must_be_defined():
    grouped = sales().group_by("g").agg(s=col("x").sum())
    for build in (lambda: grouped.with_columns(c=col("s").cum_sum()), lambda: grouped.with_row_index(),
                  lambda: grouped.tail(1), lambda: grouped.select(r=col("s").rank("ordinal")),
                  lambda: grouped.select(n=ei.row_number().over("g"))):
        with pytest.raises(PlanError, match="order"):
            build()
    # an order_by, or an order-free window, needs none
    grouped.with_columns(c=col("s").cum_sum().over(order_by="g"), r=col("s").rank(), m=col("s").max().over("g"))
    grouped.sort("g").with_row_index().tail(1)


@pytest.mark.parametrize("build, message", [
    (lambda: sales().sort(col("x").sum().over("g")), "select or with_columns"),
    (lambda: sales().agg(s=col("x").cum_sum().sum()), "select or with_columns"),
    (lambda: sales().select(c=col("x").cum_sum().cum_sum()), "another window"),
    (lambda: sales().select(c=col("x").sum().over("g").over("t")), "already has over"),
    (lambda: sales().select(c=(col("x") + 1).over("g")), "over\\(\\) applies"),
    (lambda: sales().select(c=col("x").rank("first")), "methods are"),
    (lambda: sales().select(c=col("x").rolling_sum(2, min_samples=3)), "more than its window_size"),
    (lambda: sales().select(c=col("x").rolling_sum(0)), "from 1"),
    (lambda: sales().select(c=col("g").cum_sum()), "numeric"),
    (lambda: sales().with_row_index("x"), "already has a column"),
])
def test_bad_windows_are_plan_errors(build, message):
    with pytest.raises(PlanError, match=message):
        build()


def test_filters_stay_above_windows_and_pruning_keeps_their_keys():
    q = sales().with_columns(n=ei.row_number().over("g", order_by="t")).filter(col("x") > 15).select("n")
    opt = q.plan.optimized
    assert isinstance(opt, N.Project) and isinstance(opt.input, N.Filter)
    below = opt.input.input
    assert isinstance(below, N.Project) and {"g", "t", "x"} <= set(below.input.schema.names)
    assert q.run(engine="reference").to_pydict() == {"n": [1, 2, 3]}


def test_sql_lanes_name_windows_of_calendar_months():
    """A RANGE frame takes a fixed length; a month's varies, so a window by months is a gap SQL lanes name."""
    from eidos.hal import registry

    plan = ei.from_arrow(DAYS).select(s=col("x").rolling_sum_by("d", "1mo")).plan
    for name in ("duckdb", "postgresql", "sqlite"):
        assert any("calendar months" in gap for gap in registry.get(name).supports(plan)), name


def test_windowed_plans_round_trip_through_json():
    flow = sales().with_columns(r=col("x").rank("dense", descending=True).over("g", order_by="t", nulls_last=True),
                                s=col("x").shift(2, fill_value=-1), w=col("x").rolling_mean(3, min_samples=1))
    back = ei.Flow.from_json(flow.to_json())
    assert back.plan == flow.plan
    assert_tables_equal(back.run(engine="reference"), flow.run(engine="reference"), ordered=True)


def test_explain_names_the_sql_lanes_gap_for_file_order():
    text = sales().with_columns(c=col("x").cum_sum()).explain()
    assert "cum_sum" in text
    gaps = lane_or_skip("duckdb").supports(sales().with_columns(c=col("x").cum_sum()).plan)
    assert any("order of rows the plan does not sort" in g for g in gaps)
    assert not lane_or_skip("duckdb").supports(sales().sort("t").with_columns(c=col("x").cum_sum()).plan)


@pytest.mark.parametrize("lane_name", LANES)
@settings(parent=profile(), max_examples=max(5, profile().max_examples // 3))
@given(data=st.data())
def test_generated_windows(lane_name, data, load_into):
    """Generated plans that start with a window step (eidos.testing.strategies), each lane against the reference."""
    cross._check_generated(lane_name, data, load_into, first=("window",))

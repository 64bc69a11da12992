"""Reshaping verbs on every lane against the reference lane (docs/semantics.md section 15): filter with
equalities, drop_nulls, top_k/bottom_k, column selectors, unpivot, pivot, describe, distinct(subset, keep),
join_asof. Hand-written cases check the reference lane against answers worked out by hand; generated
tables (Hypothesis, few examples) check every lane against it."""

from __future__ import annotations

import datetime as _dt
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
import eidos.selectors as cs
from eidos import col
from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import schemas, tables
from tests.lanes.conftest import LANES
from tests.lanes.helpers import agrees_with_reference, holds

NAN = math.nan
date = _dt.date

SALES = pa.table({
    "shop": pa.array(["a", "a", "b", "b", "a", None], pa.large_string()),
    "month": pa.array(["jan", "feb", "jan", "jan", "jan", "feb"], pa.large_string()),
    "units": pa.array([3, 5, None, 2, 4, 1], pa.int64()),
    "price": pa.array([1.5, -0.0, 2.0, None, 0.5, 3.0], pa.float64()),
    "day": pa.array([date(2024, 1, 3), date(2024, 2, 1), None, date(2024, 1, 9), date(2024, 1, 2),
                     date(2024, 2, 5)], pa.date32()),
})


def sales() -> ei.Flow:
    return ei.from_arrow(SALES)


def nans() -> ei.Flow:
    """SALES with a NaN price (SQLite cannot hold NaN: those cases skip there)."""
    return ei.from_arrow(SALES.set_column(3, "price", pa.array([1.5, NAN, 2.0, None, 0.5, 3.0], pa.float64())))


# (id, build, reference answer or None (only compared across lanes), whether row order is part of it: only
# after a sort, since the SQL lanes keep no order of rows read from a table)
CASES = [
    ("filter_equalities", lambda: sales().filter(col("units") > 2, shop="a").select("units"),
     {"units": [3, 5, 4]}, False),
    ("drop_nulls_all", lambda: sales().drop_nulls().select("units"), {"units": [3, 5, 4]}, False),
    ("drop_nulls_subset", lambda: sales().drop_nulls(["units", "shop"]).select("units"), {"units": [3, 5, 2, 4]}, False),
    ("drop_nulls_selector", lambda: sales().drop_nulls(cs.numeric()).select("units"), {"units": [3, 5, 4, 1]}, False),
    ("drop_nulls_keeps_nan", lambda: nans().drop_nulls("price").select("units"), {"units": [3, 5, None, 4, 1]}, False),
    ("top_k", lambda: sales().top_k(2, by="units").select("units"), {"units": [5, 4]}, True),
    ("top_k_reverse_nulls_last", lambda: sales().top_k(5, by=["units"], reverse=True).select("units"),
     {"units": [1, 2, 3, 4, 5]}, True),
    ("bottom_k_two_keys", lambda: sales().bottom_k(3, by=["shop", "units"], reverse=[False, True]).select("shop", "units"),
     {"shop": ["a", "a", "a"], "units": [5, 4, 3]}, True),
    ("top_k_nan_largest", lambda: nans().top_k(1, by="price").select("price"), {"price": [NAN]}, True),
    ("select_selector", lambda: sales().select(cs.string() - cs.by_name("month")).sort(cs.all()),
     {"shop": ["a", "a", "a", "b", "b", None]}, True),
    ("group_by_selector", lambda: sales().group_by(cs.starts_with("sh")).agg(n=ei.count()).sort("shop"),
     {"shop": ["a", "b", None], "n": [3, 2, 1]}, True),
    ("unpivot", lambda: sales().unpivot(["units", "price"], index="month"),
     {"month": ["jan", "feb", "jan", "jan", "jan", "feb"] * 2, "variable": ["units"] * 6 + ["price"] * 6,
      "value": [3.0, 5.0, None, 2.0, 4.0, 1.0, 1.5, -0.0, 2.0, None, 0.5, 3.0]}, False),
    ("unpivot_selector_names", lambda: sales().select("shop", "month").unpivot(cs.by_name("month"), index=cs.by_name("shop"),
                                                                           variable_name="v", value_name="x"),
     {"shop": ["a", "a", "b", "b", "a", None], "v": ["month"] * 6, "x": ["jan", "feb", "jan", "jan", "jan", "feb"]}, False),
    ("pivot_sum", lambda: sales().pivot("month", index="shop", values="units", aggregate_function="sum").sort("shop"),
     {"shop": ["a", "b", None], "feb": [5, None, 1], "jan": [7, 2, None]}, True),
    ("pivot_on_columns_len", lambda: sales().pivot("month", ["jan", "mar"], index="shop", values=["units", "price"],
                                                   aggregate_function="len").sort("shop"),
     {"shop": ["a", "b", None], "units_jan": [2, 2, 0], "units_mar": [0, 0, 0], "price_jan": [2, 2, 0],
      "price_mar": [0, 0, 0]}, True),
    ("pivot_max_nan_no_index", lambda: nans().select("shop", "price").pivot("shop", values="price", aggregate_function="max"),
     {"a": [NAN], "b": [2.0], "null": [3.0]}, False),
    ("describe", lambda: sales().select("units", "shop").describe(),
     None, True),
    ("sample_n", lambda: sales().sort("units").sample(3, seed=11), None, True),
    ("sample_fraction", lambda: sales().sort("units", descending=True).sample(fraction=0.5, seed=5), None, True),
    ("sample_with_replacement", lambda: sales().sort("price").sample(8, seed=2, with_replacement=True), None, True),
    ("sample_file_order", lambda: sales().sample(2, seed=3), None, True),
    ("asof_timestamps_tolerance", lambda: stamps("l").join_asof(stamps("r"), on="t", strategy="nearest",
                                                                  tolerance=_dt.timedelta(hours=1)),
     {"t": [_dt.datetime(2020, 1, 1, h) for h in (1, 5, 9)] + [None], "v": [0, 1, 2, 3],
      "v_right": [0, 1, None, None]}, False),
    # quotes sharing (g, t) (1.0 twice, NaN twice, 4.0 twice, -0.0 and 0.0): the first by content is taken
    ("asof_tied_quotes", lambda: ei.from_pydict({"t": [1.0, 2.0, math.nan, 0.0, -0.0, 5.0, None], "g": [1, 1, 1, 2, 2, 1, 1]})
     .join_asof(ei.from_pydict({"t": [1.0, 1.0, math.nan, math.nan, -0.0, 0.0, 4.0, 4.0], "g": [1, 1, 1, 1, 2, 2, 1, 1],
                                "v": [9, 3, 7, 2, 5, 6, 1, 0]}), on="t", by="g", strategy="nearest"),
     {"t": [1.0, 2.0, math.nan, 0.0, -0.0, 5.0, None], "g": [1, 1, 1, 2, 2, 1, 1], "v": [3, 3, 2, 5, 5, 0, None]}, False),
    ("explode", lambda: lists().explode("xs"), {"k": ["a", "a", "c", "d"], "xs": [1, 2, None, 3],
                                                "ys": [["p", "q"], ["p", "q"], None, ["r"]]}, False),
    ("explode_together_sorted", lambda: lists().sort("k", descending=True).explode(cs.starts_with("x", "y"),
                                                                                 empty_as_null=True, keep_nulls=False),
     {"k": ["d", "b", "a", "a"], "xs": [3, None, 1, 2], "ys": ["r", None, "p", "q"]}, True),
    ("describe_without_percentiles", lambda: sales().describe(percentiles=()), None, True),
    ("distinct_subset_none", lambda: sales().distinct(["shop", "month"], keep="none").select("units"),
     {"units": [5, 1]}, False),
    ("distinct_subset_first_sorted", lambda: sales().sort("units").distinct("shop", keep="first").select("shop", "units"),
     {"shop": [None, "b", "a"], "units": [1, 2, 3]}, True),
    ("distinct_subset_last_sorted", lambda: sales().sort("price", descending=True).distinct(cs.by_name("month"), keep="last")
     .select("month", "units"), {"month": ["feb", "jan"], "units": [5, 2]}, True),
    ("distinct_subset_first_file_order", lambda: sales().distinct("month", keep="first").select("units"),
     {"units": [3, 5]}, False),
    ("asof_backward_by", lambda: trades().join_asof(quotes(), on="t", by="sym"),
     {"t": [1, 4, 4, 8, None, 9], "sym": ["a", "a", "b", "a", "a", None], "qty": [1, 2, 3, 4, 5, 6],
      "px": [None, 10.0, 20.0, 11.0, None, None]}, False),
    ("asof_forward_tolerance", lambda: trades().join_asof(quotes(), on="t", by="sym", strategy="forward", tolerance=1),
     {"t": [1, 4, 4, 8, None, 9], "sym": ["a", "a", "b", "a", "a", None], "qty": [1, 2, 3, 4, 5, 6],
      "px": [10.0, None, None, None, None, None]}, False),
    ("asof_nearest_ties_forward", lambda: trades().join_asof(quotes().rename({"t": "s"}), left_on="t", right_on="s",
                                                              by_left="sym", by_right="sym", strategy="nearest"),
     {"t": [1, 4, 4, 8, None, 9], "sym": ["a", "a", "b", "a", "a", None], "qty": [1, 2, 3, 4, 5, 6],
      "s": [2, 6, 3, 6, None, None], "px": [10.0, 11.0, 20.0, 11.0, None, None]}, False),
    ("asof_dates_suffix", lambda: sales().select("day", "units").join_asof(
        sales().select("day", "units").drop_nulls(), on="day", strategy="forward", tolerance=_dt.timedelta(days=3)),
     {"day": list(SALES.column("day").to_pylist()), "units": [3, 5, None, 2, 4, 1],
      "units_right": [3, 5, None, 2, 4, 1]}, False),
]


def stamps(side: str) -> ei.Flow:
    hours = (1, 5, 9, None) if side == "l" else (2, 6, 6)
    return ei.from_pydict({"t": [None if h is None else _dt.datetime(2020, 1, 1, h) for h in hours],
                           "v": list(range(len(hours)))})


def lists() -> ei.Flow:
    return ei.from_arrow(pa.table({"k": ["a", "b", "c", "d"],
                                   "xs": pa.array([[1, 2], [], None, [3]], pa.large_list(pa.int64())),
                                   "ys": pa.array([["p", "q"], [], None, ["r"]], pa.large_list(pa.large_string()))}))


def trades() -> ei.Flow:
    return ei.from_pydict({"t": [1, 4, 4, 8, None, 9], "sym": ["a", "a", "b", "a", "a", None], "qty": [1, 2, 3, 4, 5, 6]})


def quotes() -> ei.Flow:
    """Two quotes for a at t=2 (10.0 sorts first, so it is the one taken), b at 3, a at 6, one without a time."""
    return ei.from_pydict({"t": [2, 6, 3, 2, None], "sym": ["a", "a", "b", "a", "a"], "px": [12.0, 11.0, 20.0, 10.0, 1.0]})


def _check(lane_name: str, flow: ei.Flow, expected: dict | None, ordered: bool, load_into) -> None:
    if lane_name == "reference":
        got = flow.run(engine="reference")
        if expected is not None:
            want = pa.table({n: pa.array(expected[n], t.to_arrow()) for n, t in flow.schema.items()})
            assert_tables_equal(got, want, ordered=ordered)
        assert got.schema == flow.schema.to_arrow()
        return
    agrees_with_reference(lane_name, flow, load_into, ordered)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("lane_name", LANES)
def test_reshape(lane_name, case, load_into):
    _, build, expected, ordered = case
    _check(lane_name, build(), expected, ordered, load_into)


def test_describe_reference_values():
    got = sales().select("units", "shop", "day").describe().run(engine="reference").to_pydict()
    assert got["statistic"] == ["count", "null_count", "mean", "std", "min", "25%", "50%", "75%", "max"]
    assert got["units"] == [5.0, 1.0, 3.0, pytest.approx(math.sqrt(2.5)), 1.0, 2.0, 3.0, 4.0, 5.0]
    assert got["shop"][:2] == ["5", "1"] and got["shop"][4] == "a" and got["shop"][-1] == "b"
    assert got["day"][4] == "2024-01-02" and got["day"][2] is None


def test_sample_is_the_same_rows_for_a_seed_and_keeps_row_order():
    flow = ei.from_pydict({"i": list(range(50))})
    a = flow.sample(10, seed=42).run(engine="reference").column("i").to_pylist()
    assert a == flow.sample(10, seed=42).run(engine="reference").column("i").to_pylist() == sorted(set(a))
    assert len(a) == 10 and a != flow.sample(10, seed=43).run(engine="reference").column("i").to_pylist()
    assert flow.sample(fraction=0.3, seed=1).run(engine="reference").num_rows == 15
    drawn = flow.sample(100, seed=5, with_replacement=True).run(engine="reference").column("i").to_pylist()
    assert len(drawn) == 100 and len(set(drawn)) < 50 and set(drawn) <= set(range(50))


def test_explode_of_unequal_lists_raises_on_every_lane():
    from eidos.errors import ExecutionError

    flow = ei.from_arrow(pa.table({"xs": pa.array([[1, 2]], pa.large_list(pa.int64())),
                                   "ys": pa.array([[1]], pa.large_list(pa.int64()))})).explode("xs", "ys")
    for lane in ("reference", "polars", "duckdb"):
        with pytest.raises(ExecutionError, match=r"lengths \[2, 1\]"):
            flow.run(engine=lane)


def test_selectors_resolve_in_schema_order():
    flow = ei.from_pydict({"b": [1], "a": ["x"], "c": [2.0], "ab": [True]})
    assert flow.select(cs.by_name("c", "b")).columns == ("b", "c")
    assert flow.select(cs.numeric() & cs.matches("^[bc]$")).columns == ("b", "c")
    assert flow.select(cs.exclude("a", cs.boolean())).columns == ("b", "c")
    assert flow.select(cs.ends_with("b") | cs.string()).columns == ("b", "a", "ab")
    assert flow.select(cs.by_dtype(ei.Int64, ei.Float64)).columns == ("b", "c")
    assert flow.drop(cs.all() - cs.by_name("a")).columns == ("a",)
    assert flow.sort(cs.numeric(), descending=[True, False]).plan.keys[0].descending


@pytest.mark.parametrize("build, words", [
    (lambda f: f.filter("a"), "Boolean expressions"),
    (lambda f: f.filter(), "needs a predicate"),
    (lambda f: f.drop_nulls("nope"), "'nope' does not exist"),
    (lambda f: f.top_k(-1, by="a"), "k >= 0"),
    (lambda f: f.top_k(1, by="a", reverse=[True, False]), "2 reverse flags for 1 keys"),
    (lambda f: f.unpivot(["a", "s"]), "share a supertype"),
    (lambda f: f.unpivot(index=["a", "s"]), "at least one column"),
    (lambda f: f.pivot("s", index="a", values="a"), "aggregate_function must be one of"),
    (lambda f: f.pivot("s"), "index=... or values="),
    (lambda f: f.pivot(["s", "a"], values="a", aggregate_function="sum"), "one `on` column"),
    (lambda f: f.pivot("s", "x", values="a", aggregate_function="sum"), "on_columns takes a list"),
    (lambda f: f.describe(percentiles=[2]), "from 0 to 1"),
    (lambda f: f.sample(), "sample takes n=... "),
    (lambda f: f.explode("a"), "explode takes List columns; 'a' is Int64"),
    (lambda f: f.explode("a", keep_nulls=None), "take True or False"),
    (lambda f: f.sample(1, fraction=0.5), "one of them"),
    (lambda f: f.sample(-1), "from 0 to 2\\*\\*31"),
    (lambda f: f.sample(fraction=1.5), "from 0 to 1"),
    (lambda f: f.sample(fraction=0.5, with_replacement=True), "takes n="),
    (lambda f: f.sample(1, seed=-2), "non-negative integer"),
    (lambda f: f.group_by("s").agg(n=ei.count()).sample(1), "order of the rows"),
    (lambda f: f.select(cs.matches("(")), "not a regular expression"),
    (lambda f: f.select(cs.all() | 3), "takes another selector"),
    (lambda f: f.distinct(keep="one"), "keep must be one of"),
    (lambda f: f.distinct([]), "names no column"),
    (lambda f: f.group_by("s").agg(n=ei.count()).distinct("s", keep="first"), "order of the rows"),
    (lambda f: f.join_asof(f, on="s"), "numbers, dates or timestamps"),
    (lambda f: f.join_asof(f, on="a", strategy="closest"), "strategy must be one of"),
    (lambda f: f.join_asof(f, on="a", tolerance="1d"), "tolerance is a number"),
    (lambda f: f.select(t=ei.lit(_dt.datetime(2020, 1, 1))).join_asof(f.select(t=ei.lit(_dt.datetime(2020, 1, 1))),
                                                                     on="t", tolerance=1), "a datetime.timedelta for timestamps"),
    (lambda f: f.join_asof(f, on="a", tolerance=-1), "tolerance is a number >= 0"),
    (lambda f: f.join_asof(f, left_on="a"), "left_on=name and right_on=name"),
    (lambda f: f.join_asof(f, on="a", by="nope"), "'nope' does not exist"),
    (lambda f: f.join_asof(f, on="a", by_left="a", by_right="s"), "incompatible types"),
])
def test_bad_arguments_name_what_is_wrong(build, words):
    with pytest.raises(PlanError, match=words):
        build(ei.from_pydict({"a": [1], "s": ["x"]}))


# ---------------------------------------------------------------- generated tables

KINDS = ("Int64", "Int32", "Float64", "String", "Date", "Boolean", "Decimal")


def _generated(lane_name: str, data, build, load_into, *, ordered: bool) -> None:
    kinds = [k for k in KINDS if holds(lane_name) is None or k in holds(lane_name)]
    schema = data.draw(schemas(kinds=kinds, min_columns=2, max_columns=4), label="schema")
    table = data.draw(tables(schema, max_rows=6, nan=lane_name != "sqlite"), label="table")
    try:
        flow = build(ei.from_arrow(table), schema, data)
    except PlanError:
        return   # the verb refuses these columns (no supertype): tested above
    _check(lane_name, flow, None, ordered, load_into)


def _top(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    by = data.draw(st.lists(st.sampled_from(schema.names), min_size=1, max_size=2, unique=True), label="by")
    k = data.draw(st.integers(0, 4), label="k")
    # sorted by every column after `by`, so ties cannot pick different rows on different lanes
    return flow.sort(cs.all()).top_k(k, by=by, reverse=data.draw(st.booleans(), label="reverse"))


def _unpivot(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    index = data.draw(st.lists(st.sampled_from(schema.names), max_size=1, unique=True), label="index")
    return flow.unpivot(index=index)


def _pivot(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    on, values = data.draw(st.permutations(schema.names), label="on, values")[:2]
    fn = data.draw(st.sampled_from(("min", "max", "len", "count")), label="aggregate_function")
    index = [n for n in schema.names if n not in (on, values)][:1]
    return flow.pivot(on, index=index or None, values=values, aggregate_function=fn)


def _distinct(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    subset = data.draw(st.lists(st.sampled_from(schema.names), min_size=1, max_size=2, unique=True), label="subset")
    keep = data.draw(st.sampled_from(("none", "first", "last")), label="keep")
    if keep != "none":   # over sorted rows (every column: no ties), so the first and the last are the same rows everywhere
        flow = flow.sort(cs.all(), descending=data.draw(st.booleans(), label="descending"))
    return flow.distinct(subset, keep=keep)


def _asof(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    ons = [n for n, t in schema.items() if t.is_numeric or t.kind == "Date"]
    if not ons:
        raise PlanError("no column to join on")
    on = data.draw(st.sampled_from(ons), label="on")
    other = flow.select(on, *[n for n in schema.names if n != on][:1]).distinct()
    by = [n for n in schema.names if n != on][:1] if data.draw(st.booleans(), label="by") else None
    strategy = data.draw(st.sampled_from(("backward", "forward", "nearest")), label="strategy")
    tolerance = data.draw(st.sampled_from((None, 0, 1, 100)), label="tolerance")
    return flow.join_asof(other, on=on, by=by, strategy=strategy, tolerance=tolerance, suffix="_r")


def _sample(flow: ei.Flow, schema: Schema, data) -> ei.Flow:
    seed = data.draw(st.integers(0, 2**62), label="seed")
    flow = flow.sort(cs.all())
    if data.draw(st.booleans(), label="with n"):
        return flow.sample(data.draw(st.integers(0, 7), label="n"), seed=seed,
                           with_replacement=data.draw(st.booleans(), label="with_replacement"))
    return flow.sample(fraction=data.draw(st.sampled_from((0.0, 0.25, 0.5, 1.0)), label="fraction"), seed=seed)


VERBS = {"sample": (_sample, True), "distinct": (_distinct, False), "join_asof": (_asof, False), "top_k": (_top, True), "unpivot": (_unpivot, False), "pivot": (_pivot, False),
         "drop_nulls": (lambda f, s, d: f.drop_nulls(d.draw(st.sampled_from(s.names))), False),
         "describe": (lambda f, s, d: f.describe(percentiles=d.draw(st.sampled_from(((), (0.5,), (0.1, 0.9))))), True)}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("lane_name", LANES)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_generated(lane_name, verb, data, load_into):
    build, ordered = VERBS[verb]
    _generated(lane_name, data, build, load_into, ordered=ordered)


@pytest.mark.parametrize("lane_name", LANES)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_generated_explode(lane_name, data, load_into):
    """Explode of generated List columns (nulls, empty lists, one or two columns, over sorted rows or not), each
    lane against the reference; two lists exploded together are kept only in rows where they are equally long."""
    kinds = [k for k in KINDS + ("List",) if holds(lane_name) is None or k in holds(lane_name)]
    if "List" not in kinds:
        return
    others = data.draw(schemas(kinds=[k for k in kinds if k != "List"], max_columns=2), label="others")
    inner = data.draw(st.lists(st.sampled_from(("Int64", "String", "Float64", "Date")), min_size=1, max_size=2),
                      label="lists")
    lists = [f"__l{i}" for i in range(len(inner))]
    schema = Schema(list(others.items()) + [(n, ei.List(T.BY_NAME[k])) for n, k in zip(lists, inner)])
    table = data.draw(tables(schema, max_rows=6, nan=True), label="table")
    flow = ei.from_arrow(table)
    keys = [n for n, t in schema.items() if t.kind != "List"]
    if keys and data.draw(st.booleans(), label="sorted"):   # the SQL lanes then carry the order (ties aside)
        flow = flow.sort(*keys)
    names = lists[:1]
    if len(lists) > 1 and data.draw(st.booleans(), label="two"):   # the second as long as the first
        names = lists[:2]
        flow = flow.filter(col(lists[0]).list.len().fill_null(-1) == col(lists[1]).list.len().fill_null(-1))
    flow = flow.explode(names, empty_as_null=data.draw(st.booleans(), label="empty_as_null"),
                        keep_nulls=data.draw(st.booleans(), label="keep_nulls"))
    _check(lane_name, flow, None, False, load_into)


@pytest.mark.parametrize("lane_name", LANES)
def test_distinct_keep_any_keeps_one_row_of_each(lane_name, load_into):
    from tests.lanes.helpers import lane_or_skip

    lane = lane_or_skip(lane_name)
    flow = load_into(lane, sales())
    if lane.supports(flow.plan):
        pytest.skip(f"{lane_name} lacks {lane.supports(flow.plan)}")
    got = flow.distinct(["shop", "month"]).run(engine=lane_name, strict=True).to_pylist()
    rows = SALES.to_pylist()
    assert sorted((r["shop"] or "", r["month"]) for r in got) == sorted({(r["shop"] or "", r["month"]) for r in rows})
    assert all(r in rows for r in got)

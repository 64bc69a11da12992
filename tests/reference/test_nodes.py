"""Every plan node on the reference lane against hand-computed answers (docs/semantics.md)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal as D

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError, UnsupportedError
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from tests.reference.helpers import LANE, cols, column, is_nan, run

NAN = math.nan


@pytest.fixture
def people():
    return ei.from_pydict({"id": [1, 2, 3, 4, 5], "name": ["ann", "bob", "cy", None, "éva"],
                           "dept": ["x", "y", "x", None, "y"], "pay": [10.0, None, 30.0, 40.0, NAN]})


# ---------------------------------------------------------------- scans

def test_scan_with_column_pruning(people):
    scan = people.plan
    pruned = N.Scan(scan.source, ("pay", "id"))
    t = LANE.execute(pruned)
    assert t.schema.names == ["pay", "id"] and t.column("id").to_pylist() == [1, 2, 3, 4, 5]


def test_parquet_scan(tmp_path):
    pq.write_table(pa.table({"a": [1, 2], "s": ["x", None]}), tmp_path / "p1.parquet")
    pq.write_table(pa.table({"a": [3], "s": ["z"]}), tmp_path / "p2.parquet")
    f = ei.read_parquet(str(tmp_path))
    assert cols(f) == {"a": [1, 2, 3], "s": ["x", None, "z"]}
    assert LANE.execute(N.Scan(f.plan.source, ("s",))).to_pydict() == {"s": ["x", None, "z"]}


def test_csv_scan_uses_schema_types(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a;b;c;d\n1;2.5;x;2020-01-02\n;NaN;;2021-03-04\n3;;y z;\n")
    f = ei.read_csv(path, delimiter=";")
    t = run(f)
    out = t.to_pydict()
    assert out["a"] == [1, None, 3] and out["c"] == ["x", None, "y z"]
    assert out["b"][0] == 2.5 and is_nan(out["b"][1]) and out["b"][2] is None
    assert out["d"] == [dt.date(2020, 1, 2), dt.date(2021, 3, 4), None]


def test_csv_without_header(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1,a\n2,b\n")
    f = ei.read_csv(path, has_header=False)
    assert list(cols(f).values()) == [[1, 2], ["a", "b"]]


def test_sql_sources_are_not_read_here():
    src = SqlSource(Schema([("a", ei.Int64)]), uri="duckdb:///x.db", table="t")
    assert LANE.supports(N.Scan(src))
    with pytest.raises(UnsupportedError, match="local sources only"):
        LANE.execute(N.Scan(src))


def test_empty_table_through_every_node():
    f = ei.from_arrow(pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    q = (f.filter(col("a") > 0).with_columns(b=col("a") * 2).sort("a").distinct().limit(3)
         .join(f, on="a", how="left").group_by("s").agg(n=ei.count()))
    assert cols(q) == {"s": [], "n": []}
    assert cols(f.union(f)) == {"a": [], "s": []}


# ---------------------------------------------------------------- project and filter

def test_project_select_rename_drop(people):
    assert cols(people.select("id", double=col("id") * 2).filter(col("double") > 6)) == {
        "id": [4, 5], "double": [8, 10]}
    assert run(people.rename({"id": "key"}).drop("pay", "dept")).schema.names == ["key", "name"]


def test_filter_null_and_nan(people):
    assert column(people.filter(col("pay") > 20), "id") == [3, 4, 5]
    assert column(people.filter(~(col("pay") > 20)), "id") == [1]


def test_literal_columns():
    f = ei.from_pydict({"a": [1, 2]})
    t = run(f.with_columns(k=ei.lit(7), s=ei.lit("x"), n=ei.lit(None, ei.Float64)))
    assert t.to_pydict() == {"a": [1, 2], "k": [7, 7], "s": ["x", "x"], "n": [None, None]}


# ---------------------------------------------------------------- aggregate

def test_group_by_first_appearance_order_and_null_key(people):
    out = cols(people.group_by("dept").agg(n=ei.count(), c=col("pay").count(), s=col("pay").sum(),
                                           mx=col("pay").max(), mn=col("pay").min()))
    assert out["dept"] == ["x", "y", None]
    assert out["n"] == [2, 2, 1] and out["c"] == [2, 1, 1]
    assert out["s"][0] == 40.0 and is_nan(out["s"][1]) and out["s"][2] == 40.0
    assert is_nan(out["mx"][1]) and is_nan(out["mn"][1]) and out["mx"][0] == 30.0


def test_aggregates_skip_nulls_and_empty_groups_are_null():
    f = ei.from_arrow(pa.table({"k": [1, 1, 2], "v": pa.array([None, None, 5], pa.int64())}))
    out = cols(f.group_by("k").agg(s=col("v").sum(), m=col("v").mean(), c=col("v").count(), u=col("v").n_unique(),
                                   sd=col("v").std(), va=col("v").var(), mn=col("v").min(), n=ei.count()))
    assert out == {"k": [1, 2], "s": [None, 5], "m": [None, 5.0], "c": [0, 1], "u": [0, 1],
                   "sd": [None, None], "va": [None, None], "mn": [None, 5], "n": [2, 1]}


def test_global_aggregate_of_nothing_is_one_row():
    f = ei.from_arrow(pa.table({"v": pa.array([], pa.float64())}))
    assert cols(f.agg(s=col("v").sum(), n=ei.count(), c=col("v").count(), m=col("v").max())) == {
        "s": [None], "n": [0], "c": [0], "m": [None]}


def test_group_by_empty_input_has_no_groups():
    f = ei.from_arrow(pa.table({"k": pa.array([], pa.int64()), "v": pa.array([], pa.float64())}))
    assert cols(f.group_by("k").agg(n=ei.count())) == {"k": [], "n": []}


def test_std_var_are_sample():
    f = ei.from_pydict({"v": [2, 4, 4, 4, 5, 5, 7, 9]})
    out = cols(f.agg(v=col("v").var(), s=col("v").std(), m=col("v").mean()))
    assert out["v"] == [32 / 7] and math.isclose(out["s"][0], math.sqrt(32 / 7)) and out["m"] == [5.0]


def test_sum_types_and_overflow():
    f = ei.from_arrow(pa.table({"i": pa.array([100, 100], pa.int8()), "u": pa.array([1, 2], pa.uint8()),
                                "d": pa.array([D("0.10"), D("0.20")], pa.decimal128(3, 2)),
                                "g": pa.array([0.5, 0.25], pa.float32())}))
    t = run(f.agg(i=col("i").sum(), u=col("u").sum(), d=col("d").sum(), g=col("g").sum(), dm=col("d").mean()))
    assert [fl.type for fl in t.schema] == [pa.int64(), pa.uint64(), pa.decimal128(38, 2), pa.float64(), pa.float64()]
    assert t.to_pydict() == {"i": [200], "u": [3], "d": [D("0.30")], "g": [0.75], "dm": [0.15]}
    big = ei.from_pydict({"v": [2**62, 2**62]})
    with pytest.raises(ExecutionError, match="does not fit in Int64"):
        run(big.agg(s=col("v").sum()))


def test_nan_groups_with_nan_and_n_unique():
    f = ei.from_pydict({"k": [NAN, 1.0, NAN, None, -0.0, 0.0], "v": [1, 2, 3, 4, 5, 6]})
    out = cols(f.group_by("k").agg(s=col("v").sum()))
    assert is_nan(out["k"][0]) and out["k"][1:] == [1.0, None, -0.0] and out["s"] == [4, 2, 4, 11]
    assert cols(f.agg(u=col("k").n_unique())) == {"u": [3]}


def test_aggregate_expressions_and_key_expressions():
    f = ei.from_pydict({"k": [1, 2, 3, 4], "v": [1.0, 2.0, 3.0, 4.0]})
    q = f.group_by((col("k") % 2).alias("odd")).agg(r=col("v").sum() / ei.count(), w=(col("v") * col("k")).sum(),
                                                    z=col("odd") + col("v").max())
    assert cols(q) == {"odd": [1, 0], "r": [2.0, 3.0], "w": [10.0, 20.0], "z": [4.0, 4.0]}


def test_min_max_strings_dates_decimals_booleans():
    f = ei.from_pydict({"s": ["b", "é", "a", None], "d": [dt.date(2020, 1, 1), None, dt.date(2019, 5, 5), None],
                        "m": [D("1.5"), D("-2.5"), None, D("0.0")], "b": [True, False, None, True]})
    out = cols(f.agg(s0=col("s").min(), s1=col("s").max(), d0=col("d").min(), d1=col("d").max(),
                     m0=col("m").min(), m1=col("m").max(), b0=col("b").min(), b1=col("b").max()))
    assert out == {"s0": ["a"], "s1": ["é"], "d0": [dt.date(2019, 5, 5)], "d1": [dt.date(2020, 1, 1)],
                   "m0": [D("-2.5")], "m1": [D("1.5")], "b0": [False], "b1": [True]}


# ---------------------------------------------------------------- joins

@pytest.fixture
def lr():
    left = ei.from_pydict({"k": [1, 2, None, 4, 2], "a": ["p", "q", "r", "s", "t"]})
    right = ei.from_pydict({"k": [2, 3, None, 2], "a": ["X", "Y", "Z", "W"], "b": [20, 30, 0, 21]})
    return left, right


def _sorted_rows(table_dict):
    rows = list(zip(*table_dict.values()))
    return sorted(rows, key=lambda r: tuple((x is None, x if x is not None else 0) for x in r))


def test_inner_join_null_keys_never_match(lr):
    left, right = lr
    out = cols(left.join(right, on="k"))
    assert list(out) == ["k", "a", "a_right", "b"]
    assert _sorted_rows(out) == [(2, "q", "W", 21), (2, "q", "X", 20), (2, "t", "W", 21), (2, "t", "X", 20)]


def test_left_join(lr):
    left, right = lr
    out = cols(left.join(right, on="k", how="left"))
    assert _sorted_rows(out) == [(1, "p", None, None), (2, "q", "W", 21), (2, "q", "X", 20), (2, "t", "W", 21),
                                 (2, "t", "X", 20), (4, "s", None, None), (None, "r", None, None)]


def test_right_and_full_join_coalesce_keys(lr):
    left, right = lr
    r = cols(left.join(right, on="k", how="right"))
    assert _sorted_rows(r) == [(2, "q", "W", 21), (2, "q", "X", 20), (2, "t", "W", 21), (2, "t", "X", 20),
                               (3, None, "Y", 30), (None, None, "Z", 0)]
    f = cols(left.join(right, on="k", how="full"))
    assert len(f["k"]) == 9
    assert sorted(f["k"], key=lambda x: (x is None, x or 0)) == [1, 2, 2, 2, 2, 3, 4, None, None]


def test_semi_and_anti(lr):
    left, right = lr
    assert cols(left.join(right, on="k", how="semi")) == {"k": [2, 2], "a": ["q", "t"]}
    assert cols(left.join(right, on="k", how="anti")) == {"k": [1, None, 4], "a": ["p", "r", "s"]}


def test_cross_join():
    a = ei.from_pydict({"x": [1, 2]})
    b = ei.from_pydict({"y": ["u", "v", "w"]})
    assert cols(a.join(b, how="cross")) == {"x": [1, 1, 1, 2, 2, 2], "y": ["u", "v", "w"] * 2}
    empty = ei.from_arrow(pa.table({"y": pa.array([], pa.string())}))
    assert cols(a.join(empty, how="cross")) == {"x": [], "y": []}


def test_join_multiple_keys_promoted_types_and_nan():
    left = ei.from_arrow(pa.table({"i": pa.array([1, 2, 3], pa.int32()), "f": [NAN, 1.0, NAN], "v": [1, 2, 3]}))
    right = ei.from_arrow(pa.table({"j": pa.array([1, 2, 3], pa.int64()), "g": [NAN, 1.0, 0.0], "w": [7, 8, 9]}))
    t = run(left.join(right, left_on=["i", "f"], right_on=["j", "g"]))
    assert t.schema.field("i").type == pa.int64()
    out = t.to_pydict()
    assert out["i"] == [1, 2] and is_nan(out["f"][0]) and out["v"] == [1, 2] and out["w"] == [7, 8]


def test_join_int_with_float_keys():
    left = ei.from_pydict({"k": [1, 2]})
    right = ei.from_pydict({"k": [1.0, 2.5], "v": ["a", "b"]})
    t = run(left.join(right, on="k", how="full"))
    assert t.schema.field("k").type == pa.float64()
    assert sorted(zip(*t.to_pydict().values())) == [(1.0, "a"), (2.0, None), (2.5, "b")]


def test_join_suffix_and_distinct_key_names():
    left = ei.from_pydict({"id": [1], "v": [1]})
    right = ei.from_pydict({"key": [1], "v": [2], "id": [9]})
    t = run(left.join(right, left_on="id", right_on="key", suffix="_r"))
    assert t.to_pydict() == {"id": [1], "v": [1], "v_r": [2], "id_r": [9]}


# ---------------------------------------------------------------- sort, limit, distinct, union

def test_sort_nulls_last_both_directions_and_nan_largest():
    f = ei.from_pydict({"x": [3.0, None, NAN, -math.inf, 1.0, math.inf]})
    up = column(f.sort("x"))
    assert up[:4] == [-math.inf, 1.0, 3.0, math.inf] and is_nan(up[4]) and up[5] is None
    down = column(f.sort("x", descending=True))
    assert is_nan(down[0]) and down[1:] == [math.inf, 3.0, 1.0, -math.inf, None]
    first = column(f.sort("x", nulls_last=False))
    assert first[0] is None and is_nan(first[5])
    first_desc = column(f.sort("x", descending=True, nulls_last=False))
    assert first_desc[0] is None and is_nan(first_desc[1])


def test_sort_is_stable_with_multiple_keys():
    f = ei.from_pydict({"a": [2, 1, 2, 1, None], "b": ["x", "y", "y", "x", "z"], "i": [0, 1, 2, 3, 4]})
    assert column(f.sort("a"), "i") == [1, 3, 0, 2, 4]
    assert column(f.sort("a", descending=True), "i") == [0, 2, 1, 3, 4]
    assert column(f.sort("a", "b", descending=[False, True]), "i") == [1, 3, 2, 0, 4]
    assert column(f.sort(col("i") % 2, "i"), "i") == [0, 2, 4, 1, 3]


def test_sort_strings_by_code_point_and_booleans():
    f = ei.from_pydict({"s": ["b", "B", "é", "a", "Z", ""]})
    assert column(f.sort("s")) == ["", "B", "Z", "a", "b", "é"]
    g = ei.from_pydict({"b": [True, None, False]})
    assert column(g.sort("b")) == [False, True, None]


def test_limit_and_offset():
    f = ei.from_pydict({"x": list(range(10))})
    assert column(f.sort("x", descending=True).limit(3)) == [9, 8, 7]
    assert column(ei.Flow(N.Limit(f.plan, 3, 8))) == [8, 9]
    assert column(ei.Flow(N.Limit(f.plan, 3, 20))) == []
    assert column(f.limit(0)) == []


def test_distinct_keeps_first_occurrences_nan_and_null_equal():
    f = ei.from_pydict({"a": [1, 1, None, None, 2, 1], "b": [NAN, NAN, None, None, 0.0, 1.0]})
    out = cols(f.distinct())
    assert out["a"] == [1, None, 2, 1] and is_nan(out["b"][0]) and out["b"][1:] == [None, 0.0, 1.0]


def test_union_keeps_order_and_duplicates():
    a = ei.from_pydict({"x": [1, 2]})
    b = ei.from_pydict({"x": [2, 3]})
    assert column(a.union(b, a)) == [1, 2, 2, 3, 1, 2]


# ---------------------------------------------------------------- map_batches

def test_map_batches():
    f = ei.from_pydict({"x": [1, 2, 3]})

    def add_y(batch: pa.RecordBatch) -> pa.RecordBatch:
        x = batch.column("x").to_pylist()
        return pa.record_batch({"x": x, "y": [str(v) for v in x]})

    assert cols(f.map_batches(add_y, schema={"x": ei.Int64, "y": ei.String}).filter(col("x") > 1)) == {
        "x": [2, 3], "y": ["2", "3"]}


def test_map_batches_error_is_chained_and_named():
    def broken(batch):
        raise KeyError("missing")

    with pytest.raises(ExecutionError, match="map_batches function .*broken raised KeyError") as e:
        run(ei.from_pydict({"x": [1]}).map_batches(broken, schema={"x": ei.Int64}))
    assert isinstance(e.value.__cause__, KeyError)


def test_map_batches_wrong_schema_names_expected_and_got():
    f = ei.from_pydict({"x": [1]})
    with pytest.raises(ExecutionError, match=r"expected: x: Int64, y: Float64\n  got:      x: Int64"):
        run(f.map_batches(lambda b: b, schema={"x": ei.Int64, "y": ei.Float64}))
    with pytest.raises(ExecutionError, match="returned int"):
        run(f.map_batches(lambda b: 3, schema={"x": ei.Int64}))


# ---------------------------------------------------------------- through the runner

def test_run_with_engine_reference():
    f = ei.from_pydict({"x": [3, 1, 2]})
    assert f.sort("x").run(engine="reference").column("x").to_pylist() == [1, 2, 3]


def test_aggregations_may_read_computed_keys():
    f = ei.from_pydict({"k": [1, 2, 3]})
    q = f.group_by((col("k") % 2).alias("odd")).agg(s=col("odd").sum(), n=ei.count())
    assert cols(q) == {"odd": [1, 0], "s": [2, 0], "n": [2, 1]}


def test_join_decimal_keys_of_different_scales_and_date_with_timestamp():
    left = ei.from_arrow(pa.table({"d": pa.array([D("1.50"), D("2.00")], pa.decimal128(5, 2)),
                                   "t": [dt.date(2020, 1, 1), dt.date(2020, 1, 2)]}))
    right = ei.from_arrow(pa.table({"d": pa.array([D("1.500"), D("2.001")], pa.decimal128(7, 3)),
                                    "t": [dt.datetime(2020, 1, 1), dt.datetime(2020, 1, 2, 1)], "v": [1, 2]}))
    t = run(left.join(right, on=["d", "t"], how="full"))
    assert t.schema.field("d").type == pa.decimal128(7, 3) and t.schema.field("t").type == pa.timestamp("us")
    rows = sorted(zip(*t.to_pydict().values()), key=lambda r: (r[0], r[1]))
    assert rows == [(D("1.500"), dt.datetime(2020, 1, 1), 1), (D("2.000"), dt.datetime(2020, 1, 2), None),
                    (D("2.001"), dt.datetime(2020, 1, 2, 1), 2)]


def test_group_and_sort_timestamps_and_decimals():
    f = ei.from_pydict({"t": [dt.datetime(2020, 1, 2), dt.datetime(2020, 1, 1), None, dt.datetime(2020, 1, 2)],
                        "d": [D("1.10"), D("-1.10"), D("0.00"), D("1.10")]})
    assert cols(f.group_by("t", "d").agg(n=ei.count()).sort("t")) == {
        "t": [dt.datetime(2020, 1, 1), dt.datetime(2020, 1, 2), None],
        "d": [D("-1.10"), D("1.10"), D("0.00")], "n": [1, 2, 1]}
    assert column(f.sort("d", descending=True), "d") == [D("1.10"), D("1.10"), D("0.00"), D("-1.10")]


def test_the_lane_describes_itself():
    from eidos.lanes.reference import ReferenceLane

    assert (LANE.name, LANE.kind, LANE.reads) == ("reference", "reference", frozenset({"local"}))
    f = ei.from_pydict({"x": [1]})
    assert LANE.supports(f.join(f, on="x", how="anti").map_batches(lambda b: b, schema={"x": ei.Int64}).plan) == []
    assert any(info.name == "reference" and info.available for info in ei.backends())
    assert isinstance(LANE, ReferenceLane)

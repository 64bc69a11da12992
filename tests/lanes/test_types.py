"""Types beyond the numbers, strings and dates (docs/semantics.md section 1): each lane that declares one computes what the
reference lane computes on the same inputs, and a lane that lacks one says so in its coverage (explain())."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, when
from eidos.errors import PlanError, UnsupportedError
from eidos.ir import dtypes as T
from eidos.testing.compare import assert_tables_equal
from tests.lanes.conftest import LANES
from tests.lanes.helpers import lane_or_skip

NAN = math.nan

LISTS = pa.table({
    "k": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "l": pa.array([[1, 2, 3], [], None, [None, 2], [4]], pa.large_list(pa.int64())),
    "s": pa.array([["a", "é😀"], None, [None, ""], [], ["x"]], pa.large_list(pa.large_string())),
    "f": pa.array([[NAN, 1.5], [-0.0], None, [None], []], pa.large_list(pa.float64())),
})
NESTED = pa.table({"k": [1, 2, 3], "n": pa.array([[[1], [2, None]], [None, []], None],
                                                pa.large_list(pa.large_list(pa.int32())))})


BYTES = pa.table({"k": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
                  "b": pa.array([b"\x00\xff", b"", None, b"ab", b"\xff", b"ab"], pa.large_binary())})


def lists() -> ei.Flow:
    return ei.from_arrow(LISTS)


# id -> (plan, the reference lane's answer written out (None: checked against other lanes only), ordered)
CASES = {
    "scan": (lambda: lists(), None, False),
    "functions": (lambda: lists().select(
        "k", n=col("l").list.len(), first=col("l").list.get(0), last=col("l").list.get(-1),
        far=col("l").list.get(3), before=col("l").list.get(-4), two=col("l").list.contains(2),
        own=col("l").list.contains(col("k")), none=col("l").list.contains(None), half=col("l").list.contains(1.5),
        nan=col("f").list.contains(NAN), zero=col("f").list.contains(0), text=col("s").list.get(1),
        empty=col("s").list.contains("")),
        {"k": [1, 2, 3, 4, 5], "n": [3, 0, None, 2, 1], "first": [1, None, None, None, 4],
         "last": [3, None, None, 2, 4], "far": [None] * 5, "before": [None] * 5,
         "two": [True, False, None, True, False], "own": [True, False, None, False, False],
         "none": [None] * 5, "half": [False, False, None, False, False], "nan": [True, False, None, False, False],
         "zero": [False, True, None, False, False], "text": ["é😀", None, "", None, None],
         "empty": [False, None, True, False, False]}, False),
    "filter_sort_limit": (lambda: lists().filter(col("l").list.len() >= 1).sort("k", descending=True).limit(2),
                          {"k": [5, 4], "l": [[4], [None, 2]], "s": [["x"], []], "f": [[], [None]]}, True),
    "union": (lambda: lists().union(lists().filter(col("k") > 3)), None, False),
    "join": (lambda: lists().select("k", "l").join(lists().select("k", m=col("s")), on="k", how="left"), None, False),
    "when_fill": (lambda: lists().select(
        "k", w=when(col("k") > 2).then(col("l")).otherwise(None), z=col("l").fill_null(None)), None, False),
    "count": (lambda: lists().group_by((col("k") % 2).alias("odd")).agg(c=col("l").count(), n=ei.count()).sort("odd"),
              {"odd": [0, 1], "c": [2, 2], "n": [2, 3]}, True),
    "nested": (lambda: ei.from_arrow(NESTED).select(
        "k", "n", inner=col("n").list.get(0), n0=col("n").list.len()),
        {"k": [1, 2, 3], "n": [[[1], [2, None]], [None, []], None], "inner": [[1], None, None], "n0": [2, 2, None]},
        False),
}


def binary() -> ei.Flow:
    return ei.from_arrow(BYTES)


CASES.update({
    "binary_functions": (lambda: binary().select(
        "k", "b", n=col("b").bin.size(), eq=col("b") == b"ab", lt=col("b") < b"\x01",
        isin=col("b").is_in([b"", b"ab"])).sort("b", "k"),
        {"k": [2, 1, 4, 6, 5, 3], "b": [b"", b"\x00\xff", b"ab", b"ab", b"\xff", None], "n": [0, 2, 2, 2, 1, None],
         "eq": [False, False, True, True, False, None], "lt": [True, True, False, False, False, None],
         "isin": [True, False, True, True, False, None]}, True),
    "binary_keys": (lambda: binary().group_by("b").agg(n=ei.count()).join(binary(), on="b").sort("k"),
                    {"b": [b"\x00\xff", b"", b"ab", b"\xff", b"ab"], "n": [1, 1, 2, 1, 2], "k": [1, 2, 4, 5, 6]}, True),
    "binary_distinct": (lambda: binary().select("b").distinct().sort("b", descending=True),
                        {"b": [b"\xff", b"ab", b"\x00\xff", b"", None]}, True),
})


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("lane_name", LANES)
def test_types(lane_name, case, load_into):
    build, expected, ordered = CASES[case]
    lane = lane_or_skip(lane_name)
    flow = build()
    reference = flow.run(engine="reference", strict=True)
    if lane_name == "reference":
        assert reference.schema == flow.schema.to_arrow()
        if expected is not None:
            assert _nan_as_text(reference.to_pydict()) == _nan_as_text(expected)
        return
    try:
        there = load_into(lane, flow)
    except UnsupportedError as e:
        pytest.skip(f"the data cannot be stored where lane {lane_name!r} reads: {e}")
    gaps = lane.supports(there.plan)
    if gaps:
        pytest.skip(f"lane {lane_name!r} lacks {', '.join(gaps)}")
    assert_tables_equal(there.run(engine=lane_name, strict=True), reference, ordered=ordered)


def _nan_as_text(v):
    """`v` with each NaN, at any depth, as the text 'NaN' (so that NaN equals NaN in ==)."""
    if isinstance(v, dict):
        return {k: _nan_as_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nan_as_text(x) for x in v]
    return "NaN" if isinstance(v, float) and v != v else v


def test_sqlite_declares_lists_a_gap():
    lane = lane_or_skip("sqlite")
    gaps = lane.supports(lists().select(n=col("l").list.len()).plan)
    assert "dtype List" in gaps and "function list_len" in gaps
    assert "dtype List" in lists().explain()


REFUSED = {
    "sort": (lambda: lists().sort("l"), "sort key l"),
    "join_key": (lambda: lists().join(lists(), on="l"), "join key 'l'"),
    "group_key": (lambda: lists().group_by("l").agg(n=ei.count()), "group key 'l'"),
    "distinct": (lambda: lists().distinct(), "column 'l'"),
    "compare": (lambda: lists().filter(col("l") == col("l")), "cannot compare List(Int64) with List(Int64)"),
    "max": (lambda: lists().agg(m=col("l").max()), "max() needs values that compare"),
    "cast": (lambda: lists().select(col("l").cast(ei.String)), "cannot cast List(Int64) to String"),
    "not_a_list": (lambda: lists().select(col("k").list.len()), "list.len() needs a List, got Int64"),
    "element_type": (lambda: lists().select(col("l").list.contains("x")), "cannot compare Int64 with String"),
    "oob_raises": (lambda: lists().select(col("l").list.get(0, null_on_oob=False)), "null_on_oob=True"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_lists_refused_where_eidos_defines_no_answer(name):
    build, words = REFUSED[name]
    with pytest.raises(PlanError) as err:
        build().schema  # noqa: B018 - builds and checks the plan
    assert words in str(err.value)


@pytest.mark.parametrize("text", ["List(Int64)", "List(List(Decimal(10, 2)))", "List(String)"])
def test_list_type_text_round_trips(text):
    t = T.parse(text)
    assert str(t) == text and ei.List(t.inner) == t and T.from_arrow(t.to_arrow()) == t


@pytest.mark.parametrize("text", ["List(", "List()", "List(Null)", "List(Int64))", "List(Int64" + ")" * 2,
                                  "List(" * 40 + "Int64" + ")" * 40, "List(Foo)", "List[Int64]"])
def test_bad_list_type_text_is_a_plan_error(text):
    with pytest.raises(PlanError):
        T.parse(text)


def test_parquet_lists_read_back(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "l.parquet"
    pq.write_table(LISTS, path)
    flow = ei.read_parquet(str(path)).filter(col("l").list.contains(2))
    assert flow.schema["l"] == ei.List(ei.Int64)
    for lane in ("reference", "polars", "duckdb"):
        lane_or_skip(lane)
        assert flow.run(engine=lane, strict=True).column("k").to_pylist() == [1, 4]


def test_columns_eidos_does_not_read_fail_only_where_named(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "odd.db"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (k INTEGER, i INTERVAL, l BIGINT[])")
    con.execute("INSERT INTO t VALUES (1, INTERVAL 1 DAY, [1, 2]), (2, NULL, NULL)")
    con.close()
    flow = ei.read_sql(f"duckdb:///{path}", table="t")
    assert str(flow.schema) == "Schema(k: Int32, l: List(Int64))"
    assert flow.select("k", n=col("l").list.len()).run().to_pydict() == {"k": [1, 2], "n": [2, None]}
    with pytest.raises(PlanError, match="column 'i' has Arrow type month_day_nano_interval"):
        flow.select("i")

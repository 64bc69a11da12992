"""Types beyond the numbers, strings and dates (docs/semantics.md section 1): each lane that declares one computes what the
reference lane computes on the same inputs, and a lane that lacks one says so in its coverage (explain())."""

from __future__ import annotations

import datetime as dt
import math
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, lit, when
from eidos.errors import PlanError, UnsupportedError
from eidos.ir import dtypes as T
from eidos.testing.compare import assert_tables_equal
from tests.lanes.conftest import LANES
from tests.lanes.helpers import lane_or_skip

NAN = math.nan
UTC = dt.timezone.utc

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


# Nanoseconds past the last microsecond, zoned instants on both sides of Berlin's autumn hour, times of day, structs.
_NS = [1, 1_600_000_000_123_456_789, None, -1, 1_600_000_000_123_456_000]
_DST = [dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC), dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC), None,
        dt.datetime(2024, 3, 31, 0, 59, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC)]
STAMPS = pa.table({
    "k": pa.array([1, 2, 3, 4, 5], pa.int64()),
    "ns": pa.array(_NS, pa.timestamp("ns")),
    "z": pa.array(_DST, pa.timestamp("us", "Europe/Berlin")),
    "ms": pa.array([0, 1_600_000_000_123, -1, None, 5], pa.timestamp("ms")),
    "t": pa.array([dt.time(13, 45, 12, 5), dt.time(0), None, dt.time(23, 59, 59, 999999), dt.time(12)], pa.time64("us")),
    "s": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 4, "b": None}, {"a": 5, "b": "z"}],
                  pa.struct([("a", pa.int64()), ("b", pa.large_string())])),
})


def _ns(counts: list) -> list:
    """Nanosecond timestamps as to_pydict() shows them (pandas Timestamps where pandas is installed)."""
    return pa.array(counts, pa.timestamp("ns")).to_pylist()


def stamps(*columns: str) -> ei.Flow:
    """STAMPS, or its key and `columns` only (so that a lane lacking one type still runs the others)."""
    return ei.from_arrow(STAMPS.select(["k", *columns]) if columns else STAMPS)


CASES.update({
    "stamps_scan": (lambda: stamps(), None, False),
    "nanoseconds": (lambda: stamps("ns", "ms").select("k", "ns", after=col("ns") > dt.datetime(2000, 1, 1), s=col("ns").dt.second(),
                                            mixed=col("ns") >= col("ms")).sort("ns", "k"),
                    {"k": [4, 1, 5, 2, 3],
                     "ns": _ns([_NS[3], _NS[0], _NS[4], _NS[1], None]),
                     "after": [False, False, True, True, None], "s": [59, 0, 40, 40, None],
                     "mixed": [None, True, True, True, None]}, True),
    "zones": (lambda: stamps("z").select(
        "k", h=col("z").dt.hour(), d=col("z").dt.day(), utc=col("z").dt.convert_time_zone("UTC").dt.hour(),
        time=col("z").dt.time(), later=col("z") > lit(dt.datetime(2024, 10, 27, 2, 0, tzinfo=ZoneInfo("Europe/Berlin")))),
        {"k": [1, 2, 3, 4, 5], "h": [2, 2, None, 1, 0], "d": [27, 27, None, 31, 1], "utc": [0, 1, None, 0, 23],
         "time": [dt.time(2, 30), dt.time(2, 30), None, dt.time(1, 59), dt.time(0)],
         "later": [True, True, None, False, False]}, False),
    "replace_zone": (lambda: stamps("z").select(
        "k", wall=col("z").dt.replace_time_zone(None),
        tokyo=col("z").dt.replace_time_zone(None).dt.replace_time_zone("Asia/Tokyo").dt.convert_time_zone("UTC").dt.hour()),
        {"k": [1, 2, 3, 4, 5], "wall": [dt.datetime(2024, 10, 27, 2, 30), dt.datetime(2024, 10, 27, 2, 30), None,
                                        dt.datetime(2024, 3, 31, 1, 59), dt.datetime(1970, 1, 1, 0, 0)],
         "tokyo": [17, 17, None, 16, 15]}, False),
    "zone_keys": (lambda: stamps("z").filter(col("z").is_not_null()).sort("z", descending=True).select("k", "z"),
                  {"k": [2, 1, 4, 5], "z": [_DST[1], _DST[0], _DST[3], _DST[4]]}, True),
    "times_of_day": (lambda: stamps("t").select(
        "k", "t", h=col("t").dt.hour(), m=col("t").dt.minute(), s=col("t").dt.second(),
        noon=col("t") >= dt.time(12)).sort("t", "k", nulls_last=True),
        {"k": [2, 5, 1, 4, 3], "t": [dt.time(0), dt.time(12), dt.time(13, 45, 12, 5), dt.time(23, 59, 59, 999999), None],
         "h": [0, 12, 13, 23, None], "m": [0, 0, 45, 59, None], "s": [0, 0, 12, 59, None],
         "noon": [False, True, True, True, None]}, True),
    "ns_aggregates": (lambda: stamps("ns").group_by((col("k") % 2).alias("odd")).agg(
        first=col("ns").min(), last=col("ns").max(), n=col("ns").n_unique()).sort("odd"),
        {"odd": [0, 1], "first": _ns([_NS[3], _NS[0]]), "last": _ns([_NS[1], _NS[4]]), "n": [2, 2]}, True),
    "time_aggregates": (lambda: stamps("t", "z").group_by((col("k") % 2).alias("odd")).agg(
        lo=col("t").min(), hi=col("t").max(), last=col("z").max()).sort("odd"),
        {"odd": [0, 1], "lo": [dt.time(0), dt.time(12)], "hi": [dt.time(23, 59, 59, 999999), dt.time(13, 45, 12, 5)],
         "last": [_DST[1], _DST[0]]}, True),
    "struct_fields": (lambda: stamps("s").select("k", "s", a=col("s").struct.field("a"), b=col("s").struct.field("b"))
                      .filter(col("a") > 1).sort("k"),
                      {"k": [4, 5], "s": [{"a": 4, "b": None}, {"a": 5, "b": "z"}], "a": [4, 5], "b": [None, "z"]}, True),
    "unnest": (lambda: stamps("s").unnest("s"),
               {"k": [1, 2, 3, 4, 5], "a": [1, None, None, 4, 5], "b": ["x", None, "y", None, "z"]}, False),
    "struct_build": (lambda: stamps("s").select(
        "k", r=ei.struct(col("s").struct.field("b"), twice=col("k") * 2)).filter(col("r").struct.field("twice") > 2)
        .select("k", "r", b=col("r").struct.field("b")),
        {"k": [2, 3, 4, 5], "r": [{"b": None, "twice": 4}, {"b": "y", "twice": 6}, {"b": None, "twice": 8},
                                  {"b": "z", "twice": 10}], "b": [None, "y", None, "z"]}, False),
    "struct_join": (lambda: stamps("s").join(stamps("t"), on="k", how="left"), None, False),
    "zone_functions": (lambda: stamps("z").select(
        "k", utc=col("z").dt.convert_time_zone("UTC"), tokyo=col("z").dt.convert_time_zone("Asia/Tokyo").dt.hour(),
        time=col("z").dt.convert_time_zone("America/New_York").dt.time(), week=col("z").dt.weekday(),
        second=col("z").dt.second(), year=col("z").dt.year()), None, False),
    "time_keys": (lambda: stamps("t").group_by("t").agg(n=ei.count()).join(stamps("t", "z"), on="t").sort("k")
                  .select("k", "t", "n", m=col("t").dt.minute()), None, True),
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
    """`v` with each NaN, at any depth, as the text 'NaN' (so that NaN equals NaN in ==), zoned datetimes in UTC."""
    if isinstance(v, dict):
        return {k: _nan_as_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nan_as_text(x) for x in v]
    if isinstance(v, dt.datetime) and v.tzinfo is not None:  # Python never equates an hour a zone repeats across zones
        return v.astimezone(UTC)
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
    "distinct_subset": (lambda: lists().distinct(subset=["l"]), "column 'l' of the rows distinct() compares"),
    "compare": (lambda: lists().filter(col("l") == col("l")), "cannot compare List(Int64) with List(Int64)"),
    "max": (lambda: lists().agg(m=col("l").max()), "max() needs values that compare"),
    "cast": (lambda: lists().select(col("l").cast(ei.String)), "cannot cast List(Int64) to String"),
    "not_a_list": (lambda: lists().select(col("k").list.len()), "list.len() needs a List, got Int64"),
    "element_type": (lambda: lists().select(col("l").list.contains("x")), "cannot compare Int64 with String"),
    "oob_raises": (lambda: lists().select(col("l").list.get(0, null_on_oob=False)), "null_on_oob=True"),
}


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


REFUSED.update({
    "naive_vs_zoned": (lambda: stamps().filter(col("z") > dt.datetime(2024, 1, 1)),
                       "cannot compare Timestamp(us, 'Europe/Berlin') with Timestamp"),
    "two_zones": (lambda: stamps().filter(col("z") == col("z").dt.convert_time_zone("UTC")),
                  "Timestamp(us, 'Europe/Berlin') with Timestamp(us, 'UTC')"),
    "zoned_vs_date": (lambda: stamps().filter(col("z") > dt.date(2024, 1, 1)), "with Date"),
    "convert_naive": (lambda: stamps().select(col("ns").dt.convert_time_zone("UTC")), "dt.replace_time_zone() first"),
    "unknown_zone": (lambda: stamps().select(col("z").dt.replace_time_zone("Mars/Base")), "time zone"),
    "ns_time": (lambda: stamps().select(col("ns").dt.time()), "nanoseconds do not fit"),
    "struct_sort": (lambda: stamps().sort("s"), "sort key s"),
    "window_order_by_struct": (lambda: stamps().with_columns(r=col("k").cum_sum().over(order_by="s")), "window key s"),
    "window_partition_by_list": (lambda: lists().with_columns(n=col("k").sum().over("l")), "window key l"),
    "rank_of_a_list": (lambda: lists().with_columns(r=col("l").rank("dense")), "the column rank() orders, l"),
    "rolling_max_of_a_struct": (lambda: stamps().with_columns(r=col("s").rolling_max(2)), "rolling_max() orders"),
    "udf_of_nanoseconds": (lambda: stamps().select(u=ei.udf(lambda t: t, ei.Datetime("ns"))(col("ns"))),
                           "a nanosecond timestamp (Timestamp(ns)) has none"),
    "struct_eq": (lambda: stamps().filter(col("s") == col("s")), "cannot compare Struct("),
    "struct_group": (lambda: stamps().group_by("s").agg(n=ei.count()), "group key 's'"),
    "no_field": (lambda: stamps().select(col("s").struct.field("q")), "struct has no field 'q'; fields: a, b"),
    "unnest_not_struct": (lambda: stamps().unnest("k"), "unnest() takes Struct columns; 'k' is Int64"),
    "struct_names": (lambda: stamps().select(ei.struct("k", k=col("t"))), "field names must differ"),
    "struct_null": (lambda: stamps().select(ei.struct(n=None)), "untyped null"),
    "time_arith": (lambda: stamps().select(col("t") + col("t")), "needs numbers"),
})


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_where_eidos_defines_no_answer(name):
    """Lists, structs, zones and units: where eidos defines no answer, a PlanError says so."""
    build, words = REFUSED[name]
    with pytest.raises(PlanError) as err:
        build().schema  # noqa: B018 - builds and checks the plan
    assert words in str(err.value)


@pytest.mark.parametrize("lane_name", ["reference", "polars"])
@pytest.mark.parametrize("wall, why", [(dt.datetime(2024, 10, 27, 2, 30), "ambiguous"),
                                       (dt.datetime(2024, 3, 31, 2, 30), "does not exist")])
def test_replace_time_zone_raises_on_a_repeated_or_skipped_hour(lane_name, wall, why):
    lane_or_skip(lane_name)
    flow = ei.from_pydict({"t": [wall]}).select(col("t").dt.replace_time_zone("Europe/Berlin"))
    with pytest.raises(ei.errors.EidosError) as err:
        flow.run(engine=lane_name)
    assert why in str(err.value) or lane_name != "reference"


@pytest.mark.parametrize("text", ["Timestamp", "Timestamp(ns)", "Timestamp(ms, 'UTC')", "Timestamp(us, 'Europe/Berlin')",
                                  "Time", "Struct('a': Int64, 'b c': List(Timestamp(ns, 'Asia/Tokyo')))"])
def test_timestamp_time_and_struct_type_text_round_trips(text):
    t = T.parse(text)
    assert str(t) == text and T.from_arrow(t.to_arrow()) == t


def test_datetime_is_polars_name_and_plain_timestamp_keeps_its_text():
    assert ei.Datetime() == ei.Timestamp and str(ei.Datetime("us")) == "Timestamp"
    assert ei.Datetime("ns", "UTC") == T.from_arrow(pa.timestamp("ns", "UTC"))
    assert T.parse("Datetime(ns, 'UTC')") == ei.Datetime("ns", "UTC")
    with pytest.raises(PlanError, match="time_unit"):
        ei.Datetime("s")


def test_zoned_and_nanosecond_plans_round_trip_through_json():
    flow = stamps().select("k", h=col("z").dt.hour(), w=col("z").dt.replace_time_zone(None), t=col("t"),
                           a=col("s").struct.field("a"),
                           late=col("z") > lit(dt.datetime(2024, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))),
                           noon=col("t") > dt.time(12))
    again = ei.Flow.from_json(flow.to_json())
    assert again.schema == flow.schema
    assert_tables_equal(again.run(engine="reference"), flow.run(engine="reference"), ordered=True)


def test_sql_lanes_declare_zones_nanoseconds_times_and_structs_gaps():
    text = stamps().select("ns", col("z").dt.hour(), col("s").struct.field("a"), "t").explain()
    for words in ("dtype Timestamp(tz)", "dtype Timestamp(ns)", "dtype Time", "dtype Struct", "function struct_field"):
        assert words in text


@pytest.mark.parametrize("lane_name", LANES)
def test_parquet_keeps_units_zones_times_and_structs(lane_name, tmp_path):
    """A parquet file's nanoseconds, zones, times of day and structs read alike on every lane that declares them."""
    import pyarrow.parquet as pq

    lane = lane_or_skip(lane_name)
    pq.write_table(STAMPS, tmp_path / "stamps.parquet")
    flow = ei.read_parquet(tmp_path / "stamps.parquet")
    assert flow.schema == ei.from_arrow(STAMPS).schema
    q = flow.filter(col("k") != 3).select(
        "k", "ns", "z", "t", "s", h=col("z").dt.hour(), a=col("s").struct.field("a")).sort("k")
    gaps = lane.supports(q.plan)
    if gaps:
        pytest.skip(f"lane {lane_name!r} lacks {', '.join(gaps)}")
    assert_tables_equal(q.run(engine=lane_name, strict=True), q.run(engine="reference"), ordered=True)
    assert q.run(engine=lane_name).schema == q.schema.to_arrow()

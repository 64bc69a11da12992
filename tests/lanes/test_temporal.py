"""Dates and timestamps on every lane against the reference: parts, truncation (docs/semantics.md section 12).

Hand-written values at the edges (before 1970, leap days, the last microsecond of a day), and generated
timestamps and durations, each run on every lane that declares the functions."""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import PlanError, UnsupportedError
from eidos.ir.durations import Duration
from tests.lanes.conftest import LANES
from tests.lanes.helpers import lane_or_skip, run_or_skip

dt, date = _dt.datetime, _dt.date
OTHERS = [lane for lane in LANES if lane in ("polars", "duckdb", "postgresql", "sqlite")]
STAMPS = [dt(2024, 3, 7, 13, 45, 12, 345678), dt(1969, 12, 31, 23, 59, 59, 999999), None, dt(2000, 2, 29),
          dt(1970, 1, 1), dt(2024, 12, 31, 23, 0, 1)]
DAYS = [date(2024, 3, 7), date(1969, 12, 31), None, date(2000, 2, 29), date(1970, 1, 1), date(2024, 12, 31)]
EVERY = ["1us", "7ms", "1s", "90s", "1h", "5h", "1d", "3d", "1d12h", "1w", "2w", "1mo", "5mo", "1q", "1y", "7y"]


def source(stamps=STAMPS, days=DAYS) -> ei.Flow:
    """Timestamps `t` and dates `d`; without stamps, the dates alone (SQLite holds no timestamps)."""
    columns = {"t": pa.array(stamps, pa.timestamp("us"))} if stamps is not None else {}
    return ei.from_arrow(pa.table({**columns, "d": pa.array(days, pa.date32())}))


def same_on(lane: str, flow: ei.Flow, load_into) -> None:
    try:
        there = load_into(lane_or_skip(lane), flow)
    except UnsupportedError as e:
        pytest.skip(f"the data cannot be stored where lane {lane!r} reads: {e}")
    assert run_or_skip(there, lane).to_pylist() == flow.run(engine="reference").to_pylist()


def test_parts_on_the_reference():
    got = source().select(h=col("t").dt.hour(), m=col("t").dt.minute(), s=col("t").dt.second(),
                          w=col("t").dt.weekday(), o=col("d").dt.ordinal_day()).run(engine="reference")
    assert got.to_pydict() == {"h": [13, 23, None, 0, 0, 23], "m": [45, 59, None, 0, 0, 0],
                               "s": [12, 59, None, 0, 0, 1], "w": [4, 3, None, 2, 4, 2],
                               "o": [67, 365, None, 60, 1, 366]}
    assert source().select(col("t").dt.hour()).schema["t"] == ei.Int32


def test_time_parts_need_a_timestamp():
    with pytest.raises(PlanError, match="needs a Timestamp"):
        source().select(col("d").dt.hour())


@pytest.mark.parametrize("lane", OTHERS)
def test_parts(lane, load_into):
    flow = source().select(h=col("t").dt.hour(), m=col("t").dt.minute(), s=col("t").dt.second(),
                           w=col("t").dt.weekday(), o=col("t").dt.ordinal_day(), y=col("t").dt.year())
    same_on(lane, flow, load_into)


@pytest.mark.parametrize("lane", OTHERS)
def test_date_parts(lane, load_into):
    flow = source(None).select(w=col("d").dt.weekday(), o=col("d").dt.ordinal_day(), m=col("d").dt.month(),
                               **{f"d{i}": col("d").dt.truncate(e) for i, e in enumerate(EVERY)})
    same_on(lane, flow, load_into)


def test_truncate_on_the_reference():
    got = source().select(w=col("t").dt.truncate("1w"), q=col("d").dt.truncate("1q"),
                          h=col("t").dt.truncate(_dt.timedelta(hours=5))).run(engine="reference")
    assert got["w"].to_pylist()[:2] == [dt(2024, 3, 4), dt(1969, 12, 29)]
    assert got["q"].to_pylist()[:2] == [date(2024, 1, 1), date(1969, 10, 1)]
    assert got["h"].to_pylist()[0] == dt(2024, 3, 7, 9)  # 5-hour buckets from 1970-01-01 00:00


@pytest.mark.parametrize("every", ["0s", "-1d", "1mo1d", "1w2h", "1x", "1500ns"])
def test_truncate_refuses_what_polars_refuses(every):
    with pytest.raises(PlanError, match="duration|truncate"):
        source().select(col("t").dt.truncate(every))


@pytest.mark.parametrize("lane", OTHERS)
def test_truncate(lane, load_into):
    flow = source().select(**{f"t{i}": col("t").dt.truncate(e) for i, e in enumerate(EVERY)},
                           **{f"d{i}": col("d").dt.truncate(e) for i, e in enumerate(EVERY)})
    same_on(lane, flow, load_into)


stamps = st.lists(st.one_of(st.none(), st.datetimes(dt(1900, 1, 1), dt(2200, 12, 31))), min_size=1, max_size=6)
durations = st.one_of(
    st.builds(lambda n, u: f"{n}{u}", st.integers(1, 400), st.sampled_from(["us", "ms", "s", "m", "h", "d", "w", "mo", "y"])),
    st.builds(lambda d, us: str(Duration(days=d, microseconds=us)), st.integers(0, 9), st.integers(1, 10**11)))


@pytest.mark.parametrize("lane", OTHERS)
@settings(max_examples=15, deadline=None)
@given(rows=stamps, every=st.lists(durations, min_size=1, max_size=3))
def test_generated(lane, load_into, rows, every):
    flow = source(rows, [None if t is None else t.date() for t in rows]).select(
        **{f"t{i}": col("t").dt.truncate(e) for i, e in enumerate(every)},
        **{f"d{i}": col("d").dt.truncate(e) for i, e in enumerate(every)},
        w=col("t").dt.weekday(), o=col("d").dt.ordinal_day(), s=col("t").dt.second())
    same_on(lane, flow, load_into)
    days = source(None, [None if t is None else t.date() for t in rows])
    same_on(lane, days.select(**{f"d{i}": col("d").dt.truncate(e) for i, e in enumerate(every)}), load_into)


def test_sql_maps_parts_and_date_trunc():
    flow = source()
    q = ei.sql("SELECT date_trunc('week', t) AS w, date_trunc('quarter', d) AS q, hour(t) AS h, "
               "extract(isodow FROM d) AS i, dayofyear(d) AS o, extract(second FROM t) AS s FROM f", f=flow)
    want = flow.select(w=col("t").dt.truncate("1w"), q=col("d").dt.truncate("1q"), h=col("t").dt.hour(),
                       i=col("d").dt.weekday(), o=col("d").dt.ordinal_day(), s=col("t").dt.second())
    assert q.run(engine="reference").to_pylist() == want.run(engine="reference").to_pylist()
    with pytest.raises(UnsupportedError, match="truncates to"):
        ei.sql("SELECT date_trunc('century', t) FROM f", f=flow)


def test_datetime_literal():
    assert ei.datetime(2024, 1, 2, 3, 4, 5).node.value == dt(2024, 1, 2, 3, 4, 5)
    assert source().filter(col("t") < ei.datetime(1970, 1, 1, 0, 0, 1)).run(engine="reference").num_rows == 2
    with pytest.raises(PlanError, match="invalid datetime"):
        ei.datetime(2024, 2, 30)

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
from tests.lanes.helpers import declaring, lane_or_skip, run_or_skip

dt, date = _dt.datetime, _dt.date
OTHERS = declaring("dt_year")
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


# ---------------------------------------------------------------- durations

def test_durations_on_the_reference():
    flow = source()
    got = flow.select(d=col("t") - col("d"), later=col("t") + ei.duration(hours=36),
                      s=(col("t") - ei.datetime(1970, 1, 1)).dt.total_seconds(),
                      neg=(ei.datetime(1970, 1, 1) - col("t")).dt.total_seconds(),
                      long=(col("t") - col("d")) >= _dt.timedelta(hours=13)).run(engine="reference")
    assert got["d"].to_pylist()[:2] == [_dt.timedelta(hours=13, minutes=45, seconds=12, microseconds=345678),
                                        _dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999)]
    assert got["later"].to_pylist()[0] == dt(2024, 3, 9, 1, 45, 12, 345678)
    assert got["s"].to_pylist()[:2] == [1709819112, 0] and got["neg"].to_pylist()[:2] == [-1709819112, 0]
    assert got["long"].to_pylist()[:3] == [True, True, None]
    assert got.schema.field("d").type == pa.duration("us")


@pytest.mark.parametrize("build, what", [
    (lambda f: f.select(col("d") + ei.duration(days=1)), "cast a Date to Timestamp"),
    (lambda f: f.select(col("t") * ei.duration(days=1)), "cannot compute"),
    (lambda f: f.select((col("t") - col("t")).cast(ei.Int64)), "cannot cast"),
    (lambda f: f.select(col("t").dt.total_days()), "needs a Duration"),
])
def test_duration_type_errors(build, what):
    with pytest.raises(PlanError, match=what):
        build(source())


@pytest.mark.parametrize("lane", OTHERS)
def test_durations(lane, load_into):
    gap = col("t") - col("d")
    flow = source().select(gap=gap, back=col("t") - gap, later=col("t") + ei.duration(weeks=1, microseconds=-1),
                           sum=gap + ei.duration(days=-2), cmp=gap > _dt.timedelta(hours=12),
                           top=gap.fill_null(_dt.timedelta(0)), nul=col("t") + None,
                           **{u: getattr(gap.dt, f"total_{u}")()
                              for u in ("days", "hours", "minutes", "seconds", "milliseconds", "microseconds")})
    same_on(lane, flow, load_into)
    same_on(lane, source().agg(lo=(col("t") - col("d")).min(), hi=(col("t") - col("d")).max()), load_into)


@pytest.mark.parametrize("lane", ["reference"] + OTHERS)
@pytest.mark.parametrize("build", [
    lambda f: f.select(col("t") + ei.duration(days=3_000_000)),
    lambda f: f.select(col("t") - ei.duration(days=1_000_000)),
    lambda f: f.select((col("t") - col("t")) + _dt.timedelta(microseconds=2**63 - 1) + ei.duration(days=1)),
])
def test_duration_overflow_raises(lane, build, load_into):
    from eidos.errors import ExecutionError
    flow = build(source())
    if lane == "reference":
        with pytest.raises(ExecutionError, match="out of range|overflow"):
            flow.run(engine="reference")
        return
    try:
        there = load_into(lane_or_skip(lane), flow)
    except UnsupportedError as e:
        pytest.skip(f"the data cannot be stored where lane {lane!r} reads: {e}")
    with pytest.raises(ExecutionError, match="out of range|overflow"):
        run_or_skip(there, lane)


@pytest.mark.parametrize("lane", OTHERS)
@settings(max_examples=15, deadline=None)
@given(rows=stamps, shifts=st.lists(st.timedeltas(_dt.timedelta(days=-30000), _dt.timedelta(days=30000)),
                                    min_size=1, max_size=3))
def test_generated_durations(lane, load_into, rows, shifts):
    flow = source(rows, [None if t is None else t.date() for t in rows]).select(
        **{f"p{i}": col("t") + s for i, s in enumerate(shifts)},
        **{f"g{i}": (col("t") - col("d") - s).dt.total_minutes() for i, s in enumerate(shifts)})
    same_on(lane, flow, load_into)


def test_duration_json_round_trip():
    flow = source().select(later=col("t") + ei.duration(hours=-5), gap=(col("t") - col("d")).dt.total_seconds())
    back = ei.Flow.from_json(flow.to_json())
    assert back.run(engine="reference").to_pylist() == flow.run(engine="reference").to_pylist()
    bad = flow.to_json().replace('"duration": "-18000000000"', '"duration": "99999999999999999999"')
    with pytest.raises(PlanError):
        ei.Flow.from_json(bad)


# ---------------------------------------------------------------- formats

FORMATS = ["%Y-%m-%d %H:%M:%S.%f", "%d/%m/%Y", "%a %d %b %Y, %I:%M %p", "%A %B %j %y %%", "[%Y] %H%M%S"]
TEXTS = ["2024-03-07 13:05:02.000123", "2024-02-30 00:00:00.000000", "2024-3-07 13:05:02.000123", "07/03/2024",
         "31/02/2024", "07/03/24", "2024-Mar-07", "2024-mar-07", None, "", "1969-12-31 23:59:59.999999",
         "2024-03-07 13:05:02.000123 ", "０７/03/2024"]


@pytest.mark.parametrize("lane", OTHERS)
def test_strftime(lane, load_into):
    same_on(lane, source().select(**{f"t{i}": col("t").dt.strftime(f) for i, f in enumerate(FORMATS)}), load_into)


@pytest.mark.parametrize("lane", OTHERS)
def test_strftime_of_dates(lane, load_into):
    same_on(lane, source(None).select(**{f"d{i}": col("d").dt.strftime(f) for i, f in enumerate(FORMATS[1:2])},
                                      iso=col("d").dt.strftime("%Y-%m-%d %j")), load_into)


def texts(rows=TEXTS) -> ei.Flow:
    return ei.from_arrow(pa.table({"s": pa.array(rows, pa.large_string())}))


@pytest.mark.parametrize("lane", OTHERS)
def test_to_date_and_to_datetime(lane, load_into):
    flow = texts().select(a=col("s").str.to_datetime("%Y-%m-%d %H:%M:%S.%f", strict=False),
                          b=col("s").str.to_date("%d/%m/%Y", strict=False),
                          c=col("s").str.to_date("%Y-%b-%d", strict=False),
                          d=col("s").str.strptime(ei.Timestamp, "%d/%m/%Y", strict=False))
    same_on(lane, flow, load_into)


@pytest.mark.parametrize("lane", ["reference"] + OTHERS)
def test_text_that_does_not_parse_raises(lane, load_into):
    from eidos.errors import ExecutionError
    flow = texts(["07/03/2024", "31/02/2024"]).select(d=col("s").str.to_date("%d/%m/%Y"))
    there = flow if lane == "reference" else load_into(lane_or_skip(lane), flow)
    with pytest.raises(ExecutionError, match="cannot parse '31/02/2024'"):
        run_or_skip(there, lane) if lane != "reference" else flow.run(engine="reference")


@pytest.mark.parametrize("build, what", [
    (lambda: col("t").dt.strftime("%Y %q"), "%q is not a code"),
    (lambda: col("s").str.to_date("%Y-%m-%d %H:%M"), "time of day"),
    (lambda: col("s").str.to_datetime("%Y-%m-%d %H"), "hours and minutes"),
    (lambda: col("s").str.to_datetime("%Y-%m"), "must name the year"),
    (lambda: col("s").str.to_date("%y-%m-%d"), "%y is not a code"),
    (lambda: col("d").dt.strftime("%H"), "time of day"),
])
def test_formats_outside_the_portable_codes_are_refused(build, what):
    with pytest.raises(PlanError, match=what):
        source().with_columns(s=col("t").cast(ei.String)).select(build())


@pytest.mark.parametrize("lane", OTHERS)
@settings(max_examples=10, deadline=None)
@given(rows=stamps, fmt=st.lists(st.sampled_from(["%Y", "%m", "%d", "%H", "%M", "%S", "%f", "%b", "-", " ", ":"]),
                                 min_size=1, max_size=8).map("".join),
       order=st.permutations(["%Y", "%m", "%d", "%H:%M:%S.%f"]), sep=st.sampled_from(["-", " ", "/", "T", "", "é"]))
def test_generated_formats_round_trip(lane, load_into, rows, fmt, order, sep):
    """Timestamps written in a generated format, and read back from a generated order of the codes."""
    full = sep.join(order)
    flow = source(rows, [None if t is None else t.date() for t in rows]).select(
        s=col("t").dt.strftime(fmt), back=col("t").dt.strftime(full).str.to_datetime(full, strict=False))
    same_on(lane, flow, load_into)


def test_sql_maps_formats_and_clock_intervals():
    flow = source().with_columns(s=col("t").dt.strftime("%Y-%m-%d %H:%M"))
    q = ei.sql("SELECT strftime(t, '%d/%m/%Y %H') AS a, strptime(s, '%Y-%m-%d %H:%M') AS b, "
               "t + INTERVAL 3 HOUR AS c, t - INTERVAL '90' MINUTE AS d, t - strptime(s, '%Y-%m-%d %H:%M') AS e "
               "FROM f", f=flow)
    want = flow.select(a=col("t").dt.strftime("%d/%m/%Y %H"), b=col("s").str.to_datetime("%Y-%m-%d %H:%M"),
                       c=col("t") + ei.duration(hours=3), d=col("t") - ei.duration(minutes=90),
                       e=col("t") - col("s").str.to_datetime("%Y-%m-%d %H:%M"))
    assert q.schema == want.schema
    assert q.run(engine="reference").to_pylist() == want.run(engine="reference").to_pylist()


def test_days_still_move_dates():
    flow = source(None).select(back=col("d") - 30, gap=col("d") - col("d"), ts=col("d") - ei.datetime(1970, 1, 1))
    got = flow.run(engine="reference").to_pylist()[0]
    assert got == {"back": date(2024, 2, 6), "gap": 0, "ts": _dt.timedelta(days=19789)}

"""The duration-string parser (Polars' form) and the truncation and offsets built on it."""

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eidos.errors import PlanError
from eidos.ir.durations import Duration, check_truncate, offset, parse_duration, truncate


@pytest.mark.parametrize("text, want", [
    ("1us", Duration(microseconds=1)), ("1000ns", Duration(microseconds=1)), ("3ms", Duration(microseconds=3000)),
    ("90s", Duration(microseconds=90_000_000)), ("1h30m", Duration(microseconds=5_400_000_000)),
    ("2d3h", Duration(days=2, microseconds=3 * 3_600_000_000)), ("1w", Duration(weeks=1)),
    ("1mo", Duration(months=1)), ("1q", Duration(months=3)), ("1y6mo", Duration(months=18)),
    ("-1d", Duration(days=-1)), ("-1mo2d", Duration(months=-1, days=-2)),
])
def test_parse(text, want):
    assert parse_duration(text) == want


@pytest.mark.parametrize("text", ["", "1", "h", "1h ", " 1h", "1.5h", "1x", "--1d", "1d-1h", "1H", "1500ns", 5])
def test_parse_refuses(text):
    with pytest.raises(PlanError, match="duration"):
        parse_duration(text)


@given(st.builds(Duration, months=st.integers(0, 99), weeks=st.integers(0, 9), days=st.integers(0, 99),
                 microseconds=st.integers(0, 10**12)))
@settings(max_examples=50)
def test_text_round_trips(d):
    assert parse_duration(str(d)) == d


def test_truncate_as_polars():
    t = dt.datetime(2024, 3, 7, 13, 45, 12, 345678)  # a Thursday
    assert truncate(t, parse_duration("1w")) == dt.datetime(2024, 3, 4)  # Monday
    assert truncate(t, parse_duration("7d")) == dt.datetime(2024, 3, 7)  # from 1970-01-01, a Thursday
    assert truncate(t, parse_duration("90m")) == dt.datetime(2024, 3, 7, 13, 30)
    assert truncate(t, parse_duration("1q")) == dt.datetime(2024, 1, 1)
    assert truncate(t, parse_duration("7y")) == dt.datetime(2019, 1, 1)  # from January 1970
    assert truncate(dt.datetime(1969, 12, 31, 23), parse_duration("1d")) == dt.datetime(1969, 12, 31)


@pytest.mark.parametrize("text", ["0s", "-1h", "1mo1d", "1w1d", "1w1h"])
def test_truncate_refuses(text):
    with pytest.raises(PlanError, match="truncate"):
        check_truncate(parse_duration(text))


def test_offset_clamps_to_month_end():
    assert offset(dt.date(2024, 1, 31), parse_duration("1mo")) == dt.date(2024, 2, 29)
    assert offset(dt.datetime(2024, 3, 31, 5), parse_duration("-1mo1d")) == dt.datetime(2024, 2, 28, 5)
    with pytest.raises(OverflowError):
        offset(dt.date(9999, 12, 1), parse_duration("1mo"))

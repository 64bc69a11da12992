"""assert_tables_equal: eidos semantics of equality and a readable diff."""

from __future__ import annotations

import math
from decimal import Decimal as D

import pyarrow as pa
import pytest

from eidos.testing.compare import assert_tables_equal, values_equal


def test_nan_null_and_float_tolerance():
    a = pa.table({"x": [math.nan, None, 1.0 + 1e-12, math.inf]})
    b = pa.table({"x": [math.nan, None, 1.0, math.inf]})
    assert_tables_equal(a, b, ordered=True)
    with pytest.raises(AssertionError, match="row 3, x: inf != -inf"):
        assert_tables_equal(a, pa.table({"x": [math.nan, None, 1.0, -math.inf]}), ordered=True)


def test_float32_tolerance_is_looser():
    a = pa.table({"x": pa.array([1.0000001], pa.float32())})
    assert_tables_equal(a, pa.table({"x": pa.array([1.0], pa.float32())}), ordered=True)


def test_null_is_not_nan_and_decimals_are_exact():
    with pytest.raises(AssertionError, match="null != nan"):
        assert_tables_equal(pa.table({"x": [None]}, schema=pa.schema([("x", pa.float64())])),
                            pa.table({"x": [math.nan]}), ordered=True)
    with pytest.raises(AssertionError):
        assert_tables_equal(pa.table({"d": [D("1.00")]}), pa.table({"d": [D("1.01")]}), ordered=True)


def test_unordered_compare_and_missing_rows_report():
    a = pa.table({"k": ["a", "b", None], "v": [1.0, math.nan, 2.0]})
    b = pa.table({"k": [None, "b", "a"], "v": [2.0, math.nan, 1.0]})
    assert_tables_equal(a, b, ordered=False)
    with pytest.raises(AssertionError) as e:
        assert_tables_equal(a, b, ordered=True)
    assert "row 0, k: 'a' != null" in str(e.value)
    c = pa.table({"k": ["a", "b", "c"], "v": [1.0, math.nan, 2.0]})
    with pytest.raises(AssertionError) as e:
        assert_tables_equal(c, b, ordered=False)
    text = str(e.value)
    assert "rows expected but missing (1):\n    {k: null, v: 2.0}" in text
    assert "rows not expected (1):\n    {k: 'c', v: 2.0}" in text


def test_schema_and_row_count_differences():
    with pytest.raises(AssertionError, match="column 'x': actual int64, expected double"):
        assert_tables_equal(pa.table({"x": [1]}), pa.table({"x": [1.0]}), ordered=True)
    with pytest.raises(AssertionError, match="columns: actual"):
        assert_tables_equal(pa.table({"x": [1]}), pa.table({"y": [1]}), ordered=True)
    with pytest.raises(AssertionError, match="actual has 2 rows, expected 1"):
        assert_tables_equal(pa.table({"x": [1, 2]}), pa.table({"x": [1]}), ordered=True)
    assert_tables_equal(pa.table({"s": pa.array(["a"], pa.string())}),
                        pa.table({"s": pa.array(["a"], pa.large_string())}), ordered=True)


def test_booleans_are_not_integers():
    assert not values_equal(True, 1) and values_equal(1, 1) and values_equal(None, None)
    assert values_equal(math.nan, math.nan, True) and not values_equal(None, math.nan, True)


def test_order_argument_is_required():
    with pytest.raises(TypeError, match="ordered"):
        assert_tables_equal(pa.table({"x": [1]}), pa.table({"x": [1]}))

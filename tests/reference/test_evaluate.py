"""eidos.ir.evaluate called directly, as constant folding does: one value at a time, EidosError on failure."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal as D

import pytest

from eidos.errors import EidosError, ExecutionError
from eidos.ir import dtypes as T
from eidos.ir import evaluate as V

I64, F64, F32, S, B = T.Int64, T.Float64, T.Float32, T.String, T.Boolean


@pytest.mark.parametrize("fn,args,types,rt,want", [
    ("add", [1, 2], [I64, I64], I64, 3),
    ("add", [1, None], [I64, I64], I64, None),
    ("sub", [D("1.5"), 2], [T.Decimal(2, 1), T.Decimal(1, 0)], T.Decimal(4, 1), D("-0.5")),
    ("mul", [1.5, 2], [F64, F64], F64, 3.0),
    ("truediv", [1, 4], [I64, I64], F64, 0.25),
    ("truediv", [1.0, -0.0], [F64, F64], F64, None),
    ("floordiv", [-1, 3], [I64, I64], I64, -1),
    ("mod", [-1, 3], [I64, I64], I64, 2),
    ("mod", [1, -3], [I64, I64], I64, -2),
    ("pow", [2, -1], [I64, I64], F64, 0.5),
    ("eq", [1, 1.0], [I64, F64], B, True),
    ("lt", ["Z", "a"], [S, S], B, True),
    ("ge", [dt.date(2020, 1, 2), dt.datetime(2020, 1, 1, 23)], [T.Date, T.Timestamp], B, True),
    ("and", [None, False], [B, B], B, False),
    ("or", [None, False], [B, B], B, None),
    ("not", [None], [B], B, None),
    ("neg", [5], [I64], I64, -5),
    ("abs", [D("-1.50")], [T.Decimal(3, 2)], T.Decimal(3, 2), D("1.50")),
    ("is_null", [None], [I64], B, True),
    ("fill_null", [None, 2], [F64, F64], F64, 2.0),
    ("is_between", [5, 1, 5], [I64, I64, I64], B, True),
    ("str_len", ["日本"], [S], I64, 2),
    ("str_slice", ["hello"], [S], S, "ell"),
    ("dt_month", [dt.date(2020, 7, 1)], [T.Date], T.Int32, 7),
])
def test_call(fn, args, types, rt, want):
    options = {"str_slice": (1, 3)}.get(fn, ())
    assert V.call(fn, args, options, types, rt) == want


def test_call_on_float32_literals_rounds_them():
    # lit(0.1, Float32) holds the float32 nearest 0.1, so it equals a Float32 column's 0.1
    assert V.call("eq", [0.1, V.to_f32(0.1)], (), [F32, F32], B) is True
    assert V.call("add", [0.1, 0.2], (), [F32, F32], F32) == V.to_f32(V.to_f32(0.1) + V.to_f32(0.2))


def test_weak_int_adapted_to_decimal_is_a_decimal():
    assert V.call("add", [D("1.25"), 2], (), [T.Decimal(3, 2), T.Decimal(1, 0)], T.Decimal(5, 2)) == D("3.25")


def test_failures_are_eidos_errors_so_folding_can_leave_them():
    with pytest.raises(ExecutionError):
        V.call("add", [2**63 - 1, 1], (), [I64, I64], I64)
    with pytest.raises(EidosError):
        V.cast("x", S, I64)
    with pytest.raises(EidosError):
        V.call("nonsense", [1], (), [I64], I64)


def test_cast_round_trips_text():
    for v in [0.1, 1e16, -0.0, 5e-324, 1.7976931348623157e308]:
        assert V.cast(V.cast(v, F64, S), S, F64) == v
    for v in [0.1, 3.4028234663852886e38, 1e-45]:
        f = V.to_f32(v)
        assert V.cast(V.cast(f, F32, S), S, F32) == f


def test_cast_text_forms():
    assert V.cast(math.inf, F64, S) == "inf" and V.cast(D("0.00"), T.Decimal(3, 2), S) == "0.00"
    assert V.cast(dt.datetime(2020, 1, 1, 0, 0, 0, 5), T.Timestamp, S) == "2020-01-01 00:00:00.000005"
    assert V.cast(1e300, F64, F32) == math.inf
    assert V.cast(0.125, F64, T.Decimal(3, 2)) == D("0.13")
    assert V.cast(-0.125, F64, T.Decimal(3, 2)) == D("-0.13")


def test_literal_value():
    assert V.literal_value(1, F64) == 1.0 and isinstance(V.literal_value(1, F64), float)
    assert V.literal_value(0.1, F32) == V.to_f32(0.1)
    assert V.literal_value(3, T.Decimal(4, 2)) == D("3.00")
    assert V.literal_value(dt.date(2020, 1, 1), T.Timestamp) == dt.datetime(2020, 1, 1)
    assert V.literal_value(None, I64) is None


@pytest.mark.parametrize("fn,values,dtype,rt,want", [
    ("sum", [1, None, 2], I64, I64, 3),
    ("sum", [None], I64, I64, None),
    ("sum", [], F64, F64, None),
    ("sum", [0.1] * 10, F64, F64, 1.0),
    ("sum", [math.inf, -math.inf], F64, F64, "nan"),
    ("sum", [1e308, 1e308], F64, F64, math.inf),
    ("sum", [D("0.1"), D("0.2")], T.Decimal(2, 1), T.Decimal(38, 1), D("0.3")),
    ("mean", [1, 2], I64, F64, 1.5),
    ("mean", [D("0.1"), D("0.2")], T.Decimal(2, 1), F64, 0.15),
    ("min", [None, "b", "a"], S, S, "a"),
    ("max", [math.nan, 1.0], F64, F64, "nan"),
    ("min", [math.nan, 1.0], F64, F64, 1.0),
    ("min", [math.nan, None], F64, F64, "nan"),
    ("count", [None, 1, None], I64, I64, 1),
    ("count", [], I64, I64, 0),
    ("n_unique", [math.nan, math.nan, None, 1.0], F64, I64, 2),
    ("var", [1], I64, F64, None),
    ("var", [1, 3], I64, F64, 2.0),
    ("std", [math.nan, 1.0], F64, F64, "nan"),
    ("var", [D("1.0"), D("2.0"), D("3.0")], T.Decimal(2, 1), F64, 1.0),
    ("count_rows", [None, None], T.Null, I64, 2),
])
def test_aggregate(fn, values, dtype, rt, want):
    got = V.aggregate(fn, values, dtype, rt)
    if want == "nan":
        assert got != got
    else:
        assert got == want and type(got) is type(want)


def test_sum_overflow_raises():
    with pytest.raises(ExecutionError, match="Int64"):
        V.aggregate("sum", [2**62, 2**62], I64, I64)
    with pytest.raises(ExecutionError, match="decimal overflow"):
        V.aggregate("sum", [D("9" * 38)] * 2, T.Decimal(38, 0), T.Decimal(38, 0))


def test_hash_and_order_keys():
    key = V.hash_key(F64)
    assert key(math.nan) is V.NAN_KEY and key(1.0) == 1.0 and V.hash_key(I64) is None
    order = V.order_key(F64)
    assert sorted([math.nan, math.inf, -1.0], key=order)[:2] == [-1.0, math.inf]


def test_like_regex_escapes_everything_else():
    assert V.like_regex("a.b%").fullmatch("a.bcd") and not V.like_regex("a.b%").fullmatch("axb")
    assert V.like_regex("[x]_").fullmatch("[x]!")


def test_float_variance_overflow_is_inf_not_an_error():
    assert V.aggregate("std", [1e308, -1e308], F64, F64) == math.inf
    assert V.aggregate("mean", [1e308, 1e308], F64, F64) == math.inf

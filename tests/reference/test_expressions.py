"""Every expression on the reference lane against hand-computed answers (docs/semantics.md)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal as D

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, lit, when
from eidos.errors import ExecutionError, PlanError
from tests.reference.helpers import cols, column, is_nan, run

NAN, INF = math.nan, math.inf


def one(values, dtype=None, name="x"):
    """A one-column Flow, typed by `dtype` (a pyarrow type) when given."""
    arr = pa.array(values, type=dtype) if dtype is not None else pa.array(values)
    return ei.from_arrow(pa.table({name: arr}))


def two(a, b, ta=None, tb=None):
    return ei.from_arrow(pa.table({"a": pa.array(a, type=ta), "b": pa.array(b, type=tb)}))


def test_integer_arithmetic_with_nulls():
    f = two([1, 2, None, -7], [3, None, 4, 2])
    out = cols(f.select(s=col("a") + col("b"), d=col("a") - col("b"), m=col("a") * col("b")))
    assert out == {"s": [4, None, None, -5], "d": [-2, None, None, -9], "m": [3, None, None, -14]}


def test_true_division_gives_float_and_null_for_zero_divisor():
    f = two([1, 7, 0, -3], [2, 0, 0, 4])
    assert column(f.select(q=col("a") / col("b"))) == [0.5, None, None, -0.75]
    g = two([1.0, -1.0, NAN, 0.0], [0.0, -0.0, 0.0, 2.0])
    assert column(g.select(q=col("a") / col("b"))) == [None, None, None, 0.0]


def test_float_division_special_values():
    g = two([INF, 1.0, NAN], [INF, INF, 1.0])
    q = column(g.select(q=col("a") / col("b")))
    assert is_nan(q[0]) and q[1] == 0.0 and is_nan(q[2])


def test_floor_division_and_modulo_follow_python_signs():
    f = two([7, -7, 7, -7, 5], [2, 2, -2, -2, 0])
    out = cols(f.select(q=col("a") // col("b"), r=col("a") % col("b")))
    assert out == {"q": [3, -4, -4, 3, None], "r": [1, 1, -1, -1, None]}


def test_float_floor_division_and_modulo():
    f = two([7.5, -7.5, 7.0, 1.0], [2.0, 2.0, 0.1, 0.0])
    out = cols(f.select(q=col("a") // col("b"), r=col("a") % col("b")))
    assert out["q"] == [3.0, -4.0, 70.0, None]
    assert out["r"][:2] == [1.5, 0.5] and out["r"][3] is None


def test_integer_overflow_raises_naming_type_and_expression():
    f = one([100, 27], pa.int8())
    assert column(f.select(y=col("x") + 27)) == [127, 54]
    with pytest.raises(ExecutionError) as e:
        run(f.select(y=col("x") + 28))
    msg = str(e.value)
    assert "100 + 28 = 128 does not fit in Int8" in msg and "y = x + 28" in msg


def test_int64_overflow_in_multiplication():
    f = one([2**62], pa.int64())
    with pytest.raises(ExecutionError, match="does not fit in Int64"):
        run(f.select(y=col("x") * 2))


def test_weak_literal_adapts_but_big_literal_widens():
    f = one([100], pa.int8())
    t = run(f.select(y=col("x") + 1000))
    assert t.schema.field("y").type == pa.int64() and t.column("y").to_pylist() == [1100]


def test_untyped_null_beside_a_date():
    f = ei.from_pydict({"d": [dt.date(2020, 1, 31), None]})
    t = run(f.select(a=col("d") + lit(None), b=lit(None) + col("d"), c=col("d") - lit(None), e=col("d") + None))
    assert [t.schema.field(n).type for n in "abce"] == [pa.date32(), pa.date32(), pa.int64(), pa.date32()]
    assert t.to_pylist() == [dict.fromkeys("abce")] * 2
    with pytest.raises(PlanError, match="Date \\+ Date"):
        f.select(x=col("d") + col("d"))


def test_unsigned_and_signed_promotion():
    f = two([200], [-1], pa.uint8(), pa.int8())
    t = run(f.select(s=col("a") + col("b")))
    assert t.schema.field("s").type == pa.int16() and t.column("s").to_pylist() == [199]


def test_negation_overflow():
    with pytest.raises(ExecutionError, match="Int8"):
        run(one([-128], pa.int8()).select(y=-col("x")))
    with pytest.raises(ExecutionError, match="Int8"):
        run(one([-128], pa.int8()).select(y=col("x").abs()))


def test_pow_is_ieee():
    f = two([2, 0, -8, 10, 4], [3, -1, 0, 400, 0], pa.int64(), pa.int64())
    out = column(f.select(p=col("a") ** col("b")))
    assert out == [8.0, INF, 1.0, INF, 1.0]
    g = two([-8.0, NAN, 1.0], [1 / 3, 0.0, NAN])
    p = column(g.select(p=col("a") ** col("b")))
    assert is_nan(p[0]) and p[1] == 1.0 and p[2] == 1.0


def test_float32_arithmetic_rounds_to_float32():
    f = one([0.1], pa.float32())
    t = run(f.select(y=col("x") + 0.2, eq=col("x") == 0.1))
    assert t.schema.field("y").type == pa.float32()
    assert t.column("y").to_pylist() == [pa.scalar(0.3, pa.float32()).as_py()]
    assert t.column("eq").to_pylist() == [True]


def test_decimal_arithmetic_is_exact_with_sql_types():
    f = two([D("1.25"), D("-3.10"), None], [D("2.5"), D("0.1"), D("1.0")], pa.decimal128(5, 2), pa.decimal128(3, 1))
    t = run(f.select(s=col("a") + col("b"), m=col("a") * col("b"), q=col("a") / col("b")))
    assert t.schema.field("s").type == pa.decimal128(6, 2)
    assert t.schema.field("m").type == pa.decimal128(8, 3)
    assert t.schema.field("q").type == pa.float64()
    assert t.column("s").to_pylist() == [D("3.75"), D("-3.00"), None]
    assert t.column("m").to_pylist() == [D("3.125"), D("-0.310"), None]
    assert t.column("q").to_pylist() == [0.5, -31.0, None]


def test_decimal_with_integer_and_weak_literal():
    f = one([D("9.99"), D("-0.01")], pa.decimal128(3, 2))
    t = run(f.select(y=col("x") + 1, z=col("x") * 3))
    assert t.column("y").to_pylist() == [D("10.99"), D("0.99")]
    assert t.column("z").to_pylist() == [D("29.97"), D("-0.03")]


def test_decimal_division_by_zero_is_null_and_overflow_raises():
    f = two([D("1.0")], [D("0.0")], pa.decimal128(2, 1), pa.decimal128(2, 1))
    assert column(f.select(q=col("a") / col("b"))) == [None]
    assert column(f.select(q=col("a") // col("b"))) == [None]
    big = one([D("9" * 38)], pa.decimal128(38, 0))
    with pytest.raises(ExecutionError, match="decimal overflow"):
        run(big.select(y=col("x") + 1))


def test_decimal_floor_division_and_modulo():
    f = two([D("7.5"), D("-7.5")], [D("2"), D("2")], pa.decimal128(2, 1), pa.decimal128(1, 0))
    out = cols(f.select(q=col("a") // col("b"), r=col("a") % col("b")))
    assert out == {"q": [D("3"), D("-4")], "r": [D("1.5"), D("0.5")]}


def test_decimal_with_float_goes_to_float64():
    f = two([D("1.5")], [0.25], pa.decimal128(2, 1), pa.float64())
    t = run(f.select(s=col("a") + col("b")))
    assert t.schema.field("s").type == pa.float64() and t.column("s").to_pylist() == [1.75]


def test_comparisons_with_null_give_null():
    f = two([1, None, 3], [1, 2, None])
    out = cols(f.select(eq=col("a") == col("b"), lt=col("a") < col("b"), ne=col("a") != col("b")))
    assert out == {"eq": [True, None, None], "lt": [False, None, None], "ne": [False, None, None]}


def test_nan_is_a_value_equal_to_itself_and_above_everything():
    f = two([NAN, NAN, 1.0, INF], [NAN, 1.0, NAN, NAN])
    out = cols(f.select(eq=col("a") == col("b"), lt=col("a") < col("b"), gt=col("a") > col("b"),
                        le=col("a") <= col("b"), ge=col("a") >= col("b"), ne=col("a") != col("b")))
    assert out["eq"] == [True, False, False, False]
    assert out["ne"] == [False, True, True, True]
    assert out["lt"] == [False, False, True, True]
    assert out["gt"] == [False, True, False, False]
    assert out["le"] == [True, False, True, True]
    assert out["ge"] == [True, True, False, False]


def test_strings_compare_by_code_point():
    f = two(["a", "B", "é", "z", "ab"], ["b", "a", "z", "é", "a"])
    assert column(f.select(lt=col("a") < col("b"))) == [True, True, False, True, False]


def test_kleene_logic_truth_table():
    vals = [True, False, None]
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    f = two(a, b, pa.bool_(), pa.bool_())
    out = cols(f.select(and_=col("a") & col("b"), or_=col("a") | col("b"), not_=~col("a")))
    assert out["and_"] == [True, False, None, False, False, False, None, False, None]
    assert out["or_"] == [True, True, True, True, False, None, True, None, None]
    assert out["not_"] == [False] * 3 + [True] * 3 + [None] * 3


def test_filter_keeps_only_true():
    f = two([1, 2, 3, None], [True, None, False, True], pa.int64(), pa.bool_())
    assert cols(f.filter(col("b")))["a"] == [1, None]
    assert cols(f.filter(col("a") > 1))["a"] == [2, 3]


def test_null_tests_and_fill_null():
    f = one([1.5, None, NAN])
    out = cols(f.select(n=col("x").is_null(), nn=col("x").is_not_null(), f=col("x").fill_null(0)))
    assert out["n"] == [False, True, False] and out["nn"] == [True, False, True]
    assert out["f"][:2] == [1.5, 0.0] and is_nan(out["f"][2])


def test_fill_null_promotes():
    t = run(one([1, None], pa.int32()).select(y=col("x").fill_null(2.5)))
    assert t.schema.field("y").type == pa.float64() and t.column("y").to_pylist() == [1.0, 2.5]


def test_is_in_follows_sql():
    f = one([1, 2, None, 4])
    assert column(f.select(y=col("x").is_in([1, 4]))) == [True, False, None, True]
    assert column(f.select(y=col("x").is_in([1, None]))) == [True, None, None, None]
    assert column(f.select(y=col("x").is_in([]))) == [False, False, None, False]
    g = one([NAN, 1.0, 2.0])
    assert column(g.select(y=col("x").is_in([NAN, 2]))) == [True, False, True]


def test_is_in_dates_and_strings():
    f = one([dt.date(2020, 1, 1), dt.date(2021, 1, 1)])
    assert column(f.select(y=col("x").is_in([dt.date(2020, 1, 1)]))) == [True, False]
    g = one(["a", "ä", None])
    assert column(g.select(y=col("x").is_in(["ä"]))) == [False, True, None]


def test_is_between_is_inclusive_with_three_valued_logic():
    f = ei.from_pydict({"x": [1, 2, 5, 6, None, 3], "lo": [1, 1, 1, 1, 1, None]})
    assert column(f.select(y=col("x").is_between(col("lo"), 5))) == [True, True, True, False, None, None]
    g = two([0, 9], [None, None], pa.int64(), pa.int64()).rename({"a": "x", "b": "lo"})
    assert column(g.select(y=col("x").is_between(col("lo"), 5))) == [None, False]


def test_when_then_first_true_wins_null_condition_false():
    f = one([1, 5, None, 10])
    e = when(col("x") > 4).then(lit("big")).when(col("x") > 0).then(lit("small")).otherwise(lit("none"))
    assert column(f.select(y=e)) == ["small", "big", "none", "big"]
    assert column(f.select(y=when(col("x") > 4).then(col("x")))) == [None, 5, None, 10]


def test_when_then_promotes_and_evaluates_only_taken_branch():
    f = one([0, 2, 4], pa.int64())
    e = when(col("x") == 0).then(0.5).otherwise(col("x"))
    t = run(f.select(y=e))
    assert t.schema.field("y").type == pa.float64() and t.column("y").to_pylist() == [0.5, 2.0, 4.0]
    s = ei.from_pydict({"s": ["1", "oops", "3"]})
    guarded = when(col("s") == "oops").then(lit(-1)).otherwise(col("s").cast(ei.Int64))
    assert column(s.select(y=guarded)) == [1, -1, 3]


def test_math_functions_ieee():
    f = one([4.0, -1.0, 0.0, INF, NAN])
    out = cols(f.select(sq=col("x").sqrt(), lg=col("x").log(), ex=col("x").exp()))
    assert out["sq"][0] == 2.0 and is_nan(out["sq"][1]) and out["sq"][3] == INF and is_nan(out["sq"][4])
    assert out["lg"][2] == -INF and is_nan(out["lg"][1]) and out["lg"][3] == INF
    assert out["ex"][2] == 1.0 and out["ex"][3] == INF
    assert column(one([1000.0]).select(e=col("x").exp())) == [INF]
    trig = cols(one([0.0, INF]).select(s=col("x").sin(), c=col("x").cos(), t=col("x").tanh()))
    assert trig["s"][0] == 0.0 and is_nan(trig["s"][1]) and trig["c"][0] == 1.0 and trig["t"][1] == 1.0


def test_math_on_integers_and_decimals_gives_float():
    t = run(ei.from_pydict({"i": [4], "d": [D("2.25")]}).select(a=col("i").sqrt(), b=col("d").sqrt()))
    assert t.to_pydict() == {"a": [2.0], "b": [1.5]}


def test_round_half_away_from_zero():
    f = one([0.5, 1.5, 2.5, -0.5, -2.5, 1.25, NAN, INF])
    r = column(f.select(y=col("x").round()))
    assert r[:6] == [1.0, 2.0, 3.0, -1.0, -3.0, 1.0] and is_nan(r[6]) and r[7] == INF
    assert column(f.select(y=col("x").round(1)))[5] == 1.3
    assert column(one([1234.5]).select(y=col("x").round(-2))) == [1200.0]
    assert column(one([15, -25, 14], pa.int64()).select(y=col("x").round(-1))) == [20, -30, 10]


def test_round_decimal():
    t = run(one([D("2.345"), D("-2.345")], pa.decimal128(5, 3)).select(y=col("x").round(2)))
    assert t.schema.field("y").type == pa.decimal128(5, 2)
    assert t.column("y").to_pylist() == [D("2.35"), D("-2.35")]


def test_floor_ceil():
    f = one([1.5, -1.5, INF, NAN])
    out = cols(f.select(a=col("x").floor(), b=col("x").ceil()))
    assert out["a"][:3] == [1.0, -2.0, INF] and out["b"][:3] == [2.0, -1.0, INF] and is_nan(out["a"][3])
    t = run(one([D("-1.5")], pa.decimal128(3, 1)).select(a=col("x").floor(), b=col("x").ceil()))
    assert t.to_pydict() == {"a": [D("-2")], "b": [D("-1")]}


def test_string_functions_unicode():
    f = one(["Straße", "ǅx", "", None, "héllo wörld"])
    out = cols(f.select(lo=col("x").str.to_lower(), up=col("x").str.to_upper(), n=col("x").str.len()))
    assert out["up"] == ["STRASSE", "ǄX", "", None, "HÉLLO WÖRLD"]
    assert out["lo"] == ["straße", "ǆx", "", None, "héllo wörld"]
    assert out["n"] == [6, 2, 0, None, 11]


def test_contains_is_literal_not_regex():
    f = one(["a.c", "abc", "x*y", None])
    out = cols(f.select(c=col("x").str.contains(".", literal=True), s=col("x").str.starts_with("a"),
                        e=col("x").str.ends_with("*y")))
    assert out == {"c": [True, False, False, None], "s": [True, True, False, None], "e": [False, False, True, None]}


def test_like_patterns():
    f = one(["abc", "aXc", "ac", "ABC", "a\nc", "a%c", "", None])
    assert column(f.select(y=col("x").str.like("a_c"))) == [True, True, False, False, True, True, False, None]
    assert column(f.select(y=col("x").str.like("a%"))) == [True, True, True, False, True, True, False, None]
    assert column(f.select(y=col("x").str.like("%"))) == [True] * 7 + [None]
    assert column(f.select(y=col("x").str.like("a.c"))) == [False] * 7 + [None]


def test_slice_counts_code_points_and_negative_offsets_from_the_end():
    f = one(["abcdef", "ab", "日本語テキスト", None])
    assert column(f.select(y=col("x").str.slice(1, 2))) == ["bc", "b", "本語", None]
    assert column(f.select(y=col("x").str.slice(-3))) == ["def", "ab", "キスト", None]
    assert column(f.select(y=col("x").str.slice(-5, 2))) == ["bc", "", "語テ", None]
    assert column(f.select(y=col("x").str.slice(10, 2))) == ["", "", "", None]


def test_date_parts_and_arithmetic():
    f = ei.from_pydict({"d": [dt.date(2024, 2, 29), None], "t": [dt.datetime(2020, 12, 31, 23, 59, 59, 999999), None]})
    t = run(f.select(y=col("d").dt.year(), m=col("d").dt.month(), day=col("t").dt.day(),
                     p=col("d") + 1, q=col("d") - 366, r=col("d") - col("d")))
    assert t.schema.field("y").type == pa.int32() and t.schema.field("p").type == pa.date32()
    assert t.to_pydict() == {"y": [2024, None], "m": [2, None], "day": [31, None],
                             "p": [dt.date(2024, 3, 1), None], "q": [dt.date(2023, 2, 28), None], "r": [0, None]}


def test_date_comparisons_with_timestamps():
    f = ei.from_pydict({"d": [dt.date(2020, 1, 1), dt.date(2020, 1, 2)]})
    assert column(f.select(y=col("d") < dt.datetime(2020, 1, 1, 12))) == [True, False]
    assert column(f.select(y=col("d") <= ei.date(2020, 1, 1))) == [True, False]


def test_date_overflow_raises():
    with pytest.raises(ExecutionError, match="date out of range"):
        run(ei.from_pydict({"d": [dt.date(9999, 12, 31)]}).select(y=col("d") + 1))


# ---------------------------------------------------------------- casts

def test_cast_float_to_int_truncates_and_raises_out_of_range():
    f = one([1.9, -1.9, 0.0])
    assert column(f.select(y=col("x").cast(ei.Int32))) == [1, -1, 0]
    with pytest.raises(ExecutionError, match="cannot cast nan to Int64"):
        run(one([NAN]).select(y=col("x").cast(ei.Int64)))
    with pytest.raises(ExecutionError, match="Int8"):
        run(one([300.0]).select(y=col("x").cast(ei.Int8)))


def test_cast_int_narrowing_raises():
    assert column(one([127, -128]).select(y=col("x").cast(ei.Int8))) == [127, -128]
    with pytest.raises(ExecutionError, match="out of range"):
        run(one([-1]).select(y=col("x").cast(ei.UInt64)))


def test_cast_to_string_canonical_text():
    f = ei.from_arrow(pa.table({
        "i": pa.array([-5], pa.int64()), "f": pa.array([0.1], pa.float64()), "g": pa.array([0.1], pa.float32()),
        "d": pa.array([D("1.50")], pa.decimal128(5, 2)), "b": pa.array([True]),
        "dt": pa.array([dt.date(2020, 1, 2)]), "ts": pa.array([dt.datetime(2020, 1, 2, 3, 4, 5)], pa.timestamp("us")),
        "big": pa.array([1e16]), "n": pa.array([NAN]), "inf": pa.array([-INF])}))
    out = cols(f.select(*[col(c).cast(ei.String) for c in f.columns]))
    assert out == {"i": ["-5"], "f": ["0.1"], "g": ["0.1"], "d": ["1.50"], "b": ["true"], "dt": ["2020-01-02"],
                   "ts": ["2020-01-02 03:04:05"], "big": ["1e+16"], "n": ["nan"], "inf": ["-inf"]}


def test_cast_from_string_parses():
    f = one([" 42 ", "-7", None])
    assert column(f.select(y=col("x").cast(ei.Int16))) == [42, -7, None]
    g = one(["1.5", " 2e3", "NaN", "-inf", ".5"])
    out = column(g.select(y=col("x").cast(ei.Float64)))
    assert out[0] == 1.5 and out[1] == 2000.0 and is_nan(out[2]) and out[3] == -INF and out[4] == 0.5
    assert column(one(["TRUE", "false", " True "]).select(y=col("x").cast(ei.Boolean))) == [True, False, True]
    assert column(one(["2020-02-29"]).select(y=col("x").cast(ei.Date))) == [dt.date(2020, 2, 29)]
    assert column(one(["1.005"]).select(y=col("x").cast(ei.Decimal(5, 2)))) == [D("1.01")]
    assert column(one(["2020-01-02 03:04:05.5"]).select(y=col("x").cast(ei.Timestamp))) == [
        dt.datetime(2020, 1, 2, 3, 4, 5, 500000)]


@pytest.mark.parametrize("text,dtype", [("abc", ei.Int64), ("1.5", ei.Int64), ("1_000", ei.Int64),
                                        ("", ei.Float64), ("yes", ei.Boolean), ("2020-13-01", ei.Date),
                                        ("2020/01/01", ei.Date), ("١٢", ei.Int64), ("1e5", ei.Decimal(5, 2))])
def test_cast_bad_string_raises(text, dtype):
    with pytest.raises(ExecutionError, match="cannot cast string"):
        run(one([text]).select(y=col("x").cast(dtype)))


def test_cast_numbers_and_booleans():
    f = one([0.0, 2.5, NAN])
    assert column(f.select(y=col("x").cast(ei.Boolean))) == [False, True, True]
    assert column(one([True, False, None]).select(y=col("x").cast(ei.Int8))) == [1, 0, None]
    assert column(one([D("2.5"), D("-2.5")], pa.decimal128(2, 1)).select(y=col("x").cast(ei.Int64))) == [2, -2]
    assert column(one([D("2.25"), D("-2.25")], pa.decimal128(3, 2)).select(y=col("x").cast(ei.Decimal(2, 1)))) == [
        D("2.3"), D("-2.3")]
    with pytest.raises(ExecutionError, match="out of range"):
        run(one([D("123.4")], pa.decimal128(4, 1)).select(y=col("x").cast(ei.Decimal(3, 1))))


def test_cast_dates_and_timestamps():
    f = ei.from_pydict({"t": [dt.datetime(2020, 1, 2, 23, 59)], "d": [dt.date(2020, 1, 2)]})
    out = cols(f.select(a=col("t").cast(ei.Date), b=col("d").cast(ei.Timestamp)))
    assert out == {"a": [dt.date(2020, 1, 2)], "b": [dt.datetime(2020, 1, 2)]}


# ---------------------------------------------------------------- udfs

def double(x):
    return None if x is None else x * 2


def test_udf_gets_python_values_and_none():
    f = one([1, None, 3])
    assert column(f.select(y=ei.udf(double, ei.Int64)(col("x")))) == [2, None, 6]
    assert column(f.select(y=ei.udf(lambda x: 0.5, ei.Float64)(col("x")))) == [0.5, 0.5, 0.5]


def test_udf_exception_is_chained_and_named():
    def boom(x):
        raise ValueError("no good")

    with pytest.raises(ExecutionError, match="udf .*boom raised ValueError: no good") as e:
        run(one([1]).select(y=ei.udf(boom, ei.Int64)(col("x"))))
    assert isinstance(e.value.__cause__, ValueError)


def test_udf_wrong_return_type_raises():
    with pytest.raises(ExecutionError, match=r"udf .*returned str 'a', which is not a Int64"):
        run(one([1]).select(y=ei.udf(lambda x: "a", ei.Int64)(col("x"))))
    with pytest.raises(ExecutionError, match="does not fit in Int8"):
        run(one([1]).select(y=ei.udf(lambda x: 1000, ei.Int8)(col("x"))))


def test_plan_errors_stay_plan_errors():
    with pytest.raises(PlanError):
        one([1]).select(y=col("x").str.len())


def test_is_in_values_meet_the_column_like_weak_literals():
    f = one([0.1, 0.5], pa.float32())
    assert column(f.select(y=col("x").is_in([0.1]), z=col("x") == 0.1)) == [True, False]
    assert column(one([D("1.50")], pa.decimal128(3, 2)).select(y=col("x").is_in([1.5, 2]))) == [True]
    assert column(one([100], pa.int8()).select(y=col("x").is_in([1000, 100]))) == [True]

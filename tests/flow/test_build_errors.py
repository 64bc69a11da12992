"""Bad plans fail where they are built, with a PlanError a person can act on."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import eidos as ei
from eidos import col, lit, when
from eidos.errors import EidosError, PlanError


@pytest.fixture
def orders():
    return ei.from_pydict({
        "l_shipdate": [dt.date(1998, 1, 1), dt.date(1998, 12, 1)],
        "l_quantity": [1, 2],
        "l_comment": ["a", "b"],
    })


def message(excinfo) -> str:
    return str(excinfo.value)


def test_missing_column_lists_columns_and_suggests(orders):
    with pytest.raises(PlanError) as e:
        orders.filter(col("l_shipdat") <= ei.date(1998, 9, 2))
    text = message(e)
    assert "column 'l_shipdat' does not exist in Filter(l_shipdat <= 1998-09-02)" in text
    assert "columns: 'l_shipdate', 'l_quantity', 'l_comment'" in text
    assert "did you mean 'l_shipdate'?" in text


def test_missing_column_without_close_match_has_no_suggestion(orders):
    with pytest.raises(PlanError) as e:
        orders.select("zzz")
    assert "did you mean" not in message(e)


def test_string_plus_date_is_a_type_error(orders):
    with pytest.raises(PlanError, match=r"cannot compute String \+ Date"):
        orders.with_columns(x=col("l_comment") + col("l_shipdate"))


def test_non_boolean_filter(orders):
    with pytest.raises(PlanError, match="filter predicate must be Boolean, got Int64"):
        orders.filter(col("l_quantity"))


def test_string_filter_is_explained(orders):
    with pytest.raises(PlanError, match=r"filter takes Boolean expressions such as col.*not the string"):
        orders.filter("l_quantity > 1")


def test_python_and_or_on_expressions(orders):
    with pytest.raises(PlanError, match="use & | ~ instead of and / or / not"):
        orders.filter(col("l_quantity") > 1 and col("l_quantity") < 3)


def test_compare_incompatible(orders):
    with pytest.raises(PlanError, match="cannot compare String with Int64"):
        orders.filter(col("l_comment") == col("l_quantity"))


def test_string_literal_against_number(orders):
    with pytest.raises(PlanError, match="cannot compare Int64 with String"):
        orders.filter(col("l_quantity") == "1")


def test_aggregation_outside_agg(orders):
    with pytest.raises(PlanError, match=r"aggregation sum\(\) is allowed only inside agg"):
        orders.with_columns(s=col("l_quantity").sum())


def test_nested_aggregation(orders):
    with pytest.raises(PlanError, match="aggregations cannot be nested"):
        orders.agg(s=col("l_quantity").sum().sum())


def test_agg_reading_a_column_outside_an_aggregation(orders):
    with pytest.raises(PlanError, match="reads column 'l_quantity' outside an aggregation"):
        orders.group_by("l_comment").agg(s=col("l_quantity").sum() + col("l_quantity"))


def test_agg_needs_aggregations(orders):
    with pytest.raises(PlanError, match="is not an aggregation"):
        orders.group_by("l_comment").agg(x=col("l_quantity") + 1)


def test_sum_of_strings(orders):
    with pytest.raises(PlanError, match=r"sum\(\) needs a numeric column, got String"):
        orders.agg(s=col("l_comment").sum())


def test_unnamed_expression_needs_alias(orders):
    with pytest.raises(PlanError, match="needs a name"):
        orders.select(lit(1) + lit(2))


def test_duplicate_output_names(orders):
    with pytest.raises(PlanError, match="duplicate column names 'a'"):
        orders.select(a=col("l_quantity"), b=col("l_comment")).with_columns().select("a", col("b").alias("a"))


def test_join_key_missing_on_right(orders):
    other = ei.from_pydict({"k": [1]})
    with pytest.raises(PlanError) as e:
        orders.join(other, on="l_quantity")
    assert "column 'l_quantity' does not exist in the right side of Join inner" in message(e)


def test_join_key_types_incompatible(orders):
    other = ei.from_pydict({"k": ["1"]})
    with pytest.raises(PlanError, match=r"join keys 'l_quantity' \(Int64\) and 'k' \(String\)"):
        orders.join(other, left_on="l_quantity", right_on="k")


def test_join_kind_unknown(orders):
    with pytest.raises(PlanError, match="unknown join kind 'outer'; use one of inner, left, right, full"):
        orders.join(orders, on="l_quantity", how="outer")


def test_join_on_and_left_on_together(orders):
    with pytest.raises(PlanError, match="either on=... or left_on="):
        orders.join(orders, on="l_quantity", left_on="l_quantity", right_on="l_quantity")


def test_cross_join_with_keys(orders):
    with pytest.raises(PlanError, match="a cross join takes no keys"):
        orders.join(orders, on="l_quantity", how="cross")


def test_union_schema_mismatch(orders):
    with pytest.raises(PlanError, match="union needs inputs with the same columns"):
        orders.union(orders.select("l_quantity"))


def test_rename_and_drop_missing(orders):
    with pytest.raises(PlanError, match="column 'nope' does not exist in rename"):
        orders.rename({"nope": "x"})
    with pytest.raises(PlanError, match="did you mean 'l_comment'"):
        orders.drop("l_coment")


def test_drop_everything(orders):
    with pytest.raises(PlanError, match="drop would remove every column"):
        orders.drop("l_shipdate", "l_quantity", "l_comment")


def test_sort_flags_mismatch(orders):
    with pytest.raises(PlanError, match="sort got 1 descending flags for 2 keys"):
        orders.sort("l_quantity", "l_comment", descending=[True])


def test_limit_negative(orders):
    with pytest.raises(PlanError, match="non-negative"):
        orders.limit(-1)


def test_when_condition_must_be_boolean(orders):
    with pytest.raises(PlanError, match="a when\\(\\) condition must be Boolean, got Int64"):
        orders.with_columns(x=when(col("l_quantity")).then(1).otherwise(0))


def test_when_branch_types_must_agree(orders):
    with pytest.raises(PlanError, match="cannot combine when/then branches"):
        orders.with_columns(x=when(col("l_quantity") > 1).then("a").otherwise(col("l_shipdate")))


def test_cast_impossible(orders):
    with pytest.raises(PlanError, match="cannot cast Date to Int64"):
        orders.with_columns(x=col("l_shipdate").cast(ei.Int64))


def test_bad_dtype_argument(orders):
    with pytest.raises(PlanError, match="expected a dtype"):
        orders.with_columns(x=col("l_quantity").cast(42))
    with pytest.raises(PlanError, match="unknown dtype 'Int65'"):
        orders.with_columns(x=col("l_quantity").cast("Int65"))


def test_decimal_bounds():
    with pytest.raises(PlanError, match="precision must be an integer in 1..38"):
        ei.Decimal(39, 2)
    with pytest.raises(PlanError, match="scale must be an integer in 0..precision"):
        ei.Decimal(5, 6)


def test_literal_out_of_range():
    with pytest.raises(PlanError, match="out of range for Int8"):
        lit(300, ei.Int8)
    with pytest.raises(PlanError, match="cannot use list value"):
        lit([1, 2])


def test_invalid_date():
    with pytest.raises(PlanError, match="invalid date 2020-2-30"):
        ei.date(2020, 2, 30)


def test_str_methods_need_strings(orders):
    with pytest.raises(PlanError, match=r"str.contains\(\) needs a String, got Int64"):
        orders.filter(col("l_quantity").str.contains("x"))
    with pytest.raises(PlanError, match=r"str.contains\(\) takes a string"):
        col("l_comment").str.contains(1)


def test_dt_methods_need_dates(orders):
    with pytest.raises(PlanError, match=r"dt.year\(\) needs a Date or Timestamp, got String"):
        orders.with_columns(y=col("l_comment").dt.year())


def test_negating_unsigned():
    f = ei.from_arrow(pa.table({"u": pa.array([1], pa.uint8())}))
    with pytest.raises(PlanError, match="cannot negate unsigned UInt8"):
        f.with_columns(n=-col("u"))


def test_sources_errors(tmp_path):
    with pytest.raises(PlanError, match="no such file"):
        ei.read_parquet(tmp_path / "missing.parquet")
    with pytest.raises(PlanError, match="the glob matched nothing"):
        ei.read_parquet(str(tmp_path / "*.parquet"))
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(PlanError, match="cannot read parquet"):
        ei.read_parquet(bad)
    with pytest.raises(PlanError, match="from_arrow takes a pyarrow Table"):
        ei.from_arrow([1, 2])
    with pytest.raises(PlanError, match="holds only nulls"):
        ei.from_pydict({"a": [None, None]})
    with pytest.raises(PlanError, match="eidos timestamps count ms, us or ns"):
        ei.from_arrow(pa.table({"t": pa.array([0], pa.timestamp("s"))}))
    with pytest.raises(PlanError, match="a time zone is an IANA name"):
        ei.from_arrow(pa.table({"t": pa.array([0], pa.timestamp("us", tz="+01:00"))}))
    with pytest.raises(PlanError, match="read_csv separator must be one character"):
        ei.read_csv(bad, delimiter=";;")


def test_read_sql_arguments():
    with pytest.raises(PlanError, match="exactly one of table"):
        ei.read_sql("sqlite:///x.db")
    with pytest.raises(PlanError, match="needs a uri") as e:
        ei.read_sql("postgres-at-host-with-password:secret", table="t")
    assert "secret" not in str(e.value)


def test_every_error_is_an_eidos_error():
    for cls in (ei.errors.PlanError, ei.errors.UnsupportedError, ei.errors.BackendUnavailable,
                ei.errors.ExecutionError, ei.errors.IsaError, ei.errors.BackendError):
        assert issubclass(cls, EidosError)


def test_flows_are_immutable(orders):
    before = orders.schema
    orders.with_columns(x=col("l_quantity") * 2)
    orders.filter(col("l_quantity") > 1)
    assert orders.schema == before
    with pytest.raises(AttributeError):
        orders.foo = 1


def test_big_decimal_literal_is_exact_or_a_plan_error():
    assert str(lit(10**18, ei.Decimal(38, 10)).node.value) == "1000000000000000000.0000000000"
    with pytest.raises(PlanError, match="does not fit in Decimal"):
        lit(10**30, ei.Decimal(38, 10))


def test_csv_nan_makes_a_float_column(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text("a,b\n0,x\nnan,y\n-1,z\n")
    assert ei.read_csv(path).schema["a"] == ei.Float64

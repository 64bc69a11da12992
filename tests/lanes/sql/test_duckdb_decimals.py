"""DuckDB's 64-bit decimal arithmetic against the reference: a product of two decimals of up to 18 digits
is computed in 64 bits and raises past 18 digits (its type has up to 36), so the lane runs the exact form of
its SQL when it raises; sums of such products are summed as 64-bit values. Values at the precision limits,
nulls, empty groups, division by zero, every way DuckDB reads data."""

from __future__ import annotations

import re
from decimal import Decimal as D

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eidos as ei
from eidos import col
from eidos.errors import ExecutionError
from eidos.lanes.sql import execute as X
from eidos.testing.compare import assert_tables_equal
from eidos.testing.strategies import examples, profile
from tests.lanes.helpers import lane_or_skip

MAX18 = D("9999999999999999.99")   # the largest DECIMAL(18, 2)


@pytest.fixture(autouse=True)
def _duckdb():
    lane_or_skip("duckdb")


def money(values, p=18, s=2):
    return pa.array([None if v is None else D(v) for v in values], pa.decimal128(p, s))


def table() -> pa.Table:
    """Prices and rates up to the limits of their types: products past 18 digits, and within 18."""
    return pa.table({
        "g": pa.array([1, 1, 2, 2, 3, 3, 4], pa.int64()),
        "price": money(["99999999999999.99", MAX18, "-99999999999999.99", None, "0.01", "12.34", None]),
        "rate": money([MAX18, "0.05", MAX18, "0.10", "-0.99", "0", None]),
        "tax": money(["0.50", "9999999999999.99", "0.01", None, "0", "-1.00", None], 15, 2),
        "zero": money(["0", "0", "1", "0", "0", "2", None]),
    })


def flows(source: ei.Flow) -> dict[str, ei.Flow]:
    revenue = col("price") * (1 - col("rate"))
    return {
        "product": source.select("g", p=col("price") * col("rate"), r=revenue),
        "q1 sums": source.group_by("g").agg(s=(col("price") * col("rate")).sum(), r=revenue.sum(),
                                           c=(revenue * (1 + col("tax"))).sum(), n=ei.count()).sort("g"),
        "whole sum": source.agg(s=(col("price") * col("rate")).sum(), d=(col("price") - col("rate")).sum()),
        "no rows": source.filter(col("g") > 9).agg(s=(col("price") * col("rate")).sum()),
        "all null group": source.filter(col("g") == 4).group_by("g").agg(s=(col("price") * col("rate")).sum()),
        "divided": source.group_by("g").agg(s=(col("price") * col("rate")).sum(), z=col("zero").sum())
                          .select("g", q=col("s") / col("z")).sort("g"),
    }


def sources(t: pa.Table, tmp_path) -> dict[str, ei.Flow]:
    pq.write_table(t, tmp_path / "t.parquet")
    from eidos.testing.databases import load_table

    return {"arrow": ei.from_arrow(t), "parquet": ei.read_parquet(tmp_path / "t.parquet"),
            "duckdb file": load_table(f"duckdb:///{tmp_path / 'd.duckdb'}", "t", t)}


@pytest.mark.parametrize("how", ["arrow", "parquet", "duckdb file"])
def test_products_past_18_digits_are_exact_however_read(how, tmp_path):
    for name, flow in flows(sources(table(), tmp_path)[how]).items():
        expected = flow.run(engine="reference", strict=True)
        assert_tables_equal(flow.run(engine="duckdb", strict=True), expected, ordered=True), name


def test_a_csv_read_as_a_stream_is_read_again_for_the_exact_form(tmp_path):
    pcsv.write_csv(pa.table({"a": [10**18 - 1, 5, None], "b": [10**18 - 1, 7, 1]}), tmp_path / "t.csv")
    read = ei.read_csv(tmp_path / "t.csv")
    flow = read.agg(s=(col("a").cast(ei.Decimal(18, 0)) * col("b").cast(ei.Decimal(18, 0))).sum())
    got = flow.run(engine="duckdb", strict=True)
    assert got.to_pylist() == [{"s": D((10**18 - 1) ** 2 + 35)}]
    assert_tables_equal(got, flow.run(engine="reference", strict=True), ordered=True)


def test_streamed_results_are_exact():
    t = table()
    for name, flow in flows(ei.from_arrow(t)).items():
        got = pa.Table.from_batches(list(flow.stream(engine="duckdb")))
        assert_tables_equal(got, flow.run(engine="reference", strict=True), ordered=True), name


def test_fast_sql_sums_64_bit_products_and_the_exact_form_widens_them():
    t = pa.table({"g": [1, 2], "price": money(["1.00", "2.00"], 15, 2), "rate": money(["0.05", "0.1"], 15, 2)})
    flow = ei.from_arrow(t).group_by("g").agg(r=(col("price") * (1 - col("rate"))).sum())   # TPC-H's revenue
    query = X.prepare("duckdb", flow.plan)
    assert "DECIMAL(19, 2)" not in query.sql and re.search(r'SUM\(\(("\w+"\.)?"c1" \*', query.sql)   # 64-bit product
    assert "DECIMAL(19, 2)" in query.exact()                                  # widened: 128 bits


def test_a_sum_past_38_digits_raises_like_the_reference():
    big = D("9" * 18)
    t = pa.table({"a": money([big] * 200, 18, 0), "b": money([big] * 200, 18, 0)})
    flow = ei.from_arrow(t).agg(s=(col("a") * col("b")).sum())
    with pytest.raises(ExecutionError):
        flow.run(engine="reference", strict=True)
    with pytest.raises(ExecutionError):
        flow.run(engine="duckdb", strict=True)
    fits = ei.from_arrow(t.slice(0, 10)).agg(s=(col("a") * col("b")).sum())   # 37 digits: exact
    assert_tables_equal(fits.run(engine="duckdb", strict=True), fits.run(engine="reference", strict=True),
                        ordered=True)


def test_a_product_past_38_digits_raises_like_the_reference():
    t = pa.table({"a": money([D("9" * 20)], 20, 0), "b": money([D("9" * 19)], 19, 0)})
    flow = ei.from_arrow(t).select(p=col("a") * col("b"))   # Decimal(38, 0), 39 digits
    for lane in ("reference", "duckdb"):
        with pytest.raises(ExecutionError):
            flow.run(engine=lane, strict=True)


digits = st.integers(min_value=-(10**18 - 1), max_value=10**18 - 1)
small = st.integers(min_value=-10**6, max_value=10**6)


@settings(parent=profile(), max_examples=examples(25))
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), digits, small),
                               st.one_of(st.none(), digits, small)), max_size=12))
def test_generated_product_sums_match_reference(rows):
    t = pa.table({"g": pa.array([r[0] for r in rows], pa.int64()),
                  "a": pa.array([None if r[1] is None else D(r[1]).scaleb(-2) for r in rows], pa.decimal128(18, 2)),
                  "b": pa.array([None if r[2] is None else D(r[2]).scaleb(-4) for r in rows], pa.decimal128(18, 4))})
    flow = (ei.from_arrow(t).group_by("g")
            .agg(s=(col("a") * col("b")).sum(), d=(col("a") * (1 - col("b"))).sum(), n=col("a").count())
            .sort("g"))
    assert_tables_equal(flow.run(engine="duckdb", strict=True), flow.run(engine="reference", strict=True),
                        ordered=True)

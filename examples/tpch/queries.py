"""TPC-H Q1, Q3, Q5, Q6 and Q10 written with the eidos Flow API.

Each query takes where its tables live: a data folder of <table>.parquet files,
or a function from a table name to a Flow (so the same query runs over parquet
files or over tables already in a database):

    q1("tests/data/tpch-sf0.01").run()
    q5(lambda name: ei.read_sql("sqlite:///tpch.db", table=name)).run(engine="sqlite")

Money columns are DECIMAL(15,2) and stay exact: revenue is a Decimal sum.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal

import eidos as ei
from eidos import col

Tables = Callable[[str], ei.Flow]


def parquet_tables(data_dir: str | os.PathLike) -> Tables:
    """Tables read from <data_dir>/<name>.parquet."""
    return lambda name: ei.read_parquet(os.path.join(data_dir, f"{name}.parquet"))


def sql_tables(uri: str, schema: str | None = None) -> Tables:
    """Tables read from a database (`schema.name` when a schema is given)."""
    return lambda name: ei.read_sql(uri, table=f"{schema}.{name}" if schema else name)


def _tables(source: str | os.PathLike | Tables) -> Tables:
    return source if callable(source) else parquet_tables(source)


def _revenue() -> ei.Expr:
    return col("l_extendedprice") * (1 - col("l_discount"))


def q1(source: str | os.PathLike | Tables) -> ei.Flow:
    """Pricing summary report."""
    lineitem = _tables(source)("lineitem")
    return (lineitem
            .filter(col("l_shipdate") <= ei.date(1998, 9, 2))      # 1998-12-01 - 90 days
            .group_by("l_returnflag", "l_linestatus")
            .agg(sum_qty=col("l_quantity").sum(),
                 sum_base_price=col("l_extendedprice").sum(),
                 sum_disc_price=_revenue().sum(),
                 sum_charge=(_revenue() * (1 + col("l_tax"))).sum(),
                 avg_qty=col("l_quantity").mean(),
                 avg_price=col("l_extendedprice").mean(),
                 avg_disc=col("l_discount").mean(),
                 count_order=ei.count())
            .sort("l_returnflag", "l_linestatus"))


def q3(source: str | os.PathLike | Tables) -> ei.Flow:
    """Shipping priority: the ten unshipped orders of highest value."""
    t = _tables(source)
    customer = t("customer").filter(col("c_mktsegment") == "BUILDING")
    orders = t("orders").filter(col("o_orderdate") < ei.date(1995, 3, 15))
    lineitem = t("lineitem").filter(col("l_shipdate") > ei.date(1995, 3, 15))
    return (customer
            .join(orders, left_on="c_custkey", right_on="o_custkey")
            .join(lineitem, left_on="o_orderkey", right_on="l_orderkey")
            .group_by(col("o_orderkey").alias("l_orderkey"), "o_orderdate", "o_shippriority")
            .agg(revenue=_revenue().sum())
            .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
            .sort("revenue", "o_orderdate", descending=[True, False])
            .limit(10))


def q5(source: str | os.PathLike | Tables) -> ei.Flow:
    """Local supplier volume: revenue in Asia in 1994 through suppliers of the customer's nation."""
    t = _tables(source)
    region = t("region").filter(col("r_name") == "ASIA")
    nation = t("nation").join(region, left_on="n_regionkey", right_on="r_regionkey")
    orders = t("orders").filter((col("o_orderdate") >= ei.date(1994, 1, 1))
                                & (col("o_orderdate") < ei.date(1995, 1, 1)))
    return (t("customer")
            .join(orders, left_on="c_custkey", right_on="o_custkey")
            .join(t("lineitem"), left_on="o_orderkey", right_on="l_orderkey")
            .join(t("supplier"), left_on=["l_suppkey", "c_nationkey"], right_on=["s_suppkey", "s_nationkey"])
            .join(nation, left_on="c_nationkey", right_on="n_nationkey")
            .group_by("n_name")
            .agg(revenue=_revenue().sum())
            .sort("revenue", descending=True))


def q6(source: str | os.PathLike | Tables) -> ei.Flow:
    """Forecasting revenue change: discounts between 5% and 7% in 1994."""
    lineitem = _tables(source)("lineitem")
    return (lineitem
            .filter((col("l_shipdate") >= ei.date(1994, 1, 1))
                    & (col("l_shipdate") < ei.date(1995, 1, 1))
                    & col("l_discount").is_between(Decimal("0.05"), Decimal("0.07"))
                    & (col("l_quantity") < 24))
            .agg(revenue=(col("l_extendedprice") * col("l_discount")).sum()))


def q10(source: str | os.PathLike | Tables) -> ei.Flow:
    """Returned item reporting: the twenty customers who returned the most, Q4 1993."""
    t = _tables(source)
    orders = t("orders").filter((col("o_orderdate") >= ei.date(1993, 10, 1))
                                & (col("o_orderdate") < ei.date(1994, 1, 1)))
    lineitem = t("lineitem").filter(col("l_returnflag") == "R")
    return (t("customer")
            .join(orders, left_on="c_custkey", right_on="o_custkey")
            .join(lineitem, left_on="o_orderkey", right_on="l_orderkey")
            .join(t("nation"), left_on="c_nationkey", right_on="n_nationkey")
            .group_by("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
            .agg(revenue=_revenue().sum())
            .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone", "c_comment")
            .sort("revenue", descending=True)
            .limit(20))


QUERIES: dict[str, Callable[[str | os.PathLike | Tables], ei.Flow]] = {
    "q1": q1, "q3": q3, "q5": q5, "q6": q6, "q10": q10,
}

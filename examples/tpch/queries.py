"""The 22 TPC-H queries written with the eidos Flow API.

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


def q2(source: str | os.PathLike | Tables) -> ei.Flow:
    """Minimum cost supplier: for each size-15 brass part, the European supplier(s) at the lowest cost."""
    t = _tables(source)
    europe = t("nation").join(t("region").filter(col("r_name") == "EUROPE"),
                              left_on="n_regionkey", right_on="r_regionkey")
    offers = (t("partsupp")                      # every European offer of every part
              .join(t("supplier"), left_on="ps_suppkey", right_on="s_suppkey")
              .join(europe, left_on="s_nationkey", right_on="n_nationkey"))
    cheapest = offers.group_by("ps_partkey").agg(min_cost=col("ps_supplycost").min())
    parts = t("part").filter((col("p_size") == 15) & col("p_type").str.ends_with("BRASS"))
    return (parts
            .join(offers, left_on="p_partkey", right_on="ps_partkey")
            .join(cheapest, left_on=["p_partkey", "ps_supplycost"], right_on=["ps_partkey", "min_cost"])
            .select("s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone", "s_comment")
            .sort("s_acctbal", "n_name", "s_name", "p_partkey", descending=[True, False, False, False])
            .limit(100))


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


def q4(source: str | os.PathLike | Tables) -> ei.Flow:
    """Order priority checking: orders of Q3 1993 with at least one line received late."""
    t = _tables(source)
    late = t("lineitem").filter(col("l_commitdate") < col("l_receiptdate"))
    return (t("orders")
            .filter((col("o_orderdate") >= ei.date(1993, 7, 1)) & (col("o_orderdate") < ei.date(1993, 10, 1)))
            .join(late, left_on="o_orderkey", right_on="l_orderkey", how="semi")     # EXISTS
            .group_by("o_orderpriority")
            .agg(order_count=ei.count())
            .sort("o_orderpriority"))


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


def q7(source: str | os.PathLike | Tables) -> ei.Flow:
    """Volume shipping: trade between France and Germany in 1995 and 1996."""
    t = _tables(source)
    nations = t("nation").filter(col("n_name").is_in(["FRANCE", "GERMANY"]))
    supp_nation = nations.select("n_nationkey", supp_nation=col("n_name"))
    cust_nation = nations.select("n_nationkey", cust_nation=col("n_name"))
    lineitem = t("lineitem").filter(col("l_shipdate").is_between(ei.date(1995, 1, 1), ei.date(1996, 12, 31)))
    return (t("supplier")
            .join(supp_nation, left_on="s_nationkey", right_on="n_nationkey")
            .join(lineitem, left_on="s_suppkey", right_on="l_suppkey")
            .join(t("orders"), left_on="l_orderkey", right_on="o_orderkey")
            .join(t("customer"), left_on="o_custkey", right_on="c_custkey")
            .join(cust_nation, left_on="c_nationkey", right_on="n_nationkey")
            .filter(col("supp_nation") != col("cust_nation"))
            .group_by("supp_nation", "cust_nation", col("l_shipdate").dt.year().alias("l_year"))
            .agg(revenue=_revenue().sum())
            .sort("supp_nation", "cust_nation", "l_year"))


def q8(source: str | os.PathLike | Tables) -> ei.Flow:
    """National market share: Brazil's share of American sales of one part type, 1995 and 1996."""
    t = _tables(source)
    america = t("nation").join(t("region").filter(col("r_name") == "AMERICA"),
                               left_on="n_regionkey", right_on="r_regionkey")
    orders = t("orders").filter(col("o_orderdate").is_between(ei.date(1995, 1, 1), ei.date(1996, 12, 31)))
    supp_nation = t("nation").select("n_nationkey", nation=col("n_name"))
    volume = (t("part")
              .filter(col("p_type") == "ECONOMY ANODIZED STEEL")
              .join(t("lineitem"), left_on="p_partkey", right_on="l_partkey")
              .join(orders, left_on="l_orderkey", right_on="o_orderkey")
              .join(t("customer"), left_on="o_custkey", right_on="c_custkey")
              .join(america, left_on="c_nationkey", right_on="n_nationkey")
              .join(t("supplier"), left_on="l_suppkey", right_on="s_suppkey")
              .join(supp_nation, left_on="s_nationkey", right_on="n_nationkey")
              .select(o_year=col("o_orderdate").dt.year(), volume=_revenue(), nation=col("nation")))
    return (volume
            .group_by("o_year")
            .agg(brazil=ei.when(col("nation") == "BRAZIL").then(col("volume")).otherwise(0).sum(),
                 total=col("volume").sum())
            .select("o_year", mkt_share=col("brazil") / col("total"))
            .sort("o_year"))


def q9(source: str | os.PathLike | Tables) -> ei.Flow:
    """Product type profit: profit on green parts by supplier nation and year."""
    t = _tables(source)
    return (t("part")
            .filter(col("p_name").str.contains("green", literal=True))
            .join(t("lineitem"), left_on="p_partkey", right_on="l_partkey")
            .join(t("partsupp"), left_on=["p_partkey", "l_suppkey"], right_on=["ps_partkey", "ps_suppkey"])
            .join(t("supplier"), left_on="l_suppkey", right_on="s_suppkey")
            .join(t("orders"), left_on="l_orderkey", right_on="o_orderkey")
            .join(t("nation"), left_on="s_nationkey", right_on="n_nationkey")
            .group_by(col("n_name").alias("nation"), col("o_orderdate").dt.year().alias("o_year"))
            .agg(sum_profit=(_revenue() - col("ps_supplycost") * col("l_quantity")).sum())
            .sort("nation", "o_year", descending=[False, True]))


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


def q11(source: str | os.PathLike | Tables) -> ei.Flow:
    """Important stock identification: German stock worth more than 0.01% of all German stock."""
    t = _tables(source)
    german = (t("partsupp")
              .join(t("supplier"), left_on="ps_suppkey", right_on="s_suppkey")
              .join(t("nation").filter(col("n_name") == "GERMANY"), left_on="s_nationkey", right_on="n_nationkey")
              .select("ps_partkey", value=col("ps_supplycost") * col("ps_availqty")))
    threshold = german.agg(threshold=col("value").sum() * Decimal("0.0001000000"))
    return (german
            .group_by("ps_partkey")
            .agg(value=col("value").sum())
            .join(threshold, how="cross")
            .filter(col("value") > col("threshold"))
            .select("ps_partkey", "value")
            .sort("value", descending=True))


def q12(source: str | os.PathLike | Tables) -> ei.Flow:
    """Shipping modes and order priority: late mail and ship lines of 1994, by priority."""
    t = _tables(source)
    lineitem = t("lineitem").filter(col("l_shipmode").is_in(["MAIL", "SHIP"])
                                    & (col("l_commitdate") < col("l_receiptdate"))
                                    & (col("l_shipdate") < col("l_commitdate"))
                                    & (col("l_receiptdate") >= ei.date(1994, 1, 1))
                                    & (col("l_receiptdate") < ei.date(1995, 1, 1)))
    high = col("o_orderpriority").is_in(["1-URGENT", "2-HIGH"])
    return (t("orders")
            .join(lineitem, left_on="o_orderkey", right_on="l_orderkey")
            .group_by("l_shipmode")
            .agg(high_line_count=ei.when(high).then(1).otherwise(0).sum(),
                 low_line_count=ei.when(~high).then(1).otherwise(0).sum())
            .sort("l_shipmode"))


def q13(source: str | os.PathLike | Tables) -> ei.Flow:
    """Customer distribution: how many customers have 0, 1, 2, ... orders (special requests aside)."""
    t = _tables(source)
    orders = t("orders").filter(~col("o_comment").str.like("%special%requests%"))
    return (t("customer")
            .join(orders, left_on="c_custkey", right_on="o_custkey", how="left")
            .group_by("c_custkey")
            .agg(c_count=col("o_orderkey").count())
            .group_by("c_count")
            .agg(custdist=ei.count())
            .sort("custdist", "c_count", descending=True))


def q14(source: str | os.PathLike | Tables) -> ei.Flow:
    """Promotion effect: the percentage of September 1995 revenue from promotional parts."""
    t = _tables(source)
    lineitem = t("lineitem").filter((col("l_shipdate") >= ei.date(1995, 9, 1))
                                    & (col("l_shipdate") < ei.date(1995, 10, 1)))
    promo = ei.when(col("p_type").str.starts_with("PROMO")).then(_revenue()).otherwise(0)
    return (lineitem
            .join(t("part"), left_on="l_partkey", right_on="p_partkey")
            .agg(promo=promo.sum(), total=_revenue().sum())
            .select(promo_revenue=Decimal("100.00") * col("promo") / col("total")))


def q15(source: str | os.PathLike | Tables) -> ei.Flow:
    """Top supplier: the supplier(s) with the most revenue in Q1 1996."""
    t = _tables(source)
    revenue = (t("lineitem")
               .filter((col("l_shipdate") >= ei.date(1996, 1, 1)) & (col("l_shipdate") < ei.date(1996, 4, 1)))
               .group_by(col("l_suppkey").alias("supplier_no"))
               .agg(total_revenue=_revenue().sum()))
    top = revenue.agg(max_revenue=col("total_revenue").max())
    return (t("supplier")
            .join(revenue, left_on="s_suppkey", right_on="supplier_no")
            .join(top, left_on="total_revenue", right_on="max_revenue")
            .select("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
            .sort("s_suppkey"))


def q16(source: str | os.PathLike | Tables) -> ei.Flow:
    """Parts/supplier relationship: suppliers (without complaints) of parts of given sizes and kinds."""
    t = _tables(source)
    complained = t("supplier").filter(col("s_comment").str.like("%Customer%Complaints%"))
    parts = t("part").filter((col("p_brand") != "Brand#45")
                             & ~col("p_type").str.starts_with("MEDIUM POLISHED")
                             & col("p_size").is_in([49, 14, 23, 45, 19, 3, 36, 9]))
    return (t("partsupp")
            .join(complained, left_on="ps_suppkey", right_on="s_suppkey", how="anti")  # NOT IN (no nulls)
            .join(parts, left_on="ps_partkey", right_on="p_partkey")
            .group_by("p_brand", "p_type", "p_size")
            .agg(supplier_cnt=col("ps_suppkey").n_unique())
            .sort("supplier_cnt", "p_brand", "p_type", "p_size", descending=[True, False, False, False]))


def q17(source: str | os.PathLike | Tables) -> ei.Flow:
    """Small-quantity-order revenue: yearly loss if small orders of two kinds of part were dropped."""
    t = _tables(source)
    parts = t("part").filter((col("p_brand") == "Brand#23") & (col("p_container") == "MED BOX"))
    lineitem = t("lineitem").join(parts, left_on="l_partkey", right_on="p_partkey", how="semi")
    small = lineitem.group_by("l_partkey").agg(limit=0.2 * col("l_quantity").mean())
    return (lineitem
            .join(small, on="l_partkey")
            .filter(col("l_quantity") < col("limit"))
            .agg(avg_yearly=col("l_extendedprice").sum() / 7.0))


def q18(source: str | os.PathLike | Tables) -> ei.Flow:
    """Large volume customer: the hundred orders of more than 300 units."""
    t = _tables(source)
    large = t("lineitem").group_by("l_orderkey").agg(qty=col("l_quantity").sum()).filter(col("qty") > 300)
    return (t("orders")
            .join(large, left_on="o_orderkey", right_on="l_orderkey", how="semi")
            .join(t("customer"), left_on="o_custkey", right_on="c_custkey")
            .join(t("lineitem"), left_on="o_orderkey", right_on="l_orderkey")
            .group_by(col("c_name"), col("o_custkey").alias("c_custkey"), "o_orderkey", "o_orderdate",
                      "o_totalprice")
            .agg(sum_qty=col("l_quantity").sum())
            .sort("o_totalprice", "o_orderdate", descending=[True, False])
            .limit(100))


def q19(source: str | os.PathLike | Tables) -> ei.Flow:
    """Discounted revenue: air-shipped, hand-delivered lines of three brand/container/size/quantity kinds."""
    t = _tables(source)

    def kind(brand: str, containers: list[str], qty: int, max_size: int) -> ei.Expr:
        return ((col("p_brand") == brand) & col("p_container").is_in(containers)
                & col("l_quantity").is_between(qty, qty + 10) & col("p_size").is_between(1, max_size))

    lineitem = t("lineitem").filter(col("l_shipmode").is_in(["AIR", "AIR REG"])
                                    & (col("l_shipinstruct") == "DELIVER IN PERSON"))
    return (lineitem
            .join(t("part"), left_on="l_partkey", right_on="p_partkey")
            .filter(kind("Brand#12", ["SM CASE", "SM BOX", "SM PACK", "SM PKG"], 1, 5)
                    | kind("Brand#23", ["MED BAG", "MED BOX", "MED PKG", "MED PACK"], 10, 10)
                    | kind("Brand#34", ["LG CASE", "LG BOX", "LG PACK", "LG PKG"], 20, 15))
            .agg(revenue=_revenue().sum()))


def q20(source: str | os.PathLike | Tables) -> ei.Flow:
    """Potential part promotion: Canadian suppliers holding over half of a year's shipments of forest parts."""
    t = _tables(source)
    shipped = (t("lineitem")
               .filter((col("l_shipdate") >= ei.date(1994, 1, 1)) & (col("l_shipdate") < ei.date(1995, 1, 1)))
               .group_by("l_partkey", "l_suppkey")
               .agg(half=Decimal("0.5") * col("l_quantity").sum()))
    excess = (t("partsupp")
              .join(t("part").filter(col("p_name").str.starts_with("forest")),
                    left_on="ps_partkey", right_on="p_partkey", how="semi")
              .join(shipped, left_on=["ps_partkey", "ps_suppkey"], right_on=["l_partkey", "l_suppkey"])
              .filter(col("ps_availqty") > col("half")))
    return (t("supplier")
            .join(excess, left_on="s_suppkey", right_on="ps_suppkey", how="semi")
            .join(t("nation").filter(col("n_name") == "CANADA"), left_on="s_nationkey", right_on="n_nationkey")
            .select("s_name", "s_address")
            .sort("s_name"))


def q21(source: str | os.PathLike | Tables) -> ei.Flow:
    """Suppliers who kept orders waiting: Saudi suppliers alone late on multi-supplier finished orders.

    EXISTS (another supplier on the order) is an order whose smallest and largest supplier differ; NOT
    EXISTS (another supplier late) is an order whose late lines have one supplier, this one (the line is
    late itself). One pass over lineitem gives both, with min and max rather than distinct counts."""
    t = _tables(source)
    lineitem = t("lineitem")
    is_late = col("l_receiptdate") > col("l_commitdate")
    waiting = (lineitem.group_by("l_orderkey")
               .agg(lo=col("l_suppkey").min(), hi=col("l_suppkey").max(),
                    late_lo=col("l_suppkey").filter(is_late).min(), late_hi=col("l_suppkey").filter(is_late).max())
               .filter((col("lo") != col("hi")) & (col("late_lo") == col("late_hi"))))
    return (lineitem.filter(is_late)
            .join(t("orders").filter(col("o_orderstatus") == "F"), left_on="l_orderkey", right_on="o_orderkey",
                  how="semi")
            .join(waiting, on="l_orderkey", how="semi")
            .join(t("supplier"), left_on="l_suppkey", right_on="s_suppkey")
            .join(t("nation").filter(col("n_name") == "SAUDI ARABIA"), left_on="s_nationkey",
                  right_on="n_nationkey", how="semi")
            .group_by("s_name")
            .agg(numwait=ei.count())
            .sort("numwait", "s_name", descending=[True, False])
            .limit(100))


def q22(source: str | os.PathLike | Tables) -> ei.Flow:
    """Global sales opportunity: customers of seven country codes, richer than average, without orders."""
    t = _tables(source)
    codes = ["13", "31", "23", "29", "30", "18", "17"]
    customer = (t("customer")
                .with_columns(cntrycode=col("c_phone").str.slice(0, 2))
                .filter(col("cntrycode").is_in(codes)))
    average = customer.filter(col("c_acctbal") > Decimal("0.00")).agg(avg_bal=col("c_acctbal").mean())
    return (customer
            .join(average, how="cross")
            .filter(col("c_acctbal") > col("avg_bal"))
            .join(t("orders"), left_on="c_custkey", right_on="o_custkey", how="anti")     # NOT EXISTS
            .group_by("cntrycode")
            .agg(numcust=ei.count(), totacctbal=col("c_acctbal").sum())
            .sort("cntrycode"))


QUERIES: dict[str, Callable[[str | os.PathLike | Tables], ei.Flow]] = {
    f"q{i}": globals()[f"q{i}"] for i in range(1, 23)
}

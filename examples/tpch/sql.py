"""The TPC-H query text (specification 3.0.1, validation substitution parameters).

Only two edits to the specification's text, so DuckDB runs it: the date
arithmetic with the interval precision `(3)` dropped (Q1), and table names
left unqualified. `{lineitem}` etc. are placeholders for where each table lives.
"""

from __future__ import annotations

Q1 = """
select l_returnflag, l_linestatus,
       sum(l_quantity) as sum_qty,
       sum(l_extendedprice) as sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
       avg(l_quantity) as avg_qty,
       avg(l_extendedprice) as avg_price,
       avg(l_discount) as avg_disc,
       count(*) as count_order
from {lineitem}
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus
"""

Q3 = """
select l_orderkey,
       sum(l_extendedprice * (1 - l_discount)) as revenue,
       o_orderdate, o_shippriority
from {customer}, {orders}, {lineitem}
where c_mktsegment = 'BUILDING'
  and c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and o_orderdate < date '1995-03-15'
  and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_shippriority
order by revenue desc, o_orderdate
limit 10
"""

Q5 = """
select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from {customer}, {orders}, {lineitem}, {supplier}, {nation}, {region}
where c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and l_suppkey = s_suppkey
  and c_nationkey = s_nationkey
  and s_nationkey = n_nationkey
  and n_regionkey = r_regionkey
  and r_name = 'ASIA'
  and o_orderdate >= date '1994-01-01'
  and o_orderdate < date '1994-01-01' + interval '1' year
group by n_name
order by revenue desc
"""

Q6 = """
select sum(l_extendedprice * l_discount) as revenue
from {lineitem}
where l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1994-01-01' + interval '1' year
  and l_discount between .06 - 0.01 and .06 + 0.01
  and l_quantity < 24
"""

Q10 = """
select c_custkey, c_name,
       sum(l_extendedprice * (1 - l_discount)) as revenue,
       c_acctbal, n_name, c_address, c_phone, c_comment
from {customer}, {orders}, {lineitem}, {nation}
where c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and o_orderdate >= date '1993-10-01'
  and o_orderdate < date '1993-10-01' + interval '3' month
  and l_returnflag = 'R'
  and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
order by revenue desc
limit 20
"""

QUERIES = {"q1": Q1, "q3": Q3, "q5": Q5, "q6": Q6, "q10": Q10}
TABLES = ("region", "nation", "supplier", "customer", "orders", "lineitem")


def text(name: str, table: dict[str, str] | None = None) -> str:
    """The query text with each table placeholder replaced (by default, the bare table name)."""
    names = {t: t for t in TABLES} | (table or {})
    return QUERIES[name].format(**names)


def over_parquet(name: str, data_dir: str) -> str:
    """The query text reading each table straight from <data_dir>/<table>.parquet (DuckDB)."""
    return text(name, {t: f"read_parquet('{data_dir}/{t}.parquet') as {t}" for t in TABLES})

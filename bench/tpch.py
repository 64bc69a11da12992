"""TPC-H Q1, Q3, Q5, Q6, Q10 at SF1: eidos on each lane and auto, beside native Polars and DuckDB.

    python bench/tpch.py [--scale 1] [--runs 7] [--queries q1 q6]

Generates the data on first use into bench/data/tpch-sf<scale> (git-ignored; needs
`pip install tpchgen-cli`). One run prints, per query: min and median seconds of
each lane through eidos (polars, duckdb; the reference lane is too slow here),
of engine=None (auto), of the same query hand-written in native Polars
(LazyFrame) and native DuckDB SQL, and the duckdb lane's own SQL run on the same open
connection (so its ratio splits into what the lane adds per run and what eidos semantics
cost in SQL); the ratios eidos/native (goal <= 1.05) and
auto/best lane (goal <= 1.10); and the planning time (planner.decide) plus each
lane's translation to its engine's form as each run pays it (goal < 1 ms; the SQL
lanes translate a plan once and keep it, so the uncached translation is shown apart, as
"first run"). Every result is checked against native DuckDB's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # the repository root (examples.tpch), not bench/

import eidos as ei  # noqa: E402
from examples.tpch import data as tpch_data  # noqa: E402
from examples.tpch import sql as tpch_sql  # noqa: E402
from examples.tpch.queries import QUERIES  # noqa: E402

LANES = ("polars", "duckdb")


# ---------------------------------------------------------------- native Polars, as a Polars user writes it

def polars_queries(data: str):
    import polars as pl

    def scan(name: str) -> pl.LazyFrame:
        return pl.scan_parquet(f"{data}/{name}.parquet")

    # Polars keeps the larger operand scale in a decimal product (0.05 * 12.34 rounds to 2
    # places), so money is widened first to get SQL's exact products, as eidos's answers are.
    def price(scale: int) -> pl.Expr:
        return pl.col("l_extendedprice").cast(pl.Decimal(38, scale))

    def revenue() -> pl.Expr:
        return price(4) * (1 - pl.col("l_discount"))

    def q1():
        return (scan("lineitem")
                .filter(pl.col("l_shipdate") <= dt.date(1998, 9, 2))
                .group_by("l_returnflag", "l_linestatus")
                .agg(sum_qty=pl.col("l_quantity").sum(),
                     sum_base_price=pl.col("l_extendedprice").sum(),
                     sum_disc_price=revenue().sum(),
                     sum_charge=(price(6) * (1 - pl.col("l_discount")) * (1 + pl.col("l_tax"))).sum(),
                     avg_qty=pl.col("l_quantity").cast(pl.Float64).mean(),
                     avg_price=pl.col("l_extendedprice").cast(pl.Float64).mean(),
                     avg_disc=pl.col("l_discount").cast(pl.Float64).mean(),
                     count_order=pl.len())
                .sort("l_returnflag", "l_linestatus"))

    def q3():
        customer = scan("customer").filter(pl.col("c_mktsegment") == "BUILDING")
        orders = scan("orders").filter(pl.col("o_orderdate") < dt.date(1995, 3, 15))
        lineitem = scan("lineitem").filter(pl.col("l_shipdate") > dt.date(1995, 3, 15))
        return (customer
                .join(orders, left_on="c_custkey", right_on="o_custkey")
                .join(lineitem, left_on="o_orderkey", right_on="l_orderkey")
                .group_by(pl.col("o_orderkey").alias("l_orderkey"), "o_orderdate", "o_shippriority")
                .agg(revenue=revenue().sum())
                .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
                .sort(["revenue", "o_orderdate"], descending=[True, False])
                .head(10))

    def q5():
        nation = scan("nation").join(scan("region").filter(pl.col("r_name") == "ASIA"),
                                     left_on="n_regionkey", right_on="r_regionkey")
        orders = scan("orders").filter(pl.col("o_orderdate").is_between(dt.date(1994, 1, 1), dt.date(1995, 1, 1),
                                                                        closed="left"))
        return (scan("customer")
                .join(orders, left_on="c_custkey", right_on="o_custkey")
                .join(scan("lineitem"), left_on="o_orderkey", right_on="l_orderkey")
                .join(scan("supplier"), left_on=["l_suppkey", "c_nationkey"], right_on=["s_suppkey", "s_nationkey"])
                .join(nation, left_on="c_nationkey", right_on="n_nationkey")
                .group_by("n_name")
                .agg(revenue=revenue().sum())
                .sort("revenue", descending=True))

    def q6():
        return (scan("lineitem")
                .filter(pl.col("l_shipdate").is_between(dt.date(1994, 1, 1), dt.date(1995, 1, 1), closed="left")
                        & pl.col("l_discount").is_between(Decimal("0.05"), Decimal("0.07"))
                        & (pl.col("l_quantity") < 24))
                .select(revenue=(price(4) * pl.col("l_discount")).sum()))

    def q10():
        orders = scan("orders").filter(pl.col("o_orderdate").is_between(dt.date(1993, 10, 1), dt.date(1994, 1, 1),
                                                                        closed="left"))
        return (scan("customer")
                .join(orders, left_on="c_custkey", right_on="o_custkey")
                .join(scan("lineitem").filter(pl.col("l_returnflag") == "R"),
                      left_on="o_orderkey", right_on="l_orderkey")
                .join(scan("nation"), left_on="c_nationkey", right_on="n_nationkey")
                .group_by("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
                .agg(revenue=revenue().sum())
                .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone", "c_comment")
                .sort("revenue", descending=True)
                .head(20))

    return {"q1": q1, "q3": q3, "q5": q5, "q6": q6, "q10": q10}


# ---------------------------------------------------------------- timing

def timed(variants: dict[str, object], runs: int) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Each variant once to warm up (file cache, imports), then `runs` rounds in which every
    variant runs once, in turn: on a shared, noisy machine all variants see the same load."""
    results, times, failed = {}, {label: [] for label in variants}, {}
    for label, fn in variants.items():
        try:
            results[label] = fn()
        except ei.errors.EidosError as e:
            failed[label] = e
    for _ in range(runs):
        for label, fn in variants.items():
            if label in failed:
                continue
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    for label, e in failed.items():
        results[label] = e
        del times[label]
    return times, results


def planning_times(flow: ei.Flow, lanes: list[str], runs: int = 50) -> dict[str, float]:
    """Median seconds of planner.decide (auto, and engine=lane) and of each lane's translation."""
    from eidos.hal import planner

    def med(fn) -> float:
        fn()
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    out = {"decide auto": med(lambda: planner.decide(flow.plan))}
    for lane in lanes:
        decision = planner.decide(flow.plan, lane)
        out[f"decide {lane}"] = med(lambda: planner.decide(flow.plan, lane))
        step, first = translation(lane)
        if step is not None:
            out[f"translate {lane}"] = med(lambda: step(decision.plan))
        if first is not None:
            out[f"translate {lane} (first run)"] = med(lambda: first(decision.plan))
    return out


def translation(lane: str):
    """(what each run pays to translate the plan to the lane's form, the uncached translation where
    the lane caches it, else None); (None, None) where the lane exposes no translate step."""
    try:
        if lane == "polars":
            from eidos.lanes.polars.translate import to_lazyframe

            return to_lazyframe, None
        if lane in ("duckdb", "sqlite", "postgresql"):
            from eidos.lanes.sql.execute import dialect, prepare
            from eidos.lanes.sql.translate import to_sql

            d = dialect(lane)
            return (lambda plan: prepare(lane, plan)), (lambda plan: to_sql(plan, d))
    except ImportError:
        return None, None
    return None, None


# ---------------------------------------------------------------- checking

def same(result, expected, *, native: bool = False) -> str:
    """'ok', or the first line of the difference. A native engine's own result types (decimal
    precision, string views) are cast to the answer's first: only its values are checked."""
    from eidos.testing.compare import assert_tables_equal

    try:
        if native:
            result = result.cast(expected.schema)
        assert_tables_equal(result, expected, ordered=True, float_rel=1e-9)
    except AssertionError as e:
        return "DIFFERS: " + str(e).splitlines()[0]
    return "ok"


def eidos_sql(flow: ei.Flow) -> str:
    """The SQL the duckdb lane runs for `flow` (its sources are files: nothing to register)."""
    from eidos.hal import planner
    from eidos.lanes.sql.execute import prepare

    return prepare("duckdb", planner.decide(flow.plan, "duckdb").plan).sql


def native_duckdb_answer(con, name: str, data: str):
    return con.sql(tpch_sql.over_parquet(name, data)).to_arrow_table()


# ---------------------------------------------------------------- main

def _ms(plan: dict[str, float], lane: str) -> str:
    """decide(engine=lane) + translate, in ms ('decide only' where the lane exposes no translate step)."""
    total = plan[f"decide {lane}"] + plan.get(f"translate {lane}", 0.0)
    return f"{total * 1e3:.3f}" + ("" if f"translate {lane}" in plan else " (decide)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--data", default=None, help="folder of <table>.parquet (default bench/data/tpch-sf<scale>)")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--queries", nargs="*", default=list(QUERIES))
    a = p.parse_args(argv)
    scale_text = f"{a.scale:g}"
    data = a.data or str(ROOT / "bench" / "data" / f"tpch-sf{scale_text}")
    try:
        start = time.perf_counter()
        tpch_data.ensure(a.scale, data, level=3)
        print(f"data: {data} ({time.perf_counter() - start:.1f} s to check/generate)")
    except tpch_data.GeneratorMissing as e:
        print(e, file=sys.stderr)
        return 2

    import duckdb
    import polars as pl

    available = {info.name: info for info in ei.backends()}
    lanes = [lane for lane in LANES if lane in available and available[lane].available]
    for lane in LANES:
        if lane not in lanes:
            why = available[lane].reason if lane in available else "not registered"
            print(f"lane {lane}: skipped ({why})")
    con = duckdb.connect()
    natives = polars_queries(data)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"polars {pl.__version__}, duckdb {duckdb.__version__}, eidos {ei.__version__}; runs={a.runs}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    header = (f"{'query':6} {'what':14} {'min s':>8} {'median s':>9}  check")
    rows = []
    for name in a.queries:
        flow = QUERIES[name](data)
        print(f"\n{name}\n{header}")
        variants = {"duckdb native": lambda: native_duckdb_answer(con, name, data),
                    "polars native": lambda: natives[name]().collect().to_arrow()}
        if "duckdb" in lanes:
            # The lane's own SQL on the bench's open connection: eidos duckdb / this is what the lane
            # adds per run; this / duckdb native is what eidos semantics cost in SQL (exact float
            # sums, checked arithmetic, row order).
            lane_sql = eidos_sql(flow)
            variants["duckdb eidos-SQL"] = lambda: con.sql(lane_sql).to_arrow_table()
        for lane in [*lanes, None]:
            variants[f"eidos {lane or 'auto'}"] = (lambda lane=lane: flow.run(engine=lane, strict=lane is not None))
        times, results = timed(variants, a.runs)
        expected = results["duckdb native"]
        auto_lane = ei.last_run().lane if ei.last_run() else "?"
        medians = {k: statistics.median(v) for k, v in times.items()}
        mins = {k: min(v) for k, v in times.items()}
        for label, res in results.items():
            if isinstance(res, Exception):
                print(f"{name:6} {label:14} failed: {type(res).__name__}: {str(res).splitlines()[0]}")
                continue
            if label == "duckdb native":
                check = "(answer)"
            elif label == "duckdb eidos-SQL":
                check = "(the lane's SQL, positional columns)"
            else:
                check = same(res, expected, native=label.endswith("native"))
            if label == "eidos auto":
                check += f" (ran on {auto_lane})"
            print(f"{name:6} {label:14} {mins[label]:8.4f} {medians[label]:9.4f}  {check}")
        plan = planning_times(flow, lanes)
        rows.append((name, mins, medians, plan))
        print("planning + translation (median): "
              + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in plan.items()))

    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("summary (ratios of medians; min-based in parentheses)")
    cols = ["polars/native", "duckdb/native", "duckdb/its SQL", "auto/best lane"]
    print(f"{'query':6} " + " ".join(f"{c:>22}" for c in cols) + f" {'decide ms (auto)':>17}"
          + "".join(f" {'+translate ' + lane:>20}" for lane in lanes))
    for name, mins, medians, plan in rows:
        cells = []
        for lane in ("polars", "duckdb"):
            key = f"eidos {lane}"
            if key in medians:
                cells.append(f"{medians[key] / medians[f'{lane} native']:.2f} ({mins[key] / mins[f'{lane} native']:.2f})")
            else:
                cells.append("n/a")
        if "duckdb eidos-SQL" in medians and "eidos duckdb" in medians:
            cells.append(f"{medians['eidos duckdb'] / medians['duckdb eidos-SQL']:.2f} "
                         f"({mins['eidos duckdb'] / mins['duckdb eidos-SQL']:.2f})")
        else:
            cells.append("n/a")
        lane_keys = [f"eidos {lane}" for lane in lanes if f"eidos {lane}" in medians]
        if "eidos auto" in medians and lane_keys:
            best_med = min(medians[k] for k in lane_keys)
            best_min = min(mins[k] for k in lane_keys)
            cells.append(f"{medians['eidos auto'] / best_med:.2f} ({mins['eidos auto'] / best_min:.2f})")
        else:
            cells.append("n/a")
        print(f"{name:6} " + " ".join(f"{c:>22}" for c in cells) + f" {plan['decide auto'] * 1e3:17.3f}"
              + "".join(f" {_ms(plan, lane):>20}" for lane in lanes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

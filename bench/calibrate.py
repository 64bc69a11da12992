"""Cost models that know the machine (issue 17, item 3): `eidos calibrate` here, and what it changes.

    python bench/calibrate.py [--rows 10000000] [--runs 3] [--keep]

1. `eidos calibrate`'s wall time, and each constant: the shipped default, the default scaled to this machine,
   and the value measured here.
2. Group counts: the groups the planner's row flow gives a group_by over 16 and over 1M distinct keys
   (parquet and in-memory Arrow, --rows rows), before (a tenth of the rows) and after (eidos.hal.distinct),
   beside the true count from native Polars (n_unique) and the time each took.
3. Estimated against measured seconds: grouped flows on the polars and duckdb lanes, each lane's estimate
   with the default constants and with the constants measured in (1), beside the lane's measured run
   (min / median of --runs) and the native engine's.

Runs in a cache folder of its own (the user's costs.json is left alone) unless --keep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1] / "src")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import eidos as ei  # noqa: E402
from eidos import col  # noqa: E402


def timed(fn, runs: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def calibrate_table() -> dict:
    t = time.perf_counter()
    result = ei.calibrate()
    wall = time.perf_counter() - t
    m = result["machine"]
    print(f"## eidos calibrate: {wall:.1f} s wall ({result['seconds']:.1f} s inside), {m}, "
          f"one-thread copy {m.bandwidth / 1e9:.1f} GB/s")
    print("\n| lane | constant | default (2-vCPU VM fit) | default scaled here | measured here | measured / default |")
    print("|---|---|---:|---:|---:|---:|")
    for lane, values in result["lanes"].items():
        for k, v in values.items():
            d, s = result["defaults"][lane][k], result["scaled"][lane][k]
            print(f"| {lane} | {k} | {d:.3g} | {s:.3g} | {v:.3g} | {v / d:.2f} |")
    for lane, why in result["skipped"].items():
        print(f"\nskipped {lane}: {why}")
    return result


def groups_table(rows: int, folder: str) -> dict[str, pa.Table]:
    import polars as pl

    from eidos.hal.cost import RowFlow, rows_out

    rng = np.random.default_rng(0)
    tables = {n: pa.table({"k": rng.integers(0, n, rows), "x": rng.random(rows)}) for n in (16, 1_000_000)}
    guess = RowFlow("guess", 0, {"other": 1.0}, 0, 0, 0)
    print(f"\n## Group counts, {rows:,} rows: the row flow's groups against the true count (native Polars n_unique)")
    print("\n| keys | source | true (native) | native s | before (rows / 10) | before / true | after | after / true "
          "| after's first estimate s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, table in tables.items():
        path = os.path.join(folder, f"k{n}.parquet")
        pq.write_table(table, path)
        frame = pl.from_arrow(table)
        t = time.perf_counter()
        true = frame["k"].n_unique()
        native = time.perf_counter() - t
        for where, flow in (("parquet", ei.read_parquet(path)), ("arrow", ei.from_arrow(table))):
            plan = flow.group_by("k").agg(s=col("x").sum()).plan.optimized
            t = time.perf_counter()
            after = rows_out(plan, guess)
            first = time.perf_counter() - t
            before = rows * 0.1
            print(f"| {n:,} | {where} | {true:,} | {native:.3f} | {before:,.0f} | {before / true:.2f} | {after:,.0f} | "
                  f"{after / true:.2f} | {first:.3f} |")
    return tables


def estimates_table(tables: dict[str, pa.Table], runs: int, result: dict) -> None:
    import duckdb
    import polars as pl

    from eidos.lanes.polars import cost as polars_cost
    from eidos.lanes.sql import cost as duckdb_cost

    models = {"polars": polars_cost.DEFAULTS, "duckdb": duckdb_cost.DEFAULTS}
    print(f"\n## Estimated against measured seconds ({runs} runs, min / median)")
    print("\n| flow | lane | estimate, defaults | estimate, measured constants | lane measured | native measured "
          "| defaults / lane | measured constants / lane |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for n, table in tables.items():
        flows = {f"group_by k ({n:,} keys): int sum, count": ei.from_arrow(table).group_by("k").agg(
                     s=(col("x") * 100).cast(ei.Int64).sum(), c=ei.count()),
                 f"filter, group_by k ({n:,} keys): float sum": ei.from_arrow(table).filter(col("x") > 0.5)
                 .group_by("k").agg(s=col("x").sum())}
        frame = pl.from_arrow(table)
        con = duckdb.connect()
        con.register("t", table)
        natives = {"polars": [lambda: frame.group_by("k").agg((pl.col("x") * 100).cast(pl.Int64).sum(), pl.len()),
                              lambda: frame.filter(pl.col("x") > 0.5).group_by("k").agg(pl.col("x").sum())],
                   "duckdb": [lambda: con.sql("select k, sum(cast(x * 100 as bigint)), count(*) from t group by k").arrow(),
                              lambda: con.sql("select k, sum(x) from t where x > 0.5 group by k").arrow()]}
        for i, (name, flow) in enumerate(flows.items()):
            plan = flow.plan.optimized
            for lane, defaults in models.items():
                if lane not in result["lanes"]:
                    continue
                d = defaults.estimate(plan, defaults.values).seconds
                m = defaults.estimate(plan, {**defaults.values, **result["lanes"][lane]}).seconds
                lo, med = timed(lambda flow=flow, lane=lane: flow.run(engine=lane), runs)
                nlo, nmed = timed(natives[lane][i], runs)
                print(f"| {name} | {lane} | {d:.3f} | {m:.3f} | {lo:.3f} / {med:.3f} | {nlo:.3f} / {nmed:.3f} | "
                      f"{d / lo:.2f} | {m / lo:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="write the measured constants to the user's cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eidos-bench-calibrate-") as folder:
        if not args.keep:
            os.environ["EIDOS_CACHE_DIR"] = os.path.join(folder, "cache")
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}, `python bench/calibrate.py "
              f"--rows {args.rows} --runs {args.runs}`")
        result = calibrate_table()
        tables = groups_table(args.rows, folder)
        estimates_table(tables, args.runs, result)


if __name__ == "__main__":
    main()

"""Exact float sums (issue 17, item 1): a correctly rounded sum through eidos (polars lane, duckdb lane,
auto) beside the engines' own inexact sums (native Polars, native DuckDB), in the same run; in full
mode also NumPy, math.fsum, the kernel alone (eidos.hal.fsum.sums) and the physical limit: reading
the column once with every core (NumPy sums of one slice per thread).

    python bench/exact.py [--rows 10000000 100000000] [--runs 5] [--keys 16 1000000] [--strings] [--table]

Queries: `agg(s=col("x").sum())` and `group_by("k").agg(s=col("x").sum())` for each --keys, over
standard normal float64 values (keys uniform int64); --strings adds 16 string keys and two integer
keys (4 x 4). Every eidos answer is checked bit for bit: against math.fsum (global, full mode) or
the kernel's sums (grouped, and global with --table). Prints one table per query (min and median
seconds, CPU seconds of the whole process, and each median's ratio to the fastest native median),
then the summary: each eidos lane's median over the fastest native median, per query and size.
--table runs only what the summary needs (the natives and the eidos lanes), 3 runs unless --runs.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1] / "src")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402

import eidos as ei  # noqa: E402
from eidos.hal import fsum  # noqa: E402


def timed(fn, runs: int) -> tuple[float, float, float, object]:
    """(min s, median s, median CPU s of the process: what a loaded machine inflates least, output)."""
    out, times, cpu = None, [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(times), statistics.median(times), statistics.median(cpu), out


def read_pass(x: np.ndarray):
    """Every core reads its slice once (NumPy's sum releases the GIL): the memory-bandwidth floor."""
    parts = np.array_split(x, os.cpu_count() or 1)
    pool = ThreadPoolExecutor(len(parts))
    return lambda: sum(pool.map(np.sum, parts))


def grouped_want(table: pa.Table, keys: list[str]) -> dict:
    """Each group's correctly rounded sum by the kernel over the rows sorted by key (segments)."""
    codes = np.zeros(table.num_rows, np.int64)
    for k in keys:
        c = table.column(k).combine_chunks().dictionary_encode().indices.to_numpy()
        codes = codes * (int(c.max()) + 1) + c
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    offsets = np.concatenate(([0], np.flatnonzero(np.diff(sorted_codes)) + 1, [len(codes)]))
    firsts = order[offsets[:-1]]
    sums = fsum.sums(table.column("x").to_numpy()[order], offsets).tolist()
    tuples = zip(*(table.column(k).take(pa.array(firsts)).to_pylist() for k in keys))
    return dict(zip(tuples, sums))


def run_size(rows: int, args, summary: list) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(rows)
    cols = {"x": x, **{f"k{g}": rng.integers(0, g, rows) for g in args.keys}}
    if args.strings:
        words = np.array([f"key-{i:02d}" for i in range(16)], dtype=object)
        cols |= {"w": pa.array(words[rng.integers(0, 16, rows)], pa.large_string()),
                 "a": rng.integers(0, 4, rows), "b": rng.integers(0, 4, rows)}
    table = pa.table(cols)
    df = pl.from_arrow(table)
    con = duckdb.connect()
    con.register("t", table)
    flow = ei.from_arrow(table)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    print(f"\n# {rows:,} float64 rows, {args.runs} runs, {os.cpu_count()} cores, load average {' '.join(load)}")
    fsum.sums(x[:10])  # compile (or load) the kernels outside the timings

    queries = [("global", [])] + [(f"{g:,} keys", [f"k{g}"]) for g in args.keys]
    if args.strings:
        queries += [("16 string keys", ["w"]), ("4 x 4 keys (two columns)", ["a", "b"])]
    for name, keys in queries:
        if not keys:
            want = math.fsum(x) if not args.table else fsum.total([x])
            q = flow.agg(s=ei.col("x").sum())
            cases = {"native Polars sum": lambda: df.select(pl.col("x").sum()),
                     "native DuckDB sum": lambda: con.sql("SELECT sum(x) FROM t").fetchall()}
            if not args.table:
                cases |= {"NumPy x.sum()": lambda: x.sum(), "read pass, every core": read_pass(x),
                          "kernel (hal.fsum.sums)": lambda: fsum.sums(x)}
        else:
            want = grouped_want(table, keys)
            q = flow.group_by(*keys).agg(s=ei.col("x").sum())
            listed = ", ".join(keys)
            cases = {"native Polars sum": lambda keys=keys: df.group_by(*keys).agg(pl.col("x").sum()),
                     "native DuckDB sum": lambda listed=listed: con.sql(f"SELECT {listed}, sum(x) FROM t GROUP BY {listed}").fetchall()}
        small = ei.from_arrow(table.slice(0, 5000))   # load each lane's kernels outside the timings
        for lane in ("polars", "duckdb"):
            (small.agg(s=ei.col("x").sum()) if not keys else small.group_by(*keys).agg(s=ei.col("x").sum())).run(engine=lane)
        cases |= {f"eidos {lane}": (lambda lane=lane, q=q: q.run(engine=lane)) for lane in ("polars", "duckdb")}
        cases["eidos auto"] = lambda q=q: q.run()
        results = {label: timed(fn, args.runs) for label, fn in cases.items()}
        if not keys and not args.table:
            results["math.fsum"] = timed(lambda: math.fsum(x), 1)
        for label, (_, _, _, out) in results.items():
            if label.startswith("eidos"):
                got = out.column("s").to_pylist()
                ok = got == [want] if not keys else dict(zip(zip(*(out.column(k).to_pylist() for k in keys)), got)) == want
                assert ok, f"{label}: not the correctly rounded sum"
        best = min(results[k][1] for k in results if k.startswith("native"))
        auto = q.explain().split("\n")[0].split()[1]
        print(f"\n{name}: fastest native median {best:.4f} s (auto chose {auto})")
        print("| run | min s | median s | CPU s | median / fastest native |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, (lo, med, cpu, _) in results.items():
            extra = f" ({x.nbytes / med / 1e9:.1f} GB/s)" if label == "read pass, every core" else ""
            print(f"| {label}{extra} | {lo:.4f} | {med:.4f} | {cpu:.4f} | {med / best:.2f}x |")
        summary.append((rows, name, best, {k: results[k][1] / best for k in results if k.startswith("eidos")}, auto))
        del results, cases
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000_000])
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--keys", type=int, nargs="*", default=[16, 1_000_000])
    ap.add_argument("--strings", action="store_true", help="also 16 string keys and two integer keys")
    ap.add_argument("--table", action="store_true", help="only the natives and the eidos lanes (the summary)")
    args = ap.parse_args()
    args.runs = args.runs or (3 if args.table else 5)
    summary: list = []
    for rows in args.rows:
        run_size(rows, args, summary)
    print("\n## Summary: median / fastest native median (the same run)")
    print("| rows | query | fastest native s | eidos polars | eidos duckdb | eidos auto (lane) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for rows, name, best, ratios, auto in summary:
        print(f"| {rows:,} | {name} | {best:.4f} | {ratios['eidos polars']:.2f}x | {ratios['eidos duckdb']:.2f}x "
              f"| {ratios['eidos auto']:.2f}x ({auto}) |")


if __name__ == "__main__":
    main()

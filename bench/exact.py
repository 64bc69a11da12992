"""Exact float sums (issue 17, item 1): a correctly rounded sum through eidos (polars lane, duckdb lane,
auto) beside the engines' own inexact sums (native Polars, native DuckDB, NumPy), math.fsum, the kernel
alone (eidos.hal.fsum.sums) and the physical limit: reading the column once with every core (NumPy sums
of one slice per thread), in the same run.

    python bench/exact.py [--rows 10000000] [--runs 5] [--keys 16 1000000]

Queries: `agg(s=col("x").sum())` and `group_by("k").agg(s=col("x").sum())` for each --keys, over
standard normal float64 values (keys uniform). Every eidos answer is checked bit for bit against
math.fsum (global) or the kernel's per-group sums. Prints one table per query: min and median seconds
and each median's ratio to the fastest native sum's median.
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


def timed(fn, runs: int) -> tuple[float, float, object]:
    out, times = None, []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), out


def read_pass(x: np.ndarray):
    """Every core reads its slice once (NumPy's sum releases the GIL): the memory-bandwidth floor."""
    parts = np.array_split(x, os.cpu_count() or 1)
    pool = ThreadPoolExecutor(len(parts))
    return lambda: sum(pool.map(np.sum, parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keys", type=int, nargs="*", default=[16, 1_000_000])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.rows)
    table = pa.table({"x": x, **{f"k{g}": rng.integers(0, g, args.rows) for g in args.keys}})
    df = pl.from_arrow(table)
    con = duckdb.connect()
    con.register("t", table)
    flow = ei.from_arrow(table)
    print(f"# {args.rows:,} float64 rows, {args.runs} runs, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    fsum.sums(x[:10])  # compile (or load) the kernels outside the timings

    queries = [("global", None)] + [(f"{g:,} keys", f"k{g}") for g in args.keys]
    for name, key in queries:
        if key is None:
            want = math.fsum(x)
            q = flow.agg(s=ei.col("x").sum())
            cases = {
                "native Polars sum": lambda: df.select(pl.col("x").sum()),
                "native DuckDB sum": lambda: con.sql("SELECT sum(x) FROM t").fetchall(),
                "NumPy x.sum()": lambda: x.sum(),
                "read pass, every core": read_pass(x),
                "kernel (hal.fsum.sums)": lambda: fsum.sums(x),
            }
        else:
            order = np.argsort(table.column(key).to_numpy(), kind="stable")
            keys = table.column(key).to_numpy()[order]
            offsets = np.concatenate(([0], np.flatnonzero(np.diff(keys)) + 1, [len(keys)]))
            want = dict(zip(keys[offsets[:-1]].tolist(), fsum.sums(x[order], offsets).tolist()))
            q = flow.group_by(key).agg(s=ei.col("x").sum())
            cases = {
                "native Polars sum": lambda key=key: df.group_by(key).agg(pl.col("x").sum()),
                "native DuckDB sum": lambda key=key: con.sql(f"SELECT {key}, sum(x) FROM t GROUP BY {key}").fetchall(),
            }
        cases |= {f"eidos {lane}": (lambda lane=lane, q=q: q.run(engine=lane)) for lane in ("polars", "duckdb")}
        cases["eidos auto"] = lambda q=q: q.run()
        rows = {label: timed(fn, args.runs) for label, fn in cases.items()}
        if key is None:
            rows["math.fsum"] = timed(lambda: math.fsum(x), 1)
        for label, (_, _, out) in rows.items():
            if label.startswith("eidos"):
                got = out.column("s").to_pylist()
                ok = got == [want] if key is None else dict(zip(out.column(key).to_pylist(), got)) == want
                assert ok, f"{label}: not the correctly rounded sum"
        best = min(rows[k][1] for k in rows if k.startswith("native"))
        print(f"\n{name}: fastest native median {best:.4f} s")
        print("| run | min s | median s | median / fastest native |")
        print("| --- | ---: | ---: | ---: |")
        for label, (lo, med, _) in rows.items():
            extra = f" ({x.nbytes / med / 1e9:.1f} GB/s)" if label == "read pass, every core" else ""
            print(f"| {label}{extra} | {lo:.4f} | {med:.4f} | {med / best:.2f}x |")


if __name__ == "__main__":
    main()

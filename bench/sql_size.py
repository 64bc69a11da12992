"""Nested math in SQL (issue 17, item 0): the size of the SQL each SQL lane emits and the time of a run,
beside the polars lane, for `((e.sin() * 1.7 + 0.3).exp() + col("k")).log().tanh()` nested 1..N levels
over two rows.

    python bench/sql_size.py [--levels 3] [--runs 3] [--lanes polars duckdb sqlite postgresql]

The SQL lanes guard exp, log and the trigonometric functions with CASE, which reads the argument
several times; the translation binds such an argument once (a column of a layer below), so the text
grows linearly with the depth. A level whose SQL passes --max-bytes, or whose run passes --max-seconds,
ends that lane's column (the growth this measures was exponential: 2.8 MB of SQL and 21.9 s at 3 levels).
PostgreSQL is read at --pg (default postgresql://postgres@127.0.0.1:5432/test) and skipped if absent.
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

import pyarrow as pa  # noqa: E402

import eidos as ei  # noqa: E402
from eidos.errors import EidosError  # noqa: E402

DATA = pa.table({"x": [0.25, -1.5], "k": [1.0, 2.0]})


def nested(levels: int):
    e = ei.col("x")
    for _ in range(levels):
        e = ((e.sin() * 1.7 + 0.3).exp() + ei.col("k")).log().tanh()
    return e


def sources(lanes, pg: str, folder: str) -> dict:
    from eidos.testing.databases import load_table

    out = {}
    for lane in lanes:
        try:
            if lane in ("polars", "duckdb", "reference"):
                out[lane] = ei.from_arrow(DATA)
            elif lane == "sqlite":
                out[lane] = load_table(f"sqlite:///{os.path.join(folder, 'nest.db')}", "nest", DATA)
            elif lane == "postgresql":
                out[lane] = load_table(pg, "eidos_bench_nest", DATA)
        except Exception as e:  # noqa: BLE001 - an absent server skips its lane, said so
            print(f"# {lane}: skipped ({type(e).__name__}: {e})")
    return out


def sql_bytes(lane: str, flow) -> int:
    from eidos.lanes.sql.execute import dialect
    from eidos.lanes.sql.translate import to_sql

    return len(to_sql(flow.plan, dialect(lane)).sql.encode())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--levels", type=int, default=3)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--lanes", nargs="+", default=["polars", "duckdb", "sqlite", "postgresql"])
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--max-bytes", type=int, default=4_000_000)
    p.add_argument("--max-seconds", type=float, default=60.0)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        flows = sources(a.lanes, a.pg, folder)
        print(f"# {os.cpu_count()} cpus; eidos {ei.__version__ if hasattr(ei, '__version__') else ''}; "
              f"min / median of {a.runs} runs")
        print(f"{'lane':<11} {'levels':>6} {'SQL bytes':>10} {'translate s':>12} {'min s':>9} {'median s':>9}")
        done: set[str] = set()
        answers: dict[int, list] = {}
        for levels in range(1, a.levels + 1):
            for lane, base in flows.items():
                if lane in done:
                    continue
                flow = base.select(y=nested(levels))
                size = tr = None
                if lane not in ("polars", "reference"):
                    t0 = time.perf_counter()
                    size = sql_bytes(lane, flow)
                    tr = time.perf_counter() - t0
                    if size > a.max_bytes:
                        print(f"{lane:<11} {levels:>6} {size:>10} {tr:>12.3f} {'(not run: over --max-bytes)':>19}")
                        done.add(lane)
                        continue
                times = []
                try:
                    for _ in range(a.runs):
                        t0 = time.perf_counter()
                        got = flow.run(engine=lane).column("y").to_pylist()
                        times.append(time.perf_counter() - t0)
                        if times[-1] > a.max_seconds:
                            break
                except EidosError as e:
                    print(f"{lane:<11} {levels:>6} failed: {e}")
                    done.add(lane)
                    continue
                ref = answers.setdefault(levels, got)
                agree = "" if all(abs(u - v) <= 1e-12 * max(1.0, abs(v)) for u, v in zip(got, ref)) else "  DIFFERS"
                shown = f"{size:>10} {tr:>12.3f}" if size is not None else f"{'':>10} {'':>12}"
                print(f"{lane:<11} {levels:>6} {shown} {min(times):>9.4f} {statistics.median(times):>9.4f}{agree}",
                      flush=True)
                if min(times) > a.max_seconds:
                    done.add(lane)


if __name__ == "__main__":
    main()

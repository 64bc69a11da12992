"""What the duckdb lane adds to native DuckDB on TPC-H Q1, Q3, Q5, Q6, Q10, split in two.

    python bench/duckdb_overhead.py [--scale 1] [--runs 9] [--queries q1 q6] [--dump-sql DIR] [--before DIR]

Per query, in rounds in which each variant runs once in turn, each round starting at the next variant (a
shared machine loads all alike):
native DuckDB SQL (the TPC-H text), the lane's own SQL run natively on the same connection, and the
lane end to end (flow.run(engine="duckdb"): planning, the lane's session, registration, Arrow
result, its cast to the plan's types). lane SQL / native is what eidos semantics cost in SQL; end to
end / lane SQL is what the lane adds per run. Wall seconds (min, median) and this process's CPU
seconds (median; DuckDB's threads included, steadier than wall time on a loaded machine).
`--memory` runs the SQL variants over the tables loaded into DuckDB's memory, one thread (parquet
decoding and thread scheduling left out: what the SQL itself costs; no end to end there).
`--dump-sql DIR` writes the lane's SQL per query; `--before DIR` times SQL written so by another
checkout (`git stash`, main) in the same rounds, as "before SQL". Results are checked against native.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # the repository root (examples.tpch), not bench/

import eidos as ei  # noqa: E402
from examples.tpch import data as tpch_data  # noqa: E402
from examples.tpch import sql as tpch_sql  # noqa: E402
from examples.tpch.queries import QUERIES  # noqa: E402

NAMES = ("q1", "q3", "q5", "q6", "q10")


def lane_sql(flow: ei.Flow) -> str:
    from eidos.hal import planner
    from eidos.lanes.sql.execute import prepare

    return prepare("duckdb", planner.decide(flow.plan, "duckdb").plan).sql


def rounds(variants: dict, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """(wall seconds, CPU seconds) per variant: one warm-up each, then `runs` rounds, each starting at the next
    variant (none always runs first, or right after the same one)."""
    for fn in variants.values():
        fn()
    out = {k: ([], []) for k in variants}
    names = list(variants)
    for r in range(runs):
        for k in names[r % len(names):] + names[:r % len(names)]:
            fn = variants[k]
            w, c = time.perf_counter(), time.process_time()
            fn()
            out[k][1].append(time.process_time() - c)
            out[k][0].append(time.perf_counter() - w)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--queries", nargs="*", default=list(NAMES))
    p.add_argument("--dump-sql", default=None)
    p.add_argument("--before", default=None)
    p.add_argument("--memory", action="store_true")
    a = p.parse_args(argv)
    data = str(ROOT / "bench" / "data" / f"tpch-sf{a.scale:g}")
    tpch_data.ensure(a.scale, data, level=3)

    import duckdb
    import pyarrow as pa

    from eidos.testing.compare import assert_tables_equal

    con = duckdb.connect()
    if a.memory:
        con.execute("SET threads = 1")
        for t in tpch_data.TABLES:
            con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{data}/{t}.parquet')")

    def here(text: str) -> str:
        """`text` over the tables in memory (with --memory), else as it is."""
        return re.sub(r"(?i)read_parquet\(\[?'[^']*/(\w+)\.parquet'\]?\)", r"\1", text) if a.memory else text

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, duckdb {duckdb.__version__}, runs={a.runs}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'query':5} {'variant':12} {'min s':>7} {'median s':>8} {'cpu med':>8} {'/native (min, med)':>19}")
    for name in a.queries:
        flow = QUERIES[name](data)
        sql = here(lane_sql(flow))
        if a.dump_sql:
            Path(a.dump_sql).mkdir(parents=True, exist_ok=True)
            Path(a.dump_sql, f"{name}.sql").write_text(lane_sql(flow))
        native = here(tpch_sql.over_parquet(name, data))
        variants = {"native": lambda: con.sql(native).to_arrow_table(),
                    "lane SQL": lambda: con.sql(sql).to_arrow_table()}
        if a.before:
            before = here(Path(a.before, f"{name}.sql").read_text())
            variants["before SQL"] = lambda: con.sql(before).to_arrow_table()
        if not a.memory:
            variants["end to end"] = lambda: flow.run(engine="duckdb", strict=True)
        got, expected = flow.run(engine="duckdb", strict=True), variants["native"]()
        assert_tables_equal(got, expected.cast(got.schema) if isinstance(expected, pa.Table) else expected,
                            ordered=True, float_rel=1e-9)
        times = rounds(variants, a.runs)
        n_min, n_med = min(times["native"][0]), statistics.median(times["native"][0])
        for k, (wall, cpu) in times.items():
            print(f"{name:5} {k:12} {min(wall):7.4f} {statistics.median(wall):8.4f} {statistics.median(cpu):8.4f} "
                  f"{min(wall) / n_min:9.3f} {statistics.median(wall) / n_med:9.3f}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

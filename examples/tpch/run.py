"""Run the 22 TPC-H queries with eidos and print the results.

    python examples/tpch/run.py                       # every query, lane chosen by eidos
    python examples/tpch/run.py --engine duckdb q1 q6 # chosen queries on one lane
    python examples/tpch/run.py --data DIR --explain  # other data; show each plan and lane

--data defaults to the SF 0.01 data shipped in tests/data/tpch-sf0.01. To make
other data: python examples/tpch/data.py --scale 1 --out DIR (needs tpchgen-cli).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):
    sys.path[0] = str(ROOT)  # the repository root, not this folder (its data.py, sql.py)

import eidos as ei  # noqa: E402
from eidos.errors import EidosError  # noqa: E402
from examples.tpch.queries import QUERIES  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="TPC-H queries through eidos.")
    p.add_argument("queries", nargs="*", metavar="QUERY",
                   help=f"which queries ({', '.join(QUERIES)}); all by default")
    p.add_argument("--engine", default=None, help="a lane (reference, polars, duckdb, ...); eidos picks by default")
    p.add_argument("--data", default=str(ROOT / "tests" / "data" / "tpch-sf0.01"),
                   help="folder of <table>.parquet files")
    p.add_argument("--explain", action="store_true", help="print each plan, its lane and why")
    a = p.parse_args(argv)
    unknown = [q for q in a.queries if q not in QUERIES]
    if unknown:
        p.error(f"unknown query {', '.join(unknown)}; choose from {', '.join(QUERIES)}")
    if not (Path(a.data) / "lineitem.parquet").exists():
        p.error(f"no TPC-H data in {a.data}; make some with: python examples/tpch/data.py --scale 0.01 --out {a.data}")
    for name in a.queries or QUERIES:
        try:
            flow = QUERIES[name](a.data)
            if a.explain:
                print(flow.explain(a.engine))
            start = time.perf_counter()
            table = flow.run(engine=a.engine)
            seconds = time.perf_counter() - start
        except EidosError as e:
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        record = ei.last_run()
        print(f"-- {name}: {table.num_rows} rows in {seconds:.3f} s on {record.lane if record else a.engine}")
        print(render(table))
        print()
    return 0


def render(table, limit: int = 25) -> str:
    """The table as aligned text columns (first `limit` rows)."""
    rows = [table.column_names] + [[("" if v is None else str(v)) for v in row.values()]
                                   for row in table.slice(0, limit).to_pylist()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if table.num_rows > limit:
        lines.append(f"... {table.num_rows - limit} more rows")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

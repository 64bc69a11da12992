"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from. Constants, measured on the 2-vCPU development machine:
TPC-H SF1 Q1 (6.0M lineitem rows, about 180 MB of parquet, a filter and 8 aggregations over
10 expressions) takes DuckDB about 0.09 s: 0.002 + 0.18e9 / 4e9 + 6.0e6 x 19 x 0.37e-9 = 0.09.
"""

from __future__ import annotations

import math

from eidos.hal.backend import Estimate
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource, CsvSource, ParquetSource, SqlSource

SETUP_S = 0.002                 # connect, register Arrow tables, parse and plan one statement
SCAN_BYTES_PER_S = {            # reading each kind of source (parquet is compressed: decode cost)
    "parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "sql": 2.0e9,
}
ROW_OP_S = 0.37e-9              # one vectorized operation (an expression node, an aggregate) on one row
JOIN_ROW_S = 6e-9               # hashing and probing one row, build and probe sides
SORT_ROW_S = 1.5e-9             # one row of a sort, times log2(rows)
BYTES_PER_ROW = 60              # when a source knows its size but not its rows
FILTER_KEEPS = 0.5              # rows a filter keeps, lacking statistics
GROUPS_PER_ROW = 0.1            # groups per input row of a keyed aggregation
UNKNOWN_ROWS = 100_000          # a source that knows neither rows nor bytes


def _source(src) -> tuple[float, float, str]:
    rows, nbytes = src.estimated_rows, src.estimated_bytes
    if rows is None and nbytes is not None:
        rows = nbytes / BYTES_PER_ROW
    if rows is None:
        rows = UNKNOWN_ROWS
    if nbytes is None:
        nbytes = rows * BYTES_PER_ROW
    kind = ("parquet" if isinstance(src, ParquetSource) else "csv" if isinstance(src, CsvSource)
            else "arrow" if isinstance(src, ArrowSource) else "sql" if isinstance(src, SqlSource) else "arrow")
    return float(rows), float(nbytes), kind


def _ops(exprs) -> int:
    return sum(sum(1 for _ in e.walk()) for e in exprs)


def _walk(node: N.Node, acc: dict) -> float:
    """Rows out of `node`; adds its seconds to acc['s']."""
    if isinstance(node, N.Scan):
        rows, nbytes, kind = _source(node.source)
        if node.columns is not None and len(node.source.schema):
            nbytes *= len(node.columns) / len(node.source.schema)
        acc["s"] += nbytes / SCAN_BYTES_PER_S[kind]
        acc["rows"] += rows
        return rows
    ins = [_walk(i, acc) for i in node.inputs]
    rows = ins[0] if ins else 0.0
    acc["s"] += rows * ROW_OP_S * _ops(node.expressions())
    if isinstance(node, N.Filter):
        return rows * FILTER_KEEPS
    if isinstance(node, N.Aggregate):
        return max(1.0, rows * GROUPS_PER_ROW) if node.keys else 1.0
    if isinstance(node, N.Join):
        acc["s"] += (ins[0] + ins[1]) * JOIN_ROW_S
        acc["joins"] += 1
        return ins[0] * ins[1] if node.how == "cross" else max(ins)
    if isinstance(node, N.Sort):
        acc["s"] += rows * SORT_ROW_S * math.log2(max(rows, 2.0))
        return rows
    if isinstance(node, N.Limit):
        return min(rows, float(node.n))
    if isinstance(node, N.Union):
        return sum(ins)
    if isinstance(node, N.Distinct):
        acc["s"] += rows * JOIN_ROW_S
        return rows
    return rows


def estimate(plan: N.Node) -> Estimate:
    acc = {"s": SETUP_S, "rows": 0.0, "joins": 0}
    _walk(plan, acc)
    joins = f", {acc['joins']} join{'s' if acc['joins'] != 1 else ''}" if acc["joins"] else ""
    return Estimate(acc["s"], f"duckdb: {acc['rows'] / 1e6:.1f}M input rows{joins} -> {acc['s']:.3f} s")

"""The Polars lane's cost model: seconds from row counts, bytes and the operations in a plan.

    seconds = SETUP_S
            + bytes scanned / SCAN_BYTES_PER_S[format]      (parquet: only the columns read)
            + rows into a node x expression nodes it evaluates x ROW_OP_S (AGG_OP_S in aggregations)
            + rows into a join (both sides) x JOIN_ROW_S, a sort's rows x log2(rows) x SORT_ROW_S
            + Python: rows x UDF_ROW_S per UDF; for each float sum/mean and each std/var (exactly
              rounded: values gathered per group, then math.fsum or NumPy where any order is
              exact) rows x EXACT_ROW_S + groups x EXACT_GROUP_S

Rows flow up the plan as in DuckDB's model (eidos.backends.sql.cost), so the two compare like
with like: a scan gives the source's rows (or bytes / BYTES_PER_ROW), a filter keeps
FILTER_KEEPS, a keyed aggregation GROUPS_PER_ROW of its input (one row without keys), a join
the larger input, limit min(n, rows).

Constants fitted on the 2-vCPU development machine to the anchors in DESIGN.md, TPC-H SF1
(6.0M lineitem rows): Q1 (a filter, then 8 aggregations over 4 groups) Polars 0.28 s, DuckDB
0.09 s; Q6 (a selective filter and one sum) about 0.045 s on both. Polars scans and filters as
fast as DuckDB and aggregates several times slower per expression; it pays a little more to
start (thread pool, query optimisation). With the row flow above this model gives SF1 Q1
0.27 s and Q6 0.067 s (DuckDB's model: 0.084 s and 0.062 s).
"""

from __future__ import annotations

import math

from eidos.hal.backend import Estimate
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir import sources as S
from eidos.ir.typing import infer

SETUP_S = 0.003                 # query optimisation, thread pool wake-up, Arrow export
SCAN_BYTES_PER_S = {            # decoding, per uncompressed byte the source reports
    "parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "other": 1.0e9,
}
ROW_OP_S = 0.15e-9             # one expression node on one row in a filter, projection or sort key
AGG_OP_S = 2.5e-9               # one expression node on one row inside a grouped aggregation
JOIN_ROW_S = 8e-9               # hashing and probing one row, build and probe sides
SORT_ROW_S = 2e-9               # one row of a sort, times log2(rows)
UDF_ROW_S = 1e-6                # a per-row Python function
EXACT_ROW_S = 300e-9            # a float sum/mean/std/var, per value (gathered, then math.fsum)
EXACT_GROUP_S = 2e-6            # the same, per group (a Python loop over the groups)
BYTES_PER_ROW = 60              # when a source knows its size but not its rows
FILTER_KEEPS = 0.5              # rows a filter keeps, lacking statistics
GROUPS_PER_ROW = 0.1            # groups per input row of a keyed aggregation
UNKNOWN_ROWS = 100_000          # a source that knows neither rows nor bytes


def estimate(plan: N.Node) -> Estimate:
    acc = {"s": SETUP_S, "rows": 0.0, "bytes": 0.0}
    out = _walk(plan, acc)
    basis = (f"polars: {acc['rows'] / 1e6:.1f}M input rows, {acc['bytes'] / 1e6:.1f} MB scanned "
             f"-> {acc['s']:.3g} s (~{out:,.0f} rows out)")
    return Estimate(seconds=acc["s"], basis=basis)


def _walk(node: N.Node, acc: dict) -> float:
    """Rows out of `node`; adds its seconds to acc['s']."""
    if isinstance(node, N.Scan):
        rows, nbytes, fmt = _source(node.source)
        if node.columns is not None and fmt == "parquet" and len(node.source.schema):
            nbytes *= len(node.columns) / len(node.source.schema)  # columnar: only what is read
        acc["s"] += nbytes / SCAN_BYTES_PER_S[fmt]
        acc["rows"] += rows
        acc["bytes"] += nbytes
        return rows
    ins = [_walk(n, acc) for n in node.inputs]
    rows = ins[0] if ins else 0.0
    exprs = node.expressions()
    per_op = AGG_OP_S if isinstance(node, N.Aggregate) else ROW_OP_S
    acc["s"] += rows * per_op * sum(sum(1 for _ in e.walk()) for e in exprs)
    acc["s"] += rows * UDF_ROW_S * sum(1 for e in exprs for x in e.walk() if isinstance(x, E.Udf))
    if isinstance(node, N.Filter):
        return rows * FILTER_KEEPS
    if isinstance(node, N.Aggregate):
        groups = max(1.0, rows * GROUPS_PER_ROW) if node.keys else 1.0
        acc["s"] += _exact_aggregations(node) * (rows * EXACT_ROW_S + groups * EXACT_GROUP_S)
        return groups
    if isinstance(node, N.Join):
        acc["s"] += (ins[0] + ins[1]) * JOIN_ROW_S
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


def _exact_aggregations(node: N.Aggregate) -> int:
    """Aggregations that run in NumPy/Python per group: float sum/mean, and every std/var."""
    n = 0
    for _, e in node.aggs:
        for a in e.walk():
            if isinstance(a, E.Agg) and a.arg is not None and a.fn in ("sum", "mean", "std", "var"):
                try:
                    t = infer(a.arg, node.input.schema)
                except Exception:  # noqa: BLE001 - a key read by name: count it as exact
                    t = T.Float64
                n += a.fn in ("std", "var") or t.is_float or t == T.Null
    return n


def _source(source: S.Source) -> tuple[float, float, str]:
    """Rows, bytes and format of a source, each estimated when the source does not say."""
    fmt = {S.ParquetSource: "parquet", S.CsvSource: "csv", S.ArrowSource: "arrow"}.get(type(source), "other")
    rows, nbytes = source.estimated_rows, source.estimated_bytes
    if rows is None and nbytes is not None:
        rows = nbytes / BYTES_PER_ROW
    if rows is None:
        rows = UNKNOWN_ROWS
    if nbytes is None:
        nbytes = rows * BYTES_PER_ROW
    return float(rows), float(nbytes), fmt

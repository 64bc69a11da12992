"""The Polars lane's cost model: seconds from row counts, bytes and the operations in a plan.

    seconds = STARTUP
            + bytes read / SCAN_BYTES_PER_S[format]
            + sum over nodes of (rows into the node / ROWS_PER_S[node kind])
            + sort terms that grow with n log2 n
    + Python terms: per-row UDFs, and the exactly rounded float sums and std/var
      (a NumPy or Python call per group; counted for every sum/mean/std/var, since
      types are not looked up here)

Parquet bytes scale by the fraction of columns the scan reads. Rows flow up the plan: a scan gives the source's row count (or bytes /
BYTES_PER_ROW when only bytes are known), a filter keeps FILTER_SELECTIVITY of
its input, an aggregate with keys keeps GROUP_FRACTION (one row without keys),
a join gives the larger input, limit min(n, rows), distinct DISTINCT_FRACTION.

The constants are fitted to the anchors in DESIGN.md on the 2-vCPU development
machine (TPC-H SF1, 6M lineitem rows: Q1 Polars 0.28 s, Q6 about 0.045 s), so
they order Polars against DuckDB's model rather than predict wall time
anywhere else. Polars is close to DuckDB on scans and filters and slower on
wide grouped aggregation; it has a fixed start-up cost (thread pool, plan
optimisation) that matters for tiny inputs.
"""

from __future__ import annotations

import math

from eidos.hal.backend import Estimate
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir import sources as S

STARTUP = 0.002                      # seconds: plan optimisation and thread pool wake-up
SCAN_BYTES_PER_S = {                 # decoding throughput by source format
    "parquet": 1.5e9, "csv": 0.3e9, "arrow": 20e9, "other": 0.5e9,
}
BYTES_PER_ROW = 100                  # when a source knows its bytes but not its rows
ROWS_PER_S = {                       # per input row, per node kind (vectorised, 2 cores)
    "Scan": 0.0, "Filter": 400e6, "Project": 300e6, "Aggregate": 25e6, "Join": 30e6,
    "Sort": 40e6, "Limit": 0.0, "Distinct": 30e6, "Union": 2e9, "MapBatches": 20e6,
}
PER_EXPRESSION = 0.25                # each extra expression a node evaluates costs this fraction more
SORT_LOG_FACTOR = 1 / 20             # a sort of n rows costs n * log2(n) * this / ROWS_PER_S["Sort"]
UDF_ROWS_PER_S = 1e6                 # a per-row Python function runs at Python speed
EXACT_ROWS_PER_S = 20e6              # float sum/mean (math.fsum) and std/var: NumPy or Python per group
EXACT_PER_GROUP = 10e-6              # seconds of Python call overhead per group for those
FILTER_SELECTIVITY = 0.5
GROUP_FRACTION = 0.01
DISTINCT_FRACTION = 0.5


def estimate(plan: N.Node) -> Estimate:
    total = STARTUP
    rows_in = 0.0
    bytes_in = 0.0
    cache: dict[int, float] = {}

    def rows(node: N.Node) -> float:
        nonlocal total, rows_in, bytes_in
        key = id(node)
        if key in cache:
            return cache[key]
        ins = [rows(n) for n in node.inputs]
        n_in = sum(ins)
        if isinstance(node, N.Scan):
            out, nbytes, fmt = _scan(node.source)
            if node.columns is not None and fmt == "parquet" and len(node.source.schema):
                nbytes *= len(node.columns) / len(node.source.schema)  # columnar: read only what is used
            total += nbytes / SCAN_BYTES_PER_S[fmt]
            rows_in += out
            bytes_in += nbytes
        elif isinstance(node, N.Filter):
            out = n_in * FILTER_SELECTIVITY
        elif isinstance(node, N.Aggregate):
            out = max(1.0, n_in * GROUP_FRACTION) if node.keys else 1.0
        elif isinstance(node, N.Join):
            out = max(ins) if node.how != "cross" else ins[0] * ins[1]
        elif isinstance(node, N.Limit):
            out = min(float(node.n), n_in)
        elif isinstance(node, N.Distinct):
            out = n_in * DISTINCT_FRACTION
        else:
            out = n_in
        speed = ROWS_PER_S[type(node).__name__]
        if speed:
            exprs = node.expressions()
            total += n_in / speed * (1 + PER_EXPRESSION * max(0, len(exprs) - 1))
        if isinstance(node, N.Sort) and n_in > 1:
            total += n_in * math.log2(n_in) * SORT_LOG_FACTOR / ROWS_PER_S["Sort"]
        udfs = sum(1 for x in node.expressions() for e in x.walk() if isinstance(e, E.Udf))
        total += udfs * n_in / UDF_ROWS_PER_S
        if isinstance(node, N.Aggregate):
            exact = sum(1 for x in node.expressions() for e in x.walk()
                        if isinstance(e, E.Agg) and e.fn in ("sum", "mean", "std", "var"))
            total += exact * (n_in / EXACT_ROWS_PER_S + out * EXACT_PER_GROUP)
        cache[key] = out
        return out

    out = rows(plan)
    basis = f"polars: {rows_in:,.0f} rows / {bytes_in / 1e6:,.1f} MB in, ~{out:,.0f} rows out"
    return Estimate(seconds=total, basis=basis)


def _scan(source: S.Source) -> tuple[float, float, str]:
    """Rows, bytes and format of a source, each estimated when the source does not say."""
    fmt = {S.ParquetSource: "parquet", S.CsvSource: "csv", S.ArrowSource: "arrow"}.get(type(source), "other")
    rows, nbytes = source.estimated_rows, source.estimated_bytes
    if rows is None and nbytes is not None:
        rows = nbytes / BYTES_PER_ROW
    if nbytes is None:
        nbytes = (rows or 0) * BYTES_PER_ROW
    return float(rows or 0), float(nbytes), fmt

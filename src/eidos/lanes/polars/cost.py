"""The Polars lane's cost model: seconds from row counts, bytes and the operations in a plan.

    seconds = SETUP_S
            + bytes scanned / SCAN_BYTES_PER_S[format]      (parquet: only the columns read)
            + rows into a node x expression nodes it evaluates x ROW_OP_S (AGG_OP_S in aggregations)
            + rows into a join (both sides) x JOIN_ROW_S, a sort's rows x log2(rows) x SORT_ROW_S
            + Python: rows x UDF_ROW_S per UDF; for each float sum/mean and each std/var (exactly
              rounded: values gathered per group, then math.fsum or NumPy where any order is
              exact) rows x EXACT_ROW_S + groups x EXACT_GROUP_S

Rows flow up the plan as in DuckDB's model: both are eidos.hal.cost's row flow, with
their own constants, so the two compare like with like.

The constants: fitted by bench/tpch.py; see bench/RESULTS.md, section "Where the CPU lanes'
cost constants come from".
"""

from __future__ import annotations

from eidos.hal.cost import RowFlow
from eidos.hal.cost import estimate as row_flow
from eidos.hal.lane import Estimate
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.typing import infer

MODEL = RowFlow(
    lane="polars",
    setup_s=0.5e-3,              # query optimisation, thread pool wake-up, Arrow export
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "other": 1.0e9},  # per uncompressed byte
    row_op_s=0.15e-9,            # one expression node on one row in a filter, projection or sort key
    agg_op_s=1e-9,               # one expression node on one row inside a grouped aggregation
    join_row_s=0.5e-9,           # hashing and probing one row, build and probe sides
    sort_row_s=2e-9,             # one row of a sort, times log2(rows)
    udf_row_s=1e-6,              # a per-row Python function
    columnar=frozenset({"parquet"}),
)
EXACT_ROW_S = 300e-9            # a float sum/mean/std/var, per value (gathered, then math.fsum)
EXACT_GROUP_S = 2e-6            # the same, per group (a Python loop over the groups)


def estimate(plan: N.Node) -> Estimate:
    return row_flow(plan, MODEL, _exact_cost)


def _exact_cost(node: N.Node, rows: float, groups: float) -> float:
    if not isinstance(node, N.Aggregate):
        return 0.0
    return _exact_aggregations(node) * (rows * EXACT_ROW_S + groups * EXACT_GROUP_S)


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

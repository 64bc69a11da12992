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
cost constants come from". `DEFAULTS` holds them as data; the planner uses `in_use(DEFAULTS)`: what
`eidos calibrate` measured here, else these scaled to this machine (eidos.hal.constants).
"""

from __future__ import annotations

from collections.abc import Mapping

from eidos.hal.constants import DEV_VM, Constants, in_use
from eidos.hal.cost import RowFlow, flat, row_flow_model
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


def estimate(plan: N.Node, values: Mapping[str, float] | None = None) -> Estimate:
    label = ""
    if values is None:
        c = in_use(DEFAULTS)
        values, label = c.values, c.source

    def exact(node: N.Node, rows: float, groups: float) -> float:
        if not isinstance(node, N.Aggregate):
            return 0.0
        return _exact_aggregations(node) * (rows * values["exact_row_s"] + groups * values["exact_group_s"])

    return row_flow(plan, row_flow_model(MODEL, values, label), exact)


DEFAULTS = Constants(
    "polars", {**flat(MODEL), "exact_row_s": EXACT_ROW_S, "exact_group_s": EXACT_GROUP_S}, DEV_VM, estimate,
    threaded=frozenset({"row_op_s", "agg_op_s", "join_row_s", "sort_row_s"}),
    host_rates=frozenset({"scan_parquet_bytes_per_s", "scan_csv_bytes_per_s", "scan_arrow_bytes_per_s",
                          "scan_other_bytes_per_s"}),
    probes={"setup": "setup_s", "project": "row_op_s", "parquet": "scan_parquet_bytes_per_s", "group": "agg_op_s",
            "exact": "exact_row_s", "exact_groups": "exact_group_s", "join": "join_row_s", "sort": "sort_row_s"})


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

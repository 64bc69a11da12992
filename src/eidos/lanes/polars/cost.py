"""The Polars lane's cost model: seconds from row counts, bytes and the operations in a plan.

    seconds = SETUP_S
            + bytes scanned / SCAN_BYTES_PER_S[format]      (parquet: only the columns read)
            + rows into a node x expression nodes it evaluates x ROW_OP_S (AGG_OP_S in aggregations)
            + rows into a join (both sides) x JOIN_ROW_S, a sort's rows x log2(rows) x SORT_ROW_S
            + Python: rows x UDF_ROW_S per UDF; for each float sum/mean/std/var (correctly rounded
              by eidos.hal.fsum) rows x EXACT_ROW_S (EXACT_GLOBAL_ROW_S without keys) + groups x
              EXACT_GROUP_S where the Aggregate takes the in-place route (eidos.hal.cost.in_place),
              else rows x EXACT_LIST_ROW_S (each group's values gathered into a list first);
              an integer or decimal std/var rows x PYTHON_ROW_S

Rows flow up the plan as in DuckDB's model: both are eidos.hal.cost's row flow, with
their own constants, so the two compare like with like. Polars runs a plan's joins in the order written,
without join filters: every row a join's inputs make is paid for.

The constants: fitted by bench/tpch.py, `group_s` and `join_row_s` measured by `eidos calibrate` on the quiet
VM; see bench/RESULTS.md, section "Where the CPU lanes' cost constants come from". `DEFAULTS` holds them as data; the planner uses `in_use(DEFAULTS)`: what
`eidos calibrate` measured here, else these scaled to this machine (eidos.hal.constants).
"""

from __future__ import annotations

from collections.abc import Mapping

from eidos.hal.constants import DEV_VM, Constants, values_for
from eidos.hal.cost import (
    EXACT_GLOBAL_ROW_S,
    EXACT_GROUP_S,
    EXACT_ROW_S,
    RowFlow,
    exact_aggregations,
    flat,
    in_place,
    row_flow_model,
)
from eidos.hal.cost import estimate as row_flow
from eidos.hal.lane import Estimate
from eidos.ir import nodes as N

MODEL = RowFlow(
    lane="polars",
    setup_s=0.5e-3,              # query optimisation, thread pool wake-up, Arrow export
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "other": 1.0e9},  # per uncompressed byte
    row_op_s=0.15e-9,            # one expression node on one row in a filter, projection or sort key
    agg_op_s=1e-9,               # one expression node on one row inside a grouped aggregation
    join_row_s=10.5e-9,          # hashing and probing one row, build and probe sides (`eidos calibrate`, quiet VM)
    sort_row_s=2e-9,             # one row of a sort, times log2(rows)
    udf_row_s=1e-6,              # a per-row Python function
    libm_row_s=3e-9,             # one exp on one row, a libm call (eidos.hal.cost.LIBM_WEIGHT for the others)
    group_s=0.08e-6,             # one group of a keyed aggregation (`eidos calibrate` on the quiet VM: 8.09e-8)
    columnar=frozenset({"parquet"}),
)
EXACT_LIST_ROW_S = 60e-9        # an Aggregate the in-place route does not take (a float key, count()
                                # beside the sums): Polars gathers each group's values into a list first
PYTHON_ROW_S = 300e-9           # an integer or decimal std/var, per value (Python's exact integers)


def estimate(plan: N.Node, values: Mapping[str, float] | None = None) -> Estimate:
    values, label = values_for(DEFAULTS, values)

    def exact(node: N.Node, rows: float, groups: float) -> float:
        if not isinstance(node, N.Aggregate):
            return 0.0
        floats, others = exact_aggregations(node)
        if not node.keys:
            per_row = values.get("exact_global_row_s", EXACT_GLOBAL_ROW_S)
        else:
            per_row = values["exact_row_s"] if in_place(node) else values.get("exact_list_row_s", EXACT_LIST_ROW_S)
        return (floats * (rows * per_row + groups * values["exact_group_s"])
                + others * rows * values.get("python_row_s", PYTHON_ROW_S))

    return row_flow(plan, row_flow_model(MODEL, values, label), exact)


DEFAULTS = Constants(
    "polars", {**flat(MODEL), "exact_row_s": EXACT_ROW_S, "exact_group_s": EXACT_GROUP_S,
                "exact_global_row_s": EXACT_GLOBAL_ROW_S, "exact_list_row_s": EXACT_LIST_ROW_S,
                "python_row_s": PYTHON_ROW_S}, DEV_VM, estimate,
    threaded=frozenset({"row_op_s", "agg_op_s", "join_row_s", "sort_row_s", "group_s", "libm_row_s"}),
    host_rates=frozenset({"scan_parquet_bytes_per_s", "scan_csv_bytes_per_s", "scan_arrow_bytes_per_s",
                          "scan_other_bytes_per_s"}),
    probes={"setup": "setup_s", "project": "row_op_s", "libm": "libm_row_s", "parquet": "scan_parquet_bytes_per_s", "group": "agg_op_s",
            "groups": "group_s", "exact": "exact_row_s", "exact_groups": "exact_group_s",
            "exact_global": "exact_global_row_s", "join": "join_row_s", "sort": "sort_row_s"})

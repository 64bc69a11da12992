"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from (the row flow is eidos.hal.cost's, shared with Polars).
The constants: fitted by bench/tpch.py; see bench/RESULTS.md, section "Where the CPU lanes'
cost constants come from". `DEFAULTS` holds them as data; the planner uses `in_use(DEFAULTS)`: what
`eidos calibrate` measured here, else these scaled to this machine (eidos.hal.constants).
"""

from __future__ import annotations

from collections.abc import Mapping

from eidos.hal.constants import DEV_VM, Constants, values_for
from eidos.hal.cost import RowFlow, exact_aggregations, flat, row_flow_model
from eidos.hal.cost import estimate as row_flow
from eidos.hal.lane import Estimate
from eidos.ir import nodes as N

MODEL = RowFlow(
    lane="duckdb",
    setup_s=0.015,               # per run: DuckDB's parse, plan, parquet metadata, thread wake-up; the lane's
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "sql": 2.0e9, "other": 20e9},
    row_op_s=0.37e-9,            # one vectorized operation (an expression node, an aggregate) on one row
    join_row_s=2e-9,             # hashing and probing one row, build and probe sides
    sort_row_s=1.5e-9,           # one row of a sort, times log2(rows)
    group_s=1.2e-6,              # one group of a keyed aggregation (bench/RESULTS.md: measured on the loaded VM)
)


EXACT_ROW_S = 100e-9            # a float sum/mean/std/var, per value: DuckDB's list() of the group, then
                                # eidos.hal.fsum in a vectorized Python function (DuckDB has no exact sum)


def estimate(plan: N.Node, values: Mapping[str, float] | None = None) -> Estimate:
    values, label = values_for(DEFAULTS, values)

    def exact(node: N.Node, rows: float, groups: float) -> float:
        if not isinstance(node, N.Aggregate):
            return 0.0
        return exact_aggregations(node)[0] * rows * values.get("exact_row_s", EXACT_ROW_S)

    return row_flow(plan, row_flow_model(MODEL, values, label), exact)


DEFAULTS = Constants(
    "duckdb", {**flat(MODEL), "exact_row_s": EXACT_ROW_S}, DEV_VM, estimate,
    threaded=frozenset({"row_op_s", "join_row_s", "sort_row_s", "group_s"}),
    host_rates=frozenset({"scan_parquet_bytes_per_s", "scan_csv_bytes_per_s", "scan_arrow_bytes_per_s",
                          "scan_other_bytes_per_s"}),
    probes={"setup": "setup_s", "project": "row_op_s", "parquet": "scan_parquet_bytes_per_s", "groups": "group_s",
            "exact": "exact_row_s", "join": "join_row_s", "sort": "sort_row_s"})

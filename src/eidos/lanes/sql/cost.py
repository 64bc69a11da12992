"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from (the row flow is eidos.hal.cost's, shared with Polars).
The constants: fitted by bench/tpch.py; see bench/RESULTS.md, section "Where the CPU lanes'
cost constants come from".
"""

from __future__ import annotations

from eidos.hal.cost import RowFlow
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
)


def estimate(plan: N.Node) -> Estimate:
    return row_flow(plan, MODEL)

"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from (the row flow is eidos.hal.cost's, shared with Polars). Constants, measured on the 2-vCPU development machine:
TPC-H SF1 Q1 (6.0M lineitem rows, about 180 MB of parquet, a filter and 8 aggregations over
10 expressions) takes native DuckDB about 0.09 s: 0.18e9 / 4e9 + 6.0e6 x 19 x 0.37e-9 = 0.087,
plus setup_s, the fixed cost per run (DuckDB's own and the lane's; see MODEL).
"""

from __future__ import annotations

from eidos.hal.lane import Estimate
from eidos.hal.cost import RowFlow
from eidos.hal.cost import estimate as row_flow
from eidos.ir import nodes as N

MODEL = RowFlow(
    lane="duckdb",
    # The fixed cost per run: DuckDB's own (parse, plan, parquet metadata, waking its threads: 3-9 ms
    # at TPC-H SF 0.01) plus the lane's, now about 1 ms since the lane keeps its connection and its
    # translations (it was 60-90 ms with a new connection and a fresh translation per run). Fit with
    # join_row_s, and the polars lane's aggregation and join costs, to the quiet VM's TPC-H SF1 run
    # of 2026-11-26 07:26 (native DuckDB, which the lane now matches): Q1 0.119, Q3 0.111, Q5 0.115,
    # Q6 0.064 s (min of 7); the model gives 0.102, 0.088, 0.125, 0.078.
    setup_s=0.015,
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "sql": 2.0e9, "other": 20e9},
    row_op_s=0.37e-9,            # one vectorized operation (an expression node, an aggregate) on one row
    join_row_s=2e-9,             # hashing and probing one row, build and probe sides
    sort_row_s=1.5e-9,           # one row of a sort, times log2(rows)
)


def estimate(plan: N.Node) -> Estimate:
    return row_flow(plan, MODEL)

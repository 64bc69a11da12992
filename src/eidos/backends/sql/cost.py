"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from (the row flow is eidos.hal.cost's, shared with Polars). Constants, measured on the 2-vCPU development machine:
TPC-H SF1 Q1 (6.0M lineitem rows, about 180 MB of parquet, a filter and 8 aggregations over
10 expressions) takes native DuckDB about 0.09 s: 0.18e9 / 4e9 + 6.0e6 x 19 x 0.37e-9 = 0.087, and
the lane adds its fixed cost per run (setup_s).
"""

from __future__ import annotations

from eidos.hal.backend import Estimate
from eidos.hal.cost import RowFlow
from eidos.hal.cost import estimate as row_flow
from eidos.ir import nodes as N

MODEL = RowFlow(
    lane="duckdb",
    # The lane's fixed cost per run as it stands: a new connection (~40 ms), the sqlglot translation
    # (3-9 ms for TPC-H) and Arrow registration; measured on the quiet VM, TPC-H SF1, 2026-11-26 03:37
    # (eidos duckdb minus native DuckDB: 60-90 ms). Re-measure when the lane keeps its connection.
    setup_s=0.07,
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "sql": 2.0e9, "other": 20e9},
    row_op_s=0.37e-9,            # one vectorized operation (an expression node, an aggregate) on one row
    join_row_s=6e-9,             # hashing and probing one row, build and probe sides
    sort_row_s=1.5e-9,           # one row of a sort, times log2(rows)
)


def estimate(plan: N.Node) -> Estimate:
    return row_flow(plan, MODEL)

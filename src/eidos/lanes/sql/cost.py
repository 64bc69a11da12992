"""DuckDB's cost model: seconds = setup + bytes scanned / scan rate + rows x work per row.

Deliberately simple, so the planner can compare it with the Polars lane's and explain() can
show where the figure came from (the row flow is eidos.hal.cost's, shared with Polars). One difference in
kind: DuckDB orders a plan's joins and filters each join's inputs by the keys the other keeps (its join filter
pushdown), so the row flow's `join_filters` charges the work below a join only on the rows it keeps.
The constants: fitted by bench/tpch.py, `group_s` and `join_row_s` measured by `eidos calibrate` on the quiet
VM; see bench/RESULTS.md, section "Where the CPU lanes' cost constants come from". `DEFAULTS` holds them as data; the planner uses `in_use(DEFAULTS)`: what
`eidos calibrate` measured here, else these scaled to this machine (eidos.hal.constants).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from eidos.hal.constants import DEV_VM, Constants, values_for
from eidos.hal.cost import (
    EXACT_GLOBAL_ROW_S,
    EXACT_GROUP_S,
    EXACT_ROW_S,
    RowFlow,
    exact_aggregations,
    flat,
    row_flow_model,
)
from eidos.hal.cost import estimate as row_flow
from eidos.hal.lane import Estimate
from eidos.ir import nodes as N

MODEL = RowFlow(
    lane="duckdb",
    setup_s=0.015,               # per run: DuckDB's parse, plan, parquet metadata, thread wake-up; the lane's
    scan_bytes_per_s={"parquet": 4.0e9, "csv": 0.3e9, "arrow": 20e9, "sql": 2.0e9, "other": 20e9},
    row_op_s=0.37e-9,            # one vectorized operation (an expression node, an aggregate) on one row
    join_row_s=13e-9,            # hashing and probing one row, build and probe sides (`eidos calibrate`, quiet VM)
    sort_row_s=1.5e-9,           # one row of a sort, times log2(rows)
    group_s=0.16e-6,             # one group of a keyed aggregation (`eidos calibrate` on the quiet VM: 1.57e-7)
    libm_row_s=3e-9,             # one exp on one row, a libm call (eidos.hal.cost.LIBM_WEIGHT for the others)
    join_filters=True,           # DuckDB orders joins and pushes each join's keys into the other inputs' scans
)


EXACT_FETCH_S = 2e-9            # each key and argument value DuckDB computes and hands over as Arrow (none
                                # where the Aggregate only picks columns of an in-memory table)
IN_PLACE_SETUP_S = 0.0005       # a run where the Aggregate only picks columns of an in-memory table: DuckDB
                                # does not run (no setup, no scan), the lane's Python calls the kernel
EXACT_LIST_ROW_S = 100e-9       # an Aggregate the exact route does not take: DuckDB's list() of the group,
                                # then eidos.hal.fsum in a vectorized Python function


def estimate(plan: N.Node, values: Mapping[str, float] | None = None) -> Estimate:
    values, label = values_for(DEFAULTS, values)

    def exact(node: N.Node, rows: float, groups: float) -> float:
        if not isinstance(node, N.Aggregate):
            return 0.0
        from eidos.hal import exact_aggregate as route

        floats = exact_aggregations(node)[0]
        rows_in = route.route(node)
        if rows_in is None:
            return floats * rows * values.get("exact_list_row_s", EXACT_LIST_ROW_S)
        fetched = 0 if route.in_place(rows_in) is not None else len(rows_in.columns)
        per_row = values.get("exact_row_s", EXACT_ROW_S) if node.keys else values.get("exact_global_row_s",
                                                                                     EXACT_GLOBAL_ROW_S)
        return (floats * (rows * per_row + groups * values.get("exact_group_s", EXACT_GROUP_S))
                + fetched * rows * values.get("exact_fetch_s", EXACT_FETCH_S))

    model = row_flow_model(MODEL, values, label)
    if isinstance(plan, N.Aggregate):
        from eidos.hal import exact_aggregate as route

        rows_in = route.route(plan)
        if rows_in is not None and route.in_place(rows_in) is not None:
            model = replace(model, setup_s=values.get("in_place_setup_s", IN_PLACE_SETUP_S),
                            scan_bytes_per_s={**model.scan_bytes_per_s, "arrow": math.inf})
    return row_flow(plan, model, exact)


DEFAULTS = Constants(
    "duckdb", {**flat(MODEL), "exact_row_s": EXACT_ROW_S, "exact_group_s": EXACT_GROUP_S, "exact_fetch_s": EXACT_FETCH_S,
               "exact_list_row_s": EXACT_LIST_ROW_S, "exact_global_row_s": EXACT_GLOBAL_ROW_S,
               "in_place_setup_s": IN_PLACE_SETUP_S}, DEV_VM, estimate,
    threaded=frozenset({"row_op_s", "join_row_s", "sort_row_s", "group_s", "libm_row_s"}),
    host_rates=frozenset({"scan_parquet_bytes_per_s", "scan_csv_bytes_per_s", "scan_arrow_bytes_per_s",
                          "scan_other_bytes_per_s"}),
    probes={"setup": "setup_s", "project": "row_op_s", "libm": "libm_row_s", "parquet": "scan_parquet_bytes_per_s", "groups": "group_s",
            "exact": "exact_row_s", "join": "join_row_s", "sort": "sort_row_s"})

"""The duckdb lane's exact route for float aggregations: DuckDB computes the rows, eidos.hal.fsum
aggregates them. DuckDB has no correctly rounded float sum, and gathering each group's values with
list() for a Python function costs many times DuckDB's own sum. Where the plan is an Aggregate of
float sums, means, variances and deviations (no key, or one integer or temporal key), the lane runs
the Aggregate's input in SQL as a projection of the key and arguments, fetches it as Arrow, and
aggregates the buffers in place (eidos.hal.fsum.group_by, fsum.total)."""

from __future__ import annotations

import pyarrow as pa

from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.typing import infer

ROUTE = ("exact float aggregation: DuckDB runs the projection below, eidos.hal.fsum aggregates "
         "its Arrow result in place (the lane's exact route, no list())")


def route(plan: N.Node) -> N.Project | None:
    """The projection DuckDB runs for `plan` on the exact route, or None where it does not apply."""
    if not isinstance(plan, N.Aggregate) or len(plan.keys) > 1:
        return None
    schema = plan.input.schema
    if plan.keys and not (infer(plan.keys[0][1], schema).is_integer or infer(plan.keys[0][1], schema).is_temporal):
        return None
    for _, a in plan.aggs:
        if not (isinstance(a, E.Agg) and a.fn in ("sum", "mean", "var", "std") and a.arg is not None
                and a.arg.columns() and infer(a.arg, schema) in (T.Float32, T.Float64)):
            return None
    return N.Project(plan.input, tuple(plan.keys) + tuple((f"__eidos_x{i}", a.arg) for i, (_, a) in enumerate(plan.aggs)))


def finish(plan: N.Aggregate, rows: pa.Table) -> pa.Table:
    """plan's result from the rows of its route() projection."""
    from eidos.hal import fsum

    args = [(a.fn, rows.column(len(plan.keys) + i)) for i, (_, a) in enumerate(plan.aggs)]
    if plan.keys:
        keys, out = fsum.group_by(rows.column(0), args)
        return pa.table([keys, *out], names=[plan.keys[0][0]] + [n for n, _ in plan.aggs])
    out = [pa.array([fsum.single(fn, column)], pa.float64()) for fn, column in args]
    return pa.table(out, names=[n for n, _ in plan.aggs])

"""The duckdb and sqlite lanes' exact route for float aggregations: the engine computes the rows,
eidos.hal.fsum aggregates them. Neither has a correctly rounded float sum, and gathering each group's
values with list() (DuckDB) or calling Python per value (SQLite) costs many times the engine's own sum. Where the plan is an Aggregate of
float sums, means, variances and deviations (no key, or keys eidos.hal.fsum.group_by groups as eidos
does: any but floats and nested types), the lane runs the Aggregate's input in SQL as a projection
of the keys and arguments, fetches it as Arrow, and aggregates the buffers in place
(eidos.hal.fsum.group_by, fsum.single). Where that projection only picks columns of an in-memory
Arrow table, the columns are read where they lie: DuckDB would only copy them. Such an Aggregate
below the plan's root (under a sort, a join, ...) is computed first and DuckDB reads its result (SQLite
cannot read an Arrow table: there only a root Aggregate takes the route)."""

from __future__ import annotations

import pyarrow as pa

from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource
from eidos.ir.typing import infer

ROUTE = ("exact float aggregation: {engine} runs the projection below, eidos.hal.fsum aggregates "
         "its Arrow result in place (the lane's exact route)")
IN_PLACE = ("exact float aggregation: eidos.hal.fsum aggregates the Arrow table's columns in place "
            "(the lane's exact route: the Aggregate only reads columns of an in-memory table, so DuckDB "
            "does not run it)")


def route(plan: N.Node) -> N.Project | None:
    """The projection DuckDB runs for `plan` on the exact route, or None where it does not apply."""
    from eidos.hal.cost import exact_in_place, groups_by

    if not isinstance(plan, N.Aggregate) or not plan.aggs:
        return None
    schema = plan.input.schema
    if not all(groups_by(infer(e, schema)) for _, e in plan.keys):
        return None
    if not all(isinstance(a, E.Agg) and exact_in_place(a, schema) for _, a in plan.aggs):
        return None
    return N.Project(plan.input, tuple(plan.keys) + tuple((f"__eidos_x{i}", a.arg) for i, (_, a) in enumerate(plan.aggs)))


def in_place(rows: N.Project) -> pa.Table | None:
    """route()'s projection read straight from its in-memory Arrow table, where it only picks
    columns of one (its types are the plan's: ArrowSource.of casts them); else None."""
    scan = rows.input
    if not (isinstance(scan, N.Scan) and isinstance(scan.source, ArrowSource) and scan.source.table is not None
            and all(isinstance(e, E.Column) for _, e in rows.columns)):
        return None
    table = scan.source.table
    return pa.table([table.column(e.name) for _, e in rows.columns], names=[n for n, _ in rows.columns])


def finish(plan: N.Aggregate, rows: pa.Table) -> pa.Table:
    """plan's result from the rows of its route() projection."""
    from eidos.hal import fsum

    keys = len(plan.keys)
    args = [(a.fn, rows.column(keys + i)) for i, (_, a) in enumerate(plan.aggs)]
    names = [n for n, _ in plan.keys] + [n for n, _ in plan.aggs]
    if plan.keys:
        first, out = fsum.group_by(rows.columns[:keys], args)
        groups = rows.select(range(keys)).take(pa.array(first, pa.int64()))
        return pa.table(groups.columns + out, names=names)
    out = [pa.array([fsum.single(fn, column)], pa.float64()) for fn, column in args]
    return pa.table(out, names=names)


def below(plan: N.Node, compute) -> N.Node:
    """plan with each Aggregate that route() takes (the outermost on each path; one computed once
    where the plan uses it twice) replaced by a scan of compute(aggregate), an Arrow table of its
    schema."""
    done: dict[int, N.Node] = {}

    def walk(node: N.Node) -> N.Node:
        if id(node) not in done:
            if route(node) is not None:
                done[id(node)] = N.Scan(ArrowSource.of(compute(node), node.schema))
            else:
                done[id(node)] = map_inputs(node, walk)
        return done[id(node)]

    return walk(plan)

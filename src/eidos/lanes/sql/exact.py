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

from eidos.hal.exact_aggregate import route
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource

ROUTE = ("exact float aggregation: {engine} runs the projection below, eidos.hal.fsum aggregates "
         "its Arrow result in place (the lane's exact route)")
IN_PLACE = ("exact float aggregation: eidos.hal.fsum aggregates the Arrow table's columns in place "
            "(the lane's exact route: the Aggregate only reads columns of an in-memory table, so DuckDB "
            "does not run it)")


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

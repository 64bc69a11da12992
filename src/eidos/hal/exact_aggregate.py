"""An Aggregate of float sums, means, variances and deviations computed by eidos.hal.fsum over Arrow
columns: the exact route the lanes share where their engine has no correctly rounded float sum. Its
input is a projection of the keys and the arguments (route) that the engine runs, or that is read
where it lies when it only picks columns of an in-memory Arrow table (in_place): then no engine runs
at all. finish() aggregates those rows in place (eidos.hal.fsum.group_by, fsum.single)."""

from __future__ import annotations

import pyarrow as pa

from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource


def route(plan: N.Node) -> N.Project | None:
    """The projection the engine runs for `plan` on the exact route (each aggregation a bare one that
    eidos.hal.cost.in_place takes), or None where it does not apply; asked once per plan object (a
    lane asks it on every run)."""
    return once(plan, "exact route", lambda: _route(plan))


def _route(plan: N.Node) -> N.Project | None:
    from eidos.hal.cost import in_place as takes

    if not (isinstance(plan, N.Aggregate) and all(isinstance(a, E.Agg) for _, a in plan.aggs) and takes(plan)):
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

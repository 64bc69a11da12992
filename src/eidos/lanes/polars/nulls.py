"""Which columns of a plan hold no null, from what its parquet files and Arrow tables say of themselves.

An exact sum by groups is null where a group has no values, which Polars' sum (0 there) does not say, so
the lane counts each group's values beside it: a second aggregation over every row (TPC-H q18's sum of
l_quantity by order, about a fifth of the query). A column that holds no null needs no count in a group,
which always has a row. `facts` is asked on every run (files may change between runs: the footers are
read again only when a file did) and is part of what a kept translation is kept under."""

from __future__ import annotations

from eidos.hal import stores
from eidos.hal.files import footer
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.sources import ArrowSource, ParquetSource, Source

Facts = frozenset[tuple[Source, str]]


def facts(plan: N.Node) -> Facts:
    """(source, column) for each column a scan of `plan` reads that its source says holds no null."""
    out = set()
    for source, names in _read(plan).items():
        out.update((source, n) for n in _never_null(source, names))
    return frozenset(out)


def _read(plan: N.Node) -> dict[Source, set[str]]:
    read: dict[Source, set[str]] = {}
    for n in plan.walk():
        if isinstance(n, N.Scan):
            read.setdefault(n.source, set()).update(n.columns or n.source.schema.names)
    return read


def _never_null(source: Source, names: set[str]) -> set[str]:
    if isinstance(source, ArrowSource):
        table = source.table
        return {n for n in names if n in table.column_names and table.column(n).null_count == 0}
    if not isinstance(source, ParquetSource) or not source.files or any(map(stores.is_remote, source.files)):
        return set()
    out = set(names) - set(source.partitions)
    for f in source.files:
        try:
            schema = footer(f, source.storage)[0].schema.to_arrow_schema()
        except Exception:   # a file gone or unreadable: the run reports it, this only learns nothing
            return set()
        out = {n for n in out if schema.get_field_index(n) >= 0 and not schema.field(n).nullable}
    return out


def never_null(node: N.Node, name: str, known: Facts) -> bool:
    """Whether column `name` of `node`'s output holds no null, by `known` of its sources (False where
    it cannot tell)."""
    if isinstance(node, N.Scan):
        return (node.source, name) in known
    if isinstance(node, (N.Filter, N.Sort, N.Limit, N.Distinct, N.Unique)):
        return never_null(node.input, name, known)
    if isinstance(node, N.Project):
        e = dict(node.columns).get(name)
        return isinstance(e, E.Column) and never_null(node.input, e.name, known)
    if isinstance(node, N.Aggregate):
        e = dict(node.keys).get(name)
        return isinstance(e, E.Column) and never_null(node.input, e.name, known)
    if isinstance(node, N.Join):
        if name in node.left.schema.names:
            return node.how in ("inner", "left", "semi", "anti", "cross") and never_null(node.left, name, known)
        if node.how not in ("inner", "right", "cross"):
            return False
        taken = set(node.left.schema.names)
        for n in node.right.schema.names:
            if n in node.right_on:
                continue
            out = n + node.suffix if n in taken else n
            taken.add(out)
            if out == name:
                return never_null(node.right, n, known)
    return False

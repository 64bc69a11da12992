"""Which columns of a plan hold no null, from what its parquet files and Arrow tables say of themselves.

An exact sum by groups is null where a group has no values, which Polars' sum (0 there) does not say, so
the lane counts each group's values beside it: a second aggregation over every row (TPC-H q18's sum of
l_quantity by order, about a fifth of the query). A column that holds no null needs no count in a group,
which always has a row, nor its nulls dropped before n_unique (TPC-H q16). `facts` is asked on every run
(files may change between runs: hal.files reads a footer again only when its file did) of only the columns
such a sum or n_unique reads, and is part of what a kept translation is kept under."""

from __future__ import annotations

from eidos.hal import stores
from eidos.hal.files import required
from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import right_output_names
from eidos.ir.sources import ArrowSource, ParquetSource, Source

Facts = tuple[frozenset[str], ...]   # per source `_asked` names (in its order): its asked columns that hold no null
ASKED = ("sum", "n_unique")          # the aggregations of a column whose translation asks never_null


def facts(plan: N.Node) -> Facts:
    """What `plan`'s sources say of their nulls now: for each source an aggregation in ASKED reads, the
    columns it reads there that hold no null (only column names are hashed on a run, as the key of the
    kept translations)."""
    return tuple(_never_null(source, names) for source, names in _asked(plan))


def known(plan: N.Node, found: Facts) -> dict[Source, frozenset[str]]:
    """`found` by source, for never_null."""
    return {source: f for (source, _), f in zip(_asked(plan), found)}


def _asked(plan: N.Node) -> tuple[tuple[Source, frozenset[str]], ...]:
    """Per source, the columns of it that an aggregation in ASKED reads (where never_null can follow them)."""
    def asked():
        out: dict[Source, set[str]] = {}
        for n in plan.walk():
            if isinstance(n, N.Aggregate):
                for a in (a for _, e in n.aggs for a in e.walk() if isinstance(a, E.Agg)):
                    found = _origin(n.input, a.arg.name) if a.fn in ASKED and isinstance(a.arg, E.Column) else None
                    if found is not None:
                        out.setdefault(found[0], set()).add(found[1])
        return tuple((source, frozenset(names)) for source, names in out.items())
    return once(plan, "polars.null facts asked", asked)


def _never_null(source: Source, names: frozenset[str]) -> frozenset[str]:
    if isinstance(source, ArrowSource):
        table = source.table
        return frozenset(n for n in names if n in table.column_names and table.column(n).null_count == 0)
    if not isinstance(source, ParquetSource) or not source.files or any(map(stores.is_remote, source.files)):
        return frozenset()
    out = names - set(source.partitions)
    for f in source.files:
        try:
            out &= required(f, source.storage)
        except Exception:   # a file gone or unreadable: the run reports it, this only learns nothing
            return frozenset()
    return out


def never_null(node: N.Node, name: str, known: dict[Source, frozenset[str]]) -> bool:
    """Whether column `name` of `node`'s output holds no null, by `known` of its sources (False where
    it cannot tell)."""
    found = _origin(node, name)
    return found is not None and found[1] in known.get(found[0], ())


def _origin(node: N.Node, name: str) -> tuple[Source, str] | None:
    """The source column whose values column `name` of `node`'s output holds, with no null added on the way
    (None where it is computed, or a join may add nulls)."""
    if isinstance(node, N.Scan):
        return node.source, name
    if isinstance(node, (N.Filter, N.Sort, N.Limit, N.Distinct, N.Unique)):
        return _origin(node.input, name)
    if isinstance(node, N.Project):
        e = dict(node.columns).get(name)
        return _origin(node.input, e.name) if isinstance(e, E.Column) else None
    if isinstance(node, N.Aggregate):
        e = dict(node.keys).get(name)
        return _origin(node.input, e.name) if isinstance(e, E.Column) else None
    if isinstance(node, N.Join):
        if name in node.left.schema.names:
            return _origin(node.left, name) if node.how in ("inner", "left", "semi", "anti", "cross") else None
        if node.how not in ("inner", "right", "cross"):
            return None
        right = right_output_names(node).get(name)
        return None if right is None else _origin(node.right, right)
    return None

"""Which columns of a plan hold no null, from what its parquet files and Arrow tables say of themselves.

An exact sum by groups is null where a group has no values, which Polars' sum (0 there) does not say, so
the lane counts each group's values beside it: a second aggregation over every row (TPC-H q18's sum of
l_quantity by order, about a fifth of the query). A column that holds no null needs no count in a group,
which always has a row, nor its nulls dropped before n_unique (TPC-H q16). `facts` is asked on every run (files may change between runs: the footers are
read again only when a file did) and is part of what a kept translation is kept under."""

from __future__ import annotations

from eidos.hal import stores
from eidos.hal.files import footer
from eidos.hal.memo import once
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import right_output_names
from eidos.ir.sources import ArrowSource, ParquetSource, Source

Facts = tuple[frozenset[str], ...]   # per source the plan reads (`_read`'s order): its columns that hold no null


def facts(plan: N.Node) -> Facts:
    """What `plan`'s sources say of their nulls now: for each source it reads, the columns it reads that
    hold no null (only column names are hashed on a run, as the key of the kept translations)."""
    return tuple(_never_null(source, names) for source, names in _read(plan))


def known(plan: N.Node, found: Facts) -> dict[Source, frozenset[str]]:
    """`found` by source, for never_null."""
    return {source: f for (source, _), f in zip(_read(plan), found)}


def _read(plan: N.Node) -> tuple[tuple[Source, frozenset[str]], ...]:
    def read():
        out: dict[Source, set[str]] = {}
        for n in plan.walk():
            if isinstance(n, N.Scan):
                out.setdefault(n.source, set()).update(n.columns or n.source.schema.names)
        return tuple((source, frozenset(names)) for source, names in out.items())
    return once(plan, "polars.sources read", read)


def _never_null(source: Source, names: frozenset[str]) -> frozenset[str]:
    if isinstance(source, ArrowSource):
        table = source.table
        return frozenset(n for n in names if n in table.column_names and table.column(n).null_count == 0)
    if not isinstance(source, ParquetSource) or not source.files or any(map(stores.is_remote, source.files)):
        return frozenset()
    out = names - set(source.partitions)
    for f in source.files:
        try:
            meta = footer(f, source.storage)[0]
        except Exception:   # a file gone or unreadable: the run reports it, this only learns nothing
            return frozenset()
        out &= _required(f, meta)
    return out


_REQUIRED: dict[str, tuple[object, frozenset[str]]] = {}   # file -> (its footer, the columns it holds no null in)


def _required(path: str, meta) -> frozenset[str]:
    """The columns file `path` declares required (no null), found once per footer (hal.files keeps a footer
    object while the file is unchanged): the Arrow schema's conversion cost most of a run's translation."""
    hit = _REQUIRED.get(path)
    if hit is None or hit[0] is not meta:
        schema = meta.schema.to_arrow_schema()
        if len(_REQUIRED) >= 4096:   # bounded, as hal.files' footers are
            _REQUIRED.clear()
        hit = _REQUIRED[path] = (meta, frozenset(f.name for f in schema if not f.nullable))
    return hit[1]


def never_null(node: N.Node, name: str, known: dict[Source, frozenset[str]]) -> bool:
    """Whether column `name` of `node`'s output holds no null, by `known` of its sources (False where
    it cannot tell)."""
    if isinstance(node, N.Scan):
        return name in known.get(node.source, ())
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
        right = right_output_names(node).get(name)
        return right is not None and never_null(node.right, right, known)
    return False

"""Work a plan repeats, made to look the same to Polars, so its common subplan elimination computes it once.

A Flow that uses one frame twice (TPC-H q17's semi-joined lineitem, read by a join and by the aggregate it
joins) reaches the lane as two subtrees that projection pruning made differ (one reads a column the other
does not), and each translation names its private columns anew: Polars saw two plans and ran both. Here a
file scan reads every column any scan of its files reads, where what it adds is dropped unseen above it
(by a Project or an Aggregate), and equal subtrees get one key, so translate.py builds one LazyFrame for
them. Polars' projection pushdown still reads only the columns used."""

from __future__ import annotations

from dataclasses import fields

from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import FileSource


def widened(plan: N.Node) -> N.Node:
    """`plan` with the file scans that can read the union of their source's columns reading it; its
    schema is unchanged (a node whose output is seen keeps its columns)."""
    reads: dict[FileSource, set[str]] = {}
    count: dict[FileSource, int] = {}
    for n in plan.walk():
        if isinstance(n, N.Scan) and isinstance(n.source, FileSource):
            reads.setdefault(n.source, set()).update(n.columns or n.source.schema.names)
            count[n.source] = count.get(n.source, 0) + 1
    if all(c == 1 for c in count.values()):
        return plan
    return _widen(plan, False, reads)


def _widen(node: N.Node, hidden: bool, reads: dict) -> N.Node:
    """`hidden`: columns `node` adds to its output are dropped before anything reads them."""
    if isinstance(node, N.Scan):
        names = node.source.schema.names
        cols = node.columns
        if hidden and node.source in reads:
            cols = tuple(c for c in names if c in reads[node.source])
        cols = None if cols == tuple(names) else cols   # every column, however it was said
        return node if cols == node.columns else N.Scan(node.source, cols)
    if isinstance(node, (N.Project, N.Aggregate)):
        return map_inputs(node, lambda c: _widen(c, True, reads))
    if isinstance(node, (N.Filter, N.Sort, N.Limit)):
        return map_inputs(node, lambda c: _widen(c, hidden, reads))
    if isinstance(node, N.Join) and node.how in ("semi", "anti"):   # the output is the left side's rows
        left, right = _widen(node.left, hidden, reads), _widen(node.right, True, reads)
        if left is node.left and right is node.right:
            return node
        return N.Join(left, right, node.how, node.left_on, node.right_on, node.suffix)
    return map_inputs(node, lambda c: _widen(c, False, reads))


def keys(plan: N.Node) -> dict[int, int]:
    """id(node) -> a number equal subtrees share, each node's own fields hashed once (its inputs by
    their numbers): a node holding what cannot be hashed gets a number of its own."""
    numbers: dict[object, int] = {}
    out: dict[int, int] = {}

    def key(node: N.Node) -> int:
        known = out.get(id(node))
        if known is not None:
            return known
        parts = [type(node)]
        for f in fields(node):
            if not f.compare:
                continue
            v = getattr(node, f.name)
            if isinstance(v, N.Node):
                v = ("input", key(v))
            elif isinstance(v, tuple) and v and all(isinstance(x, N.Node) for x in v):
                v = ("inputs", tuple(key(x) for x in v))
            parts.append(v)
        try:
            k = numbers.setdefault(tuple(parts), len(numbers))
        except TypeError:
            k = numbers.setdefault(object(), len(numbers))
        out[id(node)] = k
        return k

    key(plan)
    return out

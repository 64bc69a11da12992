"""Schema inference and validation of plan nodes.

Each node's output schema follows from its inputs' schemas; any problem is a
PlanError naming the node, the column and what exists. A plan read from JSON is held
to what the Flow methods allow: every node has at least one column, a Sort at least
one key, a Limit counts within Int64 (no table holds more rows).
"""

from __future__ import annotations

from functools import singledispatch

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir.expr import Agg, Window, contains_agg
from eidos.ir.order import reads_row_order, require_row_order
from eidos.ir.render import node_label
from eidos.ir.schema import Schema
from eidos.ir.typing import compared, infer, promote


def infer_schema(node: N.Node) -> Schema:
    """The node's output schema; a PlanError when the node is invalid."""
    _check_windows(node)
    schema = _infer(node)
    if not len(schema):
        raise PlanError(f"{node_label(node).strip()} has no columns; every step of a plan has at least one (a source "
                        "with columns, a select of at least one, an agg of at least one aggregation)")
    return schema


def _check_windows(node: N.Node) -> None:
    """Window functions are computed in a Project (select, with_columns; Flow.filter puts them in one),
    and one that reads the input's row order needs an input whose order the plan defines."""
    for e in node.expressions():
        for w in e.walk():
            if not isinstance(w, Window):
                continue
            if not isinstance(node, N.Project):
                raise PlanError(f"window function {w} in {node_label(node)}: window functions are computed in "
                                "select or with_columns (and filter); compute it there first")
            if reads_row_order(w):
                require_row_order(node.input, f"{w} (without order_by)")


@singledispatch
def _infer(node: N.Node) -> Schema:
    raise PlanError(f"unknown plan node {type(node).__name__}")


@_infer.register
def _(node: N.Scan) -> Schema:
    schema = node.source.schema
    if node.columns is None:
        return schema
    where = node_label(node)
    return Schema((c, schema.dtype(c, where=where)) for c in node.columns)


@_infer.register
def _(node: N.Filter) -> Schema:
    schema = node.input.schema
    t = infer(node.predicate, schema, node_label(node))
    if t not in (T.Boolean, T.Null):
        raise PlanError(f"filter predicate must be Boolean, got {t}: {node.predicate}\n"
                        "  compare it with something, e.g. col(...) > 0, or use .is_not_null()")
    return schema


@_infer.register
def _(node: N.Project) -> Schema:
    schema = node.input.schema
    where = node_label(node)
    return Schema((name, infer(e, schema, where)) for name, e in node.columns)


@_infer.register
def _(node: N.Aggregate) -> Schema:
    schema = node.input.schema
    where = node_label(node)
    fields = []
    for name, e in node.keys:
        if contains_agg(e):
            raise PlanError(f"group key {name!r} contains an aggregation: {e}; keys are plain columns "
                            f"or expressions in {where}")
        fields.append((name, compared(infer(e, schema, where), f"group key {name!r} in {where}")))
    keys = {n for n, _ in node.keys}
    for name, e in node.aggs:
        stray = sorted(c for c in _columns_outside_aggs(e) if c not in keys)
        if stray:
            raise PlanError(f"agg {name!r} reads column {stray[0]!r} outside an aggregation: {e}\n"
                            f"  wrap it in an aggregation (e.g. col({stray[0]!r}).sum()) or add it "
                            f"to group_by in {where}")
        fields.append((name, infer(e, _with_keys(schema, node), where, allow_agg=True)))
        for a in e.walk():
            if isinstance(a, Agg) and a.fn in F.ORDERED_AGGREGATES:
                require_row_order(node.input, f"{a.fn}() in agg {name!r}")
    return Schema(fields)


def _with_keys(schema: Schema, node: N.Aggregate) -> Schema:
    """Key names may be read outside aggregations (they are constant per group)."""
    extra = [(n, infer(e, schema)) for n, e in node.keys if n not in schema]
    return Schema(list(schema.items()) + extra)


def _columns_outside_aggs(e) -> set[str]:
    from eidos.ir.expr import Agg, Column

    if isinstance(e, Agg):
        return set()
    if isinstance(e, Column):
        return {e.name}
    out: set[str] = set()
    for child in e.children():
        out |= _columns_outside_aggs(child)
    return out


@_infer.register
def _(node: N.Join) -> Schema:
    left, right = node.left.schema, node.right.schema
    where = node_label(node)
    if node.how not in N.JOIN_KINDS:
        raise PlanError(f"unknown join kind {node.how!r}; use one of {', '.join(N.JOIN_KINDS)}")
    if node.how == "cross":
        if node.left_on or node.right_on:
            raise PlanError(f"a cross join takes no keys in {where}")
    elif not node.left_on or len(node.left_on) != len(node.right_on):
        raise PlanError(f"join needs the same number (at least one) of left and right keys, got "
                        f"{list(node.left_on)} and {list(node.right_on)} in {where}")
    key_types = _key_types(left, right, node.left_on, node.right_on, where, "join keys")
    if node.how in ("semi", "anti"):
        return left
    fields = [(n, key_types.get(n, t)) for n, t in left.items()]
    return _with_right(fields, [(n, t) for n, t in right.items() if n not in node.right_on], node.suffix, where)


def _key_types(left: Schema, right: Schema, lks, rks, where: str, what: str) -> dict:
    """The promoted type of each pair of key columns, by left name; a PlanError for a pair with none."""
    out = {}
    for lk, rk in zip(lks, rks):
        lt, rt = left.dtype(lk, where=f"the left side of {where}"), right.dtype(rk, where=f"the right side of {where}")
        compared(lt, f"join key {lk!r} in {where}")
        compared(rt, f"join key {rk!r} in {where}")
        try:
            out[lk] = promote(lt, rt, op="join")
        except PlanError:
            raise PlanError(f"{what} {lk!r} ({lt}) and {rk!r} ({rt}) have incompatible types in {where}") from None
    return out


def _with_right(fields: list, right: list, suffix: str, where: str) -> Schema:
    """`fields` then the right columns, each taking `suffix` where its name is taken already."""
    taken = {n for n, _ in fields}
    for n, t in right:
        name = n + suffix if n in taken else n
        if name in taken:
            raise PlanError(f"join output would have two columns named {name!r}; choose another suffix in {where}")
        taken.add(name)
        fields.append((name, t))
    return Schema(fields)


@_infer.register
def _(node: N.Sort) -> Schema:
    schema = node.input.schema
    if not node.keys:
        raise PlanError(f"sort needs at least one column or expression: {node_label(node)} has no keys")
    for k in node.keys:
        compared(infer(k.expr, schema, node_label(node)), f"sort key {k.expr} in {node_label(node)}")
    return schema


@_infer.register
def _(node: N.Limit) -> Schema:
    if not (0 <= node.n <= N.MAX_COUNT and 0 <= node.offset <= N.MAX_COUNT):
        raise PlanError(f"limit and offset must be non-negative integers up to 2**63 - 1, got limit {node.n}, "
                        f"offset {node.offset}")
    return node.input.schema


@_infer.register
def _(node: N.Distinct) -> Schema:
    for name, t in node.input.schema.items():
        compared(t, f"column {name!r} of the rows distinct() compares")
    return node.input.schema


@_infer.register
def _(node: N.Unique) -> Schema:
    schema = node.input.schema
    for n in node.subset:
        compared(schema.dtype(n, where=node_label(node)), f"column {n!r} of the rows distinct() compares")
    if node.keep not in N.UNIQUE_KEEPS:
        raise PlanError(f"distinct keep must be one of {', '.join(map(repr, N.UNIQUE_KEEPS))}, got {node.keep!r}")
    if node.keep in ("first", "last"):
        require_row_order(node.input, f"distinct(keep={node.keep!r})")
    return schema


@_infer.register
def _(node: N.Explode) -> Schema:
    schema = node.input.schema
    if not node.columns:
        raise PlanError("explode needs at least one List column")
    for n in node.columns:
        t = schema.dtype(n, where=node_label(node))
        if not isinstance(t, T.ListType):
            raise PlanError(f"explode takes List columns; {n!r} is {t} (lists: "
                            f"{', '.join(c for c, ct in schema.items() if isinstance(ct, T.ListType)) or 'none'})")
    return Schema([(n, t.inner if n in node.columns else t) for n, t in schema.items()])


@_infer.register
def _(node: N.AsofJoin) -> Schema:
    from eidos.ir.asof import on_type

    left, right = node.left.schema, node.right.schema
    where = node_label(node)
    if node.strategy not in N.ASOF_STRATEGIES:
        raise PlanError(f"join_asof strategy must be one of {', '.join(map(repr, N.ASOF_STRATEGIES))}, "
                        f"got {node.strategy!r}")
    if len(node.left_by) != len(node.right_by):
        raise PlanError(f"join_asof needs as many left as right `by` columns, got {list(node.left_by)} and "
                        f"{list(node.right_by)}")
    _key_types(left, right, node.left_by, node.right_by, where, "join_asof by columns")
    on_type(node)
    return _with_right(list(left.items()), [(n, right[n]) for n in node.right_outputs()], node.suffix, where)


@_infer.register
def _(node: N.Union) -> Schema:
    first = node.inputs[0].schema
    for other in node.inputs[1:]:
        if other.schema != first:
            raise PlanError("union needs inputs with the same columns and types in the same order\n"
                            f"  left:  {first.text()}\n  right: {other.schema.text()}")
    return first


@_infer.register
def _(node: N.MapBatches) -> Schema:
    node.input.schema  # noqa: B018 - validates the input
    return node.output_schema


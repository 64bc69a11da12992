"""IR-to-IR rewrites shared by every lane: constant folding, predicate pushdown,
projection pruning. Each keeps the plan's result (and its schema) identical."""

from __future__ import annotations

from dataclasses import replace

from eidos.errors import EidosError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.sources import ParquetSource
from eidos.ir.typing import infer, operand_dtypes


def optimize(plan: N.Node) -> N.Node:
    """The plan after folding, pushdown and pruning; same output schema."""
    out = prune(prune_files(push_filters(fold(plan))))
    if out.schema != plan.schema:  # a rewrite bug must never change an answer silently
        raise AssertionError(f"optimizer changed the schema: {plan.schema} -> {out.schema}")
    return out


# ---------------------------------------------------------------- folding

def map_inputs(node: N.Node, fn) -> N.Node:
    """`node` with `fn` applied to each input (a new node only when something changed)."""
    if isinstance(node, N.Union):
        new = tuple(fn(i) for i in node.inputs)
        return node if new == node.inputs else N.Union(new)
    if isinstance(node, (N.Join, N.AsofJoin)):
        left, right = fn(node.left), fn(node.right)
        if left is node.left and right is node.right:
            return node
        return replace(node, left=left, right=right)
    if hasattr(node, "input"):
        child = fn(node.input)
        if child is node.input:
            return node
        return _with_input(node, child)
    return node


def _with_input(node: N.Node, child: N.Node) -> N.Node:
    fields = {f: getattr(node, f) for f in node.__dataclass_fields__}
    fields["input"] = child
    return type(node)(**fields)


TRUE = E.Literal(True, T.Boolean)
FALSE = E.Literal(False, T.Boolean)


def _is_bool(e: E.Expr, value: bool) -> bool:
    return isinstance(e, E.Literal) and e.value is value


def fold_expr(e: E.Expr, schema) -> E.Expr:
    """Evaluate constant sub-expressions and simplify logic with constant operands (Kleene-safe)."""

    def step(node: E.Expr) -> E.Expr:
        if not isinstance(node, E.Call):
            return node
        if node.fn == "and":
            a, b = node.args
            if _is_bool(a, True):
                return _boolean(b, schema)
            if _is_bool(b, True):
                return _boolean(a, schema)
            if _is_bool(a, False) or _is_bool(b, False):
                return FALSE
        if node.fn == "or":
            a, b = node.args
            if _is_bool(a, False):
                return _boolean(b, schema)
            if _is_bool(b, False):
                return _boolean(a, schema)
            if _is_bool(a, True) or _is_bool(b, True):
                return TRUE
        if node.fn == "not" and isinstance(node.args[0], E.Call) and node.args[0].fn == "not":
            return _boolean(node.args[0].args[0], schema)
        if all(isinstance(a, E.Literal) for a in node.args):
            return _fold_call(node, schema)
        return node

    return E.transform(e, step)


def _boolean(e: E.Expr, schema) -> E.Expr:
    """`e` as the Boolean the logic it replaces was: an untyped null operand (`false | null`) stays Boolean."""
    if infer(e, schema) != T.Null:
        return e
    return E.Literal(None, T.Boolean) if isinstance(e, E.Literal) else E.Cast(e, T.Boolean)


def _fold_call(node: E.Call, schema) -> E.Expr:
    from eidos.ir import evaluate

    try:
        dtype = infer(node, schema)
        value = evaluate.call(node.fn, [a.value for a in node.args], node.options,
                              operand_dtypes(node, schema), dtype)
    except EidosError:
        return node  # errors (overflow, bad casts) surface when the plan runs, in every lane alike
    return E.Literal(value, dtype)  # strong: the Call it replaces was never weak


def fold(plan: N.Node) -> N.Node:
    plan = map_inputs(plan, fold)
    if isinstance(plan, N.Filter):
        # a predicate of type Null (`lit(None)`) is a Boolean null, as every lane's filter takes it
        predicate = _boolean(fold_expr(plan.predicate, plan.input.schema), plan.input.schema)
        if _is_bool(predicate, True):
            return plan.input
        if predicate != plan.predicate:
            return N.Filter(plan.input, predicate)
    if isinstance(plan, N.Project):
        cols = tuple((n, fold_expr(e, plan.input.schema)) for n, e in plan.columns)
        if cols != plan.columns:
            return N.Project(plan.input, cols)
    return plan


# ---------------------------------------------------------------- predicate pushdown

def conjuncts(e: E.Expr) -> list[E.Expr]:
    if isinstance(e, E.Call) and e.fn == "and":
        return conjuncts(e.args[0]) + conjuncts(e.args[1])
    return [e]


def conjoin(preds: list[E.Expr]) -> E.Expr:
    out = preds[0]
    for p in preds[1:]:
        out = E.Call("and", (out, p))
    return out


def _rename(e: E.Expr, mapping: dict[str, str]) -> E.Expr:
    return E.transform(e, lambda n: E.Column(mapping[n.name]) if isinstance(n, E.Column) else n)


def push_filters(plan: N.Node) -> N.Node:
    plan = map_inputs(plan, push_filters)
    if isinstance(plan, N.Filter):
        return _push(plan.input, conjuncts(plan.predicate))
    return plan


def _filtered(child: N.Node, preds: list[E.Expr]) -> N.Node:
    # a conjunct of type Null (the `null` of `a & null`) pushed on its own is a Boolean null, as in fold
    return N.Filter(child, _boolean(conjoin(preds), child.schema)) if preds else child


def _push(child: N.Node, preds: list[E.Expr]) -> N.Node:
    """A node equal to Filter(child, AND(preds)) with each predicate as low as it can go."""
    if isinstance(child, N.Filter):
        return _push(child.input, conjuncts(child.predicate) + preds)
    if isinstance(child, (N.Sort, N.Distinct)):
        return _with_input(child, _push(child.input, preds))
    if isinstance(child, N.Union):
        return N.Union(tuple(_push(i, list(preds)) for i in child.inputs))
    if isinstance(child, N.Project) and not any(map(E.contains_window, child.expressions())):
        # a window reads every row of its input: a filter below it would change what it computes
        renames = {n: e.name for n, e in child.columns if isinstance(e, E.Column)}
        down = [p for p in preds if p.columns() <= renames.keys()]
        stay = [p for p in preds if p not in down]
        if down:
            inner = _push(child.input, [_rename(p, renames) for p in down])
            return _filtered(N.Project(inner, child.columns), stay)
    if isinstance(child, N.Aggregate) and child.keys:  # no keys: one row even from none, so nothing may go below
        keys = {n: e.name for n, e in child.keys if isinstance(e, E.Column)}
        down = [p for p in preds if p.columns() <= keys.keys() and not E.contains_agg(p)]
        stay = [p for p in preds if p not in down]
        if down:
            inner = _push(child.input, [_rename(p, keys) for p in down])
            return _filtered(N.Aggregate(inner, child.keys, child.aggs), stay)
    if isinstance(child, N.Join):
        return _push_join(child, preds)
    return _filtered(child, preds)


def _push_join(join: N.Join, preds: list[E.Expr]) -> N.Node:
    left_names = set(join.left.schema.names)
    right_out = right_output_names(join)  # output name -> right input name
    to_left, to_right, stay = [], [], []
    for p in preds:
        cols = p.columns()
        if cols <= left_names and join.how in ("inner", "left", "semi", "anti", "cross"):
            to_left.append(p)
        elif cols <= right_out.keys() and join.how in ("inner", "right", "cross"):
            to_right.append(_rename(p, right_out))
        else:
            stay.append(p)
    if not (to_left or to_right):
        return _filtered(join, preds)
    left = _push(join.left, to_left) if to_left else join.left
    right = _push(join.right, to_right) if to_right else join.right
    return _filtered(N.Join(left, right, join.how, join.left_on, join.right_on, join.suffix), stay)


def right_output_names(join: N.Join) -> dict[str, str]:
    """Output name of each right non-key column -> its name in the right input, in order (the suffix
    goes on a name taken by the left or by an earlier right column, as the join's schema names them)."""
    if join.how in ("semi", "anti"):
        return {}
    taken = set(join.left.schema.names)
    out = {}
    for n in join.right.schema.names:
        if n in join.right_on:
            continue
        name = n + join.suffix if n in taken else n
        taken.add(name)
        out[name] = n
    return out


# ---------------------------------------------------------------- partition pruning

def prune_files(plan: N.Node) -> N.Node:
    """A filter right over a partitioned parquet scan drops the files whose partition values make one of
    its conjuncts false or null (their rows would all go); the filter stays, so the answer is the same."""
    from eidos.ir.evaluate import can_fail

    plan = map_inputs(plan, prune_files)
    if not (isinstance(plan, N.Filter) and isinstance(plan.input, N.Scan)
            and isinstance(plan.input.source, ParquetSource) and plan.input.source.partitions):
        return plan
    if can_fail(plan.predicate, plan.input.schema):
        return plan   # its errors count on every row, a pruned file's too (semantics 15)
    source = plan.input.source
    preds = [p for p in conjuncts(plan.predicate) if p.columns() and p.columns() <= set(source.partitions)]
    verdicts: dict[tuple, bool] = {}
    keep = []
    for i in range(len(source.files)):
        row = source.partition_row(i)
        if row not in verdicts:
            consts = {k: E.Literal(v, source.schema[k]) for k, v in zip(source.partitions, row)}
            verdicts[row] = all(not _drops(fold_expr(_bind(p, consts), source.schema)) for p in preds)
        if verdicts[row]:
            keep.append(i)
    if not preds or len(keep) == len(source.files):
        return plan
    keep = keep or [0]   # one file stays, whose rows the filter drops: every lane reads a source of files
    share = len(keep) / len(source.files)
    smaller = replace(source, files=tuple(source.files[i] for i in keep), values=tuple(source.values[i] for i in keep),
                      rows=None if source.rows is None else round(source.rows * share),
                      nbytes=None if source.nbytes is None else round(source.nbytes * share))
    return N.Filter(N.Scan(smaller, plan.input.columns), plan.predicate)


def _bind(e: E.Expr, consts: dict[str, E.Literal]) -> E.Expr:
    return E.transform(e, lambda n: consts[n.name] if isinstance(n, E.Column) else n)


def _drops(e: E.Expr) -> bool:
    """Whether a folded predicate drops every row: the constant false or null."""
    return isinstance(e, E.Literal) and (e.value is False or e.value is None)


# ---------------------------------------------------------------- projection pruning

def prune(plan: N.Node, need: set[str] | None = None) -> N.Node:
    """Drop columns nothing above needs; `need` None means every output column."""
    if isinstance(plan, N.Scan):
        names = plan.columns if plan.columns is not None else plan.source.schema.names
        cols = tuple(c for c in names if need is None or c in need) or names[:1]
        return plan if cols == names and plan.columns is None else N.Scan(plan.source, cols)
    if isinstance(plan, N.Filter):
        sub = None if need is None else need | plan.predicate.columns()
        return N.Filter(prune(plan.input, sub), plan.predicate)
    if isinstance(plan, N.Project):
        cols = tuple(c for c in plan.columns if need is None or c[0] in need) or plan.columns[:1]
        sub = set().union(*(e.columns() for _, e in cols))
        inner = prune(plan.input, sub)
        if _is_identity(cols, inner):
            return inner
        return N.Project(inner, cols)
    if isinstance(plan, N.Aggregate):
        aggs = tuple(a for a in plan.aggs if need is None or a[0] in need)
        if not aggs and not plan.keys:
            aggs = plan.aggs[:1]
        sub = set().union(*(e.columns() for _, e in plan.keys + aggs))
        return N.Aggregate(prune(plan.input, sub), plan.keys, aggs)
    if isinstance(plan, N.Join):
        return _prune_join(plan, need)
    if isinstance(plan, N.Sort):
        sub = None if need is None else need | set().union(*(k.expr.columns() for k in plan.keys))
        return N.Sort(prune(plan.input, sub), plan.keys)
    if isinstance(plan, N.Limit):
        return N.Limit(prune(plan.input, need), plan.n, plan.offset)
    if isinstance(plan, N.Union):
        names = plan.schema.names
        keep = None if need is None else ({n for n in names if n in need} or {names[0]})
        order = tuple(n for n in names if keep is None or n in keep)
        inputs = []
        for i in plan.inputs:
            p = prune(i, keep)  # may keep more (a Filter's columns): the inputs must match exactly
            inputs.append(p if p.schema.names == order else N.Project(p, tuple((n, E.Column(n)) for n in order)))
        return N.Union(tuple(inputs))
    # Distinct and MapBatches read every input column.
    return map_inputs(plan, prune)


def _is_identity(cols: N.NamedExprs, inner: N.Node) -> bool:
    return (tuple(n for n, _ in cols) == inner.schema.names
            and all(isinstance(e, E.Column) and e.name == n for n, e in cols))


def _prune_join(join: N.Join, need: set[str] | None) -> N.Node:
    if need is None:
        return N.Join(prune(join.left), prune(join.right), join.how, join.left_on, join.right_on, join.suffix)
    right_out = right_output_names(join)
    right_kept = {right_out[n] for n in need if n in right_out}
    left_names = set(join.left.schema.names)
    # A left column that clashes with a kept right column stays, so the suffix (and names) do not change.
    left_need = (need & left_names) | set(join.left_on) | (right_kept & left_names)
    right_need = right_kept | set(join.right_on)
    return N.Join(prune(join.left, left_need), prune(join.right, right_need),
                  join.how, join.left_on, join.right_on, join.suffix)

"""IR -> Python closures over column lists: one visitor for nodes, one for expressions.

`translate(node, ctx)` compiles a plan into a thunk that returns `Rows`;
nothing runs until the thunk is called. Expressions compile once into
closures that map an `eidos.ir.evaluate` kernel over whole columns, so a
row costs a function call, not a walk of the tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import singledispatch
from typing import Any, Protocol

from eidos.errors import ExecutionError
from eidos.ir import dtypes as T
from eidos.ir import evaluate as V
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.render import function_name, node_label
from eidos.ir.schema import Schema
from eidos.ir.typing import adapt, infer, operand_dtypes, promote


class Rows:
    """A relation in flight: one Python list per column, in schema order, each `n` long. Never mutated."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: list[list], n: int):
        self.columns, self.n = columns, n

    def take(self, idx: list[int]) -> Rows:
        return Rows([[c[i] for i in idx] for c in self.columns], len(idx))


class Ctx(Protocol):
    """What translated plans need from the executor: reading sources and Arrow round trips."""

    def read(self, node: N.Scan) -> Rows: ...

    def call_map_batches(self, node: N.MapBatches, rows: Rows) -> Rows: ...


Thunk = Callable[[], Rows]
Column = Callable[[Rows], list]


# ---------------------------------------------------------------- expressions

def compile_named(name: str, e: E.Expr, schema: Schema, where: str) -> Column:
    """A closure computing `e` for every row of a Rows with `schema`, with errors saying which output column and expression failed."""
    f = _expr(e, schema)

    def run(rows: Rows) -> list:
        try:
            return f(rows)
        except ExecutionError as err:
            raise ExecutionError(f"{err}\n  in {where}: {name} = {e}") from (err.__cause__ or None)
    return run


@singledispatch
def _expr(e: E.Expr, schema: Schema) -> Column:
    raise ExecutionError(f"the reference lane cannot evaluate {type(e).__name__} {e}")


@_expr.register
def _(e: E.Column, schema: Schema) -> Column:
    schema.dtype(e.name)  # a PlanError naming the columns when it is missing
    i = schema.names.index(e.name)
    return lambda rows: rows.columns[i]


@_expr.register
def _(e: E.Literal, schema: Schema) -> Column:
    return _constant(V.literal_value(e.value, e.dtype))


def _constant(value: Any) -> Column:
    return lambda rows: [value] * rows.n


def _operand(e: E.Expr, schema: Schema, dtype: T.DType) -> Column:
    """`e` compiled as an operand of type `dtype`: a weak literal takes that type."""
    if isinstance(e, E.Literal) and e.weak and dtype != e.dtype:
        return _constant(V.literal_value(V.cast(e.value, e.dtype, dtype), dtype))
    return _expr(e, schema)


@_expr.register
def _(e: E.Alias, schema: Schema) -> Column:
    return _expr(e.expr, schema)


@_expr.register
def _(e: E.Cast, schema: Schema) -> Column:
    inner = _expr(e.expr, schema)
    src = infer(e.expr, schema)
    if src == e.dtype:
        return inner
    f = V.caster(src, e.dtype)
    return lambda rows: list(map(f, inner(rows)))


@_expr.register
def _(e: E.Call, schema: Schema) -> Column:
    types = operand_dtypes(e, schema)
    args = [_operand(a, schema, t) for a, t in zip(e.args, types)]
    k = V.kernel(e.fn, e.options, types, infer(e, schema))
    if len(args) == 1:
        (a,) = args
        column = getattr(k, "column", None)   # a kernel that maps a whole column at once (RE2's)
        return (lambda rows: column(a(rows))) if column else lambda rows: list(map(k, a(rows)))
    return lambda rows: list(map(k, *[a(rows) for a in args]))


@_expr.register
def _(e: E.Case, schema: Schema) -> Column:
    """Each row takes the first branch whose condition is true; only that branch is computed for it."""
    rt = infer(e, schema)
    values = [v for _, v in e.branches] + [e.otherwise]
    types = [infer(v, schema) for v in values]
    strong = [t for v, t in zip(values, types) if not (isinstance(v, E.Literal) and v.weak)]
    anchor = strong[0] if strong else types[0]
    compiled = []
    for v, t in zip(values, types):
        t = adapt(v, t, anchor)
        f, conv = _operand(v, schema, t), V.caster(t, rt)
        compiled.append((f, conv, t == rt))
    conds = [_expr(c, schema) for c, _ in e.branches]

    def run(rows: Rows) -> list:
        out: list = [None] * rows.n
        remaining = list(range(rows.n))
        sub = rows
        for i, (f, conv, same) in enumerate(compiled):
            if not remaining:
                break
            if i < len(conds):
                hit = conds[i](sub)
                chosen = [j for j, h in enumerate(hit) if h is True]
                rest = [j for j, h in enumerate(hit) if h is not True]
            else:
                chosen, rest = list(range(sub.n)), []
            if chosen:
                part = f(sub if len(chosen) == sub.n else sub.take(chosen))
                if not same:
                    part = list(map(conv, part))
                for j, value in zip(chosen, part):
                    out[remaining[j]] = value
            remaining = [remaining[j] for j in rest]
            sub = sub.take(rest) if rest and len(rest) < sub.n else sub
        return out
    return run


@_expr.register
def _(e: E.Udf, schema: Schema) -> Column:
    args = [_expr(a, schema) for a in e.args]
    fn, name = e.fn, function_name(e.fn)
    check = V.udf_value(e.return_dtype)

    def apply(*values: Any) -> Any:
        try:
            out = fn(*values)
        except Exception as err:
            raise ExecutionError(f"udf {name} raised {type(err).__name__}: {err} "
                                 f"(arguments {values!r})") from err
        try:
            return check(out)
        except ExecutionError as err:
            raise ExecutionError(f"udf {name} {err} (declared return_dtype {e.return_dtype}; "
                                 f"arguments {values!r})") from None

    if not args:
        return lambda rows: [apply() for _ in range(rows.n)]
    return lambda rows: list(map(apply, *[a(rows) for a in args]))


@_expr.register
def _(e: E.Agg, schema: Schema) -> Column:
    raise ExecutionError(f"aggregation {e} outside an Aggregate node")


@_expr.register
def _(e: E.Window, schema: Schema) -> Column:
    """The function over each partition's rows (null keys together, NaN with NaN), in window order: by
    `order_by` (a stable sort of the input order), else the input's own."""
    rt = infer(e, schema)
    types = [infer(a, schema) for a in e.args]
    if e.fn == "shift":   # the value and its fill both in the result's type
        types = [adapt(a, t, rt) for a, t in zip(e.args, types)]
        args = [_cast(_operand(a, schema, t), t, rt) for a, t in zip(e.args, types)]
        types = [rt] * len(types)
    else:
        args = [_expr(a, schema) for a in e.args]
    parts = [_expr(p, schema) for p in e.partition_by]
    part_types = [infer(p, schema) for p in e.partition_by]
    orders = [(_expr(o, schema), V.order_key(infer(o, schema))) for o in e.order_by]
    k = V.window(e.fn, e.options, types, rt)

    def run(rows: Rows) -> list:
        cols = [a(rows) for a in args]
        groups: dict = {}
        if parts:
            for i, key in enumerate(_key_rows([p(rows) for p in parts], part_types)):
                groups.setdefault(key, []).append(i)
        else:
            groups[None] = list(range(rows.n))
        keys = [(f(rows), order, e.descending, e.nulls_last) for f, order in orders]
        out: list = [None] * rows.n
        for idx in groups.values():
            idx = _ordered(idx, keys)
            for i, v in zip(idx, k([[c[i] for i in idx] for c in cols], len(idx))):
                out[i] = v
        return out
    return run


def _cast(f: Column, src: T.DType, dst: T.DType) -> Column:
    if src == dst:
        return f
    conv = V.caster(src, dst)
    return lambda rows: list(map(conv, f(rows)))


def _ordered(perm: list[int], keys: list) -> list[int]:
    """`perm` stably sorted by `keys`: (values, order_key, descending, nulls_last) each, the first major."""
    for values, order, descending, nulls_last in reversed(keys):
        present = [i for i in perm if values[i] is not None]
        nulls = [i for i in perm if values[i] is None]
        present.sort(key=values.__getitem__ if order is None else lambda i, v=values, o=order: o(v[i]),
                     reverse=descending)
        perm = present + nulls if nulls_last else nulls + present
    return perm


# ---------------------------------------------------------------- keys

def _key_rows(columns: list[list], dtypes: list[T.DType]) -> list:
    """Hashable keys per row (NaN made equal to NaN); a single key column is not wrapped in tuples."""
    normed = []
    for c, t in zip(columns, dtypes):
        key = V.hash_key(t)
        normed.append(c if key is None else [None if v is None else key(v) for v in c])
    if len(normed) == 1:
        return normed[0]
    return list(zip(*normed))


# ---------------------------------------------------------------- nodes

@singledispatch
def translate(node: N.Node, ctx: Ctx) -> Thunk:
    raise ExecutionError(f"the reference lane has no rule for {type(node).__name__}")


@translate.register
def _(node: N.Scan, ctx: Ctx) -> Thunk:
    return lambda: ctx.read(node)


@translate.register
def _(node: N.Filter, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    pred = compile_named("predicate", node.predicate, node.input.schema, node_label(node))

    def run() -> Rows:
        rows = child()
        mask = [v is True for v in pred(rows)]
        cols = [list(itertools.compress(c, mask)) for c in rows.columns]
        return Rows(cols, sum(mask))
    return run


@translate.register
def _(node: N.Project, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    schema, where = node.input.schema, node_label(node)
    # Windows first, over every input row (a window inside when/then too), as columns the rest reads.
    found: dict[E.Window, str] = {}
    columns = [(n, _lift(e, E.Window, found)) for n, e in node.columns]
    windows = [compile_named(name, w, schema, where) for w, name in found.items()]
    wide = Schema(list(schema.items()) + [(name, infer(w, schema)) for w, name in found.items()])
    exprs = [compile_named(n, e, wide, where) for n, e in columns]

    def run() -> Rows:
        rows = child()
        if windows:
            rows = Rows(rows.columns + [f(rows) for f in windows], rows.n)
        return Rows([f(rows) for f in exprs], rows.n)
    return run


def _lift(e: E.Expr, kind: type, found: dict) -> E.Expr:
    """`e` with every `kind` node (Agg, Window) replaced by a column of its results."""
    def step(x: E.Expr) -> E.Expr:
        if isinstance(x, kind):
            return E.Column(found.setdefault(x, f"\0{kind.__name__}{len(found)}"))
        return x
    return E.transform(e, step)


@translate.register
def _(node: N.Aggregate, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    schema, where = node.input.schema, node_label(node)
    key_fns = [compile_named(n, e, schema, where) for n, e in node.keys]
    key_types = [infer(e, schema) for _, e in node.keys]
    found: dict[E.Agg, str] = {}
    outer = [(n, _lift(e, E.Agg, found)) for n, e in node.aggs]
    # Aggregations may read computed keys by name, as if they were input columns.
    extra = [i for i, (n, _) in enumerate(node.keys) if n not in schema]
    agg_schema = Schema(list(schema.items()) + [(node.keys[i][0], key_types[i]) for i in extra])
    agg_fns = []
    for agg in found:
        arg = None if agg.arg is None else compile_named(agg.fn, agg.arg, agg_schema, where)
        arg_type = T.Null if agg.arg is None else infer(agg.arg, agg_schema)
        result = infer(agg, agg_schema, allow_agg=True)
        agg_fns.append((agg, arg, V.aggregator(agg.fn, arg_type, result, agg.options), result))
    group_schema = Schema([(n, t) for (n, _), t in zip(node.keys, key_types)]
                          + [(found[a], t) for a, _, _, t in agg_fns])
    outer_fns = [compile_named(n, e, group_schema, where) for n, e in outer]

    def run() -> Rows:
        rows = child()
        if node.keys:
            keys = [f(rows) for f in key_fns]
            index: dict = {}
            members: list[list[int]] = []
            for i, k in enumerate(_key_rows(keys, key_types)):
                g = index.get(k)
                if g is None:
                    index[k] = g = len(members)
                    members.append([])
                members[g].append(i)
            out_cols = [[c[m[0]] for m in members] for c in keys]
            if extra:
                rows = Rows(rows.columns + [keys[i] for i in extra], rows.n)
        else:
            members = [list(range(rows.n))]
            out_cols = []
        for agg, arg, fn, _ in agg_fns:
            if arg is None:
                out_cols.append([fn(m) for m in members])
                continue
            values = arg(rows)
            try:
                out_cols.append([fn([values[i] for i in m]) for m in members])
            except ExecutionError as err:
                raise ExecutionError(f"{err}\n  in {where}: {agg}") from (err.__cause__ or None)
        groups = Rows(out_cols, len(members))
        return Rows(out_cols[:len(key_fns)] + [f(groups) for f in outer_fns], len(members))
    return run


@translate.register
def _(node: N.Join, ctx: Ctx) -> Thunk:
    left, right = translate(node.left, ctx), translate(node.right, ctx)
    ls, rs = node.left.schema, node.right.schema
    if node.how == "cross":
        def cross() -> Rows:
            a, b = left(), right()
            li = [i for i in range(a.n) for _ in range(b.n)]
            ri = list(range(b.n)) * a.n
            return Rows(a.take(li).columns + b.take(ri).columns, len(li))
        return cross

    out_types = node.schema
    key_types = [out_types[lk] if node.how not in ("semi", "anti") else promote(ls[lk], rs[rk], op="join")
                 for lk, rk in zip(node.left_on, node.right_on)]
    l_idx = [ls.names.index(k) for k in node.left_on]
    r_idx = [rs.names.index(k) for k in node.right_on]
    l_cast = [V.caster(ls[k], t) for k, t in zip(node.left_on, key_types)]
    r_cast = [V.caster(rs[k], t) for k, t in zip(node.right_on, key_types)]
    r_keep = [i for i, n in enumerate(rs.names) if n not in node.right_on]

    def keys_of(rows: Rows, idx: list[int], casts: list) -> tuple[list[list], list]:
        cols = [list(map(f, rows.columns[i])) for i, f in zip(idx, casts)]
        keys = _key_rows(cols, key_types)
        if len(cols) == 1:
            return cols, keys
        return cols, [None if None in k else k for k in keys]

    def run() -> Rows:
        a, b = left(), right()
        a_keys, a_key = keys_of(a, l_idx, l_cast)
        b_keys, b_key = keys_of(b, r_idx, r_cast)
        table: dict = {}
        for j, k in enumerate(b_key):
            if k is not None:
                table.setdefault(k, []).append(j)
        if node.how in ("semi", "anti"):
            want = node.how == "semi"
            keep = [i for i, k in enumerate(a_key) if (k is not None and k in table) == want]
            return a.take(keep)
        li: list = []
        ri: list = []
        matched = [False] * b.n
        outer_left = node.how in ("left", "full")
        for i, k in enumerate(a_key):
            hits = table.get(k) if k is not None else None
            if hits:
                li.extend([i] * len(hits))
                ri.extend(hits)
                for j in hits:
                    matched[j] = True
            elif outer_left:
                li.append(i)
                ri.append(None)
        if node.how in ("right", "full"):
            extra = [j for j in range(b.n) if not matched[j]]
            li.extend([None] * len(extra))
            ri.extend(extra)
        cols = []
        key_at = dict(zip(l_idx, range(len(l_idx))))
        for c, col in enumerate(a.columns):
            if c in key_at:
                lk, rk = a_keys[key_at[c]], b_keys[key_at[c]]
                cols.append([lk[i] if i is not None else rk[j] for i, j in zip(li, ri)])
            else:
                cols.append(_gather(col, li))
        for c in r_keep:
            cols.append(_gather(b.columns[c], ri))
        return Rows(cols, len(li))
    return run


def _gather(col: list, idx: list) -> list:
    return [col[i] if i is not None else None for i in idx]


@translate.register
def _(node: N.Sort, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    schema, where = node.input.schema, node_label(node)
    keys = [(compile_named(f"sort key {k.expr}", k.expr, schema, where), V.order_key(infer(k.expr, schema)), k)
            for k in node.keys]

    def run() -> Rows:
        rows = child()
        return rows.take(_ordered(list(range(rows.n)), [(f(rows), order, k.descending, k.nulls_last)
                                                         for f, order, k in keys]))
    return run


@translate.register
def _(node: N.Limit, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    lo, hi = node.offset, node.offset + node.n

    def run() -> Rows:
        rows = child()
        cols = [c[lo:hi] for c in rows.columns]
        return Rows(cols, max(0, min(hi, rows.n) - lo))
    return run


@translate.register
def _(node: N.Distinct, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    types = list(node.schema.dtypes)

    def run() -> Rows:
        rows = child()
        if not rows.columns:
            return rows
        seen: set = set()
        keep = []
        for i, k in enumerate(_key_rows(rows.columns, types)):
            if k not in seen:
                seen.add(k)
                keep.append(i)
        return rows.take(keep)
    return run


@translate.register
def _(node: N.Union, ctx: Ctx) -> Thunk:
    parts = [translate(i, ctx) for i in node.inputs]

    def run() -> Rows:
        results = [p() for p in parts]
        cols = [list(itertools.chain.from_iterable(r.columns[c] for r in results))
                for c in range(len(node.schema))]
        return Rows(cols, sum(r.n for r in results))
    return run


@translate.register
def _(node: N.MapBatches, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    return lambda: ctx.call_map_batches(node, child())


@translate.register
def _(node: N.Unique, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    schema = node.input.schema
    idx = [schema.names.index(n) for n in node.subset]
    types = [schema[n] for n in node.subset]

    def run() -> Rows:
        rows = child()
        groups: dict = {}
        for i, k in enumerate(_key_rows([rows.columns[j] for j in idx], types)):
            groups.setdefault(k, []).append(i)
        if node.keep == "none":
            keep = [m[0] for m in groups.values() if len(m) == 1]
        else:
            keep = [m[-1] if node.keep == "last" else m[0] for m in groups.values()]
        return rows.take(sorted(keep))
    return run


def _row_order(columns: list[list], dtypes) -> Callable[[int], tuple]:
    """A sort key of row i by every column, in section 8's order ascending with nulls last."""
    orders = [V.order_key(t) or (lambda v: v) for t in dtypes]
    return lambda i: tuple((c[i] is None, None if c[i] is None else o(c[i])) for c, o in zip(columns, orders))


@translate.register
def _(node: N.AsofJoin, ctx: Ctx) -> Thunk:
    """Per `by` group, the right rows sorted by `on` (then by content, which picks among equal `on`
    values); each left row's backward and forward candidates by bisection, and the nearest choice and
    tolerance test as eidos.ir.asof's expressions."""
    import bisect

    from eidos.ir import asof

    left, right = translate(node.left, ctx), translate(node.right, ctx)
    ls, rs = node.left.schema, node.right.schema
    t = asof.on_type(node)
    order = V.order_key(t) or (lambda v: v)
    lcast, rcast = V.caster(ls[node.left_on], t), V.caster(rs[node.right_on], t)
    by_types = [promote(ls[a], rs[b], op="join") for a, b in zip(node.left_by, node.right_by)]
    s = asof.schema(node)
    pick = compile_named("nearest", asof.forward_wins(node), s, node_label(node))
    test = asof.within(node)
    within = None if test is None else compile_named("tolerance", test, s, node_label(node))
    keep = [rs.names.index(n) for n in node.right_outputs()]

    def by_keys(rows: Rows, names, schema) -> list:
        if not names:
            return [()] * rows.n
        cols = [list(map(V.caster(schema[n], bt), rows.columns[schema.names.index(n)])) for n, bt in zip(names, by_types)]
        keys = _key_rows(cols, by_types)
        return [None if (k is None or (isinstance(k, tuple) and None in k)) else k for k in keys]

    def run() -> Rows:
        a, b = left(), right()
        lon = list(map(lcast, a.columns[ls.names.index(node.left_on)]))
        ron = list(map(rcast, b.columns[rs.names.index(node.right_on)]))
        content = _row_order(b.columns, rs.dtypes)
        groups: dict = {}
        for j, k in enumerate(by_keys(b, node.right_by, rs)):
            if k is not None and ron[j] is not None:
                groups.setdefault(k, []).append(j)
        for k, members in groups.items():
            members.sort(key=lambda j: (order(ron[j]), content(j)))
            groups[k] = (members, [order(ron[j]) for j in members])
        cand_b, cand_f, hit_b, hit_f = [], [], [], []
        for i, k in enumerate(by_keys(a, node.left_by, ls)):
            g = groups.get(k) if k is not None and lon[i] is not None else None
            jb = jf = None
            if g is not None:
                members, keys = g
                x = order(lon[i])
                hi = bisect.bisect_right(keys, x)
                if hi and node.strategy != "forward":
                    jb = members[bisect.bisect_left(keys, keys[hi - 1])]   # the first of the equal `on` values
                lo = bisect.bisect_left(keys, x)
                if lo < len(keys) and node.strategy != "backward":
                    jf = members[lo]
            hit_b.append(jb)
            hit_f.append(jf)
            cand_b.append(None if jb is None else ron[jb])
            cand_f.append(None if jf is None else ron[jf])
        n = a.n
        both = Rows([lon, cand_b, cand_f, [None] * n], n)
        forward = pick(both) if node.strategy == "nearest" else [node.strategy == "forward"] * n
        match = [jf if jb is None or (jf is not None and fw is True) else jb
                 for jb, jf, fw in zip(hit_b, hit_f, forward)]
        if within is not None:
            ok = within(Rows([lon, cand_b, cand_f, [None if j is None else ron[j] for j in match]], n))
            match = [j if good is True else None for j, good in zip(match, ok)]
        return Rows(a.columns + [_gather(b.columns[c], match) for c in keep], n)
    return run


@translate.register
def _(node: N.Explode, ctx: Ctx) -> Thunk:
    child = translate(node.input, ctx)
    schema = node.input.schema
    at = [schema.names.index(n) for n in node.columns]

    def run() -> Rows:
        rows = child()
        lists = [rows.columns[i] for i in at]
        take, elements = [], [[] for _ in at]
        for r in range(rows.n):
            values = [[None] if (v is None and node.keep_nulls) or (v == [] and node.empty_as_null) else v or []
                      for v in (col[r] for col in lists)]
            if len({len(v) for v in values}) > 1:
                raise ExecutionError(f"explode: the lists of {', '.join(node.columns)} in row {r} have lengths "
                                     f"{[len(v) for v in values]}; exploded together they must be equal")
            take.extend([r] * len(values[0]))
            for out, v in zip(elements, values):
                out.extend(v)
        out = rows.take(take)
        for i, e in zip(at, elements):
            out.columns[i] = e
        return out
    return run

"""IR -> SQL as sqlglot expressions: one visitor for nodes, one for expressions, no execution.

Every node becomes one CTE (`WITH q0 AS (...), q1 AS (...) SELECT ... FROM qN`) that reads
only the CTEs of its inputs, so each function below is small and self-contained. What the
three dialects do differently is asked of `Dialect` (see dialect.py and one file per dialect).
Where the engine binds a chain of CTEs in more time than one SELECT (DuckDB: `Dialect.flat`), each
CTE that only projects, filters and inner-joins is then merged into the one that reads it (`_flatten`).

Identifiers are always quoted `exp.Identifier(quoted=True)` and literals are built with
`exp.Literal`, so sqlglot escapes both: user text never becomes SQL syntax.

Row order is data: a Sort adds a hidden ROW_NUMBER column that Filter, Project, Limit and
Distinct carry along and the final SELECT orders by, because SQL does not promise that a
CTE's ORDER BY survives the next SELECT; a plan that ends in a sort orders the final SELECT by its keys.

A value the SQL would spell out more than once (the argument a CASE guard of exp, log or a cast
tests and then computes) is bound once instead: a column of a layer below the node's SELECT
(`SELECT *, value AS b FROM ...`), read by name at each use. So the text grows linearly with
the plan, however deep its expressions nest (see `Exprs.apply`).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import singledispatch

import pyarrow as pa
from sqlglot import exp

from eidos.errors import UnsupportedError
from eidos.hal import coverage as C
from eidos.hal import sql_guard
from eidos.hal.coverage import Coverage
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir import typing as TY
from eidos.ir.dtypes import DType
from eidos.ir.durations import parse_duration
from eidos.ir.evaluate import can_fail
from eidos.ir.schema import Schema
from eidos.ir.typing import infer, promote

# ---------------------------------------------------------------- small builders

def ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def column(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def paren(e: exp.Expression) -> exp.Expression:
    return e if isinstance(e, (exp.Paren, exp.Column, exp.Literal, exp.Null, exp.Boolean)) else exp.Paren(this=e)


def binop(cls: type, a: exp.Expression, b: exp.Expression) -> exp.Expression:
    return exp.Paren(this=cls(this=paren(a), expression=paren(b)))


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    """A function call rendered exactly as named, in every dialect."""
    return exp.Anonymous(this=name, expressions=list(args))


def case(branches: list[tuple[exp.Expression, exp.Expression]], default: exp.Expression | None) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in branches], default=default)


def number(v: int | float | str) -> exp.Expression:
    text = str(v)
    if text.startswith("-"):
        return exp.Paren(this=exp.Neg(this=exp.Literal.number(text[1:])))
    return exp.Literal.number(text)


def string(s: str) -> exp.Literal:
    return exp.Literal.string(s)


NULL = exp.Null()


# ---------------------------------------------------------------- what a translation produces

@dataclass
class Query:
    """A whole plan as one SQL statement, plus what the executor must provide for it."""

    sql: str
    arrow: dict[str, pa.Table] = field(default_factory=dict)   # view name -> in-memory table to register
    sources: list = field(default_factory=list)                # the plan's sources, in scan order
    exact: Callable[[], str] | None = None   # the statement to run where `sql` raised (Dialect.exact_form)


@dataclass(frozen=True)
class Rel:
    """A translated node: its CTE, its data columns' SQL names (c0, c1, ... in schema order; user
    names never reach the SQL except where a source is read, since engines fold identifier case and
    PostgreSQL cuts names at 63 bytes), and its hidden order columns."""

    name: str
    columns: tuple[str, ...]
    order: tuple[str, ...] = ()

    def refs(self, schema: Schema, alias: str | None = None) -> dict[str, exp.Expression]:
        """User column name -> SQL column."""
        return {user: column(sql, alias) for user, sql in zip(schema.names, self.columns)}


def slots(n: int) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in range(n))


def by_name(names) -> dict[str, exp.Expression]:
    """A source read by its own column names."""
    return {c: column(c) for c in names}


def positional(names) -> dict[str, exp.Expression]:
    """A source whose columns the lane renamed c0, c1, ... as it read them."""
    return {c: column(s) for c, s in zip(names, slots(len(names)))}


class Ctx:
    """State of one translation: the CTEs so far and what the scans need."""

    def __init__(self, dialect):
        self.dialect = dialect
        self.ctes: list[tuple[str, exp.Expression]] = []
        self.arrow: dict[str, pa.Table] = {}
        self.sources: list = []
        self.reading: tuple[str, ...] = ()   # the columns the scan being translated reads
        self.done: dict[N.Node, Rel] = {}    # each Aggregate's relation (see node)
        self._n = 0

    def raw(self, source) -> exp.Expression:
        """A query source as a table: the tree of its checked query (eidos.hal.sql_guard), rendered
        with the rest of the statement, so the plan's own text never reaches the database."""
        return exp.Subquery(this=sql_guard.statement(source), alias=exp.TableAlias(this=ident(self.fresh("raw"))))

    def fresh(self, stem: str = "q") -> str:
        self._n += 1
        return f"__eidos_{stem}{self._n}"

    def add(self, select: exp.Expression, n_columns: int, order: tuple[str, ...] = ()) -> Rel:
        return Rel(self.cte(select), slots(n_columns), order)

    def cte(self, select: exp.Expression) -> str:
        name = self.fresh()
        self.ctes.append((name, select))
        return name


def to_sql(plan: N.Node, dialect) -> Query:
    """The plan as one SQL statement in `dialect`; result columns are positional (c0, c1, ...). A plan that
    ends in a sort (or a sort's limit) is ordered by the sort's keys in the final SELECT itself (no row
    number: nothing reads the rows after it)."""
    ctx = Ctx(dialect)
    sort = plan.input if isinstance(plan, N.Limit) and isinstance(plan.input, N.Sort) else plan
    if isinstance(sort, N.Sort):
        rel, keys = _sort_keys(sort, ctx)
        for c in [c for k in keys for c in k.find_all(exp.Column)]:
            c.set("table", ident(rel.name))   # the input's columns, whatever the SELECT names its own
        final = exp.select(*[column(c, rel.name) for c in rel.columns]).from_(_from(rel)).order_by(*keys)
        if sort is not plan:
            final = final.limit(exp.Literal.number(plan.n))
            if plan.offset:
                final = final.offset(exp.Literal.number(plan.offset))
    else:
        rel = node(plan, ctx)
        final = exp.select(*[column(c) for c in rel.columns]).from_(_from(rel))
        if rel.order:
            final = final.order_by(*[exp.Ordered(this=column(o), desc=False, nulls_first=False) for o in rel.order])
    ctes = _flatten(ctx.ctes, final) if dialect.flat else ctx.ctes
    with_ = exp.With(expressions=[exp.CTE(this=q, alias=exp.TableAlias(this=ident(n))) for n, q in ctes])
    final.set("with_" if "with_" in exp.Select.arg_types else "with", with_)
    return Query(final.sql(dialect=dialect.sqlglot), ctx.arrow, ctx.sources)


# ---------------------------------------------------------------- one SELECT where the engine would make one

_FROM = "from_" if "from_" in exp.Select.arg_types else "from"
_NOT_PLAIN = ("group", "having", "qualify", "order", "limit", "offset", "distinct", "windows", "laterals")


def _flatten(ctes: list[tuple[str, exp.Expression]], final: exp.Select) -> list[tuple[str, exp.Expression]]:
    """The CTEs left after each one read once that only projects, filters and inner-joins (`_plain`) is merged
    into the SELECT that reads it: its tables joined there, its filter added to that WHERE, its columns' values
    put where they are read (one that is more than a column or its cast only where read once, so the text
    stays linear). What DuckDB's optimizer makes of the SQL is the same; binding one SELECT instead of a chain
    of them (a CTE and its column list per node) is what costs less: TPC-H's plans bind in half the time."""
    bodies = dict(ctes)
    reads = Counter(t.name for q in [*bodies.values(), final] for t in q.find_all(exp.Table) if t.name in bodies)
    fresh = iter(range(1 << 62))
    for name, q in [*ctes, (None, final)]:
        if name is not None and name not in bodies:
            continue
        while _absorbs(q):
            item = next((i for i in _items(q) if isinstance(i, exp.Table) and not i.args.get("db")
                         and reads[i.name] == 1 and i.name in bodies and _plain(bodies[i.name], q, i)), None)
            if item is None:
                break
            _merge(q, item, bodies.pop(item.name), fresh)
    return [(n, q) for n, q in ctes if n in bodies]


def _items(q: exp.Select) -> list[exp.Expression]:
    return [q.args[_FROM].this] + [j.this for j in q.args.get("joins") or []]


def _inner(q: exp.Select) -> bool:
    return all(not j.args.get("side") and (j.args.get("kind") or "INNER").upper() in ("INNER", "CROSS")
               for j in q.args.get("joins") or [])


def _absorbs(q: exp.Expression) -> bool:
    """A SELECT of inner-joined tables (a filter moves across them) that names its columns, and whose columns
    name their table unless it reads one (so none can come to read a table merged into it)."""
    if not (isinstance(q, exp.Select) and _inner(q) and not any(isinstance(e, exp.Star) for e in q.expressions)
            and all(isinstance(i, (exp.Table, exp.Subquery)) for i in _items(q))):
        return False
    alone = len(_items(q)) == 1
    return all(c.table or (alone and c.find_ancestor(exp.Select) is q) for c in q.find_all(exp.Column))


def _calls(q: exp.Expression, names) -> bool:
    return any(f.name.lower() in names for f in q.find_all(exp.Anonymous))


def _plain(y: exp.Expression, q: exp.Select, item: exp.Table) -> bool:
    """Whether `y` only projects, filters and inner-joins tables (no aggregate, window, order, limit, subquery,
    or error() that a filter moved past it could change), and what `q` reads of it may be put in place."""
    if not (_absorbs(y) and all(isinstance(i, exp.Table) for i in _items(y))
            and not any(y.args.get(k) for k in _NOT_PLAIN)):
        return False
    if y.find(exp.Window, exp.AggFunc, exp.Subquery, exp.Exists, exp.Union, exp.Unnest) or _calls(y, ("error", "list")):
        return False
    if _calls(q, ("error",)):
        return False
    values, found = _values(y), _reads(q, item)
    if any(_literal(values[c.name]) and c.find_ancestor(exp.Order, exp.Group, exp.Window) for c in found):
        return False   # ORDER BY 1 and GROUP BY 1 name a position, ORDER BY 'a' is refused
    reads = Counter(c.name for c in found)
    return all(_cheap(values[name]) or k == 1 for name, k in reads.items())


def _cheap(e: exp.Expression) -> bool:
    """A value spelled out at every read: a column, a literal, or a cast of either."""
    while isinstance(e, (exp.Cast, exp.Paren)):
        e = e.this
    return isinstance(e, (exp.Column, exp.Literal, exp.Null, exp.Boolean))


def _literal(e: exp.Expression) -> bool:
    while isinstance(e, exp.Paren):
        e = e.this
    return isinstance(e, (exp.Literal, exp.Null, exp.Boolean, exp.Neg))


def _values(y: exp.Select) -> dict[str, exp.Expression]:
    return {e.alias_or_name: e.this if isinstance(e, exp.Alias) else e for e in y.expressions}


def _reads(q: exp.Select, item: exp.Table) -> list[exp.Column]:
    """The columns of `q` that read `item`: those qualified by its alias (or name), and where `q` reads one
    table, its unqualified columns outside subqueries, but not an ORDER BY's name of q's own column."""
    ref = item.alias_or_name
    alone = len(_items(q)) == 1
    own = {e.alias_or_name for e in q.expressions}
    order = q.args.get("order")
    out = []
    for c in q.find_all(exp.Column):
        if c.table:
            if c.table == ref:
                out.append(c)
        elif alone and c.find_ancestor(exp.Select) is q and not (
                c.name in own and order is not None and c.find_ancestor(exp.Order) is order):
            out.append(c)
    return out


def _merge(q: exp.Select, item: exp.Table, y: exp.Select, fresh) -> None:
    """`y`'s tables (under new aliases), joins and filter put into `q` in place of `item`, and each column
    of `q` that read `item` replaced by its value."""
    reads = _reads(q, item)
    aliases = {}
    for i in _items(y):
        aliases[i.alias_or_name] = f"__eidos_t{next(fresh)}"
        i.set("alias", exp.TableAlias(this=ident(aliases[i.alias_or_name])))
    alone = len(aliases) == 1 and next(iter(aliases.values()))
    for c in y.find_all(exp.Column):
        c.set("table", ident(aliases[c.table] if c.table else alone))
    values = _values(y)
    for c in reads:
        value = values[c.name].copy()
        if isinstance(c.parent, exp.Select) and c.arg_key == "expressions":
            c.replace(_named(value, c.name))   # the SELECT's own column keeps its name
        else:
            c.replace(_fit(value, c.parent))
    first, joins = _items(y)[0], list(y.args.get("joins") or [])
    mine = list(q.args.get("joins") or [])
    at = next((k for k, j in enumerate(mine) if j.this is item), None)
    if at is None:   # y was q's FROM
        q.set(_FROM, exp.From(this=first))
        q.set("joins", joins + mine)
    else:   # y was joined: its tables joined where it was, q's condition on the last of them
        on = mine[at].args.get("on")
        head = exp.Join(this=first, kind="CROSS") if joins or on is None else exp.Join(this=first, on=on)
        if joins and on is not None:
            last = joins[-1]
            last.set("on", exp.and_(last.args["on"], on) if last.args.get("on") else on)
        q.set("joins", mine[:at] + [head] + joins + mine[at + 1:])
    if y.args.get("where"):
        where = y.args["where"].this
        q.set("where", exp.Where(this=exp.and_(q.args["where"].this, where) if q.args.get("where") else where))


def _from(rel: Rel, alias: str | None = None) -> exp.Expression:
    table = exp.Table(this=ident(rel.name))
    if alias:
        table.set("alias", exp.TableAlias(this=ident(alias)))
    return table


def _select(rel: Rel, items: list[exp.Expression], *, carry_order: bool = True) -> exp.Select:
    order = [column(o) for o in rel.order] if carry_order else []
    return exp.select(*items, *order).from_(_from(rel))


def _named(e: exp.Expression, name: str) -> exp.Expression:
    return exp.Alias(this=e, alias=ident(name))


def _outputs(exprs: list[exp.Expression]) -> list[exp.Expression]:
    return [_named(e, c) for e, c in zip(exprs, slots(len(exprs)))]


# ---------------------------------------------------------------- nodes

def node(n: N.Node, ctx: Ctx) -> Rel:
    """n's relation. An Aggregate is translated once per statement, so one the plan uses twice (TPC-H
    Q15's revenue, joined and reduced to its maximum) is one CTE read twice, which the engine
    computes once (DuckDB and PostgreSQL materialize a CTE read twice); other nodes stay one CTE
    per use (a shared scan is better read twice than materialized)."""
    if not isinstance(n, N.Aggregate):
        return translate_node(n, ctx)
    rel = ctx.done.get(n)
    if rel is None:
        rel = ctx.done[n] = translate_node(n, ctx)
    return rel


@singledispatch
def translate_node(n: N.Node, ctx: Ctx) -> Rel:
    raise UnsupportedError(f"the {ctx.dialect.name} lane cannot run plan node {type(n).__name__}")


@translate_node.register
def _(n: N.Scan, ctx: Ctx) -> Rel:
    ctx.sources.append(n.source)
    names = n.columns if n.columns is not None else n.source.schema.names
    ctx.reading = tuple(names)
    table, refs = ctx.dialect.scan(n.source, ctx)
    items = [ctx.dialect.scan_column(refs[c], n.source.schema[c], n.source) for c in names]
    return ctx.add(exp.select(*_outputs(items)).from_(table), len(items))


@translate_node.register
def _(n: N.Filter, ctx: Ctx) -> Rel:
    rel = node(n.input, ctx)
    x = Exprs(ctx, n.input.schema, rel.refs(n.input.schema))
    predicate = x(n.predicate)
    if can_fail(n.predicate, n.input.schema):
        # eidos: computed whole on every row (semantics 9); an engine splits `a AND b` and computes the part
        # that can fail only on the rows the other kept: IS TRUE keeps it one predicate.
        predicate = exp.Is(this=paren(predicate), expression=exp.true())
    sel = _select(x.layered(rel), [column(c) for c in rel.columns]).where(predicate)
    return ctx.add(sel, len(rel.columns), rel.order)


@translate_node.register
def _(n: N.Project, ctx: Ctx) -> Rel:
    rel = node(n.input, ctx)
    x = Exprs(ctx, n.input.schema, rel.refs(n.input.schema))
    x.order = tuple(column(o) for o in rel.order)   # the row order a window reads, and its ties
    items = [x.typed(e, n.schema[name]) for name, e in n.columns]
    return ctx.add(_select(x.layered(rel), _outputs(items)), len(items), rel.order)


@translate_node.register
def _(n: N.Aggregate, ctx: Ctx) -> Rel:
    rel = node(n.input, ctx)
    schema = n.input.schema
    x = Exprs(ctx, schema, rel.refs(schema))
    # Stage 1: the keys as hidden columns k0, k1, ... next to the input columns.
    keys = {name: f"k{i}" for i, (name, _) in enumerate(n.keys)}
    items = [column(c) for c in rel.columns]
    items += [_named(x.typed(e, n.schema[name]), keys[name]) for name, e in n.keys]
    stage = ctx.add(_select(x.layered(rel), items, carry_order=False), len(rel.columns))
    # Stage 2: group; outside an aggregation a key's name means the key. Each aggregation is first
    # a column of its own (Exprs.aggregations), put back in place unless the SQL reads it twice.
    key_refs = {name: column(keys[name]) for name in keys}
    ax = Exprs(ctx, _with_keys(schema, n), stage.refs(schema), outside_agg=key_refs)
    out = [column(keys[name]) for name, _ in n.keys]
    out += [ax.typed(e, n.schema[name]) for name, e in n.aggs]
    below = ax.layered(stage)
    # Without keys it is one row, also when no aggregate is left in the SQL (the sum of a null literal is
    # a constant): a hidden COUNT(*) beyond the node's columns makes the SELECT an aggregate.
    hidden = [] if keys else [exp.Count(this=exp.Star())]
    aggs = dict(ax.aggregations)
    uses = Counter(c.name for o in out for c in o.find_all(exp.Column) if c.name in aggs)
    apart = bool(ax.after) or any(k > 1 for k in uses.values())
    if not apart:
        sel = exp.select(*_outputs([_put(o, aggs) for o in out] + hidden)).from_(_from(below))
    else:  # the aggregations as columns, and the node's expressions over them in a SELECT of their own
        sel = exp.select(*[column(k) for k in keys.values()], *[_named(v, a) for a, v in aggs.items()],
                         *[_named(h, ctx.fresh("n")) for h in hidden]).from_(_from(below))
    if keys:
        sel = sel.group_by(*[column(k) for k in keys.values()])
    if apart:
        grouped = Rel(ctx.cte(sel), tuple(keys.values()))
        sel = exp.select(*_outputs(out)).from_(_from(ax.layered(grouped, after=True)))
    return ctx.add(sel, len(out))


def _put(e: exp.Expression, values: dict[str, exp.Expression]) -> exp.Expression:
    """`e` with each column named in `values` (each read once in it) replaced by its value."""
    if isinstance(e, exp.Column) and e.name in values:
        return values[e.name]
    for c in list(e.find_all(exp.Column)):
        if c.name in values:
            c.replace(_fit(values[c.name], c.parent))
    return e


def _with_keys(schema: Schema, n: N.Aggregate) -> Schema:
    extra = [(name, infer(e, schema)) for name, e in n.keys if name not in schema]
    return Schema(list(schema.items()) + extra)


@translate_node.register
def _(n: N.Join, ctx: Ctx) -> Rel:
    left, right = node(n.left, ctx), node(n.right, ctx)
    d = ctx.dialect
    ls, rs = n.left.schema, n.right.schema
    lref, rref = left.refs(ls, "l"), right.refs(rs, "r")
    if n.how in ("semi", "anti"):
        if d.semi_join_in:
            test = _member(n, d, lref, rref, right)
        else:
            sub = exp.select(exp.Literal.number(1)).from_(_from(right, "r")).where(_join_condition(n, d, lref, rref))
            test = exp.Exists(this=sub)
            if n.how == "anti":
                test = exp.Not(this=test)
        sel = exp.select(*[column(c, "l") for c in left.columns], *[column(o, "l") for o in left.order])
        sel = sel.from_(_from(left, "l")).where(test)
        return ctx.add(sel, len(left.columns), left.order)
    out = n.schema
    items = []
    for name in ls.names:
        if name in n.left_on and n.how != "cross":
            rk = n.right_on[n.left_on.index(name)]
            t = out[name]
            lv, rv = d.cast(lref[name], ls[name], t), d.cast(rref[rk], rs[rk], t)
            items.append(exp.Coalesce(this=lv, expressions=[rv]) if n.how in ("right", "full") else lv)
        else:
            items.append(lref[name])
    items += [rref[c] for c in rs.names if c not in n.right_on]
    sel = exp.select(*_outputs(items)).from_(_from(left, "l"))
    if n.how == "cross":
        sel = sel.join(_from(right, "r"), join_type="CROSS")
    else:
        kind = {"inner": "INNER", "left": "LEFT", "right": "RIGHT", "full": "FULL"}[n.how]
        sel = sel.join(_from(right, "r"), on=_join_condition(n, d, lref, rref), join_type=kind)
    return ctx.add(sel, len(items))


def _member(n: N.Join, d, lref, rref, right: Rel) -> exp.Expression:
    """A semi join as `keys IN (SELECT keys FROM right)`, an anti join as a null left key (it matches
    nothing) or `NOT keys IN` the right's keys that have no null: an uncorrelated set the engine
    builds once, where a correlated EXISTS rescans the right side per row on an engine without
    hash joins (SQLite)."""
    ls, rs = n.left.schema, n.right.schema
    lks, rks = [], []
    for lk, rk in zip(n.left_on, n.right_on):
        t = promote(ls[lk], rs[rk], op="join")
        lks.append(paren(d.cast(lref[lk], ls[lk], t)))
        rks.append(paren(d.cast(rref[rk], rs[rk], t)))
    sub = exp.select(*rks).from_(_from(right, "r"))
    if n.how == "anti":
        sub = sub.where(exp.and_(*(exp.Not(this=exp.Is(this=k, expression=NULL)) for k in rks)))
    test = exp.In(this=lks[0] if len(lks) == 1 else exp.Tuple(expressions=lks), query=sub.subquery())
    if n.how == "semi":
        return test
    return exp.Paren(this=exp.or_(*(exp.Is(this=k, expression=NULL) for k in lks), exp.Not(this=exp.Paren(this=test))))


def _join_condition(n: N.Join, d, lref, rref) -> exp.Expression:
    ls, rs = n.left.schema, n.right.schema
    conds = []
    for lk, rk in zip(n.left_on, n.right_on):
        t = promote(ls[lk], rs[rk], op="join")
        conds.append(d.equal(d.cast(lref[lk], ls[lk], t), d.cast(rref[rk], rs[rk], t), t))
    cond = conds[0]
    for c in conds[1:]:
        cond = exp.And(this=cond, expression=c)
    return cond


def _sort_keys(n: N.Sort, ctx: Ctx) -> tuple[Rel, list[exp.Ordered]]:
    """The sort's input, layered with any values its keys bind, and its keys: ties keep the order they
    had (a stable sort), when there was one."""
    rel = node(n.input, ctx)
    x = Exprs(ctx, n.input.schema, rel.refs(n.input.schema))
    keys = []
    for k in n.keys:
        t = infer(k.expr, n.input.schema)
        keys.append(exp.Ordered(this=ctx.dialect.sort_key(x(k.expr), t), desc=k.descending,
                                nulls_first=not k.nulls_last))
    keys += [exp.Ordered(this=column(o), desc=False, nulls_first=False) for o in rel.order]
    return x.layered(rel), keys


def _ordinal(rel_name: str, columns: tuple[str, ...], keys: list[exp.Ordered], ctx: Ctx) -> Rel:
    """The rows of `rel_name` with a hidden order column: their row number by `keys`."""
    order = ctx.fresh("o")
    rank = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=keys))
    sel = exp.select(*[column(c) for c in columns], _named(rank, order)).from_(exp.Table(this=ident(rel_name)))
    return ctx.add(sel, len(columns), (order,))


@translate_node.register
def _(n: N.Sort, ctx: Ctx) -> Rel:
    rel, keys = _sort_keys(n, ctx)
    return _ordinal(rel.name, rel.columns, keys, ctx)


def _top(n: N.Limit, ctx: Ctx) -> Rel:
    """A limit of a sort as the engine's top-N: one SELECT ... ORDER BY keys LIMIT n (each key a column
    of it, so the ORDER BY names plain columns an index or a heap serves), then the row number over the
    rows left, not over every row (which would sort them all)."""
    rel, keys = _sort_keys(n.input, ctx)
    names = [ctx.fresh("k") for _ in keys]
    by = [exp.Ordered(this=column(name), desc=k.args.get("desc"), nulls_first=k.args.get("nulls_first"))
          for k, name in zip(keys, names)]
    top = exp.select(*[column(c) for c in rel.columns], *[_named(k.this, name) for k, name in zip(keys, names)])
    top = top.from_(_from(rel)).order_by(*by).limit(exp.Literal.number(n.n))
    if n.offset:
        top = top.offset(exp.Literal.number(n.offset))
    return _ordinal(ctx.cte(top), rel.columns, by, ctx)


@translate_node.register
def _(n: N.Limit, ctx: Ctx) -> Rel:
    if isinstance(n.input, N.Sort):
        return _top(n, ctx)
    rel = node(n.input, ctx)
    sel = _select(rel, [column(c) for c in rel.columns])
    if rel.order:
        sel = sel.order_by(*[exp.Ordered(this=column(o), desc=False, nulls_first=False) for o in rel.order])
    sel = sel.limit(exp.Literal.number(n.n))
    if n.offset:
        sel = sel.offset(exp.Literal.number(n.offset))
    return ctx.add(sel, len(rel.columns), rel.order)


@translate_node.register
def _(n: N.Distinct, ctx: Ctx) -> Rel:
    rel = node(n.input, ctx)
    if not rel.order:
        sel = exp.select(*[column(c) for c in rel.columns]).from_(_from(rel)).distinct()
        return ctx.add(sel, len(rel.columns))
    # Keep each row's first position: group the rows and take the smallest order value.
    first = ctx.fresh("o")
    sel = exp.select(*[column(c) for c in rel.columns],
                     _named(exp.Min(this=column(rel.order[0])), first)).from_(_from(rel))
    sel = sel.group_by(*[column(c) for c in rel.columns])
    return ctx.add(sel, len(rel.columns), (first,))


@translate_node.register
def _(n: N.Unique, ctx: Ctx) -> Rel:
    """The rows numbered within each `subset` group (by their order; any order for keep="any"), the first
    (last) kept; for keep="none" the rows of groups of one."""
    rel = node(n.input, ctx)
    if n.keep in ("first", "last") and not rel.order:
        raise UnsupportedError(f"the {ctx.dialect.name} lane has no row order here for distinct(keep={n.keep!r})")
    refs = rel.refs(n.input.schema)
    part = [refs[c] for c in n.subset]
    tag = ctx.fresh("n")
    if n.keep == "none":
        win = exp.Window(this=exp.Count(this=exp.Star()), partition_by=part)
    else:
        order = [exp.Ordered(this=column(o), desc=n.keep == "last", nulls_first=False) for o in rel.order]
        win = exp.Window(this=exp.RowNumber(), partition_by=part,
                         order=exp.Order(expressions=order) if order else None)
    numbered = ctx.add(_select(rel, [column(c) for c in rel.columns] + [_named(win, tag)]), len(rel.columns), rel.order)
    sel = _select(numbered, [column(c) for c in rel.columns]).where(exp.EQ(this=column(tag), expression=number(1)))
    return ctx.add(sel, len(rel.columns), rel.order)


@translate_node.register
def _(n: N.AsofJoin, ctx: Ctx) -> Rel:
    """Window functions over one sorted stream, so each engine sorts once (no correlated search): the right
    rows cut to the first by content of each (`by`, `on`) and numbered j in (`by`, `on`) order; the keys of
    both sides in one UNION ALL; per `by` partition in `on` order, a left row's backward candidate is the
    largest j at or before it (right rows first among equal `on`), its forward one the smallest j at or after
    it (left rows first). eidos.ir.asof's expressions then choose the nearest and test the tolerance, and the
    chosen right row joins back by j."""
    from eidos.ir import asof

    left, right = node(n.left, ctx), node(n.right, ctx)
    d, ls, rs = ctx.dialect, n.left.schema, n.right.schema
    t = asof.on_type(n)
    bts = [promote(ls[a], rs[b], op="join") for a, b in zip(n.left_by, n.right_by)]
    lref, rref = left.refs(ls), right.refs(rs)
    g = [f"g{i}" for i in range(len(bts))]

    def keys(ref, schema, on, by) -> list[exp.Expression]:
        return [d.cast(ref[on], schema[on], t)] + [d.cast(ref[c], schema[c], bt) for c, bt in zip(by, bts)]

    def known(cols: list[str]) -> exp.Expression:
        return exp.and_(*(exp.Not(this=exp.Is(this=column(c), expression=NULL)) for c in cols))

    first = ctx.fresh("n")
    content = [exp.Ordered(this=d.sort_key(rref[c], rs[c]), desc=False, nulls_first=False) for c in rs.names]
    rk = keys(rref, rs, n.right_on, n.right_by)
    r1 = exp.select(*[column(c) for c in right.columns], *[_named(k, c) for k, c in zip(rk, ["v", *g])]).from_(_from(right))
    r1 = ctx.cte(exp.select(exp.Star(), _named(exp.Window(this=exp.RowNumber(), partition_by=[column(c) for c in ["v", *g]],
                                                            order=exp.Order(expressions=content)), first))
                 .from_(exp.Subquery(this=r1, alias=exp.TableAlias(this=ident(ctx.fresh("r"))))).where(known(["v", *g])))
    in_order = [exp.Ordered(this=d.sort_key(column(c), bt)) for c, bt in zip(g, bts)] + [
        exp.Ordered(this=d.sort_key(column("v"), t))]
    r2 = exp.select(*[column(c) for c in right.columns], column("v"), *[column(c) for c in g],
                    _named(exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=in_order)), "j"))
    r2 = ctx.cte(r2.from_(exp.Table(this=ident(r1))).where(exp.EQ(this=column(first), expression=number(1))))
    lk = keys(lref, ls, n.left_on, n.left_by)
    l1 = _select(left, [column(c) for c in left.columns] + [_named(k, c) for k, c in zip(lk, ["v", *g])]
                 + [_named(exp.Window(this=exp.RowNumber()), "i")])
    l1 = Rel(ctx.cte(l1), left.columns, left.order)
    side = [column("v"), *[column(c) for c in g]]
    stream = exp.Union(
        this=exp.select(column("i"), *side, _named(number(1), "s"), _named(d.cast(NULL, T.Null, T.Int64, force=True), "j"))
        .from_(_from(l1)).where(known(["v", *g])),
        expression=exp.select(_named(d.cast(NULL, T.Null, T.Int64, force=True), "i"), *side, _named(number(0), "s"),
                              column("j")).from_(exp.Table(this=ident(r2))), distinct=False)
    part = [column(c) for c in g] or None

    def candidate(agg, desc: bool, frame: exp.WindowSpec) -> exp.Expression:
        order = [exp.Ordered(this=d.sort_key(column("v"), t)), exp.Ordered(this=column("s"), desc=desc)]
        return exp.Window(this=agg(this=column("j")), partition_by=part, order=exp.Order(expressions=order), spec=frame)

    back = candidate(exp.Max, False, exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"))
    ahead = candidate(exp.Min, True, exp.WindowSpec(kind="ROWS", start="CURRENT ROW", end="UNBOUNDED", end_side="FOLLOWING"))
    w = exp.select(column("i"), column("s"), _named(back, "jb"), _named(ahead, "jf"))
    w = w.from_(exp.Subquery(this=stream, alias=exp.TableAlias(this=ident(ctx.fresh("u")))))
    w = ctx.cte(exp.select(column("i"), column("jb"), column("jf")).from_(
        exp.Subquery(this=w, alias=exp.TableAlias(this=ident(ctx.fresh("w"))))).where(
        exp.EQ(this=column("s"), expression=number(1))))
    jb = column("jb", "w") if n.strategy != "forward" else d.cast(NULL, T.Null, T.Int64, force=True)
    jf = column("jf", "w") if n.strategy != "backward" else d.cast(NULL, T.Null, T.Int64, force=True)
    found = exp.select(*[column(c, "l") for c in l1.columns], *[column(o, "l") for o in l1.order], column("v", "l"),
                       _named(jb, "jb"), _named(jf, "jf"), _named(column("v", "rb"), "b"), _named(column("v", "rf"), "f"))
    found = found.from_(_from(l1, "l")).join(exp.Table(this=ident(w), alias=exp.TableAlias(this=ident("w"))),
                                             on=exp.EQ(this=column("i", "l"), expression=column("i", "w")), join_type="LEFT")
    for name, ref in (("rb", jb), ("rf", jf)):
        found = found.join(exp.Table(this=ident(r2), alias=exp.TableAlias(this=ident(name))),
                           on=exp.EQ(this=column("j", name), expression=ref.copy()), join_type="LEFT")
    stage = Rel(ctx.cte(found), l1.columns + ("v", "jb", "jf", "b", "f"), left.order)
    x = Exprs(ctx, asof.schema(n), {"l": column("v"), "b": column("b"), "f": column("f")})
    forward = x(asof.forward_wins(n)) if n.strategy == "nearest" else d.boolean(n.strategy == "forward")
    take_f = exp.or_(exp.Is(this=column("jb"), expression=NULL),
                     exp.and_(exp.Not(this=exp.Is(this=column("jf"), expression=NULL)), paren(forward)))
    below = x.layered(stage)
    chosen = _select(below, [column(c) for c in stage.columns] + [
        _named(case([(take_f, column("f"))], column("b")), "m"), _named(case([(take_f, column("jf"))], column("jb")), "jm")])
    stage = Rel(ctx.cte(chosen), stage.columns + ("m", "jm"), left.order)
    test = asof.within(n)
    if test is not None:
        x = Exprs(ctx, asof.schema(n), {"l": column("v"), "b": column("b"), "f": column("f"), "m": column("m")})
        kept = case([(x(test), column("jm"))], None)
        sel = _select(x.layered(stage), [column(c) for c in stage.columns[:-1]] + [_named(kept, "jm")])
        stage = Rel(ctx.cte(sel), stage.columns, left.order)
    rout = right.refs(rs, "r")
    items = [column(c, "l") for c in left.columns] + [rout[c] for c in n.right_outputs()]
    sel = exp.select(*_outputs(items), *[column(o, "l") for o in left.order]).from_(_from(stage, "l"))
    sel = sel.join(exp.Table(this=ident(r2), alias=exp.TableAlias(this=ident("r"))),
                   on=exp.EQ(this=column("j", "r"), expression=column("jm", "l")), join_type="LEFT")
    return ctx.add(sel, len(items), left.order)


@translate_node.register
def _(n: N.Union, ctx: Ctx) -> Rel:
    rels = [node(i, ctx) for i in n.inputs]
    ordered = any(r.order for r in rels)
    names = rels[0].columns
    which, within = ctx.fresh("o"), ctx.fresh("o")
    parts = []
    for i, r in enumerate(rels):
        items = [column(c) for c in names]
        if ordered:
            pos = column(r.order[0]) if r.order else exp.Literal.number(0)
            items += [_named(exp.Literal.number(i), which), _named(pos, within)]
        parts.append(exp.select(*items).from_(_from(r)))
    body = parts[0]
    for p in parts[1:]:
        body = exp.Union(this=body, expression=p, distinct=False)
    sel = exp.select(*[column(c) for c in names], *([column(which), column(within)] if ordered else []))
    sel = sel.from_(exp.Subquery(this=body, alias=exp.TableAlias(this=ident(ctx.fresh("u")))))
    return ctx.add(sel, len(names), (which, within) if ordered else ())


@translate_node.register
def _(n: N.Explode, ctx: Ctx) -> Rel:
    """A row per element: the first list unnested WITH ORDINALITY (i from 1), the others read at i after their
    lengths are checked equal to its. A null list is one null (keep_nulls) or none, an empty one one null
    (empty_as_null) or none. Rows keep their input order, then the list's."""
    import sqlglot

    rel, d, schema = node(n.input, ctx), ctx.dialect, n.input.schema
    at = [schema.names.index(c) for c in n.columns]
    lists = []
    for i in at:
        ref, t = column(rel.columns[i]), schema.dtypes[i]
        one_null, empty = (exp.Cast(this=exp.Array(expressions=v), to=d.sql_type(t)) for v in ([NULL], []))
        lists.append(case([(exp.Is(this=ref, expression=NULL), one_null if n.keep_nulls else empty)]
                          + [(exp.EQ(this=d.fn_list_len([ref], (t,), T.Int64, ()), expression=number(0)), one_null)]
                          * n.empty_as_null, ref))
    names = [ctx.fresh("l") for _ in lists]
    inner = Rel(ctx.cte(_select(rel, [column(c) for c in rel.columns] + [_named(v, m) for v, m in zip(lists, names)])),
                rel.columns, rel.order)
    first = column(names[0])
    size = [d.fn_list_len([column(m)], (schema.dtypes[i],), T.Int64, ()) for m, i in zip(names, at)]
    if len(names) > 1:
        differ = [exp.NEQ(this=s, expression=size[0]) for s in size[1:]]
        message = f"explode: the lists of {', '.join(n.columns)} in a row differ in length; exploded together " \
                  "they must be equal"
        first = case([(exp.or_(*differ), d.error(message, size[0], schema.dtypes[at[0]]))], first)
    u, e, i = ctx.fresh("u"), ctx.fresh("e"), ctx.fresh("i")
    join = sqlglot.parse_one(f'SELECT 1 FROM "x" CROSS JOIN LATERAL UNNEST("x") WITH ORDINALITY AS "{u}"("{e}", "{i}")',
                             read=d.sqlglot).args["joins"][0]
    join.find(exp.Unnest).set("expressions", [first])
    values = {c: column(rel.columns[k], inner.name) for k, c in enumerate(schema.names)}
    values[n.columns[0]] = column(e, u)
    for c, m in zip(n.columns[1:], names[1:]):
        values[c] = exp.Bracket(this=column(m, inner.name), expressions=[column(i, u)])
    order = [column(o, inner.name) for o in rel.order] + [column(i, u)] * bool(rel.order)
    sel = exp.select(*_outputs([values[c] for c in schema.names]), *[_named(o, f"o{k}") for k, o in enumerate(order)])
    sel = sel.from_(_from(inner))
    sel.set("joins", [join])
    if not rel.order:
        return ctx.add(sel, len(schema))
    keys = [exp.Ordered(this=column(f"o{k}"), desc=False, nulls_first=False) for k in range(len(order))]
    return _ordinal(ctx.cte(sel), slots(len(schema)), keys, ctx)


# ---------------------------------------------------------------- expressions

SMALL = 6  # nodes: a value this small (a column, a literal, a cast of either) is spelled out at each use


def small(e: exp.Expression) -> bool:
    return all(i < SMALL for i, _ in enumerate(e.walk()))


def _skippable(node: exp.Expression) -> bool:
    """Whether an engine may leave `node` uncomputed on some rows: it lies under AND, OR, CASE or COALESCE."""
    p = node.parent
    while p is not None:
        if isinstance(p, (exp.And, exp.Or, exp.Case, exp.If, exp.Coalesce)):
            return True
        p = p.parent
    return False


def _fit(value: exp.Expression, parent: exp.Expression | None) -> exp.Expression:
    """`value` put where a column was: parenthesized unless the place is a function's argument."""
    if parent is None or (isinstance(parent, exp.Func) and not isinstance(parent, exp.Binary)):
        return value
    return paren(value)


class Exprs:
    """Translates expressions over one input schema; `outside_agg` maps key names read outside aggregations.

    Values a rendering repeats are bound (`apply`, `bind`) as columns of layers below the node's
    SELECT, which the node reads from `layered(rel)`: `below` holds those over the input rows
    (inside aggregations too), `after` those over the grouped rows of an Aggregate, whose
    aggregations are then columns too (`aggregations`: name -> SQL). A value bound inside a
    `when` branch is computed only on the rows that take the branch (`guard`), as semantics 9 says.
    """

    def __init__(self, ctx: Ctx, schema: Schema, cols: dict[str, exp.Expression],
                 outside_agg: dict[str, exp.Expression] | None = None):
        self.ctx, self.d, self.schema, self.cols, self.keys = ctx, ctx.dialect, schema, cols, outside_agg
        self.in_agg = False
        self.guard: Guard | Shared | None = None
        self.below: list[tuple[str, exp.Expression]] = []
        self.after: list[tuple[str, exp.Expression]] = []
        self.aggregations: list[tuple[str, exp.Expression]] = []
        self.level: dict[str, int] = {}
        self.order: tuple[exp.Expression, ...] = ()   # a Project's input's order columns (windows read them)

    def dtype(self, e: E.Expr) -> DType:
        return infer(e, self.schema, allow_agg=self.keys is not None and not self.in_agg)

    def operand_types(self, e: E.Call) -> tuple[DType, ...]:
        if self.keys is not None and not self.in_agg and E.contains_agg(e):
            ty = TY._Typer(self.schema, "", allow_agg=True)
            if len(e.args) == 2:
                return ty.operands(*e.args, fn=e.fn)
            return tuple(ty(a) for a in e.args)
        return TY.operand_dtypes(e, self.schema)

    def __call__(self, e: E.Expr) -> exp.Expression:
        return expr(e, self)

    def typed(self, e: E.Expr, t: DType) -> exp.Expression:
        """`e` as a value of type `t` (its own type unless a weak literal adapts)."""
        if isinstance(e, E.Literal):
            return self.d.literal(e.value, t)
        return self.d.cast(self(e), self.dtype(e), t)

    # ------------------------------------------------------------ binding repeated values
    def apply(self, render, args: list[exp.Expression], fails=()) -> exp.Expression:
        """`render(args)`, with each argument that is not small and that the rendering reads more than
        once bound (a column read at each use); one read once stays in place. The rendering sees a
        stand-in column for each such argument, so whatever it does with it costs no more text. An
        argument that can fail (`fails`) is bound too where the rendering reads it under AND, OR, CASE or
        COALESCE, which the engine may skip: eidos computes it on every row (semantics 9)."""
        stand, values = [], {}
        for i, a in enumerate(args):
            if small(a) and not (fails and fails[i]):
                stand.append(a)
            else:
                name = f"__eidos_arg{i}"
                values[name] = a
                stand.append(column(name))
        out = render(stand)
        if not values:
            return out
        out = out.copy()  # a tree of its own (a rendering may put one node in several places)
        reads = Counter(c.name for c in out.find_all(exp.Column) if c.name in values)
        for c in out.find_all(exp.Column):
            if c.name in values and fails and fails[int(c.name.removeprefix("__eidos_arg"))] and _skippable(c):
                reads[c.name] += 1   # so it is bound
        put = {name: (values[name] if k == 1 else self.bind(values[name])) for name, k in reads.items()}
        if isinstance(out, exp.Column) and out.name in put:
            return put[out.name]
        for c in list(out.find_all(exp.Column)):
            if c.name in put:
                v = put[c.name]
                c.replace(_fit(v, c.parent) if reads[c.name] == 1 else v.copy())
        return out

    def bind(self, value: exp.Expression) -> exp.Column:
        """A column holding `value`, computed in the lowest layer that has what it reads."""
        if self.guard is not None:
            value = case([(self.guard.ref(), value)], None)
        name = self.ctx.fresh("b")
        self.level[name] = 1 + max((self.level[c.name] for c in value.find_all(exp.Column) if c.name in self.level),
                                   default=0)
        (self.below if self.keys is None or self.in_agg else self.after).append((name, value))
        return column(name)

    def layered(self, rel: Rel, *, after: bool = False) -> Rel:
        """`rel` with the bound values as columns beside its own, one SELECT per layer."""
        bindings = self.after if after else self.below
        layers: dict[int, list] = {}
        for name, value in bindings:
            layers.setdefault(self.level[name], []).append(_named(value, name))
        bindings.clear()
        for _, items in sorted(layers.items()):
            sel = self.d.layer(exp.select(exp.Star(), *items).from_(_from(rel)))
            rel = Rel(self.ctx.cte(sel), rel.columns, rel.order)
        return rel


class Shared:
    """A translated value read in several places only if a guard asks for it: then bound (on the rows of
    `guard`); `final()` is what the expression itself reads."""

    def __init__(self, x: Exprs, value: exp.Expression, guard):
        self.x, self.value, self.guard, self.col = x, value, guard, None

    def ref(self) -> exp.Expression:
        if self.col is None:
            if self.guard is None and small(self.value):
                return self.value.copy()
            saved, self.x.guard = self.x.guard, self.guard
            try:
                self.col = self.x.bind(self.value)
            finally:
                self.x.guard = saved
        return self.col.copy()

    def final(self) -> exp.Expression:
        return self.value if self.col is None else self.col


class Guard:
    """The rows on which a `when` branch's condition is computed: those of `outer` where `test()` holds
    (bound as a column when `outer` is a guard itself, so that nesting adds no text)."""

    def __init__(self, x: Exprs, outer, test):
        self.x, self.outer, self.test, self.col = x, outer, test, None

    def ref(self) -> exp.Expression:
        if self.outer is None:
            return self.test()
        if self.col is None:
            saved, self.x.guard = self.x.guard, self.outer
            try:
                self.col = self.x.bind(self.test())
            finally:
                self.x.guard = saved
        return self.col.copy()


@singledispatch
def expr(e: E.Expr, x: Exprs) -> exp.Expression:
    raise UnsupportedError(f"the {x.d.name} lane cannot translate expression {type(e).__name__}")


@expr.register
def _(e: E.Column, x: Exprs) -> exp.Expression:
    if x.keys is not None and not x.in_agg and e.name in x.keys:
        return x.keys[e.name].copy()
    return x.cols[e.name].copy()


@expr.register
def _(e: E.Literal, x: Exprs) -> exp.Expression:
    return x.d.literal(e.value, e.dtype)


@expr.register
def _(e: E.Alias, x: Exprs) -> exp.Expression:
    return x(e.expr)


@expr.register
def _(e: E.Cast, x: Exprs) -> exp.Expression:
    src = x.dtype(e.expr)
    if isinstance(e.expr, E.Literal) and e.expr.weak and src.is_numeric and e.dtype.is_numeric:
        src = e.expr.dtype
    return x.apply(lambda a: x.d.convert(a[0], src, e.dtype), [x(e.expr)])


@expr.register
def _(e: E.Case, x: Exprs) -> exp.Expression:
    # Only the branch a row takes is computed for it: a value bound inside a branch is computed on the
    # rows that take it (the condition, bound), a later condition on the rows no earlier one took.
    t = x.dtype(e)
    outer = reach = x.guard
    conds, values = [], []
    try:
        for c, v in e.branches:
            x.guard = reach
            cond = Shared(x, x(c), reach)
            x.guard = cond
            values.append(x.typed(v, t))
            conds.append(cond)
            reach = Guard(x, reach, lambda cond=cond: case([(cond.ref(), x.d.boolean(False))], x.d.boolean(True)))
        x.guard = reach
        otherwise = x.typed(e.otherwise, t)
    finally:
        x.guard = outer
    return case([(c.final(), v) for c, v in zip(conds, values)], otherwise)


@expr.register
def _(e: E.Agg, x: Exprs) -> exp.Expression:
    t = x.dtype(e)
    if e.fn == "count_rows":
        value = x.d.cast(exp.Count(this=exp.Star()), T.Int64, T.Int64, force=True)
    else:
        # The argument is computed on every row of the input, whatever the expression around the aggregation.
        x.in_agg, guard, x.guard = True, x.guard, None
        try:
            at = x.dtype(e.arg)
            value = x.d.exact_sum(e.arg, at, t, x) if e.fn == "sum" else None
            if value is None:
                value = x.apply(lambda a: x.d.aggregate(e.fn, a[0], at, t), [x(e.arg)])
        finally:
            x.in_agg, x.guard = False, guard
    if x.keys is None:
        return value
    name = x.ctx.fresh("a")
    x.aggregations.append((name, value))
    return column(name)


@expr.register
def _(e: E.Call, x: Exprs) -> exp.Expression:
    t = x.dtype(e)
    ts = x.operand_types(e)
    args = [x.typed(a, at) for a, at in zip(e.args, ts)]
    fails = [can_fail(a, x.schema) for a in e.args]
    return x.apply(lambda a: x.d.call(e.fn, a, ts, t, e.options), args, fails)


# ---------------------------------------------------------------- windows

# Aggregate functions of the SQL an aggregation renders to, which OVER (...) turns into window functions.
_AGGREGATE_CALLS = ("stddev_samp", "var_samp", "bool_and", "bool_or", "rank", "dense_rank")
_RUNNING = {"cum_sum": "sum", "cum_min": "min", "cum_max": "max", "cum_count": "count"}


@expr.register
def _(e: E.Window, x: Exprs) -> exp.Expression:
    """A window function as SQL's: the aggregation's SQL with OVER (PARTITION BY ... ORDER BY ... frame) on
    each aggregate call in it; ties of `order_by`, and no `order_by`, go by the input's order columns."""
    t = x.dtype(e)
    parts = [x(p) for p in e.partition_by]
    keys = [exp.Ordered(this=x.d.sort_key(x(o), x.dtype(o)), desc=e.descending, nulls_first=not e.nulls_last)
            for o in e.order_by]
    order = keys + [exp.Ordered(this=c.copy(), desc=False, nulls_first=False) for c in x.order]
    if not order and (e.fn in F.ORDERED_WINDOWS or e.options[:1] == ("ordinal",)):
        raise UnsupportedError(f"the {x.d.name} lane cannot read the row order of these rows for {e}: sort first")

    def over(value: exp.Expression, by: list | None = None, frame: exp.WindowSpec | None = None,
             extra: tuple = ()) -> exp.Expression:
        found = [n for n in value.find_all(exp.AggFunc, exp.Anonymous, exp.RowNumber)
                 if not isinstance(n, exp.Anonymous) or n.name.lower() in _AGGREGATE_CALLS]
        for n in found:
            w = exp.Window(this=n.copy(), partition_by=[p.copy() for p in parts + list(extra)] or None,
                           order=exp.Order(expressions=[o.copy() for o in by]) if by else None, spec=frame)
            if n is value:
                return w
            n.replace(w)
        return value

    def count(value: exp.Expression) -> exp.Expression:
        return x.d.cast(value, T.Int64, T.Int64, force=True)

    args = [x.typed(a, t) if e.fn == "shift" else x(a) for a in e.args]
    at = x.dtype(e.args[0]) if e.args else T.Null
    if e.fn in F.AGGREGATES:
        if e.fn == "count_rows":
            return count(over(exp.Count(this=exp.Star())))
        return over(x.d.aggregate(e.fn, args[0], at, t))
    if e.fn == "row_number":
        return count(over(exp.RowNumber(), order))
    if e.fn == "shift":
        k = e.options[0]
        if k == 0:
            return args[0]
        call = exp.Anonymous(this="LAG" if k > 0 else "LEAD",
                             expressions=[args[0], exp.Literal.number(abs(k)), args[1] if len(args) > 1 else NULL])
        return exp.Window(this=call, partition_by=[p.copy() for p in parts] or None, order=exp.Order(expressions=order))
    is_null = exp.Is(this=paren(args[0].copy()), expression=NULL)
    if e.fn == "rank":
        method, descending = e.options
        by = [exp.Ordered(this=x.d.sort_key(args[0].copy(), at), desc=descending, nulls_first=False)]
        ranks = {"min": lambda: over(exp.Anonymous(this="RANK"), by),
                 "dense": lambda: over(exp.Anonymous(this="DENSE_RANK"), by),
                 "max": lambda: over(exp.Count(this=args[0].copy()), by),   # the peers count in the frame
                 "ordinal": lambda: over(exp.RowNumber(), by + order)}
        if method == "average":
            total = exp.Add(this=count(ranks["min"]()), expression=count(ranks["max"]()))
            value = exp.Div(this=exp.Paren(this=total), expression=exp.Literal.number("2.0"))
            return case([(is_null, x.d.cast(NULL, T.Null, t))], x.d.cast(value, T.Null, T.Float64, force=True))
        return case([(is_null, x.d.cast(NULL, T.Null, t))], count(ranks[method]()))
    first = exp.Literal.number(e.options[0] - 1) if e.fn.startswith("rolling_") and not e.fn.endswith("_by") else None
    frame = exp.WindowSpec(kind="ROWS", start=first or "UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")
    fn_ = _RUNNING.get(e.fn) or e.fn.removeprefix("rolling_").removesuffix("_by")
    if e.fn.endswith("_by"):   # a RANGE frame over the time in microseconds: closed="right" (t - w, t] is [t - w + 1, t]
        size, _, closed = e.options
        by = x.dtype(e.args[1])
        per = 1000 if by.is_timestamp and by.unit == "ns" else 1   # a nanosecond time counts in nanoseconds
        key = x.d.epoch_ns(args[1]) if per == 1000 else x.d.epoch_us(args[1], by)
        width, before = parse_duration(size).fixed() * per - (closed in ("right", "none")), int(closed in ("left", "none"))
        order = [exp.Ordered(this=key, desc=False, nulls_first=False)]
        frame = exp.WindowSpec(kind="RANGE", start=exp.Literal.number(width), start_side="PRECEDING",
                               end=exp.Literal.number(before) if before else "CURRENT ROW",
                               end_side="PRECEDING" if before else None)
    value = over(x.d.aggregate(fn_, args[0], at, t), order, frame)
    if e.fn == "cum_count":
        return value
    if e.fn.startswith("cum_"):
        return case([(is_null, x.d.cast(NULL, T.Null, t))], value)
    n = over(exp.Count(this=args[0].copy()), order, frame)
    least = exp.GTE(this=n, expression=exp.Literal.number(max(1, e.options[1])))
    if e.fn.endswith("_by"):   # a row without a time has no window (SQL's would be its null peers)
        least = exp.and_(least, exp.Not(this=exp.Is(this=paren(args[1].copy()), expression=NULL)))
    return case([(least, value)], x.d.cast(NULL, T.Null, t))


def translated(dialect) -> Coverage:
    """What this translator renders in `dialect`: the node and expression visitors' registries, the
    dialect's scalar functions (its fn_ methods, which `Dialect.call` dispatches to) and SQL types,
    and the aggregations its `aggregate` renders (count_rows is rendered here)."""
    functions = {name[len("fn_"):] for name in dir(dialect) if name.startswith("fn_")} | C.forms(expr)
    functions |= {f for f in F.WINDOWS if f != "cum_prod"}   # no product aggregate
    for agg in F.AGGREGATES:
        try:
            if agg != "count_rows":
                dialect.aggregate(agg, column("x"), T.Float64, T.Float64)
        except UnsupportedError:
            continue
        functions.add(agg)
    kinds = {k for k in dialect.types if k in T.KINDS} | {"Decimal"} | {"Timestamp(tz)" for k in dialect.types if ", tz)" in k}
    return Coverage(C.dispatched(translate_node, N.Node), frozenset(functions), frozenset(kinds))


# ---------------------------------------------------------------- literals (shared by the dialects)

def literal_text(value: object, t: DType) -> str | None:
    """The text of a non-float literal value for a CAST('...' AS t), or None for numbers and bools."""
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _decimal.Decimal):
        return format(value, "f")
    return None


def float_literal(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)

"""Splitting a plan into parts, before the planner decides each part.

A split plan is a tree of parts. The plan that finishes the work reads each part below it through
a Scan of a `PartSource` (the part's key); a part's own plan may read parts below it the same way.
Plans are cut first by data locality (`by_locality`: the largest subtrees whose sources all live
in one database that some lane there can run), then around opaque Python functions (`by_opaque`:
each `udf` call and `map_batches` step becomes a part of its own for the free lane, over a part
that computes its arguments) and then by device (`by_device`: the largest subtrees of numeric work
a GPU lane can run and that pay there, with the inputs it cannot run as CPU parts inside them).
Parts are numbered in the order they are cut. Cutting chooses no lane:
the planner decides each part by the five rules, and the runner hands each part's result on
through a handle (eidos.hal.results).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from eidos.hal.lane import Lane
from eidos.hal.memo import once
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.schema import Schema
from eidos.ir.sources import LOCAL, PartSource

if TYPE_CHECKING:
    from eidos.hal.planner import Decision

LOCALITY, DEVICE, OPAQUE = "locality", "device", "opaque"


@dataclass(frozen=True)
class Part:
    """One piece of a split plan: its subplan, what cut it (`by`: locality, device or opaque) and where
    (`place`: the database its sources live in, the device: "gpu", "cpu", or "free": the Python
    functions of an opaque cut, whose inputs are its "cpu" parts), what the cut found
    (`why`), and once the planner has decided it, its `decision` (lane, rule, reason)."""

    key: str
    plan: N.Node
    by: str
    place: str
    why: str = ""
    decision: Decision | None = None

    @property
    def lane(self) -> Lane:
        return self.decision.lane

    @property
    def lane_name(self) -> str:
        return self.decision.lane.name

    @property
    def inputs(self) -> list[str]:
        """The keys of the parts this part's plan reads."""
        return reads(self.plan)


def reads(plan: N.Node) -> list[str]:
    """The keys of the parts `plan` reads directly (not those below them)."""
    return [n.source.key for n in plan.walk() if isinstance(n, N.Scan) and isinstance(n.source, PartSource)]


class Cuts:
    """The parts cut from one plan, numbered 1, 2, ... in the order they were cut. A cut that is
    given up (a region that does not pay on the GPU) is dropped with every part cut inside it, so
    the numbers have no gaps."""

    def __init__(self) -> None:
        self.parts: dict[str, Part] = {}

    def cut(self, plan: N.Node, by: str, place: str, why: str = "") -> N.Scan:
        """A Scan of the result of `plan`, recorded as a part."""
        key = str(len(self.parts) + 1)
        self.parts[key] = Part(key, plan, by, place, why)
        return N.Scan(PartSource(plan.schema, key=key, plan=plan))

    def mark(self) -> int:
        return len(self.parts)

    def drop(self, mark: int) -> None:
        """Forget the parts cut since `mark`."""
        for key in list(self.parts)[mark:]:
            del self.parts[key]

    def decide(self, key: str, decision: Decision) -> None:
        self.parts[key] = replace(self.parts[key], decision=decision)

    def read_by(self, plan: N.Node) -> list[Part]:
        """The parts `plan` reads, at any depth, each before the parts it reads."""
        found: list[Part] = []
        for key in reads(plan):
            found.append(self.parts[key])
            found += self.read_by(self.parts[key].plan)
        return found


def places(plan: N.Node) -> set[str]:
    """Where the sources of `plan` live: 'local' and the databases."""
    return {n.source.location for n in plan.walk() if isinstance(n, N.Scan)}


def by_locality(plan: N.Node, cuts: Cuts, runs_there: Callable[[N.Node], bool]) -> N.Node:
    """Cut out the largest subtrees whose sources all live in one database and that `runs_there`
    (some lane reading that database can run it); each becomes a Scan of its result."""

    def visit(node: N.Node) -> N.Node:
        where = places(node)
        if len(where) == 1 and LOCAL not in where and runs_there(node):
            return cuts.cut(node, LOCALITY, next(iter(where)))
        return map_inputs(node, visit)

    return visit(plan)


def by_device(plan: N.Node, gpu: Lane, cuts: Cuts,
              pays: Callable[[N.Node], tuple[bool, str]] = lambda part: (True, "")) -> N.Node:
    """Cut out the largest subtrees of numeric map work `gpu` can run (each with at least one node that
    computes something) and that `pays` accepts, as GPU parts; an input of such a subtree that `gpu`
    cannot run becomes a CPU part inside it (reading only the columns the GPU part uses)."""

    def runs_here(node: N.Node) -> bool:
        # asked of every subtree on every run: kept per (immutable) node, as the stub is new each time
        def gapless() -> bool:
            return not gpu.supports(map_inputs(node, lambda c: N.Scan(PartSource(read_by(node, c), plan=c))))
        return once(node, f"{gpu.name} runs it with its inputs as parts", gapless)

    def computes(node: N.Node) -> bool:
        if isinstance(node, (N.Filter, N.Aggregate)):
            return True
        if isinstance(node, N.Project) and any(not isinstance(E.strip_alias(e), E.Column) for _, e in node.columns):
            return True
        return any(runs_here(c) and computes(c) for c in node.inputs)

    def region(node: N.Node) -> N.Node:
        def child(c: N.Node) -> N.Node:
            if runs_here(c):
                return region(c)
            inner = visit(c)
            schema = read_by(node, c)
            if list(schema.names) != list(inner.schema.names):
                inner = N.Project(inner, tuple((name, E.Column(name)) for name in schema.names))
            return cuts.cut(inner, DEVICE, "cpu")
        return map_inputs(node, child)

    def visit(node: N.Node) -> N.Node:
        if not isinstance(node, N.Scan) and runs_here(node) and computes(node):
            mark = cuts.mark()
            cut = region(node)
            ok, why = pays(cut)
            if not ok:   # nor does a smaller region of it: look only below its CPU inputs
                cuts.drop(mark)
                return skip(node)
            return cuts.cut(cut, DEVICE, "gpu", why)
        return map_inputs(node, visit)

    def skip(node: N.Node) -> N.Node:
        return map_inputs(node, lambda c: skip(c) if runs_here(c) else visit(c))

    return visit(plan)


def read_by(node: N.Node, child: N.Node) -> Schema:
    """The columns of `child` that `node` reads (all of them for nodes that pass rows on whole)."""
    if isinstance(node, (N.Project, N.Aggregate)):
        used = set().union(*(e.columns() for e in node.expressions())) if node.expressions() else set()
        used = used or set(child.schema.names[:1])   # a row count needs one column to carry the rows
        return Schema([(n, t) for n, t in child.schema.items() if n in used])
    return child.schema


def by_opaque(plan: N.Node, cuts: Cuts, reads: Callable[[N.Scan], bool]) -> N.Node:
    """Cut out every opaque Python function of `plan` as a part of its own (place "free"): a
    MapBatches step over its input, and each `udf` call as a Project that adds the call's result as a
    column, its arguments already columns of the input. That input (place "cpu": the arguments and
    the rest of the plan below) is a part too, unless it is a Scan the free lane `reads`; the rest
    of each expression is computed above, from the column. A call under a when/then runs only on the
    rows that reach it, as the reference lane calls it: the part is given a guard column, true there
    (its arguments are computed there only, and the guard computes each condition only where reached).
    Calls whose arguments call other functions are cut after them, in rounds."""
    taken = {name for node in plan.walk() for name in node.schema.names}
    counter = itertools.count()

    def fresh(kind: str) -> str:
        name = next(n for n in (f"__{kind}{i}" for i in counter) if n not in taken)
        taken.add(name)
        return name

    def below(node: N.Node) -> N.Node:
        return node if isinstance(node, N.Scan) and reads(node) else cuts.cut(node, OPAQUE, "cpu")

    def hoist(node: N.Node, computed: N.NamedExprs) -> tuple[N.Node, dict[str, E.Expr]]:
        """`node` with `computed` as columns of it, each udf call cut out; the rest of each
        expression, over those columns, by name."""
        exprs = dict(computed)
        while ready := _ready(exprs.values()):
            extra: list[tuple[str, E.Expr]] = []
            calls: list[tuple[str, E.Expr]] = []
            done: dict[E.Expr, E.Expr] = {}
            for call, guard in ready.items():
                args = []
                for a in call.args:
                    if not isinstance(a, E.Column):   # computed only where the call is, as the guard says
                        a = a if guard is None else E.Case(((guard, a),), E.Literal(None, T.Null, weak=True))
                        extra.append((fresh("arg"), a))
                        a = E.Column(extra[-1][0])
                    args.append(a)
                free: E.Expr = E.Udf(call.fn, call.return_dtype, tuple(args))
                if guard is not None:
                    extra.append((fresh("guard"), guard))
                    free = E.Case(((E.Column(extra[-1][0]), free),), E.Literal(None, call.return_dtype))
                calls.append((fresh("udf"), free))
                done[call] = E.Column(calls[-1][0])
            if extra:
                node = N.Project(node, _keep(node.schema.names) + tuple(extra))
            node = below(node)
            node = cuts.cut(N.Project(node, _keep(node.schema.names) + tuple(calls)), OPAQUE, "free")
            exprs = {n: _swap(e, done) for n, e in exprs.items()}
        return node, exprs

    def picked(inner: N.Node, exprs: dict[str, E.Expr]) -> N.Node:
        """Project `exprs` over `inner`; when `inner` is a free part's result and `exprs` only pick and
        rename its columns, that part makes them itself (no projection on another lane after it)."""
        part = cuts.parts.get(inner.source.key) if isinstance(inner, N.Scan) and isinstance(
            inner.source, PartSource) else None
        if part is None or part.place != "free" or not all(isinstance(e, E.Column) for e in exprs.values()):
            return N.Project(inner, tuple(exprs.items()))
        made = dict(part.plan.columns)
        plan = N.Project(part.plan.input, tuple((n, made[e.name]) for n, e in exprs.items()))
        cuts.parts[part.key] = replace(part, plan=plan)
        return N.Scan(PartSource(plan.schema, key=part.key, plan=plan))

    def computing(node: N.Node, named: N.NamedExprs) -> tuple[N.Node, dict[str, E.Expr]]:
        """`node` with those expressions of `named` that call a udf added as hidden columns (their
        calls cut out); each expression by its key, a hidden column where it called one."""
        hidden = {key: fresh("col") for key, e in named if _calls_udf(e)}
        if not hidden:
            return node, dict(named)
        top, exprs = hoist(node, tuple((hidden[key], e) for key, e in named if key in hidden))
        top = N.Project(top, _keep(node.schema.names) + tuple(exprs.items()))
        return top, {key: E.Column(hidden[key]) if key in hidden else e for key, e in named}

    def rewrite(node: N.Node) -> N.Node:
        if isinstance(node, N.MapBatches):
            return cuts.cut(N.MapBatches(below(node.input), node.fn, node.output_schema), OPAQUE, "free")
        if not any(_calls_udf(e) for e in node.expressions()):
            return node
        if isinstance(node, N.Project):
            return picked(*hoist(node.input, node.columns))
        names = node.input.schema.names
        if isinstance(node, N.Filter):
            inner, exprs = computing(node.input, (("p", node.predicate),))
            return N.Project(N.Filter(inner, exprs["p"]), _keep(names))
        if isinstance(node, N.Sort):
            inner, exprs = computing(node.input, tuple((str(i), k.expr) for i, k in enumerate(node.keys)))
            keys = tuple(replace(k, expr=exprs[str(i)]) for i, k in enumerate(node.keys))
            return N.Project(N.Sort(inner, keys), _keep(names))
        return aggregate(node)

    def aggregate(node: N.Aggregate) -> N.Node:
        """Calls in keys and in aggregations' arguments are computed below the Aggregate (over its
        input rows: an argument naming a computed key reads the key's expression); calls over
        aggregated values in a Project above it (over its groups)."""
        computed = {n: e for n, e in node.keys if n not in node.input.schema}
        args = {a: E.transform(a.arg, lambda x: computed.get(x.name, x) if isinstance(x, E.Column) else x)
                for _, e in node.aggs for a in e.walk()
                if isinstance(a, E.Agg) and a.arg is not None and _calls_udf(a.arg)}
        inner, exprs = computing(node.input, tuple((f"k{i}", e) for i, (_, e) in enumerate(node.keys))
                                 + tuple((f"a{i}", arg) for i, arg in enumerate(args.values())))
        keys = tuple((n, exprs[f"k{i}"]) for i, (n, _) in enumerate(node.keys))
        swap = {a: E.Agg(a.fn, exprs[f"a{i}"], a.options) for i, a in enumerate(args)}
        aggs = [(n, E.transform(e, lambda x: swap.get(x, x))) for n, e in node.aggs]
        lifted: dict[E.Expr, str] = {}

        def lift(x: E.Expr) -> E.Expr:
            return E.Column(lifted.setdefault(x, fresh("agg"))) if isinstance(x, E.Agg) else x

        tops = tuple((n, E.transform(e, lift)) for n, e in aggs if _calls_udf(e))
        plain = tuple((n, e) for n, e in aggs if not _calls_udf(e))
        grouped = N.Aggregate(inner, keys, plain + tuple((h, a) for a, h in lifted.items()))
        if not tops:
            return grouped
        top, exprs = hoist(grouped, tops)
        return N.Project(top, _keep(n for n, _ in keys) + tuple((n, exprs.get(n, E.Column(n))) for n, _ in aggs))

    def visit(node: N.Node) -> N.Node:
        return rewrite(map_inputs(node, visit))

    return visit(plan)


def opaque(plan: N.Node) -> bool:
    """Whether `plan` calls an opaque Python function: a udf, a map_batches step."""
    return any(isinstance(n, N.MapBatches) or any(map(_calls_udf, n.expressions())) for n in plan.walk())


def _keep(names) -> N.NamedExprs:
    return tuple((n, E.Column(n)) for n in names)


def _calls_udf(e: E.Expr) -> bool:
    return any(isinstance(x, E.Udf) for x in e.walk())


def _ready(exprs) -> dict[E.Udf, E.Expr | None]:
    """The udf calls of `exprs` whose arguments call no other udf and whose guard calls none: each with
    its guard, the condition under which the reference lane calls it (None: on every row)."""
    found: dict[E.Udf, E.Expr | None] = {}

    def visit(e: E.Expr, guard: E.Expr | None) -> None:
        if isinstance(e, E.Udf) and not any(map(_calls_udf, e.args)):
            if guard is not None and _calls_udf(guard):
                return   # this place waits for a later round (_swap leaves it)
            if e in found:
                had = found[e]
                found[e] = None if had is None or guard is None else E.Call("or", (had, guard))
            else:
                found[e] = guard
            return
        for child, reached in _reached(e, guard):
            visit(child, reached)

    for e in exprs:
        visit(e, None)
    return found


def _swap(e: E.Expr, done: dict[E.Udf, E.Expr], guard: E.Expr | None = None) -> E.Expr:
    """`e` with each call `done` holds replaced by its column at the places _ready found it: an equal
    call under a guard that calls a udf stays, to be cut in a later round under its own guard."""
    if isinstance(e, E.Udf) and e in done and not (guard is not None and _calls_udf(guard)):
        return done[e]
    pairs = _reached(e, guard)
    return E.replace_children(e, tuple(_swap(child, done, reached) for child, reached in pairs)) if pairs else e


def _reached(e: E.Expr, guard: E.Expr | None) -> list[tuple[E.Expr, E.Expr | None]]:
    """Each child of `e` with the condition under which the reference lane computes it, `e` being
    computed where `guard` is true (None: everywhere): a when/then's branches only where taken."""
    if not isinstance(e, E.Case):
        return [(child, guard) for child in e.children()]
    conds = [c for c, _ in e.branches]
    out: list[tuple[E.Expr, E.Expr | None]] = []
    for i, (cond, value) in enumerate(e.branches):
        out += [(cond, _within(guard, _taken(conds[:i]))), (value, _within(guard, _taken(conds[:i], cond)))]
    return out + [(e.otherwise, _within(guard, _taken(conds)))]


def _taken(before: list[E.Expr], cond: E.Expr | None = None) -> E.Expr | None:
    """True on the rows where none of `before` is true and `cond` (when given) is; None: every row.
    A when/then itself, so that it computes each condition only on the rows that reach it, as the
    reference lane does (`&` would compute them on every row, and one may raise there)."""
    if not before and cond is None:
        return None
    branches = tuple((c, E.Literal(False, T.Boolean)) for c in before)
    if cond is not None:
        branches += ((cond, E.Literal(True, T.Boolean)),)
    return E.Case(branches, E.Literal(cond is None, T.Boolean))


def _within(outer: E.Expr | None, inner: E.Expr | None) -> E.Expr | None:
    """`inner` on the rows where `outer` is true (false elsewhere, never computed there)."""
    if outer is None or inner is None:
        return inner if outer is None else outer
    return E.Case(((outer, inner),), E.Literal(False, T.Boolean))

"""What a lane covers, as data; `gaps(plan)` lists everything in a plan a lane lacks.

Like Ibis's operation tables: the planner knows before running what a lane
cannot do, and explain() names it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cached_property

from eidos.hal.memo import once
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N


# Literal values a lane may be unable to hold (SQLite has no NaN), named as coverage tables list them.
SPECIAL_VALUES = ("NaN",)


@dataclass(frozen=True)
class Coverage:
    """Supported IR node names, function names (incl. forms 'case', 'cast', 'udf'), dtype kinds and
    join kinds, special literal values ('NaN'); `typed_gaps` are fnmatch patterns of operations on particular types that a lane
    cannot compute exactly, such as "mod Float*" or "cast String->*" (see `typed_operations`)."""

    nodes: frozenset[str]
    functions: frozenset[str]
    dtypes: frozenset[str]
    joins: frozenset[str] = frozenset(N.JOIN_KINDS)
    typed_gaps: tuple[str, ...] = ()
    values: frozenset[str] = frozenset(SPECIAL_VALUES)

    @classmethod
    def everything(cls) -> Coverage:
        return cls(frozenset(t.__name__ for t in N.NODE_TYPES), frozenset(F.ALL), frozenset(T.KINDS))

    def without(self, *, nodes=(), functions=(), dtypes=(), joins=(), typed=(), values=()) -> Coverage:
        """A copy lacking the given names: lanes describe themselves as 'everything but ...'."""
        return Coverage(self.nodes - set(nodes), self.functions - set(functions),
                        self.dtypes - set(dtypes), self.joins - set(joins),
                        tuple(dict.fromkeys(self.typed_gaps + tuple(typed))), self.values - set(values))

    @cached_property
    def _typed_pattern(self) -> re.Pattern | None:
        if not self.typed_gaps:
            return None
        return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.typed_gaps))

    def gaps(self, plan: N.Node) -> list[str]:
        """Every unsupported node, join kind, dtype, function and typed operation in the plan, each
        named once. What the plan needs is collected once per plan (`needs`), whichever lane asks."""
        have = {"node": self.nodes, "join": self.joins, "dtype": self.dtypes, "function": self.functions,
                "value": self.values}
        found = [label for kind, name, label in needs(plan).items if name not in have[kind]]
        pattern = self._typed_pattern
        if pattern is not None:
            found += [name for name in needs(plan).typed if pattern.match(name)]
        return found


@dataclass(frozen=True)
class Needs:
    """What a plan needs of a lane: (kind, name, label) in plan order, and its typed operations."""

    items: tuple[tuple[str, str, str], ...]
    typed: tuple[str, ...]


def needs(plan: N.Node) -> Needs:
    """The plan's nodes, join kinds, dtypes, functions and typed operations, computed once per plan
    (eidos.hal.memo) so each lane's check is set lookups."""
    return once(plan, "coverage.needs", lambda: _collect(plan))


def _collect(plan: N.Node) -> Needs:
    items: dict[tuple[str, str, str], None] = {}
    typed: dict[str, None] = {}
    for node in plan.walk():
        kind = type(node).__name__
        items[("node", kind, f"node {kind}")] = None
        if isinstance(node, N.Join):
            items[("join", node.how, f"{node.how} join")] = None
        for _, dtype in node.schema.items():
            items[("dtype", dtype.kind, f"dtype {dtype.kind}")] = None
        for expr in node.expressions():
            for fn in functions_used(expr):
                items[("function", fn, f"function {fn}")] = None
            for value in special_values(expr):
                items[("value", value, f"{value} literal")] = None
        if node.inputs:
            schema = _input_schema(node)
            for expr in node.expressions():
                for sub in expr.walk():
                    typed.update(dict.fromkeys(typed_operations(sub, schema)))
    return Needs(tuple(items), tuple(typed))


def _input_schema(node: N.Node):
    """The schema a node's expressions read: its input's, plus an Aggregate's computed keys."""
    from eidos.ir.schema import Schema
    from eidos.ir.typing import infer

    schema = node.inputs[0].schema
    if isinstance(node, N.Aggregate):
        extra = [(n, infer(e, schema)) for n, e in node.keys if n not in schema]
        if extra:
            schema = Schema(list(schema.items()) + extra)
    return schema


def typed_operations(e: E.Expr, schema) -> list[str]:
    """Names of `e` with the types it computes in, for typed gap patterns: "cast String->Date",
    "add Decimal(15,2)" (its result and, for two operands, their common type), "sum Float64"."""
    from eidos.errors import PlanError
    from eidos.ir.typing import infer, operand_dtypes, promote

    try:
        if isinstance(e, E.Cast):
            return [f"cast {infer(e.expr, schema, allow_agg=True)}->{e.dtype}"]
        if isinstance(e, E.Call) and not any(E.contains_agg(a) for a in e.args):
            ts = operand_dtypes(e, schema)
            kinds = {str(infer(e, schema))}
            if len(ts) == 2:
                try:
                    kinds.add(str(promote(*ts)))
                except PlanError:
                    kinds.update(str(t) for t in ts)
            else:
                kinds.update(str(t) for t in ts[:1])
            return [f"{e.fn} {k}" for k in sorted(kinds)]
        if isinstance(e, E.Agg) and e.arg is not None:
            return [f"{e.fn} {infer(e.arg, schema)}"]
    except PlanError:  # a sub-expression typed only in context (inside an aggregation); the whole is checked
        return []
    return []


def special_values(expr: E.Expr) -> list[str]:
    """The special literal values an expression holds (a float NaN, in a literal or an is_in list)."""
    def nan(v) -> bool:
        return isinstance(v, float) and v != v

    out = []
    for e in expr.walk():
        if isinstance(e, E.Literal) and nan(e.value):
            out.append("NaN")
        elif isinstance(e, E.Call) and e.fn == "is_in" and any(nan(v) for v in (e.options[0] if e.options else ())):
            out.append("NaN")
    return out


def functions_used(expr: E.Expr) -> list[str]:
    """The coverage names an expression uses (Call fns, Agg fns, and the forms case/cast/udf)."""
    out = []
    for e in expr.walk():
        if isinstance(e, E.Call):
            out.append(e.fn)
        elif isinstance(e, E.Agg):
            out.append(e.fn)
        elif isinstance(e, E.Case):
            out.append("case")
        elif isinstance(e, E.Cast):
            out.append("cast")
        elif isinstance(e, E.Udf):
            out.append("udf")
    return out

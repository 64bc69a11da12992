"""What a lane covers, as data; `gaps(plan)` lists everything in a plan a lane lacks.

Like Ibis's operation tables: the planner knows before running what a lane
cannot do, and explain() names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N


@dataclass(frozen=True)
class Coverage:
    """Supported IR node names, function names (incl. forms 'case', 'cast', 'udf'), dtype kinds and join kinds."""

    nodes: frozenset[str]
    functions: frozenset[str]
    dtypes: frozenset[str]
    joins: frozenset[str] = frozenset(N.JOIN_KINDS)

    @classmethod
    def everything(cls) -> Coverage:
        return cls(frozenset(t.__name__ for t in N.NODE_TYPES), frozenset(F.ALL), frozenset(T.KINDS))

    def without(self, *, nodes=(), functions=(), dtypes=(), joins=()) -> Coverage:
        """A copy lacking the given names: lanes describe themselves as 'everything but ...'."""
        return Coverage(self.nodes - set(nodes), self.functions - set(functions),
                        self.dtypes - set(dtypes), self.joins - set(joins))

    def gaps(self, plan: N.Node) -> list[str]:
        """Every unsupported node, function, dtype and join kind in the plan, each named once."""
        found: dict[str, None] = {}
        for node in plan.walk():
            kind = type(node).__name__
            if kind not in self.nodes:
                found[f"node {kind}"] = None
            if isinstance(node, N.Join) and node.how not in self.joins:
                found[f"{node.how} join"] = None
            for _, dtype in node.schema.items():
                if dtype.kind not in self.dtypes:
                    found[f"dtype {dtype.kind}"] = None
            for expr in node.expressions():
                for fn in functions_used(expr):
                    if fn not in self.functions:
                        found[f"function {fn}"] = None
        return list(found)


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

"""What the Triton lane covers, as data: numeric map work.

Nodes Scan, Filter, Project, Aggregate, Distinct and Union; numeric and Boolean columns; arithmetic, comparisons,
logic, the math functions with a device form (round of floats), null functions, membership, when/then and casts
between these types; the aggregations sum, mean, min, max, count, n_unique, std, var and count of rows. Everything
else (joins, sorts, strings, dates, decimals, pow inside when/then) stays on the CPU
lanes: the planner cuts a plan so the numeric part runs here and the rest there.

`extra_gaps` adds what the name tables cannot say: a sub-expression of a type the device has no
form for (a decimal literal inside an integer expression), pow inside when/then (its operands would
be computed for rows the branch does not take), and round of integers to negative places.
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.typing import infer

NODES = ("Scan", "Filter", "Project", "Aggregate", "Distinct", "Union")
FUNCTIONS = (("add", "sub", "mul", "truediv", "floordiv", "mod", "pow") + F.COMPARISON + F.LOGICAL
             + ("neg", "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "floor", "ceil", "round")
             + F.NULLS + F.MEMBERSHIP + ("case", "cast")
             + ("sum", "mean", "min", "max", "count", "count_rows", "n_unique", "std", "var"))
DTYPES = tuple(t.name for t in T.INTEGERS) + ("Float32", "Float64", "Boolean")

COVERAGE = Coverage(frozenset(NODES), frozenset(FUNCTIONS), frozenset(DTYPES), frozenset())


def extra_gaps(plan: N.Node) -> list[str]:
    """Gaps that depend on more than a name, each named once."""
    found: dict[str, None] = {}
    for node in plan.walk():
        if not node.inputs:
            continue
        schema = node.inputs[0].schema
        if isinstance(node, N.Aggregate):
            schema = Schema(list(schema.items()) + [(n, infer(e, schema)) for n, e in node.keys if n not in schema])
        for root in node.expressions():
            for e in root.walk():
                if isinstance(e, E.Case) and any(isinstance(x, E.Call) and x.fn == "pow" for x in e.walk()):
                    found["pow inside when/then"] = None
                if isinstance(e, E.Call) and e.fn == "round" and e.options[0] < 0 \
                        and not infer(e.args[0], schema).is_float:
                    found["round of integers to negative places"] = None
                if isinstance(e, E.Agg) or (isinstance(e, E.Literal) and e.value is None):
                    continue
                try:
                    t = infer(e, schema, allow_agg=True)
                except Exception:  # noqa: BLE001 - typed only in context (an aggregate's parts); the node checks the whole
                    continue
                if t.kind not in DTYPES and t != T.Null:
                    found[f"dtype {t.kind} in an expression"] = None
    return list(found)

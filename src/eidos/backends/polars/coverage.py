"""What the Polars lane covers, as data, and the constants of its cost model.

The lane covers every node, function and dtype of the IR except what is listed
here; each exclusion is something the translation cannot make agree exactly
with docs/semantics.md, so the planner skips the lane for it instead of
getting a different answer.
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.typing import infer

COVERAGE = Coverage.everything()

UNSUPPORTED_CASTS: frozenset[tuple[str, str]] = frozenset()  # every cast is done exactly


def extra_gaps(plan: N.Node) -> list[str]:
    """Gaps the name tables cannot see: they depend on argument types or options."""
    found: dict[str, None] = {}
    for node in plan.walk():
        if isinstance(node, N.Aggregate):
            schema = _agg_schema(node)
        elif node.inputs:
            schema = node.inputs[0].schema
        else:
            continue
        for root in node.expressions():
            for e in root.walk():
                if isinstance(e, E.Cast):
                    src = _dtype(e.expr, schema)
                    if src is not None and (src.kind, e.dtype.kind) in UNSUPPORTED_CASTS:
                        found[f"cast {src.kind} -> {e.dtype.kind}"] = None
                elif isinstance(e, E.Udf) and not e.args:
                    found["udf with no arguments"] = None
    return list(found)


def _agg_schema(node: N.Aggregate):
    from eidos.ir.schema import Schema

    schema = node.input.schema
    extra = [(n, _dtype(e, schema)) for n, e in node.keys if n not in schema]
    return Schema(list(schema.items()) + [(n, t) for n, t in extra if t is not None])


def _dtype(e: E.Expr, schema):
    try:
        return infer(e, schema, allow_agg=True)
    except Exception:  # noqa: BLE001 - an expression typing rejects is validated elsewhere
        return None

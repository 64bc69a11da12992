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

# (source kind, target kind) casts whose text form Polars writes differently from
# the reference (e.g. Boolean -> 'true' vs 'True', Float64 -> '1e+20' vs '1e20',
# Timestamp -> '2020-01-01 00:00:00.000000' vs ISO 'T'), or parses differently
# (String -> numbers and dates: Polars rejects ' 3' and accepts other spellings).
UNSUPPORTED_CASTS = frozenset(
    {(src, "String") for src in ("Float32", "Float64", "Boolean", "Timestamp", "Decimal")}
    | {("String", dst) for dst in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                                    "Float32", "Float64", "Boolean", "Date", "Timestamp", "Decimal")}
)


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
                elif isinstance(e, E.Call) and e.fn == "round" and e.options and e.options[0] < 0:
                    found["round with negative decimals"] = None
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

"""What each SQL dialect covers, as data; `gaps(plan, dialect)` names everything a plan needs that it lacks.

Two tables per dialect: a `Coverage` (nodes, functions, dtypes, joins) and `TYPED_GAPS`,
patterns (fnmatch) for a function on particular types, such as "mod Float*" or
"cast String->*", where an engine cannot match eidos semantics exactly. Anything a
dialect cannot do exactly is listed here rather than answered differently.
"""

from __future__ import annotations

from fnmatch import fnmatch

from eidos.hal.coverage import Coverage
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.errors import PlanError
from eidos.ir.typing import infer, operand_dtypes, promote

_NOT_SQL = ("udf",)  # opaque Python (with MapBatches nodes): never SQL

# Python's str.upper/lower use full case mapping (ß -> SS, final sigma); these engines map one
# code point to one, so the results differ on such text.
_CASE_MAPPING = ("str_to_lower", "str_to_upper")

# Text forms that differ between engines and eidos (float repr, timestamp fractions). Text is
# parsed by eidos's rules (a regular expression checks it first), except timestamps.
_TEXT = ("cast String->Timestamp", "cast Float*->String", "cast Timestamp->String", "cast Float*->Decimal*")

COVERAGE = {
    "duckdb": Coverage.everything().without(nodes=("MapBatches",), functions=_CASE_MAPPING + _NOT_SQL),
    "postgresql": Coverage.everything().without(nodes=("MapBatches",), functions=_CASE_MAPPING + _NOT_SQL),
    # SQLite: no exact decimals, no 4-byte floats, no unsigned 64-bit integers, no NaN (it
    # stores NaN as NULL, so functions whose answer is NaN for some inputs are left out, and a
    # NaN from float arithmetic on infinities raises UnsupportedError), dates and timestamps
    # only as text (dates as ISO text are covered; timestamps are not); std/var are not built in.
    "sqlite": Coverage.everything().without(
        nodes=("MapBatches",),
        functions=_CASE_MAPPING + _NOT_SQL + ("std", "var", "pow", "sqrt", "log", "sin", "cos"),
        dtypes=("Decimal", "Float32", "UInt64", "Timestamp")),
}

TYPED_GAPS = {
    # DuckDB divides decimals in floating point; there is no exact integer division of decimals.
    # DuckDB parses decimal text by its own rounding rules.
    "duckdb": _TEXT + ("floordiv Decimal*", "cast String->Decimal*"),
    # PostgreSQL has no remainder of floats; power() raises where IEEE gives inf or NaN.
    "postgresql": _TEXT + ("mod Float*", "pow *"),
    "sqlite": _TEXT + ("cast String->*",) + tuple(p for t in ("Float32", "Decimal*", "UInt64", "Timestamp")
                            for p in (f"* {t}", f"cast *->{t}")) + ("cast Date->*",),
}


def gaps(plan: N.Node, dialect: str) -> list[str]:
    """Every node, function, dtype and typed operation in `plan` that `dialect` lacks, each once."""
    found = dict.fromkeys(COVERAGE[dialect].gaps(plan))
    patterns = TYPED_GAPS[dialect]
    for node in plan.walk():
        if not node.inputs:
            continue
        schema = node.inputs[0].schema
        if isinstance(node, N.Aggregate):
            schema = _with_keys(node)
        for e in node.expressions():
            for sub in e.walk():
                for name in _typed_names(sub, schema):
                    if any(fnmatch(name, p) for p in patterns):
                        found[name] = None
    return list(found)


def _with_keys(node: N.Aggregate):
    from eidos.ir.schema import Schema

    schema = node.input.schema
    extra = [(n, infer(e, schema)) for n, e in node.keys if n not in schema]
    return Schema(list(schema.items()) + extra)


def _typed_names(e: E.Expr, schema) -> list[str]:
    try:
        if isinstance(e, E.Cast):
            return [f"cast {infer(e.expr, schema, allow_agg=True)}->{e.dtype}"]
        if isinstance(e, E.Call) and not any(E.contains_agg(a) for a in e.args):
            # The types it computes in: its result and, for two operands, their common type.
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
    except Exception:  # noqa: BLE001 - a sub-expression typed only in context; the whole is checked above
        return []
    return []

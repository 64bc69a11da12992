"""The meaning of every IR function over plain Python values: docs/semantics.md, in code.

Values are what `pyarrow.Array.to_pylist()` gives: int, float, bool, str,
decimal.Decimal, datetime.date, datetime.datetime, and None for null. A
value of a Float32 expression is a Python float that a float32 holds exactly.

Two ways in, one set of rules:

- `kernel(fn, options, arg_dtypes, result_dtype)` resolves the types once and
  returns a function of the argument values; the reference lane maps it over
  columns. `caster(src, dst)` and `aggregator(fn, arg_dtype, result_dtype)`
  do the same for casts and aggregations.
- `call(...)`, `cast(...)` and `aggregate(...)` apply one at once; constant
  folding uses them and leaves a node unfolded on EidosError.

`arg_dtypes` are the operand types after weak literals adapt (typing.adapt):
the types the operands have when the operation runs. A failing value raises
ExecutionError saying what and which type; the caller adds where.

One module per family, each with a KERNELS table (function name -> builder of
the kernel): arithmetic (and math), comparison (logic, nulls, membership),
text, temporal; casts and aggregates; values holds what they share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate import arithmetic, comparison, nested, temporal, text
from eidos.ir.evaluate.aggregates import aggregate, aggregator
from eidos.ir.evaluate.casts import cast, caster, float_text, literal_value, udf_value
from eidos.ir.evaluate.comparison import comparison_domain
from eidos.ir.evaluate.text import like_regex
from eidos.ir.evaluate.values import NAN_KEY, Fn, hash_key, order_key, to_f32
from eidos.ir.evaluate.windows import window
from eidos.ir.schema import Schema

__all__ = ["NAN_KEY", "aggregate", "aggregator", "call", "can_fail", "cast", "caster", "comparison_domain", "float_text",
           "hash_key", "kernel", "like_regex", "literal_value", "order_key", "to_f32", "udf_value", "window"]

_BUILDERS: dict[str, Callable[[str, tuple, Sequence[DType], DType], Fn]] = {
    **arithmetic.KERNELS, **comparison.KERNELS, **text.KERNELS, **temporal.KERNELS, **nested.KERNELS}


def kernel(fn: str, options: tuple, arg_dtypes: Sequence[DType], result_dtype: DType) -> Fn:
    """A function of the argument values (None for null) computing `fn` as docs/semantics.md says."""
    builder = _BUILDERS.get(fn)
    if builder is None:
        raise PlanError(f"unknown function {fn!r}")
    return builder(fn, tuple(options), tuple(arg_dtypes), result_dtype)


# Functions that never raise (semantics sections 5-12), and those that never raise where they give a float
# (IEEE arithmetic and math: no overflow error); every other function, cast, UDF or window may.
_NEVER_FAILS = frozenset(F.COMPARISON + F.LOGICAL + F.NULLS + F.MEMBERSHIP + F.STRINGS + F.DATE_PARTS + F.TIME_PARTS
                         + F.DURATION_TOTALS + F.LISTS + F.BINARY + F.STRUCTS + ("truediv",))
_FLOAT_NEVER_FAILS = frozenset(F.ARITHMETIC + F.MATH)


def can_fail(e: E.Expr, schema: Schema) -> bool:
    """Whether `e` may raise an ExecutionError on some row (False only where it never can), so a lane knows
    which predicates must be computed on every row, whatever order its engine would take (semantics 9)."""
    from eidos.ir.typing import typer

    infer = typer(schema)   # each node's type once: asked of every arithmetic node of the tree

    def safe(x: E.Expr) -> bool:
        if isinstance(x, E.Call):
            return x.fn in _NEVER_FAILS or x.fn in _FLOAT_NEVER_FAILS and infer(x).is_float
        if isinstance(x, E.Cast):
            src = infer(x.expr)
            return src == x.dtype or x.dtype.is_float and (src.is_numeric or src == T.Boolean)
        return isinstance(x, (E.Column, E.Literal, E.Alias, E.Case))
    nodes = list(e.walk())   # an aggregation, window or UDF may fail: asked first, as infer takes none
    return any(isinstance(x, (E.Agg, E.Window, E.Udf)) for x in nodes) or not all(map(safe, nodes))


def call(fn: str, args: Sequence[Any], options: tuple, arg_dtypes: Sequence[DType], result_dtype: DType) -> Any:
    """`fn` applied to one set of argument values (literal values are taken as `literal_value` reads them)."""
    values = [literal_value(v, t) for v, t in zip(args, arg_dtypes)]
    return kernel(fn, options, arg_dtypes, result_dtype)(*values)

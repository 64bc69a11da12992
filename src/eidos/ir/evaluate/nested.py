"""Lists: length, an element by position, membership. A list value is a Python list (None for null)."""

from __future__ import annotations

from collections.abc import Sequence

from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.comparison import KERNELS as COMPARE
from eidos.ir.evaluate.values import Fn, strict1, strict2


def _get(index: int) -> Fn:
    def f(xs: list):
        i = index if index >= 0 else len(xs) + index
        return xs[i] if 0 <= i < len(xs) else None  # out of range is null (Polars' null_on_oob)
    return f


def _lists(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if ts[0] == T.Null:
        return (lambda a: None) if fn != "list_contains" else (lambda a, b: None)
    if fn == "list_len":
        return strict1(len)
    if fn == "list_get":
        return strict1(_get(options[0]))
    eq = COMPARE["eq"]("eq", (), (ts[0].inner, ts[1]), T.Boolean)
    return strict2(lambda xs, x: any(eq(v, x) for v in xs))  # null elements match nothing


def _struct(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if fn == "struct":   # never null: a struct of null fields (as Polars)
        return lambda *values: dict(zip(options[0], values))
    name = options[0]
    return strict1(lambda s: s[name])


KERNELS = {fn: _lists for fn in F.LISTS}
KERNELS.update(dict.fromkeys(F.STRUCTS, _struct))

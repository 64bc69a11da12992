"""Comparisons (NaN equal to itself and above every number), three-valued logic, null tests and
fill_null, and membership (is_in, is_between)."""

from __future__ import annotations

from collections.abc import Sequence

from eidos.ir import dtypes as T
from eidos.ir import functions as F
from eidos.ir.dtypes import DType
from eidos.ir.evaluate.casts import cast, caster, literal_value
from eidos.ir.evaluate.values import Fn, domain_converter, hash_key, strict2, wrap_conv
from eidos.ir.expr import Literal
from eidos.ir.typing import adapt, literal_dtype, promote


def _float_eq(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)


def _float_lt(a: float, b: float) -> bool:
    if a == a and b == b:
        return a < b
    return a == a  # b is NaN: every number is below it; NaN is not below NaN


def _float_le(a: float, b: float) -> bool:
    if a == a and b == b:
        return a <= b
    return b != b


_FLOAT_CMP: dict[str, Fn] = {
    "eq": _float_eq,
    "ne": lambda a, b: not _float_eq(a, b),
    "lt": _float_lt,
    "le": _float_le,
    "gt": lambda a, b: _float_lt(b, a),
    "ge": lambda a, b: _float_le(b, a),
}
_PLAIN_CMP: dict[str, Fn] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def comparison_domain(ta: DType, tb: DType) -> DType:
    """The type two operands are compared in."""
    if T.Null in (ta, tb):
        return T.Null
    return promote(ta, tb, op="compare")


def _compare(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ta, tb = ts
    domain = comparison_domain(ta, tb)
    if domain == T.Null:
        return lambda a, b: None
    table = _FLOAT_CMP if domain.is_float else _PLAIN_CMP
    return strict2(wrap_conv(table[fn], domain_converter(ta, domain), domain_converter(tb, domain)))


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a



# ---------------------------------------------------------------- nulls and membership

def _null_fns(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    if fn == "is_null":
        return lambda a: a is None
    if fn == "is_not_null":
        return lambda a: a is not None
    ca, cb = caster(ts[0], rt), caster(ts[1], rt)
    return lambda a, b: ca(a) if a is not None else cb(b)


def _is_in(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    (t,) = ts
    values = [v for v in options[0] if v is not None]
    has_null = len(values) < len(options[0])
    # Each value is a weak literal meeting x: Float32 x with 0.1 compares in Float32, as x == 0.1 does.
    types = [adapt(Literal(v, literal_dtype(v), weak=True), literal_dtype(v), t) for v in values]
    domain = t
    for vt in types:
        domain = promote(domain, vt, op="compare")
    conv = caster(t, domain)
    key = hash_key(domain) or (lambda v: v)
    members = {key(cast(literal_value(v, vt), vt, domain)) for v, vt in zip(values, types)}
    absent = None if has_null else False

    def f(a):
        if a is None:
            return None
        return True if key(conv(a)) in members else absent
    return f


def _is_between(fn: str, options: tuple, ts: Sequence[DType], rt: DType) -> Fn:
    ge = _compare("ge", (), (ts[0], ts[1]), T.Boolean)
    le = _compare("le", (), (ts[0], ts[2]), T.Boolean)
    return lambda x, lo, hi: _and(ge(x, lo), le(x, hi))


KERNELS = {fn: _compare for fn in F.COMPARISON} | {fn: _null_fns for fn in F.NULLS}
KERNELS.update({"and": lambda *_: _and, "or": lambda *_: _or, "not": lambda *_: _not,
                "is_in": _is_in, "is_between": _is_between})

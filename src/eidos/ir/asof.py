"""What every lane's join_asof computes beside its search (docs/semantics.md section 15): the type its
`on` values are compared in, and, as eidos expressions each lane translates as it translates any, the
choice of a nearest match and the tolerance test. Their columns: `l` the left row's `on`, `b` and `f`
the backward and forward candidates', `m` the match's, each of type `on_type(node)`."""

from __future__ import annotations

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.typing import promote


def on_type(node: N.AsofJoin) -> T.DType:
    """The supertype the two `on` columns compare in; a PlanError unless they are numbers or dates."""
    lt = node.left.schema.dtype(node.left_on, where="the left side of join_asof")
    rt = node.right.schema.dtype(node.right_on, where="the right side of join_asof")
    if not all(t.is_numeric or t.kind in ("Date", "Timestamp") for t in (lt, rt)):
        raise PlanError(f"join_asof on takes numbers, dates or timestamps, got {node.left_on!r} ({lt}) and "
                        f"{node.right_on!r} ({rt})")
    try:
        t = promote(lt, rt, op="join")
    except PlanError:
        raise PlanError(f"join_asof on columns {node.left_on!r} ({lt}) and {node.right_on!r} ({rt}) have "
                        f"incompatible types") from None
    tol = node.tolerance
    if tol is not None:
        if t.kind == "Timestamp":
            ok = isinstance(tol, E.Literal) and tol.dtype.kind == "Duration" and tol.value is not None \
                and tol.value >= type(tol.value)(0)
        else:
            ok = isinstance(tol, E.Literal) and not isinstance(tol.value, bool) and tol.value is not None and (
                isinstance(tol.value, int) if t.kind == "Date" else tol.dtype.is_numeric) and tol.value >= 0
        if not ok:
            raise PlanError(f"join_asof tolerance is a number >= 0 (a number of days, or a datetime.timedelta of "
                            f"whole days, for dates; a datetime.timedelta for timestamps), got {tol}")
    return t


def schema(node: N.AsofJoin) -> Schema:
    t = on_type(node)
    return Schema([("l", t), ("b", t), ("f", t), ("m", t)])


def _distance(a: str, b: str) -> E.Expr:
    return E.Call("sub", (E.Column(a), E.Column(b)))


def forward_wins(node: N.AsofJoin) -> E.Expr:
    """Nearest: the forward candidate when both exist and it is not farther (ties go forward, as Polars)."""
    return E.Call("le", (_distance("f", "l"), _distance("l", "b")))


def within(node: N.AsofJoin) -> E.Expr | None:
    """The tolerance test of the match `m`: l - m <= tolerance and m - l <= tolerance (|l - m|, also for
    timestamps, whose difference is a Duration); None when there is no tolerance."""
    if node.tolerance is None:
        return None
    return E.Call("and", (E.Call("le", (_distance("l", "m"), node.tolerance)),
                          E.Call("le", (_distance("m", "l"), node.tolerance))))

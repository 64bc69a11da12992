"""Text forms of expressions and plans, for explain() and error messages.

Names (columns, aliases, keys) are shown as written when every character is printable, else as their
repr (errors.shown): a plan's text never carries a terminal escape or a newline into either."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from functools import singledispatch

from eidos.errors import shown
from eidos.ir import expr as E
from eidos.ir import functions as F
from eidos.ir import nodes as N


def literal_text(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"{'-' if value < 0 else ''}<an integer of {value.bit_length()} bits>"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        from eidos.ir.durations import Duration

        return f"duration({Duration(microseconds=value // _dt.timedelta(microseconds=1))})"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


def expr_text(e: E.Expr) -> str:
    return _text(e)


def _operand(e: E.Expr) -> str:
    text = _text(e)
    if isinstance(e, E.Call) and e.fn in F.BINARY_OPERATORS:
        return f"({text})"
    return text


@singledispatch
def _text(e: E.Expr) -> str:
    return type(e).__name__


@_text.register
def _(e: E.Column) -> str:
    return shown(e.name)


@_text.register
def _(e: E.Literal) -> str:
    return literal_text(e.value)


@_text.register
def _(e: E.Alias) -> str:
    return f"{_text(e.expr)} AS {shown(e.name)}"


@_text.register
def _(e: E.Cast) -> str:
    return f"{_operand(e.expr)}.cast({e.dtype})"


@_text.register
def _(e: E.Call) -> str:
    if e.fn in F.BINARY_OPERATORS and len(e.args) == 2:
        a, b = e.args
        return f"{_operand(a)} {F.BINARY_OPERATORS[e.fn]} {_operand(b)}"
    if e.fn in F.UNARY_OPERATORS and len(e.args) == 1:
        return f"{F.UNARY_OPERATORS[e.fn]}{_operand(e.args[0])}"
    if e.fn == "struct" and e.options and isinstance(e.options[0], tuple) and len(e.options[0]) == len(e.args):
        return "struct(" + ", ".join(f"{shown(n)}={_text(a)}" for n, a in zip(e.options[0], e.args)) + ")"
    method = F.method(e.fn)
    params = [_text(a) for a in e.args[1:]]
    for opt in e.options:
        if isinstance(opt, tuple):
            params.append("[" + ", ".join(literal_text(v) for v in opt) + "]")
        else:
            params.append(literal_text(opt))
    if e.fn == "str_split_inclusive":
        params.append("inclusive=True")
    if e.fn == "str_replace_n":
        params[-1] = f"n={params[-1]}"
    if e.fn in F.STRIP and e.options == (None,):   # whitespace
        params = []
    if e.fn in ("str_contains", "str_replace", "str_replace_n", "str_replace_all"):
        params.append("literal=True")
    if not e.args:  # only in a malformed plan read from JSON, which validation then names
        return f"{e.fn}({', '.join(params)})"
    return f"{_operand(e.args[0])}.{method}({', '.join(params)})"


@_text.register
def _(e: E.Case) -> str:
    parts = "".join(f"when({_text(c)}).then({_text(v)})." for c, v in e.branches)
    return f"{parts}otherwise({_text(e.otherwise)})"


@_text.register
def _(e: E.Agg) -> str:
    if e.fn == "count_rows":
        return "count()"
    options = "".join(f", {o!r}" for o in e.options)
    return f"{e.fn}({_text(e.arg)}{options})"


# How a window function's constant parameters read (a name for keyword arguments, "" for positional ones).
_WINDOW_PARAMS = {"rank": ("", "descending"), "shift": ("",),
                  **{f"rolling_{f}": ("", "min_samples") for f in ("sum", "mean", "min", "max")},
                  **{f"rolling_{f}_by": ("", "min_samples", "closed") for f in ("sum", "mean", "min", "max")}}


@_text.register
def _(e: E.Window) -> str:
    if e.fn in F.AGGREGATES:
        base = _text(E.Agg(e.fn, e.args[0] if e.args else None, e.options))
    else:
        names = _WINDOW_PARAMS.get(e.fn, ())
        params = [literal_text(o) if not n else f"{n}={literal_text(o)}" for n, o in zip(names, e.options)]
        params[:0] = [_text(a) for a in e.args[1:]] if e.fn.endswith("_by") else []
        params += [] if e.fn.endswith("_by") else [f"fill_value={_text(a)}" for a in e.args[1:]]
        base = f"{_operand(e.args[0])}.{e.fn}({', '.join(params)})" if e.args else f"{e.fn}({', '.join(params)})"
    over = [_text(p) for p in e.partition_by]
    if e.order_by:
        over.append(f"order_by=[{', '.join(_text(o) for o in e.order_by)}]")
        over += ["descending=True"] * e.descending + ["nulls_last=True"] * e.nulls_last
    return f"{base}.over({', '.join(over)})" if over or e.fn in F.AGGREGATES else base


@_text.register
def _(e: E.Udf) -> str:
    name = getattr(e.fn, "__qualname__", repr(e.fn))
    return f"udf:{name}({', '.join(_text(a) for a in e.args)})"


def _named(pairs: N.NamedExprs) -> str:
    out = []
    for name, e in pairs:
        out.append(shown(name) if isinstance(e, E.Column) and e.name == name else f"{shown(name)}={_text(e)}")
    return ", ".join(out)


@singledispatch
def node_label(node: N.Node) -> str:
    """One line naming the node and its arguments, as shown in explain() and errors."""
    return type(node).__name__


@node_label.register
def _(node: N.Scan) -> str:
    cols = "" if node.columns is None else f" [{', '.join(map(shown, node.columns))}]"
    return f"Scan {node.source.describe()}{cols}"


@node_label.register
def _(node: N.Filter) -> str:
    return f"Filter({_text(node.predicate)})"


@node_label.register
def _(node: N.Project) -> str:
    return f"Project [{_named(node.columns)}]"


@node_label.register
def _(node: N.Aggregate) -> str:
    keys = f"[{_named(node.keys)}] " if node.keys else ""
    return f"Aggregate {keys}{_named(node.aggs)}"


@node_label.register
def _(node: N.Join) -> str:
    if node.how == "cross":
        return "Join cross"
    pairs = ", ".join(f"{shown(lk)} = {shown(rk)}" for lk, rk in zip(node.left_on, node.right_on))
    return f"Join {node.how} [{pairs}]"


@node_label.register
def _(node: N.Sort) -> str:
    keys = ", ".join(
        f"{_text(k.expr)}{' desc' if k.descending else ''}{' nulls last' if k.nulls_last else ' nulls first'}"
        for k in node.keys)
    return f"Sort [{keys}]"


@node_label.register
def _(node: N.Limit) -> str:
    return f"Limit {node.n}" + (f" offset {node.offset}" if node.offset else "")


@node_label.register
def _(node: N.Distinct) -> str:
    return "Distinct"


@node_label.register
def _(node: N.Unique) -> str:
    return f"Unique [{', '.join(map(shown, node.subset))}] keep {node.keep}"


@node_label.register
def _(node: N.Explode) -> str:
    return f"Explode [{', '.join(map(shown, node.columns))}]"


@node_label.register
def _(node: N.AsofJoin) -> str:
    by = "".join(f", {shown(a)} = {shown(b)}" for a, b in zip(node.left_by, node.right_by))
    tol = "" if node.tolerance is None else f" within {_text(node.tolerance)}"
    return f"AsofJoin {node.strategy} [{shown(node.left_on)} ~ {shown(node.right_on)}{by}]{tol}"


@node_label.register
def _(node: N.Union) -> str:
    return f"Union ({len(node.inputs)} inputs)"


@node_label.register
def _(node: N.MapBatches) -> str:
    return f"MapBatches {getattr(node.fn, '__qualname__', repr(node.fn))}"


def tree(node: N.Node, indent: str = "", annotate=None) -> str:
    """The plan as an indented tree, one node a line; `annotate(node)` may add a suffix."""
    lines: list[str] = []

    def visit(n: N.Node, depth: int) -> None:
        suffix = annotate(n) if annotate else ""
        lines.append(f"{indent}{'  ' * depth}{node_label(n)}{suffix}")
        pushed = getattr(n.source, "plan", None) if isinstance(n, N.Scan) else None
        for child in (pushed,) if pushed is not None else n.inputs:
            visit(child, depth + 1)

    visit(node, 0)
    return "\n".join(lines)


def function_name(fn: Callable) -> str:
    """`module.qualname` of an opaque Python function, as error messages name it on every lane."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name

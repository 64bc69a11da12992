"""Column selectors, as Polars' `polars.selectors`: `import eidos.selectors as cs`.

A selector names columns by a rule (all, by dtype, by name pattern) and is resolved against the
flow's schema where the plan is built, so the plan itself holds plain column names. Flow methods take
one wherever they take column names: select, with_columns, drop, group_by, sort, distinct, drop_nulls,
unpivot, pivot. Selectors combine with `|` (union), `&` (intersection), `-` (difference) and `~`
(complement); the columns come out in schema order.

Examples:
    >>> import eidos.selectors as cs
    >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "x_2": [2.5]})
    >>> flow.select(cs.numeric() - cs.starts_with("x")).columns
    ('id',)
    >>> flow.select(cs.string() | cs.matches(r"_2$")).columns
    ('name', 'x_2')
    >>> flow.drop(~cs.by_dtype(ei.Float64)).columns
    ('x_1', 'x_2')
"""

from __future__ import annotations

import re
from collections.abc import Callable

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir.schema import Schema


class Selector:
    """A rule choosing columns of a schema; `resolve(schema)` gives their names in schema order."""

    __slots__ = ("_keep", "_text")

    def __init__(self, keep: Callable[[str, T.DType], bool], text: str):
        self._keep, self._text = keep, text

    def resolve(self, schema: Schema) -> tuple[str, ...]:
        return tuple(n for n, t in schema.items() if self._keep(n, t))

    def __or__(self, other: Selector) -> Selector:
        o = _selector(other, "|")
        return Selector(lambda n, t: self._keep(n, t) or o._keep(n, t), f"({self} | {o})")

    def __and__(self, other: Selector) -> Selector:
        o = _selector(other, "&")
        return Selector(lambda n, t: self._keep(n, t) and o._keep(n, t), f"({self} & {o})")

    def __sub__(self, other: Selector) -> Selector:
        o = _selector(other, "-")
        return Selector(lambda n, t: self._keep(n, t) and not o._keep(n, t), f"({self} - {o})")

    def __invert__(self) -> Selector:
        return Selector(lambda n, t: not self._keep(n, t), f"~{self}")

    def __repr__(self) -> str:
        return self._text


def _selector(value: object, op: str) -> Selector:
    if isinstance(value, Selector):
        return value
    if isinstance(value, str):
        return by_name(value)
    raise PlanError(f"selector {op} takes another selector (cs.by_name('x'), cs.numeric(), ...), got {value!r}")


def all() -> Selector:  # noqa: A001 - Polars' name
    """Every column.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.all() - cs.by_name("ok")).columns
        ('id', 'name', 'x_1', 'on')
    """
    return Selector(lambda n, t: True, "cs.all()")


def by_name(*names: str) -> Selector:
    """The columns named; a name the schema lacks selects nothing.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.by_name("x_1", "id", "nope")).columns
        ('id', 'x_1')
    """
    chosen = set(names)
    return Selector(lambda n, t: n in chosen, f"cs.by_name({', '.join(map(repr, names))})")


def exclude(*names: str | Selector) -> Selector:
    """Every column but those named or selected.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.exclude("name", cs.temporal())).columns
        ('id', 'x_1', 'ok')
    """
    out = all()
    for n in names:
        out = out - _selector(n, "exclude")
    return out


def by_dtype(*dtypes: T.DType) -> Selector:
    """The columns of the given dtypes; `ei.Decimal` itself (not called) matches every decimal.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.by_dtype(ei.Float64, ei.Boolean)).columns
        ('x_1', 'ok')
    """
    every_decimal = any(d is T.Decimal for d in dtypes)
    wanted = [T.coerce(d) for d in dtypes if d is not T.Decimal]
    return Selector(lambda n, t: t in wanted or (every_decimal and t.is_decimal),
                    f"cs.by_dtype({', '.join('ei.Decimal' if d is T.Decimal else str(T.coerce(d)) for d in dtypes)})")


def numeric() -> Selector:
    """Integer, float and decimal columns.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.numeric()).columns
        ('id', 'x_1')
    """
    return Selector(lambda n, t: t.is_integer or t.is_float or t.is_decimal, "cs.numeric()")


def string() -> Selector:
    """String columns.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.string()).columns
        ('name',)
    """
    return Selector(lambda n, t: t == T.String, "cs.string()")


def boolean() -> Selector:
    """Boolean columns.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.boolean()).columns
        ('ok',)
    """
    return Selector(lambda n, t: t == T.Boolean, "cs.boolean()")


def temporal() -> Selector:
    """Date and timestamp columns.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.temporal()).columns
        ('on',)
    """
    return Selector(lambda n, t: t.kind in ("Date", "Timestamp"), "cs.temporal()")


def matches(pattern: str) -> Selector:
    """The columns whose names the regular expression `pattern` matches anywhere (`re.search`).

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.matches("^x_[0-9]$|^o")).columns
        ('x_1', 'on', 'ok')
    """
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise PlanError(f"cs.matches({pattern!r}): not a regular expression: {e}") from None
    return Selector(lambda n, t: rx.search(n) is not None, f"cs.matches({pattern!r})")


def starts_with(*prefixes: str) -> Selector:
    """The columns whose names start with one of `prefixes`.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.starts_with("x", "n")).columns
        ('name', 'x_1')
    """
    return Selector(lambda n, t: n.startswith(prefixes), f"cs.starts_with({', '.join(map(repr, prefixes))})")


def ends_with(*suffixes: str) -> Selector:
    """The columns whose names end with one of `suffixes`.

    Examples:
        >>> flow = ei.from_pydict({"id": [1], "name": ["a"], "x_1": [1.5], "on": [datetime.date(2024, 1, 1)], "ok": [True]})
        >>> flow.select(cs.ends_with("e", "k")).columns
        ('name', 'ok')
    """
    return Selector(lambda n, t: n.endswith(suffixes), f"cs.ends_with({', '.join(map(repr, suffixes))})")


def expand(values, schema: Schema) -> list:
    """`values` with each selector replaced by the names it selects (as strings) in schema order."""
    out: list = []
    for v in values:
        if isinstance(v, Selector):
            out.extend(v.resolve(schema))
        elif isinstance(v, (list, tuple)) and any(isinstance(x, Selector) for x in v):
            out.extend(expand(v, schema))
        else:
            out.append(v)
    return out

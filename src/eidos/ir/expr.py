"""Expression nodes of the plan IR: frozen, hashable, engine-free.

Every scalar operation is a `Call` of a named function (see `functions.py`),
so a lane's coverage is a set of function names. Aggregations are `Agg`
nodes and may appear only inside `Aggregate`; window functions are `Window`
nodes and may appear only inside `Project`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from eidos.ir.dtypes import DType


@dataclass(frozen=True)
class Expr:
    """Base of every expression node."""

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def columns(self) -> set[str]:
        """Names of the input columns the expression reads."""
        return {e.name for e in self.walk() if isinstance(e, Column)}

    def __str__(self) -> str:
        from eidos.ir.render import expr_text

        return expr_text(self)


@dataclass(frozen=True)
class Column(Expr):
    name: str


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A constant. `weak` literals (bare Python numbers) take the type of what they meet."""

    value: Any
    dtype: DType
    weak: bool = False

    def _key(self) -> tuple:
        v = self.value
        nan = isinstance(v, float) and v != v
        return (type(v).__name__, "nan" if nan else v, self.dtype, self.weak)

    def __eq__(self, other: object) -> bool:  # NaN literals are equal to each other, as NaN values are
        return isinstance(other, Literal) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Alias(Expr):
    expr: Expr
    name: str

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)


@dataclass(frozen=True)
class Cast(Expr):
    expr: Expr
    dtype: DType

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)


@dataclass(frozen=True)
class Call(Expr):
    """A scalar function applied to argument expressions; `options` holds constant parameters."""

    fn: str
    args: tuple[Expr, ...]
    options: tuple = ()

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class Case(Expr):
    """when(c1).then(v1)...otherwise(v): the first true condition wins; null counts as false."""

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr

    def children(self) -> tuple[Expr, ...]:
        return tuple(e for pair in self.branches for e in pair) + (self.otherwise,)


@dataclass(frozen=True)
class Agg(Expr):
    """An aggregation over the rows of a group; `arg` is None for count of rows; `options` holds
    constant parameters (a quantile's fraction and interpolation)."""

    fn: str
    arg: Expr | None = None
    options: tuple = ()

    def children(self) -> tuple[Expr, ...]:
        return () if self.arg is None else (self.arg,)


@dataclass(frozen=True)
class Window(Expr):
    """A window function (`functions.WINDOWS`) or an aggregation (`functions.AGGREGATES`) computed for
    every row over the rows of its partition (rows with equal `partition_by` values; all rows when
    there is none), taken in `order_by` order (`descending`, `nulls_last` for every key), else in the
    input's row order. `options` holds constant parameters (functions.WINDOW_OPTIONS)."""

    fn: str
    args: tuple[Expr, ...] = ()
    partition_by: tuple[Expr, ...] = ()
    order_by: tuple[Expr, ...] = ()
    descending: bool = False
    nulls_last: bool = False
    options: tuple = ()

    def children(self) -> tuple[Expr, ...]:
        return self.args + self.partition_by + self.order_by


@dataclass(frozen=True)
class Udf(Expr):
    """An opaque Python function applied per row; stored in JSON by importable name."""

    fn: Callable = field(compare=True)
    return_dtype: DType
    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args


def output_name(e: Expr) -> str | None:
    """The name a column built from `e` takes when not aliased: the alias, else the first column read
    (a window's partition and order columns do not name it; `row_number()` is named so)."""
    if isinstance(e, (Alias, Column)):
        return e.name
    if isinstance(e, Window) and not e.args:
        return "count" if e.fn == "count_rows" else e.fn
    if isinstance(e, Agg) and e.arg is None:
        return "count"
    for child in e.args if isinstance(e, Window) else e.children():
        name = _first_name(child)
        if name is not None:
            return name
    if isinstance(e, Literal):
        return "literal"
    return None


def _first_name(e: Expr) -> str | None:
    if isinstance(e, (Alias, Column)):
        return e.name
    if isinstance(e, Window) and not e.args:
        return None
    for child in e.args if isinstance(e, Window) else e.children():
        name = _first_name(child)
        if name is not None:
            return name
    return None


def strip_alias(e: Expr) -> Expr:
    while isinstance(e, Alias):
        e = e.expr
    return e


def replace_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """A copy of `e` with its children replaced, in `children()` order."""
    if isinstance(e, Alias):
        return Alias(new[0], e.name)
    if isinstance(e, Cast):
        return Cast(new[0], e.dtype)
    if isinstance(e, Call):
        return Call(e.fn, tuple(new), e.options)
    if isinstance(e, Case):
        n = len(e.branches)
        branches = tuple((new[2 * i], new[2 * i + 1]) for i in range(n))
        return Case(branches, new[2 * n])
    if isinstance(e, Agg):
        return Agg(e.fn, new[0] if new else None, e.options)
    if isinstance(e, Udf):
        return Udf(e.fn, e.return_dtype, tuple(new))
    if isinstance(e, Window):
        a, p = len(e.args), len(e.partition_by)
        return Window(e.fn, tuple(new[:a]), tuple(new[a:a + p]), tuple(new[a + p:]), e.descending, e.nulls_last,
                      e.options)
    return e


def transform(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild `e` bottom-up, applying `fn` to each node after its children."""
    kids = e.children()
    if kids:
        e = replace_children(e, tuple(transform(k, fn) for k in kids))
    return fn(e)


def contains_agg(e: Expr) -> bool:
    return any(isinstance(n, Agg) for n in e.walk())


def contains_window(e: Expr) -> bool:
    return any(isinstance(n, Window) for n in e.walk())

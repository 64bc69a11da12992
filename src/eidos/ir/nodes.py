"""Plan nodes of the IR: frozen, hashable, engine-free.

`node.schema` is inferred (and the node validated) once, on first use;
Flow methods touch it at build time so a bad plan fails where it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

from eidos.ir.expr import Expr
from eidos.ir.schema import Schema
from eidos.ir.sources import Source

NamedExprs = tuple[tuple[str, Expr], ...]

MAX_COUNT = 2**63 - 1   # the most rows a plan counts (Int64): limit, offset, row estimates, byte sizes
JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti", "cross")
UNIQUE_KEEPS = ("any", "first", "last", "none")
ASOF_STRATEGIES = ("backward", "forward", "nearest")


@dataclass(frozen=True)
class Node:
    """Base of every plan node."""

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    @cached_property
    def schema(self) -> Schema:
        from eidos.ir.validate import infer_schema

        return infer_schema(self)

    @cached_property
    def optimized(self) -> Node:
        """The plan after the shared rewrites, computed once per plan (plans are immutable)."""
        from eidos.ir.rewrite import optimize

        return optimize(self)

    def walk(self) -> Iterator[Node]:
        """This node and every node below it, parents first."""
        yield self
        for child in self.inputs:
            yield from child.walk()

    def expressions(self) -> tuple[Expr, ...]:
        """The expressions this node evaluates (for coverage checks)."""
        return ()

    def __str__(self) -> str:
        from eidos.ir.render import node_label

        return node_label(self)


@dataclass(frozen=True)
class Scan(Node):
    """Read a source; `columns` (set by projection pruning) limits what is read."""

    source: Source
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Filter(Node):
    input: Node
    predicate: Expr

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def expressions(self) -> tuple[Expr, ...]:
        return (self.predicate,)


@dataclass(frozen=True)
class Project(Node):
    """select / with_columns / rename / drop: the output is exactly `columns`, in order."""

    input: Node
    columns: NamedExprs

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(e for _, e in self.columns)


@dataclass(frozen=True)
class Aggregate(Node):
    """group_by(keys).agg(aggs); no keys aggregates everything into one row."""

    input: Node
    keys: NamedExprs
    aggs: NamedExprs

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(e for _, e in self.keys + self.aggs)


@dataclass(frozen=True)
class Join(Node):
    left: Node
    right: Node
    how: str
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    suffix: str = "_right"

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class SortKey:
    expr: Expr
    descending: bool
    nulls_last: bool


@dataclass(frozen=True)
class Sort(Node):
    input: Node
    keys: tuple[SortKey, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(k.expr for k in self.keys)


@dataclass(frozen=True)
class Limit(Node):
    input: Node
    n: int
    offset: int = 0

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Distinct(Node):
    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Unique(Node):
    """distinct(subset, keep): of the rows with equal `subset` values, the first, the last or any one, or
    (keep="none") only those whose values no other row shares; in input order."""

    input: Node
    subset: tuple[str, ...]
    keep: str = "any"

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class AsofJoin(Node):
    """join_asof: each left row with the right row of equal `by` whose `on` is nearest before (backward),
    after (forward) or either side (nearest) of its own, within `tolerance` (a Literal); a left join."""

    left: Node
    right: Node
    left_on: str
    right_on: str
    left_by: tuple[str, ...] = ()
    right_by: tuple[str, ...] = ()
    strategy: str = "backward"
    tolerance: Expr | None = None
    suffix: str = "_right"

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def right_outputs(self) -> tuple[str, ...]:
        """The right columns the output keeps: all but the `by` columns and an `on` named as the left's."""
        return tuple(n for n in self.right.schema.names
                     if n not in self.right_by and not (n == self.right_on and n == self.left_on))


@dataclass(frozen=True)
class Explode(Node):
    """explode(columns): a row per element of the List `columns` (equally long in each row), the other columns
    repeated; an empty list gives no row (one holding null with `empty_as_null`), a null list one holding null
    (none without `keep_nulls`)."""

    input: Node
    columns: tuple[str, ...]
    empty_as_null: bool = False
    keep_nulls: bool = True

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


@dataclass(frozen=True)
class Union(Node):
    """All rows of every input, in input order; schemas must match."""

    inputs_: tuple[Node, ...]

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.inputs_


@dataclass(frozen=True)
class MapBatches(Node):
    """An opaque Python function from RecordBatch to RecordBatch with a declared schema."""

    input: Node
    fn: Callable
    output_schema: Schema

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)


NODE_TYPES = (Scan, Filter, Project, Aggregate, Join, Sort, Limit, Distinct, Union, MapBatches, Unique, AsofJoin, Explode)

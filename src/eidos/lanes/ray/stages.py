"""A plan cut into stages at its exchanges; pure IR (no Ray), so explain() and tests read it alone.

A stage is one set of Ray tasks, each running the stage's plan on the rows its inputs hand it. Scan,
Filter and Project run in the stage of their input, partition by partition (narrow), except a Project
computing a window function, which gathers its input into one task; a Union hands on its
inputs' partitions, in order. Aggregate, Distinct and a hash Join read their input through a hash
exchange (rows split by their keys into `partitions` parts), a small join side is broadcast to every task
of the other, a Sort is gathered into one task when small and range-partitioned when not, and a Limit
takes its first rows in every partition and the final ones in one task. Anything else (MapBatches, which
sees its whole input at once) gathers its input into one task; a one-task stage keeps the single-input
nodes above it. Partitions stay in order, so every order the plan defines (semantics section 15) holds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from eidos.errors import shown
from eidos.ir import dtypes as T
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.render import expr_text, node_label
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource, ParquetSource, PartSource, Source
from eidos.ir.typing import promote
from eidos.lanes.ray import partials

FORWARD, HASH, PARTIAL, RANGE, GATHER, BROADCAST = "forward", "hash", "partial", "range", "gather", "broadcast"


@dataclass(frozen=True)
class Input(Source):
    """A leaf of a stage's plan: the rows input `index` of the stage hands each task."""

    index: int = 0

    def describe(self) -> str:
        return f"input {self.index}"


@dataclass(frozen=True)
class RowGroups(Source):
    """Row groups `groups` of file `file` of a parquet source: a task reads them itself."""

    parquet: ParquetSource | None = None
    file: int = 0
    groups: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"row groups {', '.join(map(str, self.groups))} of {self.parquet.files[self.file]!r}"


@dataclass(frozen=True)
class Exchange:
    """How the rows of a stage's tasks reach the stage that reads them. For HASH, each task splits its rows
    into `partitions` parts by the hash of `keys` (cast to `types` where given, so both sides of a join agree);
    for PARTIAL, each task makes `aggregate`'s partial states of its rows (partials.py) and splits those by
    the hash of their keys, and the reading task combines them; for RANGE, by where `sort`'s keys fall among
    boundaries sampled from the rows."""

    how: str
    partitions: int = 1
    keys: tuple[E.Expr, ...] = ()
    types: tuple[T.DType | None, ...] = ()
    sort: N.Sort | None = None
    aggregate: N.Aggregate | None = None

    def describe(self) -> str:
        keys = ", ".join(_key_text(k) for k in (self.keys if self.sort is None else [k.expr for k in self.sort.keys]))
        if self.how == PARTIAL:
            return f"partial states, hash [{keys}] into {self.partitions}" if self.keys else "partial states, gather"
        if self.how == HASH:
            return f"hash [{keys}] into {self.partitions}"
        if self.how == RANGE:
            return f"range [{keys}] into {self.partitions}"
        return self.how


@dataclass(frozen=True)
class Stage:
    """One set of tasks: `tasks` of them, each running `plan` (None for a union: its inputs' tasks are its
    own). A scan stage's plan holds one Scan, read by task i from `splits[i]`; the others read Input leaves."""

    key: str
    what: str
    plan: N.Node | None
    inputs: tuple[tuple[Stage, Exchange], ...] = ()
    tasks: int = 1
    splits: tuple[Source, ...] = ()
    single: bool = False   # one task by construction (a gather): the nodes above it run there too
    bytes: int | None = None   # the estimated size of what its tasks read, together (for memory requests)

    def walk(self):
        """This stage and every stage it reads, inputs first."""
        for stage, _ in self.inputs:
            yield from stage.walk()
        yield self


def cut(plan: N.Node, partitions: int, *, broadcast_bytes: int, gather_bytes: int, partials: bool = True) -> Stage:
    """`plan` as a tree of stages; exchanges make `partitions` parts. With `partials`, an aggregate whose
    aggregations all have combinable states (partials.plan) moves those states rather than its rows."""
    return _Cutter(max(1, partitions), broadcast_bytes, gather_bytes, partials).visit(plan)


class _Cutter:
    def __init__(self, partitions: int, broadcast_bytes: int, gather_bytes: int, partials: bool):
        self.p, self.broadcast_bytes, self.gather_bytes = partitions, broadcast_bytes, gather_bytes
        self.partials = partials
        self.keys = (f"s{i}" for i in itertools.count(1))

    def visit(self, node: N.Node) -> Stage:
        if isinstance(node, N.Scan):
            splits = split(node.source, node.columns, self.p)
            return Stage(next(self.keys), "scan", node, tasks=len(splits), splits=splits,
                         bytes=estimated_bytes(node))
        if isinstance(node, N.Union):
            inputs = tuple((self.visit(i), Exchange(FORWARD)) for i in node.inputs)
            return Stage(next(self.keys), "union", None, inputs, tasks=sum(s.tasks for s, _ in inputs))
        if isinstance(node, N.Join):
            return self.join(node)
        if isinstance(node, N.AsofJoin):   # each left row on its own, against every right row: broadcast the right
            left, right = self.visit(node.left), self.visit(node.right)
            return Stage(next(self.keys), "join", map_inputs(node, _inputs()),
                         ((left, Exchange(FORWARD)), (right, Exchange(BROADCAST))), left.tasks)
        below = self.visit(node.input)
        windowed = any(map(E.contains_window, node.expressions()))   # a window reads its whole input
        if (isinstance(node, (N.Filter, N.Project)) and not windowed) or below.single:
            return extend(below, lambda plan: _over(node, plan))
        states = partials.plan(node) if isinstance(node, N.Aggregate) and self.partials else None
        if states is not None:
            parts = self.p if node.keys else 1
            how = Exchange(PARTIAL, parts, tuple(map(E.Column, states.keys)), aggregate=node)
            return Stage(next(self.keys), "combine", _input(0, node), ((below, how),), parts,
                         single=not node.keys, bytes=estimated_bytes(node.input))
        if isinstance(node, N.Aggregate) and node.keys:
            return self.exchange(node, "aggregate", below, Exchange(HASH, self.p, tuple(e for _, e in node.keys)))
        if isinstance(node, N.Distinct):
            keys = tuple(E.Column(name) for name in node.schema.names)
            return self.exchange(node, "distinct", below, Exchange(HASH, self.p, keys))
        if isinstance(node, N.Sort):
            size = estimated_bytes(node.input)
            if size is None or size > self.gather_bytes:
                return self.exchange(node, "sort", below, Exchange(RANGE, self.p, sort=node))
        if isinstance(node, N.Limit):
            first = min(node.n + node.offset, N.MAX_COUNT)
            below = extend(below, lambda plan: N.Limit(plan, first, 0))
        what = {N.Aggregate: "aggregate", N.Sort: "sort", N.Limit: "limit"}.get(type(node), "gather")
        return replace(self.exchange(node, what, below, Exchange(GATHER)), tasks=1, single=True)

    def exchange(self, node: N.Node, what: str, below: Stage, how: Exchange) -> Stage:
        tasks = how.partitions if how.how in (HASH, RANGE) else 1
        return Stage(next(self.keys), what, _over(node, _input(0, node.input)), ((below, how),), tasks,
                     bytes=estimated_bytes(node.input))

    def join(self, node: N.Join) -> Stage:
        left, right = self.visit(node.left), self.visit(node.right)
        plan = map_inputs(node, _inputs())
        sizes = estimated_bytes(node.left), estimated_bytes(node.right)
        small = [size is not None and size <= self.broadcast_bytes for size in sizes]
        total = None if None in sizes else sum(sizes)
        if node.how in ("cross", "semi", "anti") or (node.how in ("inner", "left") and small[1]):
            # semi and anti keep the left order, cross its left-major order: the right side is broadcast
            inputs = ((left, Exchange(FORWARD)), (right, Exchange(BROADCAST)))
            return Stage(next(self.keys), "join", plan, inputs, left.tasks, bytes=total)
        if node.how in ("inner", "right") and small[0]:
            inputs = ((left, Exchange(BROADCAST)), (right, Exchange(FORWARD)))
            return Stage(next(self.keys), "join", plan, inputs, right.tasks, bytes=total)
        types = tuple(promote(node.left.schema[a], node.right.schema[b], op="join")
                      for a, b in zip(node.left_on, node.right_on))
        inputs = ((left, Exchange(HASH, self.p, tuple(map(E.Column, node.left_on)), types)),
                  (right, Exchange(HASH, self.p, tuple(map(E.Column, node.right_on)), types)))
        return Stage(next(self.keys), "join", plan, inputs, self.p, bytes=total)


def _input(index: int, node: N.Node) -> N.Node:
    return N.Scan(Input(node.schema, index))


def _inputs():
    """map_inputs' function giving each input of a node its Input leaf, in order."""
    count = itertools.count()
    return lambda child: _input(next(count), child)


def _over(node: N.Node, plan: N.Node) -> N.Node:
    """`node` reading `plan` in place of its one input."""
    return map_inputs(node, lambda _: plan)


def extend(stage: Stage, make) -> Stage:
    """`stage` with `make(plan)` run on top of its plan in every task (into each input of a union)."""
    if stage.plan is None:
        return replace(stage, inputs=tuple((extend(s, make), how) for s, how in stage.inputs))
    return replace(stage, plan=make(stage.plan))


def split(source: Source, columns: tuple[str, ...] | None, partitions: int) -> tuple[Source, ...]:
    """`source` as the sources of a scan stage's tasks, in order: an in-memory table in up to `partitions`
    slices, parquet files in up to `partitions` groups of files (of row groups when there are fewer
    files), anything else whole."""
    if isinstance(source, ArrowSource):
        return tuple(ArrowSource(source.schema, table=source.table.slice(g.start, len(g)), label=source.label)
                     for g in _contiguous(source.table.num_rows, partitions))
    if isinstance(source, ParquetSource) and len(source.files) > 1:
        return tuple(replace(source, files=source.files[g.start:g.stop], values=source.values[g.start:g.stop],
                             rows=None, nbytes=None) for g in _contiguous(len(source.files), partitions))
    if isinstance(source, ParquetSource) and source.files:
        count = _row_groups(source.files[0], source.storage)
        if count > 1 and partitions > 1:
            return tuple(RowGroups(source.schema, source, 0, tuple(g)) for g in _contiguous(count, partitions))
    return (source,)


def _contiguous(count: int, parts: int) -> list[range]:
    """0..count-1 in at most `parts` runs of consecutive numbers, in order."""
    n = max(1, min(parts, count))
    bounds = [count * i // n for i in range(n + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def _row_groups(path: str, storage: tuple = ()) -> int:
    from eidos.hal.files import footer

    try:
        return footer(path, storage)[0].num_row_groups
    except Exception:   # noqa: BLE001 - an unreadable file is read whole, where the reader names the error
        return 1


def estimated_bytes(node: N.Node) -> int | None:
    """Bytes `node`'s sources hold in the columns it reads; None when a source does not say."""
    total = 0
    for scan in node.walk():
        if not isinstance(scan, N.Scan):
            continue
        source = scan.source
        size = estimated_bytes(source.plan) if isinstance(source, PartSource) and source.plan else \
            source.estimated_bytes
        if size is None:
            return None
        if scan.columns is not None and len(source.schema):
            size = size * len(scan.columns) // len(source.schema)
        total += size
    return total


def describe(root: Stage, partitions: int, where: str) -> list[str]:
    """explain()'s lines for the stages: the last first, each stage's inputs under it with their exchange."""
    count = sum(1 for s in root.walk() if s.plan is not None)
    lines = [f"stages: {count}, run as Ray tasks on {where}; an exchange makes {partitions} partitions; "
             "each task asks for 1 CPU, and memory for its share of the stage's estimated input"]

    def visit(stage: Stage, how: str, depth: int) -> None:
        pad = "  " * depth
        tasks = f"{stage.tasks} task{'s' if stage.tasks != 1 else ''}"
        if stage.plan is None:
            lines.append(f"{pad}{how}{stage.key} union of {len(stage.inputs)} inputs, {tasks}, in order")
        else:
            steps = [_step(n, stage) for n in _post_order(stage.plan)]
            steps = [step for step in steps if step]
            lines.append(f"{pad}{how}{stage.key} {stage.what}, {tasks}{_split_text(stage)}: {' > '.join(steps)}")
        for below, exchange in stage.inputs:
            visit(below, f"<- {exchange.describe()}: ", depth + 1)

    visit(root, "", 1)
    return lines


def _split_text(stage: Stage) -> str:
    if not stage.splits or len(stage.splits) == 1:
        return ""
    first = stage.splits[0]
    unit = "slices" if isinstance(first, ArrowSource) else "row-group runs" if isinstance(first, RowGroups) \
        else "file groups"
    return f" ({len(stage.splits)} {unit})"


def _step(node: N.Node, stage: Stage) -> str:
    """What a task of `stage` does at `node`, for explain: an Input leaf is nothing to say unless its rows
    are combined from partial states."""
    if not _is_input(node):
        return node_label(node)
    how = stage.inputs[node.source.index][1]
    return f"{node_label(how.aggregate)} (combining the partial states)" if how.how == PARTIAL else ""


def _post_order(node: N.Node):
    for child in node.inputs:
        yield from _post_order(child)
    yield node


def _is_input(node: N.Node) -> bool:
    return isinstance(node, N.Scan) and isinstance(node.source, Input)


def _key_text(key: E.Expr) -> str:
    return shown(key.name) if isinstance(key, E.Column) else expr_text(key)

"""Running stages (stages.py) as Ray tasks.

Each task runs its stage's plan with local.run_local over the blocks it is handed as Ray object
arguments (Arrow tables, zero-copy from the object store on the same node) and leaves its result as one
block, or split into parts for a hash or range exchange (num_returns = partitions). In-memory sources are
put in the object store in slices; files are read inside the tasks. The driver only starts tasks (Ray
schedules them as their arguments become ready), samples a range exchange's keys, and fetches the last
stage's blocks in order, one at a time. Ctrl-C, or a stream dropped before its end, cancels every task
still running.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import ray

from eidos.errors import EidosError, ExecutionError
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource, Source
from eidos.lanes.ray import partials
from eidos.lanes.ray.connect import Cluster
from eidos.lanes.ray.local import in_task, run_local
from eidos.lanes.ray.stages import BROADCAST, FORWARD, GATHER, HASH, PARTIAL, RANGE, Exchange, Input, RowGroups, Stage

HASH_SEED = 0x5EED_E1D05   # every task hashes with it, so equal keys land in one partition wherever they are
SAMPLE_ROWS = 64           # key rows each task of a range exchange samples for the boundaries


@dataclass(frozen=True)
class Work:
    """What one task does: run `plan`, whose Input leaf i reads the next `inputs[i]` block arguments (the
    rows `combine[i]` makes of them when it is an aggregate: its partial states), and leave the result as
    `out` says. `sampling`: a range exchange's first step (the result and a sample of its keys); a range
    split's last block argument is the boundaries."""

    plan: N.Node
    inputs: tuple[int, ...]
    out: Exchange
    sampling: bool = False
    combine: tuple[N.Aggregate | None, ...] = ()


def _task(work: Work, *blocks: pa.Table):
    token = in_task.set(True)
    try:
        bounds = None
        if work.out.how == RANGE and not work.sampling:
            *blocks, bounds = blocks
        table = run_local(_bind(work, blocks))
        if work.sampling:
            return table, _sample(table, work.out.sort)
        if work.out.how == PARTIAL:
            table = partials.plan(work.out.aggregate).partial(table)
        if work.out.how in (HASH, PARTIAL):
            return _parts(table, _hashed(table, work.out), work.out.partitions)
        if work.out.how == RANGE:
            return _parts(table, _ranged(table, work.out.sort, bounds), work.out.partitions)
        return table
    finally:
        in_task.reset(token)


_remote = ray.remote(_task)


def _bind(work: Work, blocks) -> N.Node:
    """`work.plan` with each Input leaf reading its blocks (concatenated in order, or the rows combined from
    partial states) and each row-group source read."""
    starts = np.cumsum((0,) + work.inputs)

    def visit(node: N.Node) -> N.Node:
        if isinstance(node, N.Scan) and isinstance(node.source, Input):
            i = node.source.index
            parts = list(blocks[starts[i]:starts[i + 1]])
            if i < len(work.combine) and work.combine[i] is not None:
                table = partials.plan(work.combine[i]).combine(parts)
            else:
                table = pa.concat_tables(parts) if parts else node.source.schema.to_arrow().empty_table()
            return replace(node, source=ArrowSource.of(table, node.source.schema, kind="block"))
        if isinstance(node, N.Scan) and isinstance(node.source, RowGroups):
            return replace(node, source=ArrowSource.of(_read(node.source, node.columns), kind="block"), columns=None)
        return map_inputs(node, visit)

    return visit(work.plan)


def _read(source: RowGroups, columns: tuple[str, ...] | None) -> pa.Table:
    from eidos.hal.arrow import pq_table

    names = list(columns) if columns is not None else list(source.schema.names)
    target = pa.schema([pa.field(n, source.schema[n].to_arrow()) for n in names])
    return pq_table(source.parquet, source.file, names, target, row_groups=source.groups)


def _keys(table: pa.Table, keys: tuple[E.Expr, ...], schema=None) -> pa.Table:
    """The key values of `table`'s rows (of `schema`, by default its own), one column each (k0, k1, ...),
    computed as any lane computes them."""
    if all(isinstance(k, E.Column) for k in keys):
        got = table.select([k.name for k in keys])
    else:
        scan = N.Scan(ArrowSource.of(table, schema, kind="block"))
        got = run_local(N.Project(scan, tuple((f"k{i}", k) for i, k in enumerate(keys))))
    return got.rename_columns([f"k{i}" for i in range(len(keys))])


def _hashed(table: pa.Table, out: Exchange) -> np.ndarray:
    """Each row's part: the hash of its keys (cast to the exchange's types; -0.0 as 0.0, one NaN) mod partitions."""
    import polars as pl

    keys = _keys(table, out.keys)
    for i, t in enumerate(out.types):
        if t is not None and keys.column(i).type != t.to_arrow():
            keys = keys.set_column(i, f"k{i}", keys.column(i).cast(t.to_arrow(), safe=False))
    frame = pl.from_arrow(keys)
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    if floats:
        frame = frame.with_columns(pl.when(pl.col(c).is_nan()).then(float("nan")).otherwise(pl.col(c) + 0.0)
                                   .cast(frame.schema[c]).alias(c) for c in floats)
    return (frame.hash_rows(seed=HASH_SEED).to_numpy() % out.partitions).astype(np.int64)


def _sample(table: pa.Table, sort: N.Sort) -> pa.Table:
    """Up to SAMPLE_ROWS rows of the sort keys, spread evenly over `table`."""
    keys = _keys(table, tuple(k.expr for k in sort.keys), sort.input.schema)
    n = keys.num_rows
    return keys.take(np.unique(np.linspace(0, n - 1, min(n, SAMPLE_ROWS)).astype(np.int64))) if n else keys


def _sorted(keys: pa.Table, sort: N.Sort) -> pa.Table:
    """`keys` (columns k0, k1, ... and maybe more) sorted as `sort` sorts its keys, stably, by a local lane."""
    order = tuple(N.SortKey(E.Column(f"k{i}"), k.descending, k.nulls_last) for i, k in enumerate(sort.keys))
    return run_local(N.Sort(N.Scan(ArrowSource.of(keys, kind="block")), order))


def boundaries(samples: list[pa.Table], sort: N.Sort, partitions: int) -> pa.Table:
    """partitions - 1 key rows splitting the sampled keys into runs of about equal size, in sort order."""
    every = _sorted(pa.concat_tables(samples), sort)
    n = every.num_rows
    return every.take([n * j // partitions for j in range(1, partitions)]) if n else every


def _ranged(table: pa.Table, sort: N.Sort, bounds: pa.Table) -> np.ndarray:
    """Each row's part: how many boundaries sort before it or with it. The boundaries and the rows' keys are
    sorted together, boundaries first, by the sort itself (stable), so equal keys share a part everywhere."""
    keys = _keys(table, tuple(k.expr for k in sort.keys), sort.input.schema)
    both = pa.concat_tables([bounds.append_column("row", pa.array(np.full(bounds.num_rows, -1), pa.int64())),
                             keys.append_column("row", pa.array(np.arange(keys.num_rows), pa.int64()))])
    rows = _sorted(both, sort).column("row").to_numpy()
    before = np.cumsum(rows < 0)
    part = np.empty(keys.num_rows, np.int64)
    part[rows[rows >= 0]] = before[rows >= 0]
    return part


def _parts(table: pa.Table, part: np.ndarray, partitions: int):
    """`table`'s rows in `partitions` parts by `part`, each in the table's order (zero-copy slices of one take)."""
    order = np.argsort(part, kind="stable")
    counts = np.bincount(part, minlength=partitions)
    grouped = table.take(order)
    starts = np.concatenate(([0], np.cumsum(counts)))
    out = tuple(grouped.slice(starts[j], counts[j]) for j in range(partitions))
    return out if partitions > 1 else out[0]


class _Run:
    """One run's tasks: started stage by stage, kept so that an interrupted run cancels them."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.tasks: list[ray.ObjectRef] = []

    def outputs(self, stage: Stage, out: Exchange) -> list[list[ray.ObjectRef]]:
        """The blocks of `stage`'s tasks, in order; each task's as `out` splits it."""
        if stage.plan is None:
            return [refs for below, _ in stage.inputs for refs in self.outputs(below, out)]
        given = [self.outputs(below, how) for below, how in stage.inputs]
        memory = self._memory(stage)
        results = []
        for t in range(stage.tasks):
            args, counts = [], []
            for (_, how), blocks in zip(stage.inputs, given):
                refs = [b[0] for b in blocks] if how.how in (GATHER, BROADCAST) else \
                    [blocks[t][0]] if how.how == FORWARD else [b[t] for b in blocks]
                counts.append(len(refs))
                args += refs
            plan = stage.plan
            if stage.splits:
                plan = self._scan(plan, stage.splits[t], len(counts), args)
                counts.append(len(args) - sum(counts))
            combine = tuple(how.aggregate for _, how in stage.inputs)
            work = Work(plan, tuple(counts), out, sampling=out.how == RANGE, combine=combine)
            returns = 2 if work.sampling else out.partitions if out.how in (HASH, PARTIAL, RANGE) else 1
            results.append(self.task(work, args, returns, memory, stage.key))
        if out.how == RANGE:
            results = self._split_by_range(results, out)
        return results

    def _scan(self, plan: N.Node, source: Source, index: int, args: list) -> N.Node:
        """`plan` reading `source` in place of its scan's; an in-memory slice goes to the object store."""
        if isinstance(source, ArrowSource):
            args.append(ray.put(source.table))
            source = Input(source.schema, index)

        def visit(node: N.Node) -> N.Node:
            if isinstance(node, N.Scan) and not isinstance(node.source, Input):
                return replace(node, source=source)
            return map_inputs(node, visit)

        return visit(plan)

    def _split_by_range(self, sampled: list[list[ray.ObjectRef]], out: Exchange) -> list[list[ray.ObjectRef]]:
        samples = [_get(refs[1]) for refs in sampled]
        bounds = ray.put(boundaries(samples, out.sort, out.partitions))
        keep = N.Scan(Input(out.sort.input.schema, 0))
        return [self.task(Work(keep, (1,), out), [refs[0], bounds], out.partitions, None, "range split")
                for refs in sampled]

    def _memory(self, stage: Stage) -> int | None:
        """A task's memory request: twice its share of the stage's estimated input, at most half a node's."""
        if stage.bytes is None or not self.cluster.memory:
            return None
        return int(min(2 * stage.bytes / max(1, stage.tasks), self.cluster.memory / 2)) or None

    def task(self, work: Work, args: list, returns: int, memory: int | None, name: str) -> list[ray.ObjectRef]:
        options = {"num_returns": returns, "num_cpus": 1, "name": f"eidos {name}"}
        if memory:
            options["memory"] = memory
        refs = _remote.options(**options).remote(work, *args)
        refs = list(refs) if returns > 1 else [refs]
        self.tasks.append(refs[0])
        return refs

    def forget_finished(self) -> None:
        """Let go of the finished tasks' first blocks (kept for cancel()), so the store can free them."""
        if self.tasks:
            self.tasks = ray.wait(self.tasks, num_returns=len(self.tasks), timeout=0, fetch_local=False)[1]

    def cancel(self) -> None:
        """Stop every task still pending or running (ray.cancel(force=True) ends a running task's worker). A
        failed run does not: its failed task's dependents fail with it, and Ray 2.60's driver can die
        ("Tried to complete task that was not pending") when a task is force-cancelled as it completes."""
        self.forget_finished()
        for ref in self.tasks:
            ray.cancel(ref, force=True)


def stream(root: Stage, cluster: Cluster) -> Iterator[pa.RecordBatch]:
    """The last stage's blocks as record batches, in order, fetched one object at a time."""
    run = _Run(cluster)
    try:
        blocks = [refs[0] for refs in run.outputs(root, Exchange(FORWARD))]
        while blocks:
            table = _get(blocks.pop(0))
            run.forget_finished()
            yield from table.to_batches()
    except (KeyboardInterrupt, GeneratorExit):   # Ctrl-C, or the stream dropped before its end
        run.cancel()
        raise


def _get(ref: ray.ObjectRef) -> pa.Table:
    """One task's result; its error as the task raised it (an EidosError keeps its message and class)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = e.cause
        if isinstance(cause, EidosError):
            raise cause from e
        raise ExecutionError(f"a task of the ray lane failed: {type(cause).__name__}: {cause}") from e
    except ray.exceptions.RayError as e:
        raise ExecutionError(f"the Ray cluster failed to run a task of the ray lane: {e}") from e

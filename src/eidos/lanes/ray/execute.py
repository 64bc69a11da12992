"""Running a plan as Ray tasks: in-memory sources go to the object store, each task runs its piece on
the worker's own lanes (local.run_local) over blocks it receives as Ray object arguments, and the result
comes back one object at a time. Ctrl-C cancels every task still running."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import ray

from eidos.errors import EidosError, ExecutionError
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource, Source
from eidos.lanes.ray.connect import Cluster
from eidos.lanes.ray.local import in_task, run_local


@dataclass(frozen=True)
class Input(Source):
    """The rows a task is handed as its object arguments `first` .. `first + count - 1`, concatenated in order."""

    first: int = 0
    count: int = 1

    def describe(self) -> str:
        return f"blocks {self.first}..{self.first + self.count - 1}"


@dataclass(frozen=True)
class Work:
    """What one task does: run `plan`, whose Input scans read the task's block arguments."""

    plan: N.Node


def _bind(plan: N.Node, blocks: tuple[pa.Table, ...]) -> N.Node:
    """`plan` with each Input scan reading its blocks as an in-memory source (zero-copy from the object store)."""

    def visit(node: N.Node) -> N.Node:
        if isinstance(node, N.Scan) and isinstance(node.source, Input):
            source = node.source
            parts = blocks[source.first:source.first + source.count]
            table = pa.concat_tables(parts) if parts else source.schema.to_arrow().empty_table()
            return replace(node, source=ArrowSource.of(table, source.schema, kind="block"))
        return map_inputs(node, visit)

    return visit(plan)


def _task(work: Work, *blocks: pa.Table) -> pa.Table:
    token = in_task.set(True)
    try:
        return run_local(_bind(work.plan, blocks))
    finally:
        in_task.reset(token)


_remote = ray.remote(_task)


class _Launched:
    """The tasks one run started, so that an interrupted run cancels them."""

    def __init__(self) -> None:
        self.refs: list[ray.ObjectRef] = []

    def put(self, table: pa.Table) -> ray.ObjectRef:
        return ray.put(table)

    def task(self, work: Work, blocks: list[ray.ObjectRef]) -> ray.ObjectRef:
        ref = _remote.options(num_cpus=1).remote(work, *blocks)
        self.refs.append(ref)
        return ref

    def cancel(self) -> None:
        for ref in self.refs:
            ray.cancel(ref, force=True)


def _detach(plan: N.Node, launched: _Launched) -> tuple[N.Node, list[ray.ObjectRef]]:
    """`plan` with its in-memory sources put in the object store and read as task arguments."""
    blocks: list[ray.ObjectRef] = []
    seen: dict[int, Input] = {}

    def visit(node: N.Node) -> N.Node:
        if isinstance(node, N.Scan) and isinstance(node.source, ArrowSource):
            key = id(node.source.table)
            if key not in seen:
                seen[key] = Input(node.source.schema, len(blocks), 1)
                blocks.append(launched.put(node.source.table))
            return replace(node, source=seen[key])
        return map_inputs(node, visit)

    return visit(plan), blocks


def stream(plan: N.Node, cluster: Cluster, partitions: int) -> Iterator[pa.RecordBatch]:
    """`plan`'s result as record batches, fetched from the cluster one object at a time."""
    launched = _Launched()
    try:
        local, blocks = _detach(plan, launched)
        results = [launched.task(Work(local), blocks)]
        for ref in results:
            yield from _get(ref).to_batches()
    except KeyboardInterrupt:
        launched.cancel()
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

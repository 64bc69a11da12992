"""The cluster lane on Ray: a plan cut into stages at its exchanges, each stage a set of Ray tasks that run
their piece on this machine's own lanes inside the workers (docs/ray.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa

from eidos.errors import BackendUnavailable
from eidos.hal.lane import Availability, Lane, installed
from eidos.ir import nodes as N
from eidos.lanes.ray.coverage import COVERAGE

INSTALL = "pip install 'eidos[ray]'"
PARTITIONS_ENV = "EIDOS_RAY_PARTITIONS"


class RayLane(Lane):
    """Runs a plan as Ray tasks, stage by stage (stages.py cuts it, execute.py runs it).

    Chosen by the planner (rule 3, data volume) only when a cluster is configured: EIDOS_RAY_ADDRESS,
    `address=`, or a Ray this process initialised itself. `engine="ray"` always runs it: without a
    cluster it starts a local Ray with this machine's cores, on demand.

    `partitions` (or EIDOS_RAY_PARTITIONS) sets how many partitions an exchange makes; by default the
    cluster's CPU count, at least 2. A join side whose estimated size is under `broadcast_bytes` is
    broadcast to every task of the other side; a sort whose input is estimated under `gather_bytes`
    runs in one task, a larger one is range-partitioned.
    """

    name = "ray"
    kind = "cluster"
    coverage = COVERAGE

    def __init__(self, *, address: str | None = None, partitions: int | None = None,
                 broadcast_bytes: int = 64 << 20, gather_bytes: int = 256 << 20):
        self.address = address
        self.partitions = partitions
        self.broadcast_bytes = broadcast_bytes
        self.gather_bytes = gather_bytes

    def is_available(self) -> Availability:
        from eidos.lanes.ray import connect

        ready = self.is_available_when_named()
        if not ready:
            return ready
        if not (connect.wanted(self.address) or connect.user_connected()):
            return Availability(False, f"no Ray cluster is configured: set {connect.ENV}, call ray.init(), or "
                                       "name it (engine='ray' starts a local Ray with this machine's cores)")
        return ready

    def is_available_when_named(self) -> Availability:
        if not installed("ray"):
            return Availability(False, f"ray is not installed: {INSTALL}")
        from eidos.lanes.ray.local import in_task

        if in_task.get():
            return Availability(False, "this is one of the cluster lane's own tasks")
        return Availability(True)

    def at(self, address: str) -> RayLane:
        return RayLane(address=address, partitions=self.partitions, broadcast_bytes=self.broadcast_bytes,
                       gather_bytes=self.gather_bytes)

    def execute(self, plan: N.Node) -> pa.Table:
        batches = list(self.execute_stream(plan))
        return pa.Table.from_batches(batches, plan.schema.to_arrow())

    def execute_stream(self, plan: N.Node) -> Iterator[pa.RecordBatch]:
        """The result's batches."""
        available = self.is_available_when_named()
        if not available:
            raise BackendUnavailable(f"lane 'ray' is unavailable: {available.reason}")
        from eidos.lanes.ray import connect, execute

        cluster = connect.connect(self.address)
        partitions = self.partition_count(cluster.cpus)
        yield from execute.stream(self.stages(plan, partitions), cluster)

    def stages(self, plan: N.Node, partitions: int):
        """`plan` cut into stages (stages.py) with this lane's settings."""
        from eidos.lanes.ray import stages

        return stages.cut(plan, partitions, broadcast_bytes=self.broadcast_bytes, gather_bytes=self.gather_bytes)

    def describe(self, plan: N.Node) -> list[str]:
        """The stages, their tasks and exchanges, and where they run; a local Ray is not started to say so."""
        from eidos.lanes.ray import connect, stages

        cluster = connect.connected()
        if cluster is None and connect.wanted(self.address):
            cluster = connect.connect(self.address)
        where = cluster.where() if cluster else f"a local Ray eidos starts on demand ({os.cpu_count()} CPUs)"
        partitions = self.partition_count(cluster.cpus if cluster else os.cpu_count() or 1)
        return stages.describe(self.stages(plan, partitions), partitions, where)

    def partition_count(self, cpus: int) -> int:
        """How many partitions an exchange makes on a cluster of `cpus` CPUs."""
        text = os.environ.get(PARTITIONS_ENV)
        if self.partitions is None and text:
            try:
                return max(1, int(text))
            except ValueError:
                raise BackendUnavailable(f"{PARTITIONS_ENV}={text!r} is not a whole number") from None
        return max(1, self.partitions) if self.partitions is not None else max(2, cpus)

    def __repr__(self) -> str:
        return f"<lane ray (cluster{', ' + self.address if self.address else ''})>"

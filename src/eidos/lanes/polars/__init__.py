"""The vector lane on Polars: the plan as one LazyFrame, collected to Arrow."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from eidos.errors import BackendUnavailable
from eidos.hal.lane import Availability, Estimate, Lane, installed
from eidos.hal.memo import once
from eidos.ir import nodes as N
from eidos.lanes.polars.coverage import COVERAGE


class PolarsLane(Lane):
    """Runs a plan as a Polars LazyFrame (scans stay lazy, so Polars pushes projections and filters
    into parquet and CSV reads).

    `PolarsLane(streaming=True)` collects on Polars' streaming engine (`engine="streaming"`): it
    processes the input in batches, but has no memory limit, so peak memory is not bounded by the
    budget (bench/out_of_core.py saw 1.9 GiB against 512 MiB). The planner takes it from
    `out_of_core(budget)` only when no lane with a hard limit (DuckDB's) can run the plan, and
    explain() says so. `execute(plan, streaming=True)` streams one run.
    `execute_stream` hands batches over as Polars produces them (`collect_batches`).

    Not everything streams: a MapBatches node sees its whole input at once (Polars collects
    it in memory first), and float sum/mean and std/var run per group in NumPy/Python to be
    exactly rounded as docs/semantics.md says.
    """

    name = "polars"
    kind = "vector"
    coverage = COVERAGE

    def __init__(self, *, streaming: bool = False):
        self.streaming = streaming

    def is_available(self) -> Availability:
        if not installed("polars"):
            return Availability(False, "polars is not installed: pip install 'eidos[polars]'")
        return Availability(True)

    def estimate(self, plan: N.Node) -> Estimate:
        from eidos.hal.constants import key
        from eidos.lanes.polars.cost import DEFAULTS, estimate

        return once(plan, "polars.estimate " + key(DEFAULTS), lambda: estimate(plan))

    def constants(self):
        from eidos.lanes.polars.cost import DEFAULTS

        return DEFAULTS

    def out_of_core(self, budget_bytes: int) -> Lane:
        return PolarsLane(streaming=True)

    @property
    def out_of_core_how(self) -> str:
        if not self.streaming:
            return "in memory"
        return ("on Polars' streaming engine, in batches but with no memory limit: peak memory may "
                "exceed the budget")

    def execute(self, plan: N.Node, *, streaming: bool | None = None) -> pa.Table:
        execute = self._engine().execute
        return execute(plan, streaming=self.streaming if streaming is None else streaming)

    def execute_stream(self, plan: N.Node, *, streaming: bool | None = None) -> Iterator[pa.RecordBatch]:
        execute_stream = self._engine().execute_stream
        yield from execute_stream(plan, streaming=self.streaming if streaming is None else streaming)

    def _engine(self):
        available = self.is_available()
        if not available:
            raise BackendUnavailable(available.reason)
        from eidos.lanes.polars import execute

        return execute

    def __repr__(self) -> str:
        return f"<lane polars (vector{', streaming' if self.streaming else ''})>"

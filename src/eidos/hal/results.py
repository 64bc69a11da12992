"""Where the parts of a split plan keep their results, and how a part reads the results below it.

The runner hands results between parts only through `Results`: it asks it to run a part on its
lane (`run`, which gives a `PartResult` handle), to give the source the reading part's lane reads
in place of that part (`source`), and to let go of everything when the run ends (`release`). It
never holds a part's data itself, so where results live is the implementation's business:

- `DriverResults` (the default) keeps each result as an Arrow table in this process.
- A cluster lane's implementation runs a part as a task of its cluster and keeps the object
  references of its output (a Ray `ObjectRef` per block) in its handle; `source` gives a source
  over those references when the reading lane can read them (`reader.can_read(source)` is None:
  a lane of that cluster) and fetches them to the driver as an Arrow source otherwise; `release`
  drops the references.
- A remote lane's implementation sends the part to the execution service, keeps the service's
  handle of the result there, gives a source over that handle to a lane of the same service and
  fetches it for any other, and asks the service to free its handles on `release`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import pyarrow as pa

from eidos.errors import BackendError
from eidos.hal.arrow import conform
from eidos.hal.lane import Lane
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import ArrowSource, Source


@dataclass(frozen=True)
class PartResult:
    """A handle on one part's result: the part's key, its schema, its rows when known. What it holds
    to reach the data (a table, object references, a remote id) is its implementation's."""

    key: str
    schema: Schema
    rows: int | None = None


class Results(ABC):
    """The results of the parts of one run (see the module's docstring)."""

    @abstractmethod
    def run(self, lane: Lane, plan: N.Node, key: str) -> PartResult:
        """Run `plan`, part `key`, on `lane` and keep its result (with the plan's schema)."""

    @abstractmethod
    def source(self, result: PartResult, reader: Lane) -> Source:
        """The source `reader` reads in place of the part `result` is the handle of."""

    def release(self) -> None:  # noqa: B027 - optional: a store that keeps nothing has nothing to let go
        """Let go of every result kept: the run is over."""


@dataclass(frozen=True)
class DriverResult(PartResult):
    table: pa.Table | None = field(default=None, compare=False, repr=False)


class DriverResults(Results):
    """Results as Arrow tables in this process: every lane here reads them as an Arrow source."""

    def run(self, lane: Lane, plan: N.Node, key: str) -> DriverResult:
        table = conform(lane.execute(plan), plan.schema, lane.name)
        return DriverResult(key, plan.schema, table.num_rows, table)

    def source(self, result: PartResult, reader: Lane) -> Source:
        if not isinstance(result, DriverResult):
            raise BackendError(f"part {result.key}'s result {result!r} is not one kept in the driver; "
                               "read it through the Results that ran the part")
        return ArrowSource.of(result.table, result.schema, kind="part")

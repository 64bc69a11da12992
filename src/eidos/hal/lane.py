"""The Lane protocol every plan lane implements.

A lane says what it is (name, kind), whether it can run here and why not,
what it covers (as data), what it costs, and runs a plan to Arrow.
"""

from __future__ import annotations

import functools
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from eidos.errors import PlanError
from eidos.hal.coverage import Coverage
from eidos.ir import nodes as N
from eidos.ir.sources import Source

# Lane kinds the planner's rules look for.
KINDS = ("reference", "vector", "pushdown", "streaming", "cluster", "gpu", "free", "remote")


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@functools.cache
def installed(package: str) -> bool:
    """Whether `package` can be imported, looked up once per process (planning asks on every run;
    a package installed while the process runs is seen by the next process)."""
    return importlib.util.find_spec(package) is not None


@dataclass(frozen=True)
class Estimate:
    """A lane's cost estimate for a plan: seconds, and the figures it came from (for explain).

    `fixed_s` is the part that does not grow with the input (set-up, launches) and `input_bytes` the
    bytes read from the sources: with them the planner finds the input size at which one lane
    overtakes another (rule 4's GPU crossover)."""

    seconds: float
    basis: str = ""
    fixed_s: float = 0.0
    input_bytes: float | None = None


class Lane(ABC):
    """A lane. Subclasses set `name`, `kind`, `coverage` and implement `execute`."""

    name: str = ""
    kind: str = ""
    coverage: Coverage = Coverage.everything()
    # Source locations this lane reads: "local" and/or uri schemes such as "duckdb".
    reads: frozenset[str] = frozenset({"local"})

    def is_available(self) -> Availability:
        """Whether the lane can run here; when not, why and how to install what it needs."""
        return Availability(True)

    def is_available_when_named(self) -> Availability:
        """Whether the lane can run here when a user names it (engine=...); by default the same as
        is_available(). A lane may run on request where the planner would not choose it (the GPU
        lane under Triton's interpreter, without a GPU)."""
        return self.is_available()

    def can_read(self, source: Source) -> str | None:
        """None when this lane can read `source`, else the reason it cannot."""
        where = source.location
        scheme = where.split(":", 1)[0] if where != "local" else "local"
        if scheme in self.reads:
            return None
        return f"cannot read {source.describe()}"

    def supports(self, plan: N.Node) -> list[str]:
        """Everything in `plan` this lane lacks; an empty list means it can run it."""
        gaps = self.coverage.gaps(plan)
        for node in plan.walk():
            if isinstance(node, N.Scan):
                why = self.can_read(node.source)
                if why:
                    gaps.append(why)
        return gaps

    def estimate(self, plan: N.Node) -> Estimate | None:
        """Estimated run time of `plan` on this lane; None when the lane has no cost model."""
        return None

    def constants(self):
        """The lane's default cost constants (an eidos.hal.constants.Constants), which `eidos calibrate`
        measures here; None when the lane has no cost model."""
        return None

    def out_of_core(self, budget_bytes: int) -> Lane | None:
        """This lane configured to run inputs larger than `budget_bytes` (streaming, spilling), or
        None when it cannot. The planner asks for it when the input exceeds the budget, and
        prefers a lane whose configured copy is `memory_limited`."""
        return None

    # A lane configured by out_of_core(): whether its engine holds a hard memory limit (so peak
    # memory stays under the budget), and how it runs, in words, for explain().
    memory_limited: bool = False
    out_of_core_how: str = "out of core"

    # Whether this lane's run-time errors name the failing value, the operation and the column and
    # expression in the plan's own terms, as the reference lane's do (docs/semantics.md, section 17).
    # When not, the runner re-runs a failed plan on the reference lane for the message (hal/replay.py).
    names_failing_values: bool = False

    # A free lane that runs only the opaque Python functions of a plan (udf calls, map_batches steps):
    # the planner cuts each out as a part for it (eidos.hal.parts.by_opaque) and runs the rest elsewhere.
    python_steps_only: bool = False

    def at(self, address: str) -> Lane:
        """This lane running at `address` (`run(engine=..., address=...)`): a lane that runs elsewhere
        (a cluster) gives a copy of itself that runs there; a lane that runs in this process has none."""
        raise PlanError(f"lane {self.name!r} runs in this process, so address={address!r} means nothing to it; "
                        "address= says where a lane that runs elsewhere (a cluster lane) runs")

    def named(self) -> Lane:
        """This lane as `engine=` gets it: itself, by default. A lane the planner chooses only for data that
        lives with it (the remote lane, for tables on its service) reads more when a user names it."""
        return self

    def describe(self, plan: N.Node) -> list[str]:
        """Lines explain() adds after the plan: how this lane runs it (a cluster lane's stages); none by default."""
        return []

    @abstractmethod
    def execute(self, plan: N.Node) -> pa.Table:
        """Run `plan` and return its result as Arrow, with the plan's schema."""

    def execute_profiled(self, plan: N.Node) -> tuple[pa.Table, list[str]]:
        """`execute`, and the engine's own profile of that run as lines of text (its operators with rows
        and time), for `Flow.profile()`; no lines where the engine keeps no profile (the default)."""
        return self.execute(plan), []

    def execute_stream(self, plan: N.Node) -> Iterator[pa.RecordBatch]:
        """Run `plan` and yield record batches; lanes that can stream override this."""
        yield from self.execute(plan).to_batches()

    def __repr__(self) -> str:
        return f"<lane {self.name} ({self.kind})>"


# The public name from the first API (`ei.Backend`, `eidos.hal.lane.Backend`); a lane is a Lane.
Backend = Lane

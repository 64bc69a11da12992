"""Running a decision: the chosen lane, then on UnsupportedError the next capable one,
warned and recorded; `strict=True` raises instead. No other error is swallowed.

A split plan's parts run first, each on its own lane, innermost first; their results are handed
to the parts that read them only through a `Results` (eidos.hal.results): driver memory unless
the caller gives another (a cluster's object store, a remote service).
"""

from __future__ import annotations

import contextvars
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, FallbackWarning, UnsupportedError
from eidos.hal import replay
from eidos.hal.arrow import conform
from eidos.hal.files import check as check_files
from eidos.hal.lane import Lane
from eidos.hal.parts import LOCALITY, Part
from eidos.hal.planner import Decision, decide
from eidos.hal.progress import watching
from eidos.hal.results import DriverResults, PartResult, Results
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import PartSource

# The logger "eidos" (this is its child "eidos.hal.runner"): each decision, each hand-over to another lane,
# each part's and run's end; the SQL lanes log the SQL they send under "eidos.lanes.sql" (DEBUG).
log = logging.getLogger(__name__)


@dataclass
class RunRecord:
    """What happened in one run: the decision, each lane tried and how it ended, and the time; `steps`
    the parts and the finishing plan in the order they ran (what, lane, rows, seconds), and with
    `profile=True` each lane's own profile of its work (`engine`: lane name and lines of text)."""

    decision: Decision
    attempts: list[tuple[str, str]] = field(default_factory=list)
    lane: str | None = None
    seconds: float = 0.0
    steps: list[tuple[str, str, int | None, float]] = field(default_factory=list)
    engine: list[tuple[str, list[str]]] = field(default_factory=list)

    def __str__(self) -> str:
        tried = "; ".join(f"{name}: {outcome}" for name, outcome in self.attempts)
        return f"ran on {self.lane} in {self.seconds:.3f} s ({tried})"

    def _repr_html_(self) -> str:
        from eidos.hal.notebook import run_html

        return run_html(self)


_last: contextvars.ContextVar[RunRecord | None] = contextvars.ContextVar("eidos_last_run", default=None)


def last_run() -> RunRecord | None:
    """The record of the latest run in this context (thread or task): where it ran, how long it took, and each
    lane tried with how it ended.

    Examples:
        >>> ei.from_pydict({"a": [1, 2]}).run(engine="reference").num_rows
        2
        >>> print(ei.last_run())
        ran on reference in ... s (reference: ok)
        >>> ei.last_run().lane, ei.last_run().steps[-1][:3]
        ('reference', ('plan', 'reference', 2))
    """
    return _last.get()


def _lanes_to_try(decision: Decision, strict: bool) -> tuple[Lane, ...]:
    if strict or decision.rule == 1:
        return (decision.lane,)
    return (decision.lane,) + decision.fallbacks


def _call(lane: Lane, fn, plan: N.Node, record: RunRecord | None = None, ran: N.Node | None = None):
    """fn(plan) for `lane`: an engine's own exception type never reaches the user, and with `record`
    an ExecutionError is put in the user's terms (replay.explain re-runs `ran`, the plan the lane was
    running, on the reference lane for the message) and recorded."""
    try:
        try:
            return fn(plan)
        except (EidosError, StopIteration):
            raise
        except Exception as e:
            raise ExecutionError(f"lane {lane.name!r} failed: {type(e).__name__}: {e}") from e
    except ExecutionError as e:
        if record is None:
            raise
        err, outcome = replay.explain(lane, plan if ran is None else ran, e)
        record.attempts.append((lane.name, outcome))
        if err is e:
            raise
        raise err from e


def _parts(decision: Decision, record: RunRecord, results: Results,
           strict: bool = False) -> Callable[[Lane], N.Node]:
    """bind(lane): the decision's plan as `lane` reads it, each part it reads (at any depth) run once on
    its own lane through `results`, innermost first, and read through the source its result gives. A
    part whose lane raises UnsupportedError runs on the finishing lane instead, warned (strict: raised)."""
    parts = {p.key: p for p in decision.parts}
    done: dict[str, PartResult] = {}

    def bind(plan: N.Node, reader: Lane) -> N.Node:
        def visit(node: N.Node) -> N.Node:
            if isinstance(node, N.Scan) and isinstance(node.source, PartSource):
                return N.Scan(results.source(result(parts[node.source.key]), reader))
            return map_inputs(node, visit)
        return visit(plan)

    def on(lane: Lane, part: Part, plan: N.Node) -> PartResult:
        start = time.perf_counter()
        handle = _call(lane, lambda p: results.run(lane, p, part.key), plan, record)
        record.steps.append((f"part {part.key}", lane.name, handle.rows, time.perf_counter() - start))
        log.info("part %s ran on %s in %.3f s (%s rows)", part.key, lane.name, record.steps[-1][3], handle.rows)
        return handle

    def result(part: Part) -> PartResult:
        if part.key in done:
            return done[part.key]
        lane = part.lane
        plan = bind(part.plan, lane)   # the parts below first, outside the try: their errors are theirs
        try:
            handle = on(lane, part, plan)
        except UnsupportedError as e:
            lane = decision.lane
            plan = bind(part.plan, lane)
            if strict or lane.supports(plan):
                raise
            record.attempts.append((part.lane_name, f"part unsupported: {e}"))
            log.warning("lane %s cannot run part %s (%s); %s runs it", part.lane_name, part.key, e, lane.name)
            warnings.warn(f"lane {part.lane_name!r} cannot run its part of this plan ({e}); "
                          f"{lane.name} runs it", FallbackWarning, stacklevel=6)
            handle = on(lane, part, plan)
        rows = "" if handle.rows is None else f"{handle.rows} rows "
        moved = f"pushed-down part: {rows}fetched" if part.by == LOCALITY else f"part: {rows}handed on"
        record.attempts.append((lane.name, moved))
        done[part.key] = handle
        return handle

    return lambda lane: bind(decision.plan, lane) if parts else decision.plan


def _handover(record: RunRecord, lane: Lane, error: UnsupportedError, remaining: bool) -> None:
    record.attempts.append((lane.name, f"unsupported: {error}"))
    if not remaining:
        raise error
    log.warning("lane %s cannot run the plan (%s); handing over to the next capable lane", lane.name, error)
    warnings.warn(f"lane {lane.name!r} cannot run this plan ({error}); handing over to the next capable lane",
                  FallbackWarning, stacklevel=4)


def _decided(decision: Decision) -> Decision:
    log.info("lane %s chosen (rule %d: %s)", decision.lane_name, decision.rule, decision.reason)
    return decision


def run(plan: N.Node, engine: str | None = None, *, strict: bool = False,
        results: Results | None = None, address: str | None = None, profile: bool = False,
        progress: bool | None = None) -> pa.Table:
    """Run `plan` on the lane chosen for it (`engine` running at `address` when given); a split plan's
    parts hand their results on through `results` (driver memory by default). `profile=True` asks the
    finishing lane for its engine's own profile too (`last_run().engine`); `progress` shows a bar for a
    run longer than a second (None: where someone watches, as eidos.hal.progress says)."""
    decision = _decided(decide(plan, engine, address=address))
    check_files(decision.plan)
    record = RunRecord(decision)
    _last.set(record)
    start = time.perf_counter()
    lanes = _lanes_to_try(decision, strict)
    results = results or DriverResults()
    bind = _parts(decision, record, results, strict)
    status = lambda: (len(record.steps), decision.lane_name)  # noqa: E731 - read by the bar's thread
    with watching(progress, len(decision.parts) + 1, status):
        try:
            for i, lane in enumerate(lanes):
                local = bind(lane)
                began = time.perf_counter()
                try:
                    if profile:
                        table, lines = _call(lane, lane.execute_profiled, local, record)
                        record.engine.append((lane.name, lines))
                    else:
                        table = _call(lane, lane.execute, local, record)
                except UnsupportedError as e:
                    _handover(record, lane, e, remaining=i + 1 < len(lanes))
                    continue
                record.attempts.append((lane.name, "ok"))
                record.lane = lane.name
                record.seconds = time.perf_counter() - start
                record.steps.append(("plan", lane.name, table.num_rows, time.perf_counter() - began))
                log.info("ran on %s in %.3f s (%d rows)", lane.name, record.seconds, table.num_rows)
                return conform(table, plan.schema, lane.name)
        finally:
            results.release()
    raise AssertionError("unreachable: the last lane either returns or raises")


def stream(plan: N.Node, engine: str | None = None, *, results: Results | None = None,
           address: str | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of the result. A lane may hand over only before its first batch."""
    decision = _decided(decide(plan, engine, address=address))
    check_files(decision.plan)
    return _stream(plan, decision, results or DriverResults())


def _stream(plan: N.Node, decision: Decision, results: Results) -> Iterator[pa.RecordBatch]:
    record = RunRecord(decision)
    _last.set(record)
    lanes = _lanes_to_try(decision, strict=False)
    start = time.perf_counter()
    bind = _parts(decision, record, results)
    try:
        for i, lane in enumerate(lanes):
            local = bind(lane)
            batches = _call(lane, lane.execute_stream, local, record)
            try:
                first = _call(lane, next, batches, record, local)
            except StopIteration:
                record.attempts.append((lane.name, "ok"))
                record.lane = lane.name
                return
            except UnsupportedError as e:
                _handover(record, lane, e, remaining=i + 1 < len(lanes))
                continue
            record.attempts.append((lane.name, "ok"))
            record.lane = lane.name
            yield conform(first, plan.schema, lane.name)
            while True:
                try:
                    batch = _call(lane, next, batches, record, local)
                except StopIteration:
                    break
                yield conform(batch, plan.schema, lane.name)
            record.seconds = time.perf_counter() - start
            log.info("streamed from %s in %.3f s", lane.name, record.seconds)
            return
    finally:
        results.release()

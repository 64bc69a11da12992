"""Running a decision: the chosen lane, then on UnsupportedError the next capable one,
warned and recorded; `strict=True` raises instead. No other error is swallowed."""

from __future__ import annotations

import contextvars
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, FallbackWarning, UnsupportedError
from eidos.hal.arrow import conform
from eidos.hal import registry
from eidos.hal.lane import Lane
from eidos.hal.planner import Decision, decide
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource, PushedSource


@dataclass
class RunRecord:
    """What happened in one run: the decision, each lane tried and how it ended, and the time."""

    decision: Decision
    attempts: list[tuple[str, str]] = field(default_factory=list)
    lane: str | None = None
    seconds: float = 0.0

    def __str__(self) -> str:
        tried = "; ".join(f"{name}: {outcome}" for name, outcome in self.attempts)
        return f"ran on {self.lane} in {self.seconds:.3f} s ({tried})"


_last: contextvars.ContextVar[RunRecord | None] = contextvars.ContextVar("eidos_last_run", default=None)


def last_run() -> RunRecord | None:
    """The record of the latest run in this context (thread or task)."""
    return _last.get()


def _lanes_to_try(decision: Decision, strict: bool) -> tuple[Lane, ...]:
    if strict or decision.rule == 1:
        return (decision.lane,)
    return (decision.lane,) + decision.fallbacks


def _call(lane: Lane, fn, plan: N.Node):
    try:
        return fn(plan)
    except (EidosError, StopIteration):
        raise
    except Exception as e:  # an engine's own exception type never reaches the user
        raise ExecutionError(f"lane {lane.name!r} failed: {type(e).__name__}: {e}") from e


def _run_parts(decision: Decision, record: RunRecord, strict: bool = False) -> N.Node:
    """The plan with each part another lane runs (pushed down to a database, or the GPU lane's numeric
    part and the CPU parts below it) replaced by its Arrow result, innermost parts first. A part whose
    lane raises UnsupportedError runs on the finishing lane instead, warned (strict: raised)."""
    if not decision.parts:
        return decision.plan

    def visit(node: N.Node) -> N.Node:
        if isinstance(node, N.Scan) and isinstance(node.source, PushedSource):
            part = node.source
            lane = registry.get(part.lane)
            plan = visit(part.plan)
            try:
                table = _call(lane, lane.execute, plan)
            except UnsupportedError as e:
                if strict or decision.lane.supports(plan):
                    raise
                record.attempts.append((lane.name, f"part unsupported: {e}"))
                warnings.warn(f"lane {lane.name!r} cannot run its part of this plan ({e}); "
                              f"{decision.lane.name} runs it", FallbackWarning, stacklevel=5)
                lane = decision.lane
                table = _call(lane, lane.execute, plan)
            table = conform(table, part.plan.schema, lane.name)
            what = ("part" if part.place in ("gpu", "cpu") else "pushed-down part")
            record.attempts.append((lane.name, f"{what}: {table.num_rows} rows "
                                               f"{'handed on' if what == 'part' else 'fetched'}"))
            return N.Scan(ArrowSource(node.schema, token=f"part-{uuid.uuid4().hex[:12]}", table=table))
        return map_inputs(node, visit)

    return visit(decision.plan)


def _handover(record: RunRecord, lane: Lane, error: UnsupportedError, remaining: bool) -> None:
    record.attempts.append((lane.name, f"unsupported: {error}"))
    if not remaining:
        raise error
    warnings.warn(f"lane {lane.name!r} cannot run this plan ({error}); handing over to the next capable lane",
                  FallbackWarning, stacklevel=4)


def run(plan: N.Node, engine: str | None = None, *, strict: bool = False) -> pa.Table:
    decision = decide(plan, engine)
    record = RunRecord(decision)
    _last.set(record)
    start = time.perf_counter()
    lanes = _lanes_to_try(decision, strict)
    local = _run_parts(decision, record, strict)
    for i, lane in enumerate(lanes):
        try:
            table = _call(lane, lane.execute, local)
        except UnsupportedError as e:
            _handover(record, lane, e, remaining=i + 1 < len(lanes))
            continue
        record.attempts.append((lane.name, "ok"))
        record.lane = lane.name
        record.seconds = time.perf_counter() - start
        return conform(table, plan.schema, lane.name)
    raise AssertionError("unreachable: the last lane either returns or raises")


def stream(plan: N.Node, engine: str | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of the result. A lane may hand over only before its first batch."""
    return _stream(plan, decide(plan, engine))


def _stream(plan: N.Node, decision: Decision) -> Iterator[pa.RecordBatch]:
    record = RunRecord(decision)
    _last.set(record)
    lanes = _lanes_to_try(decision, strict=False)
    start = time.perf_counter()
    local = _run_parts(decision, record)
    for i, lane in enumerate(lanes):
        batches = _call(lane, lane.execute_stream, local)
        try:
            first = _call(lane, next, batches)
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
                batch = _call(lane, next, batches)
            except StopIteration:
                break
            yield conform(batch, plan.schema, lane.name)
        record.seconds = time.perf_counter() - start
        return

"""Run a Python step of a split plan: read its input, cut it into batches, run them on the workers
(pool.py) and put the results together in input order.

A step is what eidos.hal.parts.by_opaque cuts out: a MapBatches over a Scan, or a Project over a
Scan whose columns are input columns and udf calls over input columns (under a guard column:
`when(guard).then(udf(...))`). Any other plan given to the lane is run through the planner with
this lane forced, which cuts its steps out.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import tempfile
import time

import pyarrow as pa

from eidos.errors import ExecutionError
from eidos.hal.arrow import read_local
from eidos.ir import expr as E
from eidos.ir import nodes as N
from eidos.ir.render import function_name
from eidos.lanes.python_native import pool
from eidos.lanes.python_native.calls import Call, Failed

# Rows per batch, unless the lane is given batch_rows: about four batches per worker, within these.
MIN_BATCH_ROWS, MAX_BATCH_ROWS = 4096, 65536

_steps = itertools.count(1)


def _workers(lane) -> int:
    if lane.workers is not None:
        return lane.workers
    count = getattr(os, "process_cpu_count", None) or (lambda: len(os.sched_getaffinity(0)))
    return max(1, count() or 1)


def _threads(lane) -> bool:
    return lane.mode == "thread" or (lane.mode == "auto" and not pool.gil_enabled())


def how(lane) -> str:
    """How `lane` runs a step, for explain()."""
    n = _workers(lane)
    where = (f"{n} threads (the GIL is {'disabled' if not pool.gil_enabled() else 'enabled: mode thread'})"
             if _threads(lane) else f"{n} worker processes, the batches in shared memory")
    rows = f"{lane.batch_rows:,} rows" if lane.batch_rows else f"{MIN_BATCH_ROWS:,} to {MAX_BATCH_ROWS:,} rows"
    inline = "" if lane.timeout else "; a step of one batch runs in the calling thread"
    inline = "; all in the calling thread" if n == 1 and not lane.timeout else inline
    return (f"Python functions over batches of {rows} on {where}{inline}"
            + (f"; timeout {lane.timeout:g} s a step" if lane.timeout else ""))


def step(plan: N.Node) -> tuple[N.Scan, list[tuple[str, Call | None]]] | None:
    """The step `plan` is: its Scan, and each output column with the call computing it (None: read
    from the input as it is); None when `plan` is not a step."""
    if isinstance(plan, N.MapBatches) and isinstance(plan.input, N.Scan):
        return plan.input, [("", Call(plan.fn, function_name(plan.fn), schema=plan.output_schema))]
    if not (isinstance(plan, N.Project) and isinstance(plan.input, N.Scan)):
        return None
    out: list[tuple[str, Call | None]] = []
    for name, e in plan.columns:
        guard = None
        if (isinstance(e, E.Case) and len(e.branches) == 1 and isinstance(e.branches[0][0], E.Column)
                and isinstance(e.otherwise, E.Literal) and e.otherwise.value is None):
            guard, e = e.branches[0][0].name, e.branches[0][1]
        if isinstance(e, E.Column) and guard is None:
            out.append((name, None))
        elif isinstance(e, E.Udf) and all(isinstance(a, E.Column) for a in e.args):
            out.append((name, Call(e.fn, function_name(e.fn), tuple(a.name for a in e.args), e.return_dtype, guard)))
        else:
            return None
    return plan.input, out


def run(plan: N.Node, lane) -> pa.Table:
    """The result of `plan` on the python lane `lane` (its options: eidos.lanes.python_native.FreeLane)."""
    found = step(plan)
    if found is None:   # a whole plan: the planner cuts its steps out for this lane
        from eidos.hal.runner import run as run_plan

        return run_plan(plan, engine=lane.name, strict=True)
    scan, outputs = found
    table = read_local(scan.source, scan.columns)
    calls = [call for _, call in outputs if call is not None]
    results = _batches(table, calls, lane)
    if isinstance(plan, N.MapBatches):
        return pa.concat_tables(results[0]).cast(plan.schema.to_arrow())
    columns = iter(results)
    arrays = [table.column(e.name) if call is None else
              pa.chunked_array([c for t in next(columns) for c in t.column(0).chunks], call.dtype.to_arrow())
              for (name, call), (_, e) in zip(outputs, plan.columns)]
    return pa.Table.from_arrays(arrays, schema=plan.schema.to_arrow())


def _batches(table: pa.Table, calls: list[Call], options) -> list[list[pa.Table]]:
    """Each call's results over `table`, one table per batch, in order; `options`: the lane's."""
    workers = _workers(options)
    size = options.batch_rows or min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, math.ceil(table.num_rows / (4 * workers))))
    ranges = [(lo, min(lo + size, table.num_rows)) for lo in range(0, table.num_rows, size)] or [(0, 0)]
    tasks = [(k, b) for k in range(len(calls)) for b in range(len(ranges))]
    deadline = None if options.timeout is None else time.monotonic() + options.timeout
    folder = None
    if options.timeout is None and (workers == 1 or len(ranges) == 1):
        runner = pool.Inline(lambda task: calls[task[0]].run(_slice(table, ranges[task[1]])))
    elif _threads(options):
        runner = pool.Threads(min(workers, len(tasks)), lambda task: calls[task[0]].run(_slice(table, ranges[task[1]])))
    else:
        folder = tempfile.mkdtemp(prefix=f"eidos-python-{os.getpid()}-", dir=_shared_memory())
        data, files = _needed(table, calls), {}

        def batch_file(b: int) -> str:   # written when first handed out: the next while workers run
            if b not in files:
                files[b] = _write(os.path.join(folder, f"in-{b}.arrow"), _slice(data, ranges[b]))
            return files[b]

        runner = pool.Processes(min(workers, len(tasks)), next(_steps))
        tasks = [(calls[k], lambda b=b: batch_file(b), os.path.join(folder, f"{k}-{b}.arrow")) for k, b in tasks]
    try:
        out = pool.schedule(tasks, runner, deadline)
    except Failed as e:
        k, b = divmod(e.index, len(ranges))
        raise _error(e, calls[k], b, ranges) from e.__cause__
    except pool.TimedOut as e:
        k, b = divmod(e.task, len(ranges))
        stuck = getattr(runner, "stuck", [])
        raise ExecutionError(
            f"{calls[k].what} did not finish within the python lane's timeout of {options.timeout:g} s (batch "
            f"{b + 1} of {len(ranges)} was still running); its workers were stopped"
            + (f", but {len(stuck)} thread(s) running C code could not be" if stuck else "")) from None
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return [out[k * len(ranges):(k + 1) * len(ranges)] for k in range(len(calls))]


def _slice(table: pa.Table, bounds: tuple[int, int]) -> pa.Table:
    return table.slice(bounds[0], bounds[1] - bounds[0])


def _error(failed: Failed, call: Call, batch: int, ranges: list[tuple[int, int]]) -> ExecutionError:
    """The error of a failed call: the reference lane's words, then the batch and the row."""
    lo, hi = ranges[batch]
    where = f"batch {batch + 1} of {len(ranges)}: " + (f"rows {lo} to {hi - 1}" if hi > lo else "no rows")
    if failed.row is None:
        return ExecutionError(f"{failed.text} ({where} of its input)")
    return ExecutionError(f"{failed.text} (arguments {failed.arguments}; row {lo + failed.row} of its input, "
                          f"in {where})")


def _needed(table: pa.Table, calls: list[Call]) -> pa.Table:
    """The columns the calls read (for udfs: at least one, which carries the number of rows)."""
    if any(call.schema is not None for call in calls):
        return table
    names = list(dict.fromkeys(name for call in calls for name in call.columns))
    return table.select(names or table.column_names[:1])


def _write(path: str, table: pa.Table) -> str:
    """`table` (one batch of a step's input) as an Arrow IPC file at `path`, for a worker to map."""
    with pa.ipc.new_file(path, table.schema) as writer:
        for part in table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]:
            writer.write_batch(part)
    return path


def _shared_memory() -> str:
    """Where batches are handed to worker processes: /dev/shm (memory) where there is one."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()

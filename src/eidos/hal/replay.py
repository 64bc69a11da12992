"""A lane's run-time error in the user's terms, from the reference lane.

docs/semantics.md (section 17) promises, on every lane, the message the reference lane gives for an
error that depends on values: the value, the operation and the type, and the plan node, output column
and expression where it happened. Engines word their failures in their own encoding of the plan
(Polars' `literal` and `__eidos_a0`, DuckDB's `c1`). So when a lane whose errors do not say this
itself (`Lane.names_failing_values`) raises ExecutionError, the runner re-runs the plan on the
reference lane, only to get the message:

- the reference lane raises ExecutionError: its message is raised, word for word (the same on every
  lane), chained from the lane's error; the run's record (`ei.last_run()`) says which lane failed and
  that the reference lane re-ran the plan;
- the reference lane succeeds: the lane is wrong, and that is raised, with both outcomes in short;
  the reference lane's answer is never returned in the lane's place;
- the plan's input is over `limit()`: no re-run (the reference lane holds rows as Python objects,
  about 6 times their Arrow size, and reads about 7 MiB a second on a 2 vCPU machine); the lane's
  error is raised, saying that its message is the engine's and how to get the reference's.

Sources the reference lane cannot read (database tables) are read through the lane that failed, a
plain scan of the columns the plan uses, stopping at the same limit. A ResourceError (the budget) is
never re-run: the reference lane would need more memory, not less.
"""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError, ResourceError, shown
from eidos.hal import registry
from eidos.hal.cost import scanned_bytes
from eidos.hal.devices import memory_budget
from eidos.hal.lane import Lane
from eidos.ir import nodes as N
from eidos.ir.rewrite import map_inputs
from eidos.ir.sources import ArrowSource

# Input a re-run may read, at most: this, and no more than an eighth of the memory budget (the
# reference lane's rows take about 6 times their Arrow size; bench/RESULTS.md, "reference lane").
LIMIT = 64 * 2**20


def limit() -> int:
    return min(LIMIT, memory_budget() // 8)


class _Over(Exception):
    """The input is over the limit: no re-run."""


def explain(lane: Lane, plan: N.Node, error: ExecutionError) -> tuple[EidosError, str]:
    """The error to raise for `error`, which `lane` raised running `plan`, and what happened, for the
    run's record. The caller raises it `from error`."""
    if lane.names_failing_values or isinstance(error, ResourceError):
        return error, f"failed: {_gist(error)}"
    try:
        reference = registry.get("reference")
    except EidosError:
        reference = None
    if reference is None or not reference.is_available():
        return error, f"failed: {_gist(error)}"
    bound = limit()
    try:
        local = _readable(plan, lane, reference, bound)
    except _Over as over:
        note = (f"\n  (this is the {lane.name} engine's message: the reference lane, which names the value, "
                f"the operation and the column, re-runs only plans of up to {_mib(bound)} of input, and this "
                f"one reads {over}; run a part of the input with engine='reference' for its message)")
        return type(error)(f"{error}{note}"), f"failed: {_gist(error)}; not re-run ({over} of input)"
    except Exception as e:  # noqa: BLE001 - the input cannot be read again: the lane's own error stands
        return error, f"failed: {_gist(error)}; not re-run (reading its input again failed: {_gist(e)})"
    try:
        table = reference.execute(local)
    except ExecutionError as e:
        return type(e)(str(e)), f"failed: {_gist(error)}; the reference lane re-ran it for the message"
    except EidosError:
        return error, f"failed: {_gist(error)}"
    return (ExecutionError(f"{error}\n  (lane {lane.name!r} failed, but the reference lane ran the same plan "
                           f"without error, {_outcome(table)}: a bug in the {lane.name} lane, not in the plan)"),
            f"failed: {_gist(error)}; the reference lane ran it without error")


def _readable(plan: N.Node, lane: Lane, reference: Lane, bound: int) -> N.Node:
    """`plan` with every source the reference lane cannot read fetched through `lane` into memory;
    _Over when the input is over `bound`."""
    size = 0
    for node in plan.walk():
        if isinstance(node, N.Scan) and reference.can_read(node.source) is None:
            size += scanned_bytes(node)
    if size > bound:
        raise _Over(_mib(size))

    def visit(node: N.Node) -> N.Node:
        nonlocal size
        if not isinstance(node, N.Scan) or reference.can_read(node.source) is None:
            return map_inputs(node, visit)
        batches = []
        for batch in lane.execute_stream(node):
            size += batch.nbytes
            if size > bound:
                raise _Over(f"more than {_mib(bound)}")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=node.schema.to_arrow())
        return N.Scan(ArrowSource.of(table, node.schema, kind="replay"))

    return visit(plan)


def _outcome(table: pa.Table) -> str:
    rows = f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}"
    if not table.num_rows:
        return rows
    first = ", ".join(f"{shown(k)}={v!r}" for k, v in table.slice(0, 1).to_pylist()[0].items())
    return f"{rows}, the first: {first[:200]}"


def _gist(error: BaseException) -> str:
    return str(error).split("\n", 1)[0][:300]


def _mib(n: int | str) -> str:
    return n if isinstance(n, str) else f"{n / 2**20:.1f} MiB"

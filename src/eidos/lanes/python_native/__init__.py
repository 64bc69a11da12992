"""The free lane: runs the opaque Python functions of a plan (`udf` calls, `map_batches` steps) in
parallel over batches, with threads where the GIL is disabled (free-threaded CPython) and worker
processes otherwise, the batches in shared memory. The planner (rule 5) hands it only those steps,
as parts of the plan; the rest runs on the vector lane. docs/free-lane.md says more.
"""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import PlanError
from eidos.hal.lane import Lane
from eidos.hal.parts import opaque
from eidos.ir import nodes as N
from eidos.lanes.python_native.coverage import COVERAGE

MODES = ("auto", "process", "thread")


class FreeLane(Lane):
    """Options (register a configured lane under the same name to use them:
    `ei.register_backend("python", FreeLane(timeout=60))`):

    - `workers`: how many batches run at once (default: this process's CPUs; 1 runs them in the
      calling thread);
    - `mode`: "auto" (threads when the GIL is disabled, else processes), "process" or "thread";
    - `batch_rows`: rows per batch (default: about four batches per worker, 4,096 to 65,536 rows);
    - `timeout`: seconds a step may take (starting worker processes included); past them its workers
      are stopped and the run raises ExecutionError. With a timeout every batch runs on a worker,
      never in the calling thread.
    """

    name = "python"
    kind = "free"
    coverage = COVERAGE
    reads = frozenset({"local"})
    names_failing_values = True    # the function, the row, its arguments, the batch: calls.py, execute.py
    python_steps_only = True

    def __init__(self, workers: int | None = None, mode: str = "auto", batch_rows: int | None = None,
                 timeout: float | None = None):
        if mode not in MODES:
            raise PlanError(f"the python lane's mode is one of {', '.join(MODES)}, got {mode!r}")
        for what, value in (("workers", workers), ("batch_rows", batch_rows)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise PlanError(f"the python lane's {what} is a whole number of at least 1, got {value!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise PlanError(f"the python lane's timeout is a number of seconds above 0, got {timeout!r}")
        self.workers, self.mode, self.batch_rows, self.timeout = workers, mode, batch_rows, timeout

    def supports(self, plan: N.Node) -> list[str]:
        gaps = super().supports(plan)
        if not opaque(plan):
            gaps.append("a Python function to run: it runs only udf calls and map_batches steps, and this plan "
                        "calls none once optimized (a udf whose result nothing reads is dropped with its column)")
        return gaps

    def describe(self, plan: N.Node) -> list[str]:
        from eidos.lanes.python_native.execute import how

        return [f"python lane: {how(self)}"]

    def execute(self, plan: N.Node) -> pa.Table:
        from eidos.lanes.python_native.execute import run

        return run(plan, self)

"""The reference lane: pure Python, slow and literal; the oracle every other lane is tested against."""

from __future__ import annotations

import pyarrow as pa

from eidos.hal.lane import Lane
from eidos.ir import nodes as N
from eidos.lanes.reference.coverage import COVERAGE


class ReferenceLane(Lane):
    """Runs any plan over local sources exactly as docs/semantics.md says."""

    name = "reference"
    kind = "reference"
    coverage = COVERAGE
    reads = frozenset({"local"})
    names_failing_values = True   # its messages are the ones docs/semantics.md promises

    def execute(self, plan: N.Node) -> pa.Table:
        from eidos.lanes.reference.execute import execute

        return execute(plan)

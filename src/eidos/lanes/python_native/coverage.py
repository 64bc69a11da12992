"""The python lane runs only the opaque Python functions of a plan: `udf` calls and `map_batches`
steps, in parallel over batches. The planner cuts each of them out of the plan as a part for it
(eidos.hal.parts.by_opaque) and runs the rest (scans, filters, joins, the other parts of each
expression) on the lane rule 5 chooses, with `engine="python"` too: so every node, function and
type below is marked, for a plan that calls a Python function. A plan that calls none is not for
this lane (`engine="python"` on it is an UnsupportedError).
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage

COVERAGE = Coverage.everything()

"""What the Polars lane covers, as data: the whole IR.

Every node, function, dtype and join kind: where Polars' own rule differs from
docs/semantics.md the translation emits what agrees (see translate.py), and the
few rules Polars has no form for (float or text -> decimal, text -> timestamp,
decimal round to negative places) run row by row with ir.evaluate's own functions.
tests/hal/test_coverage.py holds this table to `translate.translated()`, so a name
added to the IR without a Polars rule fails there until it gets one or is left out here.
"""

from __future__ import annotations

from eidos.hal.coverage import Coverage

# Polars' decimal -> float cast is not the exact value rounded once; the median of decimals is left out.
COVERAGE = Coverage.everything().without(typed=("median Decimal*", "quantile Decimal*"))

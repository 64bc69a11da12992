"""The reference lane covers the whole IR: every node, function, dtype and join kind."""

from __future__ import annotations

from eidos.hal.coverage import Coverage

COVERAGE = Coverage.everything()

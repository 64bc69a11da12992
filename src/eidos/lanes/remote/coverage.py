"""The remote lane covers the whole IR: the service runs each plan on its own lanes (never this one
again), the reference lane at the least, which covers everything. Whether a plan's Python functions
may run there is the service's trust settings' call (eidos.hal.trust), known only when it reads the
plan: a function it has not allowed comes back as the PlanError it raised."""

from __future__ import annotations

from eidos.hal.coverage import Coverage

COVERAGE = Coverage.everything()

"""The cluster lane covers the whole IR: each piece of a plan runs inside a Ray worker on the lane the
planner picks there among the machine's own lanes, the reference lane at the least, which covers
everything. It reads local sources: in-memory Arrow data (put in Ray's object store) and parquet and
CSV files, which its workers read themselves, so every node must see them at the same path. A source
in a database is read by that database's lane first (the plan is split) and handed over as Arrow."""

from __future__ import annotations

from eidos.hal.coverage import Coverage

COVERAGE = Coverage.everything()

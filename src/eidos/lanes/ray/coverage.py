"""The cluster lane covers the whole IR: each piece of a plan runs inside a Ray worker on the lane the
planner picks there among the machine's own lanes, the reference lane at the least, which covers
everything. It reads local sources: in-memory Arrow data (put in Ray's object store) and parquet, CSV,
NDJSON and Arrow IPC files, which its workers read themselves, so every node must see them at the same
path (or in the same object store, s3:// or gs://, with the source's storage options). A source
in a database is read by that database's lane first (the plan is split) and handed over as Arrow."""

from __future__ import annotations

from eidos.hal.coverage import Coverage

COVERAGE = Coverage.everything()

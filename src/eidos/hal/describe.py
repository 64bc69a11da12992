"""Describing database sources at build time, through the lane that reads them."""

from __future__ import annotations

from eidos.errors import BackendUnavailable
from eidos.hal import registry, sql_guard
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource

INSTALL_HINT = "pip install 'eidos[sql]'"


def describe_sql(source: SqlSource) -> tuple[Schema, int | None]:
    """Schema (and a row estimate) of a database table or query, from the lane that reads its scheme."""
    sql_guard.check(source)   # before any lane sends the plan's SQL to a database
    scheme = source.scheme
    candidates = [lane for lane in registry.lanes()
                  if scheme in lane.reads and hasattr(lane, "describe_source")]
    for lane in candidates:
        if lane.is_available():
            return lane.describe_source(source)
    if candidates:
        reasons = "; ".join(f"{lane.name}: {lane.is_available().reason}" for lane in candidates)
        raise BackendUnavailable(f"no available lane reads {scheme}:// sources ({reasons})")
    raise BackendUnavailable(f"no lane reads {scheme}:// sources ({source.uri}); "
                             f"the SQL lanes do: {INSTALL_HINT}")

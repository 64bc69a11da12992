"""Run a Flow on the reference lane directly and look at the result as Python values."""

from __future__ import annotations

import pyarrow as pa

from eidos.lanes.reference import ReferenceLane

LANE = ReferenceLane()


def run(flow) -> pa.Table:
    table = LANE.execute(flow.plan)
    assert table.schema == flow.schema.to_arrow(), (table.schema, flow.schema)
    return table


def cols(flow) -> dict[str, list]:
    return run(flow).to_pydict()


def column(flow, name: str | None = None) -> list:
    out = cols(flow)
    return out[name] if name is not None else next(iter(out.values()))


def is_nan(x) -> bool:
    return isinstance(x, float) and x != x

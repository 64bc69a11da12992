"""Arrow interchange: make a lane's result match the plan's schema exactly."""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import ExecutionError
from eidos.ir.schema import Schema


def conform(data: pa.Table | pa.RecordBatch, schema: Schema, lane: str) -> pa.Table | pa.RecordBatch:
    """`data` with the plan's column names and Arrow types (zero-copy when they already match)."""
    target = schema.to_arrow()
    if data.schema.names != target.names:
        raise ExecutionError(f"lane {lane!r} returned columns {data.schema.names}, expected {target.names}")
    if data.schema.equals(target):
        return data
    try:
        return data.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ExecutionError(f"lane {lane!r} returned types {data.schema.types} that do not convert to "
                             f"the plan's {target.types}: {e}") from e

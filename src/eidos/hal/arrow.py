"""Arrow interchange: make a lane's result match the plan's schema exactly."""

from __future__ import annotations

import pyarrow as pa

from eidos.errors import EidosError, ExecutionError
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


def batch_result(out: object, expected: Schema, fn_name: str) -> pa.Table | pa.RecordBatch:
    """What a map_batches function returned, checked against its declared schema and cast to it
    (Arrow types that map to the same eidos types are accepted); every lane checks it this way."""
    if not isinstance(out, (pa.RecordBatch, pa.Table)):
        raise ExecutionError(f"map_batches function {fn_name} returned {type(out).__name__}; "
                             "it must return a pyarrow.RecordBatch")
    try:
        got, why = Schema.from_arrow(out.schema), ""
    except EidosError as e:
        got, why = None, str(e)
    if got != expected:
        shown = _fields(got) if got is not None else f"{out.schema} ({why})"
        raise ExecutionError(f"map_batches function {fn_name} returned the wrong schema\n"
                             f"  expected: {_fields(expected)}\n  got:      {shown}")
    target = expected.to_arrow()
    return out if out.schema == target else out.cast(target)


def _fields(s: Schema) -> str:
    return ", ".join(f"{n}: {t}" for n, t in s.items()) or "(no columns)"
